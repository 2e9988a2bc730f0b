// Chrome trace JSON writer. Written by hand (not through a JSON library) because traces
// reach millions of events; every number is printed with fixed precision so the same run
// gives byte-identical files.
#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "tilepipe/prof.h"

namespace tilepipe::prof {
namespace {

/// msprof track names.
const char* track_name(ir::Pipe p) {
  switch (p) {
    case ir::Pipe::S:
      return "SCALAR";
    case ir::Pipe::MTE1:
      return "MTE1";
    case ir::Pipe::MTE2:
      return "MTE2";
    case ir::Pipe::MTE3:
      return "MTE3";
    case ir::Pipe::M:
      return "CUBE";
    case ir::Pipe::FIX:
      return "FIXP";
    case ir::Pipe::V:
      return "VECTOR";
  }
  return "?";
}

constexpr int kLanes = 16;             // sub-tracks per pipe
constexpr int kFlagLane = kLanes - 1;  // flag sets/waits of a pipe get a track of their own
int tid_of(ir::Pipe p, int lane) {
  return static_cast<int>(p) * kLanes + lane;
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

struct Ev {
  double ts;  // cycles
  int order;  // M < C < X < s/f at equal time, then insertion
  std::string text;
};

}  // namespace

void write_chrome_trace(std::ostream& out, const Recorder& rec, const sim::SimResult& r,
                        const lower::LoweredProgram& prog, const ChipConfig& chip) {
  const double us = chip.us_per_cycle();
  std::vector<Ev> evs;
  evs.reserve(rec.instrs().size() + 2 * rec.flags().size() + 8 * r.cores.size());
  auto ts = [&](double cycles) { return fmt::format("{:.6f}", cycles * us); };

  // Slices on one track must nest: assign each op the first sub-track free at its start.
  struct Slice {
    const sim::InstrEvent* e;
    int lane;
  };
  std::vector<Slice> slices;
  for (const auto& e : rec.instrs()) slices.push_back({&e, 0});
  std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    if (a.e->core != b.e->core) return a.e->core < b.e->core;
    if (a.e->pipe != b.e->pipe) return a.e->pipe < b.e->pipe;
    return a.e->start < b.e->start;
  });
  std::vector<double> lane_end(kLanes, -1);
  int cur_core = -1;
  ir::Pipe cur_pipe = ir::Pipe::S;
  std::vector<std::vector<int>> lanes_used(r.cores.size(), std::vector<int>(ir::kNumPipes, 0));
  for (auto& s : slices) {
    if (s.e->core != cur_core || s.e->pipe != cur_pipe) {
      std::fill(lane_end.begin(), lane_end.end(), -1);
      cur_core = s.e->core;
      cur_pipe = s.e->pipe;
    }
    int lane = 0;
    while (lane + 1 < kFlagLane && lane_end[static_cast<size_t>(lane)] > s.e->start) ++lane;
    lane_end[static_cast<size_t>(lane)] = s.e->end;
    s.lane = lane;
    auto& used = lanes_used[static_cast<size_t>(s.e->core)][static_cast<size_t>(s.e->pipe)];
    used = std::max(used, lane + 1);
  }

  // Metadata: process and thread names.
  for (size_t c = 0; c < r.cores.size(); ++c) {
    const auto& core = r.cores[c];
    evs.push_back(
        {-1, 0,
         fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"{}"}}}})", c,
                     core.name)});
    evs.push_back(
        {-1, 0,
         fmt::format(
             R"({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})", c,
             c)});
    for (int p = 0; p < ir::kNumPipes; ++p) {
      bool has = core.pipes[static_cast<size_t>(p)].instructions > 0;
      int lanes = std::max(has ? 1 : 0, lanes_used[c][static_cast<size_t>(p)]);
      if (lanes == 0) continue;
      for (int l = 0; l <= lanes; ++l) {
        if (l == lanes) l = kFlagLane;
        std::string name = track_name(static_cast<ir::Pipe>(p));
        if (l == kFlagLane)
          name += " flags";
        else if (l)
          name += fmt::format(" #{}", l);
        evs.push_back(
            {-1, 0,
             fmt::format(
                 R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"{}"}}}})", c,
                 tid_of(static_cast<ir::Pipe>(p), l), name)});
      }
    }
    // On-chip buffer allocation (static in this build: set once at kernel start).
    const auto& cp = core.kind == ir::CoreKind::C ? prog.aic : prog.aiv;
    for (int s = 1; s < 6; ++s) {
      if (cp.scope_bytes[static_cast<size_t>(s)] == 0) continue;
      evs.push_back(
          {0, 1,
           fmt::format(
               R"({{"name":"{} bytes allocated","ph":"C","ts":{},"pid":{},"args":{{"bytes":{}}}}})",
               ir::to_string(static_cast<ir::Scope>(s)), ts(0), c,
               cp.scope_bytes[static_cast<size_t>(s)])});
    }
  }

  for (const auto& s : slices) {
    const auto& e = *s.e;
    evs.push_back(
        {e.start, 2,
         fmt::format(
             R"({{"name":"{}","ph":"X","ts":{},"dur":{},"pid":{},"tid":{},"args":{{"line":"{}","bytes":{},"flops":{:.0f},"cycle":{:.2f},"issue":{:.2f},"busy_cycles":{:.2f}}}}})",
             esc(e.op->name), ts(e.start), fmt::format("{:.6f}", (e.end - e.start) * us), e.core,
             tid_of(e.pipe, s.lane), esc(e.op->loc.str()), e.bytes, e.flops, e.start, e.issue,
             e.occupancy)});
  }

  // Flags: an instant slice for the set and for the wait on the pipe's flag track (a blocked
  // scalar unit shows its whole wait on SCALAR), joined by a flow arrow.
  int flow = 0;
  for (const auto& f : rec.flags()) {
    ++flow;
    std::string cat = f.cross ? "cross_flag" : "flag";
    int set_tid = tid_of(f.set_pipe, f.set_pipe == ir::Pipe::S ? 0 : kFlagLane);
    int wait_tid = tid_of(f.wait_pipe, f.wait_pipe == ir::Pipe::S ? 0 : kFlagLane);
    double wait_begin =
        f.wait_pipe == ir::Pipe::S ? std::min(f.wait_issue, f.wait_time) : f.wait_time;
    evs.push_back(
        {f.set_time, 2,
         fmt::format(
             R"({{"name":"{}","ph":"X","ts":{},"dur":0,"pid":{},"tid":{},"args":{{"line":"{}","cycle":{:.2f}}}}})",
             esc(f.set_op->name), ts(f.set_time), f.set_core, set_tid, esc(f.set_op->loc.str()),
             f.set_time)});
    evs.push_back(
        {f.set_time, 3,
         fmt::format(R"({{"name":"{}","cat":"{}","ph":"s","id":{},"ts":{},"pid":{},"tid":{}}})",
                     cat, cat, flow, ts(f.set_time), f.set_core, set_tid)});
    evs.push_back(
        {wait_begin, 2,
         fmt::format(
             R"({{"name":"{}","ph":"X","ts":{},"dur":{:.6f},"pid":{},"tid":{},"args":{{"line":"{}","cycle":{:.2f},"waited_cycles":{:.2f}}}}})",
             esc(f.wait_op->name), ts(wait_begin), (f.wait_time - wait_begin) * us, f.wait_core,
             wait_tid, esc(f.wait_op->loc.str()), f.wait_time,
             std::max(0.0, f.wait_time - f.wait_issue))});
    evs.push_back(
        {f.wait_time, 3,
         fmt::format(
             R"({{"name":"{}","cat":"{}","ph":"f","bp":"e","id":{},"ts":{},"pid":{},"tid":{}}})",
             cat, cat, flow, ts(f.wait_time), f.wait_core, wait_tid)});
  }

  std::stable_sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    return a.order < b.order;
  });
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"tool\":\"tilepipe\",\"kernel\":\""
      << esc(prog.name) << "\",\"chip\":\"" << esc(chip.name)
      << "\",\"clock_mhz\":" << fmt::format("{:.1f}", chip.clock_mhz)
      << ",\"cycles\":" << fmt::format("{:.2f}", r.cycles)
      << ",\"truncated\":" << (rec.truncated() ? "true" : "false") << "},\n\"traceEvents\":[\n";
  for (size_t i = 0; i < evs.size(); ++i) {
    out << evs[i].text << (i + 1 < evs.size() ? ",\n" : "\n");
  }
  out << "]}\n";
}

}  // namespace tilepipe::prof

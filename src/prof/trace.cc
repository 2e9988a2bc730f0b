// Chrome trace JSON writer, streamed (through zlib: gzip'd or plain) as the simulator
// reports events. Written by hand (not through a JSON library) because traces reach
// hundreds of millions of events. Compact on purpose (docs/cli.md#trace-file): no
// indentation, timestamps in integer nanoseconds printed as microseconds with at most three
// decimals (Perfetto's own resolution), only non-zero args, track names once at the end.
#include <fmt/format.h>
#include <zlib.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

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

/// `v` with at most two decimals and no trailing zeros ("12", "12.5").
std::string num(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Nanoseconds as microseconds, with at most three decimals and no trailing zeros.
std::string us_text(int64_t ns) {
  if (ns % 1000 == 0) return std::to_string(ns / 1000);
  std::string s = fmt::format("{}.{:03d}", ns / 1000, ns % 1000);
  while (s.back() == '0') s.pop_back();
  return s;
}

gzFile as_gz(void* p) {
  return static_cast<gzFile>(p);
}

}  // namespace

/// Sub-tracks in use on one simulated core: per pipe, where each lane's slices end.
struct TraceWriter::Track {
  std::array<std::array<double, kFlagLane>, ir::kNumPipes> lane_end;
  std::array<int, ir::kNumPipes> lanes{};   // lanes used per pipe
  std::array<bool, ir::kNumPipes> flags{};  // the pipe's flag track is used
  bool used = false;
  Track() {
    for (auto& l : lane_end) l.fill(-1);
  }
};

TraceWriter::TraceWriter(const std::string& path, TraceOptions opts, const ChipConfig& chip)
    : path_(path), opts_(std::move(opts)), chip_(chip) {
  // A temporary of this process in the same directory, renamed by finish(): an
  // interrupted run never leaves a truncated trace.
  static int serial = 0;
  tmp_ = fmt::format("{}.tmp.{}.{}", path, static_cast<long>(::getpid()), serial++);
  // "T": transparent (plain JSON) through the same interface. zlib writes a gzip header
  // without a time stamp, so the same run gives a byte-identical file.
  gz_ = gzopen(tmp_.c_str(), ends_with(path, ".gz") ? "wb6" : "wbT");
  if (!gz_)
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  gzbuffer(as_gz(gz_), 1 << 20);
  buf_ = "{\"traceEvents\":[";
}

TraceWriter::~TraceWriter() {
  if (!gz_) return;
  gzclose(as_gz(gz_));
  std::remove(tmp_.c_str());
}

void TraceWriter::bind(const lower::LoweredProgram& prog) {
  // SimResult::cores: per AI core its AIC then AIV0, AIV1, each only if it has code.
  const int per_ai =
      (prog.aic.empty() ? 0 : 1) + (prog.aiv.empty() ? 0 : std::min(chip_.aiv_per_core, 2));
  const int n = static_cast<int>(std::min<int64_t>(chip_.ai_cores, prog.block_num)) * per_ai;
  core_kept_.assign(static_cast<size_t>(n), opts_.ai_cores.empty());
  for (int ai : opts_.ai_cores)
    for (int i = ai * per_ai; i < (ai + 1) * per_ai && i < n; ++i)
      core_kept_[static_cast<size_t>(i)] = true;
}

bool TraceWriter::keep(int core, double start, double end) const {
  if (end < opts_.window_begin || start >= opts_.window_end) return false;
  return static_cast<size_t>(core) >= core_kept_.size() ? opts_.ai_cores.empty()
                                                        : core_kept_[static_cast<size_t>(core)];
}

TraceWriter::Track& TraceWriter::track(int core) {
  if (tracks_.size() <= static_cast<size_t>(core)) tracks_.resize(static_cast<size_t>(core) + 1);
  auto& t = tracks_[static_cast<size_t>(core)];
  t.used = true;
  return t;
}

void TraceWriter::emit(const std::string& event) {
  if (events_++ > 0) buf_ += ",\n";
  buf_ += event;
  if (buf_.size() < (1 << 20)) return;
  if (gzwrite(as_gz(gz_), buf_.data(), static_cast<unsigned>(buf_.size())) !=
      static_cast<int>(buf_.size()))
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path_, std::strerror(errno)));
  buf_.clear();
}

int64_t TraceWriter::ns(double cycles) const {
  return static_cast<int64_t>(std::llround(cycles * 1000.0 / chip_.clock_mhz));
}

std::string TraceWriter::ts(double cycles) const {
  return us_text(ns(cycles));
}

std::string TraceWriter::dur(double start, double end) const {
  // Both ends rounded to whole nanoseconds, so a slice's end rounds the same way as the next
  // one's start and nesting on a track survives the rounding.
  return us_text(ns(end) - ns(start));
}

void TraceWriter::instr(const sim::InstrEvent& e) {
  if (!keep(e.core, e.start, e.end)) return;
  // Slices on one track must nest: the op goes to the first sub-track whose slices have all
  // ended by its start (pipes are in order, so this is the first free one).
  auto& t = track(e.core);
  const auto p = static_cast<size_t>(e.pipe);
  int lane = 0;
  while (lane + 1 < kFlagLane && t.lane_end[p][static_cast<size_t>(lane)] > e.start) ++lane;
  auto& end = t.lane_end[p][static_cast<size_t>(lane)];
  end = std::max(end, e.end);
  t.lanes[p] = std::max(t.lanes[p], lane + 1);
  std::string args = fmt::format(R"("line":"{}")", esc(e.op->loc.str()));
  if (e.bytes) args += fmt::format(R"(,"bytes":{})", e.bytes);
  if (e.flops > 0) args += fmt::format(R"(,"flops":{:.0f})", e.flops);
  emit(fmt::format(R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":"{}","args":{{{}}}}})",
                   e.core, tid_of(e.pipe, lane), ts(e.start), dur(e.start, e.end), esc(e.op->name),
                   args));
}

void TraceWriter::flag(const sim::FlagEvent& f) {
  // An instant slice for the set and for the wait on the pipe's flag track (a blocked scalar
  // unit shows its whole wait on SCALAR), joined by a flow arrow.
  double wait_begin =
      f.wait_pipe == ir::Pipe::S ? std::min(f.wait_issue, f.wait_time) : f.wait_time;
  bool set_kept = keep(f.set_core, f.set_time, f.set_time);
  bool wait_kept = keep(f.wait_core, wait_begin, f.wait_time);
  if (!set_kept && !wait_kept) return;
  auto tid = [&](int core, ir::Pipe p) {
    auto& t = track(core);
    if (p == ir::Pipe::S) {
      t.lanes[static_cast<size_t>(p)] = std::max(t.lanes[static_cast<size_t>(p)], 1);
      return tid_of(p, 0);
    }
    t.flags[static_cast<size_t>(p)] = true;
    return tid_of(p, kFlagLane);
  };
  const char* cat = f.cross ? "cross_flag" : "flag";
  const bool flow = set_kept && wait_kept;
  if (flow) ++flows_;
  if (set_kept) {
    int t = tid(f.set_core, f.set_pipe);
    emit(fmt::format(
        R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":0,"name":"{}","args":{{"line":"{}"}}}})",
        f.set_core, t, ts(f.set_time), esc(f.set_op->name), esc(f.set_op->loc.str())));
    if (flow)
      emit(fmt::format(R"({{"ph":"s","pid":{},"tid":{},"ts":{},"id":{},"name":"{}","cat":"{}"}})",
                       f.set_core, t, ts(f.set_time), flows_, cat, cat));
  }
  if (wait_kept) {
    int t = tid(f.wait_core, f.wait_pipe);
    emit(fmt::format(
        R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":"{}","args":{{"line":"{}","waited_cycles":{}}}}})",
        f.wait_core, t, ts(wait_begin), dur(wait_begin, f.wait_time), esc(f.wait_op->name),
        esc(f.wait_op->loc.str()), num(std::max(0.0, f.wait_time - f.wait_issue))));
    if (flow)
      emit(fmt::format(
          R"({{"ph":"f","bp":"e","pid":{},"tid":{},"ts":{},"id":{},"name":"{}","cat":"{}"}})",
          f.wait_core, t, ts(f.wait_time), flows_, cat, cat));
  }
}

void TraceWriter::finish(const sim::SimResult& r, const lower::LoweredProgram& prog) {
  // Metadata: process and thread names of the tracks used, buffer allocation counters
  // (static in this build: set once at kernel start, shown from the window's start).
  for (size_t c = 0; c < r.cores.size() && c < tracks_.size(); ++c) {
    const auto& t = tracks_[c];
    if (!t.used) continue;
    const auto& core = r.cores[c];
    emit(fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":"{}"}}}})", c,
                     core.name));
    emit(fmt::format(
        R"({{"ph":"M","pid":{},"name":"process_sort_index","args":{{"sort_index":{}}}}})", c, c));
    for (int p = 0; p < ir::kNumPipes; ++p) {
      const auto pipe = static_cast<ir::Pipe>(p);
      auto thread = [&](int lane, const std::string& name) {
        emit(fmt::format(
            R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":"{}"}}}})", c,
            tid_of(pipe, lane), name));
      };
      for (int l = 0; l < t.lanes[static_cast<size_t>(p)]; ++l)
        thread(l, l ? fmt::format("{} #{}", track_name(pipe), l) : track_name(pipe));
      if (t.flags[static_cast<size_t>(p)])
        thread(kFlagLane, fmt::format("{} flags", track_name(pipe)));
    }
    const auto& cp = core.kind == ir::CoreKind::C ? prog.aic : prog.aiv;
    for (int s = 1; s < 6; ++s) {
      if (cp.scope_bytes[static_cast<size_t>(s)] == 0) continue;
      emit(fmt::format(
          R"({{"ph":"C","pid":{},"ts":{},"name":"{} bytes allocated","args":{{"bytes":{}}}}})", c,
          ts(opts_.window_begin), ir::to_string(static_cast<ir::Scope>(s)),
          cp.scope_bytes[static_cast<size_t>(s)]));
    }
  }
  std::string cores =
      opts_.ai_cores.empty() ? "\"all\"" : fmt::format("[{}]", fmt::join(opts_.ai_cores, ","));
  buf_ += fmt::format(
      "],\n\"displayTimeUnit\":\"ns\",\"otherData\":{{\"tool\":\"tilepipe\",\"kernel\":\"{}\","
      "\"chip\":\"{}\",\"clock_mhz\":{},\"cycles\":{},\"window_cycles\":[{},{}],"
      "\"ai_cores\":{}}}}}\n",
      esc(prog.name), esc(chip_.name), num(chip_.clock_mhz), num(r.cycles), num(opts_.window_begin),
      std::isfinite(opts_.window_end) ? num(opts_.window_end) : num(r.cycles), cores);
  bool ok = gzwrite(as_gz(gz_), buf_.data(), static_cast<unsigned>(buf_.size())) ==
            static_cast<int>(buf_.size());
  ok = gzclose(as_gz(gz_)) == Z_OK && ok;
  gz_ = nullptr;
  if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp_.c_str());
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path_, why));
  }
}

}  // namespace tilepipe::prof

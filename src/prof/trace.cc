// The trace writer: what a trace records of a run, whatever its encoding. It selects the
// events (window, AI cores), lays slices out on tracks (a thread per pipe, sub-tracks where
// in-flight ops overlap, a flags thread per pipe), rounds times to whole nanoseconds, turns
// flag hand-offs into a set and a wait, and hands all of it to the encoding the file name
// asks for (trace_format.h): Chrome trace JSON (trace_json.cc) or Perfetto's protobuf
// (perfetto.cc).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include "tilepipe/prof.h"
#include "trace_format.h"

namespace tilepipe::prof {
namespace {

using trace::kFlagLane;

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

std::string thread_name(ir::Pipe p, int lane) {
  if (lane == kFlagLane) return fmt::format("{} flags", track_name(p));
  return lane ? fmt::format("{} #{}", track_name(p), lane) : track_name(p);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

constexpr std::array<const char*, 2> kPerfettoExtensions = {".pftrace", ".perfetto-trace"};

std::unique_ptr<trace::Encoder> encoder_for(const std::string& path) {
  if (std::string why = trace_name_problem(path); !why.empty())
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path, why));
  for (const char* ext : kPerfettoExtensions)
    if (ends_with(path, ext)) return trace::perfetto_encoder(path);
  return trace::json_encoder(path, ends_with(path, ".gz"));
}

}  // namespace

std::string trace_name_problem(const std::string& path) {
  for (const char* ext : kPerfettoExtensions)
    if (ends_with(path, std::string(ext) + ".gz"))
      return fmt::format(
          "a Perfetto protobuf trace is compressed inside already; drop the '.gz', e.g. "
          "--trace {}",
          path.substr(0, path.size() - 3));
  return "";
}

/// Tracks in use on one simulated core: per pipe, where each sub-track's slices end.
struct TraceWriter::Track {
  std::array<std::vector<double>, ir::kNumPipes> lane_end;  // per sub-track used
  std::array<bool, ir::kNumPipes> flags{};                  // the pipe's flag track is used
  std::vector<bool> announced;                              // by tid
  bool used = false;
};

TraceWriter::TraceWriter(const std::string& path, TraceOptions opts, const ChipConfig& chip)
    : opts_(std::move(opts)), chip_(chip), enc_(encoder_for(path)) {}

TraceWriter::~TraceWriter() = default;

int64_t TraceWriter::events() const {
  return enc_->events();
}

void TraceWriter::bind(const lower::LoweredProgram& prog) {
  // SimResult::cores: per AI core its AIC then AIV0, AIV1, each only if it has code.
  const int aivs = prog.aiv.empty() ? 0 : chip_.aiv_per_core;
  const int per_ai = (prog.aic.empty() ? 0 : 1) + aivs;
  const int n = static_cast<int>(std::min<int64_t>(chip_.ai_cores, prog.block_num)) * per_ai;
  core_kept_.assign(static_cast<size_t>(n), opts_.ai_cores.empty());
  for (int ai : opts_.ai_cores)
    for (int i = ai * per_ai; i < (ai + 1) * per_ai && i < n; ++i)
      core_kept_[static_cast<size_t>(i)] = true;
  core_names_.clear();
  for (int i = 0; i < n; ++i) {
    const int ai = i / per_ai, r = i % per_ai - (prog.aic.empty() ? 0 : 1);
    core_names_.push_back(sim::core_name(ai, r < 0 ? ir::CoreKind::C : ir::CoreKind::V, r));
  }
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

int TraceWriter::thread(int core, ir::Pipe pipe, int lane) {
  auto& t = track(core);
  const int tid = trace::tid_of(pipe, lane);
  if (lane == kFlagLane) {
    t.flags[static_cast<size_t>(pipe)] = true;
  } else {
    auto& ends = t.lane_end[static_cast<size_t>(pipe)];
    if (ends.size() <= static_cast<size_t>(lane)) ends.resize(static_cast<size_t>(lane) + 1, -1);
  }
  if (t.announced.size() <= static_cast<size_t>(tid))
    t.announced.resize(static_cast<size_t>(tid) + 1);
  if (!t.announced[static_cast<size_t>(tid)]) {
    t.announced[static_cast<size_t>(tid)] = true;
    enc_->track(core,
                static_cast<size_t>(core) < core_names_.size()
                    ? core_names_[static_cast<size_t>(core)]
                    : fmt::format("core{}", core),
                tid, thread_name(pipe, lane));
  }
  return tid;
}

int64_t TraceWriter::ns(double cycles) const {
  // Both ends of a slice are rounded, so a slice's end rounds the same way as the next one's
  // start and nesting on a track survives the rounding.
  return static_cast<int64_t>(std::llround(cycles * 1000.0 / chip_.clock_mhz));
}

void TraceWriter::instr(const sim::InstrEvent& e) {
  if (!keep(e.core, e.start, e.end)) return;
  ++kept_;
  // Slices on one track must nest: the op goes to the first sub-track whose slices have all
  // ended by its start (pipes are in order, so this is the first free one), a new one if
  // none has (as many as are in flight at once).
  const auto& ends = track(e.core).lane_end[static_cast<size_t>(e.pipe)];
  int lane = 0;
  while (static_cast<size_t>(lane) < ends.size() && ends[static_cast<size_t>(lane)] > e.start)
    ++lane;
  const int tid = thread(e.core, e.pipe, lane);
  auto& end = track(e.core).lane_end[static_cast<size_t>(e.pipe)][static_cast<size_t>(lane)];
  end = std::max(end, e.end);
  enc_->slice({.core = e.core,
               .tid = tid,
               .ts = ns(e.start),
               .end = ns(e.end),
               .op = e.op,
               .bytes = e.bytes,
               .flops = e.flops});
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
    return thread(core, p, p == ir::Pipe::S ? 0 : kFlagLane);
  };
  trace::Slice set, wait;
  if (set_kept)
    set = {.core = f.set_core,
           .tid = tid(f.set_core, f.set_pipe),
           .ts = ns(f.set_time),
           .end = ns(f.set_time),
           .op = f.set_op};
  if (wait_kept)
    wait = {.core = f.wait_core,
            .tid = tid(f.wait_core, f.wait_pipe),
            .ts = ns(wait_begin),
            .end = ns(f.wait_time),
            .op = f.wait_op,
            // Two decimals, rounded half to even as printf does.
            .waited = std::nearbyint(std::max(0.0, f.wait_time - f.wait_issue) * 100) / 100};
  enc_->flag(set_kept ? &set : nullptr, wait_kept ? &wait : nullptr, f.cross);
}

void TraceWriter::finish(const sim::SimResult& r, const lower::LoweredProgram& prog) {
  // Names of the tracks used and buffer allocation counters (static in this build: set once
  // at kernel start, shown from the window's start).
  trace::RunFacts facts;
  for (size_t c = 0; c < r.cores.size() && c < tracks_.size(); ++c) {
    const auto& t = tracks_[c];
    if (!t.used) continue;
    const auto& core = r.cores[c];
    auto& fc = facts.cores.emplace_back();
    fc.index = static_cast<int>(c);
    fc.name = core.name;
    for (int p = 0; p < ir::kNumPipes; ++p) {
      const auto pipe = static_cast<ir::Pipe>(p);
      for (int l = 0; l < static_cast<int>(t.lane_end[static_cast<size_t>(p)].size()); ++l)
        fc.threads.push_back({trace::tid_of(pipe, l), thread_name(pipe, l)});
      if (t.flags[static_cast<size_t>(p)])
        fc.threads.push_back({trace::tid_of(pipe, kFlagLane), thread_name(pipe, kFlagLane)});
    }
    const auto& cp = core.kind == ir::CoreKind::C ? prog.aic : prog.aiv;
    for (int s = 1; s < 6; ++s)
      if (cp.scope_bytes[static_cast<size_t>(s)] != 0)
        fc.counters.push_back(
            {fmt::format("{} bytes allocated", ir::to_string(static_cast<ir::Scope>(s))),
             cp.scope_bytes[static_cast<size_t>(s)]});
  }
  facts.counter_ts = ns(opts_.window_begin);
  facts.kernel = prog.name;
  facts.chip = chip_.name;
  facts.clock_mhz = chip_.clock_mhz;
  facts.cycles = r.cycles;
  facts.window_begin = opts_.window_begin;
  facts.window_end = std::isfinite(opts_.window_end) ? opts_.window_end : r.cycles;
  facts.ai_cores = opts_.ai_cores;
  enc_->finish(facts);
}

}  // namespace tilepipe::prof

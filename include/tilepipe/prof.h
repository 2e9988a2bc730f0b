// Profiling: what a simulated run did, in msprof's vocabulary.
//
// A Recorder attaches to a run as a sim::Observer; it aggregates per source line and
// (optionally) keeps events for a Chrome/Perfetto trace. summarize() turns a SimResult into
// per-pipe busy %, the bound pipe and verdict, idle reasons and buffer use.
#pragma once

#include <iosfwd>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tilepipe/chip.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"

namespace tilepipe::prof {

struct TraceOptions {
  bool keep_events = false;
  double window_begin = 0;  // cycles: only events overlapping [begin, end) are kept
  double window_end = std::numeric_limits<double>::infinity();
  size_t max_events = 2'000'000;  // past this the trace is truncated (and says so)
};

/// Cycles and counts per DSL source line (code_exe.csv).
struct LineStats {
  std::string file;
  int line = 0;
  std::string op;
  int64_t instructions = 0;
  double busy_cycles = 0;      // pipe occupancy
  double duration_cycles = 0;  // start to result ready
};

class Recorder : public sim::Observer {
 public:
  explicit Recorder(TraceOptions opts = {}) : opts_(opts) {}
  void on_instr(const sim::InstrEvent& e) override;
  void on_flag(const sim::FlagEvent& e) override;

  std::vector<LineStats> lines() const;  // sorted by busy cycles, largest first
  const std::vector<sim::InstrEvent>& instrs() const { return instrs_; }
  const std::vector<sim::FlagEvent>& flags() const { return flags_; }
  bool truncated() const { return truncated_; }

 private:
  bool keep(double start, double end);
  TraceOptions opts_;
  std::vector<sim::InstrEvent> instrs_;
  std::vector<sim::FlagEvent> flags_;
  std::map<const lower::OpTemplate*, LineStats> by_op_;
  bool truncated_ = false;
};

/// Chrome trace JSON (Perfetto / chrome://tracing): one process per core, one thread per
/// pipe (msprof names; overlapping in-flight ops spill onto sub-tracks), flow arrows from
/// each set to its wait, counters for on-chip buffer allocation. Sorted by time.
void write_chrome_trace(std::ostream& out, const Recorder& rec, const sim::SimResult& r,
                        const lower::LoweredProgram& prog, const ChipConfig& chip);

struct PipeSummary {
  std::string pipe;  // "M", "V", ...
  double busy_pct = 0;
  double wait_flag_pct = 0;
  double wait_dep_pct = 0;
  int64_t instructions = 0;
};

struct Summary {
  double cycles = 0;
  double time_us = 0;
  std::vector<PipeSummary> pipes;  // M, V, MTE1, MTE2, MTE3, FIX, S
  std::string bound;               // busiest pipe
  std::string verdict;             // "compute", "memory", "latency-pipeline", "issue"
  double cube_vector_ratio = 0;    // sum of M busy over AIC / sum of V busy over AIV
  double hbm_bytes = 0, l2_bytes = 0;
  double gm_bw_bytes_per_cycle = 0;
  struct Wait {
    std::string where, op;
    double cycles = 0;
    int64_t count = 0;
  };
  std::vector<Wait> top_waits;  // at most 8
  struct Buffer {
    std::string scope;
    int64_t used = 0, capacity = 0;
  };
  std::vector<Buffer> buffers;  // per scope, per core
};

Summary summarize(const sim::SimResult& r, const lower::LoweredProgram& prog,
                  const ChipConfig& chip);
nlohmann::ordered_json to_json(const Summary& s);
std::string to_text(const Summary& s);

/// msprof-style per-core pipe utilisation (pipe_utilization.csv).
std::string pipe_utilization_csv(const sim::SimResult& r, const ChipConfig& chip);
/// Cycles per DSL source line (code_exe.csv).
std::string code_exe_csv(const Recorder& rec, const ChipConfig& chip);

/// Writes `content` to `path` through a temporary file and a rename, so an interrupted
/// run never leaves a truncated file. Throws std::runtime_error naming the path.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace tilepipe::prof

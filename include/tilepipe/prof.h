// Profiling: what a simulated run did, in msprof's vocabulary.
//
// A Recorder attaches to a run as a sim::Observer; it aggregates per source line and
// (optionally) keeps events for a Chrome/Perfetto trace. summarize() turns a SimResult into
// per-pipe busy %, the bound pipe and verdict, idle reasons and buffer use.
#pragma once

#include <array>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tilepipe/chip.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"

namespace tilepipe::prof {

/// What a trace records of a run: events overlapping a window of cycles, on some AI cores.
struct TraceOptions {
  double window_begin = 0;  // cycles: only events overlapping [begin, end) are written
  double window_end = std::numeric_limits<double>::infinity();
  std::vector<int> ai_cores;  // the N of coreN.AIC / coreN.AIVv to record; empty = all
};

class TraceWriter;
namespace trace {
class Encoder;
}

/// Cycles and counts per DSL source line (code_exe.csv).
struct LineStats {
  std::string file;
  int line = 0;
  std::string op;
  int64_t instructions = 0;
  double busy_cycles = 0;      // pipe occupancy
  double duration_cycles = 0;  // start to result ready
  std::string pipe;            // "V", "MTE2", ...
  double elements = 0;         // source elements over all instructions (mean = / instructions)
  double bytes = 0;
};

/// Busy cycles per core and pipe over time, in equal bins (the HTML timeline overview).
/// Bins double in width when the run outgrows them, so memory stays bounded.
struct Timeline {
  static constexpr size_t kMaxBins = 128;
  double bin_cycles = 512;
  std::vector<std::string> core_names;                              // per core index
  std::vector<std::vector<std::array<float, ir::kNumPipes>>> busy;  // [core][bin][pipe]
  void add(int core, ir::Pipe pipe, double start, double cycles);
};

/// One source line's share of the critical core's span (docs/cli.md, "Per-line cycles").
struct LineCost {
  std::string file;
  int line = 0;
  std::string op, pipe;     // the line's costliest op and its pipe
  double cycles = 0;        // busy + stall: the line's share of the span
  double busy_cycles = 0;   // its instructions running (shared equally with those running too)
  double stall_cycles = 0;  // the core idle until one of its instructions started
  std::map<std::string, double> waits_on;  // stall by what released it: a pipe of the core
                                           // ("MTE2"), "cross-core M", "S" (issued late)
  int64_t instructions = 0;                // on the critical core
};

/// Every cycle of the kernel's span on its critical core (the core that ends last) given to
/// one source line: a stretch where instructions run is shared equally among them, an idle
/// stretch goes to the instruction that starts next (a stall, with what released it), the
/// launch to no line, the result latency after the last instruction to that instruction.
/// So `launch_cycles` + the lines' `cycles` = `cycles`, exactly.
struct LineAttribution {
  std::string unavailable;  // why there is none ("" when there is)
  std::string core;         // the critical core, "core3.AIV0"
  double cycles = 0, launch_cycles = 0;
  std::vector<LineCost> lines;  // by cycles, largest first
};

class Recorder : public sim::Observer {
 public:
  /// With a `trace`, every event is also handed to it (it keeps those it records).
  /// `attribute_lines`: keep every instruction's times for attribute_lines() (memory grows
  /// with the run, up to kMaxKeptEvents).
  explicit Recorder(TraceWriter* trace = nullptr, bool attribute_lines = false)
      : trace_(trace), keep_(attribute_lines) {}
  void on_instr(const sim::InstrEvent& e) override;
  void on_flag(const sim::FlagEvent& e) override;

  std::vector<LineStats> lines() const;  // sorted by busy cycles, largest first
  const Timeline& timeline() const { return timeline_; }
  /// Per-line cycles of the run `r` this recorder observed (constructed with
  /// attribute_lines; the whole run observed, so without fast-forward).
  LineAttribution attribute_lines(const sim::SimResult& r, double launch_cycles) const;

  static constexpr size_t kMaxKeptEvents = size_t{1} << 24;

 private:
  struct Kept {
    double start;
    float occupancy, latency, queued;  // queued: start - issue
    ir::Pipe pipe;
    const lower::OpTemplate* op;
  };
  struct Release {  // a wait that held its pipe or the scalar unit ended
    double time;
    ir::Pipe set_pipe;
    bool cross;
  };
  TraceWriter* trace_;
  bool keep_;
  size_t kept_ = 0;
  bool overflow_ = false;
  std::vector<std::vector<Kept>> events_;       // per core
  std::vector<std::vector<Release>> releases_;  // per core
  std::map<const lower::OpTemplate*, LineStats> by_op_;
  Timeline timeline_;
};

/// The per-line table (`--lines`): the `max` costliest lines, with the critical core.
std::string to_text(const LineAttribution& a, size_t max = 30);

/// Streams a trace of the run to a file while it goes (docs/cli.md#trace-file), in the
/// encoding its name asks for: Perfetto's protobuf for ".pftrace" / ".perfetto-trace",
/// otherwise Chrome trace JSON, gzip-compressed when the path ends in ".gz". Either holds one
/// process per core, one thread per pipe (msprof names; overlapping in-flight ops spill onto
/// sub-tracks), flow arrows from each set to its wait, counters for on-chip buffer
/// allocation and the run's facts. Memory stays constant however long the run, and the same
/// run gives a byte-identical file. The file appears only when finish() succeeds (written to
/// a temporary and renamed).
class TraceWriter {
 public:
  /// Throws std::runtime_error naming the path if it cannot be created or its name asks for
  /// no encoding we write (".pftrace.gz").
  TraceWriter(const std::string& path, TraceOptions opts, const ChipConfig& chip);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// The program about to run: maps simulated cores to AI cores for `ai_cores` and names
  /// them. Events before bind() are recorded on every core.
  void bind(const lower::LoweredProgram& prog);
  void instr(const sim::InstrEvent& e);
  void flag(const sim::FlagEvent& e);
  /// Appends the track names, buffer counters and run facts, closes and renames the file.
  void finish(const sim::SimResult& r, const lower::LoweredProgram& prog);
  /// Events written: JSON trace events, or TracePackets of a protobuf trace.
  int64_t events() const;
  /// Instructions the selection (window, cores) kept: 0 means an empty timeline.
  int64_t instructions_kept() const { return kept_; }

 private:
  int64_t kept_ = 0;
  struct Track;
  bool keep(int core, double start, double end) const;
  int64_t ns(double cycles) const;
  Track& track(int core);
  int thread(int core, ir::Pipe pipe, int lane);  // the thread's tid, announced on first use

  TraceOptions opts_;
  const ChipConfig& chip_;
  std::unique_ptr<trace::Encoder> enc_;
  std::vector<bool> core_kept_;          // per simulated core, after bind()
  std::vector<std::string> core_names_;  // per simulated core, after bind()
  std::vector<Track> tracks_;            // per simulated core
};

/// Why `path` cannot name a trace file, or "" if it can: ".pftrace.gz" asks for a gzip'd
/// protobuf trace, which is compressed inside already.
std::string trace_name_problem(const std::string& path);

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
  double launch_cycles = 0;        // die.launch_us: before every core's first block; in `cycles`
  std::vector<PipeSummary> pipes;  // M, V, MTE1, MTE2, MTE3, FIX, S
  std::string bound;               // busiest pipe
  std::string verdict;             // "compute", "memory", "latency-pipeline", "issue"
  double cube_vector_ratio = 0;    // sum of M busy over AIC / sum of V busy over AIV
  double hbm_bytes = 0, l2_bytes = 0;
  double gm_bw_bytes_per_cycle = 0;
  int64_t scalar_gm_reads = 0, scalar_gm_misses = 0;  // scalar unit's GM reads, data-cache misses
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
/// A diagnostic's text on one line: its first line (where and what) and, after "; ", its
/// hint (the fix); for lists of rejections (tune's rejected configs, the HTML heat map).
std::string one_line(const std::string& diagnostic_text);

// ---- evidence and advice (docs/simulator.md#evidence, docs/cli.md#tilepipe-profile) ----

/// Kernel-agnostic evidence of one run, derived from the simulator's counters, the
/// recorder and the lowered program (its instructions, loops and knob metadata).
struct Evidence {
  double span = 0;
  struct Account {
    std::string kind, pipe;  // "AIC" / "AIV", "M"
    int cores = 0;
    sim::CycleAccount mean;  // averaged over the cores of that kind (sums to span)
    double max_busy = 0;     // busiest core: the pipe's roofline lower bound
  };
  std::vector<Account> accounts;
  std::string lb_pipe;  // roofline: no schedule can beat the busiest pipe of a core
  double lb_cycles = 0;
  sim::CrossStats c2v, v2c;
  int64_t gm_transfers = 0;
  double gm_bytes = 0, bytes_per_transfer = 0;
  double mte2_read_bytes = 0, reloaded_bytes = 0;  // read-only GM ranges read again
  double hbm_bw_pct = 0, l2_bw_pct = 0;            // achieved / peak over the span
  struct Scope {
    std::string scope;
    int64_t used = 0, capacity = 0;
    std::string largest, largest_where;
    int64_t largest_bytes = 0;
  };
  std::vector<Scope> scopes;
  struct Line {
    std::string where, op, pipe, loop;  // loop: innermost enclosing loop site, or ""
    int64_t instructions = 0;
    double busy_cycles = 0, mean_elements = 0;
  };
  std::vector<Line> lines;  // compute lines by busy cycles (at most 12)
  struct Site {
    std::string where, what, loop;
    int64_t executed = 0;
    std::vector<std::string> ops;  // scalar loops: the vector ops inside (file:line)
  };
  std::vector<Site> barriers_in_loops;  // pipe_barrier inside a loop
  std::vector<Site> unfused;            // mul then add/sub on the same tile (where = the mul)
  std::vector<Site> scalar_loops;       // loops of small vector ops fed by scalar reads
  /// From the program as built (passes::serial_tile_loops / loop_invariant_work, in their
  /// order: a what-if names a site by its index): where = the loop, ops = its statements.
  std::vector<Site> serial_tile_loops;  // serial loops loading a new GM tile per iteration
  std::vector<Site> invariant_work;     // per loop, its statements that never change
  double core_imbalance = 1;            // max / mean busiest-pipe busy over AI cores
  int64_t v_instructions = 0, v_small_instructions = 0;  // V ops, and those < 512 elements
  int64_t block_num = 0, ai_cores = 0;
  std::vector<ir::Knob> knobs;
};

Evidence gather_evidence(const sim::SimResult& r, const lower::LoweredProgram& prog,
                         const ChipConfig& chip, const Recorder& rec);
nlohmann::ordered_json to_json(const Evidence& e);
/// Flat metric table (name -> value) the advice rules test.
std::map<std::string, double> metrics(const Summary& s, const Evidence& e);
/// Whether `metrics` can produce `name` (for some program): rules files name only these.
bool is_metric_name(const std::string& name);

/// msprof-style per-core pipe utilisation (pipe_utilization.csv).
std::string pipe_utilization_csv(const sim::SimResult& r, const ChipConfig& chip);
/// Cycles per DSL source line (code_exe.csv).
std::string code_exe_csv(const Recorder& rec, const ChipConfig& chip);

// ---- Output files (output.cc): every file a command writes goes through here ----

/// Writes `content` to `path` through a temporary file and a rename, so an interrupted
/// run never leaves a truncated file. A symlink at `path` is followed: its target is
/// replaced, the link stays. Throws std::runtime_error naming the path.
void write_file_atomic(const std::string& path, const std::string& content);

/// One output a command will write: a file, or a directory and the file names it writes.
struct OutputSpec {
  std::string flag;  // how the user named it, for messages: "--trace"
  std::string path;  // "" when the flag was not given
  bool is_dir = false;
  std::vector<std::string> files;  // is_dir: the names written inside it
  OutputSpec(std::string f, std::string file) : flag(std::move(f)), path(std::move(file)) {}
  OutputSpec(std::string f, std::string dir, std::vector<std::string> names)
      : flag(std::move(f)), path(std::move(dir)), is_dir(true), files(std::move(names)) {}
};

/// Checks every output before any work is done, so a bad path fails at once, not after a
/// long run: the directory exists and a file can be created in it; an existing target (a
/// symlink's target) is a regular, writable file — never a device, FIFO, socket or
/// directory, which a rename would replace; no two outputs, and no output and an input
/// (`inputs`: flag -> path, e.g. the chip config), are one file. Throws
/// std::runtime_error with a one-line message naming the flag and a fix.
void check_outputs(const std::vector<OutputSpec>& outputs,
                   const std::vector<std::pair<std::string, std::string>>& inputs = {});

/// Records a file the command reads (`what` names it for messages: "the kernel's source",
/// "a module the kernel imports"): no output may replace it, whatever path names it
/// (resolve_output, so check_outputs and every writer refuse it). Thread-safe.
void note_input(const std::string& path, const std::string& what);

/// The file a write to `path` replaces (a symlink's target, made absolute), after checking
/// that it is a regular file or absent and not an input (note_input). Throws
/// std::runtime_error naming `flag`.
std::string resolve_output(const std::string& path, const std::string& flag = "");

/// Temporaries of this process being written, removed when it is stopped by SIGINT,
/// SIGTERM or SIGHUP (install_temp_cleanup, called once by a program's main: a library
/// never takes over signals) and on every normal exit path by their owners.
/// A name for a temporary of this process beside `target` (a rename stays atomic within a
/// directory), unique across every writer of the process.
std::string temp_beside(const std::string& target);
int register_temp(const std::string& path);  // a slot for unregister_temp, or -1
void unregister_temp(int slot);
void install_temp_cleanup();

}  // namespace tilepipe::prof

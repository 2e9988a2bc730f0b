// The simulator of one A2/A3 die: 24 AIC + 48 AIV cores running a lowered program.
//
// Model (docs/simulator.md): per core a scalar unit walks the control flow and issues each
// instruction, paying an issue cost, into the in-order queue of its pipe. An instruction
// starts at max(issue time, pipe ready, flag it waits on, result of the previous write it
// reads on the same pipe) and ends after its cost from the chip config. Flags carry
// completion times between pipes (set fires when all earlier work of its pipe is done) and
// between cores (cross-core counting semaphores with a latency). Cores are cooperative
// tasks advanced in global time order; a core blocked on a flag yields. If every core is
// blocked, the run stops with a deadlock report naming each wait.
//
// Functional mode also moves and computes real values (fp16/bf16 storage with RNE, fp32
// accumulation in the cube); timing mode skips the values and is faster. Both produce the
// same cycle counts.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tilepipe/chip.h"
#include "tilepipe/lower.h"
#include "tilepipe/verify.h"

namespace tilepipe::sim {

enum class Mode { Timing, Functional };

/// GM tensor contents exchanged with the host, as logical row-major values.
using HostData = std::map<std::string, std::vector<double>>;

/// An input tensor as the host holds it, by reference (a front end's array): `elements`
/// values of `dtype`, row-major. Loaded into GM without a float64 copy: the bytes when
/// `dtype` is the tensor's, else converted value by value as a HostData entry would be.
struct RawTensor {
  const void* data = nullptr;
  ir::DType dtype = ir::DType::F32;
  int64_t elements = 0;
};

/// One executed instruction, as observers see it.
struct InstrEvent {
  int core = 0;  // index into SimResult::cores
  ir::Pipe pipe = ir::Pipe::S;
  const lower::OpTemplate* op = nullptr;
  double issue = 0, start = 0, end = 0;  // cycles; end includes the result latency
  double occupancy = 0;                  // cycles the pipe was busy
  int64_t bytes = 0;                     // bytes moved (copies) or touched (compute)
  double flops = 0;                      // cube: 2*m*n*k
};

/// A flag hand-off: the set that a wait consumed (intra- or cross-core).
struct FlagEvent {
  int set_core = 0, wait_core = 0;
  ir::Pipe set_pipe = ir::Pipe::S, wait_pipe = ir::Pipe::S;
  double set_time = 0, wait_time = 0;  // set fired / wait completed
  double wait_issue = 0;               // the wait reached the front of its pipe / the scalar
  const lower::OpTemplate* set_op = nullptr;
  const lower::OpTemplate* wait_op = nullptr;
  bool cross = false;
};

/// Attaches to a run (trace writers, counters). Called in processing order, which is not
/// time order across cores: sort by time when writing.
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_instr(const InstrEvent&) {}
  virtual void on_flag(const FlagEvent&) {}
};

/// Timing mode: once every core's outermost loop has reached a steady state, skip ahead by
/// whole iterations instead of simulating each (docs/simulator.md, "Fast-forward"). Never
/// used with race detection, control flow that reads data, or an observer of the whole run
/// (an observer of a window: outside it only).
struct FastForwardOptions {
  bool enabled = true;
  // The window of iterations compared before a jump: the shortest of at least min_window
  // iterations holding window_instructions executed instructions of the core (short
  // iterations jitter more), or else max_window iterations.
  int min_window = 4;
  int max_window = 16;
  int64_t window_instructions = 20000;
  double trend_tolerance = 5e-3;  // first vs second half of the window, relative duration
  int tail = 2;                   // iterations of every loop simulated in full at its end
  int min_jump = 4;               // fewer skippable iterations are not worth a jump
  /// With an observer: it needs only the events that overlap [observed_from, observed_to)
  /// (a trace window). Jumps then skip iterations wholly before or after that window and
  /// never one inside it; the default, the whole run, turns fast-forward off.
  double observed_from = 0;
  double observed_to = std::numeric_limits<double>::infinity();
};

/// The run-time diagnostic kinds that are findings of the checks (error.h): budgets,
/// interrupts and bad host data are not.
using tilepipe::kCheckKinds;

struct SimOptions {
  Mode mode = Mode::Functional;
  double max_cycles = 1e13;  // budget: a run past it stops with an error
  double max_wall_s = 0;     // wall-clock budget in seconds (0: none); past it, an error
  Observer* observer = nullptr;
  /// Record byte ranges of every access and report unsynchronised conflicting accesses
  /// (functional or timing mode; slower).
  bool detect_races = false;
  /// Functional mode: worker threads that apply the instructions' values, one AI core on
  /// one worker (-1: one per hardware thread; 0: the engine's own thread). The values are
  /// the same for every count.
  int value_threads = -1;
  FastForwardOptions fast_forward;
  /// What-if runs (timing only; the advisor's verification): pipe barriers cost nothing and
  /// order nothing, and instructions of these source sites ("file:line") take no time.
  bool whatif_no_barriers = false;
  std::vector<std::string> whatif_free_sites;
  /// Lower-bound mode: walk the program and sum each pipe's occupancy at the per-core rate,
  /// ignoring flags, barriers and bandwidth sharing. `cycles` is then a lower bound of the
  /// timed run (max over cores and pipes of the occupancy); much cheaper than a timed run.
  bool lower_bound_only = false;
  /// Called at every scheduling step (a core resumes for up to a quantum of cycles) with the
  /// simulated time reached, in cycles: progress display. Keep it cheap; must not throw.
  std::function<void(double cycles)> progress;
  /// When set and it becomes true (e.g. from a SIGINT handler or another thread), the run
  /// stops within well under a second with a UserError of kind "interrupted". Read, never
  /// written; must outlive the run.
  const std::atomic<bool>* cancel = nullptr;
  /// Functional mode: the GM tensors written back to `io` after the run (empty: every one).
  /// A front end that reads only the outputs skips converting inputs and workspaces back.
  std::vector<std::string> write_back;
  /// Functional mode: input tensors given by reference instead of through `io` (an `io`
  /// entry of the same name wins). Must outlive the run.
  std::map<std::string, RawTensor> raw_inputs;
  /// Functional mode, when set: the written-back tensors of a 64-bit integer type land here
  /// as their bytes (exact), not in `io` (whose doubles hold integers exactly to 2^53 only).
  std::map<std::string, std::vector<uint8_t>>* raw_outputs = nullptr;
};

/// Where each cycle of a pipe went, from cycle 0 to the kernel's span (the fields sum to
/// SimResult::cycles on every core and pipe that exists on the core).
struct CycleAccount {
  double busy = 0;     // occupancy
  double flag = 0;     // head waited on an intra-core data flag (or the scalar on X->S)
  double slot = 0;     // head waited on a credit flag: a free multi-buffer slot
  double dep = 0;      // waited for an earlier result of the same pipe (S: for room in a
                       // pipe's full instruction queue)
  double barrier = 0;  // pipe_barrier waited for the pipe to drain
  double cross = 0;    // the core was blocked on a cross-core wait
  double issue = 0;    // nothing issued yet: the scalar unit was behind (issue-bound)
  double head = 0;     // before the pipe's first instruction
  double tail = 0;     // after the pipe's last instruction until the kernel ends
  double sum() const { return busy + flag + slot + dep + barrier + cross + issue + head + tail; }
};

struct PipeStats {
  double busy_cycles = 0;  // sum of occupancy
  int64_t instructions = 0;
  double wait_flag_cycles = 0;  // pipe idle because its head waited on a flag
  double wait_dep_cycles = 0;   // waited for the result of an earlier op on the same pipe
  double bytes = 0;             // bytes moved (copy pipes)
  CycleAccount account;         // filled at the end of the run
  int64_t transfers = 0;        // copies that read or wrote GM
  double reloaded_bytes = 0;    // MTE2 bytes of a read-only GM range this core read before
};

/// A simulated core's name (CoreStats::name): "core3.AIC", "core3.AIV0".
std::string core_name(int ai_core, ir::CoreKind kind, int vid);

struct CoreStats {
  std::string name;  // "core3.AIC", "core3.AIV0"
  int ai_core = 0;
  ir::CoreKind kind = ir::CoreKind::C;
  int vid = 0;
  double end_cycle = 0;
  std::array<PipeStats, ir::kNumPipes> pipes{};
};

/// Where waiting time went, per wait site (source line of the wait op).
struct WaitSite {
  const lower::OpTemplate* op = nullptr;
  double cycles = 0;
  int64_t count = 0;
};

/// What fast-forward skipped: the cycles and instructions of these iterations are
/// extrapolated from the iterations before them.
struct FastForwardStats {
  int jumps = 0;
  int64_t iterations = 0;  // loop iterations skipped, summed over cores
  double cycles = 0;       // simulated time covered by the jumps
};

/// The scalar unit's reads of GM elements (load(gm_input, ...)), through its data cache.
struct ScalarLoadStats {
  int64_t reads = 0, misses = 0;
};

/// Cross-core hand-offs of one direction (C->V: AIC sets, AIV waits), over all AI cores.
struct CrossStats {
  int64_t sets = 0, waits = 0;
  double wait_cycles = 0;   // summed over the waiting cores
  int64_t max_pending = 0;  // most sets of one flag id in flight (stages ahead)
  double mean_pending = 0;  // mean sets in flight seen by each new set
};

struct SimResult {
  double cycles = 0;
  int64_t instructions = 0;
  std::vector<CoreStats> cores;              // per AI core: AIC, AIV0, AIV1 (only kinds with code)
  std::vector<WaitSite> waits;               // sorted by cycles, largest first
  double gm_bytes_hbm = 0, gm_bytes_l2 = 0;  // GM traffic served by HBM / by L2
  FastForwardStats fast_forward;
  CrossStats c2v, v2c;
  ScalarLoadStats scalar_gm_loads;  // summed over cores
  bool lower_bound = false;         // run in lower-bound mode
  /// Functional runs: the output tensors (role Output) with elements no instruction wrote
  /// (`first`: the flat index of the first such element). Empty: every element was written.
  struct Unwritten {
    std::string tensor;
    int64_t elements = 0, total = 0, first = 0;
  };
  std::vector<Unwritten> unwritten;
};

/// A run broke a physical invariant of the model (docs/simulator.md, "Invariants"): a bug in
/// the simulator, never a result. The message names the invariant, the core and the pipe.
class InvariantError : public InternalError {
 public:
  using InternalError::InternalError;
};

/// Version of the timing model; part of every tuning-cache key.
inline constexpr const char* kSimVersion = "tilepipe-sim-4";

/// The Cube's arithmetic (an mmad's values; docs/simulator.md, "Functional and timing mode"): C
/// [m, n] (+)= A [m, k] B [k, n], row-major f32 operands (every Cube input type converts to
/// f32 exactly). The Cube adds one K fractal at a time into the f32 accumulator, L0C: per
/// `k_fractal` elements of K (cube_k_fractal), a chain of f32 fused multiply-adds from 0 in
/// K order, then one f32 add into C. So a product split along K at fractal boundaries (a
/// kernel's K loop of mmads with init on its first step) gives the same bits as one mmad,
/// and a host reference computed with this function (tilepipe run-py's torch matmul of
/// float16 / bfloat16 tensors, as torch_npu's runs on the same Cube) matches a kernel's bits.
void cube_matmul(int64_t m, int64_t n, int64_t k, int64_t k_fractal, const float* a, const float* b,
                 float* c, bool accumulate);

/// Elements of K per Cube fractal for an operand type: 32 bytes (16 fp16 / bf16, 8 f32,
/// 32 int8), the L0A / L0B fractal row (hardware.md: 16 x 16 fp16 fractals of 512 B).
inline int64_t cube_k_fractal(ir::DType operand) {
  return 32 / ir::dtype_bytes(operand);
}

/// Runs `prog`. In functional mode `io` supplies every input tensor (missing = zeros) and
/// receives every GM tensor after the run (or those of SimOptions::write_back). Throws UserError
/// for run-time errors in the program (out-of-range slice, flag misuse, deadlock, cycle budget) and
/// for a run stopped by SimOptions::cancel (kind "interrupted").
SimResult simulate(const lower::LoweredProgram& prog, const ChipConfig& chip, HostData* io,
                   const SimOptions& opts = {});

}  // namespace tilepipe::sim

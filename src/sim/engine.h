// The engine of the simulator (sim::simulate): cores as cooperative tasks, scoreboarded
// pipes, intra- and cross-core flags. Contract in include/tilepipe/sim.h; private to
// src/sim/. Reads ChipConfig for issue/flag latencies, costs (through instr_cost, once per
// template), the die's HBM/L2 bandwidth (bandwidth.h) and the DMA burst/alignment efficiency
// of GM copies (touch_gm); ignores UB bank conflicts.
//
// One class, its member functions defined by section:
//   engine.cc              the run loop, control flow, instruction issue, the pipes (hot)
//   engine_setup.cc        per-template facts and fetch code, the cores; the SimResult
//   engine_memory.cc       GM and local memories, values, a GM copy's L2/HBM bytes
//   engine_flags.cc        scalar-unit waits, dropped waits, cross-core flags
//   engine_observe.cc      race detection and observers
//   engine_fastforward.cc  steady-state jumps and their GM address replay (steady.h)
//   engine_checks.cc       run-time errors, deadlocks, unmatched flags, invariants
// What every instruction touches is defined here or in engine.cc, so it inlines.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <queue>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bandwidth.h"
#include "instr.h"
#include "race.h"
#include "state.h"
#include "steady.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"
#include "values.h"

namespace tilepipe::sim {

using ir::CoreKind;
using ir::Pipe;
using lower::Opcode;

/// Gap kinds of the cycle account (what a pipe's head waited on).
enum GapKind { kGapNone, kGapFlag, kGapSlot, kGapDep, kGapBarrier };

/// The pipes each core kind has.
inline constexpr std::array kAicPipes = {Pipe::S, Pipe::MTE2, Pipe::MTE1, Pipe::M, Pipe::FIX};
inline constexpr std::array kAivPipes = {Pipe::S, Pipe::MTE2, Pipe::V, Pipe::MTE3};
inline std::span<const Pipe> pipes_of(CoreKind k) {
  return k == CoreKind::C ? std::span<const Pipe>(kAicPipes) : std::span<const Pipe>(kAivPipes);
}

inline bool has_pipe(CoreKind k, Pipe p) {
  return std::ranges::count(pipes_of(k), p) > 0;
}

/// What the issue loop needs of a template, found once per template (Engine::issue_facts):
/// one cache line, where the template's own fields would come from several (and the
/// cores' state evicts them between two instructions of the same template).
struct alignas(64) IssueFacts {
  // Through a pipe's queue: a compute or copy op, a set, a wait, or what always queues (a
  // barrier, a dropped wait). On the scalar unit: a wait it blocks on, a set that fires at
  // issue.
  enum Route : uint8_t { Op, Set, Wait, Queued, ScalarWait, ScalarSet } route = Op;
  ir::Pipe pipe = ir::Pipe::S;
  bool skipped = false;     // a dropped set or barrier is not issued (fetch)
  bool eval_flag = false;   // the flag id is evaluated per instruction; else it is flag_id
  bool has_scalar = false;  // a tile op with a scalar operand (scalar_operand)
  uint8_t num_acc = 0;
  int32_t flag_id = 0;
  // Its StartCode entries (Engine::starts_): the operands' variable starts, then the flag
  // id where eval_flag.
  uint32_t first_start = 0, num_starts = 0;
  double issue_cycles = 0;  // the scalar unit's issue time: none for a dropped instruction
  std::array<int64_t, 4> const_off{};  // per operand (OpTemplate::acc)
};
static_assert(sizeof(IssueFacts) == 64);

/// A value the scalar unit computes per instruction from the loop slots: the start of a
/// variable dimension of an operand (checked against [0, hi], times stride into the
/// operand's offset) or a flag id (checked against [0, hi]). The common affine shape (two
/// terms, one step: CExpr::Affine) is copied in, so an instruction's values come from a few
/// adjacent cache lines instead of its template's scattered CExprs (a D1 miss each).
struct alignas(64) StartCode {
  int64_t c0 = 0;
  int64_t mul = 1, add = 0;  // the step (CExpr::Step); mask and shift below
  int64_t hi = 0, stride = 0;
  int32_t coef0 = 0, coef1 = 0;
  int32_t mask = -1;
  uint8_t slot0 = 0, slot1 = 0, shift = 0;
  bool generic = false;   // another shape: evaluated through the template's CExpr
  int8_t acc = 0, d = 0;  // operand and dimension; d = -1: the flag id
};
static_assert(sizeof(StartCode) == 64);

// Hidden: the class is private to the library, and calls between its files go direct
// instead of through the PLT.
#pragma GCC visibility push(hidden)
class Engine {
 public:
  Engine(const lower::LoweredProgram& p, const ChipConfig& chip, HostData* io, const SimOptions& o);
  SimResult run();

 private:
  static constexpr double kQuantum = 2000;  // cycles a core may run ahead before yielding

  /// fetch's answers besides a template index: the core's stream has ended, or the core
  /// waits at a block boundary (next_block).
  static constexpr int kStreamEnd = -1, kBlockWait = -2;

  // fetch's view of a block: per item, the template to issue, kSkipped, or a control item
  // (kControl - k: controls_[k]).
  static constexpr int32_t kSkipped = -1, kControl = -2;

  /// An outermost loop that fast-forward can jump (steady.h).
  struct OuterLoop {
    const lower::Item* loop;
    int64_t period;  // iteration_period
    bool gm_moves;   // its GM addresses move: jumps replay them
  };

  /// A loop or if of a block, with the code of its bodies (compile_code).
  struct Control {
    const lower::Item* item;
    const std::vector<int32_t>* body;
    const std::vector<int32_t>* else_body;  // null where the item has no such block
  };

  class Replay;  // engine_fastforward.cc

  // Below, a member declared inline is defined in the file of its section and called only
  // there: it inlines where that pays, as when the class was defined in one file.

  // ---- small and hot: defined here, inlined in every file ----
  void push(Core& c) {
    if (c.in_heap) return;
    c.in_heap = true;
    heap_.push({c.t, c.index});
  }

  /// Scalar-unit work: advances the issue clock and counts as S-pipe busy time.
  static void scalar(Core& c, double cycles) {
    c.t += cycles;
    c.tally.pipes[static_cast<size_t>(Pipe::S)].busy_cycles += cycles;
  }

  size_t flag_key(Pipe s, Pipe d, int64_t id) const {
    return (static_cast<size_t>(s) * kPipes + static_cast<size_t>(d)) *
               static_cast<size_t>(chip_.event_ids) +
           static_cast<size_t>(id);
  }

  Cost cost_of(const Core& c, const lower::OpTemplate& t) const {
    return c.costs[&t - c.prog->instrs.data()];
  }

  /// The outermost loop that can jump, or null.
  const OuterLoop* outer_loop(const lower::Item* loop) const {
    for (const auto& o : outer_loops_)
      if (o.loop == loop) return &o;
    return nullptr;
  }

  /// The scalar unit's reads of tensor elements inside expressions (ir::Load): bounds
  /// checked like slices, charged to S (GM: through the core's data cache, dcache.h; UB:
  /// scalar_op_cycles).
  class Loader : public lower::ScalarMem {
   public:
    Loader(Engine& e, Core& c) : e_(e), c_(c) {}
    int64_t load(int site, const int64_t* index) const override {
      return e_.scalar_load(c_, c_.prog->loads[static_cast<size_t>(site)], index);
    }

   private:
    Engine& e_;
    Core& c_;
  };

  /// x's value on core c; `loc` is the instruction or loop it belongs to, where a division
  /// by zero is reported.
  int64_t eval(Core& c, const lower::CExpr& x, const ir::Loc& loc) {
    try {
      if (!x.has_load) return x.eval(c.slots.data());
      Loader ld(*this, c);
      return x.eval(c.slots.data(), &ld);
    } catch (const lower::DivisionByZero&) {
      division_by_zero(c, loc);
    }
  }

  SetRecord record(Core& c, const Instr& in, double when, double visible) {
    return {visible, when, in.t, c.index, race_ ? release(c, in) : -1};
  }

  /// A wait took set `r`: happens-before edge, observer event, waiting statistics.
  /// `from` is when the wait reached the front of its pipe (or the scalar unit). Inlined: a
  /// call costs about as much as its work, once per wait.
  [[gnu::always_inline]] void consumed(Core& c, Pipe pipe, const Instr& wait, const SetRecord& r,
                                       double from, double done, bool cross) {
    if (race_ && r.vc >= 0) [[unlikely]]
      acquire_set(c, pipe, r, cross);
    double waited = std::max(0.0, done - from);
    auto& site = c.tally.waits[static_cast<size_t>(wait.t - c.prog->instrs.data())];
    site.op = wait.t;
    site.cycles += waited;
    ++site.count;
    if (opts_.observer) [[unlikely]]
      observe_flag(c, pipe, wait, r, from, done, cross);
  }

  /// A flag is binary: a second set visible no later than the wait that consumes the first
  /// is lost on hardware (and hangs the second wait).
  void check_double_set(const Core& c, const Ring<SetRecord>& q, double consumed_at,
                        const Instr& wait) {
    if (q.empty() || q.front().time > consumed_at) return;
    double_set(c, q, wait);
  }

  /// A T.sync_all's set: a cross-core set every core of the launch waits for.
  static bool is_sync_all(const lower::OpTemplate& t) {
    return t.op == Opcode::SetCross && t.cross_mode == ir::kSyncAllMode;
  }

  /// The operand of a copy that is in GM (the source if both are), or -1.
  static int gm_operand(const lower::OpTemplate& t) {
    if (t.acc[1].scope == ir::Scope::GM) return 1;
    return t.acc[0].scope == ir::Scope::GM ? 0 : -1;
  }

  bool cancelled() const { return opts_.cancel && opts_.cancel->load(std::memory_order_relaxed); }

  // ---- engine.cc: the run loop, control flow, issue, the pipes ----
  [[gnu::always_inline]] inline int fetch(Core& c);
  [[gnu::noinline, gnu::cold]] inline bool next_block(Core& c);
  inline void enter_block(Core& c);
  inline void enter(Core& c, const Control& ctl);
  static inline Frame frame(const lower::Block* b, const std::vector<int32_t>& code,
                            const lower::Item* loop, int64_t end);
  Access resolve(Core& c, const lower::AccessTemplate& a, const lower::OpTemplate& t);
  [[gnu::always_inline]] inline void instantiate(Core& c, const lower::OpTemplate& t,
                                                 const IssueFacts& f, const StartCode* starts,
                                                 Instr& in);
  [[gnu::always_inline]] inline int64_t value(Core& c, const StartCode& s,
                                              const lower::OpTemplate& t);
  [[gnu::noinline]] inline void scalar_operand(Core& c, const lower::OpTemplate& t, Instr& in);
  template <bool kBound>
  inline void run_core(Core& c, double horizon);
  inline void check_budget(const Core& c);
  inline void queue_stall(Core& c, const PipeState& ps);
  inline void leave_queue(PipeState& ps, double start);
  [[gnu::always_inline]] inline void account(Core& c, PipeState& ps, PipeStats& st, double issue,
                                             double s, double occ, GapKind kind);
  inline void bound_dispatch(Core& c, Instr& in);
  inline bool dispatch(Core& c, Instr& in, const IssueFacts& f);
  [[gnu::always_inline]] inline void fire(Core& c, const Instr& in, double when);
  inline double hazard_start(PipeState& ps, const Instr& in, double ready) const;
  inline void gm_transfer(Core& c, const Instr& in, double start, Cost& cost, PipeStats& st);
  inline void drain(Core& c, Pipe p);
  [[gnu::always_inline]] inline bool start_wait(Core& c, Pipe p, PipeState& ps, PipeStats& st,
                                                const Instr& head);
  [[gnu::always_inline]] inline void start_set(Core& c, PipeState& ps, PipeStats& st,
                                               const Instr& in);
  [[gnu::noinline]] inline void set_now(Core& c, PipeState& ps, PipeStats& st, const Instr& in);
  [[gnu::noinline]] inline bool wait_now(Core& c, PipeState& ps, PipeStats& st, const Instr& in);
  [[gnu::noinline, gnu::cold]] inline void drop_wait(Core& c, PipeState& ps, const Instr& head);
  [[gnu::noinline]] inline void start_op(Core& c, Pipe p, PipeState& ps, PipeStats& st,
                                         const Instr& in);
  [[gnu::noinline]] inline void after_op(Core& c, Pipe p, const Instr& in, double start, double end,
                                         double occupancy);

  // ---- engine_setup.cc: templates, cores, the result ----
  static inline std::vector<int64_t> tensor_bytes(const lower::LoweredProgram& p);
  void setup_cores();
  void check_sync_all();
  inline void add_core(CoreKind kind, int ai, int vid, const lower::CoreProgram* prog);
  inline const std::vector<int32_t>& compile_code(const lower::Block& b,
                                                  const std::vector<IssueFacts>& facts);
  static inline StartCode start_code(const lower::CExpr& x, int64_t hi, int64_t stride, int acc,
                                     int d);
  int64_t flag_ids(const lower::OpTemplate& t) const;
  inline IssueFacts issue_facts(const lower::OpTemplate& t, std::vector<StartCode>& starts) const;
  SimResult collect();

  // ---- engine_memory.cc: memories, values, GM traffic ----
  void setup_memory();
  void setup_values();
  uint8_t* memory(Core& c, const lower::AccessTemplate& a);
  int64_t scalar_load(Core& c, const lower::LoadSite& site, const int64_t* index);
  void drain_values(const Core& c);
  void await_ub(const Core& c, const Access& a);
  static constexpr int64_t kUbPage = 1024;  // Core::ub_write_seq's granularity
  /// With `fills` (the exact run, not a replay): also the latest fill still in flight at
  /// `now` among the lines the copy hits, in `*landing` (0 if none), and its misses are
  /// remembered for L2Fills::filled.
  GmWork touch_gm(const lower::OpTemplate& t, const Access& a, L2Residency& l2, ReadRanges& ranges,
                  L2Fills* fills = nullptr, double now = 0, double* landing = nullptr);
  void execute_values(Core& c, const Instr& in);

  // ---- engine_flags.cc: scalar waits, cross-core flags ----
  bool try_scalar_wait(Core& c, const Instr& in);
  void consume_dropped(Core& c, const Instr& in);
  inline void cross_wait(Core& c, double before, CrossStats& st);
  void block(Core& c, double before, BlockedKind kind);
  inline void check_cross_overflow(const Ring<SetRecord>& q, double now, const Instr& in,
                                   const Core& c);
  [[noreturn, gnu::noinline, gnu::cold]] void double_set(const Core& c, const Ring<SetRecord>& q,
                                                         const Instr& wait);
  [[gnu::noinline]] void deliver_cross(Core& c, const Instr& in, double when);
  void arrive_all(Core& c, const Instr& in, double when);
  static inline void deliver(Core& c, Flag& f, const SetRecord& r);
  static inline void pending(Core& c, size_t n);

  // ---- engine_observe.cc: race detection, observers ----
  [[gnu::noinline]] int release(Core& c, const Instr& in);
  [[gnu::noinline]] void acquire_set(Core& c, Pipe pipe, const SetRecord& r, bool cross);
  [[gnu::noinline]] void observe_flag(const Core& c, Pipe pipe, const Instr& wait,
                                      const SetRecord& r, double from, double done, bool cross);
  int scalar_clock(Core& c);
  int new_clock(const VectorClock& vc);
  void collect_clocks();
  int race_site(Core& c, Pipe pipe, const lower::OpTemplate* op);
  void race_access(Core& c, Pipe pipe, const Access& a, RaceKind kind, int site,
                   bool store = false);
  [[gnu::noinline]] void observe_op(Core& c, Pipe p, const Instr& in, double start, double end,
                                    double occupancy);

  // ---- engine_fastforward.cc: jumps, address replay ----
  inline const GmSkeleton& skeleton(const Core& c) const;
  inline void find_outer_loops(const lower::CoreProgram& prog, const lower::Block& b);
  void setup_fast_forward();
  int64_t flags_in_flight(const Core& c) const;
  void try_jump();
  inline bool outside_observed(Jump& j) const;
  inline bool prove_traffic(Jump& j);
  inline int64_t replay(int64_t m, L2Residency& l2, std::vector<ReadRanges>& ranges);

  // ---- engine_checks.cc: errors, end-of-run checks ----
  [[noreturn]] void fail(const ir::Loc& loc, const std::string& kind, std::string msg,
                         std::string hint);
  inline std::string where(const Core& c) const;
  /// The core's loop state for reports: cid, then each enclosing loop's line and value.
  void loop_values(const Core& c, std::vector<int64_t>& out) const;
  std::string loop_state(const Core& c) const;
  [[noreturn, gnu::cold, gnu::noinline]] void slice_out_of_bounds(const Core& c,
                                                                  const lower::AccessTemplate& a,
                                                                  const lower::OpTemplate& t, int d,
                                                                  int64_t s);
  [[noreturn, gnu::cold, gnu::noinline]] void bad_flag_id(const Core& c, const lower::OpTemplate& t,
                                                          int64_t id);
  [[noreturn, gnu::cold, gnu::noinline]] void interrupted(double t);
  [[noreturn, gnu::cold, gnu::noinline]] void division_by_zero(const Core& c, const ir::Loc& loc);
  [[gnu::cold]] void check_limits(std::chrono::steady_clock::time_point started, double t);
  [[noreturn, gnu::noinline, gnu::cold]] void over_budget(const Core& c, const lower::OpTemplate& t,
                                                          double end);
  void check_invariants(const SimResult& r) const;
  inline std::string flag_state(const LastSet& s) const;
  void check_finished();
  [[noreturn]] void unfinished_sync_all(int id);
  void unmatched_flags(const Core& c, const std::string& when,
                       std::vector<Diagnostic>& diags) const;
  void unmatched_cross(size_t ai, const std::string& when, std::vector<Diagnostic>& diags) const;
  std::string unmatched_hint(const Core& c, const lower::OpTemplate& set, size_t id) const;
  static std::vector<Diagnostic> merge_across_cores(std::vector<Diagnostic> diags);
  /// Throws the flag errors `diags` with the races found so far after them: a missing wait
  /// is often both, and the race names the two lines it leaves unordered.
  [[noreturn]] void fail_flags(std::vector<Diagnostic> diags);
  /// The races found so far, write-write pairs decided by their values first.
  bool race_found();

  // ---- state ----
  const lower::LoweredProgram& p_;
  const ChipConfig& chip_;
  HostData* io_;
  SimOptions opts_;
  bool functional_;
  /// Functional runs: per GM tensor of role Output, the elements an instruction wrote (empty
  /// for the other tensors); SimResult::unwritten.
  std::vector<std::vector<bool>> written_;
  std::vector<std::vector<uint8_t>> gm_;
  std::vector<Core> cores_;
  std::vector<CrossFlags> cross_;
  using HeapItem = std::pair<double, int>;
  std::priority_queue<HeapItem, std::vector<HeapItem>, std::greater<>> heap_;
  int depth_;                    // issue.pipe_queue_depth, read for every instruction
  double launch_, block_start_;  // die.launch_us, die.block_start_us in cycles
  // Block boundaries (next_block): per AI core, its cores that have finished the current
  // block and the latest end among them; the cores per AI core.
  struct BlockEnd {
    int arrived = 0;
    double end = 0;
  };
  std::vector<BlockEnd> block_ends_;
  // T.sync_all (is_sync_all sets), per flag id: the cores arrived, the last arrival.
  struct AllSync {
    int arrived = 0;
    double latest = 0;
    std::vector<char> here;  // per core: arrived at the open barrier
  };
  std::vector<AllSync> sync_all_;
  int members_ = 0;
  BandwidthLedger hbm_, l2_;
  L2Residency l2res_;
  L2Fills fills_;
  std::unique_ptr<RaceDetector> race_;
  std::vector<int64_t> race_loops_;  // race_site's loop state, kept to reuse its storage
  bool op_hooks_ = false;            // race_, an observer or functional_: start_op calls after_op
  // Released / snapshot clocks referenced by index (SetRecord::vc, Instr::s_clock,
  // Core::s_clock); collect_clocks frees the entries none refers to, new_clock reuses them.
  std::vector<VectorClock> clocks_;
  std::vector<int32_t> free_clocks_;
  size_t clocks_collect_at_ = size_t{1} << 16;  // clocks_ size that triggers collect_clocks
  // Fast-forward (steady.h): enabled for this run, outermost loops of the programs, a
  // back-edge found a steady core since the last look, what was skipped.
  bool ff_ = false;
  std::vector<OuterLoop> outer_loops_;
  GmSkeleton skeleton_aic_, skeleton_aiv_;
  bool jump_check_ = false;
  FastForwardStats jumped_;
  std::unordered_set<const lower::OpTemplate*> free_ops_;
  std::array<std::vector<Cost>, 2> costs_;  // instr_cost per template of the AIC / AIV program
  std::array<std::vector<IssueFacts>, 2> facts_;  // issue_facts, likewise
  Instr scratch_;                                 // the pipe instruction being issued (run_core)
  std::array<std::vector<StartCode>, 2> starts_;  // issue_facts' starts
  std::unordered_map<const lower::Block*, std::vector<int32_t>> code_;  // fetch's view of blocks
  std::vector<Control> controls_;
  bool values_ = false;  // the run keeps values somewhere (functional, or scalar reads)
  // Last: destroyed first, its workers stopped before the memories they write go.
  std::unique_ptr<ValueExecutor> values_exec_;
};
#pragma GCC visibility pop

}  // namespace tilepipe::sim

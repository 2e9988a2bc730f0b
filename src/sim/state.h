// The simulated state of the die's cores: scalar unit, pipe scoreboards, flag queues and
// what each core has done so far. Shared by the engine (which advances it) and the
// steady-state fast-forward (which shifts it in time, steady.h).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "bandwidth.h"
#include "dcache.h"
#include "instr.h"
#include "ring.h"
#include "tilepipe/sim.h"

namespace tilepipe::sim {

constexpr int kPipes = ir::kNumPipes;

struct SetRecord {
  double time = 0;   // cycle the flag becomes visible to the waiter
  double fired = 0;  // cycle the set fired on its pipe
  const lower::OpTemplate* op = nullptr;
  int core = 0;  // setter
  int vc = -1;   // race detection: released clock (index into the engine's clocks)
};

struct Frame {
  const lower::Block* block;
  size_t pos;
  const lower::Item* loop;  // null for non-loop blocks
  int64_t end;
  // The engine's fetch reads the block through its code (Engine::code_): per item, the
  // instruction to issue, or kSkipped / kControl. Null in frames that only walk items.
  const int32_t* code = nullptr;
  size_t size = 0;  // items in the block
};

struct RecentWrite {
  int mem = -1;
  int64_t lo = 0, hi = 0;
  double end = 0;
};

/// Where the cycle account of one pipe stands: time is accounted up to `t`.
struct PipeAcct {
  double t = 0;
  size_t cursor = 0;  // next Blocked interval (absolute index) that may overlap a gap
  bool started = false;
};

struct PipeState {
  double ready = 0;  // earliest start of the next instruction
  double done = 0;   // all work issued so far on this pipe has finished
  Ring<Instr> queue;
  static constexpr int kRecent = 16;  // a power of two: next_recent wraps by a mask
  static_assert(std::has_single_bit(static_cast<unsigned>(kRecent)));
  std::array<RecentWrite, kRecent> recent{};  // same-pipe RAW/WAW window (docs/simulator.md)
  int next_recent = 0;
  // Bit i: recent[i] ends after `ready` and the last instruction's issue, so it may still
  // delay an instruction; the others never will again (both only grow), and the hazard
  // check skips them.
  uint32_t live = 0;
  // The bounded instruction queue (issue.pipe_queue_depth): start times of the last `depth`
  // instructions that left it, indexed by how many left before them.
  std::vector<double> started;
  int pop_slot = 0;  // instructions popped modulo the depth
  PipeAcct acct;     // evidence: the pipe's cycle account position
};

/// Last set of a flag, for deadlock reports.
struct LastSet {
  double time = -1;
  const ir::Loc* loc = nullptr;
};

/// One flag (intra-core: a pipe pair and id; cross-core: a direction, AIV and id), kept
/// together because a set and a wait touch all of it: one cache line.
struct alignas(64) Flag {
  Ring<SetRecord> sets;  // in flight, oldest first
  LastSet last;
  int debt = 0;  // dropped waits that found no set: swallow the next sets
};
static_assert(sizeof(Flag) == 64);

/// What blocked the scalar unit in a Blocked interval.
enum BlockedKind { kBlockedCross, kBlockedFlag, kBlockedBarrier };

/// An interval in which the scalar unit was blocked: a cross-core wait, an X->S flag, or a
/// block boundary (the core's previous block draining, the next one starting).
struct Blocked {
  double b = 0, e = 0;
  int kind = kBlockedCross;
};

/// What a core has done so far: the counters a run reports. Fast-forward extrapolates
/// them, so every counter of a core lives here.
struct Tally {
  std::array<PipeStats, kPipes> pipes{};  // account: evidence, where each pipe's cycles went
  std::vector<WaitSite> waits;            // per instruction template of the core's program
  int64_t executed = 0;                   // compute and copy instructions
  double hbm_bytes = 0, l2_bytes = 0;
  double charged_bytes = 0;                    // bandwidth the GM runs cost (GmWork::charged)
  double blocked_cross = 0, blocked_flag = 0;  // scalar unit blocked on cross / X->S waits
  double blocked_barrier = 0;                  // ... at block boundaries
  double blocked_queue = 0;                    // scalar unit stalled on a full pipe queue
  ScalarLoadStats scalar_loads;                // scalar reads of GM elements
  CrossStats c2v, v2c;                         // sets counted by the setter, waits by the waiter
  std::array<double, 2> pending_sum{};         // sets in flight seen by each new set: c2v, v2c
  std::array<int64_t, 2> pending_n{};

  /// m more iterations like the `span` iterations between `earlier` and `later`.
  void add_iterations(const Tally& later, const Tally& earlier, int64_t span, int64_t m);
};

/// The core's state at the back-edges of one top-level loop (steady.h).
struct LoopSnapshot {
  int64_t iter = 0;  // loop variable of the next iteration
  double t = 0;
  Tally tally;
  // What must repeat, shifted in time, for the core to be in a steady state: each pipe's
  // clocks and queue, and the flag sets in flight towards the core.
  std::array<double, kPipes> ready{}, done{};
  std::array<int64_t, kPipes> queued{};
  int64_t flags_in_flight = 0;
};

struct LoopHistory {
  const lower::Item* loop = nullptr;
  int64_t period = 1;              // iteration_period of the loop (steady.h)
  bool gm_moves = true;            // its GM addresses move with the iteration (gm_moves)
  std::deque<LoopSnapshot> snaps;  // the last few back-edges, oldest first
};

struct Core {
  int index = 0;
  ir::CoreKind kind = ir::CoreKind::C;
  int ai_core = 0;
  int vid = 0;
  const lower::CoreProgram* prog = nullptr;
  const Cost* costs = nullptr;  // instr_cost of each template of prog (the engine's)
  std::vector<int64_t> slots;
  std::vector<Frame> stack;
  int64_t next_block = 0;
  double t = 0;
  bool stream_done = false;
  bool has_pending = false;  // scalar blocked on this instruction
  Instr pending;
  bool in_heap = false;
  std::array<PipeState, kPipes> pipes;
  std::vector<Flag> flags;                    // [(src * 7 + dst) * ids + id]
  std::array<std::vector<uint8_t>, 6> local;  // per ir::Scope
  // Functional mode: per 1 KiB page of UB, the value executor's sequence number of the last
  // instruction writing it, so a scalar read of UB waits for that write only, not for
  // every instruction queued before it (a gather's per-row index reads).
  std::vector<uint64_t> ub_write_seq;
  CoreStats stats;  // identity; counters are in `tally`
  Tally tally;
  LoopHistory history;
  int role = 0;      // race threads: 0 AIC, 1 AIV0, 2 AIV1
  int s_clock = -1;  // snapshot of the scalar unit's clock, -1 = stale
  // Evidence: scalar-blocked intervals, read-only GM ranges read.
  Ring<Blocked> blocked;
  size_t blocked_base = 0;
  ReadRanges read_ranges;
  ScalarDCache dcache;
};

/// Cross-core counting semaphores of one AI core (mode 2): C->V per AIV and V->C per AIV.
struct CrossFlags {
  std::array<std::vector<Flag>, 2> c2v, v2c;
};

}  // namespace tilepipe::sim

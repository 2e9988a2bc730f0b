// Steady-state fast-forward of timing runs (docs/simulator.md, "Fast-forward").
//
// A long kernel is mostly one outermost loop per core (FA: the task loop, GEMM: the tile
// loop) whose iterations, once the pipelines have filled, do the same work in about the
// same time. At each back-edge of that loop a core records its clocks, queues and counters.
// A core is steady when, over its last window of iterations, every iteration did the same
// instructions and GM traffic, and its state at the window's first, middle and last
// back-edge is one state shifted in time: the same queue lengths and flags in flight, and
// every active pipe's clocks advancing with the scalar unit, equally in both halves. (A
// scalar unit that runs ahead of pipes it does not wait for is not steady: the distance
// grows.) When every running core is steady, the engine replays the GM addresses of the
// iterations it would skip through the L2 model (engine_fastforward.cc) and jumps only over
// those whose traffic equals the window's: each AI core's clocks, flags and queued
// instructions move by m times its mean period, each loop variable by m iterations (a
// multiple of iteration_period), and each counter by m times its mean increment. The last
// `tail` iterations of every loop and everything after it are simulated in full. A core
// between two of its blocks (engine.cc, next_block) is in no loop, so nothing jumps while
// one waits there, and each block's loop starts a new history.
//
// Only timing runs whose control flow and addresses do not depend on data can jump (no
// scalar loads); runs with an observer (trace) or race detection never jump. What the jump
// ignores: the sub-bucket phase of the bandwidth ledgers, and the addresses of the few
// instructions already queued at the jump (they keep those of the iteration they were
// issued in).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "state.h"

namespace tilepipe::sim {

/// The iterations after which the on-chip state of `loop` (in `prog`) repeats: the lcm of
/// the moduli and divisors applied to its variable in flag ids, on-chip addresses and
/// control flow (3 for a loop that rotates through 3 buffers); 0 if unknown (the loop is
/// not fast-forwarded).
int64_t iteration_period(const lower::CoreProgram& prog, const lower::Item& loop);

/// Whether the GM addresses that `loop`'s iterations touch move with the iteration (its
/// variable reaches a GM operand's start, a nested loop's bounds or a branch): only then
/// must a jump replay them to prove what the L2 serves.
bool gm_moves(const lower::CoreProgram& prog, const lower::Item& loop);

/// For each block of a program, the positions of its items that are or contain a GM copy:
/// the part of the control flow the address replay walks.
using GmSkeleton = std::unordered_map<const lower::Block*, std::vector<size_t>>;
GmSkeleton gm_skeleton(const lower::CoreProgram& prog);

/// Records core `c`'s state at a back-edge of its top-level loop frame `f` (the loop
/// variable already holds the next iteration); `flags_in_flight` counts the sets waiting
/// to be consumed by the core. True when the core is steady, so a jump may have become
/// possible.
bool record_backedge(Core& c, const Frame& f, int64_t flags_in_flight, const FastForwardOptions& o);

/// GM traffic of one iteration: what the address replay must find again in every
/// iteration it skips.
struct GmWork {
  double hbm = 0, l2 = 0, reloaded = 0;  // bytes served by HBM / by L2, MTE2 re-reads
  double charged = 0;  // bandwidth bytes the runs cost (dma.min_burst_bytes, alignment)
  int64_t transfers = 0;
  /// Byte counts are whole numbers and compare exactly; `charged` is a sum of fractions,
  /// equal up to rounding.
  bool operator==(const GmWork& o) const {
    return hbm == o.hbm && l2 == o.l2 && reloaded == o.reloaded && transfers == o.transfers &&
           std::abs(charged - o.charged) <= 1e-9 * std::max(1.0, std::abs(charged));
  }
  GmWork& operator+=(const GmWork& o) {
    hbm += o.hbm;
    l2 += o.l2;
    reloaded += o.reloaded;
    charged += o.charged;
    transfers += o.transfers;
    return *this;
  }
};

/// The traffic core `c` did in the window iteration on the phase of its i-th iteration
/// from the current one (c is steady).
GmWork expected_gm_work(const Core& c, int64_t i);

struct Jump {
  int64_t iterations = 0;      // 0: no jump possible now
  int64_t period = 1;          // iterations is a multiple of this
  std::vector<double> cycles;  // per AI core: iterations * its mean period
  double mean_cycles = 0;      // for what the AI cores share (bandwidth ledgers)
  /// The same jump over its first m iterations.
  void shorten(int64_t m) {
    const double f = static_cast<double>(m) / static_cast<double>(iterations);
    for (double& dt : cycles) dt *= f;
    mean_cycles *= f;
    iterations = m;
  }
};

/// The jump every running core can take now: each is inside its steady outermost loop and
/// keeps its last `o.tail` iterations. The caller still proves the skipped iterations'
/// GM traffic by replaying their addresses.
Jump plan_jump(const std::vector<Core>& cores, size_t ai_cores, const FastForwardOptions& o);

/// Shifts the cores and the cross-core flags by `j` (the caller shifts what else holds
/// times: bandwidth ledgers, its schedule of runnable cores).
void apply_jump(const Jump& j, std::vector<Core>& cores, std::vector<CrossFlags>& cross,
                const FastForwardOptions& o);

}  // namespace tilepipe::sim

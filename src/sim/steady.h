// Steady-state fast-forward of timing runs (docs/simulator.md, "Fast-forward").
//
// A long kernel is mostly one outermost loop (FA: the task loop of every core) whose
// iterations, once the pipeline has filled, do the same work in about the same time (the
// shared bandwidth makes each iteration jitter by a few tenths of a percent). At each
// back-edge of that loop a core records its clocks and counters. When every running core
// has done the same instructions in each iteration of its last window (sim.h,
// FastForwardOptions), without a trend
// in their duration, the die is shifted forward by m iterations at once: each AI core's
// clocks, flags and queued instructions move by m times its mean period, each loop
// variable by m iterations (a multiple of iteration_period), and each counter by m times its mean
// increment. The last `tail` iterations of every loop and everything after it are simulated in
// full.
//
// Only timing runs whose control flow and addresses do not depend on data can jump (no
// scalar loads); runs with an observer (trace) or race detection never jump. What the jump
// ignores: which lines the skipped iterations made L2-resident (their number is kept, and
// a jump never fills the L2; the lines matter only if later code re-reads them) and the
// sub-bucket phase of the bandwidth ledger.
#pragma once

#include <cstdint>
#include <vector>

#include "state.h"

namespace tilepipe::sim {

/// The iterations after which the on-chip state of `loop` (in `prog`) repeats: the lcm of
/// the moduli and divisors applied to its variable in flag ids, on-chip addresses and
/// control flow (3 for a loop that rotates through 3 buffers); 0 if unknown (the loop is
/// not fast-forwarded).
int64_t iteration_period(const lower::CoreProgram& prog, const lower::Item& loop);

/// Records core `c`'s state at a back-edge of its top-level loop frame `f` (the loop
/// variable already holds the next iteration). True when the core's last window of
/// iterations was alike, so a jump may have become possible.
bool record_backedge(Core& c, const Frame& f, int64_t l2_resident, const FastForwardOptions& o);

struct Jump {
  int64_t iterations = 0;      // 0: no jump possible now
  std::vector<double> cycles;  // per AI core: iterations * its mean period
  double mean_cycles = 0;      // for what the AI cores share (bandwidth ledgers)
  int64_t l2_fill = 0;         // bytes the skipped iterations would have made L2-resident
};

/// The jump every running core can take now: each is inside its steady outermost loop and
/// keeps its last `o.tail` iterations, and the iterations skipped would not fill the
/// `l2_room` bytes the L2 has left (filling it changes what later iterations hit).
Jump plan_jump(const std::vector<Core>& cores, size_t ai_cores, int64_t l2_room,
               const FastForwardOptions& o);

/// Shifts the cores and the cross-core flags by `j` (the caller shifts what else holds
/// times: bandwidth ledgers, its schedule of runnable cores).
void apply_jump(const Jump& j, std::vector<Core>& cores, std::vector<CrossFlags>& cross,
                const FastForwardOptions& o);

}  // namespace tilepipe::sim

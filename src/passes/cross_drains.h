// Cross-core flags a kernel leaves set at its end, taken back by waits at the end of the
// waiting core's last scope.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// The original's hand-synced kernels prime a hand-off with credits (`set_cross_flag` before
/// the loop) that nothing takes back: the hardware drops flags still set when the kernel
/// ends, tilepipe's simulator reports them (`unmatched-flag`). Per cross-core flag id, the
/// pass counts the mode-2 sets of one core kind against the waits of the other over the
/// whole program (each statement counted once per iteration of the loops around it) and,
/// when the sets exceed the waits by a constant, appends that many waits at the end of the
/// waiting core kind's last scope.
/// - The Cube's sets reach both vector cores, so each AIV's excess is counted on its own
///   waits: a Vector wait on `c + vid` is flag c on AIV 0 and c + 1 on AIV 1, and a wait only
///   one AIV needs goes under `if vid == v`. A Vector set counts once (both AIVs set it).
/// - Not counted: a flag id that is neither a constant nor `c + vid` on a vector core, and
///   T.sync_all's flag (a barrier, not a hand-off). A flag under a run-time `if`, or in a
///   loop whose trip count differs from the other side's by more than a constant, leaves its id's
///   balance unknown: no drain for it.
/// Off by default: in tilepipe's own kernels a flag left set is a bug to report. The Python
/// front end switches it on for the original's files (docs/passes.md).
ir::Program cross_drains(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

// Gemms on L1 operands (the original's gemm_v0 / T.gemm), staged through L0A / L0B.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// Each `gemm_l1 A x B -> C` becomes what the original's gemm_v0 runs: K cut into chunks,
/// each chunk's L1 operands copied into L0A / L0B staging tiles (MTE1) and multiplied into
/// C (M), the first chunk with the statement's init (a run-time init: an `if` over an init
/// and an accumulating mmad), the others accumulating. An operand already in L0A / L0B is
/// sliced, not copied (a gemm with neither operand in L1 is one mmad). Staging tiles are
/// allocated where the gemm stands and shared by the gemms of one source location with the
/// same shape and dtype (`gemm_l0a_64x128`).
///   - Where auto_sync places the flags (a scope without hand flags, auto_sync on): chunks
///     halve K while they divide it into whole fractals and an A or B staging tile is
///     larger than a quarter of L0A / L0B (16 KiB on A2/A3); one staging tile per operand.
///   - Where the author syncs (a scope with intra-core flags or barriers; unscoped Cube code
///     with flags on MTE1 / M / FIX when original_split splits it; or auto_sync off): the
///     original's library, with its own flags: K chunks of 128 ping-ponging two L0 slots
///     under M <-> MTE1 flags (ids 0 and 1), after earlier MTE2 / FIX work and before later.
/// Requires: the program verified with VerifyOptions::gemm_l1. Guarantees: no gemm_l1.
ir::Program gemm_l1(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

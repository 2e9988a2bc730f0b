// GM <-> UB copies that change dtype, as a copy and a vector cast.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// The DMA units move bytes and do not convert (only FixPipe, out of L0C, does). A
/// `copy(src, dst)` between GM and UB whose two sides have different dtypes (an f16 tensor
/// into an f32 tile, which TileLang-Ascend's T.copy accepts) becomes what the original
/// compiles it to:
///   GM -> UB:  alloc t (UB, dst's extents, src's dtype); copy(src, t); cast(dst, t)
///   UB -> GM:  alloc t (UB, src's extents, dst's dtype); cast(t, src); copy(t, dst)
/// so the time is the DMA of the narrower or wider bytes plus one vector cast. t (`cast_tmpN`)
/// is allocated where the copy stands, one per copy. In a scope with hand-written flags,
/// a set / wait pair (event id kBarrierEventId, barrier_all's) orders the copy and the
/// cast, which the author's flags around the copy do not see; elsewhere auto_sync does.
/// Requires: the program verified with VerifyOptions::cast_copies.
ir::Program copy_cast(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

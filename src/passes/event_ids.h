// Event ids past the chip's count renamed into it, per core kind and pipe pair.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// The original's kernels use intra-core event ids up to 15 (moe_token_permute_grad's
/// `set_flag("mte2", "v", 10)`, the SFA files' 8-11); A2 / A3 have `sync.event_ids` (8) per
/// pipe pair. Flags match by (core, src, dst, id) only, so an injective renaming of one
/// pair's ids keeps the program's meaning and its timing. Per core kind (C / V) and pipe
/// pair, over the whole program:
/// - every id a constant: each id past the range -> an id of the range the pair does not
///   use, in ascending order;
/// - some id a run-time value (`i % 2 + 10`): every id of the pair (constants too) shifted
///   down by the lowest, when every id's range is known and all lie in a window of the
///   chip's count.
/// A constant past the range that only ever appears as a handshake (`set_flag(a, b, 10);
/// wait_flag(a, b, 10)`, the wait the next instruction) is renamed last: into an id no other
/// flag of the pair uses, else into one that holds no token in program order at every
/// execution of the handshake (the pair's flags run alone with every loop bound, guard and
/// id evaluated, for each vid; a bound or id depending on cid or a loaded value proves
/// nothing). Program order is what the count sees: where the src pipe runs ahead of the dst
/// pipe, a set of the shared id can still fire before the other use's token was taken; the
/// engine's flag-double-set check sees that only in some processing orders (docs/passes.md).
/// A pair none of this fits is an error at its first id past the range (UserError).
ir::Program event_ids(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

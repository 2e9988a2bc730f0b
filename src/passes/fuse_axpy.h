// Vectorisation and fusion: per-row scalar loops become broadcast + axpy, and a scaled
// temporary added into a tile becomes one axpy.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// In every automatic scope (no hand flags), fuses `tile::mul(t, x, s)` followed later in
/// the same statement sequence by `tile::add(d, d, t)` / `tile::add(d, t, d)` into
/// `tile::axpy(d, x, s)` at the add's position, and `tile::sub(d, d, t)` with an immediate
/// s into `tile::axpy(d, x, -s)`; the mul is removed.
///
/// Requires (else nothing changes): f32 tiles (axpy does not round s * x to the tile's
/// dtype, so f16 / bf16 would change values); d, x and t in distinct buffers (or x == t,
/// an in-place mul); no buffer pinned; between the mul and the add no statement touches
/// t's or d's buffer or writes a buffer the mul reads (x, the scalar); t's value is dead
/// after the add: the next statement of the sequence touching t's buffer overwrites all of
/// it without reading it, or none does, nothing outside the sequence touches it and
/// (inside a loop) the first statement of the sequence touching it is such an overwrite.
///
/// First, vectorises per-row scalar loops: `for r in [b, b + n)` whose body is exactly
/// `muls(B(r, ..), W(r, ..), s); adds(B(r, ..), B(r, ..), at(m, {.., r, ..}))` becomes
/// `broadcast(B(b:+n, ..), m(.., b:+n, ..)); axpy(B(b:+n, ..), W(b:+n, ..), s)` when r
/// only indexes one dimension of each operand, s does not depend on r, the operands are
/// f32, B is distinct from W and m, m's rows are contiguous and every operand stays
/// 32-byte aligned (docs/passes.md).
ir::Program fuse_axpy(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

// Vectorisation of Parallel loops into tile ops.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// Rewrites every nest of `parallel` loops (constant bounds, step 1; a loop whose body is
/// one more parallel loop adds a lane) into its body's statements over all lanes at once.
/// The body is element code: tile ops, reductions and copies whose operands index a
/// dimension with a lane's variable as `v + offset` (offset free of lanes, 0 included;
/// extent 1 there). Each such dimension widens to the lane's trips: `add(c(r, all),
/// a(r, all), b(r, all))` becomes `add(c(0:n, all), a(0:n, all), b(0:n, all))`, and in a
/// 2-D nest `add(d[i, j], a[i, j], v[i])` becomes `broadcast(t, v[0:R]); add(d, a, t)`:
///  - a tile op's source spanning one lane of a 2-D nest, a row vector v[i] or a column
///    vector w[j], is broadcast into a UB temporary (`par_bcN`) of the destination's shape,
///    through a [1, C] (`par_rowN`) or [R, 1] (`par_colN`) copy when its slice has the other
///    orientation or the nest is square (a broadcast op's own source is oriented the same
///    way). One temporary per statement location and position, reused where a statement
///    repeats (a macro, an unrolled loop), allocated where it is first used;
///  - a source spanning no lane is refused unless it has the destination's size;
///  - a per-lane scalar `op(d(r, ..), s(r, ..), at(m, {r, ..}))` (add, sub, mul, div, max,
///    min) becomes `broadcast(d, m(0:n)); op(d, s, d)` when d overlaps neither operand.
///  - a lane's variable used as a value, `arange(d[i, j], j + off)` (each element its own
///    index), becomes one arange over the lane's trips, broadcast into d in a 2-D nest
///    through a [1, C] (`par_rowN`) or [R] (`par_colN`) temporary: CreateVecIndex, then
///    Broadcast, as the hardware computes it.
/// The iterations of a Parallel loop are independent (the author's promise), so running
/// each statement for every lane before the next is the same computation. The nest's
/// statements take its place in the enclosing sequence.
///
/// A Parallel loop that cannot be vectorised stops with UserError "vectorize" naming the
/// statement and why (never a silent serial loop); write it with serial(...) to keep it
/// scalar. What the verifier finds in the widened tiles is the author's error too
/// (run_passes reports it as a UserError).
ir::Program vectorize(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

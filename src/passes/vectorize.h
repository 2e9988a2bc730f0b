// Vectorisation of Parallel loops into tile ops.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// Rewrites every nest of `parallel` loops (constant bounds, step 1; a loop whose body is
/// one more parallel loop adds a lane) into its body's statements over all lanes at once.
/// The body is element code: tile ops, reductions and copies whose operands index a
/// dimension with a lane's variable `v` or `v + offset` (extent 1 there). Each such
/// dimension widens to the lane's trips: `add(c(r, all), a(r, all), b(r, all))` becomes
/// `add(c(0:n, all), a(0:n, all), b(0:n, all))`, and in a 2-D nest `add(d[i, j], a[i, j],
/// v[i])` becomes `broadcast(t, v[0:R]); add(d, a, t)`:
///  - a source with fewer lanes than the destination is broadcast into a UB temporary
///    (`par_bcN`) of the destination's shape: a lane-free operand down the lanes, and in a
///    2-D nest a row vector v[i] or a column vector w[j], through a [1, C] (`par_rowN`) or
///    [R, 1] (`par_colN`) copy when its slice has the other orientation. One temporary per
///    statement location and position, reused where a statement repeats (an unrolled
///    loop's copies), allocated where it is first used;
///  - a per-lane scalar `op(d(r, ..), s(r, ..), at(m, {r, ..}))` (add, sub, mul, div, max,
///    min) becomes `broadcast(d, m(0:n)); op(d, s, d)` when d overlaps neither operand.
/// The iterations of a Parallel loop are independent (the author's promise), so running
/// each statement for every lane before the next is the same computation. The nest's
/// statements take its place in the enclosing sequence.
///
/// A Parallel loop that cannot be vectorised stops with UserError "vectorize" naming the
/// statement and why (never a silent serial loop); write it with serial(...) to keep it
/// scalar.
ir::Program vectorize(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

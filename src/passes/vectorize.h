// Vectorisation of Parallel loops into tile ops.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// Rewrites every `parallel(n, r)` loop (constant bounds, step 1) whose body is a sequence
/// of tile ops, reductions and copies, each operand indexing one dimension with exactly r
/// (extent 1), into the same statements over all n rows at once: `add(c(r, all), a(r, all),
/// b(r, all))` becomes `add(c(0:n, all), a(0:n, all), b(0:n, all))`. A per-row scalar
/// `op(d(r, ..), s(r, ..), at(m, {r, ..}))` (add, sub, mul, div, max, min) becomes the
/// row-broadcast pattern `broadcast(d, m(0:n)); op(d, s, d)` when d does not overlap s.
/// The iterations of a Parallel loop are independent (the author's promise), so running
/// each statement for every row before the next is the same computation.
///
/// A Parallel loop that cannot be vectorised stops with UserError "vectorize" naming the
/// statement and why (never a silent serial loop); write it with serial(...) to keep it
/// scalar.
ir::Program vectorize(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

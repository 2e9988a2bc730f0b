// L1 residency: loop-invariant loads into L1 hoisted out of the loops that reuse them.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// In every automatic Cube scope, a GM -> L1 copy of a kernel input at the top level of a
/// loop body is hoisted before the loop ("large reuse": Q in FA, loaded once per task and
/// kept resident across the KV loop) when the loop does not change it: its source does not
/// depend on the loop variable, nothing else in the loop writes its L1 buffer, it is the
/// loop's first access of that buffer and covers all of it, and nothing outside the loop
/// touches the buffer. Hoisting repeats outward while those hold.
///
/// A hoisted buffer is no longer multi-buffered, so hoisting only frees L1; it is skipped
/// ("small reuse": re-loaded per iteration) when the scope's L1 estimate — every L1 buffer,
/// those written in a Pipelined loop num_stages times — exceeds the capacity, since the
/// longer live range could then be what overflows.
ir::Program l1_residency(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

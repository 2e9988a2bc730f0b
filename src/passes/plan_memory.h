// MEMORY_PLANNING: liveness-based placement of on-chip buffers.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// Places the on-chip buffers of each core kind whose scopes are all automatic (no hand
/// flags): two buffers share bytes only when their live ranges do not overlap. A buffer's
/// live range runs from its first to its last access in program order, widened to every
/// loop that uses it, does not allocate it, and carries its value across iterations (the
/// body may read it before overwriting all of it: dependence.h `exposed`).
/// Placement is first-fit by decreasing size, aligned (UB 32 bytes, L1/L0 l1_align);
/// addresses pinned by the author (Program::addresses) are kept. Core kinds with a
/// hand-synced scope keep the sequential layout (reuse would add hazards the hand flags
/// do not order). Runs before auto_sync, which sees reused bytes as aliasing.
///
/// Throws UserError "capacity" when a scope does not fit: the buffers live at the peak
/// with sizes and allocation lines, and the largest slot count (num_stages) of the
/// multi-buffers live there that would fit.
ir::Program plan_memory(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

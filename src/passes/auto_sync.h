// AUTO_SYNC: intra-core set/wait flags from read/write dependences.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// Inserts set_flag / wait_flag pairs into every scope that has no hand-written intra-core
/// flag or barrier (scopes with any are left exactly as written).
///
/// Requires: a verified program. Guarantees: every cross-pipe dependence between two
/// statements of a scope (RAW, WAR, WAW; within an iteration or loop-carried) is ordered by
/// a flag chain; every set is consumed by exactly one wait on every path (any trip count,
/// either branch); no id has two sets outstanding; event ids are allocated by lifetime
/// within chip.event_ids: where a pipe pair needs more at once, full barriers (the
/// original's PipeBarrier<PIPE_ALL>, spelt through the hub pipe) cover every dependence
/// across them and free the ids (UserError "auto-sync-ids" only when a barrier at every
/// gap does not suffice). Flags sit at the level of the
/// innermost sequence holding both statements: the set right after the producer, the wait
/// right before the consumer. Loop-carried dependences at distance d rotate through
/// min(d, max_rotation) ids (credit style, so multi-buffered loops keep their overlap).
/// Syncs implied by program order (same pipe, or the scalar unit as producer) or by a chain
/// of other syncs are not inserted. No other barriers: same-pipe hazards are ordered by the
/// pipe itself (architecture.md decision 2).
ir::Program auto_sync(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

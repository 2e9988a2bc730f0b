// Pipelined loops in hand-synced scopes, scheduled as TileLang-Ascend's compiler schedules
// them: GM -> UB copies of later iterations ahead, their buffers versioned.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// The original pipelines a `T.Pipelined` loop whether or not its scope carries the author's
/// flags (src/transform/pipeline_planning.cc, inject_pipeline.cc; read, not copied). Each
/// top-level statement of the loop body is a block (the Python front end wraps each source
/// statement in a SeqStmt; in the C++ DSL each statement is one):
/// - a block that is nothing but GM -> UB copies into one buffer that a later block uses is
///   a copy stage: stage 0, ordered right after its last user; every other block is stage
///   num_stages, in program order. When all copies end up after every other block, the
///   order rotates them to the front and the other blocks' stage drops by one;
/// - a buffer written at stage d and used up to stage u gets u - d + 1 versions (one fewer
///   unless a writer precedes a user in order at a lower stage), indexed by the writer's
///   iteration modulo the versions: a new buffer `NAME_v` of shape [versions, *shape],
///   allocated right before the loop;
/// - the loop becomes a prologue (iterations whose every block has not yet started), a body
///   loop `VAR_pipe` over the steady iterations, every block at its iteration (the loop
///   variable minus its stage), and an epilogue. Guards the iteration decides are folded.
/// The author's flags move with their statements. Every block in one stage (no copy into
/// UB, or one iteration with the copies first): the loop runs serially, as written.
/// UserError (kind "pipelined") at the loop: a run-time trip count or a step other than 1,
/// a binding in the body, a GM copy nested in a block, a condition reading a copied buffer,
/// a versioned buffer used outside the loop. Off by default (a Pipelined loop in a
/// hand-synced scope is then multibuffer's error); the Python front end switches it on.
ir::Program hand_pipeline(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

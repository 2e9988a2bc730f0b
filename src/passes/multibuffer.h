// Intra-core multi-buffering of Pipelined loops.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// Turns every `pipelined(n, {num_stages})` loop inside an automatic scope (no hand
/// flags) into a serial loop whose stage-crossing buffers have num_stages versions.
///
/// A buffer is versioned when it carries a value from one pipe to another inside an
/// iteration (copy in on MTE2, compute on V: a value crossing stages) and its value does
/// not carry across iterations: the first statement of the body that touches it writes all
/// of it without reading it, and nothing outside the loop touches it. It becomes
/// [num_stages, ...] and iteration i uses slot (i - begin) / step % num_stages. Scratch
/// used by one pipe only, and buffers that carry a value across iterations (accumulators),
/// keep one copy. auto_sync then rotates its flags through the slots, so iteration i + 1
/// loads while iteration i computes: the prologue / steady state / epilogue are the
/// guarded waits and the drains of those flags, correct for any trip count.
///
/// Throws UserError "pipelined" for a Pipelined loop in a hand-synced scope (the hand
/// flags would not cover the versions): write the slots by hand or drop the flags.
ir::Program multibuffer(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

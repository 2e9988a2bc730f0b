// AUTO_CV_COMBINE + AUTO_CV_SYNC: the Cube/Vector split of unscoped code, with the
// cross-core pipeline of mixed Pipelined loops.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// Splits a program written without scopes into `scope C` and `scope V`.
///
/// Each statement runs on the core that owns its on-chip operands (L1/L0 Cube, UB Vector);
/// loops and branches are copied to both cores where they hold work of both. A copy
/// L0C -> UB or UB -> L1 becomes two copies through a GM workspace [block_num, slots, ...]
/// with a `ready` cross-core flag (producer -> consumer) and a `free` flag (consumer ->
/// producer, one credit). UB buffers are split by rows between the aiv_per_core vector
/// cores: every UB operand must use its leading dimension whole (it is divided by the
/// vector core count) and reductions must run along a later dimension.
///
/// A Pipelined(n, num_stages, cross_interval) loop whose body holds Cube and Vector work is
/// a cross-core pipeline: the body is cut into stages at every change of core (C stage,
/// V stage, ...), the loop is strip-mined into batches of num_stages iterations, and each
/// stage becomes its own loop over the batch on its core (a Pipelined loop of
/// `stage_buffers` versions, for the intra-core overlap). Workspaces get num_stages slots,
/// the consumer is signalled every cross_interval iterations and at the last of a batch,
/// and the producer waits for a batch's slots to be free before refilling them. Buffers
/// that carry a value from one stage to a later one get num_stages versions. Correct for
/// any trip count (not a multiple of num_stages, fewer trips than stages, non-zero begin).
///
/// A program that uses vid or hands GM tensors from one core kind to the other (the
/// original's automatic form: the author's workspaces and row slicing) keeps its rows and
/// tensors: each hand-off gets ready / free flags around its writers and readers, once per
/// iteration of the innermost block holding them, and inside a cross-core pipeline moves to
/// a workspace of num_stages slots, its readers in a stage after its writers.
///
/// Programs that already have scopes are returned unchanged (expert mode). Errors
/// (UserError, kind "cv-split"): unscoped code mixed with scopes, hand-written flags in
/// unscoped code, crossing copies with vid or hand-offs, hand-offs that cannot be paired,
/// UB buffers whose rows do not split, a stage-spanning buffer that
/// also carries a value across iterations, a nested loop mixing Cube and Vector work
/// inside a pipeline, more cross-core flags than the chip has or more signals in flight
/// than its counters hold.
ir::Program cv_split(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

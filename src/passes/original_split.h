// The original lowering's Cube/Vector split of unscoped code: TileLang-Ascend's
// AUTO_CV_COMBINE + AUTO_CV_SYNC as its compiler decides them.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

/// Splits an unscoped kernel body (Cube and Vector statements mixed, tiles handed between
/// the cores through the author's GM tensors, `vid` slicing written by the author) into
/// `scope C` and `scope V`, as the original's compiler does; cv_split is tilepipe's own
/// split of such code.
///
/// The body is read as its source statements: every SeqStmt that is not the body of a
/// loop, branch or scope with that node's location is one statement of the source (a
/// block), and a block is identified by its location, so a statement run several times
/// (a macro, an unrolled loop) is one statement, as in the source.
/// - Each leaf runs on one core kind: the core owning its on-chip operands (a GM -> GM copy:
///   the Vector core's DMA), intra-core flags and barriers by their pipes (MTE1 / M / FIX:
///   the Cube). Bindings go to both cores, and each core drops the ones it does not read.
///   A scope inside the unscoped body (a barrier's per-core spelling) is its core's code.
/// - Each core kind with work gets a scope holding its leaves and the loops / branches
///   around them; a Pipelined loop is serial on a core whose code has the author's flags
///   (they are written for the serial order).
/// - A GM tensor one core kind writes (by copies) and the other reads is handed over once
///   per iteration of the innermost statement holding all its accesses: on each core a
///   wait before the first statement of that block touching the tensor and a set after
///   the last (producer: wait `free`, set `ready` on FIX / MTE3; consumer: wait `ready`,
///   set `free` on MTE2), around every run of those statements. When each core's accesses
///   lie in one device loop of its own at that level and the loops run the same number of
///   iterations, the hand-off is per iteration of those loops. The consumer grants one
///   `free` credit at its scope's start; the producer takes it back at its end. Flag ids
///   0, 1, ... in the tensors' name order, two per tensor.
/// - A Pipelined(n, num_stages=S) loop (S >= 2) that is a statement of its own and whose
///   body holds Cube and Vector statements is a cross-core pipeline (the original's
///   CrossCorePipeline): the body is cut into stages, runs of consecutive statements of one
///   core (statements of neither core run in every stage). Each core runs the loop in
///   batches of S iterations (`VAR_batch`); per batch each of its stages is a serial loop
///   over the batch (`VAR_stage`, the iteration `begin + batch * S + stage`). A hand-off
///   tensor used only in the loop gets a slot per iteration of the batch (`NAME_slots`, a
///   runtime workspace; S credits), and an on-chip buffer whose value crosses stages a
///   version per slot; a stage's own scratch keeps one copy. On a core with the author's
///   flags each stage iteration ends in a drain of the core. The loop stays serial on each
///   core (handed over per iteration) when a statement mixes the cores, or a buffer crossing
///   stages is used outside the loop or may carry a value between iterations.
///
/// Programs with scopes, or with an L0C -> UB / UB -> L1 copy (cv_split's), are returned
/// unchanged. Errors (UserError, kind "original-split"): a tensor both core kinds write and
/// one reads across them, more tensors than cross-core flag ids, cross-core flags in
/// unscoped code, a hand-off that would anchor at an else branch, a cross-core pipeline
/// with a step. Off by default; the Python front end switches it on for the original
/// lowering (and for code with the author's flags in the tilepipe one).
ir::Program original_split(const ir::Program& p, const ChipConfig& chip, const PassOptions& o);

}  // namespace tilepipe::passes

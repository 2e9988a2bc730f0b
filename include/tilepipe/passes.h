// Automatic-mode passes: Program -> Program rewrites between the verifier and the
// lowering. src/passes/pipeline.cc lists them in order; read it to learn the compiler.
// Each pass is its own file with its own header in src/passes/ (docs/passes.md).
#pragma once

#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

/// The let variables a tree binds; those bound more than once (T.alloc_var registers: every
/// binding after the first assigns), and the first such assignment (null when there is none).
struct LetAssignments {
  std::set<int> bound;
  std::set<int> vars;
  const ir::StmtNode* first = nullptr;
};
LetAssignments let_assignments(const ir::Stmt& s);

/// The validated option table of the pipeline (the original's pass configs). Switches
/// that would have no effect are errors, not silently ignored (validate()).
struct PassOptions {
  /// Cross-core flags set more often than the other core waits on them (the original's init
  /// credits, which the hardware drops at the kernel's end) taken back by waits at the end
  /// of the waiting core's last scope (passes/cross_drains.h). Off: such a flag is the
  /// simulator's `unmatched-flag` error. The Python front end sets it.
  bool cross_drains = false;
  /// Event ids past the chip's count (the original's kernels use up to 15) renamed into it
  /// per pipe pair, injectively (passes/event_ids.h). Off: such an id is the verifier's error.
  bool event_ids = true;
  /// Pipelined loops in hand-synced scopes scheduled as TileLang-Ascend's compiler does
  /// (copy stages ahead, buffers versioned; passes/hand_pipeline.h). Off: such a loop is
  /// multibuffer's `pipelined` error. The Python front end sets it.
  bool hand_pipeline = false;
  /// Unscoped code split into Cube and Vector scopes as TileLang-Ascend's compiler splits
  /// it: each core's statements, the author's GM tensors handed between the cores per
  /// iteration of the block holding them (passes/original_split.h). Off: cv_split, tilepipe's
  /// own split, takes such code. The Python front end's original lowering sets it.
  bool original_split = false;
  /// Vectorisation: Parallel loops become tile ops over all their rows. Off: a Parallel
  /// loop is an error (`unsupported`), never a silent serial loop.
  bool vectorize = true;
  /// Gemms on L1 operands (the original's gemm_v0) staged through L0A / L0B in K chunks,
  /// with the original library's flags where the author syncs (passes/gemm_l1.h). Off: such
  /// a gemm is the verifier's `unsupported`.
  bool gemm_l1 = true;
  /// GM <-> UB copies that change dtype become a copy and a vector cast through a UB
  /// temporary (passes/copy_cast.h). Off: such a copy is the verifier's `dtype-mismatch`.
  bool copy_cast = true;
  /// AUTO_CV_COMBINE + AUTO_CV_SYNC: split unscoped code into Cube and Vector scopes, with
  /// GM workspaces and cross-core flags, and turn Pipelined loops mixing Cube and Vector
  /// work into cross-core pipelines. Off: unscoped code is an error (`outside-scope`).
  bool cv_split = true;
  /// Versions of each stage loop of a cross-core pipeline (intra-core multi-buffering of
  /// the stage; 1 = none). Range 1..4.
  int stage_buffers = 2;
  /// L1 residency: loop-invariant GM -> L1 loads of inputs hoisted out of the loops that
  /// reuse them (Q in FA), when the scope's L1 fits. Off: loads stay where written.
  bool l1_residency = true;
  /// Vectorisation and fusion: in automatic scopes, `mul(t, x, s)` followed by
  /// `add(d, d, t)` (or `sub` with an immediate s) on a dead f32 temporary t becomes one
  /// `axpy(d, x, s)`, and per-row `muls` + `adds` loops become `broadcast` + `axpy`.
  /// Off: tile ops are kept as written.
  bool fuse = true;
  /// Intra-core multi-buffering of Pipelined loops in automatic scopes (num_stages
  /// versions of the buffers that cross pipes). Off: a Pipelined loop is an error.
  bool multibuffer = true;
  /// MEMORY_PLANNING: liveness-based placement of on-chip buffers in core kinds whose
  /// scopes are all automatic; capacity overflows reported with the live buffers at the
  /// peak. Off: sequential layout, capacity checked by the verifier.
  bool memory_planning = true;
  /// The author's sequential layout (core kinds memory planning leaves alone: hand-synced,
  /// or planning off) may run into the reserved bytes of a memory, up to its physical size
  /// (256 B of UB and L1 on A2/A3). The original's code generator places those buffers
  /// without checking its limit and the hardware runs them; the Python front end sets this.
  /// Layouts plan_memory makes stay within the usable size, as the original's planner's do.
  bool reserved_tail = false;
  /// AUTO_SYNC: insert intra-core set/wait flags from read/write dependences in every
  /// scope that has no hand-written intra-core flags or barriers.
  bool auto_sync = true;
  /// AUTO_SYNC as TileLang-Ascend's compiler places it: besides the flags, full barriers
  /// before statements whose addresses read a tensor element and around every `if`
  /// (passes/original_sync.h). The Python front end's original-compatible lowering sets
  /// it for files that turn on TL_ASCEND_AUTO_SYNC, so their time predicts the NPU's.
  bool original_sync = false;
  /// The kernel's unscoped code is the original's AUTO_CV_COMBINE form. The Python front end
  /// sets it from TL_ASCEND_AUTO_CV_COMBINE; off, unscoped work on a core's memories is the
  /// verifier's warning `outer-scope` (the newest original rejects it, VerifyOptions).
  bool cv_combine = true;
  /// Largest number of event ids one ring-buffer flag may rotate through (a loop-carried
  /// dependence at distance d uses min(d, max_rotation) ids).
  int max_rotation = 4;
};

/// Does the original's code generator read a UB element for this statement's scalar operand
/// behind a full barrier of its own? A tile op whose AscendC call takes a scalar (Adds, Subs,
/// Muls, Divs, Maxs, Mins, Select, CompareScalar) given an element of a buffer is printed as
/// `PipeBarrier<PIPE_ALL>(); auto s = buf.GetValue(i);` before the call
/// (codegen_ascend.cc: AddsAndMulsOpCodegen, SubsOpCodegen, DivsOpCodegen, SelectCodegen,
/// CompareScalarCodegen), each call its own, whatever the sync mode; Duplicate (fill) is
/// not. original_sync places it; emit warns of it.
bool scalar_element_barrier(const ir::StmtNode& s);

/// One option of PassOptions by name: the one table through which the driver, the command
/// line and the Python front end (a kernel's pass configs, "tilepipe.<name>", python/ext) set
/// options.
struct OptionInfo {
  std::string name;                    // the PassOptions field's name
  bool PassOptions::*flag = nullptr;   // a switch (0 or 1) ...
  int PassOptions::*number = nullptr;  // ... or a number (validate() checks its range)
};
const std::vector<OptionInfo>& option_table();

/// Sets the option `name` to `value` (a switch takes 0 or 1); an unknown name, or a switch
/// given another value, is UserError "pass-option" listing the options.
void set_option(PassOptions& o, const std::string& name, int64_t value);

/// One entry of the pass table: drives --print-after validation and the docs.
struct PassInfo {
  std::string name;
  std::string summary;
  bool PassOptions::*flag;  // the pass's switch (--no-pass NAME clears it)
  ir::Program (*run)(const ir::Program&, const ChipConfig&, const PassOptions&);
};

/// The passes in pipeline order.
const std::vector<PassInfo>& pass_table();

/// What to print while the pipeline runs: the IR after the named passes (or all), with
/// "(unchanged)" when a pass left the program as it was.
struct PrintOptions {
  std::set<std::string> after;
  bool after_all = false;
  std::ostream* out = nullptr;  // nullptr: std::cerr
};

/// Switches a pass on or off by name (`--pass NAME`, `--no-pass NAME`); an unknown name is
/// UserError "pass-option" listing the passes.
void switch_pass(PassOptions& o, const std::string& pass, bool on);

/// Throws UserError (kind "pass-option") for option values that are out of range and for
/// --print-after names that are not passes.
void validate(const PassOptions& o, const PrintOptions& print = {});

/// Runs every enabled pass in order. Each pass's output is re-verified (capacities once
/// memory planning has placed the buffers): a pass that produces a program the verifier
/// rejects is an internal error naming the pass. The input must have passed
/// verify(p, chip, verify_options(o)).
/// How to verify a program before run_passes: capacities are left to memory planning.
VerifyOptions verify_options(const PassOptions& o);

ir::Program run_passes(const ir::Program& p, const ChipConfig& chip, const PassOptions& o,
                       const PrintOptions& print = {});

}  // namespace tilepipe::passes

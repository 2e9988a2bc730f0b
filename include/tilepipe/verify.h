// The verifier: the only place that rejects user programs. Every diagnostic names the
// location of the DSL call, what was expected, what was found, and a fix.
#pragma once

#include <array>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"

namespace tilepipe {

/// An error stops the program; a warning names a hazard of the hardware or of the original
/// toolchain that the simulation does not show (the program still runs).
enum class Severity { Error, Warning };

/// One user-facing diagnostic. `kind` is a stable identifier (docs/errors.md lists them all).
struct Diagnostic {
  ir::Loc loc;
  std::string kind;
  std::string message;             // what was expected and what was found
  std::vector<std::string> notes;  // e.g. per-buffer breakdown of an overflow
  std::string hint;                // the fix
  Severity severity = Severity::Error;
  /// "file:line:col: error: message\n  note...\n  hint: ..." ("warning:" for a warning)
  std::string str() const;
};

/// Every kind of warning (docs/errors.md "Warnings" has one section per kind; a test holds
/// the page to this list).
inline constexpr std::array<const char*, 4> kWarningKinds = {
    "dma-compact-rows",  // a multi-row GM <-> UB copy of compact rows off 32 bytes
    "branch-flags",    // an if whose branches leave a flag set / waited a different number of times
    "branch-barrier",  // a barrier on one path of an if only
    "outer-scope",     // work on a core's memories outside T.Scope without AUTO_CV_COMBINE
};

/// Errors and warnings found in one program, in the order the verifier met them.
struct VerifyResult {
  std::vector<Diagnostic> diagnostics;
  std::vector<Diagnostic> errors() const;
  std::vector<Diagnostic> warnings() const;
};

/// The same diagnostics as errors (warnings-as-errors: --warnings-as-errors, TILEPIPE_WERROR).
std::vector<Diagnostic> as_errors(std::vector<Diagnostic> d);
/// TILEPIPE_WERROR is set to something other than "" or "0".
bool werror_from_env();

/// Thrown by anything downstream of the DSL that finds a user error (verifier, lowering,
/// simulator run-time checks). Carries one or more diagnostics; its kind is User unless a
/// run found it (driver::SimFailure, run_error_kind).
class UserError : public Error {
 public:
  explicit UserError(std::vector<Diagnostic> diags, ErrorKind kind = ErrorKind::User);
  explicit UserError(Diagnostic d) : UserError(std::vector<Diagnostic>{std::move(d)}) {}
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

 private:
  std::vector<Diagnostic> diags_;
};

/// What a run's error stands for: a check finding if any diagnostic is one (kCheckKinds),
/// else a budget, an interrupt, or a plain user error (bad host data).
ErrorKind run_error_kind(const std::vector<Diagnostic>& diags);

struct VerifyOptions {
  /// Check on-chip capacities. Off before memory planning, which places the buffers and
  /// reports overflows itself (with liveness); the program is verified again afterwards.
  bool capacity = true;
  /// Accept unscoped (automatic-mode) code for the Cube/Vector split: each op is checked on
  /// the core that owns its on-chip operands; L0C -> UB and UB -> L1 copies are accepted
  /// (the split routes them through GM workspaces), and so are Pipelined loops outside
  /// scopes (the cross-core pipeline).
  bool unscoped = false;
  /// Accept Parallel loops (the vectorize pass turns them into tile ops).
  bool parallel = false;
  /// Accept GM <-> UB copies that change dtype (the copy_cast pass splits them into a copy
  /// and a vector cast).
  bool cast_copies = false;
  /// Accept gemms on L1 operands (the gemm_l1 pass stages them through L0A / L0B).
  bool gemm_l1 = false;
  /// Check capacities against the physical size instead of the usable one: the author's
  /// sequential layout may use the reserved bytes, as the original's code generator lets
  /// it (passes::PassOptions::reserved_tail).
  bool reserved_tail = false;
  /// Check intra-core event ids against the chip's count. Off before the pipeline's
  /// event_ids pass, which renames ids past it; the program is verified again afterwards.
  bool event_id_range = true;
  /// Check hand-written flags and barriers across the branches of an if (warnings
  /// branch-flags, branch-barrier). Off for a program whose flags the passes placed.
  bool branch_sync = true;
  /// Unscoped code is the original's AUTO_CV_COMBINE form. Off (a Python file that does not
  /// turn the key on): TileLang-Ascend's strict C/V verifier (#1606, #1753) rejects work on
  /// a core's own memories (UB, L1, L0) outside `T.Scope`, which older releases compiled;
  /// tilepipe splits it as they did, with the warning `outer-scope` at the first such
  /// statement.
  bool cv_combine = true;
};

/// Every error and warning found in `p` for `chip`.
VerifyResult verify_all(const ir::Program& p, const ChipConfig& chip, VerifyOptions opts = {});
/// The errors found in `p` for `chip` (empty = valid).
std::vector<Diagnostic> verify(const ir::Program& p, const ChipConfig& chip,
                               VerifyOptions opts = {});
/// Throws UserError if `verify` finds an error.
void verify_or_throw(const ir::Program& p, const ChipConfig& chip, VerifyOptions opts = {});

/// The on-chip memories in order (L1, L0A, L0B, L0C, UB), each with its capacity on `chip`.
std::array<std::pair<ir::Scope, const ScopeCapacity*>, 5> on_chip_capacities(
    const ChipConfig& chip);

/// The core kind owning an on-chip memory (UB: the AIVs; L1, L0A/B/C: the AIC).
ir::CoreKind owner(ir::Scope s);
/// The pipe a copy between two memories runs on (GM->L1/UB MTE2, L1->L0A/L0B MTE1,
/// L0C->GM/L1 FIX, UB->GM MTE3, UB->UB V); nullopt for a direction that is not a data path.
std::optional<ir::Pipe> copy_pipe(ir::Scope from, ir::Scope to);
/// The core kind a leaf statement runs on by its on-chip operands (an alloc: its buffer's;
/// a copy: its first on-chip operand's, the producer for a crossing; a binding reading a UB
/// element: the Vector core; an intra-core flag or barrier: the Cube's when a pipe is MTE1,
/// M or FIX); nullopt for GM -> GM copies, other bindings, cross-core flags, and for loops,
/// ifs and scopes.
std::optional<ir::CoreKind> leaf_core(const ir::Stmt& s);
/// L0C -> UB and UB -> L1: no hardware path; automatic mode routes them through a GM
/// workspace between the Cube and the Vector cores (cv_split).
bool crosses_cores(ir::Scope from, ir::Scope to);

/// Ids of the buffers the program's statements access: operands of copies, gemms, tile ops
/// and reductions, and tensors read by scalar loads anywhere (loop bounds, conditions,
/// slice starts, scalars, flag ids). The Python front end drops the allocations of on-chip
/// buffers missing here, as the original's compiler does (TVM's
/// PlanAndUpdateBufferAllocationLocation allocates a buffer where it is accessed).
std::set<int> accessed_buffers(const ir::Program& p);

/// Intra-core flag pipe pairs the hardware has on a core kind (hardware.md "Synchronisation").
bool legal_flag_pair(ir::CoreKind k, ir::Pipe src, ir::Pipe dst);

/// Conservative value range of an integer expression, given ranges for cid/vid/loop vars.
struct Interval {
  int64_t lo = 0, hi = 0;
  bool exact = true;  // every value in [lo, hi]'s end points is reachable
};

}  // namespace tilepipe

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

/// One user-facing error. `kind` is a stable identifier (docs/errors.md lists them all).
struct Diagnostic {
  ir::Loc loc;
  std::string kind;
  std::string message;             // what was expected and what was found
  std::vector<std::string> notes;  // e.g. per-buffer breakdown of an overflow
  std::string hint;                // the fix
  /// "file:line:col: error: message\n  note...\n  hint: ..."
  std::string str() const;
};

/// Thrown by anything downstream of the DSL that finds a user error (verifier, lowering,
/// simulator run-time checks). Carries one or more diagnostics.
class UserError : public std::runtime_error {
 public:
  explicit UserError(std::vector<Diagnostic> diags);
  explicit UserError(Diagnostic d) : UserError(std::vector<Diagnostic>{std::move(d)}) {}
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

 private:
  std::vector<Diagnostic> diags_;
};

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
};

/// All problems found in `p` for `chip` (empty = valid).
std::vector<Diagnostic> verify(const ir::Program& p, const ChipConfig& chip,
                               VerifyOptions opts = {});
/// Throws UserError if `verify` finds anything.
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

// The verifier's internals, shared by its files (include/tilepipe/verify.h is the public
// header). One Verifier walks the program once; its checks live by subject:
//   verify.cc           entry points, diagnostics, the layer's shared facts (owner, copy_pipe)
//   verify_scopes.cc    the walk: sequences, loops, branches, scopes, allocations
//   verify_ranges.cc    integer ranges of index expressions, scalar loads and their sources
//   verify_buffers.cc   buffer shapes, slice bounds, UB alignment, GM and on-chip capacity
//   verify_ops.cc       copies (directions, casts, Cube <-> Vector crossings), gemm, reduce
//   verify_tile_ops.cc  vector tile ops (operand counts, shapes, dtypes; sort, gathers)
//   verify_flags.cc     intra-core flags, barriers and cross-core flags
//   verify_branches.cc  hand-written flags and barriers across the branches of an if
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tilepipe/verify.h"

namespace tilepipe::verify_detail {

using namespace ir;

/// "[d0, d1, ...]"
std::string shape_str(const std::vector<int64_t>& s);
/// Pipes that exist on each core kind (hardware.md "Pipes").
bool pipe_on(CoreKind k, Pipe p);
/// Adds to `ids` the buffers an expression's scalar loads read (indices included).
void loaded_buffers(const Expr& e, std::set<int>& ids);

/// An on-chip allocation with its size rounded up to the scope's alignment.
struct Alloc {
  Buffer buf;
  int64_t bytes;
};

class Verifier {
 public:
  Verifier(const Program& p, const ChipConfig& chip, VerifyOptions opts)
      : p_(p), chip_(chip), opts_(opts) {}

  std::vector<Diagnostic> run();

  /// L0C -> UB and UB -> L1 in unscoped code: the Cube/Vector split turns them into two
  /// copies through a GM workspace.
  static bool crossing(const CopyStmt& c);

 private:
  /// Records one diagnostic (the first 50 of a program).
  void error(const Loc& loc, const std::string& kind, std::string msg, std::string hint = {},
             std::vector<std::string> notes = {});
  /// Records one warning (kWarningKinds); shares the limit of 50 with the errors.
  void warn(const Loc& loc, const std::string& kind, std::string msg, std::string hint);

  // ---- the walk (verify_scopes.cc) ----
  void stmt(const Stmt& s);
  bool in_scope(const Loc& loc, const char* what);
  bool operand_on_core(const Region& r, const Loc& loc, const char* what);
  void outer_scope(const Stmt& s);
  /// Sets scope_ for a header in unscoped code from its bodies; returns the scope to restore.
  std::optional<CoreKind> header_scope(std::initializer_list<const Stmt*> bodies);
  void check(const SeqStmt& n, const StmtNode&);
  void check(const ForStmt& n, const StmtNode& s);
  void check(const IfStmt& n, const StmtNode&);
  void check(const ScopeStmt& n, const StmtNode& s);
  void check(const LetStmt& n, const StmtNode& s);
  void check(const AllocStmt& n, const StmtNode& s);

  // ---- expression ranges and scalar loads (verify_ranges.cc) ----
  Interval range(const Expr& e, std::map<int, int>& uses);
  /// [lo, hi] from wide arithmetic; past +-2^61 (the "unknown" range) it saturates to unknown
  /// instead of overflowing int64.
  static Interval fit(__int128 lo, __int128 hi, bool exact);
  static Interval combine(BinOp op, Interval a, Interval b);
  Interval range(const Expr& e);
  /// Largest power-of-two-ish factor known to divide the expression (0 = unknown/any).
  int64_t divisor(const Expr& e);
  void load(const Load& n, const Loc& loc);
  /// Records the GM tensor an op writes, for check_load_sources: a loaded GM input must be
  /// read-only (its value would depend on the kernel's own writes and their timing). A
  /// loaded UB buffer may be computed on chip: the lowering runs the ops computing it in
  /// timing mode too (lower.cc, mark_materialised).
  void record_write(const Stmt& s);
  void check_load_sources();

  // ---- buffers, slices, alignment, capacity (verify_buffers.cc) ----
  void declare_gm(const Buffer& b);
  bool check_shape(const Buffer& b);
  bool region(const Region& r, const Loc& loc, const char* what);
  void ub_aligned(const Region& r, const Loc& loc, const char* what);
  /// The kernel's GM tensors (parameters and workspaces) must fit in the die's HBM: a
  /// larger program describes no run the chip can make, however few cycles it is given.
  void check_gm_capacity();
  void check_capacity();

  // ---- copies, gemm, reduce (verify_ops.cc) ----
  void check_crossing(const CopyStmt& n, const StmtNode& s);
  /// A one-element UB -> UB copy is an element move (`a[i] = b[j]`: the scalar unit's
  /// GetValue / SetValue on hardware), which needs no vector alignment.
  static bool element_move(const CopyStmt& n);
  void check(const CopyStmt& n, const StmtNode& s);
  /// A GM <-> UB copy whose DMA bursts would start off a 32-byte block of UB (error
  /// dma-row-pitch), or that moves compact rows the released toolchain corrupts (warning
  /// dma-compact-rows).
  void check_dma_rows(const CopyStmt& n, const StmtNode& s);
  /// [rows, cols] of a tile seen as a matrix, or nullopt if it has more than 2 real dims.
  static std::optional<std::pair<int64_t, int64_t>> matrix(const Region& r);
  void check(const GemmStmt& n, const StmtNode& s);
  void check(const GemmL1Stmt& n, const StmtNode& s);
  /// A gemm's core, operand regions, operand scopes (`want`: A, B, C) and fractal shapes;
  /// false when it reported a problem.
  bool check_gemm(const Region& a, const Region& b, const Region& c, bool ta, bool tb,
                  const std::array<std::vector<Scope>, 3>& want, const Loc& loc, const char* what);
  void check(const ReduceStmt& n, const StmtNode& s);

  // ---- tile ops (verify_tile_ops.cc) ----
  void check(const TileOpStmt& n, const StmtNode& s);
  /// Sort and merge_sort work on f32 or f16 keys (the hardware's Sort32 / MrgSort types).
  bool sort_dtypes(const TileOpStmt& n, const StmtNode& s, const std::string& what);
  /// The dtype rules of i64 / u64 and bool tiles (what A2/A3's vector unit does with them).
  void narrow_dtypes(const TileOpStmt& n, const StmtNode& s, const std::string& what);
  void check_sort(const TileOpStmt& n, const StmtNode& s, const std::string& what);
  void check_sort32(const TileOpStmt& n, const StmtNode& s, const std::string& what);
  void check_merge_sort(const TileOpStmt& n, const StmtNode& s, const std::string& what);
  void check_gather_mask(const TileOpStmt& n, const StmtNode& s, const std::string& what);
  void check_gatherb(const TileOpStmt& n, const StmtNode& s, const std::string& what);
  /// T.reinterpretcast's views, modelled as copies, used only where a view would read the
  /// same (verify_reinterpret.cc).
  void check_reinterpret();

  // ---- sync across branches (verify_branches.cc) ----
  /// The expression reads a loop variable, or a let computed from one.
  bool loop_dependent(const Expr& e) const;
  /// Warnings branch-flags / branch-barrier at an if whose paths differ in flags or
  /// barriers.
  void check_branch_sync(const IfStmt& n, const StmtNode& s);

  // ---- flags (verify_flags.cc) ----
  void event_id(const Expr& id, int limit, const Loc& loc, const char* what);
  void flag(Pipe src, Pipe dst, const Expr& id, const Loc& loc, const char* what);
  void check(const SetFlagStmt& n, const StmtNode& s);
  void check(const WaitFlagStmt& n, const StmtNode& s);
  void check(const PipeBarrierStmt& n, const StmtNode& s);
  void check(const SetCrossFlagStmt& n, const StmtNode& s);
  void check(const WaitCrossFlagStmt& n, const StmtNode& s);

  const Program& p_;
  const ChipConfig& chip_;
  VerifyOptions opts_;
  std::vector<Diagnostic> diags_;
  int errors_ = 0, warnings_ = 0;
  std::optional<CoreKind> scope_;
  bool outer_warned_ = false;   // outer_scope's warning given
  std::set<int> loop_derived_;  // loop variables and lets computed from them
  std::map<int, Interval> vars_;
  std::set<int> guarded_;  // ids (var id, -1 cid, -2 vid) used by an enclosing if condition
  // Variables of the enclosing Parallel loops: an element they index is widened by the
  // vectorize pass to a tile starting at their first value (vars_'s lower bound).
  std::set<int> lanes_;
  std::vector<std::set<int>> visible_{1};
  std::map<Scope, std::vector<Alloc>> allocs_;
  std::map<int, Loc> loaded_gm_;    // buffer id -> first scalar load
  std::multimap<int, Loc> writes_;  // GM buffer id -> ops that write it (see record_write)
};

}  // namespace tilepipe::verify_detail

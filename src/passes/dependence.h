// Dependence analysis (pure): which buffer regions a statement reads and writes, on which
// pipe, and whether two accesses may touch a common element, within one iteration or
// between iterations of a loop (the loop-carried distance).
//
// Regions are rectangles: one start expression and a static extent per dimension. A start
// is decomposed into constant + sum(coef * var) + atoms, where an atom is `affine % m`
// (ring-buffer slots) or an opaque expression (loads, divisions, min/max...). Two regions
// may overlap iff they may overlap in every dimension. Everything is conservative: an
// expression the analysis cannot see through makes its dimension "may overlap"; a false
// dependence costs a flag, a missed one would be a race.
//
// Variables are classified per query: *common* (same value in both accesses: outer loops,
// cid, vid), *local* (a loop inside the statement being compared: independent in the two
// accesses, ranging over its bounds), and the *carried* loop variable (its value in the
// second access is the first's plus distance * step).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "tilepipe/ir.h"
#include "tilepipe/ir_range.h"

namespace tilepipe::passes {

// Integer ranges live with the IR (tilepipe/ir_range.h): the verifier, the passes and the
// Python extension reason about index expressions alike.
using ir::eval_range;
using ir::kCidVar;
using ir::kVidVar;
using ir::Range;
using ir::VarRanges;

/// Does the subtree hold a hand-written intra-core flag or barrier? Scopes without any are
/// "automatic": auto_sync syncs them and plan_memory may reuse their bytes. With
/// `pipe_barriers` false, a one-pipe barrier (`T.pipe_barrier(pipe)`: it orders that pipe
/// with itself, no pipe with another) does not count.
bool has_hand_sync(const ir::Stmt& s, bool pipe_barriers = true);

/// The same expression, variables compared by identity (ir::equal matches two different free
/// variables to each other, which is not "the same element" within one program).
bool identical(const ir::Expr& a, const ir::Expr& b);
/// Same buffer, extents and identical starts.
bool same_region(const ir::Region& a, const ir::Region& b);

/// The core kinds a subtree holds work for: the union of `leaf` over its leaves and scopes,
/// through sequences, loops and branches (each split says what a leaf's kinds are).
std::set<ir::CoreKind> kinds_of(const ir::Stmt& s,
                                const std::function<std::set<ir::CoreKind>(const ir::Stmt&)>& leaf);

/// `body` as one statement: its only statement, or a sequence (empty: an empty SeqStmt).
ir::Stmt seq(std::vector<ir::Stmt> body, const ir::Loc& loc);

/// The statements of `s` with nested sequences spliced in, in order (empty for null).
std::vector<ir::Stmt> flatten(const ir::Stmt& s);

/// Does any node of the expression satisfy `pred` (searching through binaries, selects and
/// load indices)? `uses_var`: does it read loop variable `id`?
bool expr_any(const ir::Expr& e, const std::function<bool(const ir::ExprNode&)>& pred);
bool uses_var(const ir::Expr& e, int id);

/// Does the region cover all of its buffer?
bool covers_whole(const ir::Region& r);

/// Every buffer name of a program (parameters, workspaces, allocations): a pass's new
/// buffer takes a name outside it.
std::set<std::string> buffer_names(const ir::Program& p);

/// Value flow of one on-chip buffer through a statement (exact for straight-line code,
/// conservative through loops and branches):
///  - exposed: some read in `s` may see a value written before `s` ran;
///  - kills: every execution of `s` overwrites the whole buffer, so nothing written before
///    `s` is visible after it.
/// A loop whose body does not expose a buffer carries no value of it across iterations:
/// memory planning need not keep it live over the loop, and the Cube/Vector pipeline may
/// split the loop between the statements that use it.
/// `row_fills` also counts a loop `for v in [0, n)` writing index v of one dimension (size
/// n) and the rest whole as writing the whole buffer (rows of a tile filled one by one).
/// Memory planning uses it; the other passes do not yet (their versioning and splitting
/// decisions stay as measured).
bool exposed(const ir::Stmt& s, int buffer_id, bool row_fills = false);
bool kills(const ir::Stmt& s, int buffer_id, bool row_fills = false);

enum class AccessKind : uint8_t { Read, Write };

/// One read or write of a buffer region by one pipe.
struct Access {
  ir::Region region;
  AccessKind kind = AccessKind::Read;
  ir::Pipe pipe = ir::Pipe::S;
  const ir::StmtNode* stmt = nullptr;  // the leaf (or loop / if header) that makes it
  /// Loops inside the compared statement that enclose the access, outermost first: their
  /// variables are local to the access (their ranges come from `local_ranges`).
  std::vector<const ir::ForStmt*> loops;
  VarRanges local_ranges;
  /// A set_cross_flag's publish/release of the workspaces: it must follow earlier
  /// accesses, but later accesses need not wait for it (it moves no data).
  bool fence = false;
  /// Byte offset of the buffer when memory planning placed it (-1: not placed). Distinct
  /// buffers whose placed bytes overlap alias: every access of one may conflict with the
  /// other's.
  int64_t addr = -1;
};

/// The pipe a leaf statement runs on (copies by direction, gemm M, tile ops and
/// reductions V, flags on their pipe); nullopt for allocations, containers and
/// wait_cross_flag (which blocks the scalar unit).
std::optional<ir::Pipe> leaf_pipe(const ir::Stmt& s);

/// The accesses of one leaf. Scalar reads of UB elements (`at(m, r)`) and UB scalar loads
/// are reads on pipe S (the scalar unit reads them when it issues the op). A
/// set_cross_flag on pipe P writes every buffer in `fences` (the workspaces): it releases
/// or publishes them, so it must follow every earlier access of theirs on other pipes.
std::vector<Access> leaf_accesses(const ir::Stmt& s, const std::vector<ir::Buffer>& fences = {});

/// Every access in a subtree, with the loops inside the subtree that enclose it (local
/// variables) and their ranges given `outer` (ranges of the enclosing, common variables).
/// Loop bounds and if conditions that load UB elements read on pipe S. The variables in
/// `opaque` (registers assigned more than once) keep no value: an access indexed by one may
/// touch any element of its buffer (its region is the whole buffer).
std::vector<Access> collect_accesses(const ir::Stmt& s, const VarRanges& outer,
                                     const std::vector<ir::Buffer>& fences = {},
                                     const std::map<int, int64_t>* addresses = nullptr,
                                     const std::set<int>* opaque = nullptr);

/// May `a` and `b` touch a common element, at least one writing? Variables of
/// `outer` are common (equal in both).
bool may_conflict(const Access& a, const Access& b, const VarRanges& outer);

/// The loop-carried dependence from `a` in iteration k to `b` in iteration k + d of
/// `loop` (variables of `outer` other than the loop's are common): the smallest d >= 1 at
/// which they may conflict; nullopt when they never conflict. Distances up to `max_distance`
/// are tested one by one; beyond it the answer is max_distance + 1 ("far") unless some
/// dimension provably moves apart for good.
std::optional<int64_t> carried_distance(const Access& a, const Access& b, const ir::ForStmt& loop,
                                        const VarRanges& outer, int64_t max_distance = 64);

}  // namespace tilepipe::passes

// A StmtMutator that rewrites every expression and region of a tree: the shared machinery
// of the passes that rename loop variables, add slot dimensions (multi-buffering) or split
// rows between the vector cores. Override the hooks; the defaults rebuild unchanged.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "tilepipe/ir.h"

namespace tilepipe::passes {

/// `r` with the one dimension indexed by exactly loop variable `var` (extent 1) widened to
/// [begin, begin + n); nullopt when the variable appears anywhere else or nowhere. `dim`
/// receives the widened dimension.
std::optional<ir::Region> widen(const ir::Region& r, int var, int64_t begin, int64_t n,
                                size_t* dim = nullptr);

/// Is every possible start of `r` a multiple of `align` bytes (as the verifier sees it: a
/// constant start counts by its value, any other by its dimension's stride)?
bool ub_aligned(const ir::Region& r, int64_t align);

/// A pass that replaces some statements by runs of statements in their place (spliced into
/// the enclosing sequence, or a sequence of their own), knowing per T.Scope whether the author
/// synchronises it (`hand_`: then the pass orders what it adds with flags of its own).
class ExpandInPlace : public ir::StmtMutator {
 public:
  ir::Stmt mutate_scope(const ir::ScopeStmt& s, const ir::Stmt& self) override;
  ir::Stmt mutate_seq(const ir::SeqStmt& s, const ir::Stmt& self) override;
  ir::Stmt mutate_leaf(const ir::Stmt& self) override;

 protected:
  /// Appends the statements that replace `s` to `out` and returns true, or returns false
  /// (appending nothing) to keep `s`.
  virtual bool expand(const ir::Stmt& s, std::vector<ir::Stmt>& out) = 0;
  bool hand_ = false;  // the scope being rewritten holds the author's flags
};

class RegionRewriter : public ir::StmtMutator {
 public:
  /// Rewrites an expression bottom-up through the hooks.
  ir::Expr expr(const ir::Expr& e);
  /// A variable reference (default: unchanged).
  virtual ir::Expr var(const ir::Expr& e, const ir::VarRef&) { return e; }
  /// An element read with already rewritten indices (default: the same buffer).
  virtual ir::Expr load(const ir::Load& l, std::vector<ir::Expr> index, const ir::Loc& loc) {
    return ir::make_load(l.buffer, std::move(index), loc);
  }
  /// A region whose starts are already rewritten (default: unchanged).
  virtual ir::Region region(ir::Region r) { return r; }
  /// A select, before it is rewritten (default: nothing; for analyses of conditions).
  virtual void on_select(const ir::Select&) {}

  /// A region: starts through expr(), then the region() hook.
  virtual ir::Region rewrite(const ir::Region& r);
  ir::Stmt mutate_for(const ir::ForStmt& s, const ir::Stmt& self) override;
  ir::Stmt mutate_if(const ir::IfStmt& s, const ir::Stmt& self) override;
  ir::Stmt mutate_leaf(const ir::Stmt& s) override;

 protected:
  /// Rebuild arithmetic with ir::fold (identities dropped) and selects on a constant
  /// condition as their branch: for rewriters that substitute values for variables.
  bool fold_ = false;
};

/// Variables replaced by expressions (arithmetic folded when `fold`): a body at given
/// values of its loop variables.
class Substitute : public RegionRewriter {
 public:
  explicit Substitute(std::map<int, ir::Expr> values, bool fold = true)
      : values_(std::move(values)) {
    fold_ = fold;
  }
  ir::Expr var(const ir::Expr& e, const ir::VarRef& v) override {
    auto it = values_.find(v.var->id);
    return it != values_.end() ? it->second : e;
  }

 protected:
  std::map<int, ir::Expr> values_;  // variable id -> its value
};

}  // namespace tilepipe::passes

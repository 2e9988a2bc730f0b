// A StmtMutator that rewrites every expression and region of a tree: the shared machinery
// of the passes that rename loop variables, add slot dimensions (multi-buffering) or split
// rows between the vector cores. Override the hooks; the defaults rebuild unchanged.
#pragma once

#include <vector>

#include "tilepipe/ir.h"

namespace tilepipe::passes {

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

  /// A region: starts through expr(), then the region() hook.
  virtual ir::Region rewrite(const ir::Region& r);
  ir::Stmt mutate_for(const ir::ForStmt& s, const ir::Stmt& self) override;
  ir::Stmt mutate_if(const ir::IfStmt& s, const ir::Stmt& self) override;
  ir::Stmt mutate_leaf(const ir::Stmt& s) override;
};

}  // namespace tilepipe::passes

// Which variables IR reads, and the bindings nothing reads. One home for the builder's
// dead-binding sweep and the passes that copy bindings to more than one core.
#pragma once

#include <functional>
#include <set>

#include "tilepipe/ir.h"

namespace tilepipe::ir {

/// Calls `f` on every node of `e`, each before its operands (a load's indices included):
/// the one expression walk of the analyses that collect from expressions.
void walk_expr(const Expr& e, const std::function<void(const ExprNode&)>& f);

/// Adds the ids of the variables `e` reads (loop variables, bindings) to `used`.
void read_vars(const Expr& e, std::set<int>& used);
/// Adds the ids of the variables a statement tree reads: loop bounds, conditions, region
/// starts, scalar operands, flag ids and binding values.
void read_vars(const Stmt& s, std::set<int>& used);

/// `s` without the bindings (LetStmt) nothing in it reads, repeated until none is left (a
/// binding only dead ones read is dead), as the original's simplifier drops them. Null when
/// nothing is left.
Stmt drop_dead_lets(const Stmt& s);

}  // namespace tilepipe::ir

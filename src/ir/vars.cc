// Variables IR reads, and the dead-binding sweep (tilepipe/ir_vars.h).
#include "tilepipe/ir_vars.h"

namespace tilepipe::ir {

void walk_expr(const Expr& e, const std::function<void(const ExprNode&)>& f) {
  if (!e) return;
  f(*e);
  if (auto* b = std::get_if<Binary>(&e->node)) {
    walk_expr(b->a, f);
    walk_expr(b->b, f);
  } else if (auto* s = std::get_if<Select>(&e->node)) {
    walk_expr(s->cond, f);
    walk_expr(s->then_value, f);
    walk_expr(s->else_value, f);
  } else if (auto* l = std::get_if<Load>(&e->node)) {
    for (const auto& i : l->index) walk_expr(i, f);
  }
}

void read_vars(const Expr& e, std::set<int>& used) {
  walk_expr(e, [&](const ExprNode& n) {
    if (auto* v = std::get_if<VarRef>(&n.node)) used.insert(v->var->id);
  });
}

void read_vars(const Stmt& s, std::set<int>& used) {
  if (!s) return;
  auto region = [&](const Region& r) {
    for (const auto& x : r.start) read_vars(x, used);
  };
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>) {
          for (const auto& c : n.body) read_vars(c, used);
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          read_vars(n.begin, used);
          read_vars(n.end, used);
          read_vars(n.body, used);
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          read_vars(n.cond, used);
          read_vars(n.then_body, used);
          read_vars(n.else_body, used);
        } else if constexpr (std::is_same_v<T, ScopeStmt>) {
          read_vars(n.body, used);
        } else if constexpr (std::is_same_v<T, LetStmt>) {
          read_vars(n.value, used);
        } else if constexpr (std::is_same_v<T, CopyStmt>) {
          region(n.src);
          region(n.dst);
        } else if constexpr (std::is_same_v<T, GemmStmt>) {
          region(n.a);
          region(n.b);
          region(n.c);
        } else if constexpr (std::is_same_v<T, GemmL1Stmt>) {
          region(n.a);
          region(n.b);
          region(n.c);
          read_vars(n.init, used);
        } else if constexpr (std::is_same_v<T, TileOpStmt>) {
          region(n.dst);
          for (const auto& r : n.srcs) region(r);
          if (n.scalar) {
            if (auto* x = std::get_if<Expr>(&n.scalar->value)) read_vars(*x, used);
            if (auto* r = std::get_if<Region>(&n.scalar->value)) region(*r);
          }
        } else if constexpr (std::is_same_v<T, ReduceStmt>) {
          region(n.src);
          region(n.dst);
        } else if constexpr (std::is_same_v<T, SetFlagStmt> || std::is_same_v<T, WaitFlagStmt>) {
          read_vars(n.event_id, used);
        } else if constexpr (std::is_same_v<T, SetCrossFlagStmt> ||
                             std::is_same_v<T, WaitCrossFlagStmt>) {
          read_vars(n.flag_id, used);
        }
      },
      s->node);
}

Stmt drop_dead_lets(const Stmt& s) {
  struct DeadLets : StmtMutator {
    std::set<int> used;
    Stmt mutate_leaf(const Stmt& x) override {
      auto* l = std::get_if<LetStmt>(&x->node);
      return l && !used.count(l->var->id) ? nullptr : x;
    }
  };
  Stmt out = s;
  for (Stmt before; out && before != out;) {
    before = out;
    DeadLets d;
    read_vars(out, d.used);
    out = d.mutate(out);
  }
  return out;
}

}  // namespace tilepipe::ir

// Data dependence of control flow and addresses (tilepipe/ir_deps.h).
#include "tilepipe/ir_deps.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "tilepipe/ir_vars.h"

namespace tilepipe::ir {
namespace {

using Tensors = std::set<std::string>;

/// Which host tensors' values reach each buffer and binding: a fixed point over the
/// program's data movement (the sets only grow, bounded by the tensors).
class Taint {
 public:
  explicit Taint(const Program& p) {
    for (const auto& b : p.params) buffers_[b->id].insert(b->name);
    while (changed_) {
      changed_ = false;
      walk(p.body);
    }
  }

  /// The tensors an expression's value depends on.
  Tensors of(const Expr& e) const {
    Tensors out;
    walk_expr(e, [&](const ExprNode& n) {
      if (auto* l = std::get_if<Load>(&n.node)) add(out, buffer(l->buffer));
      if (auto* v = std::get_if<VarRef>(&n.node)) add(out, var(v->var->id));
    });
    return out;
  }
  /// The tensors the start of a region depends on.
  Tensors of(const Region& r) const {
    Tensors out;
    for (const auto& s : r.start) add(out, of(s));
    return out;
  }
  /// The tensors the indices of the elements an expression reads depend on.
  Tensors indices_of(const Expr& e) const {
    Tensors out;
    walk_expr(e, [&](const ExprNode& n) {
      if (auto* l = std::get_if<Load>(&n.node))
        for (const auto& i : l->index) add(out, of(i));
    });
    return out;
  }

 private:
  static void add(Tensors& to, const Tensors& from) { to.insert(from.begin(), from.end()); }
  const Tensors& buffer(const Buffer& b) const {
    auto it = buffers_.find(b->id);
    return it == buffers_.end() ? kNone : it->second;
  }
  const Tensors& var(int id) const {
    auto it = vars_.find(id);
    return it == vars_.end() ? kNone : it->second;
  }
  void flow(Tensors& to, const Tensors& from) {
    for (const auto& t : from) changed_ = to.insert(t).second || changed_;
  }
  /// What a statement writes into `dst` depends on its sources' values and addresses.
  void into(const Region& dst, const std::vector<const Region*>& srcs) {
    Tensors from;
    for (const Region* s : srcs) {
      add(from, buffer(s->buffer));
      add(from, of(*s));
    }
    flow(buffers_[dst.buffer->id], from);
  }
  void walk(const Stmt& s) {
    if (!s) return;
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, SeqStmt>) {
            for (const auto& c : n.body) walk(c);
          } else if constexpr (std::is_same_v<T, ForStmt> || std::is_same_v<T, ScopeStmt>) {
            walk(n.body);
          } else if constexpr (std::is_same_v<T, IfStmt>) {
            walk(n.then_body);
            walk(n.else_body);
          } else if constexpr (std::is_same_v<T, LetStmt>) {
            flow(vars_[n.var->id], of(n.value));
          } else if constexpr (std::is_same_v<T, CopyStmt>) {
            into(n.dst, {&n.src});
          } else if constexpr (std::is_same_v<T, GemmStmt>) {
            into(n.c, {&n.a, &n.b});
          } else if constexpr (std::is_same_v<T, ReduceStmt>) {
            into(n.dst, {&n.src});
          } else if constexpr (std::is_same_v<T, TileOpStmt>) {
            std::vector<const Region*> srcs;
            for (const auto& r : n.srcs) srcs.push_back(&r);
            if (n.scalar)
              if (auto* r = std::get_if<Region>(&n.scalar->value)) srcs.push_back(r);
            into(n.dst, srcs);
            if (n.scalar)
              if (auto* e = std::get_if<Expr>(&n.scalar->value))
                flow(buffers_[n.dst.buffer->id], of(*e));
          }
        },
        s->node);
  }

  static inline const Tensors kNone{};
  std::map<int, Tensors> buffers_;  // by buffer id
  std::map<int, Tensors> vars_;     // bindings, by variable id
  bool changed_ = true;
};

/// Collects the uses of tainted values, statement by statement.
class Uses {
 public:
  explicit Uses(const Taint& t) : t_(t) {}

  void walk(const Stmt& s) {
    if (!s) return;
    const Loc& loc = s->loc;
    auto regions = [&](std::initializer_list<const Region*> rs) {
      for (const Region* r : rs) add(t_.of(*r), "address", loc);
    };
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, SeqStmt>) {
            for (const auto& c : n.body) walk(c);
          } else if constexpr (std::is_same_v<T, ForStmt>) {
            for (const auto& e : {n.begin, n.end}) {
              add(t_.of(e), "loop bound", loc);
              add(t_.indices_of(e), "address", loc);
            }
            walk(n.body);
          } else if constexpr (std::is_same_v<T, IfStmt>) {
            add(t_.of(n.cond), "branch", loc);
            add(t_.indices_of(n.cond), "address", loc);
            walk(n.then_body);
            walk(n.else_body);
          } else if constexpr (std::is_same_v<T, ScopeStmt>) {
            walk(n.body);
          } else if constexpr (std::is_same_v<T, LetStmt>) {
            add(t_.indices_of(n.value), "address", loc);
          } else if constexpr (std::is_same_v<T, CopyStmt>) {
            regions({&n.src, &n.dst});
          } else if constexpr (std::is_same_v<T, GemmStmt>) {
            regions({&n.a, &n.b, &n.c});
          } else if constexpr (std::is_same_v<T, ReduceStmt>) {
            regions({&n.src, &n.dst});
          } else if constexpr (std::is_same_v<T, TileOpStmt>) {
            regions({&n.dst});
            for (const auto& r : n.srcs) regions({&r});
            if (n.scalar) {
              if (auto* r = std::get_if<Region>(&n.scalar->value)) regions({r});
              if (auto* e = std::get_if<Expr>(&n.scalar->value))
                add(t_.indices_of(*e), "address", loc);
            }
          }
        },
        s->node);
  }

  std::vector<DataUse> sorted() const {
    std::vector<DataUse> out;
    for (const auto& [key, loc] : seen_) out.push_back({std::get<2>(key), std::get<3>(key), loc});
    return out;
  }

 private:
  void add(const Tensors& ts, const char* use, const Loc& loc) {
    for (const auto& t : ts) seen_.try_emplace({loc.file, loc.line, t, use}, loc);
  }

  const Taint& t_;
  std::map<std::tuple<std::string, int, std::string, std::string>, Loc> seen_;
};

}  // namespace

std::vector<DataUse> data_dependence(const Program& p) {
  Taint taint(p);
  Uses uses(taint);
  uses.walk(p.body);
  return uses.sorted();
}

}  // namespace tilepipe::ir

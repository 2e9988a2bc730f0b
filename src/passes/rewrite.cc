// RegionRewriter (rewrite.h).
#include "passes/rewrite.h"

#include "passes/dependence.h"
#include "tilepipe/vec_modes.h"

namespace tilepipe::passes {

using namespace ir;

std::optional<Region> widen(const Region& r, int var, int64_t begin, int64_t n, size_t* dim) {
  std::optional<size_t> k;
  for (size_t d = 0; d < r.start.size(); ++d) {
    auto* v = std::get_if<VarRef>(&r.start[d]->node);
    if (v && v->var->id == var && r.extent[d] == 1 && !k) {
      k = d;
    } else if (uses_var(r.start[d], var)) {
      return std::nullopt;
    }
  }
  if (!k) return std::nullopt;
  Region out = r;
  out.start[*k] = make_int(begin, r.start[*k]->loc);
  out.extent[*k] = n;
  if (dim) *dim = *k;
  return out;
}

bool ub_aligned(const Region& r, int64_t align) {
  int64_t stride = dtype_bytes(r.buffer->dtype);
  for (size_t d = r.start.size(); d-- > 0;) {
    auto c = as_const(r.start[d]);
    if ((c ? *c * stride : stride) % align != 0) return false;
    stride *= r.buffer->shape[d];
  }
  return true;
}

Expr RegionRewriter::expr(const Expr& e) {
  return std::visit(
      [&](const auto& n) -> Expr {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, Binary>) {
          if (fold_) return fold(n.op, expr(n.a), expr(n.b));
          return make_binary(n.op, expr(n.a), expr(n.b), e->loc);
        } else if constexpr (std::is_same_v<T, Select>) {
          on_select(n);
          Expr c = expr(n.cond);
          if (auto k = as_const(c); k && fold_) return expr(*k ? n.then_value : n.else_value);
          return make_select(c, expr(n.then_value), expr(n.else_value), e->loc);
        } else if constexpr (std::is_same_v<T, Load>) {
          std::vector<Expr> idx;
          for (const auto& i : n.index) idx.push_back(expr(i));
          return load(n, std::move(idx), e->loc);
        } else if constexpr (std::is_same_v<T, VarRef>) {
          return var(e, n);
        } else {
          return e;
        }
      },
      e->node);
}

Region RegionRewriter::rewrite(const Region& r) {
  Region out = r;
  for (auto& s : out.start) s = expr(s);
  return region(std::move(out));
}

Stmt RegionRewriter::mutate_for(const ForStmt& s, const Stmt& self) {
  ForStmt f = s;
  f.begin = expr(s.begin);
  f.end = expr(s.end);
  f.body = mutate(s.body);
  return make_stmt(std::move(f), self->loc);
}

Stmt RegionRewriter::mutate_if(const IfStmt& s, const Stmt& self) {
  return make_stmt(IfStmt{expr(s.cond), mutate(s.then_body), mutate(s.else_body)}, self->loc);
}

Stmt RegionRewriter::mutate_leaf(const Stmt& s) {
  return std::visit(
      [&](const auto& n) -> Stmt {
        using T = std::decay_t<decltype(n)>;
        T m = n;
        if constexpr (std::is_same_v<T, CopyStmt>) {
          m.src = rewrite(n.src);
          m.dst = rewrite(n.dst);
        } else if constexpr (std::is_same_v<T, GemmStmt>) {
          m.a = rewrite(n.a);
          m.b = rewrite(n.b);
          m.c = rewrite(n.c);
        } else if constexpr (std::is_same_v<T, TileOpStmt>) {
          m.dst = rewrite(n.dst);
          for (auto& r : m.srcs) r = rewrite(r);
          if (n.op == TileOpKind::Broadcast && n.attrs[0] == 0 && !n.srcs.empty() &&
              m.srcs[0].extent != n.srcs[0].extent) {
            // a slot dimension reshapes the vector ([R] -> [1, R]): keep the direction its
            // shape gave as written
            const Region& v = n.srcs[0];
            const bool per_row =
                broadcast_per_row_by_shape(v.extent.data(), static_cast<int>(v.extent.size()),
                                           v.elements(), tile_matrix(n.dst).first);
            m.attrs[0] = static_cast<int64_t>(per_row ? BroadcastDir::Column : BroadcastDir::Row);
          }
          if (m.scalar) {
            if (auto* r = std::get_if<Region>(&m.scalar->value))
              m.scalar->value = rewrite(*r);
            else if (auto* e = std::get_if<Expr>(&m.scalar->value))
              m.scalar->value = expr(*e);
          }
        } else if constexpr (std::is_same_v<T, ReduceStmt>) {
          m.src = rewrite(n.src);
          m.dst = rewrite(n.dst);
        } else if constexpr (std::is_same_v<T, LetStmt>) {
          m.value = expr(n.value);
        } else if constexpr (std::is_same_v<T, SetFlagStmt> || std::is_same_v<T, WaitFlagStmt>) {
          m.event_id = expr(n.event_id);
        } else if constexpr (std::is_same_v<T, SetCrossFlagStmt> ||
                             std::is_same_v<T, WaitCrossFlagStmt>) {
          m.flag_id = expr(n.flag_id);
        } else {
          return s;
        }
        return make_stmt(std::move(m), s->loc);
      },
      s->node);
}

Stmt ExpandInPlace::mutate_scope(const ScopeStmt& s, const Stmt& self) {
  const bool outer = hand_;
  hand_ = has_hand_sync(s.body);
  Stmt out = StmtMutator::mutate_scope(s, self);
  hand_ = outer;
  return out;
}

Stmt ExpandInPlace::mutate_seq(const SeqStmt& s, const Stmt& self) {
  std::vector<Stmt> out;
  bool changed = false;
  for (const Stmt& c : s.body) {
    if (expand(c, out)) {  // its statements take its place
      changed = true;
      continue;
    }
    Stmt m = mutate(c);
    changed |= m != c;
    out.push_back(std::move(m));
  }
  return changed ? make_stmt(SeqStmt{std::move(out)}, self->loc) : self;
}

Stmt ExpandInPlace::mutate_leaf(const Stmt& self) {
  std::vector<Stmt> out;
  return expand(self, out) ? seq(std::move(out), self->loc) : self;
}

}  // namespace tilepipe::passes

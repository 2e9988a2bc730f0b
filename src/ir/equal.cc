// Structural equality of tile IR, up to renaming of loop variables.
#include <map>
#include <optional>

#include "tilepipe/ir.h"

namespace tilepipe::ir {
namespace {

class Equal {
 public:
  bool expr(const Expr& a, const Expr& b) {
    if (!a || !b) return a == b;
    if (a->node.index() != b->node.index()) return false;
    return std::visit(
        [&](const auto& x) -> bool {
          using T = std::decay_t<decltype(x)>;
          const auto& y = std::get<T>(b->node);
          if constexpr (std::is_same_v<T, IntImm>)
            return x.value == y.value;
          else if constexpr (std::is_same_v<T, VarRef>)
            return var(x.var, y.var);
          else if constexpr (std::is_same_v<T, CoreIdx> || std::is_same_v<T, VecIdx>)
            return true;
          else if constexpr (std::is_same_v<T, Binary>)
            return x.op == y.op && expr(x.a, y.a) && expr(x.b, y.b);
          else if constexpr (std::is_same_v<T, Select>)
            return expr(x.cond, y.cond) && expr(x.then_value, y.then_value) &&
                   expr(x.else_value, y.else_value);
          else if constexpr (std::is_same_v<T, Load>) {
            if (!buffer(x.buffer, y.buffer) || x.index.size() != y.index.size()) return false;
            for (size_t i = 0; i < x.index.size(); ++i)
              if (!expr(x.index[i], y.index[i])) return false;
            return true;
          } else
            static_assert(sizeof(T) == 0, "Equal: unhandled expression node");
        },
        a->node);
  }

  /// Variables match one-to-one: a loop variable matches the other loop's variable inside
  /// the loop body (see `bound`); a free variable matches whatever it meets first.
  bool var(const Var& a, const Var& b) {
    auto f = fwd_.find(a->id);
    auto r = rev_.find(b->id);
    if (f == fwd_.end() && r == rev_.end()) {
      fwd_[a->id] = b->id;
      rev_[b->id] = a->id;
      return true;
    }
    return f != fwd_.end() && r != rev_.end() && f->second == b->id && r->second == a->id;
  }

  /// Runs `body` with loop variables a and b bound to each other, then restores the outer
  /// bindings (a variable may be reused by sibling loops, or shadow an outer use).
  template <class F>
  bool bound(const Var& a, const Var& b, F&& body) {
    auto old_f = fwd_.find(a->id) != fwd_.end() ? std::optional<int>(fwd_[a->id]) : std::nullopt;
    auto old_r = rev_.find(b->id) != rev_.end() ? std::optional<int>(rev_[b->id]) : std::nullopt;
    fwd_[a->id] = b->id;
    rev_[b->id] = a->id;
    bool ok = body();
    if (old_f)
      fwd_[a->id] = *old_f;
    else
      fwd_.erase(a->id);
    if (old_r)
      rev_[b->id] = *old_r;
    else
      rev_.erase(b->id);
    return ok;
  }

  static bool buffer(const Buffer& a, const Buffer& b) {
    if (!a || !b) return a == b;
    return a->name == b->name && a->scope == b->scope && a->dtype == b->dtype &&
           a->shape == b->shape && a->role == b->role;
  }

  bool region(const Region& a, const Region& b) {
    if (!buffer(a.buffer, b.buffer) || a.extent != b.extent || a.start.size() != b.start.size())
      return false;
    for (size_t i = 0; i < a.start.size(); ++i)
      if (!expr(a.start[i], b.start[i])) return false;
    return true;
  }

  bool regions(const std::vector<Region>& a, const std::vector<Region>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!region(a[i], b[i])) return false;
    return true;
  }

  bool scalar(const std::optional<ScalarOperand>& a, const std::optional<ScalarOperand>& b) {
    if (!a || !b) return a.has_value() == b.has_value();
    if (a->value.index() != b->value.index()) return false;
    if (auto* d = std::get_if<double>(&a->value)) return *d == std::get<double>(b->value);
    if (auto* e = std::get_if<Expr>(&a->value)) return expr(*e, std::get<Expr>(b->value));
    return region(std::get<Region>(a->value), std::get<Region>(b->value));
  }

  bool stmt(const Stmt& a, const Stmt& b) {
    if (!a || !b) return a == b;
    if (a->node.index() != b->node.index()) return false;
    return std::visit(
        [&](const auto& x) -> bool {
          return node(x, std::get<std::decay_t<decltype(x)>>(b->node));
        },
        a->node);
  }

  bool node(const SeqStmt& x, const SeqStmt& y) {
    return x.body.size() == y.body.size() && seq_from(x, y, 0);
  }
  /// Statements i.. of two sequences; a let binds its variable for the rest of them.
  bool seq_from(const SeqStmt& x, const SeqStmt& y, size_t i) {
    for (; i < x.body.size(); ++i) {
      const Stmt &a = x.body[i], &b = y.body[i];
      auto *la = a ? std::get_if<LetStmt>(&a->node) : nullptr,
           *lb = b ? std::get_if<LetStmt>(&b->node) : nullptr;
      if (la && lb)
        return expr(la->value, lb->value) &&
               bound(la->var, lb->var, [&] { return seq_from(x, y, i + 1); });
      if (!stmt(a, b)) return false;
    }
    return true;
  }
  bool node(const LetStmt& x, const LetStmt& y) {
    return expr(x.value, y.value) && var(x.var, y.var);
  }
  bool node(const ForStmt& x, const ForStmt& y) {
    return expr(x.begin, y.begin) && expr(x.end, y.end) && x.step == y.step && x.kind == y.kind &&
           x.num_stages == y.num_stages && x.cross_interval == y.cross_interval &&
           bound(x.var, y.var, [&] { return stmt(x.body, y.body); });
  }
  bool node(const IfStmt& x, const IfStmt& y) {
    return expr(x.cond, y.cond) && stmt(x.then_body, y.then_body) && stmt(x.else_body, y.else_body);
  }
  bool node(const ScopeStmt& x, const ScopeStmt& y) {
    return x.kind == y.kind && stmt(x.body, y.body);
  }
  bool node(const AllocStmt& x, const AllocStmt& y) { return buffer(x.buffer, y.buffer); }
  bool node(const CopyStmt& x, const CopyStmt& y) {
    return region(x.src, y.src) && region(x.dst, y.dst) && x.transpose == y.transpose &&
           x.pad_value == y.pad_value && x.atomic_add == y.atomic_add && x.relu == y.relu;
  }
  bool node(const GemmStmt& x, const GemmStmt& y) {
    return region(x.a, y.a) && region(x.b, y.b) && region(x.c, y.c) &&
           x.transpose_a == y.transpose_a && x.transpose_b == y.transpose_b && x.init == y.init;
  }
  bool node(const GemmL1Stmt& x, const GemmL1Stmt& y) {
    return region(x.a, y.a) && region(x.b, y.b) && region(x.c, y.c) &&
           x.transpose_a == y.transpose_a && x.transpose_b == y.transpose_b &&
           expr(x.init, y.init) && x.k_chunk == y.k_chunk;
  }
  bool node(const TileOpStmt& x, const TileOpStmt& y) {
    return x.op == y.op && x.cmp == y.cmp && region(x.dst, y.dst) && regions(x.srcs, y.srcs) &&
           scalar(x.scalar, y.scalar) && x.attrs == y.attrs;
  }
  bool node(const ReduceStmt& x, const ReduceStmt& y) {
    return x.kind == y.kind && region(x.src, y.src) && region(x.dst, y.dst) && x.dim == y.dim &&
           x.clear == y.clear;
  }
  bool node(const SetFlagStmt& x, const SetFlagStmt& y) {
    return x.src == y.src && x.dst == y.dst && expr(x.event_id, y.event_id);
  }
  bool node(const WaitFlagStmt& x, const WaitFlagStmt& y) {
    return x.src == y.src && x.dst == y.dst && expr(x.event_id, y.event_id);
  }
  bool node(const PipeBarrierStmt& x, const PipeBarrierStmt& y) { return x.pipe == y.pipe; }
  bool node(const SetCrossFlagStmt& x, const SetCrossFlagStmt& y) {
    return x.pipe == y.pipe && x.mode == y.mode && expr(x.flag_id, y.flag_id);
  }
  bool node(const WaitCrossFlagStmt& x, const WaitCrossFlagStmt& y) {
    return expr(x.flag_id, y.flag_id);
  }

 private:
  std::map<int, int> fwd_;  // a's variable id -> b's
  std::map<int, int> rev_;  // b's variable id -> a's
};

}  // namespace

bool equal(const Program& a, const Program& b) {
  Equal eq;
  if (a.name != b.name || a.block_num != b.block_num || a.params.size() != b.params.size() ||
      a.workspaces.size() != b.workspaces.size())
    return false;
  for (size_t i = 0; i < a.params.size(); ++i)
    if (!Equal::buffer(a.params[i], b.params[i])) return false;
  for (size_t i = 0; i < a.workspaces.size(); ++i)
    if (!Equal::buffer(a.workspaces[i], b.workspaces[i])) return false;
  // Placements by buffer id: ids differ between builds, so compare the offsets in order.
  if (a.addresses.size() != b.addresses.size()) return false;
  std::vector<int64_t> oa, ob;
  for (const auto& [id, v] : a.addresses) oa.push_back(v);
  for (const auto& [id, v] : b.addresses) ob.push_back(v);
  if (oa != ob) return false;
  return eq.stmt(a.body, b.body);
}
bool equal(const Stmt& a, const Stmt& b) {
  return Equal().stmt(a, b);
}
bool equal(const Expr& a, const Expr& b) {
  return Equal().expr(a, b);
}

}  // namespace tilepipe::ir

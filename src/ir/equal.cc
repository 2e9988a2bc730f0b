// Structural equality of tile IR, up to renaming of loop variables.
#include <map>

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
          else
            static_assert(sizeof(T) == 0, "Equal: unhandled expression node");
        },
        a->node);
  }

  /// Binds a's variable to b's on first sight (at its loop), then requires consistency.
  bool var(const Var& a, const Var& b) {
    auto it = vars_.find(a->id);
    if (it == vars_.end()) {
      vars_[a->id] = b->id;
      return true;
    }
    return it->second == b->id;
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
    if (x.body.size() != y.body.size()) return false;
    for (size_t i = 0; i < x.body.size(); ++i)
      if (!stmt(x.body[i], y.body[i])) return false;
    return true;
  }
  bool node(const ForStmt& x, const ForStmt& y) {
    return var(x.var, y.var) && expr(x.begin, y.begin) && expr(x.end, y.end) && x.step == y.step &&
           x.kind == y.kind && x.num_stages == y.num_stages &&
           x.cross_interval == y.cross_interval && stmt(x.body, y.body);
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
           x.pad_value == y.pad_value;
  }
  bool node(const GemmStmt& x, const GemmStmt& y) {
    return region(x.a, y.a) && region(x.b, y.b) && region(x.c, y.c) &&
           x.transpose_a == y.transpose_a && x.transpose_b == y.transpose_b && x.init == y.init;
  }
  bool node(const TileOpStmt& x, const TileOpStmt& y) {
    return x.op == y.op && x.cmp == y.cmp && region(x.dst, y.dst) && regions(x.srcs, y.srcs) &&
           scalar(x.scalar, y.scalar);
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
  std::map<int, int> vars_;
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
  return eq.stmt(a.body, b.body);
}
bool equal(const Stmt& a, const Stmt& b) {
  return Equal().stmt(a, b);
}
bool equal(const Expr& a, const Expr& b) {
  return Equal().expr(a, b);
}

}  // namespace tilepipe::ir

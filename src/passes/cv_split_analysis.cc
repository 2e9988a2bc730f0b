// The Cube/Vector split's analysis: which core kinds a subtree holds work for, what unscoped
// code may not hold, the GM tensors the author hands between the cores, which UB buffers
// split by rows, and which accesses a subtree makes to one buffer.
#include <fmt/format.h>

#include "passes/cv_split_internal.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes::cv_split_detail {

[[noreturn]] void fail(const Loc& loc, std::string msg, std::string hint) {
  throw UserError(Diagnostic{loc, "cv-split", std::move(msg), {}, std::move(hint)});
}

bool is_crossing(const Stmt& s) {
  auto* c = std::get_if<CopyStmt>(&s->node);
  if (!c) return false;
  return crosses_cores(c->src.buffer->scope, c->dst.buffer->scope);
}

std::set<CoreKind> kinds_in(const Stmt& s) {
  return kinds_of(s, [](const Stmt& l) -> std::set<CoreKind> {
    if (auto* sc = std::get_if<ScopeStmt>(&l->node)) return {sc->kind};
    if (is_crossing(l)) return {CoreKind::C, CoreKind::V};
    auto k = leaf_core(l);
    if (!k || std::holds_alternative<AllocStmt>(l->node)) return {};
    return {*k};
  });
}

Unscoped check_unscoped(const Program& p) {
  struct V : StmtVisitor {
    bool scope = false;
    const StmtNode* leaf = nullptr;  // first leaf outside any scope
    const StmtNode* flag = nullptr;  // first hand flag
    const StmtNode* vid = nullptr;   // first use of vid
    int depth = 0;
    static bool uses_vid(const Expr& e) {
      return expr_any(e, [](const ExprNode& n) { return std::holds_alternative<VecIdx>(n.node); });
    }
    static bool region_vid(const Region& r) {
      for (const auto& s : r.start)
        if (uses_vid(s)) return true;
      return false;
    }
    void leafy(const StmtNode& n) {
      if (depth == 0 && !leaf && !std::holds_alternative<AllocStmt>(n.node)) leaf = &n;
    }
    void visit_scope(const ScopeStmt& s, const StmtNode& n) override {
      scope = true;
      ++depth;
      StmtVisitor::visit_scope(s, n);
      --depth;
    }
    void visit_for(const ForStmt& s, const StmtNode& n) override {
      if (depth == 0 && !vid && (uses_vid(s.begin) || uses_vid(s.end))) vid = &n;
      StmtVisitor::visit_for(s, n);
    }
    void visit_if(const IfStmt& s, const StmtNode& n) override {
      if (depth == 0 && !vid && uses_vid(s.cond)) vid = &n;
      StmtVisitor::visit_if(s, n);
    }
    void visit_copy(const CopyStmt& c, const StmtNode& n) override {
      leafy(n);
      if (depth == 0 && !vid && (region_vid(c.src) || region_vid(c.dst))) vid = &n;
    }
    void visit_gemm(const GemmStmt&, const StmtNode& n) override { leafy(n); }
    void visit_tile(const TileOpStmt& t, const StmtNode& n) override {
      leafy(n);
      bool v = region_vid(t.dst);
      for (const auto& r : t.srcs) v = v || region_vid(r);
      if (depth == 0 && !vid && v) vid = &n;
    }
    void visit_reduce(const ReduceStmt&, const StmtNode& n) override { leafy(n); }
    void hand(const StmtNode& n) {
      leafy(n);
      if (depth == 0 && !flag) flag = &n;
    }
    void visit_set_flag(const SetFlagStmt&, const StmtNode& n) override { hand(n); }
    void visit_wait_flag(const WaitFlagStmt&, const StmtNode& n) override { hand(n); }
    void visit_barrier(const PipeBarrierStmt&, const StmtNode& n) override { hand(n); }
    void visit_set_cross(const SetCrossFlagStmt&, const StmtNode& n) override { hand(n); }
    void visit_wait_cross(const WaitCrossFlagStmt&, const StmtNode& n) override { hand(n); }
  } v;
  v.visit(p.body);
  if (!v.leaf) return {};  // scoped, or nothing to split
  if (v.scope)
    fail(v.leaf->loc, "statement outside a scope in a program that has scopes",
         "write the whole kernel without scopes (automatic mode) or put every statement in "
         "scope_c / scope_v (expert mode)");
  if (v.flag)
    fail(v.flag->loc, "hand-written flag in unscoped code: the split inserts every flag",
         "drop the flag, or write the kernel with scopes (expert mode)");
  return {true, v.vid};
}

void for_leaves(const Stmt& s, const std::function<void(const Stmt&)>& f) {
  if (!s) return;
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>) {
          for (const auto& c : n.body) for_leaves(c, f);
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          for_leaves(n.body, f);
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          for_leaves(n.then_body, f);
          for_leaves(n.else_body, f);
        } else if constexpr (std::is_same_v<T, ScopeStmt>) {
          for_leaves(n.body, f);
        } else {
          f(s);
        }
      },
      s->node);
}

CoreKind other(CoreKind k) {
  return k == CoreKind::C ? CoreKind::V : CoreKind::C;
}

std::map<int, Handoff> find_handoffs(const Stmt& body, const StmtNode** conflict) {
  struct Use {
    Buffer buf;
    std::set<CoreKind> w, r;
    const StmtNode* second_writer = nullptr;
  };
  std::map<int, Use> uses;
  for_leaves(body, [&](const Stmt& s) {
    auto k = leaf_core(s);
    if (!k || std::holds_alternative<AllocStmt>(s->node)) return;
    for (const auto& a : leaf_accesses(s)) {
      if (a.region.buffer->scope != Scope::GM) continue;
      Use& u = uses[a.region.buffer->id];
      u.buf = a.region.buffer;
      if (a.kind == AccessKind::Write) {
        if (!u.w.empty() && !u.w.count(*k) && !u.second_writer) u.second_writer = s.get();
        u.w.insert(*k);
      } else {
        u.r.insert(*k);
      }
    }
  });
  std::map<int, Handoff> out;
  for (const auto& [id, u] : uses) {
    if (u.w.size() == 2 && !u.r.empty() && !*conflict) *conflict = u.second_writer;
    if (u.w.size() == 1 && u.r.count(other(*u.w.begin()))) out[id] = Handoff{u.buf, *u.w.begin()};
  }
  return out;
}

std::set<int> split_buffers(const Stmt& body) {
  std::map<int, int> parent;
  auto find = [&](int x) {
    while (parent.count(x) && parent[x] != x) x = parent[x];
    return x;
  };
  auto unite = [&](int a, int b) {
    parent.emplace(a, a);
    parent.emplace(b, b);
    a = find(a), b = find(b);
    if (a != b) parent[a] = b;
  };
  std::set<int> seeds;
  auto row_tile = [](const Region& r) {
    return r.buffer->scope == Scope::UB && r.extent[0] == r.buffer->shape[0];
  };
  struct V : StmtVisitor {
    std::function<void(const std::vector<Region>&, bool)> op;
    std::function<void(const Region&)> seed;
    void visit_copy(const CopyStmt& c, const StmtNode& n) override {
      if (is_crossing(std::shared_ptr<const StmtNode>(std::shared_ptr<const StmtNode>{}, &n)))
        seed(c.src.buffer->scope == Scope::UB ? c.src : c.dst);
      else if (c.src.buffer->scope == Scope::UB && c.dst.buffer->scope == Scope::GM &&
               c.src.extent[0] == c.src.buffer->shape[0])
        seed(c.src);  // a stored tile: each vector core stores its rows
      else if (c.src.buffer->scope == Scope::UB && c.dst.buffer->scope == Scope::UB)
        op({c.src, c.dst}, false);
    }
    void visit_tile(const TileOpStmt& t, const StmtNode&) override {
      std::vector<Region> rs = {t.dst};
      rs.insert(rs.end(), t.srcs.begin(), t.srcs.end());
      op(rs, t.op == TileOpKind::Broadcast);
    }
    void visit_reduce(const ReduceStmt& r, const StmtNode&) override { op({r.src, r.dst}, false); }
  } v;
  v.seed = [&](const Region& r) { seeds.insert(r.buffer->id); };
  v.op = [&](const std::vector<Region>& rs, bool broadcast) {
    // A broadcast shares rows only from a row vector ([R] or [R, 1] into [R, C]).
    size_t n = rs.size();
    if (broadcast && n == 2) {
      auto sq = rs[1].squeezed();
      bool row_vec = (sq.size() == 1 && rs[1].extent.size() == 1) ||
                     (sq.size() >= 1 && rs[1].extent.back() == 1);
      if (!row_vec) n = 1;
    }
    for (size_t i = 1; i < n; ++i)
      if (row_tile(rs[0]) && row_tile(rs[i]) && rs[0].extent[0] == rs[i].extent[0])
        unite(rs[0].buffer->id, rs[i].buffer->id);
  };
  v.visit(body);
  std::set<int> roots;
  for (int s : seeds) roots.insert(find(s));
  std::set<int> out = seeds;
  for (const auto& [id, p] : parent)
    if (roots.count(find(id))) out.insert(id);
  return out;
}

std::set<CoreKind> touching(const Stmt& s, int id) {
  std::set<CoreKind> out;
  for_leaves(s, [&](const Stmt& l) {
    auto k = leaf_core(l);
    if (!k) return;
    for (const auto& a : leaf_accesses(l))
      if (a.region.buffer->id == id) out.insert(*k);
  });
  return out;
}

size_t count_leaves(const Stmt& s, int id) {
  size_t n = 0;
  for_leaves(s, [&](const Stmt& l) {
    for (const auto& a : leaf_accesses(l))
      if (a.region.buffer->id == id) {
        ++n;
        return;
      }
  });
  return n;
}

Pipe last_pipe(const Stmt& s, int id, AccessKind kind, Pipe fallback) {
  Pipe out = fallback;
  for (const auto& a : collect_accesses(s, {}))
    if (a.region.buffer->id == id && a.kind == kind) out = a.pipe;
  return out;
}

}  // namespace tilepipe::passes::cv_split_detail

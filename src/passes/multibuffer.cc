// Intra-core multi-buffering (multibuffer.h).
#include "passes/multibuffer.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "passes/dependence.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

/// Rewrites every region and load of the buffers in `slot_of` to index the slot first.
class Versioner : public StmtMutator {
 public:
  Versioner(const std::map<int, Buffer>& versions, Expr slot)
      : v_(versions), slot_(std::move(slot)) {}

  Expr expr(const Expr& e) const {
    return std::visit(
        [&](const auto& n) -> Expr {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, Binary>) {
            return make_binary(n.op, expr(n.a), expr(n.b), e->loc);
          } else if constexpr (std::is_same_v<T, Select>) {
            return make_select(expr(n.cond), expr(n.then_value), expr(n.else_value), e->loc);
          } else if constexpr (std::is_same_v<T, Load>) {
            std::vector<Expr> idx;
            for (const auto& i : n.index) idx.push_back(expr(i));
            auto it = v_.find(n.buffer->id);
            if (it == v_.end()) return make_load(n.buffer, std::move(idx), e->loc);
            idx.insert(idx.begin(), slot_);
            return make_load(it->second, std::move(idx), e->loc);
          } else {
            return e;
          }
        },
        e->node);
  }

  Region region(const Region& r) const {
    Region out = r;
    for (auto& s : out.start) s = expr(s);
    auto it = v_.find(r.buffer->id);
    if (it == v_.end()) return out;
    out.buffer = it->second;
    out.start.insert(out.start.begin(), slot_);
    out.extent.insert(out.extent.begin(), 1);
    return out;
  }

  Stmt mutate_for(const ForStmt& s, const Stmt& self) override {
    ForStmt f = s;
    f.begin = expr(s.begin);
    f.end = expr(s.end);
    f.body = mutate(s.body);
    return make_stmt(std::move(f), self->loc);
  }
  Stmt mutate_if(const IfStmt& s, const Stmt& self) override {
    return make_stmt(IfStmt{expr(s.cond), mutate(s.then_body), mutate(s.else_body)}, self->loc);
  }
  Stmt mutate_leaf(const Stmt& s) override {
    return std::visit(
        [&](const auto& n) -> Stmt {
          using T = std::decay_t<decltype(n)>;
          T m = n;
          if constexpr (std::is_same_v<T, CopyStmt>) {
            m.src = region(n.src);
            m.dst = region(n.dst);
          } else if constexpr (std::is_same_v<T, GemmStmt>) {
            m.a = region(n.a);
            m.b = region(n.b);
            m.c = region(n.c);
          } else if constexpr (std::is_same_v<T, TileOpStmt>) {
            m.dst = region(n.dst);
            for (auto& r : m.srcs) r = region(r);
            if (m.scalar) {
              if (auto* r = std::get_if<Region>(&m.scalar->value))
                m.scalar->value = region(*r);
              else if (auto* e = std::get_if<Expr>(&m.scalar->value))
                m.scalar->value = expr(*e);
            }
          } else if constexpr (std::is_same_v<T, ReduceStmt>) {
            m.src = region(n.src);
            m.dst = region(n.dst);
          } else if constexpr (std::is_same_v<T, SetCrossFlagStmt>) {
            m.flag_id = expr(n.flag_id);
          } else if constexpr (std::is_same_v<T, WaitCrossFlagStmt>) {
            m.flag_id = expr(n.flag_id);
          } else {
            return s;
          }
          return make_stmt(std::move(m), s->loc);
        },
        s->node);
  }

 private:
  const std::map<int, Buffer>& v_;
  Expr slot_;
};

bool covers_whole(const Region& r) {
  for (size_t d = 0; d < r.extent.size(); ++d)
    if (as_const(r.start[d]) != 0 || r.extent[d] != r.buffer->shape[d]) return false;
  return true;
}

class Pass : public StmtMutator {
 public:
  explicit Pass(const Program& p) : p_(p) {}

  std::map<int, Buffer> replaced;  // old buffer id -> versioned buffer

  Stmt mutate_scope(const ScopeStmt& s, const Stmt& self) override {
    scope_body_ = s.body;
    hand_ = has_hand_sync(s.body);
    Stmt b = mutate(s.body);
    scope_body_ = nullptr;
    if (b == s.body) return self;
    return make_stmt(ScopeStmt{s.kind, std::move(b)}, self->loc);
  }

  Stmt mutate_for(const ForStmt& s, const Stmt& self) override {
    Stmt body = mutate(s.body);
    if (s.kind != ForKind::Pipelined || !scope_body_) {
      if (body == s.body) return self;
      ForStmt f = s;
      f.body = body;
      return make_stmt(std::move(f), self->loc);
    }
    if (hand_)
      throw UserError(Diagnostic{
          self->loc,
          "pipelined",
          "Pipelined loop in a scope with hand-written flags: the flags would not cover the "
          "buffer versions this loop needs",
          {},
          "drop the scope's intra-core flags (auto_sync inserts them), or write the slots "
          "and flags by hand in a serial loop"});
    ForStmt f = s;
    f.kind = ForKind::Serial;
    f.body = body;
    int ns = s.num_stages;
    if (ns >= 2) {
      std::map<int, Buffer> versions;
      for (const Buffer& b : candidates(s, body, self.get())) {
        auto shape = b->shape;
        shape.insert(shape.begin(), ns);
        versions[b->id] = make_buffer(b->name, b->scope, b->dtype, shape, b->role, b->loc);
      }
      if (!versions.empty()) {
        Expr it = make_binary(BinOp::Sub, make_var_ref(s.var), s.begin);
        if (as_const(s.begin) == 0) it = make_var_ref(s.var);
        if (s.step != 1) it = make_binary(BinOp::Div, it, make_int(s.step));
        Expr slot = make_binary(BinOp::Mod, it, make_int(ns), self->loc);
        Versioner v(versions, slot);
        f.body = v.mutate(body);
        for (auto& [id, nb] : versions) replaced[id] = nb;
      }
    }
    f.num_stages = 0;
    return make_stmt(std::move(f), self->loc);
  }

 private:
  /// Buffers of the loop that cross pipes inside an iteration and carry nothing across.
  std::vector<Buffer> candidates(const ForStmt& loop, const Stmt& body, const StmtNode* self) {
    std::map<int, std::set<Pipe>> pipes;
    std::map<int, Buffer> bufs;
    for (const auto& a : collect_accesses(body, {})) {
      if (a.region.buffer->scope == Scope::GM) continue;
      pipes[a.region.buffer->id].insert(a.pipe);
      bufs[a.region.buffer->id] = a.region.buffer;
    }
    // Allocated inside the loop: already one per iteration.
    struct Allocs : StmtVisitor {
      std::set<int> ids;
      void visit_alloc(const AllocStmt& a, const StmtNode&) override { ids.insert(a.buffer->id); }
    } inner;
    inner.visit(body);
    // Accessed outside the loop anywhere in the scope.
    std::set<int> outside;
    (void)self;
    for (const auto& a : collect_accesses(scope_body_, {}))
      if (!inside(a.stmt, loop.body)) outside.insert(a.region.buffer->id);
    std::vector<Stmt> top = flatten(body);
    std::vector<Buffer> out;
    for (const auto& [id, ps] : pipes) {
      if (ps.size() < 2 || inner.ids.count(id) || outside.count(id) || p_.addresses.count(id))
        continue;
      if (bufs[id]->shape.size() >= 4) continue;  // the lowering handles rank <= 4
      // The first top-level statement touching the buffer writes all of it, reading none.
      bool ok = false;
      for (const auto& st : top) {
        auto accs = collect_accesses(st, {});
        bool touches = false, reads = false, writes_all = false;
        for (const auto& a : accs) {
          if (a.region.buffer->id != id) continue;
          touches = true;
          if (a.kind == AccessKind::Read) reads = true;
          if (a.kind == AccessKind::Write && covers_whole(a.region) && a.loops.empty() &&
              a.stmt == st.get())
            writes_all = true;
        }
        if (!touches) continue;
        ok = writes_all && !reads;
        break;
      }
      if (ok) out.push_back(bufs[id]);
    }
    return out;
  }

  static bool inside(const StmtNode* n, const Stmt& tree) {
    struct Find : StmtVisitor {
      const StmtNode* n;
      bool found = false;
      void visit_node(const StmtNode& s) {
        if (&s == n) found = true;
      }
      void visit_for(const ForStmt& f, const StmtNode& s) override {
        visit_node(s);
        StmtVisitor::visit_for(f, s);
      }
      void visit_if(const IfStmt& f, const StmtNode& s) override {
        visit_node(s);
        StmtVisitor::visit_if(f, s);
      }
      void visit_alloc(const AllocStmt&, const StmtNode& s) override { visit_node(s); }
      void visit_copy(const CopyStmt&, const StmtNode& s) override { visit_node(s); }
      void visit_gemm(const GemmStmt&, const StmtNode& s) override { visit_node(s); }
      void visit_tile(const TileOpStmt&, const StmtNode& s) override { visit_node(s); }
      void visit_reduce(const ReduceStmt&, const StmtNode& s) override { visit_node(s); }
      void visit_set_cross(const SetCrossFlagStmt&, const StmtNode& s) override { visit_node(s); }
      void visit_wait_cross(const WaitCrossFlagStmt&, const StmtNode& s) override { visit_node(s); }
    } f;
    f.n = n;
    f.visit(tree);
    return f.found;
  }

  const Program& p_;
  Stmt scope_body_;
  bool hand_ = false;
};

/// Replaces the allocations of versioned buffers.
class Reallocate : public StmtMutator {
 public:
  explicit Reallocate(const std::map<int, Buffer>& r) : r_(r) {}
  Stmt mutate_leaf(const Stmt& s) override {
    if (auto* a = std::get_if<AllocStmt>(&s->node))
      if (auto it = r_.find(a->buffer->id); it != r_.end())
        return make_stmt(AllocStmt{it->second}, s->loc);
    return s;
  }

 private:
  const std::map<int, Buffer>& r_;
};

}  // namespace

Program multibuffer(const Program& p, const ChipConfig&, const PassOptions&) {
  Pass pass(p);
  Program out = p;
  out.body = pass.mutate(p.body);
  if (!pass.replaced.empty()) out.body = Reallocate(pass.replaced).mutate(out.body);
  return out;
}

}  // namespace tilepipe::passes

// Intra-core multi-buffering (multibuffer.h).
#include "passes/multibuffer.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "passes/dependence.h"
#include "passes/rewrite.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

/// Rewrites every region and load of the versioned buffers to index the slot first.
class Versioner : public RegionRewriter {
 public:
  Versioner(const std::map<int, Buffer>& versions, Expr slot)
      : v_(versions), slot_(std::move(slot)) {}

  Expr load(const Load& l, std::vector<Expr> idx, const Loc& loc) override {
    auto it = v_.find(l.buffer->id);
    if (it == v_.end()) return make_load(l.buffer, std::move(idx), loc);
    idx.insert(idx.begin(), slot_);
    return make_load(it->second, std::move(idx), loc);
  }

  Region region(Region r) override {
    auto it = v_.find(r.buffer->id);
    if (it == v_.end()) return r;
    r.buffer = it->second;
    r.start.insert(r.start.begin(), slot_);
    r.extent.insert(r.extent.begin(), 1);
    return r;
  }

 private:
  const std::map<int, Buffer>& v_;
  Expr slot_;
};

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
          "drop the scope's intra-core flags (auto_sync inserts them), write the slots "
          "and flags by hand in a serial loop, or schedule it as TileLang-Ascend does "
          "(--pass hand_pipeline)"});
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
        // The versions are allocated right before the loop (they are used nowhere else), so
        // memory planning keeps their bytes only for the loop.
        SeqStmt seq;
        for (auto& [id, nb] : versions) {
          replaced[id] = nb;
          seq.body.push_back(make_stmt(AllocStmt{nb}, nb->loc));
        }
        f.num_stages = 0;
        seq.body.push_back(make_stmt(std::move(f), self->loc));
        return make_stmt(std::move(seq), self->loc);
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
      // Rank >= 4 stays single-buffered, as when the lowering took rank <= 4 only: a slot
      // dimension would now lower, but versioning those buffers would change the cycles of
      // the kernels written since.
      if (bufs[id]->shape.size() >= 4) continue;
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
      void visit_let(const LetStmt&, const StmtNode& s) override { visit_node(s); }
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

/// Drops the allocations of versioned buffers (their versions are allocated at the loop).
class Reallocate : public StmtMutator {
 public:
  explicit Reallocate(const std::map<int, Buffer>& r) : r_(r) {}
  Stmt mutate_leaf(const Stmt& s) override {
    if (auto* a = std::get_if<AllocStmt>(&s->node); a && r_.count(a->buffer->id)) return nullptr;
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
  for (const auto& [id, nb] : pass.replaced) out.versions[nb->id] = nb->shape[0];
  return out;
}

}  // namespace tilepipe::passes

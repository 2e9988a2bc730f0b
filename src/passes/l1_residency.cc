// L1 residency (l1_residency.h).
#include "passes/l1_residency.h"

#include <set>

#include "passes/dependence.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

/// L1 bytes of a scope, buffers written in a Pipelined loop counted num_stages times.
int64_t l1_estimate(const Stmt& scope) {
  struct V : StmtVisitor {
    std::map<int, int64_t> bytes;
    std::map<int, int> copies;
    int stages = 1;
    void visit_alloc(const AllocStmt& a, const StmtNode&) override {
      if (a.buffer->scope == Scope::L1) bytes[a.buffer->id] = a.buffer->bytes();
    }
    void visit_for(const ForStmt& f, const StmtNode& n) override {
      int outer = stages;
      if (f.kind == ForKind::Pipelined) stages = std::max(stages, f.num_stages);
      StmtVisitor::visit_for(f, n);
      stages = outer;
    }
    void visit_copy(const CopyStmt& c, const StmtNode&) override {
      if (c.dst.buffer->scope == Scope::L1)
        copies[c.dst.buffer->id] = std::max(copies[c.dst.buffer->id], stages);
    }
  } v;
  v.visit(scope);
  int64_t sum = 0;
  for (const auto& [id, b] : v.bytes) sum += b * std::max(1, v.copies[id]);
  return sum;
}

class Pass : public StmtMutator {
 public:
  explicit Pass(const ChipConfig& chip) : chip_(chip) {}

  Stmt mutate_scope(const ScopeStmt& s, const Stmt& self) override {
    if (s.kind != CoreKind::C || has_hand_sync(s.body) || l1_estimate(s.body) > chip_.l1.usable)
      return self;
    scope_ = s.body;
    Stmt b = mutate(s.body);
    scope_ = nullptr;
    if (b == s.body) return self;
    return make_stmt(ScopeStmt{s.kind, b}, self->loc);
  }

  Stmt mutate_seq(const SeqStmt& s, const Stmt& self) override {
    SeqStmt out;
    bool changed = false;
    for (const auto& c : s.body) {
      Stmt m = mutate(c);
      auto [loop, hoisted] = split_off(c, m);
      if (m != c || !hoisted.empty()) changed = true;
      for (auto& h : hoisted) out.body.push_back(h);
      out.body.push_back(loop);
    }
    return changed ? make_stmt(std::move(out), self->loc) : self;
  }

  /// A loop whose body is a single loop: the inner loop's hoisted loads go into the body.
  Stmt mutate_for(const ForStmt& s, const Stmt& self) override {
    Stmt b = mutate(s.body);
    auto [loop, hoisted] = split_off(s.body, b);
    if (!hoisted.empty()) {
      hoisted.push_back(loop);
      b = make_stmt(SeqStmt{std::move(hoisted)}, s.body->loc);
    }
    if (b == s.body) return self;
    ForStmt f = s;
    f.body = b;
    return make_stmt(std::move(f), self->loc);
  }

 private:
  /// `m` (the mutated form of `orig`) without the invariant L1 loads of its loop, and those
  /// loads; statements other than loops come back unchanged.
  std::pair<Stmt, std::vector<Stmt>> split_off(const Stmt& orig, const Stmt& m) {
    if (!scope_ || !orig || !std::holds_alternative<ForStmt>(orig->node) ||
        !std::holds_alternative<ForStmt>(m->node))
      return {m, {}};
    return hoist(std::get<ForStmt>(m->node), m, orig);
  }

  /// The loop without its invariant L1 loads, and those loads in order. `orig` is the loop
  /// in the scope as written (where "outside the loop" is looked up).
  std::pair<Stmt, std::vector<Stmt>> hoist(const ForStmt& f, const Stmt& self, const Stmt& orig) {
    std::vector<Stmt> body = flatten(f.body), kept, hoisted;
    std::vector<Access> all = collect_accesses(f.body, {});
    // Variables the body binds (lets) change with the iteration like the loop variable.
    std::set<int> varying = {f.var->id};
    for (int id : let_assignments(f.body).bound) varying.insert(id);
    for (size_t i = 0; i < body.size(); ++i) {
      const Stmt& st = body[i];
      auto* c = std::get_if<CopyStmt>(&st->node);
      if (!c || c->src.buffer->scope != Scope::GM || c->dst.buffer->scope != Scope::L1 ||
          c->src.buffer->role != TensorRole::Input || !covers_whole(c->dst) ||
          !invariant(c->src, varying)) {
        kept.push_back(st);
        continue;
      }
      int dst = c->dst.buffer->id;
      bool first = true, other_write = false;
      for (size_t k = 0; k < i; ++k)
        for (const auto& a : collect_accesses(body[k], {}))
          if (a.region.buffer->id == dst) first = false;
      for (const auto& a : all)
        if (a.region.buffer->id == dst && a.kind == AccessKind::Write && a.stmt != st.get())
          other_write = true;
      if (!first || other_write || used_outside(dst, orig)) {
        kept.push_back(st);
        continue;
      }
      hoisted.push_back(st);
    }
    if (hoisted.empty()) return {self, {}};
    ForStmt g = f;
    g.body = make_stmt(SeqStmt{std::move(kept)}, f.body->loc);
    return {make_stmt(std::move(g), self->loc), hoisted};
  }

  static bool invariant(const Region& r, const std::set<int>& vars) {
    for (const auto& s : r.start)
      for (int v : vars)
        if (uses_var(s, v)) return false;
    return true;
  }

  bool used_outside(int buf, const Stmt& loop) const {
    struct Find : StmtVisitor {
      const StmtNode* loop;
      int buf;
      bool found = false;
      void visit_for(const ForStmt& f, const StmtNode& n) override {
        if (&n == loop) return;
        StmtVisitor::visit_for(f, n);
      }
      void leaf(const StmtNode& n) {
        auto sp = std::shared_ptr<const StmtNode>(std::shared_ptr<const StmtNode>{}, &n);
        for (const auto& a : leaf_accesses(sp))
          if (a.region.buffer->id == buf) found = true;
      }
      void visit_copy(const CopyStmt&, const StmtNode& n) override { leaf(n); }
      void visit_gemm(const GemmStmt&, const StmtNode& n) override { leaf(n); }
    } v;
    v.loop = loop.get();
    v.buf = buf;
    v.visit(scope_);
    return v.found;
  }

  const ChipConfig& chip_;
  Stmt scope_;
};

}  // namespace

Program l1_residency(const Program& p, const ChipConfig& chip, const PassOptions&) {
  Program out = p;
  out.body = Pass(chip).mutate(p.body);
  return out;
}

}  // namespace tilepipe::passes

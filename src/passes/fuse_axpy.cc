// Axpy fusion (fuse_axpy.h).
#include "passes/fuse_axpy.h"

#include <map>
#include <set>

#include "passes/dependence.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

bool covers_whole(const Region& r) {
  for (size_t d = 0; d < r.extent.size(); ++d)
    if (as_const(r.start[d]) != 0 || r.extent[d] != r.buffer->shape[d]) return false;
  return true;
}

bool same_region(const Region& a, const Region& b) {
  if (a.buffer->id != b.buffer->id || a.extent != b.extent || a.start.size() != b.start.size())
    return false;
  for (size_t d = 0; d < a.start.size(); ++d)
    if (!equal(a.start[d], b.start[d])) return false;
  return true;
}

/// Every node of a subtree (the statements an access's `stmt` may point at).
void subtree(const Stmt& s, std::set<const StmtNode*>& out) {
  if (!s) return;
  out.insert(s.get());
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>) {
          for (const auto& c : n.body) subtree(c, out);
        } else if constexpr (std::is_same_v<T, ForStmt> || std::is_same_v<T, ScopeStmt>) {
          subtree(n.body, out);
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          subtree(n.then_body, out);
          subtree(n.else_body, out);
        }
      },
      s->node);
}

/// The accesses of one statement of a sequence, by buffer id.
struct Uses {
  std::set<int> reads, writes;
  std::vector<Access> all;
  bool touches(int id) const { return reads.count(id) || writes.count(id); }
};

Uses uses_of(const Stmt& s) {
  Uses u;
  u.all = collect_accesses(s, {});
  for (const auto& a : u.all)
    (a.kind == AccessKind::Read ? u.reads : u.writes).insert(a.region.buffer->id);
  return u;
}

/// Does statement `s` (with uses `u`) overwrite all of buffer `id` without reading it?
bool kills(const Stmt& s, const Uses& u, int id) {
  if (u.reads.count(id)) return false;
  for (const auto& a : u.all)
    if (a.region.buffer->id == id && a.kind == AccessKind::Write && a.stmt == s.get() &&
        a.loops.empty() && covers_whole(a.region))
      return true;
  return false;
}

const TileOpStmt* tile_op(const Stmt& s) {
  return std::get_if<TileOpStmt>(&s->node);
}

/// Finds the mul / add pairs to fuse in the automatic scopes of a program.
class Finder {
 public:
  explicit Finder(const Program& p) : p_(p) {
    for (const auto& a : collect_accesses(p.body, {}))
      users_[a.region.buffer->id].push_back(a.stmt);
  }

  std::set<const StmtNode*> removed;      // the fused muls
  std::map<const StmtNode*, Stmt> fused;  // add / sub -> axpy

  /// Walks to the scopes; `loops` counts the loops around `s`.
  void walk(const Stmt& s, int loops) {
    if (!s) return;
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, SeqStmt>) {
            for (const auto& c : n.body) walk(c, loops);
          } else if constexpr (std::is_same_v<T, ForStmt>) {
            walk(n.body, loops + 1);
          } else if constexpr (std::is_same_v<T, IfStmt>) {
            walk(n.then_body, loops);
            walk(n.else_body, loops);
          } else if constexpr (std::is_same_v<T, ScopeStmt>) {
            if (!has_hand_sync(n.body)) sequence(n.body, loops);
          }
        },
        s->node);
  }

 private:
  void sequence(const Stmt& body, int loops) {
    std::vector<Stmt> items = flatten(body);
    for (const auto& s : items) {
      if (auto* f = std::get_if<ForStmt>(&s->node)) sequence(f->body, loops + 1);
      if (auto* c = std::get_if<IfStmt>(&s->node)) {
        sequence(c->then_body, loops);
        sequence(c->else_body, loops);
      }
    }
    std::vector<Uses> uses;
    for (const auto& s : items) uses.push_back(uses_of(s));
    std::set<const StmtNode*> inside;
    for (const auto& s : items) subtree(s, inside);
    for (size_t i = 0; i < items.size(); ++i) try_pair(items, uses, inside, i, loops);
  }

  bool pinned(const Region& r) const { return p_.addresses.count(r.buffer->id) > 0; }

  void try_pair(const std::vector<Stmt>& items, const std::vector<Uses>& uses,
                const std::set<const StmtNode*>& inside, size_t i, int loops) {
    const TileOpStmt* mul = tile_op(items[i]);
    if (!mul || mul->op != TileOpKind::Mul || mul->srcs.size() != 1 || !mul->scalar) return;
    const Region& t = mul->dst;
    const Region& x = mul->srcs[0];
    const int tb = t.buffer->id;
    if (t.buffer->dtype != DType::F32 || t.buffer->scope != Scope::UB || pinned(t) || pinned(x))
      return;
    const std::set<int>& mul_reads = uses[i].reads;
    if (x.buffer->id == tb ? !same_region(x, t) : mul_reads.count(tb) > 0) return;
    // The add: the next statement touching t's buffer.
    size_t j = i + 1;
    while (j < items.size() && !uses[j].touches(tb)) ++j;
    if (j == items.size()) return;
    const TileOpStmt* add = tile_op(items[j]);
    if (!add || add->scalar || add->srcs.size() != 2) return;
    const Region& d = add->dst;
    bool sub = add->op == TileOpKind::Sub;
    bool dt = same_region(add->srcs[0], d) && same_region(add->srcs[1], t);
    bool td = same_region(add->srcs[0], t) && same_region(add->srcs[1], d);
    if (!((add->op == TileOpKind::Add && (dt || td)) || (sub && dt))) return;
    const int db = d.buffer->id;
    if (db == tb || db == x.buffer->id || mul_reads.count(db) || pinned(d)) return;
    const double* imm = std::get_if<double>(&mul->scalar->value);
    if (sub && !imm) return;
    // Nothing in between touches d or writes what the mul reads (x, its scalar).
    for (size_t k = i + 1; k < j; ++k) {
      if (uses[k].touches(db)) return;
      for (int r : mul_reads)
        if (uses[k].writes.count(r)) return;
    }
    if (!dead_after(items, uses, inside, i, j, tb, loops)) return;
    TileOpStmt axpy;
    axpy.op = TileOpKind::Axpy;
    axpy.dst = d;
    axpy.srcs = {x};
    axpy.scalar = *mul->scalar;
    if (sub) axpy.scalar->value = -*imm;
    removed.insert(items[i].get());
    fused[items[j].get()] = make_stmt(std::move(axpy), items[j]->loc);
  }

  /// Is t's buffer dead after items[j] (the add of the mul items[i])?
  bool dead_after(const std::vector<Stmt>& items, const std::vector<Uses>& uses,
                  const std::set<const StmtNode*>& inside, size_t i, size_t j, int tb,
                  int loops) const {
    for (size_t k = j + 1; k < items.size(); ++k)
      if (uses[k].touches(tb)) return kills(items[k], uses[k], tb);
    // Live past the end of the sequence: nothing else may use the buffer, and around a
    // loop the next iteration must overwrite it before any read.
    if (auto it = users_.find(tb); it != users_.end())
      for (const StmtNode* n : it->second)
        if (!inside.count(n)) return false;
    if (loops == 0) return true;
    for (size_t k = 0; k <= i; ++k)
      if (uses[k].touches(tb)) return kills(items[k], uses[k], tb);
    return false;
  }

  const Program& p_;
  std::map<int, std::vector<const StmtNode*>> users_;  // buffer id -> accessing statements
};

/// Drops the fused muls and puts the axpys at the adds' positions.
class Apply : public StmtMutator {
 public:
  explicit Apply(const Finder& f) : f_(f) {}
  Stmt mutate_seq(const SeqStmt& s, const Stmt& self) override {
    SeqStmt out;
    bool changed = false;
    for (const auto& c : s.body) {
      if (f_.removed.count(c.get())) {
        changed = true;
        continue;
      }
      if (auto it = f_.fused.find(c.get()); it != f_.fused.end()) {
        out.body.push_back(it->second);
        changed = true;
        continue;
      }
      Stmt m = mutate(c);
      changed |= m != c;
      out.body.push_back(std::move(m));
    }
    if (!changed) return self;
    return make_stmt(std::move(out), self->loc);
  }

 private:
  const Finder& f_;
};

}  // namespace

Program fuse_axpy(const Program& p, const ChipConfig&, const PassOptions&) {
  Finder f(p);
  f.walk(p.body, 0);
  if (f.fused.empty()) return p;
  Program out = p;
  out.body = Apply(f).mutate(p.body);
  return out;
}

}  // namespace tilepipe::passes

// Axpy fusion (fuse_axpy.h).
#include "passes/fuse_axpy.h"

#include <map>
#include <optional>
#include <set>

#include "passes/dependence.h"
#include "passes/rewrite.h"
#include "tilepipe/vec_modes.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

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

/// Vectorises per-row scalar loops in automatic scopes:
///   for r in [b, b + n): muls(B(r, ...), W(r, ...), s); adds(B(r, ...), B(r, ...), at(m, r))
/// becomes broadcast(B(b:+n, ...), m(b:+n)) then axpy(B(b:+n, ...), W(b:+n, ...), s).
class Vectorise : public StmtMutator {
 public:
  Vectorise(const Program& p, const ChipConfig& chip) : p_(p), align_(chip.ub_align) {}

  Stmt mutate_scope(const ScopeStmt& s, const Stmt& self) override {
    if (has_hand_sync(s.body)) return self;
    return StmtMutator::mutate_scope(s, self);
  }

  Stmt mutate_for(const ForStmt& s, const Stmt& self) override {
    Stmt inner = StmtMutator::mutate_for(s, self);
    if (inner != self) return inner;
    if (auto v = row_loop(s, self)) return *v;
    return self;
  }

 private:
  bool pinned(const Region& r) const { return p_.addresses.count(r.buffer->id) > 0; }

  std::optional<Stmt> row_loop(const ForStmt& f, const Stmt& self) const {
    auto b = as_const(f.begin), e = as_const(f.end);
    if (f.kind == ForKind::Pipelined || f.step != 1 || !b || !e || *e - *b < 2) return {};
    const int64_t n = *e - *b;
    auto items = flatten(f.body);
    if (items.size() != 2) return {};
    const TileOpStmt* mul = tile_op(items[0]);
    const TileOpStmt* add = tile_op(items[1]);
    if (!mul || !add || mul->op != TileOpKind::Mul || add->op != TileOpKind::Add ||
        mul->srcs.size() != 1 || add->srcs.size() != 1 || !mul->scalar || !add->scalar)
      return {};
    const int var = f.var->id;
    const Region& dst = mul->dst;
    const Region& src = mul->srcs[0];
    const Region* m = std::get_if<Region>(&add->scalar->value);
    if (!m || !same_region(add->dst, dst) || !same_region(add->srcs[0], dst)) return {};
    if (std::holds_alternative<Region>(mul->scalar->value)) return {};
    if (auto* x = std::get_if<Expr>(&mul->scalar->value); x && uses_var(*x, var)) return {};
    for (const Region* r : {&dst, &src, m})
      if (r->buffer->dtype != DType::F32 || pinned(*r)) return {};
    if (dst.buffer->id == src.buffer->id || dst.buffer->id == m->buffer->id) return {};
    size_t mk = 0;
    auto d2 = widen(dst, var, *b, n, nullptr);
    auto s2 = widen(src, var, *b, n, nullptr);
    auto m2 = widen(*m, var, *b, n, &mk);
    if (!d2 || !s2 || !m2) return {};
    // The column vector is contiguous: one element per row, leading dimensions single.
    for (size_t d = 0; d < m2->start.size(); ++d)
      if (d < mk ? m2->extent[d] != 1
                 : d > mk && (m2->extent[d] != m2->buffer->shape[d] || as_const(m2->start[d]) != 0))
        return {};
    auto dsq = d2->squeezed(), msq = m2->squeezed();
    if (dsq.size() != 2 || dsq[0] != n || s2->squeezed() != dsq) return {};
    if (!(msq == std::vector<int64_t>{n} || msq == std::vector<int64_t>{n, 1})) return {};
    if (!ub_aligned(*d2, align_) || !ub_aligned(*s2, align_) || !ub_aligned(*m2, align_)) return {};
    TileOpStmt bc;
    bc.op = TileOpKind::Broadcast;
    bc.dst = *d2;
    bc.srcs = {*m2};
    bc.attrs[0] = static_cast<int64_t>(BroadcastDir::Column);  // one value per row
    TileOpStmt axpy;
    axpy.op = TileOpKind::Axpy;
    axpy.dst = *d2;
    axpy.srcs = {*s2};
    axpy.scalar = mul->scalar;
    SeqStmt out;
    out.body.push_back(make_stmt(std::move(bc), items[1]->loc));
    out.body.push_back(make_stmt(std::move(axpy), items[0]->loc));
    return make_stmt(std::move(out), self->loc);
  }

  const Program& p_;
  int64_t align_;
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

Program fuse_axpy(const Program& p, const ChipConfig& chip, const PassOptions&) {
  Program out = p;
  out.body = Vectorise(p, chip).mutate(p.body);
  Finder f(out);
  f.walk(out.body, 0);
  if (!f.fused.empty()) out.body = Apply(f).mutate(out.body);
  return out;
}

}  // namespace tilepipe::passes

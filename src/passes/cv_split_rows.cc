// Step 1 of the Cube/Vector split: the rows of the UB buffers that exchange tiles with the
// Cube are split between the vector cores; UB buffers that never meet them row by row are
// replicated.
#include <fmt/format.h>

#include "passes/cv_split_internal.h"
#include "passes/rewrite.h"

namespace tilepipe::passes::cv_split_detail {

namespace {

class RowSplit : public RegionRewriter {
 public:
  RowSplit(int nv, std::set<int> split) : nv_(nv), split_(std::move(split)) {}

  bool is_split(const Buffer& b) const { return b->scope == Scope::UB && split_.count(b->id); }

  Buffer half(const Buffer& b) {
    auto it = map_.find(b->id);
    if (it != map_.end()) return it->second;
    if (b->shape[0] % nv_ != 0)
      fail(b->loc,
           fmt::format("UB buffer '{}' has {} rows, which do not split between the {} vector "
                       "cores",
                       b->name, b->shape[0], nv_),
           fmt::format("give it a multiple of {} rows", nv_));
    auto shape = b->shape;
    shape[0] /= nv_;
    Buffer h = make_buffer(b->name, b->scope, b->dtype, shape, b->role, b->loc);
    map_[b->id] = h;
    return h;
  }

  /// Row r of a split buffer, r a row loop's variable (the vector core's own row)?
  bool own_row(const Region& r) const {
    if (!is_split(r.buffer) || r.extent[0] != 1) return false;
    auto* v = std::get_if<VarRef>(&r.start[0]->node);
    return v && rows_.count(v->var->id);
  }

  /// One row of a split buffer indexed by a row loop's variable: the vector core's own row.
  Region rewrite(const Region& r) override {
    if (own_row(r)) {
      Region out = r;
      for (size_t d = 1; d < out.start.size(); ++d) out.start[d] = expr(out.start[d]);
      out.buffer = half(r.buffer);
      return out;
    }
    return RegionRewriter::rewrite(r);
  }

  /// A row loop's variable elsewhere: the row of the whole tile, vid * rows / nv + r.
  Expr var(const Expr& e, const VarRef& v) override {
    auto it = rows_.find(v.var->id);
    if (it == rows_.end() || nv_ == 1) return e;  // one AIV (threads=1): vid is 0
    return make_binary(BinOp::Add, e, make_binary(BinOp::Mul, make_vid(), make_int(it->second)));
  }

  /// `for r in [0, R)` writing row r of a split buffer of R rows: each vector core runs
  /// its R / nv rows.
  Stmt mutate_for(const ForStmt& f, const Stmt& self) override {
    auto b = as_const(f.begin), e = as_const(f.end);
    bool row_loop = false;
    if (b == 0 && e && f.step == 1)
      for (const auto& a : collect_accesses(f.body, {}))
        if (is_split(a.region.buffer) && a.region.buffer->shape[0] == *e && a.region.extent[0] == 1)
          if (auto* v = std::get_if<VarRef>(&a.region.start[0]->node); v && v->var == f.var)
            row_loop = true;
    if (!row_loop) return RegionRewriter::mutate_for(f, self);
    rows_[f.var->id] = *e / nv_;
    ForStmt g = f;
    g.end = make_int(*e / nv_);
    g.body = mutate(f.body);
    rows_.erase(f.var->id);
    return make_stmt(std::move(g), self->loc);
  }

  Region region(Region r) override {
    if (!is_split(r.buffer)) return r;
    if (as_const(r.start[0]) != 0 || r.extent[0] != r.buffer->shape[0])
      fail(loc_,
           fmt::format("UB operand {} uses part of the rows of '{}': each vector core owns 1/{} "
                       "of them",
                       print(r), r.buffer->name, nv_),
           "use the leading dimension whole (slice later dimensions instead)");
    r.extent[0] /= nv_;
    r.buffer = half(r.buffer);
    return r;
  }

  Expr load(const Load& l, std::vector<Expr> idx, const Loc& loc) override {
    if (is_split(l.buffer))
      fail(loc_,
           fmt::format("scalar read of '{}', whose rows are split between the vector cores",
                       l.buffer->name),
           "use tile ops (broadcast) instead of per-element reads");
    return make_load(l.buffer, std::move(idx), loc);
  }

  Stmt mutate_leaf(const Stmt& s) override {
    loc_ = s->loc;
    if (auto* a = std::get_if<AllocStmt>(&s->node))
      return is_split(a->buffer) ? make_stmt(AllocStmt{half(a->buffer)}, s->loc) : s;
    if (auto* r = std::get_if<ReduceStmt>(&s->node); r && is_split(r->src.buffer)) {
      int rank = static_cast<int>(r->src.extent.size());
      int dim = r->dim < 0 ? rank + r->dim : r->dim;
      if (dim == 0)
        fail(s->loc, "reduction along the rows, which are split between the vector cores",
             "reduce along a later dimension");
    }
    if (auto* t = std::get_if<TileOpStmt>(&s->node); t && t->scalar)
      // an element of the vector core's own row (m_i[h_i] in a row loop) is its to read
      if (auto* sr = std::get_if<Region>(&t->scalar->value);
          sr && is_split(sr->buffer) && !own_row(*sr))
        fail(s->loc, "scalar operand read from UB, whose rows are split between the vector cores",
             "broadcast the value into a tile and use a tile operand");
    Stmt out = RegionRewriter::mutate_leaf(s);
    // A GM <-> UB copy moves the vector core's rows of the GM tile.
    if (auto* c = std::get_if<CopyStmt>(&out->node)) {
      const CopyStmt& orig = std::get<CopyStmt>(s->node);
      bool in = orig.src.buffer->scope == Scope::GM && orig.dst.buffer->scope == Scope::UB;
      bool outc = orig.src.buffer->scope == Scope::UB && orig.dst.buffer->scope == Scope::GM;
      if (in || outc) {
        const Region& u = in ? orig.dst : orig.src;
        if (!is_split(u.buffer)) {
          if (outc)
            fail(s->loc,
                 fmt::format("store of '{}', which every vector core holds whole (it never "
                             "shares rows with a tile of the Cube): both would write it",
                             u.buffer->name),
                 "store a tile that is exchanged with the Cube, or compute the result from one");
          return out;
        }
        if (u.extent[0] != u.buffer->shape[0]) return out;  // one row, in a row loop
        CopyStmt m = *c;
        Region& g = in ? m.src : m.dst;
        g = split_gm(g, u.extent[0], s->loc);
        return make_stmt(std::move(m), s->loc);
      }
    }
    return out;
  }

  /// The vector core's share of a GM tile whose first non-unit dimension holds `rows`.
  Region split_gm(Region g, int64_t rows, const Loc& loc) const {
    if (nv_ == 1) return g;  // one AIV (threads=1) moves the whole tile; vid is 0
    for (size_t d = 0; d < g.extent.size(); ++d) {
      if (g.extent[d] == 1) continue;
      if (g.extent[d] != rows) break;
      int64_t h = rows / nv_;
      Expr mine = make_binary(BinOp::Mul, make_vid(), make_int(h));
      g.start[d] = as_const(g.start[d]) == 0 ? mine : make_binary(BinOp::Add, g.start[d], mine);
      g.extent[d] = h;
      return g;
    }
    fail(loc,
         fmt::format("GM tile {} does not have the UB operand's {} rows as its first dimension",
                     print(g), rows),
         "copy a tile whose leading (non-unit) dimension matches the UB buffer's rows");
  }

  Buffer lookup(int id) const {
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : it->second;
  }

 private:
  int nv_;
  std::set<int> split_;
  std::map<int, int64_t> rows_;  // row loop variable -> rows per vector core
  std::map<int, Buffer> map_;
  Loc loc_;
};

}  // namespace

Program split_rows(const Program& p, int nv) {
  RowSplit rows(nv, split_buffers(p.body));
  Program split = p;
  split.body = rows.mutate(p.body);
  for (const auto& [id, addr] : p.addresses)
    if (Buffer h = rows.lookup(id)) split.addresses[h->id] = addr;
  return split;
}

}  // namespace tilepipe::passes::cv_split_detail

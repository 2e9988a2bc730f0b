// Vectorisation of Parallel loops (vectorize.h).
#include "passes/vectorize.h"

#include <fmt/format.h>

#include <bit>
#include <map>
#include <set>

#include "passes/dependence.h"
#include "passes/rewrite.h"
#include "tilepipe/ir_range.h"
#include "tilepipe/vec_modes.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

[[noreturn]] void scalar_loop(const Loc& loc, const std::string& why,
                              std::string hint =
                                  "write it with serial(...) to run it row by "
                                  "row, or use tile ops over the whole tile") {
  throw UserError(Diagnostic{loc,
                             "vectorize",
                             fmt::format("this Parallel loop stays scalar: {}", why),
                             {},
                             std::move(hint)});
}

bool is_parallel(const Stmt& s) {
  auto* f = std::get_if<ForStmt>(&s->node);
  return f && f->kind == ForKind::Parallel;
}

/// One lane of a nest: a Parallel loop's variable and its iterations.
struct Lane {
  Var var;
  int64_t begin, n;
};

/// An operand widened over the nest, with the lanes it spans (bit k: lane k).
struct Wide {
  Region r;
  unsigned lanes = 0;
};

class Pass : public StmtMutator {
 public:
  explicit Pass(const Program& p) : names_(buffer_names(p)) {}

  Stmt mutate_seq(const SeqStmt& s, const Stmt& self) override {
    std::vector<Stmt> out;
    bool changed = false;
    for (const Stmt& c : s.body) {
      if (is_parallel(c)) {  // the nest's statements take its place
        auto v = nest(c);
        out.insert(out.end(), v.begin(), v.end());
        changed = true;
      } else {
        Stmt m = mutate(c);
        changed |= m != c;
        out.push_back(std::move(m));
      }
    }
    return changed ? make_stmt(SeqStmt{std::move(out)}, self->loc) : self;
  }

  Stmt mutate_for(const ForStmt& f, const Stmt& self) override {
    if (f.kind != ForKind::Parallel) return StmtMutator::mutate_for(f, self);
    return seq(nest(self), self->loc);
  }

 private:
  std::vector<Stmt> nest(Stmt loop) {
    lanes_.clear();
    Stmt body;
    for (;;) {
      const auto& f = std::get<ForStmt>(loop->node);
      auto b = as_const(f.begin), e = as_const(f.end);
      if (!b || !e || f.step != 1)
        scalar_loop(loop->loc, "its bounds are not constant or its step is not 1");
      if (lanes_.size() == 31) scalar_loop(loop->loc, "it nests more than 31 Parallel loops");
      lanes_.push_back({f.var, *b, *e - *b});
      auto inner = flatten(f.body);
      if (inner.size() == 1 && is_parallel(inner.front())) {
        loop = inner.front();
        continue;
      }
      body = f.body;
      break;
    }
    std::vector<Stmt> out;
    for (const auto& l : lanes_) {
      if (l.n >= 1) continue;
      // no iteration: only what it allocates stays (its block's, for later uses)
      for (const Stmt& st : flatten(body))
        if (std::holds_alternative<AllocStmt>(st->node)) out.push_back(st);
      return out;
    }
    all_ = (1u << lanes_.size()) - 1;
    seen_.clear();
    for (const Stmt& st : flatten(body)) {
      std::visit(
          [&](const auto& s) {
            using T = std::decay_t<decltype(s)>;
            if constexpr (std::is_same_v<T, TileOpStmt>) {
              tile(s, st, out);
            } else if constexpr (std::is_same_v<T, ReduceStmt>) {
              ReduceStmt r = s;
              r.src = spanning(s.src, st).r;
              r.dst = spanning(s.dst, st).r;
              out.push_back(make_stmt(std::move(r), st->loc));
            } else if constexpr (std::is_same_v<T, CopyStmt>) {
              CopyStmt c = s;
              Wide a = spanning(s.src, st), b = spanning(s.dst, st);
              if (a.lanes != b.lanes)
                scalar_loop(st->loc, fmt::format("copy from {} to {} spans different lanes on "
                                                 "its two sides",
                                                 print(s.src), print(s.dst)));
              c.src = a.r;
              c.dst = b.r;
              out.push_back(make_stmt(std::move(c), st->loc));
            } else if constexpr (std::is_same_v<T, AllocStmt>) {
              out.push_back(st);  // a front end's temporary, first used here
            } else {
              scalar_loop(st->loc,
                          "its body holds a statement other than tile ops, reductions "
                          "and copies (a loop, a branch, a flag or a matmul)");
            }
          },
          st->node);
    }
    return out;
  }

  /// The lane of an index `v + offset` (offset free of lanes, in any arrangement: a front
  /// end's `(k + v) + vid * rows`) and its offset, null when it is 0.
  std::optional<std::pair<size_t, Expr>> lane_of(const Expr& e) const {
    std::optional<size_t> k;
    for (size_t l = 0; l < lanes_.size(); ++l) {
      if (!uses_var(e, lanes_[l].var->id)) continue;
      if (k) return std::nullopt;  // two lanes in one index
      k = l;
    }
    if (!k) return std::nullopt;
    Expr off = Substitute({{lanes_[*k].var->id, make_int(0, e->loc)}}).expr(e);
    auto d = const_diff(fold(BinOp::Add, off, make_var_ref(lanes_[*k].var, e->loc)), e);
    if (!d || *d != 0) return std::nullopt;  // not v + offset: 2 * v, a load of v, ...
    if (auto c = as_const(off); c && *c == 0) off = nullptr;
    return std::pair{*k, off};
  }

  bool uses_lane(const Expr& e) const {
    for (const auto& l : lanes_)
      if (uses_var(e, l.var->id)) return true;
    return false;
  }

  Wide wide(const Region& r, const Stmt& st) const {
    Wide w{r, 0};
    for (size_t d = 0; d < r.start.size(); ++d) {
      auto lo = lane_of(r.start[d]);
      if (!lo) {
        if (uses_lane(r.start[d]))
          scalar_loop(st->loc, fmt::format("operand {} indexes a dimension with a Parallel "
                                           "variable other than as `v` or `v + offset`",
                                           print(r)));
        continue;
      }
      const auto& [k, off] = *lo;
      const unsigned bit = 1u << k;
      if (r.extent[d] != 1 || (w.lanes & bit))
        scalar_loop(st->loc, fmt::format("operand {} does not index one element of one "
                                         "dimension with each Parallel variable",
                                         print(r)));
      w.lanes |= bit;
      Expr begin = make_int(lanes_[k].begin, r.start[d]->loc);
      w.r.start[d] = off ? fold(BinOp::Add, off, begin) : begin;
      w.r.extent[d] = lanes_[k].n;
    }
    return w;
  }

  /// A reduction's or copy's operand: it must span some lane.
  Wide spanning(const Region& r, const Stmt& st) const {
    Wide w = wide(r, st);
    if (w.lanes == 0)
      scalar_loop(
          st->loc,
          fmt::format("operand {} does not index a dimension with a Parallel variable", print(r)));
    return w;
  }

  void tile(const TileOpStmt& s, const Stmt& st, std::vector<Stmt>& out) {
    TileOpStmt t = s;
    Wide d = wide(s.dst, st);
    if (d.lanes != all_)
      scalar_loop(st->loc, fmt::format("destination {} is not indexed by every Parallel variable",
                                       print(s.dst)));
    t.dst = d.r;
    shape_.clear();  // the destination's lanes and whole dimensions: a temporary's shape
    for (size_t k = 0; k < d.r.extent.size(); ++k)
      if (lane_of(s.dst.start[k]) || d.r.extent[k] != 1) shape_.push_back(d.r.extent[k]);
    for (size_t i = 0; i < s.srcs.size(); ++i) {
      Wide w = wide(s.srcs[i], st);
      if (w.lanes == all_ || (w.lanes == 0 && w.r.elements() == t.dst.elements())) {
        t.srcs[i] = w.r;  // every lane's element, or a tile of the destination's size
      } else if (w.lanes == 0) {
        scalar_loop(st->loc,
                    fmt::format("operand {} is the same tile for every lane: it indexes no "
                                "dimension with a Parallel variable",
                                print(s.srcs[i])),
                    "index it with the loop variable, or broadcast it into a tile of the "
                    "destination's shape before the loop");
      } else if (s.op == TileOpKind::Broadcast) {
        t.srcs[i] = oriented(w, st, out);  // broadcast's source is its own operand
        t.attrs[0] = static_cast<int64_t>(dir_of(w));
      } else {
        t.srcs[i] = full(w, st, out);
      }
    }
    if (!s.scalar) {
      out.push_back(make_stmt(std::move(t), st->loc));
      return;
    }
    if (auto* x = std::get_if<Expr>(&s.scalar->value); x && uses_lane(*x)) {
      if (s.op != TileOpKind::Arange)
        scalar_loop(st->loc, "its scalar operand depends on the loop variable");
      lane_index(t, *x, st, out);
      return;
    }
    const Region* m = std::get_if<Region>(&s.scalar->value);
    if (!m || !std::any_of(m->start.begin(), m->start.end(),
                           [&](const Expr& e) { return uses_lane(e); })) {
      out.push_back(make_stmt(std::move(t), st->loc));  // the same scalar for every lane
      return;
    }
    // One element per row: broadcast the column into dst, then combine with dst.
    static const TileOpKind kBinary[] = {TileOpKind::Add, TileOpKind::Sub, TileOpKind::Mul,
                                         TileOpKind::Div, TileOpKind::Max, TileOpKind::Min};
    bool binary = std::find(std::begin(kBinary), std::end(kBinary), s.op) != std::end(kBinary);
    if (!binary || t.srcs.size() != 1 || t.dst.buffer->id == t.srcs[0].buffer->id ||
        t.dst.buffer->id == m->buffer->id || t.dst.buffer->dtype != m->buffer->dtype)
      scalar_loop(st->loc,
                  "a per-row scalar operand needs a destination distinct from the "
                  "other operands (it receives the broadcast column)");
    out.push_back(broadcast(t.dst, wide(*m, st).r, BroadcastDir::Column, st->loc));
    t.scalar.reset();
    t.srcs.push_back(t.dst);
    out.push_back(make_stmt(std::move(t), st->loc));
  }

  /// A lane's variable used as a value (`arange(d[i, j], j + off)`: each lane's element is
  /// its own index): one arange over the lane's trips, as the hardware's CreateVecIndex
  /// makes it, into the destination itself in a nest of one lane, else into a row [1, C]
  /// (the inner lane) or a column [R] (the outer one) broadcast into the destination.
  void lane_index(TileOpStmt t, const Expr& x, const Stmt& st, std::vector<Stmt>& out) {
    auto lo = lane_of(x);
    if (!lo || lanes_.size() > 2)
      scalar_loop(st->loc,
                  fmt::format("its value {} is not one Parallel variable plus a lane-free "
                              "offset (in a nest of one or two Parallel loops)",
                              print(x)),
                  "compute other index values from v + offset with tile arithmetic (i + j is "
                  "the sum of two such values)");
    const auto& [k, off] = *lo;
    Expr first = make_int(lanes_[k].begin, x->loc);
    t.scalar = ScalarOperand{off ? fold(BinOp::Add, off, first) : first};
    if (lanes_.size() == 1) {
      out.push_back(make_stmt(std::move(t), st->loc));
      return;
    }
    const int64_t n = lanes_[k].n;
    std::vector<int64_t> shape = k == 0 ? std::vector<int64_t>{n} : std::vector<int64_t>{1, n};
    Region dst = t.dst;
    t.dst = full_region(temp(k == 0 ? "par_col" : "par_row", shape, dst.buffer->dtype, st, out));
    Region vec = t.dst;
    out.push_back(make_stmt(std::move(t), st->loc));
    out.push_back(broadcast(dst, vec, k == 0 ? BroadcastDir::Column : BroadcastDir::Row, st->loc));
  }

  /// A source spanning one lane of a 2-D nest, shaped as a row or a column where its slice
  /// has the other orientation (or a square nest leaves it ambiguous), so that a broadcast
  /// repeats it along the other lane.
  Region oriented(const Wide& w, const Stmt& st, std::vector<Stmt>& out) {
    if (lanes_.size() != 2 || std::popcount(w.lanes) != 1)
      scalar_loop(st->loc,
                  fmt::format("operand {} spans some of the Parallel variables but not all; "
                              "a Parallel loop broadcasts a row vector v[i] or a column vector "
                              "w[j] of a 2-D nest",
                              print(w.r)),
                  "index the operand with every Parallel variable, or broadcast it into a "
                  "tile of the destination's shape first");
    const Region& src = w.r;
    const auto& ext = src.extent;
    const size_t rk = ext.size();
    const bool one_row = rk >= 2 && ext[rk - 2] == 1, one_col = rk >= 2 && ext[rk - 1] == 1;
    if (w.lanes == 2u && !one_row && (lanes_[0].n == lanes_[1].n || one_col)) {
      // w[j] on a square nest (its length also matches the rows), or an [N, 1] slice
      // o[j, c]: shaped [1, N] to broadcast along the columns
      return reshaped(src, {1, lanes_[1].n}, "par_row", st, out);
    }
    if (w.lanes == 1u && one_row && ext[rk - 1] == lanes_[0].n) {
      // o[i, j] with j the nest's first (row) variable: a [1, C] slice of values that vary
      // down the rows, shaped [C, 1] (broadcasting it as a row would transpose the result)
      return reshaped(src, {lanes_[0].n, 1}, "par_col", st, out);
    }
    return src;
  }

  /// A source spanning fewer lanes than the destination, broadcast into a temporary.
  Region full(const Wide& w, const Stmt& st, std::vector<Stmt>& out) {
    Region src = oriented(w, st, out);
    Region t = full_region(temp("par_bc", shape_, src.buffer->dtype, st, out));
    out.push_back(broadcast(t, src, dir_of(w), st->loc));
    return t;
  }

  Region reshaped(const Region& src, std::vector<int64_t> shape, const char* base, const Stmt& st,
                  std::vector<Stmt>& out) {
    Region r = full_region(temp(base, std::move(shape), src.buffer->dtype, st, out));
    CopyStmt c;
    c.src = src;
    c.dst = r;
    out.push_back(make_stmt(std::move(c), st->loc));
    return r;
  }

  /// dst = src repeated along the other lane: a column (one value per row) or a row. Said
  /// in the op, since multi-buffering may give a vector a row's shape.
  static Stmt broadcast(const Region& dst, const Region& src, BroadcastDir dir, const Loc& loc) {
    TileOpStmt bc;
    bc.op = TileOpKind::Broadcast;
    bc.dst = dst;
    bc.srcs = {src};
    bc.attrs[0] = static_cast<int64_t>(dir);
    return make_stmt(std::move(bc), loc);
  }

  /// The direction of a source of one lane of a 2-D nest (lane 0: the rows).
  static BroadcastDir dir_of(const Wide& w) {
    return w.lanes == 1u ? BroadcastDir::Column : BroadcastDir::Row;
  }

  /// The UB temporary for the n-th one a statement location needs in this nest: the same
  /// buffer wherever the statement repeats, allocated (here) the first time.
  Buffer temp(const char* base, std::vector<int64_t> shape, DType dtype, const Stmt& st,
              std::vector<Stmt>& out) {
    const Loc& l = st->loc;
    std::string at = fmt::format("{}:{}:{}", l.file, l.line, l.column);
    std::string key = fmt::format("{}#{}#{}#{}#{}", at, seen_[at]++, base, fmt::join(shape, ","),
                                  to_string(dtype));
    if (auto it = temps_.find(key); it != temps_.end()) return it->second;
    std::string name;
    for (int k = 1; name.empty() || names_.count(name); ++k) name = fmt::format("{}{}", base, k);
    names_.insert(name);
    Buffer b = make_buffer(name, Scope::UB, dtype, std::move(shape), TensorRole::None, l);
    out.push_back(make_stmt(AllocStmt{b}, l));
    temps_.emplace(std::move(key), b);
    return b;
  }

  std::set<std::string> names_;
  std::map<std::string, Buffer> temps_;
  std::map<std::string, int> seen_;  // temporaries taken per statement location in this nest
  std::vector<Lane> lanes_;
  unsigned all_ = 0;
  std::vector<int64_t> shape_;
};

}  // namespace

Program vectorize(const Program& p, const ChipConfig&, const PassOptions&) {
  Program out = p;
  out.body = Pass(p).mutate(p.body);
  return out;
}

}  // namespace tilepipe::passes

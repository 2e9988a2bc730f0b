// Vectorisation of Parallel loops (vectorize.h).
#include "passes/vectorize.h"

#include <fmt/format.h>

#include "passes/dependence.h"
#include "passes/rewrite.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

[[noreturn]] void scalar_loop(const Loc& loc, const std::string& why) {
  throw UserError(Diagnostic{loc,
                             "vectorize",
                             fmt::format("this Parallel loop stays scalar: {}", why),
                             {},
                             "write it with serial(...) to run it row by row, or use tile ops "
                             "over the whole tile"});
}

class Pass : public StmtMutator {
 public:
  explicit Pass(const ChipConfig& chip) : align_(chip.ub_align) {}

  Stmt mutate_for(const ForStmt& f, const Stmt& self) override {
    if (f.kind != ForKind::Parallel) return StmtMutator::mutate_for(f, self);
    auto b = as_const(f.begin), e = as_const(f.end);
    if (!b || !e || f.step != 1)
      scalar_loop(self->loc, "its bounds are not constant or its step is not 1");
    const int64_t n = *e - *b;
    if (n < 1) return make_stmt(SeqStmt{}, self->loc);
    begin_ = *b;
    n_ = n;
    var_ = f.var->id;
    SeqStmt out;
    for (const Stmt& st : flatten(f.body)) {
      std::visit(
          [&](const auto& s) {
            using T = std::decay_t<decltype(s)>;
            if constexpr (std::is_same_v<T, TileOpStmt>) {
              tile(s, st, out);
            } else if constexpr (std::is_same_v<T, ReduceStmt>) {
              ReduceStmt r = s;
              r.src = wide(s.src, st);
              r.dst = wide(s.dst, st);
              out.body.push_back(make_stmt(std::move(r), st->loc));
            } else if constexpr (std::is_same_v<T, CopyStmt>) {
              CopyStmt c = s;
              c.src = wide(s.src, st);
              c.dst = wide(s.dst, st);
              out.body.push_back(make_stmt(std::move(c), st->loc));
            } else {
              scalar_loop(st->loc,
                          "its body holds a statement other than tile ops, reductions "
                          "and copies (a loop, a branch, a flag or a matmul)");
            }
          },
          st->node);
    }
    return make_stmt(std::move(out), self->loc);
  }

 private:
  Region wide(const Region& r, const Stmt& st) const {
    auto w = widen(r, var_, begin_, n_);
    if (!w)
      scalar_loop(st->loc, fmt::format("operand {} does not index one dimension with the loop "
                                       "variable alone",
                                       print(r)));
    if (r.buffer->scope == Scope::UB && !ub_aligned(*w, align_))
      scalar_loop(st->loc, fmt::format("the rows of {} would start off the {}-byte UB alignment",
                                       print(*w), align_));
    return *w;
  }

  void tile(const TileOpStmt& s, const Stmt& st, SeqStmt& out) const {
    TileOpStmt t = s;
    t.dst = wide(s.dst, st);
    for (auto& r : t.srcs) r = wide(r, st);
    if (!s.scalar) {
      out.body.push_back(make_stmt(std::move(t), st->loc));
      return;
    }
    if (auto* x = std::get_if<Expr>(&s.scalar->value); x && uses_var(*x, var_))
      scalar_loop(st->loc, "its scalar operand depends on the loop variable");
    const Region* m = std::get_if<Region>(&s.scalar->value);
    if (!m || !uses_var_in(*m)) {  // the same scalar for every row
      out.body.push_back(make_stmt(std::move(t), st->loc));
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
    TileOpStmt bc;
    bc.op = TileOpKind::Broadcast;
    bc.dst = t.dst;
    bc.srcs = {wide(*m, st)};
    out.body.push_back(make_stmt(std::move(bc), st->loc));
    t.scalar.reset();
    t.srcs.push_back(t.dst);
    out.body.push_back(make_stmt(std::move(t), st->loc));
  }

  bool uses_var_in(const Region& r) const {
    for (const auto& s : r.start)
      if (uses_var(s, var_)) return true;
    return false;
  }

  int64_t align_;
  int64_t begin_ = 0, n_ = 0;
  int var_ = -1;
};

}  // namespace

Program vectorize(const Program& p, const ChipConfig& chip, const PassOptions&) {
  Program out = p;
  out.body = Pass(chip).mutate(p.body);
  return out;
}

}  // namespace tilepipe::passes

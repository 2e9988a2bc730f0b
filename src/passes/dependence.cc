// Dependence analysis: accesses of statements and region overlap tests (dependence.h).
#include "passes/dependence.h"

#include "passes/rewrite.h"
#include "tilepipe/ir_vars.h"

#include "tilepipe/passes.h"
#include "tilepipe/verify.h"

#include <algorithm>
#include <set>

namespace tilepipe::passes {

using namespace ir;

bool has_hand_sync(const Stmt& s, bool pipe_barriers) {
  struct V : StmtVisitor {
    bool found = false, barriers = true;
    void visit_set_flag(const SetFlagStmt&, const StmtNode&) override { found = true; }
    void visit_wait_flag(const WaitFlagStmt&, const StmtNode&) override { found = true; }
    void visit_barrier(const PipeBarrierStmt&, const StmtNode&) override {
      found = found || barriers;
    }
  } v;
  v.barriers = pipe_barriers;
  v.visit(s);
  return v.found;
}

LetAssignments let_assignments(const Stmt& s) {
  struct V : StmtVisitor {
    LetAssignments out;
    void visit_let(const LetStmt& l, const StmtNode& n) override {
      if (out.bound.insert(l.var->id).second) return;
      out.vars.insert(l.var->id);
      if (!out.first) out.first = &n;
    }
  } v;
  v.visit(s);
  return v.out;
}

bool identical(const Expr& a, const Expr& b) {
  if (!a || !b) return a == b;
  if (a->node.index() != b->node.index()) return false;
  return std::visit(
      [&](const auto& x) -> bool {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(b->node);
        if constexpr (std::is_same_v<T, IntImm>)
          return x.value == y.value;
        else if constexpr (std::is_same_v<T, VarRef>)
          return x.var->id == y.var->id;
        else if constexpr (std::is_same_v<T, Binary>)
          return x.op == y.op && identical(x.a, y.a) && identical(x.b, y.b);
        else if constexpr (std::is_same_v<T, Select>)
          return identical(x.cond, y.cond) && identical(x.then_value, y.then_value) &&
                 identical(x.else_value, y.else_value);
        else if constexpr (std::is_same_v<T, Load>) {
          if (x.buffer->id != y.buffer->id || x.index.size() != y.index.size()) return false;
          for (size_t i = 0; i < x.index.size(); ++i)
            if (!identical(x.index[i], y.index[i])) return false;
          return true;
        } else {
          return true;  // cid, vid
        }
      },
      a->node);
}

bool same_region(const Region& a, const Region& b) {
  if (a.buffer->id != b.buffer->id || a.start.size() != b.start.size() || a.extent != b.extent)
    return false;
  for (size_t d = 0; d < a.start.size(); ++d)
    if (!identical(a.start[d], b.start[d])) return false;
  return true;
}

std::optional<Pipe> leaf_pipe(const Stmt& s) {
  return std::visit(
      [&](const auto& n) -> std::optional<Pipe> {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, CopyStmt>)
          return copy_pipe(n.src.buffer->scope, n.dst.buffer->scope);
        else if constexpr (std::is_same_v<T, GemmStmt>)
          return Pipe::M;
        else if constexpr (std::is_same_v<T, TileOpStmt>)
          return tile_op_pipe(n.op);
        else if constexpr (std::is_same_v<T, ReduceStmt>)
          return Pipe::V;
        else if constexpr (std::is_same_v<T, SetFlagStmt>)
          return n.src;
        else if constexpr (std::is_same_v<T, WaitFlagStmt>)
          return n.dst;
        else if constexpr (std::is_same_v<T, PipeBarrierStmt> ||
                           std::is_same_v<T, SetCrossFlagStmt>)
          return n.pipe;
        else
          return std::nullopt;
      },
      s->node);
}

namespace {

/// UB element loads inside an expression: scalar reads on pipe S.
void expr_loads(const Expr& e, const StmtNode* at, std::vector<Access>& out) {
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, Binary>) {
          expr_loads(n.a, at, out);
          expr_loads(n.b, at, out);
        } else if constexpr (std::is_same_v<T, Select>) {
          expr_loads(n.cond, at, out);
          expr_loads(n.then_value, at, out);
          expr_loads(n.else_value, at, out);
        } else if constexpr (std::is_same_v<T, Load>) {
          for (const auto& i : n.index) expr_loads(i, at, out);
          // GM loads read kernel inputs, which nothing writes (the verifier's rule).
          if (n.buffer->scope != Scope::GM)
            out.push_back(Access{Region{n.buffer, n.index, std::vector<int64_t>(n.index.size(), 1)},
                                 AccessKind::Read,
                                 Pipe::S,
                                 at,
                                 {},
                                 {}});
        }
      },
      e->node);
}

void region_loads(const Region& r, const StmtNode* at, std::vector<Access>& out) {
  for (const auto& s : r.start) expr_loads(s, at, out);
}

}  // namespace

std::vector<Access> leaf_accesses(const Stmt& s, const std::vector<Buffer>& fences) {
  std::vector<Access> out;
  const StmtNode* at = s.get();
  auto add = [&](const Region& r, AccessKind k, Pipe p) {
    out.push_back(Access{r, k, p, at, {}, {}});
    region_loads(r, at, out);
  };
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, CopyStmt>) {
          auto p = copy_pipe(n.src.buffer->scope, n.dst.buffer->scope);
          if (!p) return;
          add(n.src, AccessKind::Read, *p);
          if (n.atomic_add) add(n.dst, AccessKind::Read, *p);  // dst += src
          add(n.dst, AccessKind::Write, *p);
        } else if constexpr (std::is_same_v<T, GemmStmt>) {
          add(n.a, AccessKind::Read, Pipe::M);
          add(n.b, AccessKind::Read, Pipe::M);
          if (!n.init) add(n.c, AccessKind::Read, Pipe::M);
          add(n.c, AccessKind::Write, Pipe::M);
        } else if constexpr (std::is_same_v<T, TileOpStmt>) {
          const Pipe p = tile_op_pipe(n.op);
          for (const auto& r : n.srcs) add(r, AccessKind::Read, p);
          if (n.op == TileOpKind::Axpy) add(n.dst, AccessKind::Read, p);
          add(n.dst, AccessKind::Write, p);
          if (n.scalar) {
            if (auto* r = std::get_if<Region>(&n.scalar->value))
              add(*r, AccessKind::Read, Pipe::S);
            else if (auto* e = std::get_if<Expr>(&n.scalar->value))
              expr_loads(*e, at, out);
          }
        } else if constexpr (std::is_same_v<T, ReduceStmt>) {
          add(n.src, AccessKind::Read, Pipe::V);
          if (!n.clear) add(n.dst, AccessKind::Read, Pipe::V);
          add(n.dst, AccessKind::Write, Pipe::V);
        } else if constexpr (std::is_same_v<T, SetCrossFlagStmt>) {
          for (const auto& b : fences)
            out.push_back(Access{full_region(b), AccessKind::Write, n.pipe, at, {}, {}, true});
          expr_loads(n.flag_id, at, out);
        } else if constexpr (std::is_same_v<T, WaitCrossFlagStmt>) {
          expr_loads(n.flag_id, at, out);
        } else if constexpr (std::is_same_v<T, SetFlagStmt> || std::is_same_v<T, WaitFlagStmt>) {
          expr_loads(n.event_id, at, out);
        } else if constexpr (std::is_same_v<T, LetStmt>) {
          expr_loads(n.value, at, out);  // the scalar unit reads them here, once
        }
      },
      s->node);
  return out;
}

namespace {

/// Let variables replaced by their values: the overlap tests see a let-bound index as the
/// element read it holds (an opaque value of the iteration that bound it), not as a
/// variable common to every iteration.
class LetValues : public RegionRewriter {
 public:
  std::map<int, Expr> values;
  const std::set<int>* opaque = nullptr;  // registers: no value, any element

  bool indexed_by_opaque(const Region& r) const {
    if (!opaque) return false;
    std::set<int> used;
    for (const auto& e : r.start) read_vars(e, used);
    for (int id : used)
      if (opaque->count(id)) return true;
    return false;
  }
  Expr var(const Expr& e, const VarRef& v) override {
    auto it = values.find(v.var->id);
    return it == values.end() ? e : it->second;
  }
};

void collect(const Stmt& s, VarRanges& vars, std::vector<const ForStmt*>& loops,
             const std::vector<Buffer>& fences, LetValues& lets, std::vector<Access>& out) {
  if (!s) return;
  auto push = [&](std::vector<Access> accs) {
    for (auto& a : accs) {
      if (lets.indexed_by_opaque(a.region)) a.region = full_region(a.region.buffer);
      if (!lets.values.empty()) a.region = lets.rewrite(a.region);
      a.loops = loops;
      for (const ForStmt* f : loops) a.local_ranges[f->var->id] = vars.at(f->var->id);
      out.push_back(std::move(a));
    }
  };
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>) {
          std::vector<int> bound;
          for (const auto& c : n.body) {
            collect(c, vars, loops, fences, lets, out);
            if (auto* l = std::get_if<LetStmt>(&c->node);
                l && !(lets.opaque && lets.opaque->count(l->var->id))) {
              lets.values[l->var->id] = lets.expr(l->value);
              bound.push_back(l->var->id);
            }
          }
          for (int id : bound) lets.values.erase(id);
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          std::vector<Access> hdr;
          expr_loads(n.begin, s.get(), hdr);
          expr_loads(n.end, s.get(), hdr);
          push(std::move(hdr));
          vars[n.var->id] = loop_var_range(n, vars);
          loops.push_back(&n);
          collect(n.body, vars, loops, fences, lets, out);
          loops.pop_back();
          vars.erase(n.var->id);
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          std::vector<Access> hdr;
          expr_loads(n.cond, s.get(), hdr);
          push(std::move(hdr));
          collect(n.then_body, vars, loops, fences, lets, out);
          collect(n.else_body, vars, loops, fences, lets, out);
        } else if constexpr (std::is_same_v<T, ScopeStmt>) {
          collect(n.body, vars, loops, fences, lets, out);
        } else {
          push(leaf_accesses(s, fences));
        }
      },
      s->node);
}

// ---- linear forms --------------------------------------------------------------------

/// A variable as seen by one side of a comparison: common variables share a key, local
/// ones are tagged with the side.
using Key = int64_t;
Key key_of(int var, int side, bool local) {
  return static_cast<Key>(var) * 4 + (local ? 1 + side : 0);
}

struct Lin {
  int64_t c = 0;
  std::map<Key, int64_t> v;
  bool operator==(const Lin&) const = default;
};

struct ModAtom {
  int64_t coef;
  Lin inner;
  int64_t m;
};
struct OpaqueAtom {
  int64_t coef;
  Expr e;
  bool pure_common;  // only common, unshifted variables (or none)
};

struct Form {
  Lin lin;
  std::vector<ModAtom> mods;
  std::vector<OpaqueAtom> opaque;
};

/// How one side sees variables: which are local, and the shift of the carried variable.
struct Side {
  int side = 0;
  const std::set<int>* locals = nullptr;
  int carried = -1000;  // var id of the carried loop (none: -1000)
  int64_t shift = 0;    // added to the carried variable on this side
};

Form scale(Form f, int64_t k) {
  f.lin.c *= k;
  for (auto& [key, c] : f.lin.v) c *= k;
  for (auto& m : f.mods) m.coef *= k;
  for (auto& o : f.opaque) o.coef *= k;
  return f;
}

Form add(Form a, const Form& b, int64_t sign) {
  a.lin.c += sign * b.lin.c;
  for (const auto& [key, c] : b.lin.v) {
    a.lin.v[key] += sign * c;
    if (a.lin.v[key] == 0) a.lin.v.erase(key);
  }
  for (auto m : b.mods) {
    m.coef *= sign;
    a.mods.push_back(m);
  }
  for (auto o : b.opaque) {
    o.coef *= sign;
    a.opaque.push_back(o);
  }
  return a;
}

bool uses_only_common(const Expr& e, const Side& s) {
  return std::visit(
      [&](const auto& n) -> bool {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, VarRef>)
          return !s.locals->count(n.var->id) && n.var->id != s.carried;
        else if constexpr (std::is_same_v<T, Binary>)
          return uses_only_common(n.a, s) && uses_only_common(n.b, s);
        else if constexpr (std::is_same_v<T, Select>)
          return uses_only_common(n.cond, s) && uses_only_common(n.then_value, s) &&
                 uses_only_common(n.else_value, s);
        else if constexpr (std::is_same_v<T, Load>) {
          for (const auto& i : n.index)
            if (!uses_only_common(i, s)) return false;
          return true;
        } else
          return true;
      },
      e->node);
}

Form opaque(const Expr& e, const Side& s) {
  Form f;
  f.opaque.push_back(OpaqueAtom{1, e, uses_only_common(e, s)});
  return f;
}

Form linearize(const Expr& e, const Side& s) {
  return std::visit(
      [&](const auto& n) -> Form {
        using T = std::decay_t<decltype(n)>;
        Form f;
        if constexpr (std::is_same_v<T, IntImm>) {
          f.lin.c = n.value;
          return f;
        } else if constexpr (std::is_same_v<T, VarRef>) {
          int id = n.var->id;
          f.lin.v[key_of(id, s.side, s.locals->count(id) > 0)] = 1;
          if (id == s.carried) f.lin.c = s.shift;
          return f;
        } else if constexpr (std::is_same_v<T, CoreIdx>) {
          f.lin.v[key_of(kCidVar, s.side, false)] = 1;
          return f;
        } else if constexpr (std::is_same_v<T, VecIdx>) {
          f.lin.v[key_of(kVidVar, s.side, false)] = 1;
          return f;
        } else if constexpr (std::is_same_v<T, Binary>) {
          if (n.op == BinOp::Add || n.op == BinOp::Sub) {
            return add(linearize(n.a, s), linearize(n.b, s), n.op == BinOp::Add ? 1 : -1);
          }
          if (n.op == BinOp::Mul) {
            if (auto k = as_const(n.b)) return scale(linearize(n.a, s), *k);
            if (auto k = as_const(n.a)) return scale(linearize(n.b, s), *k);
          }
          if (n.op == BinOp::Mod) {
            auto m = as_const(n.b);
            Form inner = linearize(n.a, s);
            if (m && *m > 0 && inner.mods.empty() && inner.opaque.empty()) {
              f.mods.push_back(ModAtom{1, inner.lin, *m});
              return f;
            }
          }
          return opaque(e, s);
        } else {
          return opaque(e, s);
        }
      },
      e->node);
}

int64_t pos_mod(int64_t a, int64_t m) {
  return ((a % m) + m) % m;
}

/// Range of a linear form's variable part given per-key ranges.
constexpr int64_t kBig = INT64_MAX / 8;  // as eval_range's bound on a known range

Range lin_range(const Lin& l, const std::map<Key, Range>& ranges) {
  __int128 lo = l.c, hi = l.c;
  for (const auto& [key, c] : l.v) {
    if (c == 0) continue;
    auto it = ranges.find(key);
    if (it == ranges.end() || !it->second.known) return Range::any();
    __int128 a = static_cast<__int128>(c) * it->second.lo,
             b = static_cast<__int128>(c) * it->second.hi;
    lo += std::min(a, b);
    hi += std::max(a, b);
    if (lo < -kBig || hi > kBig) return Range::any();
  }
  return Range::of(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
}

/// May [a, a+ea) and [b, b+eb) overlap for some values, where a - b is `diff`?
bool dim_may_overlap(const Form& fa, const Form& fb, int64_t ea, int64_t eb,
                     const std::map<Key, Range>& ranges) {
  Form d = add(fa, fb, -1);
  // Opaque atoms cancel against an identical atom of the other side over common vars.
  std::vector<OpaqueAtom> ops = d.opaque;
  std::vector<bool> used(ops.size(), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (used[i]) continue;
    bool matched = false;
    for (size_t j = i + 1; j < ops.size() && !matched; ++j) {
      if (used[j] || !ops[i].pure_common || !ops[j].pure_common) continue;
      if (ops[i].coef == -ops[j].coef && equal(ops[i].e, ops[j].e)) {
        used[i] = used[j] = true;
        matched = true;
      }
    }
    if (!matched) return true;  // an expression we cannot see through
  }
  // Mod atoms: a pair with the same modulus and variable coefficients differs by a known
  // amount; an unmatched atom ranges over [0, m-1].
  std::vector<int64_t> options = {0};
  Range extra = Range::of(0, 0);
  std::vector<bool> mused(d.mods.size(), false);
  for (size_t i = 0; i < d.mods.size(); ++i) {
    if (mused[i]) continue;
    const auto& x = d.mods[i];
    bool matched = false;
    for (size_t j = i + 1; j < d.mods.size() && !matched; ++j) {
      const auto& y = d.mods[j];
      if (mused[j] || y.m != x.m || y.coef != -x.coef || y.inner.v != x.inner.v) continue;
      bool all_common = true;
      for (const auto& [key, c] : x.inner.v) all_common = all_common && key % 4 == 0;
      if (!all_common) continue;
      mused[i] = mused[j] = true;
      matched = true;
      // x.coef * (X % m) + y.coef * ((X + s) % m) with y.coef = -x.coef and
      // X' = X + s: (X % m) - ((X + s) % m) is -s' or m - s' (s' = s mod m).
      int64_t sp = pos_mod(y.inner.c - x.inner.c, x.m);
      std::vector<int64_t> vals =
          sp == 0 ? std::vector<int64_t>{0} : std::vector<int64_t>{-sp, x.m - sp};
      std::vector<int64_t> next;
      for (int64_t o : options)
        for (int64_t v : vals) next.push_back(o + x.coef * v);
      options = std::move(next);
      if (options.size() > 64) return true;
    }
    if (!matched) {
      int64_t a = 0, b = x.coef * (x.m - 1);
      extra.lo += std::min(a, b);
      extra.hi += std::max(a, b);
    }
  }
  Range r = lin_range(d.lin, ranges);
  if (!r.known) return true;
  for (int64_t o : options) {
    int64_t lo = r.lo + extra.lo + o, hi = r.hi + extra.hi + o;
    if (lo < eb && hi > -ea) return true;
  }
  return false;
}

bool aliases(const Access& a, const Access& b) {
  const auto& x = *a.region.buffer;
  const auto& y = *b.region.buffer;
  return a.addr >= 0 && b.addr >= 0 && x.scope == y.scope && a.addr < b.addr + y.bytes() &&
         b.addr < a.addr + x.bytes();
}

bool regions_may_overlap(const Access& a, const Access& b, const VarRanges& outer, int carried,
                         int64_t shift) {
  if (a.region.buffer->id != b.region.buffer->id) return aliases(a, b);
  std::set<int> la, lb;
  for (const auto* f : a.loops) la.insert(f->var->id);
  for (const auto* f : b.loops) lb.insert(f->var->id);
  Side sa{0, &la, carried, 0}, sb{1, &lb, carried, shift};
  std::map<Key, Range> ranges;
  for (const auto& [id, r] : outer) ranges[key_of(id, 0, false)] = r;
  for (const auto& [id, r] : a.local_ranges) ranges[key_of(id, 0, true)] = r;
  for (const auto& [id, r] : b.local_ranges) ranges[key_of(id, 1, true)] = r;
  if (!ranges.count(key_of(kVidVar, 0, false))) ranges[key_of(kVidVar, 0, false)] = Range::of(0, 1);
  const auto& ra = a.region;
  const auto& rb = b.region;
  for (size_t d = 0; d < ra.start.size() && d < rb.start.size(); ++d) {
    Form fa = linearize(ra.start[d], sa), fb = linearize(rb.start[d], sb);
    if (!dim_may_overlap(fa, fb, ra.extent[d], rb.extent[d], ranges)) return false;
  }
  return true;
}

bool kinds_conflict(const Access& a, const Access& b) {
  return a.kind == AccessKind::Write || b.kind == AccessKind::Write;
}

/// True if some dimension of `a` (iteration k) and `b` (iteration k + d) is apart for every
/// d > after: the start difference is rest - c * step * d with `rest` bounded (ring-slot
/// atoms widened to their whole range), and the overlap condition holds only on a bounded
/// interval of d.
bool apart_beyond(const Access& a, const Access& b, const VarRanges& outer, const ForStmt& loop,
                  int64_t after) {
  std::set<int> la, lb;
  for (const auto* f : a.loops) la.insert(f->var->id);
  for (const auto* f : b.loops) lb.insert(f->var->id);
  int carried = loop.var->id;
  Side sa{0, &la, carried, 0}, sb{1, &lb, carried, 0};
  std::map<Key, Range> ranges;
  for (const auto& [id, r] : outer) ranges[key_of(id, 0, false)] = r;
  for (const auto& [id, r] : a.local_ranges) ranges[key_of(id, 0, true)] = r;
  for (const auto& [id, r] : b.local_ranges) ranges[key_of(id, 1, true)] = r;
  Key ck = key_of(carried, 0, false);
  for (size_t d = 0; d < a.region.start.size() && d < b.region.start.size(); ++d) {
    Form fa = linearize(a.region.start[d], sa), fb = linearize(b.region.start[d], sb);
    bool opaque_carried = false;
    for (const auto* f : {&fa, &fb})
      for (const auto& o : f->opaque) opaque_carried = opaque_carried || !o.pure_common;
    if (opaque_carried || !fa.opaque.empty() || !fb.opaque.empty()) continue;
    int64_t cb = fb.lin.v.count(ck) ? fb.lin.v.at(ck) : 0;
    int64_t cs = cb * loop.step;
    if (cs == 0) continue;
    Form diff = add(fa, fb, -1);
    Range r = lin_range(diff.lin, ranges);
    if (!r.known) continue;
    for (const auto& m : diff.mods) {
      int64_t x = 0, y = m.coef * (m.m - 1);
      r.lo += std::min(x, y);
      r.hi += std::max(x, y);
    }
    // Overlap needs r.lo - cs*d < eb and r.hi - cs*d > -ea.
    int64_t ea = a.region.extent[d], eb = b.region.extent[d];
    double d_lo, d_hi;  // the d where overlap is possible lie strictly inside (d_lo, d_hi)
    if (cs > 0) {
      d_lo = static_cast<double>(r.lo - eb) / static_cast<double>(cs);
      d_hi = static_cast<double>(r.hi + ea) / static_cast<double>(cs);
    } else {
      d_lo = static_cast<double>(r.hi + ea) / static_cast<double>(cs);
      d_hi = static_cast<double>(r.lo - eb) / static_cast<double>(cs);
    }
    (void)d_lo;
    if (d_hi <= static_cast<double>(after) + 1) return true;
  }
  return false;
}

}  // namespace

std::vector<Access> collect_accesses(const Stmt& s, const VarRanges& outer,
                                     const std::vector<Buffer>& fences,
                                     const std::map<int, int64_t>* addresses,
                                     const std::set<int>* opaque) {
  std::vector<Access> out;
  VarRanges vars = outer;
  std::vector<const ForStmt*> loops;
  LetValues lets;
  lets.opaque = opaque;
  collect(s, vars, loops, fences, lets, out);
  if (addresses)
    for (auto& a : out)
      if (auto it = addresses->find(a.region.buffer->id); it != addresses->end())
        a.addr = it->second;
  return out;
}

bool may_conflict(const Access& a, const Access& b, const VarRanges& outer) {
  if (!kinds_conflict(a, b)) return false;
  return regions_may_overlap(a, b, outer, -1000, 0);
}

std::optional<int64_t> carried_distance(const Access& a, const Access& b, const ForStmt& loop,
                                        const VarRanges& outer, int64_t max_distance) {
  if (!kinds_conflict(a, b)) return std::nullopt;
  if (a.region.buffer->id != b.region.buffer->id)
    return aliases(a, b) ? std::optional<int64_t>(1) : std::nullopt;
  VarRanges vars = outer;
  vars[loop.var->id] = loop_var_range(loop, outer);
  // Only distances below the trip count exist.
  int64_t limit = INT64_MAX;
  Range br = eval_range(loop.begin, outer), er = eval_range(loop.end, outer);
  if (br.known && er.known) {
    int64_t max_trip = (er.hi - br.lo + loop.step - 1) / loop.step;
    limit = std::max<int64_t>(0, max_trip - 1);
  }
  for (int64_t d = 1; d <= std::min(limit, max_distance); ++d)
    if (regions_may_overlap(a, b, vars, loop.var->id, d * loop.step)) return d;
  if (limit <= max_distance) return std::nullopt;  // every distance that exists was checked
  // Beyond max_distance: proven independent if some dimension moves apart linearly.
  if (apart_beyond(a, b, vars, loop, max_distance)) return std::nullopt;
  return max_distance + 1;
}
std::vector<ir::Stmt> flatten(const ir::Stmt& s) {
  std::vector<ir::Stmt> out;
  if (!s) return out;
  if (auto* q = std::get_if<ir::SeqStmt>(&s->node)) {
    for (const auto& c : q->body) {
      auto f = flatten(c);
      out.insert(out.end(), f.begin(), f.end());
    }
  } else {
    out.push_back(s);
  }
  return out;
}

}  // namespace tilepipe::passes

namespace tilepipe::passes {

std::set<std::string> buffer_names(const Program& p) {
  struct Names : StmtVisitor {
    std::set<std::string> out;
    void visit_alloc(const AllocStmt& a, const StmtNode&) override { out.insert(a.buffer->name); }
  } names;
  for (const auto& b : p.params) names.out.insert(b->name);
  for (const auto& b : p.workspaces) names.out.insert(b->name);
  names.visit(p.body);
  return std::move(names.out);
}

bool covers_whole(const Region& r) {
  for (size_t d = 0; d < r.extent.size(); ++d)
    if (as_const(r.start[d]) != 0 || r.extent[d] != r.buffer->shape[d]) return false;
  return true;
}

namespace {

/// Reads and whole writes of buffer `id` by the statement itself (a leaf, or the header of
/// a loop / if).
struct OwnUse {
  bool reads = false, kills = false;
};
OwnUse own_use(const Stmt& s, int id) {
  OwnUse u;
  bool leaf =
      !std::holds_alternative<SeqStmt>(s->node) && !std::holds_alternative<ForStmt>(s->node) &&
      !std::holds_alternative<IfStmt>(s->node) && !std::holds_alternative<ScopeStmt>(s->node);
  std::vector<Access> accs =
      leaf ? leaf_accesses(s) : collect_accesses(s, {});  // headers: loads in bounds
  for (const auto& a : accs) {
    if (a.region.buffer->id != id || a.stmt != s.get()) continue;
    if (a.kind == AccessKind::Read) u.reads = true;
    if (a.kind == AccessKind::Write && covers_whole(a.region)) u.kills = true;
  }
  if (u.reads) u.kills = false;
  return u;
}

}  // namespace

namespace {

struct Flow {
  bool exposed = false, kills = false;
};

/// A region whose start may change between two statements of one sequence only through data
/// (a load, or a variable `lets` the analysed statement binds to one) is not compared.
bool stable(const Region& r, const std::set<int>& lets) {
  for (const auto& e : r.start)
    if (expr_any(e, [&](const ExprNode& n) {
          auto* v = std::get_if<VarRef>(&n.node);
          return std::holds_alternative<Load>(n.node) || (v && lets.count(v->var->id));
        }))
      return false;
  return true;
}

std::vector<Region> must_writes(const Stmt& s, int id, bool rows, const std::set<int>& lets);

/// A loop `for v in [0, n)` (constant, so it runs) whose body surely writes index v of one
/// dimension of the buffer, n its size, and the other dimensions whole: the rows of a tile
/// filled one by one (a gather of KV rows). It writes the whole buffer.
bool fills_whole(const ForStmt& f, int id, const std::set<int>& lets) {
  auto lo = as_const(f.begin), hi = as_const(f.end);
  if (lo != 0 || !hi || *hi <= 0 || f.step != 1) return false;
  for (const auto& r : must_writes(f.body, id, true, lets)) {
    const auto& shape = r.buffer->shape;
    int along = -1;
    bool whole = true;
    for (size_t d = 0; d < shape.size() && whole; ++d) {
      auto* v = std::get_if<VarRef>(&r.start[d]->node);
      if (v && v->var->id == f.var->id && r.extent[d] == 1 && shape[d] == *hi && along < 0)
        along = static_cast<int>(d);
      else
        whole = as_const(r.start[d]) == 0 && r.extent[d] == shape[d];
    }
    if (whole && along >= 0) return true;
  }
  return false;
}

/// The regions of buffer `id` every execution of `s` writes (leaves, sequences, both
/// branches of an if; nothing through loops, which may not run, except with `rows` the
/// whole buffer a row loop fills).
std::vector<Region> must_writes(const Stmt& s, int id, bool rows, const std::set<int>& lets) {
  std::vector<Region> out;
  if (!s) return out;
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>) {
          for (const auto& c : n.body)
            for (auto& r : must_writes(c, id, rows, lets)) out.push_back(std::move(r));
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          auto t = must_writes(n.then_body, id, rows, lets),
               e = must_writes(n.else_body, id, rows, lets);
          for (auto& r : t)
            if (std::any_of(e.begin(), e.end(), [&](const Region& x) { return same_region(r, x); }))
              out.push_back(std::move(r));
        } else if constexpr (std::is_same_v<T, ScopeStmt>) {
          out = must_writes(n.body, id, rows, lets);
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          if (rows && fills_whole(n, id, lets)) {
            for (const auto& r : must_writes(n.body, id, true, lets))
              if (r.buffer->id == id) {
                out.push_back(full_region(r.buffer));
                break;
              }
          }
        } else {
          for (auto& a : leaf_accesses(s))
            if (a.region.buffer->id == id && a.kind == AccessKind::Write && stable(a.region, lets))
              out.push_back(std::move(a.region));
        }
      },
      s->node);
  return out;
}

/// Does every read of buffer `id` by leaf `s` read a region an earlier statement of the same
/// sequence wrote (so the value read was made by the sequence itself)?
bool reads_covered(const Stmt& s, int id, const std::vector<Region>& written,
                   const std::set<int>& lets) {
  if (std::holds_alternative<SeqStmt>(s->node) || std::holds_alternative<ForStmt>(s->node) ||
      std::holds_alternative<IfStmt>(s->node) || std::holds_alternative<ScopeStmt>(s->node))
    return false;
  for (const auto& a : leaf_accesses(s)) {
    if (a.region.buffer->id != id || a.kind != AccessKind::Read) continue;
    if (!stable(a.region, lets) ||
        std::none_of(written.begin(), written.end(),
                     [&](const Region& w) { return covers_whole(w) || same_region(w, a.region); }))
      return false;
  }
  return true;
}

/// exposed / kills of one statement (dependence.h), computed together. `before`: regions of
/// the buffer the enclosing statement surely wrote earlier (a read of one of them sees a
/// value the enclosing statement made, not one from before it).
Flow value_flow(const Stmt& s, int id, bool rows, const std::set<int>& lets,
                const std::vector<Region>& before = {}) {
  if (!s) return {};
  return std::visit(
      [&](const auto& n) -> Flow {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>) {
          std::vector<Region> written = before;
          for (const auto& c : n.body) {
            Flow f = value_flow(c, id, rows, lets, written);
            if (f.exposed) return {true, false};
            if (f.kills) return {false, true};
            for (auto& r : must_writes(c, id, rows, lets)) written.push_back(std::move(r));
          }
          return {};
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          bool reads = own_use(s, id).reads;
          Flow b = value_flow(n.body, id, rows, lets, before);
          // Only a loop that surely runs once kills: by killing in its body, or by filling
          // the buffer a row at a time.
          auto lo = as_const(n.begin), hi = as_const(n.end);
          return {reads || b.exposed,
                  lo && hi && *lo < *hi && !reads &&
                      (b.kills || (rows && !b.exposed && fills_whole(n, id, lets)))};
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          bool reads = own_use(s, id).reads;
          Flow t = value_flow(n.then_body, id, rows, lets, before),
               e = value_flow(n.else_body, id, rows, lets, before);
          return {reads || t.exposed || e.exposed, !reads && t.kills && e.kills};
        } else if constexpr (std::is_same_v<T, ScopeStmt>) {
          return value_flow(n.body, id, rows, lets, before);
        } else {
          OwnUse u = own_use(s, id);
          return {u.reads && !reads_covered(s, id, before, lets), u.kills};
        }
      },
      s->node);
}

}  // namespace

bool exposed(const Stmt& s, int id, bool row_fills) {
  return value_flow(s, id, row_fills, let_assignments(s).bound).exposed;
}

bool kills(const Stmt& s, int id, bool row_fills) {
  return value_flow(s, id, row_fills, let_assignments(s).bound).kills;
}

Stmt seq(std::vector<Stmt> body, const Loc& loc) {
  if (body.size() == 1) return body.front();
  return make_stmt(SeqStmt{std::move(body)}, loc);
}

std::set<CoreKind> kinds_of(const Stmt& s,
                            const std::function<std::set<CoreKind>(const Stmt&)>& leaf) {
  std::set<CoreKind> out;
  if (!s) return out;
  if (auto* q = std::get_if<SeqStmt>(&s->node)) {
    for (const auto& c : q->body) out.merge(kinds_of(c, leaf));
  } else if (auto* f = std::get_if<ForStmt>(&s->node)) {
    out = kinds_of(f->body, leaf);
  } else if (auto* i = std::get_if<IfStmt>(&s->node)) {
    out = kinds_of(i->then_body, leaf);
    out.merge(kinds_of(i->else_body, leaf));
  } else {
    out = leaf(s);
  }
  return out;
}

bool expr_any(const Expr& e, const std::function<bool(const ExprNode&)>& pred) {
  if (!e) return false;
  if (pred(*e)) return true;
  return std::visit(
      [&](const auto& n) -> bool {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, Binary>) {
          return expr_any(n.a, pred) || expr_any(n.b, pred);
        } else if constexpr (std::is_same_v<T, Select>) {
          return expr_any(n.cond, pred) || expr_any(n.then_value, pred) ||
                 expr_any(n.else_value, pred);
        } else if constexpr (std::is_same_v<T, Load>) {
          for (const auto& i : n.index)
            if (expr_any(i, pred)) return true;
          return false;
        } else {
          return false;
        }
      },
      e->node);
}

bool uses_var(const Expr& e, int id) {
  return expr_any(e, [id](const ExprNode& n) {
    auto* v = std::get_if<VarRef>(&n.node);
    return v && v->var->id == id;
  });
}

}  // namespace tilepipe::passes

// AUTO_SYNC (auto_sync.h). Per sequence of statements, bottom-up:
//
//   1. accesses of each child (dependence.h), grouped by pipe;
//   2. candidate syncs: forward (child i -> later child j, pipes P != Q, a conflict) and,
//      in a loop body, loop-carried (child i in iteration k -> child j <= i in k + d);
//   3. drop candidates already ordered by a chain of chosen syncs (narrowest first);
//   4. closure: a flag id may be set again only after its previous set was consumed. Each
//      sync needs a chain from its wait back to its next set; found among the chosen syncs
//      (this fixes how many ids a forward sync rotates through), else a companion sync
//      provides it;
//   5. ids per pipe pair, then emission at the gaps between children.
//
// Positions: gap g is just before child g (gap n after the last). At one gap, flags are
// emitted in tiers: companion waits, data sets, data waits, companion sets, closing waits.
// Every wait consumes a set from a strictly earlier position (or an earlier iteration), so
// the inserted flags cannot deadlock.
#include "passes/auto_sync.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "passes/dependence.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

enum Tier : int { kCompWait = 0, kSet = 1, kWait = 2, kCompSet = 3, kClose = 4 };

struct Pos {
  int gap = 0;
  int tier = 0;
  auto operator<=>(const Pos&) const = default;
};

struct Sync {
  Pipe src = Pipe::S, dst = Pipe::S;
  Pos set, wait;
  bool carried = false;
  int64_t dist = 1;  // carried: iterations between the set and the wait it feeds
  int rot = 1;       // ids the sync rotates through (per iteration of the loop)
  Loc set_loc, wait_loc;
  // ids: the direct pair, or two legs through `relay` when src->dst is no hardware pair
  int id = -1;
  std::optional<Pipe> relay;
  int id2 = -1;
};

Sync make_sync(Pipe src, Pipe dst, Pos set, Pos wait) {
  Sync s;
  s.src = src;
  s.dst = dst;
  s.set = set;
  s.wait = wait;
  return s;
}

std::vector<Stmt> flatten(const Stmt& s) {
  std::vector<Stmt> out;
  if (!s) return out;
  if (auto* q = std::get_if<SeqStmt>(&s->node)) {
    for (const auto& c : q->body) {
      auto f = flatten(c);
      out.insert(out.end(), f.begin(), f.end());
    }
  } else {
    out.push_back(s);
  }
  return out;
}

Stmt seq(std::vector<Stmt> body, const Loc& loc) {
  if (body.size() == 1) return body.front();
  return make_stmt(SeqStmt{std::move(body)}, loc);
}

bool has_hand_sync(const Stmt& s) {
  struct V : StmtVisitor {
    bool found = false;
    void visit_set_flag(const SetFlagStmt&, const StmtNode&) override { found = true; }
    void visit_wait_flag(const WaitFlagStmt&, const StmtNode&) override { found = true; }
    void visit_barrier(const PipeBarrierStmt&, const StmtNode&) override { found = true; }
  } v;
  v.visit(s);
  return v.found;
}

/// Kind of sequence: the body of a loop (loop-carried dependences live here), or a
/// straight sequence (scope body, branch) that may run once or repeatedly.
struct SeqCtx {
  const ForStmt* loop = nullptr;  // non-null: the body of this loop
  bool repeated = false;          // a straight sequence that runs more than once
};

class AutoSync {
 public:
  AutoSync(const Program& p, const ChipConfig& chip, const PassOptions& o, CoreKind core,
           const Loc& scope_loc, VarRanges outer, bool repeated)
      : p_(p),
        chip_(chip),
        o_(o),
        core_(core),
        scope_loc_(scope_loc),
        vars_(std::move(outer)),
        repeated_(repeated) {
    for (const auto& w : p.workspaces) fences_.push_back(w);
  }

  Stmt run(const Stmt& body) {
    std::vector<Stmt> drains;
    return seq(sequence(flatten(body), SeqCtx{nullptr, repeated_}, drains), body->loc);
  }

 private:
  // ---- chains of chosen syncs (within one execution of the sequence) ----

  /// Earliest position reached on each pipe by forward flag chains that start on `pipe`
  /// after `from`: "work on pipe X after position reach[X] is ordered after the start".
  std::map<Pipe, Pos> reach(Pipe pipe, Pos from, const std::vector<Sync>& syncs) const {
    std::map<Pipe, Pos> r{{pipe, from}};
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& s : syncs) {
        if (s.carried) continue;
        auto it = r.find(s.src);
        if (it == r.end() || !(s.set > it->second)) continue;
        auto jt = r.find(s.dst);
        if (jt == r.end() || s.wait < jt->second) {
          r[s.dst] = s.wait;
          changed = true;
        }
      }
    }
    return r;
  }

  /// A forward dependence from pipe P after child i to pipe Q before child j is ordered.
  bool forward_covered(Pipe p, int i, Pipe q, int j, const std::vector<Sync>& syncs) const {
    auto r = reach(p, Pos{i + 1, -1}, syncs);
    auto it = r.find(q);
    return it != r.end() && it->second.gap <= j && it->first != p;
  }

  /// A loop-carried dependence (P after child i in iteration k -> Q before child j in
  /// k + d) is ordered: a forward chain reaches Q in iteration k, or reaches some pipe R
  /// from which a chosen carried sync at distance <= d lands on Q before child j.
  bool carried_covered(Pipe p, int i, Pipe q, int j, int64_t d,
                       const std::vector<Sync>& syncs) const {
    auto r = reach(p, Pos{i + 1, -1}, syncs);
    if (r.count(q) && q != p) return true;
    // Through one chosen carried sync C at distance <= d, then forward in that iteration:
    // at a smaller distance any position of Q is early enough (program order on Q).
    for (const auto& c : syncs) {
      if (!c.carried || c.dist > d) continue;
      auto it = r.find(c.src);
      if (it == r.end() || !(c.set > it->second)) continue;
      auto r2 = reach(c.dst, c.wait, syncs);
      auto jt = r2.find(q);
      if (jt != r2.end() && (c.dist < d || jt->second.gap <= j)) return true;
    }
    return false;
  }

  /// Ids a sync must rotate through so that no id is set twice before its wait: the
  /// distance of a chain from the sync's wait back to a point before its next set; 0 when
  /// no chain exists (a companion is needed).
  int closure(const Sync& x, const std::vector<Sync>& syncs, bool in_loop_body) const {
    if (x.carried) {
      // wait_x(k) must precede set_x(k) within the iteration.
      auto r = reach(x.dst, x.wait, syncs);
      auto it = r.find(x.src);
      return it != r.end() && it->second < x.set ? x.rot : 0;
    }
    // The next set is in the next execution: reaching the producer pipe anywhere after the
    // wait is enough.
    auto r = reach(x.dst, x.wait, syncs);
    if (r.count(x.src)) return 1;
    // Or from the start of the next execution, reaching the producer before the set.
    auto r2 = reach(x.dst, Pos{0, -1}, syncs);
    if (auto it = r2.find(x.src); it != r2.end() && it->second < x.set) return 1;
    if (!in_loop_body) return 0;
    // Or through a carried sync: wait_x(k) -> chain -> set_c(k) -> wait_c(k + d) -> chain
    // -> before set_x(k + d): x may rotate through d ids.
    int best = 0;
    for (const auto& c : syncs) {
      if (!c.carried) continue;
      auto it = r.find(c.src);
      if (it == r.end() || !(c.set > it->second)) continue;
      auto r3 = reach(c.dst, c.wait, syncs);  // in iteration k + d
      auto jt = r3.find(x.src);
      if (jt != r3.end() && jt->second < x.set && (best == 0 || c.rot < best)) best = c.rot;
    }
    return best;
  }

  // ---- the per-sequence algorithm ----

  struct ChildAcc {
    std::map<Pipe, std::vector<Access>> by_pipe;
  };

  std::vector<Stmt> sequence(const std::vector<Stmt>& children, SeqCtx ctx,
                             std::vector<Stmt>& drains_out) {
    const int n = static_cast<int>(children.size());
    // Accesses of the original children (before their own flags are added).
    std::vector<ChildAcc> acc(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c)
      for (auto& a : collect_accesses(children[c], vars_, fences_))
        acc[c].by_pipe[a.pipe].push_back(std::move(a));

    // Recurse: children get their own flags first.
    std::vector<std::vector<Stmt>> emitted(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c) emitted[c] = child(children[c], ctx);

    std::vector<Sync> syncs;
    // Forward candidates, narrowest first.
    struct Cand {
      Pipe p, q;
      int i, j;
      int64_t d;
    };
    std::vector<Cand> fwd, car;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        for (const auto& [p, as] : acc[i].by_pipe)
          for (const auto& [q, bs] : acc[j].by_pipe)
            if (p != q && p != Pipe::S && conflict_fwd(as, bs)) fwd.push_back({p, q, i, j, 0});
    std::stable_sort(fwd.begin(), fwd.end(), [](const Cand& a, const Cand& b) {
      return a.j - a.i < b.j - b.i || (a.j - a.i == b.j - b.i && a.i > b.i);
    });
    for (const auto& c : fwd) {
      if (forward_covered(c.p, c.i, c.q, c.j, syncs)) continue;
      Sync s = make_sync(c.p, c.q, Pos{c.i + 1, kSet}, Pos{c.j, kWait});
      s.set_loc = children[c.i]->loc;
      s.wait_loc = children[c.j]->loc;
      syncs.push_back(s);
    }
    if (ctx.loop) {
      VarRanges outer = vars_;
      outer.erase(ctx.loop->var->id);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j <= i; ++j)
          for (const auto& [p, as] : acc[i].by_pipe)
            for (const auto& [q, bs] : acc[j].by_pipe) {
              if (p == q || p == Pipe::S) continue;
              if (auto d = conflict_carried(as, bs, *ctx.loop, outer))
                car.push_back({p, q, i, j, *d});
            }
      // Latest producers first: a late carried sync often implies earlier ones.
      std::stable_sort(car.begin(), car.end(), [](const Cand& a, const Cand& b) {
        return a.i > b.i || (a.i == b.i && a.j < b.j);
      });
      for (const auto& c : car) {
        int64_t d = std::min<int64_t>(c.d, o_.max_rotation);
        if (carried_covered(c.p, c.i, c.q, c.j, d, syncs)) continue;
        Sync s = make_sync(c.p, c.q, Pos{c.i + 1, kSet}, Pos{c.j, kWait});
        s.carried = true;
        s.dist = d;
        s.rot = static_cast<int>(d);
        s.set_loc = children[c.i]->loc;
        s.wait_loc = children[c.j]->loc;
        syncs.push_back(s);
      }
    }

    // Closure: companions for syncs whose ids could be set twice.
    const bool needs_closure = ctx.loop || ctx.repeated;
    if (needs_closure) {
      int64_t ring = 1;  // companions of forward syncs keep the loop's ring depth
      for (const auto& s : syncs)
        if (s.carried) ring = std::max(ring, s.dist);
      std::vector<Sync> extra;
      for (auto& s : syncs) {
        int r = closure(s, syncs, ctx.loop != nullptr);
        if (r > 0) {
          if (!s.carried) s.rot = r;
          continue;
        }
        Sync c = make_sync(s.dst, s.src, {}, {});
        c.set_loc = s.wait_loc;
        c.wait_loc = s.set_loc;
        if (s.carried) {  // forward companion: wait_s -> set_c ... wait_c -> set_s
          c.set = Pos{s.wait.gap, kCompSet};
          c.wait = Pos{s.set.gap, kCompWait};
          c.rot = s.rot;
        } else if (ctx.loop) {  // carried companion: credits back to the producer
          c.carried = true;
          c.dist = ring;
          c.rot = static_cast<int>(ring);
          c.set = Pos{s.wait.gap, kCompSet};
          c.wait = Pos{s.set.gap, kCompWait};
          s.rot = c.rot;
        } else {  // closing companion: the producer pipe waits at the end of the sequence
          c.set = Pos{s.wait.gap, kCompSet};
          c.wait = Pos{n, kClose};
        }
        extra.push_back(c);
      }
      syncs.insert(syncs.end(), extra.begin(), extra.end());
    }

    for (auto& s : syncs) assign_ids(s);

    // Emission.
    std::vector<Stmt> out;
    for (int g = 0; g <= n; ++g) {
      for (int tier = kCompWait; tier <= kClose; ++tier) {
        for (const auto& s : syncs) {
          if (s.set.gap == g && s.set.tier == tier) emit_set(s, ctx, out);
          if (s.wait.gap == g && s.wait.tier == tier) emit_wait(s, ctx, out);
        }
      }
      if (g < n) out.insert(out.end(), emitted[g].begin(), emitted[g].end());
    }
    if (ctx.loop)
      for (const auto& s : syncs)
        if (s.carried) emit_drain(s, *ctx.loop, drains_out);
    return out;
  }

  bool conflict_fwd(const std::vector<Access>& as, const std::vector<Access>& bs) const {
    for (const auto& a : as) {
      if (a.fence) continue;  // a flag moves no data: later accesses need not wait for it
      for (const auto& b : bs)
        if (may_conflict(a, b, vars_)) return true;
    }
    return false;
  }

  std::optional<int64_t> conflict_carried(const std::vector<Access>& as,
                                          const std::vector<Access>& bs, const ForStmt& loop,
                                          const VarRanges& outer) const {
    std::optional<int64_t> best;
    for (const auto& a : as) {
      if (a.fence) continue;
      for (const auto& b : bs) {
        auto d = carried_distance(a, b, loop, outer);
        if (d && (!best || *d < *best)) best = d;
        if (best == 1) return best;
      }
    }
    return best;
  }

  /// Rewrites one child; loops and branches get their own flags.
  std::vector<Stmt> child(const Stmt& s, SeqCtx ctx) {
    bool in_loop = ctx.loop != nullptr || ctx.repeated;
    if (auto* f = std::get_if<ForStmt>(&s->node)) {
      vars_[f->var->id] = loop_range(*f);
      std::vector<Stmt> drains;
      auto body = sequence(flatten(f->body), SeqCtx{f, false}, drains);
      vars_.erase(f->var->id);
      ForStmt nf = *f;
      nf.body = seq(std::move(body), f->body->loc);
      std::vector<Stmt> out = {make_stmt(std::move(nf), s->loc)};
      out.insert(out.end(), drains.begin(), drains.end());
      return out;
    }
    if (auto* i = std::get_if<IfStmt>(&s->node)) {
      std::vector<Stmt> unused;
      IfStmt ni = *i;
      ni.then_body =
          seq(sequence(flatten(i->then_body), SeqCtx{nullptr, in_loop}, unused), i->then_body->loc);
      if (i->else_body)
        ni.else_body = seq(sequence(flatten(i->else_body), SeqCtx{nullptr, in_loop}, unused),
                           i->else_body->loc);
      return {make_stmt(std::move(ni), s->loc)};
    }
    return {s};
  }

  Range loop_range(const ForStmt& f) const {
    Range b = eval_range(f.begin, vars_), e = eval_range(f.end, vars_);
    if (!b.known || !e.known) return Range::any();
    return Range::of(b.lo, std::max(b.lo, e.hi - 1));
  }

  // ---- ids and emission ----

  int take_ids(Pipe a, Pipe b, int count, const Sync& s) {
    int& next = next_id_[{a, b}];
    int base = next;
    next += count;
    if (next > chip_.event_ids) {
      throw UserError(Diagnostic{
          s.wait_loc,
          "auto-sync-ids",
          fmt::format("automatic sync needs more than {} event ids for {}->{} in this scope "
                      "(the flag ordering {} -> {} is number {})",
                      chip_.event_ids, to_string(a), to_string(b), s.set_loc.str(),
                      s.wait_loc.str(), next),
          {fmt::format("scope at {}", scope_loc_.str())},
          "split the scope's work into fewer pipe hand-offs, lower max_rotation, or write "
          "this scope's flags by hand"});
    }
    return base;
  }

  void assign_ids(Sync& s) {
    if (legal_flag_pair(core_, s.src, s.dst)) {
      s.id = take_ids(s.src, s.dst, s.rot, s);
      return;
    }
    for (Pipe r : {Pipe::M, Pipe::MTE1, Pipe::V, Pipe::MTE2, Pipe::MTE3, Pipe::FIX}) {
      if (r == s.src || r == s.dst) continue;
      if (legal_flag_pair(core_, s.src, r) && legal_flag_pair(core_, r, s.dst)) {
        s.relay = r;
        s.id = take_ids(s.src, r, s.rot, s);
        s.id2 = take_ids(r, s.dst, s.rot, s);
        return;
      }
    }
    throw std::logic_error(fmt::format("auto_sync: no flag path {}->{} on the {} core",
                                       to_string(s.src), to_string(s.dst), to_string(core_)));
  }

  /// The id a sync uses in the current iteration: base + (iteration % rot).
  Expr id_expr(int base, int rot, const SeqCtx& ctx) const {
    if (rot <= 1 || !ctx.loop) return make_int(base);
    const ForStmt& f = *ctx.loop;
    Expr it = make_binary(BinOp::Sub, make_var_ref(f.var), f.begin);
    if (f.step != 1) it = make_binary(BinOp::Div, it, make_int(f.step));
    if (as_const(f.begin) == 0 && f.step == 1) it = make_var_ref(f.var);
    Expr slot = make_binary(BinOp::Mod, it, make_int(rot));
    return base == 0 ? slot : make_binary(BinOp::Add, make_int(base), slot);
  }

  static Stmt set_flag(Pipe a, Pipe b, Expr id, const Loc& loc) {
    return make_stmt(SetFlagStmt{a, b, std::move(id)}, loc);
  }
  static Stmt wait_flag(Pipe a, Pipe b, Expr id, const Loc& loc) {
    return make_stmt(WaitFlagStmt{a, b, std::move(id)}, loc);
  }

  void emit_set(const Sync& s, const SeqCtx& ctx, std::vector<Stmt>& out) const {
    Pipe to = s.relay ? *s.relay : s.dst;
    out.push_back(set_flag(s.src, to, id_expr(s.id, s.rot, ctx), s.set_loc));
  }

  /// The wait side (with the relay legs); a carried wait only from iteration dist on.
  std::vector<Stmt> wait_side(const Sync& s, Expr id1, Expr id2) const {
    std::vector<Stmt> w;
    if (s.relay) {
      w.push_back(wait_flag(s.src, *s.relay, id1, s.wait_loc));
      w.push_back(set_flag(*s.relay, s.dst, id2, s.wait_loc));
      w.push_back(wait_flag(*s.relay, s.dst, id2, s.wait_loc));
    } else {
      w.push_back(wait_flag(s.src, s.dst, id1, s.wait_loc));
    }
    return w;
  }

  void emit_wait(const Sync& s, const SeqCtx& ctx, std::vector<Stmt>& out) const {
    auto w = wait_side(s, id_expr(s.id, s.rot, ctx), id_expr(s.id2, s.rot, ctx));
    if (!s.carried) {
      out.insert(out.end(), w.begin(), w.end());
      return;
    }
    const ForStmt& f = *ctx.loop;
    Expr first = make_binary(BinOp::Add, f.begin, make_int(s.dist * f.step));
    Expr cond = make_binary(BinOp::Ge, make_var_ref(f.var), first, s.wait_loc);
    out.push_back(make_stmt(IfStmt{cond, seq(std::move(w), s.wait_loc), nullptr}, s.wait_loc));
  }

  /// After the loop: consume the set of the last iteration that used each id.
  void emit_drain(const Sync& s, const ForStmt& f, std::vector<Stmt>& out) const {
    for (int t = 0; t < s.rot; ++t) {
      auto w = wait_side(s, make_int(s.id + t), make_int(s.id2 + t));
      // Id t was used iff the loop ran more than t iterations.
      Expr cond = make_binary(BinOp::Lt, make_binary(BinOp::Add, f.begin, make_int(t * f.step)),
                              f.end, s.wait_loc);
      if (auto c = as_const(cond)) {
        if (*c) out.insert(out.end(), w.begin(), w.end());
        continue;
      }
      out.push_back(make_stmt(IfStmt{cond, seq(std::move(w), s.wait_loc), nullptr}, s.wait_loc));
    }
  }

  const Program& p_;
  const ChipConfig& chip_;
  const PassOptions& o_;
  CoreKind core_;
  Loc scope_loc_;
  VarRanges vars_;
  bool repeated_;
  std::vector<Buffer> fences_;
  std::map<std::pair<Pipe, Pipe>, int> next_id_;
};

/// Finds the scopes (tracking the kernel-level loops around them) and syncs those without
/// hand flags.
class ScopeFinder : public StmtMutator {
 public:
  ScopeFinder(const Program& p, const ChipConfig& chip, const PassOptions& o)
      : p_(p), chip_(chip), o_(o) {
    vars_[kCidVar] = Range::of(0, std::max<int64_t>(0, p.block_num - 1));
  }

  Stmt mutate_for(const ForStmt& s, const Stmt& self) override {
    Range b = eval_range(s.begin, vars_), e = eval_range(s.end, vars_);
    vars_[s.var->id] =
        b.known && e.known ? Range::of(b.lo, std::max(b.lo, e.hi - 1)) : Range::any();
    ++loops_;
    Stmt r = StmtMutator::mutate_for(s, self);
    --loops_;
    vars_.erase(s.var->id);
    return r;
  }

  Stmt mutate_scope(const ScopeStmt& s, const Stmt& self) override {
    if (has_hand_sync(s.body)) return self;
    VarRanges v = vars_;
    v[kVidVar] = s.kind == CoreKind::V ? Range::of(0, 1) : Range::of(0, 0);
    AutoSync a(p_, chip_, o_, s.kind, self->loc, std::move(v), loops_ > 0);
    Stmt b = a.run(s.body);
    if (equal(b, s.body)) return self;
    return make_stmt(ScopeStmt{s.kind, std::move(b)}, self->loc);
  }

 private:
  const Program& p_;
  const ChipConfig& chip_;
  const PassOptions& o_;
  VarRanges vars_;
  int loops_ = 0;
};

}  // namespace

Program auto_sync(const Program& p, const ChipConfig& chip, const PassOptions& o) {
  Program out = p;
  ScopeFinder f(p, chip, o);
  out.body = f.mutate(p.body);
  return out;
}

}  // namespace tilepipe::passes

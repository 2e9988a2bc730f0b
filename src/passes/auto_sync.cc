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
// Ids are allocated by lifetime (allocate()). When a scope needs more than the chip's ids
// of one pair at once, the pass runs again with a full barrier at a gap of the sequence
// where most of that pair's flags are live (a cut): the barrier orders everything before it
// with everything after it, so the flags it crosses go away and ids on either side of it
// are reused, as the original's sync insertion covers several producers with one barrier.
//
// Positions: gap g is just before child g (gap n after the last). At one gap, flags are
// emitted in tiers: a barrier, companion waits, data sets, data waits, companion sets,
// closing waits.
// Every wait consumes a set from a strictly earlier position (or an earlier iteration), so
// the inserted flags cannot deadlock.
#include "passes/auto_sync.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "passes/dependence.h"
#include "passes/original_sync.h"
#include "tilepipe/passes.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

enum Tier : int { kBarrier = 0, kCompWait = 1, kSet = 2, kWait = 3, kCompSet = 4, kClose = 5 };

/// A full barrier the pass places: before child `second` of the sequence whose first child
/// is `first`.
using Cut = std::pair<const StmtNode*, int>;

constexpr Pipe kPipes[] = {Pipe::S, Pipe::MTE1, Pipe::MTE2, Pipe::MTE3,
                           Pipe::M, Pipe::FIX,  Pipe::V};

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
  /// Not emitted: the ordering a child provides by itself (its drains and inner flags
  /// order its work on src before dst's work after it), or a barrier's.
  bool pseudo = false;
  /// A pseudo sync of child `own` that orders only that child's own work on src: a branch
  /// or loop that may not run provides no ordering of src's earlier work (on the path
  /// that skips it, its flags never run: upstream TileLang-Ascend #1824). -1: any.
  int own = -1;
};

/// Where child c's work starts / ends, for chain queries.
Pos child_start(int c) {
  return Pos{c, 99};
}
Pos child_end(int c) {
  return Pos{c + 1, -3};
}

Sync make_sync(Pipe src, Pipe dst, Pos set, Pos wait) {
  Sync s;
  s.src = src;
  s.dst = dst;
  s.set = set;
  s.wait = wait;
  return s;
}

/// Kind of sequence: the body of a loop (loop-carried dependences live here), or a
/// straight sequence (scope body, branch) that may run once or repeatedly.
struct SeqCtx {
  const ForStmt* loop = nullptr;  // non-null: the body of this loop
  bool repeated = false;          // a straight sequence that runs more than once
};

class AutoSync {
 public:
  /// `authors`: the event ids of the author's flags the scope keeps, which its own flags
  /// must not share.
  AutoSync(const Program& p, const ChipConfig& chip, const PassOptions& o, CoreKind core,
           const Loc& scope_loc, VarRanges outer, bool repeated, const std::set<Cut>& cuts,
           const std::set<int>* registers, const EventIdUse& authors)
      : p_(p),
        chip_(chip),
        o_(o),
        core_(core),
        scope_loc_(scope_loc),
        vars_(std::move(outer)),
        repeated_(repeated),
        cuts_(cuts),
        registers_(registers),
        authors_(authors) {
    for (const auto& w : p.workspaces) fences_.push_back(w);
  }

  /// The synchronised body; nullopt when some pair needs more ids than the chip has at
  /// once (then `next_cut` names a barrier that lowers the pressure).
  std::optional<Stmt> run(const Stmt& body) {
    std::vector<Stmt> drains;
    std::vector<int> ids;
    Exports ex;
    Stmt out =
        seq(sequence(flatten(body), SeqCtx{nullptr, repeated_}, drains, ids, ex), scope_loc_);
    if (!allocate()) return std::nullopt;
    return substitute(out);
  }

  /// A barrier not yet placed where the flags the failed allocation could not fit are
  /// live: at the gap of the failing flag's sequence where most flags of its pair are
  /// live, else at one of the flags holding the ids it needed.
  std::optional<Cut> next_cut() const {
    std::vector<int> order = {failed_};
    order.insert(order.end(), blockers_.begin(), blockers_.end());
    for (int v : order) {
      const Virt& x = virts_[static_cast<size_t>(v)];
      std::optional<Cut> best;
      int most = 0;
      for (int g = x.cut_lo; g <= x.cut_hi; ++g) {
        if (cuts_.count({x.seq, g})) continue;
        int live = 0;
        for (const Virt& y : virts_)
          live += y.seq == x.seq && y.a == x.a && y.b == x.b && y.cut_lo <= g && g <= y.cut_hi;
        if (live > most) {
          most = live;
          best = Cut{x.seq, g};
        }
      }
      if (best) return best;
    }
    return std::nullopt;
  }

  /// The allocation failed and no barrier helps.
  [[noreturn]] void out_of_ids() const {
    const Virt& x = virts_[static_cast<size_t>(failed_)];
    throw UserError(Diagnostic{
        x.wait_loc,
        "auto-sync-ids",
        fmt::format("automatic sync needs more than {} event ids for {}->{} in this scope "
                    "(the flag ordering {} -> {}), even with full barriers between its flags",
                    chip_.event_ids, to_string(x.a), to_string(x.b), x.set_loc.str(),
                    x.wait_loc.str()),
        {fmt::format("scope at {}", scope_loc_.str())},
        "split the scope's work into fewer pipe hand-offs, lower max_rotation, or write "
        "this scope's flags by hand"});
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
        if (s.own >= 0 && it->second != child_end(s.own)) continue;
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
    auto r = reach(p, child_end(i), syncs);
    auto it = r.find(q);
    return it != r.end() && it->second.gap <= j && it->first != p;
  }

  /// A loop-carried dependence (P after child i in iteration k -> Q before child j in
  /// k + d) is ordered: a forward chain reaches Q in iteration k, or reaches some pipe R
  /// from which a chosen carried sync at distance <= d lands on Q before child j.
  bool carried_covered(Pipe p, int i, Pipe q, int j, int64_t d,
                       const std::vector<Sync>& syncs) const {
    auto r = reach(p, child_end(i), syncs);
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
    auto r2 = reach(x.dst, Pos{0, -9}, syncs);
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

  /// Flags for one sequence; `ids_out` receives the virtual ids used in it (and below).
  /// Exports: the orderings a child provides, each with whether it also orders the
  /// producer pipe's work before the child (every path through the child runs work on it
  /// and then the chain) or the child's own work only.
  using Exports = std::map<std::pair<Pipe, Pipe>, bool>;

  std::vector<Stmt> sequence(const std::vector<Stmt>& children, SeqCtx ctx,
                             std::vector<Stmt>& drains_out, std::vector<int>& ids_out,
                             Exports& exports_out) {
    const int n = static_cast<int>(children.size());
    // Accesses of the original children (before their own flags are added).
    std::vector<ChildAcc> acc(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c)
      for (auto& a : collect_accesses(children[c], vars_, fences_, &p_.addresses, registers_))
        acc[c].by_pipe[a.pipe].push_back(std::move(a));

    // Recurse: children get their own flags first.
    std::vector<std::vector<Stmt>> emitted(static_cast<size_t>(n));
    std::vector<std::vector<int>> child_ids(static_cast<size_t>(n));
    std::vector<Sync> syncs;
    for (int c = 0; c < n; ++c) {
      Exports ex;
      emitted[c] = child(children[c], ctx, child_ids[c], ex);
      for (auto [pq, earlier] : ex) {
        Sync s = make_sync(pq.first, pq.second, Pos{c + 1, -2}, Pos{c + 1, -1});
        s.pseudo = true;
        if (!earlier) s.own = c;
        syncs.push_back(s);
      }
    }
    // Barriers: every pipe's work before gap g precedes every pipe's work after it, in this
    // iteration and (carried, from the end of one iteration) in the next.
    const StmtNode* key = n > 0 ? children[0].get() : nullptr;
    std::vector<int> barriers;
    for (int g = 0; g <= n; ++g) {
      if (!cuts_.count({key, g})) continue;
      barriers.push_back(g);
      for (Pipe a : kPipes)
        for (Pipe b : kPipes) {
          if (a == b) continue;
          Sync f = make_sync(a, b, Pos{g, kBarrier}, Pos{g, kBarrier});
          f.pseudo = true;
          syncs.push_back(f);
          if (!ctx.loop) continue;
          Sync c = make_sync(a, b, Pos{n, kClose + 1}, Pos{g, kBarrier});
          c.pseudo = c.carried = true;
          syncs.push_back(c);
        }
    }

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
            if (p != q && conflict_fwd(as, bs)) fwd.push_back({p, q, i, j, 0});
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
              if (p == q) continue;
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
        if (s.pseudo) continue;
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

    seq_ = key;
    for (auto& s : syncs)
      if (!s.pseudo) assign_ids(s, ids_out);
    // One virtual id per pair of the barrier spelling, shared by every barrier (allocate()).
    std::vector<std::pair<PipePair, int>> barrier_ids;
    const auto spellings = barrier_spellings(core_);
    if (!barriers.empty())
      for (PipePair pair : spellings.front()) {
        Sync b = make_sync(pair.first, pair.second, {}, {});
        b.set_loc = b.wait_loc = scope_loc_;
        barrier_ids.push_back({pair, new_virt(pair.first, pair.second, b, ids_out, true)});
      }
    record_compatible(child_ids, syncs, ctx);
    for (const auto& c : child_ids) ids_out.insert(ids_out.end(), c.begin(), c.end());
    exports_out = exports(acc, syncs);

    // Emission.
    std::vector<Stmt> out;
    for (int g = 0; g <= n; ++g) {
      if (std::find(barriers.begin(), barriers.end(), g) != barriers.end()) {
        const Loc& loc = g < n ? children[g]->loc : scope_loc_;
        for (const auto& [pair, v] : barrier_ids) {
          Expr id = make_var_ref(virts_[static_cast<size_t>(v)].base);
          out.push_back(set_flag(pair.first, pair.second, id, loc));
          out.push_back(wait_flag(pair.first, pair.second, id, loc));
        }
      }
      for (int tier = kCompWait; tier <= kClose; ++tier) {
        for (const auto& s : syncs) {
          if (s.pseudo) continue;
          if (s.set.gap == g && s.set.tier == tier) emit_set(s, ctx, out);
          if (s.wait.gap == g && s.wait.tier == tier) emit_wait(s, ctx, out);
        }
      }
      if (g < n) out.insert(out.end(), emitted[g].begin(), emitted[g].end());
    }
    if (ctx.loop)
      for (const auto& s : syncs)
        if (s.carried && !s.pseudo) emit_drain(s, *ctx.loop, drains_out);
    return out;
  }

  /// Whether a producer's access needs no flag before a later one of another pipe: a flag
  /// moves no data, and the scalar unit's reads happen before it issues what follows. Its
  /// element stores do need one (S -> the pipe that reads or writes the element).
  static bool needs_no_flag(const Access& a) {
    return a.fence || (a.pipe == Pipe::S && a.kind == AccessKind::Read);
  }

  bool conflict_fwd(const std::vector<Access>& as, const std::vector<Access>& bs) const {
    for (const auto& a : as) {
      if (needs_no_flag(a)) continue;
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
      if (needs_no_flag(a)) continue;
      for (const auto& b : bs) {
        auto d = carried_distance(a, b, loop, outer);
        if (d && (!best || *d < *best)) best = d;
        if (best == 1) return best;
      }
    }
    return best;
  }

  /// Rewrites one child; loops and branches get their own flags.
  std::vector<Stmt> child(const Stmt& s, SeqCtx ctx, std::vector<int>& ids, Exports& ex) {
    bool in_loop = ctx.loop != nullptr || ctx.repeated;
    if (auto* f = std::get_if<ForStmt>(&s->node)) {
      vars_[f->var->id] = loop_range(*f);
      std::vector<Stmt> drains;
      auto body = sequence(flatten(f->body), SeqCtx{f, false}, drains, ids, ex);
      vars_.erase(f->var->id);
      // A loop that may run no iteration orders only its own work.
      Range b = eval_range(f->begin, vars_), e = eval_range(f->end, vars_);
      if (!(b.known && e.known && b.hi < e.lo))
        for (auto& [pq, earlier] : ex) earlier = false;
      ForStmt nf = *f;
      nf.body = seq(std::move(body), s->loc);
      std::vector<Stmt> out = {make_stmt(std::move(nf), s->loc)};
      out.insert(out.end(), drains.begin(), drains.end());
      return out;
    }
    if (auto* i = std::get_if<IfStmt>(&s->node)) {
      std::vector<Stmt> unused;
      IfStmt ni = *i;
      Exports then_ex, else_ex;
      ni.then_body = seq(
          sequence(flatten(i->then_body), SeqCtx{nullptr, in_loop}, unused, ids, then_ex), s->loc);
      if (i->else_body)
        ni.else_body =
            seq(sequence(flatten(i->else_body), SeqCtx{nullptr, in_loop}, unused, ids, else_ex),
                s->loc);
      // Both paths must provide an ordering; a path without work on P provides all of P's.
      auto pipes_of = [&](const Stmt& b) {
        std::set<Pipe> out;
        if (b)
          for (const auto& a : collect_accesses(b, vars_, fences_, &p_.addresses, registers_))
            out.insert(a.pipe);
        return out;
      };
      // A path without work on P orders the if's own P work (there is none on it), but
      // not P's earlier work: the ordering covers that only when both paths run P's work
      // and then a chain (a set on P orders all of P's earlier work).
      auto tp = pipes_of(i->then_body), ep = pipes_of(i->else_body);
      for (Pipe p : {Pipe::MTE1, Pipe::MTE2, Pipe::MTE3, Pipe::M, Pipe::FIX, Pipe::V})
        for (Pipe q : {Pipe::S, Pipe::MTE1, Pipe::MTE2, Pipe::MTE3, Pipe::M, Pipe::FIX, Pipe::V}) {
          if (p == q || (!tp.count(p) && !ep.count(p))) continue;
          auto t = then_ex.find({p, q}), e = else_ex.find({p, q});
          bool t_ok = !tp.count(p) || t != then_ex.end();
          bool e_ok = !ep.count(p) || e != else_ex.end();
          if (t_ok && e_ok) ex[{p, q}] = tp.count(p) && ep.count(p) && t->second && e->second;
        }
      return {make_stmt(std::move(ni), s->loc)};
    }
    return {s};
  }

  Range loop_range(const ForStmt& f) const { return loop_var_range(f, vars_); }

  // ---- ids and emission ----

  // Ids are virtual while the scope is processed: each sync (each relay leg) gets a
  // placeholder variable as its base. Two virtual ids of one pipe pair may share event ids
  // when one's last wait is ordered before the other's first set (record_compatible);
  // allocate() then packs them, and substitute() writes the numbers in.
  struct Virt {
    Pipe a, b;
    int rot;
    Var base;
    Loc set_loc, wait_loc;
    const StmtNode* seq;  // the sequence that placed the flag (its first child)
    /// Gaps of that sequence at which a barrier orders what the flag orders (none for a
    /// barrier's own flags): a carried flag's wait gap; a data flag's gaps from its
    /// producer to its consumer; a companion's after its set up to its wait.
    int cut_lo, cut_hi;
    bool barrier;  // a barrier's flag: shares ids with every other barrier's
  };

  int new_virt(Pipe a, Pipe b, const Sync& s, std::vector<int>& ids, bool barrier = false) {
    int lo = s.carried ? s.wait.gap : s.set.tier == kSet ? s.set.gap : s.set.gap + 1;
    if (barrier) lo = s.wait.gap + 1;
    virts_.push_back(
        Virt{a, b, s.rot, make_var("ev"), s.set_loc, s.wait_loc, seq_, lo, s.wait.gap, barrier});
    ids.push_back(static_cast<int>(virts_.size()) - 1);
    return static_cast<int>(virts_.size()) - 1;
  }

  void assign_ids(Sync& s, std::vector<int>& ids) {
    if (legal_flag_pair(core_, s.src, s.dst)) {
      s.id = new_virt(s.src, s.dst, s, ids);
      return;
    }
    for (Pipe r : {Pipe::M, Pipe::MTE1, Pipe::V, Pipe::MTE2, Pipe::MTE3, Pipe::FIX}) {
      if (r == s.src || r == s.dst) continue;
      if (legal_flag_pair(core_, s.src, r) && legal_flag_pair(core_, r, s.dst)) {
        s.relay = r;
        s.id = new_virt(s.src, r, s, ids);
        s.id2 = new_virt(r, s.dst, s, ids);
        return;
      }
    }
    throw InternalError(fmt::format("auto_sync: no flag path {}->{} on the {} core",
                                    to_string(s.src), to_string(s.dst), to_string(core_)));
  }

  /// Orderings the whole sequence provides (for the parent): P's work in it is ordered
  /// before Q's work after it, by a chain from after the last child with P work, or by a
  /// carried flag drained after the loop. A chain that starts with the ordering of a child
  /// that may not run (Sync::own) covers the sequence's work only when that child is its
  /// only one with P work, and then only its own (false).
  Exports exports(const std::vector<ChildAcc>& acc, const std::vector<Sync>& syncs) const {
    Exports out;
    std::map<Pipe, int> last, count;
    for (int c = 0; c < static_cast<int>(acc.size()); ++c)
      for (const auto& [p, a] : acc[c].by_pipe) {
        last[p] = c;
        ++count[p];
      }
    std::vector<Sync> strict;
    std::copy_if(syncs.begin(), syncs.end(), std::back_inserter(strict),
                 [](const Sync& s) { return s.own < 0; });
    for (auto [p, c] : last) {
      if (p == Pipe::S) continue;
      for (bool all : {true, false}) {
        if (!all && count[p] > 1) break;
        auto r = reach(p, child_end(c), all ? strict : syncs);
        for (auto [q, pos] : r)
          if (q != p) out.try_emplace({p, q}, all);
        for (const auto& s : syncs) {
          if (!s.carried || s.pseudo || s.dst == p) continue;
          auto it = r.find(s.src);
          if (it != r.end() && s.set > it->second) out.try_emplace({p, s.dst}, all);
        }
      }
    }
    return out;
  }

  /// Q's work after `from` is ordered before P's work after position `to` of the same run.
  bool ordered_same(Pipe q, Pos from, Pipe p, Pos to, const std::vector<Sync>& syncs) const {
    auto r = reach(q, from, syncs);
    auto it = r.find(p);
    return it != r.end() && it->second < to;
  }

  /// ... or of the next run of the sequence (trivially, if it does not run again).
  bool ordered_next(Pipe q, Pos from, Pipe p, Pos to, const std::vector<Sync>& syncs,
                    const SeqCtx& ctx) const {
    if (!ctx.loop && !ctx.repeated) return true;
    auto r = reach(q, from, syncs);
    if (r.count(p)) return true;
    for (const auto& c : syncs) {
      if (!c.carried || c.dist > 1) continue;
      auto it = r.find(c.src);
      if (it == r.end() || !(c.set > it->second)) continue;
      auto r2 = reach(c.dst, c.wait, syncs);
      auto jt = r2.find(p);
      if (jt != r2.end() && jt->second < to) return true;
    }
    return false;
  }

  void compatible(int u, int v) { compatible_.insert({std::min(u, v), std::max(u, v)}); }

  /// Ids used inside child a and inside a later child b (same pipe pair P->Q) may coincide
  /// when Q's work after a is ordered before P's work in b (the sets of b cannot become
  /// visible before a's last wait) and, if the sequence runs again, Q's work after b before
  /// P's work in a of the next run.
  void record_compatible(const std::vector<std::vector<int>>& child_ids,
                         const std::vector<Sync>& syncs, const SeqCtx& ctx) {
    const int n = static_cast<int>(child_ids.size());
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b)
        for (int va : child_ids[a])
          for (int vb : child_ids[b]) {
            const Virt& x = virts_[va];
            const Virt& y = virts_[vb];
            if (x.a != y.a || x.b != y.b) continue;
            Pipe p = x.a, q = x.b;
            if (!forward_covered(q, a, p, b, syncs)) continue;
            bool again = ctx.loop || ctx.repeated;
            if (again && !carried_covered(q, b, p, a, 1, syncs)) continue;
            compatible_.insert({std::min(va, vb), std::max(va, vb)});
          }
    // This sequence's own forward syncs against the children outside their window, and
    // against each other when one's wait is ordered before the other's set.
    auto virts_of = [](const Sync& s) {
      std::vector<int> v = {s.id};
      if (s.id2 >= 0) v.push_back(s.id2);
      return v;
    };
    for (const auto& s : syncs) {
      if (s.pseudo || s.carried) continue;
      for (int vs : virts_of(s)) {
        const Virt& x = virts_[vs];
        for (int c = 0; c < n; ++c)
          for (int vc : child_ids[c]) {
            const Virt& y = virts_[vc];
            if (x.a != y.a || x.b != y.b) continue;
            Pipe p = x.a, q = x.b;
            bool before = child_end(c) <= s.set && ordered_same(q, child_end(c), p, s.set, syncs) &&
                          ordered_next(q, s.wait, p, child_start(c), syncs, ctx);
            bool after = s.wait < child_start(c) &&
                         ordered_same(q, s.wait, p, child_start(c), syncs) &&
                         ordered_next(q, child_end(c), p, s.set, syncs, ctx);
            if (before || after) compatible(vs, vc);
          }
        for (const auto& t : syncs) {
          if (&t == &s || t.pseudo || t.carried) continue;
          for (int vt : virts_of(t)) {
            const Virt& y = virts_[vt];
            if (x.a != y.a || x.b != y.b) continue;
            Pipe p = x.a, q = x.b;
            if (s.wait < t.set && ordered_same(q, s.wait, p, t.set, syncs) &&
                ordered_next(q, t.wait, p, s.set, syncs, ctx))
              compatible(vs, vt);
          }
        }
      }
    }
  }

  /// Event id base of each virtual id: lowest block of rot ids not used by an
  /// incompatible virtual id of the same pair (greedy colouring of the lifetimes, in the
  /// order the flags were made). False, with the first virtual id that does not fit within
  /// the chip's ids and those holding them, when one does not.
  bool allocate() {
    base_.assign(virts_.size(), -1);
    for (size_t v = 0; v < virts_.size(); ++v) {
      const Virt& x = virts_[v];
      std::vector<int> holding;
      for (int b = 0; base_[v] < 0; ++b) {
        if (b + x.rot > chip_.event_ids) {
          failed_ = static_cast<int>(v);
          blockers_ = std::move(holding);
          return false;
        }
        bool ok = !authors_.holds({x.a, x.b}, b, x.rot);
        for (size_t u = 0; u < v; ++u) {
          const Virt& y = virts_[u];
          if (y.a != x.a || y.b != x.b) continue;
          bool overlap = b < base_[u] + y.rot && base_[u] < b + x.rot;
          if (overlap && !(x.barrier && y.barrier) &&
              !compatible_.count({static_cast<int>(u), static_cast<int>(v)})) {
            ok = false;
            holding.push_back(static_cast<int>(u));
          }
        }
        if (ok) base_[v] = b;
      }
    }
    return true;
  }

  /// Writes the allocated numbers into the flags' id expressions.
  Stmt substitute(const Stmt& body) const {
    std::map<int, int64_t> value;
    for (size_t v = 0; v < virts_.size(); ++v) value[virts_[v].base->id] = base_[v];
    struct Sub : StmtMutator {
      const std::map<int, int64_t>* value;
      Expr expr(const Expr& e) const {
        if (auto* r = std::get_if<VarRef>(&e->node)) {
          auto it = value->find(r->var->id);
          return it == value->end() ? e : make_int(it->second, e->loc);
        }
        if (auto* b = std::get_if<Binary>(&e->node)) {
          Expr x = expr(b->a), y = expr(b->b);
          if (b->op == BinOp::Add && ir::as_const(x) == 0) return y;
          return make_binary(b->op, x, y, e->loc);
        }
        return e;
      }
      Stmt mutate_leaf(const Stmt& s) override {
        if (auto* f = std::get_if<SetFlagStmt>(&s->node))
          return make_stmt(SetFlagStmt{f->src, f->dst, expr(f->event_id)}, s->loc);
        if (auto* f = std::get_if<WaitFlagStmt>(&s->node))
          return make_stmt(WaitFlagStmt{f->src, f->dst, expr(f->event_id)}, s->loc);
        return s;
      }
    } sub;
    sub.value = &value;
    return sub.mutate(body);
  }

  /// The id a sync uses in the current iteration: base + (iteration % rot).
  Expr id_expr(int virt, int rot, const SeqCtx& ctx) const {
    if (virt < 0) return make_int(0);
    Expr base = make_var_ref(virts_[static_cast<size_t>(virt)].base);
    if (rot <= 1 || !ctx.loop) return base;
    const ForStmt& f = *ctx.loop;
    Expr it = make_binary(BinOp::Sub, make_var_ref(f.var), f.begin);
    if (f.step != 1) it = make_binary(BinOp::Div, it, make_int(f.step));
    if (ir::as_const(f.begin) == 0 && f.step == 1) it = make_var_ref(f.var);
    return make_binary(BinOp::Add, base, make_binary(BinOp::Mod, it, make_int(rot)));
  }

  Expr drain_id(int virt, int t) const {
    if (virt < 0) return make_int(0);
    return make_binary(BinOp::Add, make_var_ref(virts_[static_cast<size_t>(virt)].base),
                       make_int(t));
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
    guarded(cond, std::move(w), s.wait_loc, out);
  }

  /// `if cond: w`, or w itself / nothing when the loop ranges decide cond at build time (a
  /// loop of one trip needs no carried wait; a batch loop that always runs needs no guard
  /// on its drain), as the original's simplifier folds such guards.
  void guarded(const Expr& cond, std::vector<Stmt> w, const Loc& loc,
               std::vector<Stmt>& out) const {
    if (auto d = decided(cond, vars_)) {
      if (*d) out.insert(out.end(), w.begin(), w.end());
      return;
    }
    out.push_back(make_stmt(IfStmt{cond, seq(std::move(w), loc), nullptr}, loc));
  }

  /// After the loop: consume the set of the last iteration that used each id.
  void emit_drain(const Sync& s, const ForStmt& f, std::vector<Stmt>& out) const {
    for (int t = 0; t < s.rot; ++t) {
      auto w = wait_side(s, drain_id(s.id, t), drain_id(s.id2, t));
      // Id t was used iff the loop ran more than t iterations.
      Expr cond = make_binary(BinOp::Lt, make_binary(BinOp::Add, f.begin, make_int(t * f.step)),
                              f.end, s.wait_loc);
      guarded(cond, std::move(w), s.wait_loc, out);
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
  const std::set<Cut>& cuts_;
  const std::set<int>* registers_;  // let variables assigned more than once: no value
  const EventIdUse& authors_;
  const StmtNode* seq_ = nullptr;  // the sequence whose flags get ids (new_virt)
  std::vector<Virt> virts_;
  std::set<std::pair<int, int>> compatible_;
  std::vector<int> base_;
  int failed_ = -1;
  std::vector<int> blockers_;
};

/// The length of the full barrier (a spelling of barrier_spellings: set and wait of each
/// pair on one constant id) starting at items[i], or 0.
size_t barrier_at(const std::vector<Stmt>& items, size_t i, CoreKind core) {
  for (const auto& spelling : barrier_spellings(core)) {
    const size_t len = 2 * spelling.size();
    if (i + len > items.size()) continue;
    bool match = true;
    for (size_t k = 0; k < spelling.size() && match; ++k) {
      auto* set = std::get_if<SetFlagStmt>(&items[i + 2 * k]->node);
      auto* wait = std::get_if<WaitFlagStmt>(&items[i + 2 * k + 1]->node);
      match = set && wait && set->src == spelling[k].first && set->dst == spelling[k].second &&
              wait->src == set->src && wait->dst == set->dst && as_const(set->event_id) &&
              equal(set->event_id, wait->event_id);
    }
    if (match) return len;
  }
  return 0;
}

/// The author's full barriers (`T.barrier_all()`, and the drains original_split gives a
/// core with them) taken out of the sequences as cuts: auto_sync puts a barrier back at
/// each and its flags around them, as the original's AUTO_SYNC adds its flags to a kernel
/// with PipeBarrier<PIPE_ALL> calls. The author's other flags (one-pipe barriers too) stay where
/// they are.
class BarrierCuts {
 public:
  explicit BarrierCuts(CoreKind core) : core_(core) {}

  Stmt strip(const Stmt& body, const Loc& loc) { return sequence(body, loc); }
  std::set<Cut> cuts;

 private:
  /// A sequence as auto_sync reads it (flattened), its barriers removed and recorded as
  /// cuts keyed by its first remaining child.
  Stmt sequence(const Stmt& s, const Loc& loc) {
    std::vector<Stmt> items = flatten(s), out;
    std::vector<int> gaps;
    for (size_t i = 0; i < items.size();) {
      if (size_t len = barrier_at(items, i, core_)) {
        if (gaps.empty() || gaps.back() != static_cast<int>(out.size()))
          gaps.push_back(static_cast<int>(out.size()));
        i += len;
        continue;
      }
      out.push_back(child(items[i++]));
    }
    for (int g : gaps) cuts.insert({out.empty() ? nullptr : out.front().get(), g});
    return seq(std::move(out), loc);
  }

  Stmt child(const Stmt& s) {
    if (auto* f = std::get_if<ForStmt>(&s->node)) {
      ForStmt nf = *f;
      nf.body = sequence(f->body, s->loc);
      return make_stmt(std::move(nf), s->loc);
    }
    if (auto* i = std::get_if<IfStmt>(&s->node)) {
      IfStmt ni = *i;
      ni.then_body = sequence(i->then_body, s->loc);
      if (i->else_body) ni.else_body = sequence(i->else_body, s->loc);
      return make_stmt(std::move(ni), s->loc);
    }
    return s;
  }

  CoreKind core_;
};

/// Finds the scopes (tracking the kernel-level loops around them) and syncs those without
/// hand flags.
class ScopeFinder : public StmtMutator {
 public:
  ScopeFinder(const Program& p, const ChipConfig& chip, const PassOptions& o)
      : p_(p), chip_(chip), o_(o), assigned_(let_assignments(p.body).vars) {
    vars_[kCidVar] = cid_range(p.block_num);
  }

  /// The first let in `body` of a variable the program binds more than once, or null.
  const StmtNode* reassigned_in(const Stmt& body) const {
    struct V : StmtVisitor {
      const std::set<int>* assigned;
      const StmtNode* found = nullptr;
      void visit_let(const LetStmt& l, const StmtNode& n) override {
        if (!found && assigned->count(l.var->id)) found = &n;
      }
    } v;
    v.assigned = &assigned_;
    v.visit(body);
    return v.found;
  }

  Stmt mutate_for(const ForStmt& s, const Stmt& self) override {
    vars_[s.var->id] = loop_var_range(s, vars_);
    ++loops_;
    Stmt r = StmtMutator::mutate_for(s, self);
    --loops_;
    vars_.erase(s.var->id);
    return r;
  }

  Stmt mutate_scope(const ScopeStmt& s, const Stmt& self) override {
    Stmt body = s.body;
    std::set<Cut> cuts;
    EventIdUse authors;
    if (has_hand_sync(body)) {
      // Under the original's AUTO_SYNC (original_sync) a scope with the author's flags stays
      // automatic, as the original's sync insertion adds its flags whatever the author
      // wrote: the full barriers become cuts, the other flags stay and keep their ids,
      // which auto_sync's own flags do not share. Without it the scope is hand-synced.
      if (!o_.original_sync) return self;
      BarrierCuts bc(s.kind);
      body = bc.strip(body, self->loc);
      cuts = std::move(bc.cuts);
      authors = event_ids_used(body);
    }
    // The analysis reads a let variable as the value it was bound to, which a variable
    // assigned again (a T.alloc_var register) does not keep: an access indexed by one may
    // touch any element of its buffer. A scope that also has flags of the author's besides
    // barriers is left to them (as without original_sync).
    const bool reassigned = reassigned_in(body) != nullptr;
    if (reassigned && !authors.empty()) return self;
    const std::set<int>* registers = reassigned ? &assigned_ : nullptr;
    VarRanges v = vars_;
    v[kVidVar] = vid_range(s.kind);
    // Ids by lifetime; where they run out, full barriers one at a time until they fit.
    // When they do not fit beside the author's ids even then, the ids are chosen as the
    // original's sync insertion chooses them, without regard to the author's.
    Stmt b;
    const std::set<Cut> authors_cuts = cuts;
    for (;;) {
      AutoSync a(p_, chip_, o_, s.kind, self->loc, v, loops_ > 0, cuts, registers, authors);
      if (auto r = a.run(body)) {
        b = *r;
        break;
      }
      auto c = a.next_cut();
      if (!c && !authors.empty()) {
        authors = {};
        cuts = authors_cuts;
        continue;
      }
      if (!c) a.out_of_ids();
      cuts.insert(*c);
    }
    if (o_.original_sync) b = original_barriers(b, s.kind, chip_, self->loc);
    if (equal(b, s.body)) return self;
    return make_stmt(ScopeStmt{s.kind, std::move(b)}, self->loc);
  }

 private:
  const Program& p_;
  const ChipConfig& chip_;
  const PassOptions& o_;
  std::set<int> assigned_;  // let variables the program binds more than once
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

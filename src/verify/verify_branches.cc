// Hand-written sync across the branches of an if (warnings branch-flags, branch-barrier).
// The simulation runs one path of each if per core, so a flag or barrier that only one
// path has is seen to be wrong only when the other path runs; these checks look at both
// paths of every if whose condition does not depend on a loop variable (a loop-variable
// guard, `if (i >= 1) wait_flag(...)`, is how a pipeline's prologue and epilogue are
// written: the loop balances it). Upstream TileLang-Ascend #1824 is the same hazard in the
// original's automatic sync.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "tilepipe/ir_vars.h"
#include "verify/verify_internal.h"

namespace tilepipe::verify_detail {

namespace {

/// Sets minus waits per intra-core flag (src, dst, id as printed), and barriers per pipe
/// (a pipe_barrier, or the sets of barrier_all's flags: one per barrier_all and pipe).
struct Balance {
  std::map<std::tuple<Pipe, Pipe, std::string>, int64_t> flags;
  std::map<Pipe, int64_t> barriers;
  bool operator==(const Balance&) const = default;
  void add(const Balance& b, int64_t times) {
    for (const auto& [k, v] : b.flags) flags[k] += v * times;
    for (const auto& [k, v] : b.barriers) barriers[k] += v * times;
    std::erase_if(flags, [](const auto& kv) { return kv.second == 0; });
    std::erase_if(barriers, [](const auto& kv) { return kv.second == 0; });
  }
};

bool is_barrier_flag(const Expr& id) {
  auto* c = std::get_if<IntImm>(&id->node);
  return c && c->value == kBarrierEventId;
}

/// The balance of a statement on every path, or nullopt when paths differ (an inner if,
/// reported on its own) or a loop of unknown trip count repeats an unbalanced body.
std::optional<Balance> balance(const Stmt& s) {
  Balance b;
  if (!s) return b;
  if (auto* q = std::get_if<SeqStmt>(&s->node)) {
    for (const auto& c : q->body) {
      auto x = balance(c);
      if (!x) return std::nullopt;
      b.add(*x, 1);
    }
  } else if (auto* f = std::get_if<ForStmt>(&s->node)) {
    auto x = balance(f->body);
    if (!x) return std::nullopt;
    if (x->flags.empty() && x->barriers.empty()) return b;
    auto* lo = std::get_if<IntImm>(&f->begin->node);
    auto* hi = std::get_if<IntImm>(&f->end->node);
    if (!lo || !hi) return std::nullopt;
    b.add(*x, std::max<int64_t>(0, (hi->value - lo->value + f->step - 1) / f->step));
  } else if (auto* i = std::get_if<IfStmt>(&s->node)) {
    auto t = balance(i->then_body), e = balance(i->else_body);
    if (!t || !e || !(*t == *e)) return std::nullopt;
    return t;
  } else if (auto* sc = std::get_if<ScopeStmt>(&s->node)) {
    return balance(sc->body);
  } else if (auto* st = std::get_if<SetFlagStmt>(&s->node)) {
    if (is_barrier_flag(st->event_id))
      ++b.barriers[st->src];
    else
      ++b.flags[{st->src, st->dst, print(st->event_id)}];
  } else if (auto* w = std::get_if<WaitFlagStmt>(&s->node)) {
    if (!is_barrier_flag(w->event_id)) --b.flags[{w->src, w->dst, print(w->event_id)}];
  } else if (auto* pb = std::get_if<PipeBarrierStmt>(&s->node)) {
    ++b.barriers[pb->pipe];
  }
  return b;
}

/// The statement moves or computes data (a copy, gemm, tile op or reduction) somewhere.
bool has_data_op(const Stmt& s) {
  if (!s) return false;
  if (auto* q = std::get_if<SeqStmt>(&s->node))
    return std::any_of(q->body.begin(), q->body.end(), has_data_op);
  if (auto* f = std::get_if<ForStmt>(&s->node)) return has_data_op(f->body);
  if (auto* i = std::get_if<IfStmt>(&s->node))
    return has_data_op(i->then_body) || has_data_op(i->else_body);
  if (auto* sc = std::get_if<ScopeStmt>(&s->node)) return has_data_op(sc->body);
  return std::holds_alternative<CopyStmt>(s->node) || std::holds_alternative<GemmStmt>(s->node) ||
         std::holds_alternative<TileOpStmt>(s->node) || std::holds_alternative<ReduceStmt>(s->node);
}

}  // namespace

bool Verifier::loop_dependent(const Expr& e) const {
  bool dep = false;
  walk_expr(e, [&](const ExprNode& n) {
    auto* v = std::get_if<VarRef>(&n.node);
    dep = dep || (v && loop_derived_.count(v->var->id));
  });
  return dep;
}

void Verifier::check_branch_sync(const IfStmt& n, const StmtNode& s) {
  if (!opts_.branch_sync || !scope_ || loop_dependent(n.cond)) return;
  auto t = balance(n.then_body), e = balance(n.else_body);
  if (!t || !e || *t == *e) return;
  const std::string cond = print(n.cond);
  for (const auto& [key, count] : t->flags) {
    auto it = e->flags.find(key);
    int64_t other = it == e->flags.end() ? 0 : it->second;
    if (count == other) continue;
    const auto& [src, dst, id] = key;
    warn(s.loc, "branch-flags",
         fmt::format("the branches of `if ({})` leave flag {}->{} #{} with different balances "
                     "of sets minus waits ({} when it holds, {} when not): a wait after the if "
                     "hangs, or a set stays pending, on one path, which the simulation does "
                     "not run on every core",
                     cond, to_string(src), to_string(dst), id, count, other),
         "make every path set and wait each flag the same number of times: move the set or "
         "the wait out of the branch, or give the other branch its own");
    return;
  }
  for (const auto& [key, count] : e->flags) {
    if (t->flags.count(key)) continue;
    const auto& [src, dst, id] = key;
    warn(s.loc, "branch-flags",
         fmt::format("the branches of `if ({})` leave flag {}->{} #{} with different balances "
                     "of sets minus waits (0 when it holds, {} when not)",
                     cond, to_string(src), to_string(dst), id, count),
         "make every path set and wait each flag the same number of times");
    return;
  }
  // A barrier among the branch's own work orders that work; one in a branch with no work
  // can only be there for the work around the if.
  for (Pipe p : {Pipe::MTE1, Pipe::MTE2, Pipe::MTE3, Pipe::M, Pipe::FIX, Pipe::V, Pipe::S}) {
    int64_t a = t->barriers.count(p) ? t->barriers.at(p) : 0;
    int64_t b = e->barriers.count(p) ? e->barriers.at(p) : 0;
    if (a == b || has_data_op(a > b ? n.then_body : n.else_body)) continue;
    warn(s.loc, "branch-barrier",
         fmt::format("a barrier of pipe {} runs on one path of `if ({})` only ({} when it "
                     "holds, {} when not): on the other path it does not order the work "
                     "before the if with the work after it, and the simulation does not run "
                     "that path on every core",
                     to_string(p), cond, a, b),
         "put the barrier before or after the if, where every path runs it, or give the "
         "other branch the same barrier");
    return;
  }
}

}  // namespace tilepipe::verify_detail

// Event ids past the chip's count renamed into it (event_ids.h).
#include "passes/event_ids.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "tilepipe/ir_range.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

using PairKey = std::tuple<CoreKind, Pipe, Pipe>;

/// What a pair's ids become: constants in `to` mapped, every other id shifted down by
/// `shift` when there is one.
struct Renaming {
  std::optional<int64_t> shift;
  std::map<int64_t, int64_t> to;
  int64_t of(int64_t id) const {
    auto it = to.find(id);
    return it != to.end() ? it->second : shift ? id - *shift : id;
  }
};

template <class F>
const F* flag_of(const Stmt& s) {
  return std::get_if<F>(&s->node);
}

/// `set_flag(a, b, c); wait_flag(a, b, c)` with a constant c: a handshake, its wait the
/// next instruction of the program after its set.
bool handshake(const Stmt& set, const Stmt& wait) {
  const auto* f = flag_of<SetFlagStmt>(set);
  const auto* w = flag_of<WaitFlagStmt>(wait);
  if (!f || !w || f->src != w->src || f->dst != w->dst) return false;
  auto a = as_const(f->event_id), b = as_const(w->event_id);
  return a && b && *a == *b;
}

/// Walks the scopes with the ranges of the loops around each flag; `on_flag` sees every
/// set / wait with its pair key, the range of its id and whether it is half of a handshake.
class FlagWalk : public StmtMutator {
 public:
  explicit FlagWalk(const Program& p) { vars_[kCidVar] = cid_range(p.block_num); }
  virtual Expr on_flag(const PairKey& key, const Expr& id, const Range& r, const Loc& loc,
                       bool in_handshake) = 0;

  Stmt mutate_seq(const SeqStmt& s, const Stmt& self) override {
    for (size_t i = 0; i + 1 < s.body.size(); ++i)
      if (handshake(s.body[i], s.body[i + 1])) {
        handshakes_.insert(s.body[i].get());
        handshakes_.insert(s.body[i + 1].get());
      }
    return StmtMutator::mutate_seq(s, self);
  }
  Stmt mutate_for(const ForStmt& s, const Stmt& self) override {
    vars_[s.var->id] = loop_var_range(s, vars_);
    Stmt r = StmtMutator::mutate_for(s, self);
    vars_.erase(s.var->id);
    return r;
  }
  Stmt mutate_scope(const ScopeStmt& s, const Stmt& self) override {
    core_ = s.kind;
    vars_[kVidVar] = vid_range(s.kind);
    Stmt r = StmtMutator::mutate_scope(s, self);
    core_.reset();
    return r;
  }
  Stmt mutate_leaf(const Stmt& self) override {
    if (!core_) return self;      // outside a scope: the verifier's error, not ours
    auto renamed = [&](auto f) {  // a SetFlagStmt or WaitFlagStmt with its id renamed
      Expr id = on_flag({*core_, f.src, f.dst}, f.event_id, eval_range(f.event_id, vars_),
                        self->loc, handshakes_.count(self.get()) > 0);
      if (id == f.event_id) return self;
      f.event_id = std::move(id);
      return make_stmt(std::move(f), self->loc);
    };
    if (auto* f = flag_of<SetFlagStmt>(self)) return renamed(*f);
    if (auto* f = flag_of<WaitFlagStmt>(self)) return renamed(*f);
    return self;
  }

 private:
  VarRanges vars_;
  std::optional<CoreKind> core_;
  std::set<const StmtNode*> handshakes_;
};

/// First walk: every id of every pair (constants as points, run-time ids as ranges).
class Collect : public FlagWalk {
 public:
  Collect(const Program& p, int64_t count) : FlagWalk(p), count_(count) {}
  struct Ids {
    std::set<int64_t> constants;
    std::map<int64_t, bool> handshake_only;  // a constant used in handshakes only
    std::vector<Range> runtime;
    std::optional<Loc> past;  // the first flag whose id may lie past the range
  };
  std::map<PairKey, Ids> ids;

  Expr on_flag(const PairKey& key, const Expr& id, const Range& r, const Loc& loc,
               bool in_handshake) override {
    Ids& i = ids[key];
    if (!i.past && (!r.known || r.lo < 0 || r.hi >= count_)) i.past = loc;
    if (auto c = as_const(id)) {
      i.constants.insert(*c);
      auto [it, fresh] = i.handshake_only.emplace(*c, in_handshake);
      if (!fresh) it->second = it->second && in_handshake;
    } else {
      i.runtime.push_back(r);
    }
    return id;
  }

 private:
  int64_t count_;
};

/// Second walk: the renaming applied.
class Rename : public FlagWalk {
 public:
  Rename(const Program& p, std::map<PairKey, Renaming> r) : FlagWalk(p), r_(std::move(r)) {}
  Expr on_flag(const PairKey& key, const Expr& id, const Range&, const Loc&, bool) override {
    auto it = r_.find(key);
    if (it == r_.end()) return id;
    if (auto c = as_const(id)) {
      const int64_t to = it->second.of(*c);
      return to == *c ? id : make_int(to);
    }
    if (it->second.shift.value_or(0) != 0)
      return make_binary(BinOp::Sub, id, make_int(*it->second.shift), id->loc);
    return id;
  }

 private:
  std::map<PairKey, Renaming> r_;
};

/// The ids of one pair's flags that hold a token (renamed by `w`) at each handshake of a
/// constant in `lone`, found by running the flags of the pair alone, loop by loop, with every
/// loop bound, guard and id evaluated, for each vid: nullopt when one depends on cid or a
/// loaded value, or the run exceeds a step budget.
class Tokens {
 public:
  Tokens(const PairKey& key, const Renaming& w, const std::set<int64_t>& lone)
      : key_(key), w_(w), lone_(lone) {}
  std::optional<std::map<int64_t, std::set<int64_t>>> run(const Program& p) {
    vars_[kCidVar] = cid_range(p.block_num);
    if (!walk(p.body)) return std::nullopt;
    return busy_;
  }

 private:
  static constexpr int64_t kBudget = 1 << 20;

  std::optional<int64_t> point(const Expr& e) const {
    Range r = eval_range(e, vars_);
    if (!r.known || r.lo != r.hi) return std::nullopt;
    return r.lo;
  }
  bool of_pair(const Stmt& s) {
    auto it = memo_.find(s.get());
    if (it != memo_.end()) return it->second;
    bool found = std::visit(
        [&](const auto& n) -> bool {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, SeqStmt>)
            return std::any_of(n.body.begin(), n.body.end(), [&](auto& c) { return of_pair(c); });
          else if constexpr (std::is_same_v<T, ForStmt> || std::is_same_v<T, ScopeStmt>)
            return of_pair(n.body);
          else if constexpr (std::is_same_v<T, IfStmt>)
            return of_pair(n.then_body) || (n.else_body && of_pair(n.else_body));
          else if constexpr (std::is_same_v<T, SetFlagStmt> || std::is_same_v<T, WaitFlagStmt>)
            return std::get<1>(key_) == n.src && std::get<2>(key_) == n.dst;
          else
            return false;
        },
        s->node);
    return memo_[s.get()] = found;
  }
  bool walk(const Stmt& s) {
    if (!s || !of_pair(s)) return true;
    if (++steps_ > kBudget) return false;
    if (const auto* q = std::get_if<SeqStmt>(&s->node)) {
      for (const auto& c : q->body)
        if (!walk(c)) return false;
      return true;
    }
    if (const auto* sc = std::get_if<ScopeStmt>(&s->node)) {
      if (sc->kind != std::get<0>(key_)) return true;
      const Range v = vid_range(sc->kind);
      for (vid_ = v.lo; vid_ <= v.hi; ++vid_) {  // each AIV's flags are its own
        vars_[kVidVar] = Range::of(vid_, vid_);
        in_scope_ = true;
        bool ok = walk(sc->body);
        in_scope_ = false;
        if (!ok) return false;
      }
      return true;
    }
    if (const auto* f = std::get_if<ForStmt>(&s->node)) {
      auto b = point(f->begin), e = point(f->end);
      if (!b || !e || f->step <= 0) return false;
      for (int64_t v = *b; v < *e; v += f->step) {
        vars_[f->var->id] = Range::of(v, v);
        if (!walk(f->body)) return false;
      }
      vars_.erase(f->var->id);
      return true;
    }
    if (const auto* i = std::get_if<IfStmt>(&s->node)) {
      auto c = point(i->cond);
      if (!c) return false;
      return walk(*c ? i->then_body : i->else_body);
    }
    if (!in_scope_) return true;
    const bool set = flag_of<SetFlagStmt>(s) != nullptr;
    auto id = point(set ? flag_of<SetFlagStmt>(s)->event_id : flag_of<WaitFlagStmt>(s)->event_id);
    if (!id) return false;
    if (lone_.count(*id)) {  // the handshake's set; its wait takes the token at once
      if (set)
        for (const auto& [k, n] : held_[vid_])
          if (n != 0) busy_[*id].insert(k);
      return true;
    }
    held_[vid_][w_.of(*id)] += set ? 1 : -1;
    return true;
  }

  PairKey key_;
  const Renaming& w_;
  const std::set<int64_t>& lone_;
  VarRanges vars_;
  bool in_scope_ = false;
  int64_t steps_ = 0;
  std::map<const StmtNode*, bool> memo_;
  int64_t vid_ = 0;
  std::map<int64_t, std::map<int64_t, int64_t>> held_;  // tokens per vid and renamed id
  std::map<int64_t, std::set<int64_t>> busy_;
};

/// The renaming of one pair whose ids may lie past [0, count); an error when none fits.
/// Constants past the range used only in handshakes (`lone`) are renamed last: into an id no
/// other flag of the pair uses, else into one that holds no token at any of their handshakes.
Renaming renaming(const Program& p, const PairKey& key, const Collect::Ids& ids, int64_t count) {
  const auto [core, src, dst] = key;
  auto fail = [&](std::string found) {
    throw UserError(Diagnostic{
        *ids.past,
        "flag-id",
        fmt::format("the {}->{} flags of the {} core use {}; the chip has {} event ids per pipe "
                    "pair (sync.event_ids), and no renaming of these ids fits in them",
                    to_string(src), to_string(dst), core == CoreKind::C ? "Cube" : "Vector", found,
                    count),
        {},
        "reuse ids of finished handshakes, or merge buffers that are released together"});
  };
  auto within = [&](int64_t c) {
    return std::any_of(ids.runtime.begin(), ids.runtime.end(),
                       [&](const Range& r) { return !r.known || (r.lo <= c && c <= r.hi); });
  };
  std::set<int64_t> lone, rest;
  for (int64_t c : ids.constants)
    (c >= count && ids.handshake_only.at(c) && !within(c) ? lone : rest).insert(c);
  std::vector<Range> ranges = ids.runtime;
  for (int64_t c : rest) ranges.push_back(Range::of(c, c));
  int64_t lo = 0, hi = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    if (!r.known) fail("an id whose range is unknown");
    lo = i == 0 ? r.lo : std::min(lo, r.lo);
    hi = i == 0 ? r.hi : std::max(hi, r.hi);
  }
  if (lo < 0) fail(fmt::format("the negative id {}", lo));
  auto free_of = [&](const std::set<int64_t>& taken) {  // the ids of the range not taken
    std::vector<int64_t> free;
    for (int64_t i = 0; i < count; ++i)
      if (!taken.count(i)) free.push_back(i);
    return free;
  };
  Renaming out;
  std::set<int64_t> used;      // the ids of the range the renamed flags other than `lone` use
  if (!ids.runtime.empty()) {  // one shift of every id of the pair
    if (hi - lo >= count)
      fail(
          fmt::format("ids from {} to {} (run-time ones among them: one shift of all of them "
                      "must fit)",
                      lo, hi));
    out.shift = lo;
    for (int64_t i = 0; i <= hi - lo; ++i) used.insert(i);
  } else {
    const std::vector<int64_t> free = free_of(rest);
    size_t next = 0;
    for (int64_t c : rest) {
      if (c < count) {
        used.insert(c);
        continue;
      }
      if (next == free.size())
        fail(fmt::format("{} distinct ids ({})", ids.constants.size(),
                         fmt::join(ids.constants, ", ")));
      used.insert(out.to[c] = free[next++]);
    }
  }
  const std::vector<int64_t> free = free_of(used);
  if (lone.size() <= free.size()) {
    size_t next = 0;
    for (int64_t c : lone) out.to[c] = free[next++];
    return out;
  }
  auto busy = Tokens(key, out, lone).run(p);
  const std::string range = fmt::format("ids from {} to {}{}", lo, hi,
                                        ids.runtime.empty() ? "" : " (run-time ones among them)");
  for (int64_t c : lone) {
    if (!busy)
      fail(
          fmt::format("{} and the handshake #{}; which ids are free there could not be worked "
                      "out (a loop bound, guard or id depends on cid or a loaded value, or the "
                      "flags run over 2^20 steps)",
                      range, c));
    std::optional<int64_t> k;
    for (int64_t i = 0; i < count && !k; ++i)
      if (!(*busy)[c].count(i)) k = i;
    if (!k)
      fail(fmt::format("{} and the handshake #{}, at which each of the {} ids may hold a token",
                       range, c, count));
    out.to[c] = *k;
  }
  return out;
}

}  // namespace

Program event_ids(const Program& p, const ChipConfig& chip, const PassOptions&) {
  Collect c(p, chip.event_ids);
  c.mutate(p.body);
  std::map<PairKey, Renaming> r;
  for (const auto& [key, ids] : c.ids)
    if (ids.past) r[key] = renaming(p, key, ids, chip.event_ids);
  if (r.empty()) return p;
  Program out = p;
  Rename rn(p, std::move(r));
  out.body = rn.mutate(p.body);
  return out;
}

}  // namespace tilepipe::passes

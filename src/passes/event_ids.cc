// Event ids past the chip's count renamed into it (event_ids.h).
#include "passes/event_ids.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "tilepipe/ir_range.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

using PairKey = std::tuple<CoreKind, Pipe, Pipe>;

/// What a pair's ids become: a shift of all of them, or a map of constants.
struct Renaming {
  std::optional<int64_t> shift;
  std::map<int64_t, int64_t> to;
};

/// Walks the scopes with the ranges of the loops around each flag; `on_flag` sees every
/// set / wait with its pair key and the range of its id.
class FlagWalk : public StmtMutator {
 public:
  explicit FlagWalk(const Program& p) { vars_[kCidVar] = cid_range(p.block_num); }
  virtual Expr on_flag(const PairKey& key, const Expr& id, const Range& r, const Loc& loc) = 0;

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
      Expr id =
          on_flag({*core_, f.src, f.dst}, f.event_id, eval_range(f.event_id, vars_), self->loc);
      if (id == f.event_id) return self;
      f.event_id = std::move(id);
      return make_stmt(std::move(f), self->loc);
    };
    if (auto* f = std::get_if<SetFlagStmt>(&self->node)) return renamed(*f);
    if (auto* f = std::get_if<WaitFlagStmt>(&self->node)) return renamed(*f);
    return self;
  }

 private:
  VarRanges vars_;
  std::optional<CoreKind> core_;
};

/// First walk: every id of every pair (constants as points, run-time ids as ranges).
class Collect : public FlagWalk {
 public:
  Collect(const Program& p, int64_t count) : FlagWalk(p), count_(count) {}
  struct Ids {
    std::set<int64_t> constants;
    std::vector<Range> ranges;  // of all ids, constants included
    bool runtime = false;
    std::optional<Loc> past;  // the first flag whose id may lie past the range
  };
  std::map<PairKey, Ids> ids;

  Expr on_flag(const PairKey& key, const Expr& id, const Range& r, const Loc& loc) override {
    Ids& i = ids[key];
    i.ranges.push_back(r);
    if (!i.past && (!r.known || r.lo < 0 || r.hi >= count_)) i.past = loc;
    if (auto c = as_const(id))
      i.constants.insert(*c);
    else
      i.runtime = true;
    return id;
  }

 private:
  int64_t count_;
};

/// Second walk: the renaming applied.
class Rename : public FlagWalk {
 public:
  Rename(const Program& p, std::map<PairKey, Renaming> r) : FlagWalk(p), r_(std::move(r)) {}
  Expr on_flag(const PairKey& key, const Expr& id, const Range&, const Loc&) override {
    auto it = r_.find(key);
    if (it == r_.end()) return id;
    if (it->second.shift) return make_binary(BinOp::Sub, id, make_int(*it->second.shift), id->loc);
    auto c = as_const(id);
    auto to = c ? it->second.to.find(*c) : it->second.to.end();
    return to == it->second.to.end() ? id : make_int(to->second);
  }

 private:
  std::map<PairKey, Renaming> r_;
};

/// The renaming of one pair whose ids may lie past [0, count); an error when none fits.
Renaming renaming(const PairKey& key, const Collect::Ids& ids, int64_t count) {
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
  int64_t lo = 0, hi = 0;
  for (size_t i = 0; i < ids.ranges.size(); ++i) {
    const Range& r = ids.ranges[i];
    if (!r.known) fail("an id whose range is unknown");
    lo = i == 0 ? r.lo : std::min(lo, r.lo);
    hi = i == 0 ? r.hi : std::max(hi, r.hi);
  }
  if (lo < 0) fail(fmt::format("the negative id {}", lo));
  Renaming out;
  if (ids.runtime) {  // one shift of every id of the pair
    if (hi - lo >= count)
      fail(
          fmt::format("ids from {} to {} (run-time ones among them: one shift of all of them "
                      "must fit)",
                      lo, hi));
    out.shift = lo;
    return out;
  }
  std::vector<int64_t> free;
  for (int64_t i = 0; i < count; ++i)
    if (!ids.constants.count(i)) free.push_back(i);
  size_t next = 0;
  for (int64_t c : ids.constants) {
    if (c < count) continue;
    if (next == free.size())
      fail(fmt::format("{} distinct ids ({})", ids.constants.size(),
                       fmt::join(ids.constants, ", ")));
    out.to[c] = free[next++];
  }
  return out;
}

}  // namespace

Program event_ids(const Program& p, const ChipConfig& chip, const PassOptions&) {
  Collect c(p, chip.event_ids);
  c.mutate(p.body);
  std::map<PairKey, Renaming> r;
  for (const auto& [key, ids] : c.ids)
    if (ids.past) r[key] = renaming(key, ids, chip.event_ids);
  if (r.empty()) return p;
  Program out = p;
  Rename rn(p, std::move(r));
  out.body = rn.mutate(p.body);
  return out;
}

}  // namespace tilepipe::passes

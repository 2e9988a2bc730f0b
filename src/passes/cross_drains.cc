// Cross-core flags left set at the kernel's end, taken back (cross_drains.h).
#include "passes/cross_drains.h"

#include <array>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "tilepipe/ir_range.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

/// How many times a statement runs: an expression of the loop bounds, null under a run-time
/// `if`.
using Count = Expr;

CoreKind other(CoreKind k) {
  return k == CoreKind::C ? CoreKind::V : CoreKind::C;
}

/// One flag's uses on one side: (scope kind, set?, flag id, AIV).
using Key = std::tuple<CoreKind, bool, int64_t, int>;

struct Drain {
  int64_t flag_id = 0;
  int64_t count = 0;
  int aiv = -1;  // -1: both vector cores (or the Cube)
};

/// Counts every cross-core set and wait per Key, in program order of first use.
class Counter : public StmtVisitor {
 public:
  std::vector<Key> order;
  std::map<Key, Count> sums;
  std::array<const StmtNode*, 2> last_scope{};
  std::set<int64_t> sync_all_ids;  // T.sync_all's flags: a barrier, no hand-off

  void visit_for(const ForStmt& f, const StmtNode&) override {
    Count saved = count_;
    if (count_) count_ = fold(BinOp::Mul, count_, trip_count(f));
    visit(f.body);
    count_ = saved;
  }
  void visit_if(const IfStmt& s, const StmtNode&) override {
    Count saved = count_;
    count_ = nullptr;
    visit(s.then_body);
    if (s.else_body) visit(s.else_body);
    count_ = saved;
  }
  void visit_scope(const ScopeStmt& s, const StmtNode& n) override {
    scope_ = s.kind;
    last_scope[static_cast<int>(s.kind)] = &n;
    visit(s.body);
    scope_.reset();
  }
  void visit_set_cross(const SetCrossFlagStmt& s, const StmtNode&) override {
    if (s.mode == 2) use(true, s.flag_id);
    if (auto id = as_const(s.flag_id); id && s.mode == kSyncAllMode) sync_all_ids.insert(*id);
  }
  void visit_wait_cross(const WaitCrossFlagStmt& s, const StmtNode&) override {
    use(false, s.flag_id);
  }

 private:
  std::optional<CoreKind> scope_;
  Count count_ = make_int(1);

  void use(bool set, const Expr& id) {
    if (!scope_) return;
    std::array<int64_t, 2> per_aiv{};
    if (auto c = as_const(id)) {
      per_aiv = {*c, *c};
    } else if (auto c0 = const_diff(make_vid(), id); c0 && *scope_ == CoreKind::V) {
      per_aiv = {*c0, *c0 + 1};  // `c + vid`: one flag per AIV
    } else {
      return;
    }
    for (int aiv = 0; aiv < 2; ++aiv) {
      Key key{*scope_, set, per_aiv[aiv], aiv};
      auto [it, fresh] = sums.try_emplace(key, make_int(0));
      if (fresh) order.push_back(key);
      it->second = it->second && count_ ? fold(BinOp::Add, it->second, count_) : nullptr;
    }
  }
};

/// The waits to append, by the core kind that waits.
std::map<CoreKind, std::vector<Drain>> drains_of(const Counter& c) {
  std::map<CoreKind, std::vector<Drain>> out;
  for (const Key& key : c.order) {
    auto [scope, set, fid, aiv] = key;
    const Count& total = c.sums.at(key);
    // A Vector set is both AIVs': counted once, on AIV 0's key.
    if (!set || !total || (scope == CoreKind::V && aiv == 1) || c.sync_all_ids.count(fid)) continue;
    const CoreKind waiter = other(scope);
    auto w = c.sums.find(Key{waiter, false, fid, aiv});
    Count waits = w != c.sums.end() ? w->second : make_int(0);
    if (!waits || !c.last_scope[static_cast<int>(waiter)]) continue;
    auto excess = const_diff(waits, total);
    // The Cube is one core: its waits need no guard.
    if (excess && *excess > 0)
      out[waiter].push_back({fid, *excess, waiter == CoreKind::C ? -1 : aiv});
  }
  for (auto& [kind, items] : out) {  // the same waits on both AIVs: written once
    std::vector<Drain> both, rest;
    for (const auto& d : items) {
      bool pair = false;
      for (const auto& e : items)
        pair = pair || (e.flag_id == d.flag_id && e.count == d.count && d.aiv != e.aiv &&
                        d.aiv >= 0 && e.aiv >= 0);
      if (!pair)
        rest.push_back(d);
      else if (d.aiv == 0)
        both.push_back({d.flag_id, d.count, -1});
    }
    both.insert(both.end(), rest.begin(), rest.end());
    items = std::move(both);
  }
  return out;
}

/// Appends each core kind's waits at the end of its last scope.
class Append : public StmtMutator {
 public:
  Append(const Counter& c, const std::map<CoreKind, std::vector<Drain>>& d) : c_(c), d_(d) {}

  Stmt mutate_scope(const ScopeStmt& s, const Stmt& self) override {
    auto it = d_.find(s.kind);
    if (it == d_.end() || c_.last_scope[static_cast<int>(s.kind)] != self.get()) return self;
    std::vector<Stmt> body;
    if (const auto* seq = std::get_if<SeqStmt>(&s.body->node))
      body = seq->body;
    else
      body.push_back(s.body);
    for (const auto& d : it->second) {
      std::vector<Stmt> waits;
      for (int64_t i = 0; i < d.count; ++i)
        waits.push_back(make_stmt(WaitCrossFlagStmt{make_int(d.flag_id)}, self->loc));
      if (d.aiv < 0) {
        body.insert(body.end(), waits.begin(), waits.end());
        continue;
      }
      body.push_back(make_stmt(IfStmt{make_binary(BinOp::Eq, make_vid(), make_int(d.aiv)),
                                      make_stmt(SeqStmt{std::move(waits)}, self->loc), nullptr},
                               self->loc));
    }
    return make_stmt(ScopeStmt{s.kind, make_stmt(SeqStmt{std::move(body)}, s.body->loc)},
                     self->loc);
  }

 private:
  const Counter& c_;
  const std::map<CoreKind, std::vector<Drain>>& d_;
};

}  // namespace

Program cross_drains(const Program& p, const ChipConfig&, const PassOptions&) {
  Counter c;
  c.visit(p.body);
  auto drains = drains_of(c);
  if (drains.empty()) return p;
  Program out = p;
  out.body = Append(c, drains).mutate(p.body);
  return out;
}

}  // namespace tilepipe::passes

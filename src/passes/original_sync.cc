// The original compiler's full barriers (original_sync.h).
#include "passes/original_sync.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "passes/dependence.h"
#include "passes/rewrite.h"
#include "tilepipe/passes.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

std::vector<std::vector<PipePair>> barrier_spellings(CoreKind core) {
  using P = Pipe;
  if (core == CoreKind::V) return {{{P::MTE2, P::S}, {P::V, P::S}, {P::MTE3, P::S}}};
  const std::vector<PipePair> back = {{P::M, P::MTE2}, {P::M, P::MTE1}, {P::M, P::FIX}};
  std::vector<std::vector<PipePair>> out = {{{P::MTE2, P::M}, {P::MTE1, P::M}, {P::FIX, P::M}},
                                            {{P::MTE2, P::M}, {P::FIX, P::MTE1}, {P::MTE1, P::M}}};
  for (auto& s : out) s.insert(s.end(), back.begin(), back.end());
  return out;
}

namespace {

/// The printed tensor-element reads of a leaf's addresses and scalars, outermost first.
class LoadReads : public RegionRewriter {
 public:
  std::set<std::string> of(const Stmt& leaf) {
    reads_.clear();
    mutate_leaf(leaf);
    return std::move(reads_);
  }
  Expr load(const Load& l, std::vector<Expr> index, const Loc& loc) override {
    Expr e = make_load(l.buffer, std::move(index), loc);
    reads_.insert(print(e));
    return e;
  }

 private:
  std::set<std::string> reads_;
};

/// Is the statement one auto_sync generated: flags only (its guards `if (k >= 1)` hold
/// nothing else)?
bool flags_only(const Stmt& s) {
  if (!s) return true;
  if (auto* q = std::get_if<SeqStmt>(&s->node)) {
    for (const auto& c : q->body)
      if (!flags_only(c)) return false;
    return true;
  }
  if (auto* i = std::get_if<IfStmt>(&s->node))
    return flags_only(i->then_body) && flags_only(i->else_body);
  return std::holds_alternative<SetFlagStmt>(s->node) ||
         std::holds_alternative<WaitFlagStmt>(s->node);
}

/// The pairs of a barrier with the event id each uses.
using BarrierFlags = std::vector<std::pair<PipePair, int64_t>>;

class Barriers : public StmtMutator {
 public:
  explicit Barriers(BarrierFlags flags) : flags_(std::move(flags)) {}

  Stmt mutate_seq(const SeqStmt& s, const Stmt& self) override {
    SeqStmt out;
    std::set<std::string> previous;
    for (const auto& c : s.body) {
      if (bookkeeping(c)) {
        out.body.push_back(c);
        continue;
      }
      if (is_leaf(c)) {
        std::set<std::string> reads = reads_.of(c);
        if ((!reads.empty() && reads != previous) || scalar_element_barrier(*c))
          emit(out.body, c->loc);
        previous = std::move(reads);
        out.body.push_back(c);
        continue;
      }
      previous.clear();
      Stmt m = mutate(c);
      if (auto* q = std::get_if<SeqStmt>(&m->node); q && m != c)
        out.body.insert(out.body.end(), q->body.begin(), q->body.end());
      else
        out.body.push_back(std::move(m));
    }
    return make_stmt(std::move(out), self->loc);
  }

  Stmt mutate_if(const IfStmt& s, const Stmt& self) override {
    if (flags_only(self)) return self;
    SeqStmt out;
    emit(out.body, self->loc);
    out.body.push_back(StmtMutator::mutate_if(s, self));
    emit(out.body, self->loc);
    return make_stmt(std::move(out), self->loc);
  }

  Stmt mutate_leaf(const Stmt& self) override {
    if (reads_.of(self).empty() && !scalar_element_barrier(*self)) return self;
    SeqStmt out;
    emit(out.body, self->loc);
    out.body.push_back(self);
    return make_stmt(std::move(out), self->loc);
  }

 private:
  /// Flags and allocations: neither bind nor read an element, so a shared barrier spans them.
  static bool bookkeeping(const Stmt& s) {
    return std::holds_alternative<SetFlagStmt>(s->node) ||
           std::holds_alternative<WaitFlagStmt>(s->node) ||
           std::holds_alternative<AllocStmt>(s->node);
  }
  static bool is_leaf(const Stmt& s) {
    return !std::holds_alternative<SeqStmt>(s->node) && !std::holds_alternative<ForStmt>(s->node) &&
           !std::holds_alternative<IfStmt>(s->node) && !std::holds_alternative<ScopeStmt>(s->node);
  }

  void emit(std::vector<Stmt>& out, const Loc& loc) const {
    for (const auto& [pair, id] : flags_) {
      out.push_back(make_stmt(SetFlagStmt{pair.first, pair.second, make_int(id, loc)}, loc));
      out.push_back(make_stmt(WaitFlagStmt{pair.first, pair.second, make_int(id, loc)}, loc));
    }
  }

  BarrierFlags flags_;
  LoadReads reads_;
};

}  // namespace

bool scalar_element_barrier(const ir::StmtNode& s) {
  auto* t = std::get_if<TileOpStmt>(&s.node);
  if (!t || !t->scalar || !std::holds_alternative<Region>(t->scalar->value)) return false;
  switch (t->op) {
    case TileOpKind::Add:
    case TileOpKind::Sub:
    case TileOpKind::Mul:
    case TileOpKind::Div:
    case TileOpKind::Max:
    case TileOpKind::Min:
    case TileOpKind::SelectOp:
    case TileOpKind::Compare:
      return true;
    default:
      return false;
  }
}

bool EventIdUse::holds(PipePair pair, int64_t lo, int64_t n) const {
  if (opaque.count(pair)) return true;
  auto it = ids.find(pair);
  if (it == ids.end()) return false;
  auto jt = it->second.lower_bound(lo);
  return jt != it->second.end() && *jt < lo + n;
}

EventIdUse event_ids_used(const Stmt& body) {
  struct Used : StmtVisitor {
    EventIdUse use;
    void visit_set_flag(const SetFlagStmt& s, const StmtNode&) override {
      note(s.src, s.dst, s.event_id);
    }
    void visit_wait_flag(const WaitFlagStmt& s, const StmtNode&) override {
      note(s.src, s.dst, s.event_id);
    }
    void note(Pipe a, Pipe b, const Expr& id) {
      Range r = eval_range(id, {});
      if (!r.known) {
        use.opaque.insert({a, b});
        return;
      }
      for (int64_t v = r.lo; v <= r.hi; ++v) use.ids[{a, b}].insert(v);
    }
  } v;
  v.visit(body);
  return std::move(v.use);
}

Stmt original_barriers(const Stmt& body, CoreKind core, const ChipConfig& chip,
                       const Loc& scope_loc) {
  const EventIdUse used = event_ids_used(body);
  std::vector<std::string> full;
  for (const auto& spelling : barrier_spellings(core)) {
    BarrierFlags flags;
    for (PipePair pair : spelling) {
      int64_t id = chip.event_ids - 1;
      while (id >= 0 && used.holds(pair, id, 1)) --id;
      if (id < 0) {  // every id taken, or ids of the pair it cannot bound
        full.push_back(fmt::format("{}->{}", to_string(pair.first), to_string(pair.second)));
        break;
      }
      flags.push_back({pair, id});
    }
    if (flags.size() == spelling.size()) return Barriers(std::move(flags)).mutate(body);
  }
  throw UserError(Diagnostic{
      scope_loc,
      "auto-sync-ids",
      fmt::format("the original compiler's full barriers need a free event id on each pipe pair "
                  "of a barrier; automatic sync used all {} ids (or ids it cannot bound) of {}",
                  chip.event_ids, fmt::join(full, " and ")),
      {},
      "lower max_rotation, or compile with tilepipe's own lowering (no original barriers)"});
}

}  // namespace tilepipe::passes

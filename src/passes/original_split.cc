// The original lowering's Cube/Vector split of unscoped code (original_split.h).
#include "passes/original_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "passes/dependence.h"
#include "passes/rewrite.h"
#include "tilepipe/ir_range.h"
#include "tilepipe/ir_vars.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

[[noreturn]] void fail(const Loc& loc, std::string msg, std::string hint) {
  throw UserError(Diagnostic{loc, "original-split", std::move(msg), {}, std::move(hint)});
}

/// A source statement: its location, or a branch's else part (the statements under it).
using Key = std::tuple<std::string, int, int, bool>;
Key key_of(const Loc& l, bool else_part = false) {
  return {l.file, l.line, l.column, else_part};
}
/// Is this SeqStmt a block (one source statement) rather than the body of the loop, branch
/// or scope `frame` (whose location it carries)?
bool is_block(const Stmt& s, const Loc* frame) {
  return std::holds_alternative<SeqStmt>(s->node) && !(frame && s->loc == *frame);
}

/// The core kind a leaf runs on (a GM -> GM copy: the Vector core's DMA); none for
/// allocations (the other leaves without one are bindings, which both cores get).
std::optional<CoreKind> core_of(const Stmt& s) {
  if (std::holds_alternative<AllocStmt>(s->node)) return std::nullopt;
  if (auto* c = std::get_if<CopyStmt>(&s->node);
      c && c->src.buffer->scope == Scope::GM && c->dst.buffer->scope == Scope::GM)
    return CoreKind::V;  // MTE2 / MTE3
  return leaf_core(s);
}

bool is_flag(const Stmt& s) {
  return std::holds_alternative<SetFlagStmt>(s->node) ||
         std::holds_alternative<WaitFlagStmt>(s->node) ||
         std::holds_alternative<PipeBarrierStmt>(s->node);
}

/// The core kinds with work in a subtree (inner scopes, bindings and allocations aside).
std::set<CoreKind> kinds(const Stmt& s) {
  return kinds_of(s, [](const Stmt& l) -> std::set<CoreKind> {
    if (std::holds_alternative<ScopeStmt>(l->node) || std::holds_alternative<LetStmt>(l->node))
      return {};
    auto k = core_of(l);
    if (!k) return {};
    return {*k};
  });
}

/// Each core's own registers: the bindings of a scope after the first get fresh variables
/// (the front end's per-core lowering bound them once per core), so no variable is bound
/// in two scopes.
struct FreshLets : RegionRewriter {
  std::map<int, Var> fresh;
  Expr var(const Expr& e, const VarRef& v) override {
    auto it = fresh.find(v.var->id);
    return it == fresh.end() ? e : make_var_ref(it->second, e->loc);
  }
  Stmt mutate_leaf(const Stmt& s) override {
    Stmt out = RegionRewriter::mutate_leaf(s);
    auto* l = std::get_if<LetStmt>(&out->node);
    if (!l) return out;
    auto it = fresh.try_emplace(l->var->id, make_var(l->var->name)).first;
    return make_stmt(LetStmt{it->second, l->value}, out->loc);
  }
};

/// One copy's access to a GM tensor: its core, whether it writes, the statements around it.
struct Access {
  CoreKind core;
  bool write;
  std::vector<Key> path;
};

/// The part of an on-chip buffer an op touches: [lo, hi) per dimension; nullopt when
/// unknown (a write at a start that is not a constant, a read whose start is unbounded).
using Box = std::optional<std::vector<std::pair<int64_t, int64_t>>>;

bool box_within(const Box& inner, const Box& outer) {
  if (!inner || !outer) return false;
  for (size_t d = 0; d < std::min(inner->size(), outer->size()); ++d)
    if ((*outer)[d].first > (*inner)[d].first || (*inner)[d].second > (*outer)[d].second)
      return false;
  return true;
}

/// One op's access to an on-chip buffer: what it reads and writes of it, where it stands.
struct OnChip {
  std::vector<Box> reads, writes;
  std::vector<Key> path;
};

/// A cross-core pipeline: the loop's stages (a core and its statements, in order), the
/// buffers with a version per stage, the hand-off tensors with a slot per iteration.
struct Plan {
  int64_t stages = 0;
  std::vector<std::pair<CoreKind, std::set<Key>>> cut;
  std::set<std::string> buffers, workspaces;
};

/// The shape holding `n` versions of `shape`: [n, *shape], or from rank 4 on the versions
/// folded into dimension 0 (the original's 4-D FA workspaces; the IR, and so the cycles, of
/// the kernels written when the IR took rank 4 at most).
constexpr size_t kSlotFoldRank = 4;
std::vector<int64_t> slotted_shape(int64_t n, std::vector<int64_t> shape) {
  if (shape.size() >= kSlotFoldRank) {
    shape[0] *= n;
  } else {
    shape.insert(shape.begin(), n);
  }
  return shape;
}

/// A stage's iteration: the loop variable as `begin + batch * S + j`, each versioned
/// buffer and slotted tensor at slot j.
struct StageRewrite : Substitute {
  StageRewrite(int var, Expr value, Expr slot, const std::map<int, Buffer>* slots)
      : Substitute({{var, std::move(value)}}), slot(std::move(slot)), slots(slots) {}
  Expr slot;
  const std::map<int, Buffer>* slots;  // buffer id -> its versions
  /// The index of the version: a leading dimension, or folded into dimension 0.
  void slotted(const Buffer& from, std::vector<Expr>& start) const {
    if (from->shape.size() >= kSlotFoldRank)
      start[0] = fold(BinOp::Add, fold(BinOp::Mul, slot, make_int(from->shape[0])), start[0]);
    else
      start.insert(start.begin(), slot);
  }
  Expr load(const Load& l, std::vector<Expr> index, const Loc& loc) override {
    auto it = slots->find(l.buffer->id);
    if (it == slots->end()) return make_load(l.buffer, std::move(index), loc);
    slotted(l.buffer, index);
    return make_load(it->second, std::move(index), loc);
  }
  Region region(Region r) override {
    auto it = slots->find(r.buffer->id);
    if (it == slots->end()) return r;
    if (r.buffer->shape.size() < kSlotFoldRank) r.extent.insert(r.extent.begin(), 1);
    slotted(r.buffer, r.start);
    r.buffer = it->second;
    return r;
  }
};

/// The statements of a loop body (a body of one statement is that statement).
std::vector<Stmt> body_statements(const ForStmt& f, const Loc& loc) {
  if (auto* q = std::get_if<SeqStmt>(&f.body->node); q && f.body->loc == loc) return q->body;
  return {f.body};
}

class Split {
 public:
  Split(const Program& p, const ChipConfig& chip)
      : p_(p), chip_(chip), reassigned_(let_assignments(p.body).vars) {
    vars_[kCidVar] = Range::of(0, p.block_num - 1);
    vars_[kVidVar] = Range::of(0, 1);
  }

  /// Reads the body; false when it is not this pass's (scoped, or with crossing copies).
  bool analyse() {
    walk(p_.body, &p_.loc);
    return !scoped_ && !crossing_copy_ && !present_.empty();
  }

  Program run() {
    plan_handoffs();
    Program out = p_;
    plan_pipelines(out);
    std::vector<Stmt> scopes;
    const Loc& loc = p_.body->loc;
    for (CoreKind k : {CoreKind::C, CoreKind::V}) {
      if (!present_.count(k)) continue;
      std::vector<Stmt> body;
      for (const auto& [name, x] : crossings_)  // the consumer grants the first fills
        if (x.producer != k)
          for (int64_t n = 0; n < x.credits; ++n)
            body.push_back(make_stmt(SetCrossFlagStmt{Pipe::MTE2, make_int(x.free), 2}, loc));
      emit(p_.body, k, &p_.loc, body);
      for (const auto& [name, x] : crossings_)  // the producer takes the last releases back
        if (x.producer == k)
          for (int64_t n = 0; n < x.credits; ++n)
            body.push_back(make_stmt(WaitCrossFlagStmt{make_int(x.free)}, loc));
      Stmt b = drop_dead_lets(seq(std::move(body), loc));
      if (b && !scopes.empty()) b = FreshLets().mutate(b);
      scopes.push_back(make_stmt(ScopeStmt{k, b ? b : make_stmt(SeqStmt{}, loc)}, loc));
    }
    out.body = seq(std::move(scopes), p_.loc);
    out.addresses.insert(pins_.begin(), pins_.end());
    return out;
  }

 private:
  struct Crossing {
    CoreKind producer;
    int ready, free;
    int64_t credits = 1;  // slots of the tensor (a cross-core pipeline's: one per stage)
  };

  void walk(const Stmt& s, const Loc* frame) {
    if (!s) return;
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, SeqStmt>) {
            bool block = is_block(s, frame);
            if (block) {
              path_.push_back(key_of(s->loc));
              blocks_.emplace(path_.back(), s.get());
              block_nodes_.push_back(s.get());
            }
            for (size_t i = 0; i < n.body.size(); ++i) {
              const Stmt& c = n.body[i];
              // A leaf of the body itself (a binding's statement is no block) is a statement.
              bool own = !block && !std::holds_alternative<SeqStmt>(c->node);
              // The pad of a GM tile copied into the front of a bigger UB tile is part of
              // the copy (the front end's T.copy), not an op of its own.
              bool pad = i + 1 < n.body.size() && pad_fill(*c, *n.body[i + 1]);
              if (own) path_.push_back(key_of(c->loc));
              skip_onchip_ += pad;
              walk(c, nullptr);
              skip_onchip_ -= pad;
              if (own) path_.pop_back();
            }
            if (block) {
              path_.pop_back();
              block_nodes_.pop_back();
            }
          } else if constexpr (std::is_same_v<T, ForStmt>) {
            // A Pipelined loop that is a statement of its own may become a cross-core
            // pipeline.
            if (n.kind == ForKind::Pipelined && n.num_stages > 1 && !block_nodes_.empty() &&
                std::get<SeqStmt>(block_nodes_.back()->node).body.size() == 1)
              pipelined_.push_back({s.get(), path_.back()});
            record_loads({n.begin, n.end});
            vars_[n.var->id] = loop_var_range(n, vars_);
            walk(n.body, &s->loc);
            vars_.erase(n.var->id);
          } else if constexpr (std::is_same_v<T, IfStmt>) {
            record_loads({n.cond});
            // `C = A x B` on the first iteration, `C += A x B` on the others: one matmul
            // that reads C, as the front end's T.gemm is one op.
            const GemmStmt *a = single_gemm(n.then_body), *b = single_gemm(n.else_body);
            bool matmul = a && b && a->c.buffer == b->c.buffer && a->init != b->init;
            if (matmul)
              record_onchip(make_stmt(GemmStmt{b->a, b->b, b->c, false, false, false}, s->loc));
            skip_onchip_ += matmul;
            walk(n.then_body, &s->loc);
            path_.push_back(key_of(s->loc, true));
            walk(n.else_body, &s->loc);
            path_.pop_back();
            skip_onchip_ -= matmul;
          } else if constexpr (std::is_same_v<T, ScopeStmt>) {
            if (path_.empty()) scoped_ = true;  // expert code: scopes at kernel level
          } else if constexpr (std::is_same_v<T, SetCrossFlagStmt> ||
                               std::is_same_v<T, WaitCrossFlagStmt>) {
            fail(s->loc, "a cross-core flag in unscoped code: the split places the hand-offs",
                 "write the kernel with scopes (T.Scope) to place cross-core flags by hand");
          } else {
            leaf(s);
          }
        },
        s->node);
  }

  void leaf(const Stmt& s) {
    if (!skip_onchip_) record_onchip(s);
    auto k = core_of(s);
    if (!k || std::holds_alternative<LetStmt>(s->node)) return;
    present_.insert(*k);
    if (is_flag(s)) hand_synced_.insert(*k);
    auto* c = std::get_if<CopyStmt>(&s->node);
    if (!c) return;
    if (crosses_cores(c->src.buffer->scope, c->dst.buffer->scope)) crossing_copy_ = true;
    for (const auto* r : {&c->src, &c->dst})
      if (r->buffer->scope == Scope::GM) {
        bool w = r == &c->dst;
        gm_[r->buffer->name].push_back({*k, w, path_});
        gm_buffer_.emplace(r->buffer->name, r->buffer);
      }
  }

  Box box(const Region& r, bool write) const {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (size_t d = 0; d < r.start.size(); ++d) {
      if (auto c = as_const(r.start[d])) {
        out.emplace_back(*c, *c + r.extent[d]);
        continue;
      }
      if (write) return std::nullopt;           // a write is exact or unknown
      Range x = eval_range(r.start[d], vars_);  // a read covers every start it can take
      if (!x.known) return std::nullopt;
      out.emplace_back(x.lo, x.hi + r.extent[d]);
    }
    return out;
  }

  /// What an op reads and writes of on-chip buffers, for the cross-core pipeline's versions.
  void record_onchip(const Stmt& s) {
    std::vector<const Region*> rd, wr;
    if (auto* c = std::get_if<CopyStmt>(&s->node)) {
      rd = {&c->src};
      if (c->atomic_add) rd.push_back(&c->dst);
      wr = {&c->dst};
    } else if (auto* g = std::get_if<GemmStmt>(&s->node)) {
      rd = {&g->a, &g->b};
      if (!g->init) rd.push_back(&g->c);
      wr = {&g->c};
    } else if (auto* t = std::get_if<TileOpStmt>(&s->node)) {
      for (const auto& r : t->srcs) rd.push_back(&r);
      if (t->op == TileOpKind::Axpy) rd.push_back(&t->dst);
      if (t->scalar)
        if (auto* r = std::get_if<Region>(&t->scalar->value)) rd.push_back(r);
      wr = {&t->dst};
    } else if (auto* r = std::get_if<ReduceStmt>(&s->node)) {
      rd = {&r->src};
      if (!r->clear) rd.push_back(&r->dst);
      wr = {&r->dst};
    }
    std::map<std::string, OnChip> op;
    auto loads = [&](const Expr& e) { note_loads(e, op); };
    for (const Region* r : rd)
      for (const auto& e : r->start) loads(e);
    for (const Region* r : wr)
      for (const auto& e : r->start) loads(e);
    if (auto* l = std::get_if<LetStmt>(&s->node)) {
      // A name bound once to an element is read where it is used (the front end's probe
      // substitutes such a binding); a register stored again is read at each store.
      if (!reassigned_.count(l->var->id)) return void(bound_.emplace(l->var->id, l->value));
      loads(l->value);
    }
    if (auto* t = std::get_if<TileOpStmt>(&s->node); t && t->scalar)
      if (auto* e = std::get_if<Expr>(&t->scalar->value)) loads(*e);
    for (bool w : {false, true})
      for (const Region* r : w ? wr : rd) {
        if (r->buffer->scope == Scope::GM) continue;
        (w ? op[r->buffer->name].writes : op[r->buffer->name].reads).push_back(box(*r, w));
      }
    commit(op);
  }

  /// Elements of on-chip buffers the scalar unit reads in `e` (an index, a scalar operand,
  /// a binding's value, a loop bound, a condition): reads of one element each.
  void note_loads(const Expr& e, std::map<std::string, OnChip>& op) const {
    walk_expr(e, [&](const ExprNode& n) {
      if (auto* v = std::get_if<VarRef>(&n.node))
        if (auto it = bound_.find(v->var->id); it != bound_.end()) note_loads(it->second, op);
      auto* l = std::get_if<Load>(&n.node);
      if (!l || l->buffer->scope == Scope::GM) return;
      Region r{l->buffer, l->index, std::vector<int64_t>(l->index.size(), 1)};
      op[l->buffer->name].reads.push_back(box(r, false));
    });
  }
  void record_loads(std::initializer_list<Expr> es) {
    std::map<std::string, OnChip> op;
    for (const auto& e : es) note_loads(e, op);
    commit(op);
  }
  void commit(std::map<std::string, OnChip>& op) {
    for (auto& [name, a] : op) {
      a.path = path_;
      onchip_[name].push_back(std::move(a));
    }
  }
  static bool pad_fill(const StmtNode& fill, const StmtNode& next) {
    auto* t = std::get_if<TileOpStmt>(&fill.node);
    auto* c = std::get_if<CopyStmt>(&next.node);
    return t && c && t->op == TileOpKind::Fill && c->src.buffer->scope == Scope::GM &&
           c->dst.buffer == t->dst.buffer && fill.loc == next.loc;
  }
  static const GemmStmt* single_gemm(const Stmt& s) {
    if (!s) return nullptr;
    if (auto* q = std::get_if<SeqStmt>(&s->node))
      return q->body.size() == 1 ? single_gemm(q->body[0]) : nullptr;
    return std::get_if<GemmStmt>(&s->node);
  }

  /// The cross-core pipeline of each mixed Pipelined loop (the original's CrossCorePipeline),
  /// or none: the loop then runs serially on each core, handed over per iteration.
  void plan_pipelines(Program& out) {
    std::stable_sort(pipelined_.begin(), pipelined_.end(), [](const auto& a, const auto& b) {
      return a.first->loc.line < b.first->loc.line;
    });
    std::map<Key, std::optional<Plan>> by_statement;  // a loop run twice is one source loop
    for (const auto& [loop, key] : pipelined_) {
      if (auto it = by_statement.find(key); it != by_statement.end()) {
        if (it->second) plans_[loop] = *it->second;
        continue;
      }
      auto plan = by_statement[key] = plan_pipeline(*loop, key);
      if (!plan) continue;
      for (const auto& name : plan->workspaces) {
        crossings_[name].credits = plan->stages;
        const Buffer& ws = gm_buffer_.at(name);
        Buffer b = make_buffer(name + "_slots", Scope::GM, ws->dtype,
                               slotted_shape(plan->stages, ws->shape), TensorRole::Workspace,
                               p_.body->loc);
        out.workspaces.push_back(b);
        slots_[ws->id] = b;
      }
      for (const auto& name : plan->buffers) versioned_[name] = plan->stages;
      plans_[loop] = std::move(*plan);
    }
  }

  /// `lk`: the loop's statement.
  std::optional<Plan> plan_pipeline(const StmtNode& loop, const Key& lk) {
    const auto& f = std::get<ForStmt>(loop.node);
    Plan plan;
    plan.stages = f.num_stages;
    std::map<Key, size_t> stage_of;
    for (const Stmt& st : body_statements(f, loop.loc)) {
      auto ks = kinds(st);
      if (ks.size() > 1) return std::nullopt;  // a statement mixes Cube and Vector code
      if (ks.empty()) continue;                // plain: runs in every stage
      if (!std::holds_alternative<SeqStmt>(st->node)) return std::nullopt;  // not a statement
      if (plan.cut.empty() || plan.cut.back().first != *ks.begin())
        plan.cut.push_back({*ks.begin(), {}});
      plan.cut.back().second.insert(key_of(st->loc));
      stage_of[key_of(st->loc)] = plan.cut.size() - 1;
    }
    std::set<CoreKind> cores;
    for (const auto& c : plan.cut) cores.insert(c.first);
    if (cores.size() != 2) return std::nullopt;
    // The body statement a path goes through (none: outside the loop).
    auto top = [&](const std::vector<Key>& path) -> std::optional<Key> {
      auto it = std::find(path.begin(), path.end(), lk);
      if (it == path.end() || it + 1 == path.end()) return std::nullopt;
      return *(it + 1);
    };
    // Every read in the body lies in a box written before it in the same iteration (by the
    // same stage if per_stage): no value carried between iterations (or stages).
    auto made_before_read = [&](const std::vector<OnChip>& accs, bool per_stage) {
      std::map<std::optional<size_t>, std::vector<Box>> written;
      for (const auto& a : accs) {
        auto t = top(a.path);
        if (!t) continue;
        std::optional<size_t> group = 0;
        if (per_stage) {
          auto it = stage_of.find(*t);
          group = it == stage_of.end() ? std::nullopt : std::optional<size_t>(it->second);
        }
        auto& done = written[group];
        for (const auto& r : a.reads)
          if (std::none_of(done.begin(), done.end(),
                           [&](const Box& w) { return box_within(r, w); }))
            return false;
        for (const auto& w : a.writes)
          if (w) done.push_back(w);
      }
      return true;
    };
    for (const auto& [name, accs] : onchip_) {
      std::set<size_t> used;
      bool outside = false, written = false;
      for (const auto& a : accs) {
        auto t = top(a.path);
        if (!t) {
          outside = true;
          continue;
        }
        if (auto it = stage_of.find(*t); it != stage_of.end()) used.insert(it->second);
        written = written || !a.writes.empty();
      }
      if (used.size() < 2 || !written) continue;  // one stage's, or read-only: one copy
      // Scratch of each stage (the Cube's L0 tiles reused by two stages): one copy serves.
      if (made_before_read(accs, true)) continue;
      if (outside || !made_before_read(accs, false)) return std::nullopt;
      plan.buffers.insert(name);
    }
    for (const auto& [name, x] : crossings_) {
      size_t in = 0;
      const auto& acc = gm_.at(name);
      for (const auto& a : acc) in += top(a.path) ? 1 : 0;
      if (in == 0) continue;
      if (in != acc.size()) return std::nullopt;  // used inside and outside the loop
      plan.workspaces.insert(name);
    }
    return plan;
  }

  /// This core's part of a cross-core pipeline: batches of S iterations; per batch each of
  /// the core's stages is a loop over the batch (its iteration `begin + batch * S + j`).
  void emit_pipeline(const ForStmt& f, const StmtNode& loop, const Plan& plan, CoreKind k,
                     std::vector<Stmt>& out) {
    const Loc& loc = loop.loc;
    if (f.step != 1)
      fail(loc, "a cross-core T.Pipelined loop needs step 1",
           "loop with step 1 and scale the index in the body");
    const Expr S = make_int(plan.stages);
    const Expr trip = fold(BinOp::Sub, f.end, f.begin);
    const Expr batches =
        fold(BinOp::Div, fold(BinOp::Sub, fold(BinOp::Add, trip, S), make_int(1)), S);
    ForStmt batch;
    batch.var = make_var(f.var->name + "_batch");
    batch.begin = make_int(0);
    batch.end = batches;
    const Expr bt = make_var_ref(batch.var);
    std::vector<Stmt> stages;
    const auto body = body_statements(f, loc);
    for (const auto& [core, keys] : plan.cut) {
      if (core != k) continue;
      ForStmt stage;
      stage.var = make_var(f.var->name + "_stage");
      stage.begin = make_int(0);
      stage.end = fold(BinOp::Min, S, fold(BinOp::Sub, trip, fold(BinOp::Mul, bt, S)));
      std::vector<Stmt> part;
      for (const Stmt& st : body)
        if (kinds(st).empty() || keys.count(key_of(st->loc))) emit(st, k, nullptr, part);
      // The author's flags order one iteration; the same stage of consecutive iterations
      // was apart in the serial order: a barrier orders them, as its hand-offs did.
      if (hand_synced_.count(k)) {
        auto flags = barrier_all(k, loc);
        part.insert(part.end(), flags.begin(), flags.end());
      }
      Expr slot = make_var_ref(stage.var);
      StageRewrite rw(f.var->id,
                      fold(BinOp::Add, fold(BinOp::Add, f.begin, fold(BinOp::Mul, bt, S)), slot),
                      slot, &slots_);
      FreshLets fresh;  // each stage binds the body's names anew, as each ran the body
      for (auto& st : part) st = fresh.mutate(rw.mutate(st));
      stage.body = seq(std::move(part), loc);
      stages.push_back(make_stmt(std::move(stage), loc));
    }
    batch.body = seq(std::move(stages), loc);
    out.push_back(make_stmt(std::move(batch), loc));
  }

  /// The trip count of the device loop a block is (the loop its only statement is).
  Expr loop_trips(const Key& k) const {
    auto it = blocks_.find(k);
    if (it == blocks_.end()) return nullptr;
    const auto& body = std::get<SeqStmt>(it->second->node).body;
    if (body.size() != 1) return nullptr;
    auto* f = std::get_if<ForStmt>(&body.front()->node);
    if (!f || f->kind == ForKind::Parallel) return nullptr;
    return trip_count(*f);
  }

  void plan_handoffs() {
    int ids = 0;
    for (const auto& [name, acc] : gm_) {
      std::set<CoreKind> w, r;
      for (const auto& a : acc) (a.write ? w : r).insert(a.core);
      for (CoreKind p : w) {
        if (r.empty() || (r.size() == 1 && r.count(p))) continue;  // not read by the other
        if (w.size() > 1)
          fail(first_write(name),
               fmt::format("GM tensor '{}' is written by both the Cube and "
                           "the Vector code and read across them",
                           name),
               "give each direction its own workspace");
        crossings_[name] = {p, ids, ids + 1};
        place(name, p, ids, ids + 1);
        ids += 2;
      }
    }
    if (ids > chip_.cross_flag_ids)
      fail(p_.body->loc,
           fmt::format("{} GM tensors cross between Cube and Vector; the automatic split has "
                       "{} cross-core flag ids ({} tensors)",
                       ids / 2, chip_.cross_flag_ids, chip_.cross_flag_ids / 2),
           "hand fewer tensors between the cores (merge them into one workspace)");
  }

  Loc first_write(const std::string& name) const {
    for (const auto& a : gm_.at(name))
      if (a.write && !a.path.empty()) return loc_of(a.path.back());
    return p_.loc;
  }
  static Loc loc_of(const Key& k) {
    Loc l;
    l.file = std::get<0>(k);
    l.line = std::get<1>(k);
    l.column = std::get<2>(k);
    return l;
  }

  /// Do these blocks all run device loops of the same trip count?
  bool same_trips(const std::set<Key>& heads) const {
    Expr first;
    for (const auto& h : heads) {
      Expr t = loop_trips(h);
      if (!t) return false;
      if (!first) {
        first = t;
      } else if (const_diff(first, t) != 0) {
        return false;
      }
    }
    return true;
  }

  void place(const std::string& name, CoreKind producer, int ready, int free) {
    const auto& acc = gm_.at(name);
    size_t common = 0;
    auto deeper = [](const Access& a, size_t d) { return a.path.size() > d + 1; };
    for (;; ++common) {
      bool ok =
          std::all_of(acc.begin(), acc.end(), [&](const Access& a) { return deeper(a, common); });
      if (!ok) break;
      if (!std::all_of(acc.begin(), acc.end(),
                       [&](const Access& a) { return a.path[common] == acc[0].path[common]; }))
        break;
    }
    // Each core's accesses inside one loop of its own at the common level (a Cube loop and
    // a Vector loop over the same iterations, one after the other): the hand-off is per
    // iteration of those loops.
    std::map<CoreKind, size_t> level;
    std::set<Key> heads;
    for (CoreKind k : {CoreKind::C, CoreKind::V}) {
      std::set<Key> mine;
      bool all_deeper = true;
      for (const auto& a : acc)
        if (a.core == k) {
          mine.insert(a.path[common]);
          all_deeper = all_deeper && deeper(a, common);
        }
      heads.insert(mine.begin(), mine.end());
      level[k] = common;
      if (mine.size() == 1 && all_deeper && loop_trips(*mine.begin())) level[k] = common + 1;
    }
    if (level[CoreKind::C] != level[CoreKind::V] ||
        (level[CoreKind::C] > common && !same_trips(heads)))
      level = {{CoreKind::C, common}, {CoreKind::V, common}};
    for (CoreKind k : {CoreKind::C, CoreKind::V}) {
      std::vector<Key> order;
      for (const auto& a : acc)
        if (a.core == k && std::find(order.begin(), order.end(), a.path[level[k]]) == order.end())
          order.push_back(a.path[level[k]]);
      const Key &first = order.front(), &last = order.back();
      for (const Key* at : {&first, &last})
        if (std::get<3>(*at))
          fail(loc_of(*at),
               fmt::format("GM tensor '{}' is handed between the cores in both branches of "
                           "this if",
                           name),
               "hand it over in one branch, or before the if");
      const Loc& loc = loc_of(first);
      auto wait = [&](int id) { return make_stmt(WaitCrossFlagStmt{make_int(id)}, loc); };
      auto set = [&](Pipe pipe, int id) {
        return make_stmt(SetCrossFlagStmt{pipe, make_int(id), 2}, loc);
      };
      if (k == producer) {
        before_[{k, first}].push_back(wait(free));
        after_[{k, last}].push_back(set(k == CoreKind::C ? Pipe::FIX : Pipe::MTE3, ready));
      } else {
        before_[{k, first}].push_back(wait(ready));
        after_[{k, last}].push_back(set(Pipe::MTE2, free));
      }
    }
  }

  /// Appends core k's part of `s` to `out`, blocks flattened into their sequence.
  void emit(const Stmt& s, CoreKind k, const Loc* frame, std::vector<Stmt>& out) {
    if (!s) return;
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, SeqStmt>) {
            std::optional<Key> key;
            if (is_block(s, frame)) key = key_of(s->loc);
            auto anchors = [&](const auto& at, const std::optional<Key>& at_key) {
              if (!at_key) return;
              if (auto it = at.find({k, *at_key}); it != at.end())
                out.insert(out.end(), it->second.begin(), it->second.end());
            };
            anchors(before_, key);
            for (const auto& c : n.body) {
              std::optional<Key> own;
              if (!key && !std::holds_alternative<SeqStmt>(c->node)) own = key_of(c->loc);
              anchors(before_, own);
              emit(c, k, nullptr, out);
              anchors(after_, own);
            }
            anchors(after_, key);
          } else if constexpr (std::is_same_v<T, ForStmt>) {
            if (!kinds(n.body).count(k)) return;
            if (auto it = plans_.find(s.get()); it != plans_.end())
              return emit_pipeline(n, *s, it->second, k, out);
            ForStmt f = n;
            f.body = body_of(n.body, k, s->loc);
            if (f.kind == ForKind::Pipelined && hand_synced_.count(k)) {
              f.kind = ForKind::Serial;  // the author's flags order the serial loop
              f.num_stages = 0;
              f.cross_interval = 1;
            }
            out.push_back(make_stmt(std::move(f), s->loc));
          } else if constexpr (std::is_same_v<T, IfStmt>) {
            if (!kinds(n.then_body).count(k) && !kinds(n.else_body).count(k)) return;
            IfStmt i = n;
            i.then_body = body_of(n.then_body, k, s->loc);
            if (n.else_body) i.else_body = body_of(n.else_body, k, s->loc);
            out.push_back(make_stmt(std::move(i), s->loc));
          } else if constexpr (std::is_same_v<T, ScopeStmt>) {
            if (n.kind != k) return;
            ++own_scope_;  // all of it is the core's (cross-core flags too)
            emit(n.body, k, &s->loc, out);
            --own_scope_;
          } else if constexpr (std::is_same_v<T, LetStmt>) {
            out.push_back(s);
          } else if constexpr (std::is_same_v<T, AllocStmt>) {
            if (owner(n.buffer->scope) != k) return;
            auto v = versioned_.find(n.buffer->name);
            if (v == versioned_.end()) return out.push_back(s);
            const Buffer& b = n.buffer;
            Buffer nb = make_buffer(b->name, b->scope, b->dtype, slotted_shape(v->second, b->shape),
                                    b->role, b->loc);
            slots_[b->id] = nb;
            if (auto pin = p_.addresses.find(b->id); pin != p_.addresses.end())
              pins_[nb->id] = pin->second;
            out.push_back(make_stmt(AllocStmt{nb}, s->loc));
          } else {
            if (own_scope_ || core_of(s) == k) out.push_back(s);
          }
        },
        s->node);
  }

  Stmt body_of(const Stmt& s, CoreKind k, const Loc& frame) {
    std::vector<Stmt> out;
    emit(s, k, &frame, out);
    return seq(std::move(out), frame);
  }

  const Program& p_;
  const ChipConfig& chip_;
  std::vector<Key> path_;
  std::map<Key, const StmtNode*> blocks_;  // each source statement's first block
  std::set<CoreKind> present_, hand_synced_;
  bool scoped_ = false, crossing_copy_ = false;
  std::map<std::string, std::vector<Access>> gm_;
  std::map<std::string, Crossing> crossings_;  // by tensor name: flag ids in name order
  std::map<std::pair<CoreKind, Key>, std::vector<Stmt>> before_, after_;
  VarRanges vars_;  // the loops around the statement being read
  std::map<std::string, Buffer> gm_buffer_;
  std::map<std::string, std::vector<OnChip>> onchip_;  // by buffer name, in program order
  std::vector<const StmtNode*> block_nodes_;           // the blocks around, innermost last
  // Candidate cross-core pipelines: the loop and its statement.
  std::vector<std::pair<const StmtNode*, Key>> pipelined_;
  std::map<const StmtNode*, Plan> plans_;
  std::map<std::string, int64_t> versioned_;  // on-chip buffers with a version per stage
  std::map<int, Buffer> slots_;               // buffer id -> its versions / slots
  std::map<int, int64_t> pins_;               // versions of pinned buffers: the same offset
  int skip_onchip_ = 0;                       // inside a first-iteration matmul's branches
  std::set<int> reassigned_;                  // variables bound more than once (registers)
  std::map<int, Expr> bound_;                 // names bound once: their values
  int own_scope_ = 0;                         // inside a core's own scope
};

}  // namespace

Program original_split(const Program& p, const ChipConfig& chip, const PassOptions&) {
  if (!p.body) return p;
  Split s(p, chip);
  if (!s.analyse()) return p;
  return s.run();
}

}  // namespace tilepipe::passes

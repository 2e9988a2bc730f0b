// The original's software pipeline of Pipelined loops in hand-synced scopes
// (hand_pipeline.h).
#include "passes/hand_pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "passes/dependence.h"
#include "passes/rewrite.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

std::vector<Stmt> items_of(const Stmt& s) {
  if (const auto* seq = std::get_if<SeqStmt>(&s->node)) return seq->body;
  return {s};
}

bool gm_to_ub(const CopyStmt& c) {
  return c.src.buffer->scope == Scope::GM && c.dst.buffer->scope == Scope::UB;
}

/// The UB buffer a block fills when it is nothing but GM -> UB copies into that buffer, and
/// the fill of a padded copy (the planner's copy pattern; the original's L1 is another
/// scope, so a GM -> L1 copy is an ordinary block), else null.
Buffer copy_dst(const Stmt& block) {
  Buffer dst, filled;
  for (const Stmt& s : items_of(block)) {
    const auto* t = std::get_if<TileOpStmt>(&s->node);
    if (t && t->op == TileOpKind::Fill && (!filled || filled == t->dst.buffer)) {
      filled = t->dst.buffer;
      continue;
    }
    const auto* c = std::get_if<CopyStmt>(&s->node);
    if (!c || !gm_to_ub(*c) || (dst && dst != c->dst.buffer)) return nullptr;
    dst = c->dst.buffer;
  }
  return filled && filled != dst ? nullptr : dst;
}

std::set<int> used_by(const Stmt& s) {
  Program one;
  one.body = s;
  return accessed_buffers(one);
}

/// Buffers read by the conditions of the ifs and selects in a subtree (the rewriter only
/// walks: what it builds is dropped).
std::set<int> read_by_conditions(const Stmt& s) {
  struct Loads : RegionRewriter {
    std::set<int>& ids;
    explicit Loads(std::set<int>& i) : ids(i) {}
    Expr load(const Load& l, std::vector<Expr> index, const Loc& loc) override {
      ids.insert(l.buffer->id);
      return RegionRewriter::load(l, std::move(index), loc);
    }
  };
  struct Conditions : RegionRewriter {
    std::set<int> ids;
    void on_select(const Select& sel) override { Loads(ids).expr(sel.cond); }
    Stmt mutate_if(const IfStmt& f, const Stmt& self) override {
      Loads(ids).expr(f.cond);
      return RegionRewriter::mutate_if(f, self);
    }
  } v;
  v.mutate(s);
  return v.ids;
}

struct Block {
  Stmt stmt;
  Buffer dst;  // copy stage: the UB buffer it fills
  std::set<int> uses;
  int last = -1;  // copy stage: the last later block using dst
  int order = -1, stage = -1;
};

/// A buffer with one version per iteration in flight.
struct Ring {
  Buffer inner;
  int64_t versions = 0;
  Expr slot;  // of the block being emitted
};

/// One block at one iteration: the loop variable replaced, ring buffers indexed by the
/// slot, inner loops given fresh variables, guards the values decide folded.
class Instance : public Substitute {
 public:
  Instance(int var, Expr value, std::map<int, Ring>& rings, VarRanges ranges)
      : Substitute({{var, std::move(value)}}), rings_(rings), ranges_(std::move(ranges)) {}
  Expr load(const Load& l, std::vector<Expr> index, const Loc& loc) override {
    auto it = rings_.find(l.buffer->id);
    if (it == rings_.end()) return make_load(l.buffer, std::move(index), loc);
    index.insert(index.begin(), it->second.slot);
    return make_load(it->second.inner, std::move(index), loc);
  }
  Region region(Region r) override {
    auto it = rings_.find(r.buffer->id);
    if (it == rings_.end()) return r;
    r.buffer = it->second.inner;
    r.start.insert(r.start.begin(), it->second.slot);
    r.extent.insert(r.extent.begin(), 1);
    return r;
  }
  Stmt mutate_for(const ForStmt& s, const Stmt& self) override {
    ForStmt f = s;
    f.begin = expr(s.begin);
    f.end = expr(s.end);
    auto b = as_const(f.begin), e = as_const(f.end);
    if (b && e && *e <= *b) return make_stmt(SeqStmt{}, self->loc);
    f.var = make_var(s.var->name);
    values_[s.var->id] = make_var_ref(f.var);
    ranges_[f.var->id] = loop_var_range(f, ranges_);
    f.body = mutate(s.body);
    values_.erase(s.var->id);
    return make_stmt(std::move(f), self->loc);
  }
  Stmt mutate_if(const IfStmt& s, const Stmt& self) override {
    Expr c = expr(s.cond);
    if (auto d = decide(c)) {
      if (*d) return mutate(s.then_body);
      return s.else_body ? mutate(s.else_body) : make_stmt(SeqStmt{}, self->loc);
    }
    return make_stmt(IfStmt{c, mutate(s.then_body), mutate(s.else_body)}, self->loc);
  }

 private:
  std::map<int, Ring>& rings_;
  VarRanges ranges_;

  /// `a < b` (<=, >, >=) decided by the range of b - a, as the front end decides a guard.
  std::optional<bool> decide(const Expr& c) {
    if (auto k = as_const(c)) return *k != 0;
    const auto* b = std::get_if<Binary>(&c->node);
    if (!b ||
        !(b->op == BinOp::Lt || b->op == BinOp::Le || b->op == BinOp::Gt || b->op == BinOp::Ge))
      return std::nullopt;
    return decided(make_binary(b->op, make_int(0), fold(BinOp::Sub, b->b, b->a)), ranges_);
  }
};

/// Splices a statement into a sequence, flattening sequences and dropping empty ones.
void append(std::vector<Stmt>& out, const Stmt& s) {
  if (const auto* seq = std::get_if<SeqStmt>(&s->node)) {
    for (const Stmt& x : seq->body) append(out, x);
    return;
  }
  out.push_back(s);
}

class Pass : public StmtMutator {
 public:
  explicit Pass(const Program& p) : p_(p), names_(buffer_names(p)) {
    ranges_[kCidVar] = cid_range(p.block_num);
  }

  Stmt mutate_scope(const ScopeStmt& s, const Stmt& self) override {
    hand_ = has_hand_sync(s.body);
    ranges_[kVidVar] = vid_range(s.kind);
    Stmt b = mutate(s.body);
    hand_ = false;
    if (b == s.body) return self;
    return make_stmt(ScopeStmt{s.kind, std::move(b)}, self->loc);
  }
  Stmt mutate_for(const ForStmt& s, const Stmt& self) override {
    if (s.kind == ForKind::Pipelined && hand_) return pipeline(s, self);
    ranges_[s.var->id] = loop_var_range(s, ranges_);
    Stmt body = mutate(s.body);
    if (body == s.body) return self;
    ForStmt f = s;
    f.body = std::move(body);
    return make_stmt(std::move(f), self->loc);
  }

 public:
  std::set<int> replaced;  // buffers the versioned ones replace: unused after the pass

 private:
  const Program& p_;
  bool hand_ = false;
  VarRanges ranges_;
  std::set<std::string> names_;

  [[noreturn]] void refuse(const Stmt& loop, const std::string& why) const {
    throw UserError(Diagnostic{
        loop->loc,
        "pipelined",
        "Pipelined loop in a scope with hand-written flags: the original software-pipelines "
        "it anyway (GM copies of later iterations moved ahead, buffers versioned); " +
            why,
        {},
        "write the loop as a serial one (the author's flags then order the serial program), "
        "or drop the scope's flags so auto_sync places them"});
  }

  Stmt serial(const ForStmt& s, const Stmt& inner, const Stmt& self) {
    ForStmt f = s;
    f.kind = ForKind::Serial;
    std::vector<Stmt> body;
    append(body, inner);
    f.body = make_stmt(SeqStmt{std::move(body)}, s.body->loc);
    return make_stmt(std::move(f), self->loc);
  }

  Stmt pipeline(const ForStmt& s, const Stmt& self) {
    auto begin = as_const(s.begin), end = as_const(s.end);
    if (!begin || !end || s.step != 1)
      refuse(self, "a run-time trip count or a step other than 1 is not modelled");
    const int64_t n = *end - *begin;
    if (n <= 0) return make_stmt(SeqStmt{}, self->loc);
    ranges_[s.var->id] = loop_var_range(s, ranges_);
    const Stmt inner = mutate(s.body);  // Pipelined loops inside it first
    // One iteration with the copies ahead of every other block: the program order.
    bool copies_first = true, seen_other = false;
    for (const Stmt& st : items_of(inner)) {
      const bool copy = copy_dst(st) != nullptr;
      copies_first = copies_first && !(copy && seen_other);
      seen_other = seen_other || !copy;
    }
    if (copies_first && n == 1) return serial(s, inner, self);
    std::vector<Block> blocks;
    for (const Stmt& st : items_of(inner)) {
      if (std::holds_alternative<LetStmt>(st->node))
        refuse(self, fmt::format("the binding at line {} (an element read or a register) is "
                                 "not modelled there; only index arithmetic is",
                                 st->loc.line));
      Block b{st, copy_dst(st), used_by(st)};
      if (!b.dst) {
        struct Nested : StmtVisitor {
          const StmtNode* at = nullptr;
          void visit_copy(const CopyStmt& c, const StmtNode& n) override {
            if (!at && gm_to_ub(c)) at = &n;
          }
        } nested;
        nested.visit(st);
        if (nested.at)
          refuse(self, fmt::format("the GM copy nested in the statement at line {} is not "
                                   "modelled",
                                   st->loc.line));
      }
      blocks.push_back(std::move(b));
    }
    for (size_t j = 0; j < blocks.size(); ++j)
      if (blocks[j].dst)
        for (size_t m = j + 1; m < blocks.size(); ++m)
          if (blocks[m].uses.count(blocks[j].dst->id)) blocks[j].last = static_cast<int>(m);
    const std::set<int> tested = read_by_conditions(inner);
    for (const Block& b : blocks)
      if (b.dst && tested.count(b.dst->id))
        refuse(self, fmt::format("a condition reads '{}', which a GM copy writes (the "
                                 "planner's condition stage) is not modelled",
                                 b.dst->name));
    const int N = s.num_stages;
    int order = 0;
    for (size_t j = 0; j < blocks.size(); ++j) {
      if (blocks[j].dst && blocks[j].last != -1) continue;
      blocks[j].order = order++;
      blocks[j].stage = N;
      for (Block& c : blocks)
        if (c.dst && c.last == static_cast<int>(j)) {
          c.order = order++;
          c.stage = 0;
        }
    }
    if (order != static_cast<int>(blocks.size()))
      refuse(self, "a GM copy read only by another GM copy is not modelled");
    int max_other = 0, min_copy = static_cast<int>(blocks.size()), copies = 0;
    for (const Block& b : blocks) {
      if (b.dst) {
        ++copies;
        min_copy = std::min(min_copy, b.order);
      } else {
        max_other = std::max(max_other, b.order);
      }
    }
    if (copies && N >= 2 && min_copy > max_other)
      for (Block& b : blocks) {
        b.order = (b.order + copies) % static_cast<int>(blocks.size());
        if (!b.dst) --b.stage;
      }
    std::set<int> stages;
    for (const Block& b : blocks) stages.insert(b.stage);
    if (stages.size() <= 1) return serial(s, inner, self);

    std::vector<Stmt> out;
    std::map<int, Ring> rings = versions(self, blocks, out);
    int smax = 0;
    for (const Block& b : blocks) smax = std::max(smax, b.stage);
    std::vector<const Block*> ordered;
    for (const Block& b : blocks) ordered.push_back(&b);
    std::sort(ordered.begin(), ordered.end(),
              [](const Block* a, const Block* b) { return a->order < b->order; });

    auto emit = [&](std::vector<Stmt>& into, const Block& blk, const Expr& it,
                    const VarRanges& ranges) {
      for (auto& [_, r] : rings) r.slot = fold(BinOp::Mod, it, make_int(r.versions));
      Instance inst(s.var->id, fold(BinOp::Add, s.begin, it), rings, ranges);
      append(into, inst.mutate(blk.stmt));
    };
    auto unrolled = [&](int64_t from, int64_t to) {
      for (int64_t i = from; i < to; ++i)
        for (const Block* b : ordered)
          if (int64_t j = i - b->stage; j >= 0 && j < n) emit(out, *b, make_int(j), ranges_);
    };
    unrolled(0, smax);  // prologue
    if (n > smax) {
      ForStmt f;
      f.var = make_var(s.var->name + "_pipe");
      f.begin = make_int(smax);
      f.end = make_int(n);
      VarRanges inside = ranges_;
      inside[f.var->id] = Range::of(smax, n - 1);
      std::vector<Stmt> body;
      for (const Block* b : ordered)
        emit(body, *b, fold(BinOp::Sub, make_var_ref(f.var), make_int(b->stage)), inside);
      f.body = make_stmt(SeqStmt{std::move(body)}, s.body->loc);
      out.push_back(make_stmt(std::move(f), self->loc));
    }
    unrolled(std::max<int64_t>(n, smax), n + smax);  // epilogue
    return make_stmt(SeqStmt{std::move(out)}, self->loc);
  }

  /// The versioned buffers (their allocations appended to `out`), by the id they replace.
  std::map<int, Ring> versions(const Stmt& self, const std::vector<Block>& blocks,
                               std::vector<Stmt>& out) {
    std::map<int, Ring> rings;
    for (const Block& w : blocks) {
      if (!w.dst || rings.count(w.dst->id)) continue;
      const Buffer& buf = w.dst;
      int d = INT32_MAX, u = INT32_MIN;
      bool readers = false, ahead = false;
      for (const Block& x : blocks) {
        if (x.dst == buf) d = std::min(d, x.stage);
      }
      for (const Block& r : blocks) {
        if (r.dst == buf || !r.uses.count(buf->id)) continue;
        readers = true;
        u = std::max(u, r.stage);
        for (const Block& x : blocks)
          if (x.dst == buf && x.order < r.order && x.stage < r.stage) ahead = true;
      }
      if (!readers) continue;
      int64_t v = u - d + 1;
      if (v >= 2 && !ahead) --v;
      if (v < 2) continue;
      if (used_outside(self, buf))
        refuse(self, fmt::format("'{}' needs {} versions but is used outside the loop (the "
                                 "original versions only buffers allocated in the loop)",
                                 buf->name, v));
      std::vector<int64_t> shape = buf->shape;
      shape.insert(shape.begin(), v);
      std::string name = buf->name + "_v";
      for (int k = 2; names_.count(name); ++k) name = fmt::format("{}_v_{}", buf->name, k);
      names_.insert(name);
      Buffer inner = make_buffer(name, buf->scope, buf->dtype, shape, TensorRole::None, self->loc);
      out.push_back(make_stmt(AllocStmt{inner}, self->loc));
      rings[buf->id] = Ring{inner, v, nullptr};
      replaced.insert(buf->id);
    }
    return rings;
  }

  bool used_outside(const Stmt& loop, const Buffer& buf) const {
    struct Without : StmtMutator {
      const StmtNode* loop;
      Stmt mutate_for(const ForStmt& f, const Stmt& self) override {
        if (self.get() == loop) return make_stmt(SeqStmt{}, self->loc);
        return StmtMutator::mutate_for(f, self);
      }
    } without;
    without.loop = loop.get();
    Program rest = p_;
    rest.body = without.mutate(p_.body);
    return accessed_buffers(rest).count(buf->id) > 0;
  }
};

}  // namespace

Program hand_pipeline(const Program& p, const ChipConfig&, const PassOptions&) {
  Program out = p;
  Pass pass(p);
  out.body = pass.mutate(p.body);
  if (pass.replaced.empty()) return out;
  // The buffers the versions replace are used nowhere else (used_outside): their
  // allocations go, as the original allocates only the versioned buffer.
  struct Drop : StmtMutator {
    const std::set<int>& ids;
    explicit Drop(const std::set<int>& i) : ids(i) {}
    Stmt mutate_seq(const SeqStmt& s, const Stmt& self) override {
      std::vector<Stmt> body;
      for (const Stmt& x : s.body) {
        const auto* a = std::get_if<AllocStmt>(&x->node);
        if (!(a && ids.count(a->buffer->id))) body.push_back(mutate(x));
      }
      return make_stmt(SeqStmt{std::move(body)}, self->loc);
    }
  } drop(pass.replaced);
  out.body = drop.mutate(out.body);
  return out;
}

}  // namespace tilepipe::passes

// The Cube/Vector split and the cross-core pipeline (cv_split.h). Three steps over the
// unscoped program: split UB rows between the vector cores, plan the crossings and the
// pipelines (workspaces, flag ids, stages, versions), then emit one scope per core kind.
#include "passes/cv_split.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <set>

#include "passes/dependence.h"
#include "passes/rewrite.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

[[noreturn]] void fail(const Loc& loc, std::string msg, std::string hint) {
  throw UserError(Diagnostic{loc, "cv-split", std::move(msg), {}, std::move(hint)});
}

bool is_crossing(const Stmt& s) {
  auto* c = std::get_if<CopyStmt>(&s->node);
  if (!c) return false;
  return crosses_cores(c->src.buffer->scope, c->dst.buffer->scope);
}

/// The core kinds with work in a subtree (a crossing counts for both).
std::set<CoreKind> kinds_in(const Stmt& s) {
  std::set<CoreKind> out;
  if (!s) return out;
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>) {
          for (const auto& c : n.body) out.merge(kinds_in(c));
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          out = kinds_in(n.body);
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          out = kinds_in(n.then_body);
          out.merge(kinds_in(n.else_body));
        } else if constexpr (std::is_same_v<T, ScopeStmt>) {
          out.insert(n.kind);
        } else {
          if (is_crossing(s)) {
            out = {CoreKind::C, CoreKind::V};
          } else if (auto k = leaf_core(s); k && !std::holds_alternative<AllocStmt>(s->node)) {
            out.insert(*k);
          }
        }
      },
      s->node);
  return out;
}

/// What check_unscoped found: whether there is unscoped work, and the first use of vid.
struct Unscoped {
  bool any = false;
  const StmtNode* vid = nullptr;
};

/// Rejects what unscoped code cannot hold: scopes mixed with unscoped work, hand flags.
/// `any` is false when the program is already scoped (expert mode).
Unscoped check_unscoped(const Program& p) {
  struct V : StmtVisitor {
    bool scope = false;
    const StmtNode* leaf = nullptr;  // first leaf outside any scope
    const StmtNode* flag = nullptr;  // first hand flag
    const StmtNode* vid = nullptr;   // first use of vid
    int depth = 0;
    static bool uses_vid(const Expr& e) {
      return expr_any(e, [](const ExprNode& n) { return std::holds_alternative<VecIdx>(n.node); });
    }
    static bool region_vid(const Region& r) {
      for (const auto& s : r.start)
        if (uses_vid(s)) return true;
      return false;
    }
    void leafy(const StmtNode& n) {
      if (depth == 0 && !leaf && !std::holds_alternative<AllocStmt>(n.node)) leaf = &n;
    }
    void visit_scope(const ScopeStmt& s, const StmtNode& n) override {
      scope = true;
      ++depth;
      StmtVisitor::visit_scope(s, n);
      --depth;
    }
    void visit_for(const ForStmt& s, const StmtNode& n) override {
      if (depth == 0 && !vid && (uses_vid(s.begin) || uses_vid(s.end))) vid = &n;
      StmtVisitor::visit_for(s, n);
    }
    void visit_if(const IfStmt& s, const StmtNode& n) override {
      if (depth == 0 && !vid && uses_vid(s.cond)) vid = &n;
      StmtVisitor::visit_if(s, n);
    }
    void visit_copy(const CopyStmt& c, const StmtNode& n) override {
      leafy(n);
      if (depth == 0 && !vid && (region_vid(c.src) || region_vid(c.dst))) vid = &n;
    }
    void visit_gemm(const GemmStmt&, const StmtNode& n) override { leafy(n); }
    void visit_tile(const TileOpStmt& t, const StmtNode& n) override {
      leafy(n);
      bool v = region_vid(t.dst);
      for (const auto& r : t.srcs) v = v || region_vid(r);
      if (depth == 0 && !vid && v) vid = &n;
    }
    void visit_reduce(const ReduceStmt&, const StmtNode& n) override { leafy(n); }
    void hand(const StmtNode& n) {
      leafy(n);
      if (depth == 0 && !flag) flag = &n;
    }
    void visit_set_flag(const SetFlagStmt&, const StmtNode& n) override { hand(n); }
    void visit_wait_flag(const WaitFlagStmt&, const StmtNode& n) override { hand(n); }
    void visit_barrier(const PipeBarrierStmt&, const StmtNode& n) override { hand(n); }
    void visit_set_cross(const SetCrossFlagStmt&, const StmtNode& n) override { hand(n); }
    void visit_wait_cross(const WaitCrossFlagStmt&, const StmtNode& n) override { hand(n); }
  } v;
  v.visit(p.body);
  if (!v.leaf) return {};  // scoped, or nothing to split
  if (v.scope)
    fail(v.leaf->loc, "statement outside a scope in a program that has scopes",
         "write the whole kernel without scopes (automatic mode) or put every statement in "
         "scope_c / scope_v (expert mode)");
  if (v.flag)
    fail(v.flag->loc, "hand-written flag in unscoped code: the split inserts every flag",
         "drop the flag, or write the kernel with scopes (expert mode)");
  return {true, v.vid};
}

/// The leaves of a subtree (through sequences, loops, branches and scopes), in order.
void for_leaves(const Stmt& s, const std::function<void(const Stmt&)>& f) {
  if (!s) return;
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>) {
          for (const auto& c : n.body) for_leaves(c, f);
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          for_leaves(n.body, f);
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          for_leaves(n.then_body, f);
          for_leaves(n.else_body, f);
        } else if constexpr (std::is_same_v<T, ScopeStmt>) {
          for_leaves(n.body, f);
        } else {
          f(s);
        }
      },
      s->node);
}

CoreKind other(CoreKind k) {
  return k == CoreKind::C ? CoreKind::V : CoreKind::C;
}

/// A GM tensor the author hands from one core kind to the other (the original's
/// AUTO_CV_SYNC form: explicit workspaces, vid slicing written by the author).
struct Handoff {
  Buffer buf;
  CoreKind producer = CoreKind::C;
};

/// The GM tensors written by one core kind's statements and read by the other's, by
/// buffer id. `conflict`: the first write of a tensor both kinds write and one reads.
std::map<int, Handoff> find_handoffs(const Stmt& body, const StmtNode** conflict) {
  struct Use {
    Buffer buf;
    std::set<CoreKind> w, r;
    const StmtNode* second_writer = nullptr;
  };
  std::map<int, Use> uses;
  for_leaves(body, [&](const Stmt& s) {
    auto k = leaf_core(s);
    if (!k || std::holds_alternative<AllocStmt>(s->node)) return;
    for (const auto& a : leaf_accesses(s)) {
      if (a.region.buffer->scope != Scope::GM) continue;
      Use& u = uses[a.region.buffer->id];
      u.buf = a.region.buffer;
      if (a.kind == AccessKind::Write) {
        if (!u.w.empty() && !u.w.count(*k) && !u.second_writer) u.second_writer = s.get();
        u.w.insert(*k);
      } else {
        u.r.insert(*k);
      }
    }
  });
  std::map<int, Handoff> out;
  for (const auto& [id, u] : uses) {
    if (u.w.size() == 2 && !u.r.empty() && !*conflict) *conflict = u.second_writer;
    if (u.w.size() == 1 && u.r.count(other(*u.w.begin()))) out[id] = Handoff{u.buf, *u.w.begin()};
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Step 1: the rows of the UB buffers that exchange tiles with the Cube are split between
// the vector cores; UB buffers that never meet them row by row are replicated.

/// The UB buffers to split: those exchanged with the Cube or stored to GM, and every buffer
/// that shares
/// rows with one in a vector op (same leading extent, used whole; a broadcast of a
/// [1, C] / [C] column vector does not share rows). The rest (index vectors, masks, page
/// tables) is replicated: each vector core holds and computes all of it.
std::set<int> split_buffers(const Stmt& body) {
  std::map<int, int> parent;
  auto find = [&](int x) {
    while (parent.count(x) && parent[x] != x) x = parent[x];
    return x;
  };
  auto unite = [&](int a, int b) {
    parent.emplace(a, a);
    parent.emplace(b, b);
    a = find(a), b = find(b);
    if (a != b) parent[a] = b;
  };
  std::set<int> seeds;
  auto row_tile = [](const Region& r) {
    return r.buffer->scope == Scope::UB && r.extent[0] == r.buffer->shape[0];
  };
  struct V : StmtVisitor {
    std::function<void(const std::vector<Region>&, bool)> op;
    std::function<void(const Region&)> seed;
    void visit_copy(const CopyStmt& c, const StmtNode& n) override {
      if (is_crossing(std::shared_ptr<const StmtNode>(std::shared_ptr<const StmtNode>{}, &n)))
        seed(c.src.buffer->scope == Scope::UB ? c.src : c.dst);
      else if (c.src.buffer->scope == Scope::UB && c.dst.buffer->scope == Scope::GM &&
               c.src.extent[0] == c.src.buffer->shape[0])
        seed(c.src);  // a stored tile: each vector core stores its rows
      else if (c.src.buffer->scope == Scope::UB && c.dst.buffer->scope == Scope::UB)
        op({c.src, c.dst}, false);
    }
    void visit_tile(const TileOpStmt& t, const StmtNode&) override {
      std::vector<Region> rs = {t.dst};
      rs.insert(rs.end(), t.srcs.begin(), t.srcs.end());
      op(rs, t.op == TileOpKind::Broadcast);
    }
    void visit_reduce(const ReduceStmt& r, const StmtNode&) override { op({r.src, r.dst}, false); }
  } v;
  v.seed = [&](const Region& r) { seeds.insert(r.buffer->id); };
  v.op = [&](const std::vector<Region>& rs, bool broadcast) {
    // A broadcast shares rows only from a row vector ([R] or [R, 1] into [R, C]).
    size_t n = rs.size();
    if (broadcast && n == 2) {
      auto sq = rs[1].squeezed();
      bool row_vec = (sq.size() == 1 && rs[1].extent.size() == 1) ||
                     (sq.size() >= 1 && rs[1].extent.back() == 1);
      if (!row_vec) n = 1;
    }
    for (size_t i = 1; i < n; ++i)
      if (row_tile(rs[0]) && row_tile(rs[i]) && rs[0].extent[0] == rs[i].extent[0])
        unite(rs[0].buffer->id, rs[i].buffer->id);
  };
  v.visit(body);
  std::set<int> roots;
  for (int s : seeds) roots.insert(find(s));
  std::set<int> out = seeds;
  for (const auto& [id, p] : parent)
    if (roots.count(find(id))) out.insert(id);
  return out;
}

class RowSplit : public RegionRewriter {
 public:
  RowSplit(int nv, std::set<int> split) : nv_(nv), split_(std::move(split)) {}

  bool is_split(const Buffer& b) const { return b->scope == Scope::UB && split_.count(b->id); }

  Buffer half(const Buffer& b) {
    auto it = map_.find(b->id);
    if (it != map_.end()) return it->second;
    if (b->shape[0] % nv_ != 0)
      fail(b->loc,
           fmt::format("UB buffer '{}' has {} rows, which do not split between the {} vector "
                       "cores",
                       b->name, b->shape[0], nv_),
           fmt::format("give it a multiple of {} rows", nv_));
    auto shape = b->shape;
    shape[0] /= nv_;
    Buffer h = make_buffer(b->name, b->scope, b->dtype, shape, b->role, b->loc);
    map_[b->id] = h;
    return h;
  }

  /// One row of a split buffer indexed by a row loop's variable: the vector core's own row.
  Region rewrite(const Region& r) override {
    if (is_split(r.buffer) && r.extent[0] == 1)
      if (auto* v = std::get_if<VarRef>(&r.start[0]->node); v && rows_.count(v->var->id)) {
        Region out = r;
        for (size_t d = 1; d < out.start.size(); ++d) out.start[d] = expr(out.start[d]);
        out.buffer = half(r.buffer);
        return out;
      }
    return RegionRewriter::rewrite(r);
  }

  /// A row loop's variable elsewhere: the row of the whole tile, vid * rows / nv + r.
  Expr var(const Expr& e, const VarRef& v) override {
    auto it = rows_.find(v.var->id);
    if (it == rows_.end()) return e;
    return make_binary(BinOp::Add, e, make_binary(BinOp::Mul, make_vid(), make_int(it->second)));
  }

  /// `for r in [0, R)` writing row r of a split buffer of R rows: each vector core runs
  /// its R / nv rows.
  Stmt mutate_for(const ForStmt& f, const Stmt& self) override {
    auto b = as_const(f.begin), e = as_const(f.end);
    bool row_loop = false;
    if (b == 0 && e && f.step == 1)
      for (const auto& a : collect_accesses(f.body, {}))
        if (is_split(a.region.buffer) && a.region.buffer->shape[0] == *e && a.region.extent[0] == 1)
          if (auto* v = std::get_if<VarRef>(&a.region.start[0]->node); v && v->var == f.var)
            row_loop = true;
    if (!row_loop) return RegionRewriter::mutate_for(f, self);
    rows_[f.var->id] = *e / nv_;
    ForStmt g = f;
    g.end = make_int(*e / nv_);
    g.body = mutate(f.body);
    rows_.erase(f.var->id);
    return make_stmt(std::move(g), self->loc);
  }

  Region region(Region r) override {
    if (!is_split(r.buffer)) return r;
    if (as_const(r.start[0]) != 0 || r.extent[0] != r.buffer->shape[0])
      fail(loc_,
           fmt::format("UB operand {} uses part of the rows of '{}': each vector core owns 1/{} "
                       "of them",
                       print(r), r.buffer->name, nv_),
           "use the leading dimension whole (slice later dimensions instead)");
    r.extent[0] /= nv_;
    r.buffer = half(r.buffer);
    return r;
  }

  Expr load(const Load& l, std::vector<Expr> idx, const Loc& loc) override {
    if (is_split(l.buffer))
      fail(loc_,
           fmt::format("scalar read of '{}', whose rows are split between the vector cores",
                       l.buffer->name),
           "use tile ops (broadcast) instead of per-element reads");
    return make_load(l.buffer, std::move(idx), loc);
  }

  Stmt mutate_leaf(const Stmt& s) override {
    loc_ = s->loc;
    if (auto* a = std::get_if<AllocStmt>(&s->node))
      return is_split(a->buffer) ? make_stmt(AllocStmt{half(a->buffer)}, s->loc) : s;
    if (auto* r = std::get_if<ReduceStmt>(&s->node); r && is_split(r->src.buffer)) {
      int rank = static_cast<int>(r->src.extent.size());
      int dim = r->dim < 0 ? rank + r->dim : r->dim;
      if (dim == 0)
        fail(s->loc, "reduction along the rows, which are split between the vector cores",
             "reduce along a later dimension");
    }
    if (auto* t = std::get_if<TileOpStmt>(&s->node); t && t->scalar)
      if (auto* sr = std::get_if<Region>(&t->scalar->value); sr && is_split(sr->buffer))
        fail(s->loc, "scalar operand read from UB, whose rows are split between the vector cores",
             "broadcast the value into a tile and use a tile operand");
    Stmt out = RegionRewriter::mutate_leaf(s);
    // A GM <-> UB copy moves the vector core's rows of the GM tile.
    if (auto* c = std::get_if<CopyStmt>(&out->node)) {
      const CopyStmt& orig = std::get<CopyStmt>(s->node);
      bool in = orig.src.buffer->scope == Scope::GM && orig.dst.buffer->scope == Scope::UB;
      bool outc = orig.src.buffer->scope == Scope::UB && orig.dst.buffer->scope == Scope::GM;
      if (in || outc) {
        const Region& u = in ? orig.dst : orig.src;
        if (!is_split(u.buffer)) {
          if (outc)
            fail(s->loc,
                 fmt::format("store of '{}', which every vector core holds whole (it never "
                             "shares rows with a tile of the Cube): both would write it",
                             u.buffer->name),
                 "store a tile that is exchanged with the Cube, or compute the result from one");
          return out;
        }
        if (u.extent[0] != u.buffer->shape[0]) return out;  // one row, in a row loop
        CopyStmt m = *c;
        Region& g = in ? m.src : m.dst;
        g = split_gm(g, u.extent[0], s->loc);
        return make_stmt(std::move(m), s->loc);
      }
    }
    return out;
  }

  /// The vector core's share of a GM tile whose first non-unit dimension holds `rows`.
  Region split_gm(Region g, int64_t rows, const Loc& loc) const {
    for (size_t d = 0; d < g.extent.size(); ++d) {
      if (g.extent[d] == 1) continue;
      if (g.extent[d] != rows) break;
      int64_t h = rows / nv_;
      Expr mine = make_binary(BinOp::Mul, make_vid(), make_int(h));
      g.start[d] = as_const(g.start[d]) == 0 ? mine : make_binary(BinOp::Add, g.start[d], mine);
      g.extent[d] = h;
      return g;
    }
    fail(loc,
         fmt::format("GM tile {} does not have the UB operand's {} rows as its first dimension",
                     print(g), rows),
         "copy a tile whose leading (non-unit) dimension matches the UB buffer's rows");
  }

  Buffer lookup(int id) const {
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : it->second;
  }

 private:
  int nv_;
  std::set<int> split_;
  std::map<int, int64_t> rows_;  // row loop variable -> rows per vector core
  std::map<int, Buffer> map_;
  Loc loc_;
};

// ---------------------------------------------------------------------------------------
// Step 2: crossings and pipelines.

/// One L0C -> UB or UB -> L1 copy routed through a GM workspace, or an author's GM
/// hand-off (Handoff) with its flags.
struct Crossing {
  CoreKind producer = CoreKind::C;
  Buffer ws;  // [block_num, slots, cube tile...]; a hand-off: its tensor, or [slots, ...]
  int ready = 0, free = 0;
  Pipe out_pipe = Pipe::FIX;  // the producer's copy to GM
  Pipe in_pipe = Pipe::MTE2;  // the consumer's read of GM
  bool made = true;           // ws is the split's own workspace (not the author's tensor)
  int tensor = -1;            // a hand-off: the author's tensor id
};

/// Regions of the buffers in `to` (by id) moved to their versions, slot `slot`: a leading
/// slot dimension (stage-crossing on-chip buffers), or with `merged` the slots stacked
/// along the first dimension (hand-off workspaces: GM tensors keep their rank, which the
/// lowering bounds).
struct AddSlot : RegionRewriter {
  const std::map<int, Buffer>* to = nullptr;
  Expr slot;
  bool merged = false;
  Region region(Region r) override {
    auto it = to->find(r.buffer->id);
    if (it == to->end()) return r;
    if (merged) {
      Expr base = make_binary(BinOp::Mul, slot, make_int(r.buffer->shape[0]));
      r.start[0] = as_const(r.start[0]) == 0 ? base : make_binary(BinOp::Add, base, r.start[0]);
    } else {
      r.start.insert(r.start.begin(), slot);
      r.extent.insert(r.extent.begin(), 1);
    }
    r.buffer = it->second;
    return r;
  }
};

/// Does the subtree access buffer `id`, and from which core kinds?
std::set<CoreKind> touching(const Stmt& s, int id) {
  std::set<CoreKind> out;
  for_leaves(s, [&](const Stmt& l) {
    auto k = leaf_core(l);
    if (!k) return;
    for (const auto& a : leaf_accesses(l))
      if (a.region.buffer->id == id) out.insert(*k);
  });
  return out;
}

/// How many leaves of the subtree access buffer `id`.
size_t count_leaves(const Stmt& s, int id) {
  size_t n = 0;
  for_leaves(s, [&](const Stmt& l) {
    for (const auto& a : leaf_accesses(l))
      if (a.region.buffer->id == id) {
        ++n;
        return;
      }
  });
  return n;
}

/// The pipe of the last access of buffer `id` of the given kind in the subtree.
Pipe last_pipe(const Stmt& s, int id, AccessKind kind, Pipe fallback) {
  Pipe out = fallback;
  for (const auto& a : collect_accesses(s, {}))
    if (a.region.buffer->id == id && a.kind == kind) out = a.pipe;
  return out;
}

/// One half of a crossing for its core, writing or reading workspace slot `slot`.
Stmt crossing_copy(const CopyStmt& c, const Crossing& x, CoreKind kind, Expr slot, int nv,
                   const Loc& loc) {
  Region ws;
  ws.buffer = x.ws;
  ws.start = {make_cid(), std::move(slot)};
  ws.extent = {1, 1};
  for (size_t d = 2; d < x.ws->shape.size(); ++d) {
    ws.start.push_back(make_int(0));
    ws.extent.push_back(x.ws->shape[d]);
  }
  if (kind == CoreKind::V) {  // the vector core's rows
    int64_t h = x.ws->shape[2] / nv;
    ws.start[2] = make_binary(BinOp::Mul, make_vid(), make_int(h));
    ws.extent[2] = h;
  }
  CopyStmt m = c;
  if (kind == x.producer)
    m.dst = ws;
  else
    m.src = ws;
  return make_stmt(std::move(m), loc);
}

Stmt seq(std::vector<Stmt> body, const Loc& loc) {
  if (body.size() == 1) return body.front();
  return make_stmt(SeqStmt{std::move(body)}, loc);
}

Stmt guarded(Expr cond, Stmt s, const Loc& loc) {
  if (auto c = as_const(cond)) return *c ? s : nullptr;
  return make_stmt(IfStmt{std::move(cond), std::move(s), nullptr}, loc);
}

struct Stage {
  CoreKind kind;
  Var i;
  std::vector<Stmt> body;
  std::vector<int> produces, consumes;  // crossings whose halves this stage holds
};
struct Pipeline {
  Var k;
  Expr batches, len;
  std::vector<Stage> stages;
  Loc loc;
};

class Splitter {
 public:
  Splitter(const Program& p, const ChipConfig& chip, const PassOptions& o, int nv,
           std::map<int, Handoff> handoffs = {})
      : p_(p), chip_(chip), o_(o), nv_(nv), handoffs_(std::move(handoffs)) {}

  Program run() {
    plan(p_.body, false);
    for (const auto& [id, h] : handoffs_)
      if (!handoff_of_.count(id)) plan_handoff(h);
    Program out = p_;
    std::vector<Stmt> scopes;
    for (CoreKind k : {CoreKind::C, CoreKind::V}) {
      std::vector<Stmt> body;
      // Credits: every workspace starts free (one batch), drained by the producer at the end.
      for (const auto& x : crossings_)
        if (x.producer != k)
          body.push_back(make_stmt(SetCrossFlagStmt{Pipe::MTE2, make_int(x.free), 2}, p_.loc));
      if (Stmt b = emit(p_.body, k)) body.push_back(b);
      for (const auto& x : crossings_)
        if (x.producer == k) body.push_back(make_stmt(WaitCrossFlagStmt{make_int(x.free)}, p_.loc));
      if (kinds_in(p_.body).count(k) == 0) continue;
      scopes.push_back(make_stmt(ScopeStmt{k, seq(std::move(body), p_.loc)}, p_.loc));
    }
    out.body = seq(std::move(scopes), p_.loc);
    // Hand-offs moved to slotted workspaces leave the author's tensor unused.
    std::erase_if(out.workspaces, [&](const Buffer& b) { return slotted_.count(b->id) > 0; });
    for (const auto& x : crossings_)
      if (x.made) out.workspaces.push_back(x.ws);
    for (const auto& [id, nb] : version_of_) out.versions[nb->id] = nb->shape[0];
    return out;
  }

 private:
  void check_flags(const Loc& loc, const std::string& what) const {
    if (next_flag_ + 2 > chip_.cross_flag_ids)
      fail(loc,
           fmt::format("{} needs cross-core flags {} and {}, but the chip has {} per core (two "
                       "per crossing)",
                       what, next_flag_, next_flag_ + 1, chip_.cross_flag_ids),
           "exchange fewer tiles between the cores (merge them into one buffer)");
  }

  /// The crossing of an author's hand-off tensor; inside a pipeline (slots > 0) it moves to
  /// a workspace of `slots` versions of the tensor.
  int new_handoff(const Handoff& h, int64_t slots, const Loc& loc) {
    check_flags(loc, fmt::format("the hand-off of GM tensor '{}' between the cores", h.buf->name));
    Crossing x;
    x.producer = h.producer;
    x.ready = next_flag_++;
    x.free = next_flag_++;
    x.ws = h.buf;
    x.tensor = h.buf->id;
    x.made = slots > 0;
    if (slots > 0) {
      if (h.buf->role != TensorRole::Workspace)
        fail(loc,
             fmt::format("GM tensor '{}' is handed between the cores inside a cross-core "
                         "pipeline, which needs one copy per stage, but it is a kernel {}",
                         h.buf->name, h.buf->role == TensorRole::Input ? "input" : "output"),
             "hand tiles over through a workspace (workspace_idx), or make the loop serial");
      auto shape = h.buf->shape;
      shape[0] *= slots;
      x.ws = make_buffer(h.buf->name + "_slots", Scope::GM, h.buf->dtype, shape,
                         TensorRole::Workspace, h.buf->loc);
      slotted_[h.buf->id] = x.ws;
    }
    crossings_.push_back(x);
    int id = static_cast<int>(crossings_.size()) - 1;
    handoff_of_[h.buf->id] = id;
    return id;
  }

  /// An author's hand-off outside pipelines, once per iteration of the innermost block
  /// holding all its accesses: on each core a wait before the block's first statement
  /// touching the tensor and a set after its last (producer: wait free / set ready;
  /// consumer: wait ready / set free).
  void plan_handoff(const Handoff& h) {
    const int id = h.buf->id;
    const CoreKind pk = h.producer, qk = other(pk);
    Stmt at = p_.body;
    std::vector<Stmt> kids;
    for (;;) {
      if (auto* f = std::get_if<ForStmt>(&at->node)) {
        at = f->body;
        continue;
      }
      if (auto* i = std::get_if<IfStmt>(&at->node)) {
        bool t = !touching(i->then_body, id).empty(), e = !touching(i->else_body, id).empty();
        if (t && e)
          fail(at->loc,
               fmt::format("GM tensor '{}' is handed between the cores in both branches of "
                           "this if",
                           h.buf->name),
               "hand it over in one branch, or before the if");
        at = t ? i->then_body : i->else_body;
        continue;
      }
      auto* q = std::get_if<SeqStmt>(&at->node);
      if (!q) break;
      kids.clear();
      for (const auto& c : q->body)
        if (!touching(c, id).empty()) kids.push_back(c);
      if (kids.size() != 1) break;
      at = kids.front();
    }
    if (kids.size() < 2)
      fail(at->loc,
           fmt::format("GM tensor '{}' is written by the {} and read by the {} inside one "
                       "statement",
                       h.buf->name, core_name(pk), core_name(qk)),
           "write and read it in separate statements of one block");
    size_t fp = kids.size(), lp = 0, fq = kids.size(), lq = 0;
    for (size_t n = 0; n < kids.size(); ++n) {
      auto ks = touching(kids[n], id);
      if (ks.size() == 2)
        fail(kids[n]->loc,
             fmt::format("this loop or branch both writes GM tensor '{}' on the {} and reads it "
                         "on the {}: the hand-off between the cores cannot be placed around it",
                         h.buf->name, core_name(pk), core_name(qk)),
             "split it into one loop per core kind");
      (ks.count(pk) ? fp : fq) = std::min(ks.count(pk) ? fp : fq, n);
      (ks.count(pk) ? lp : lq) = n;
    }
    if (fq < lp)
      fail(kids[fq]->loc,
           fmt::format("the {} reads GM tensor '{}' before the {} finished writing it (at {})",
                       core_name(qk), h.buf->name, core_name(pk), kids[lp]->loc.str()),
           "read it after the producer's last write, or give each use its own tensor");
    int cid = new_handoff(h, 0, kids[fp]->loc);
    Crossing& x = crossings_[static_cast<size_t>(cid)];
    x.out_pipe = last_pipe(kids[lp], id, AccessKind::Write, x.out_pipe);
    x.in_pipe = last_pipe(kids[lq], id, AccessKind::Read, x.in_pipe);
    const Loc& loc = kids[fp]->loc;
    before_[{kids[fp].get(), pk}].push_back(make_stmt(WaitCrossFlagStmt{make_int(x.free)}, loc));
    after_[{kids[lp].get(), pk}].push_back(
        make_stmt(SetCrossFlagStmt{x.out_pipe, make_int(x.ready), 2}, loc));
    before_[{kids[fq].get(), qk}].push_back(make_stmt(WaitCrossFlagStmt{make_int(x.ready)}, loc));
    after_[{kids[lq].get(), qk}].push_back(
        make_stmt(SetCrossFlagStmt{x.in_pipe, make_int(x.free), 2}, loc));
  }

  /// The author's name of a hand-off crossing's tensor.
  const std::string& tensor_name(int crossing) const {
    return handoffs_.at(crossings_[static_cast<size_t>(crossing)].tensor).buf->name;
  }

  static const char* core_name(CoreKind k) { return k == CoreKind::C ? "Cube" : "Vector"; }

  int new_crossing(const Stmt& s, int64_t slots) {
    const auto& c = std::get<CopyStmt>(s->node);
    check_flags(s->loc, "this Cube <-> Vector copy");
    Crossing x;
    x.producer = owner(c.src.buffer->scope);
    x.out_pipe = x.producer == CoreKind::C ? Pipe::FIX : Pipe::MTE3;
    x.ready = next_flag_++;
    x.free = next_flag_++;
    const Region& cube = x.producer == CoreKind::C ? c.src : c.dst;
    const Region& ub = x.producer == CoreKind::C ? c.dst : c.src;
    std::vector<int64_t> shape = {p_.block_num, slots};
    for (auto e : cube.squeezed()) shape.push_back(e);
    if (shape.size() < 3 || shape[2] != ub.extent[0] * nv_)
      fail(s->loc,
           fmt::format("the Cube tile {} does not have the UB tile's {} rows as its first "
                       "dimension",
                       print(cube), ub.extent[0] * nv_),
           "exchange tiles of the same [rows, cols] shape");
    x.ws = make_buffer(fmt::format("ws{}", crossings_.size()), Scope::GM, ub.buffer->dtype, shape,
                       TensorRole::Workspace, s->loc);
    crossings_.push_back(x);
    int id = static_cast<int>(crossings_.size()) - 1;
    cross_of_[s.get()] = id;
    return id;
  }

  /// Records the crossings outside pipelines and plans the mixed Pipelined loops.
  void plan(const Stmt& s, bool in_pipeline) {
    if (!s) return;
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, SeqStmt>) {
            for (const auto& c : n.body) plan(c, in_pipeline);
          } else if constexpr (std::is_same_v<T, ForStmt>) {
            if (n.kind == ForKind::Pipelined && kinds_in(n.body).size() == 2) {
              if (in_pipeline)
                fail(s->loc, "a Cube/Vector pipeline nested inside another one",
                     "pipeline the inner loop only, or make the outer loop serial");
              plan_pipeline(n, s);
            } else {
              if (n.kind == ForKind::Pipelined && n.cross_interval > 1)
                fail(s->loc,
                     fmt::format("cross_interval={} has no effect: this Pipelined loop runs on "
                                 "one core",
                                 n.cross_interval),
                     "drop cross_interval (intra-core pipelining overlaps one core's pipes)");
              plan(n.body, in_pipeline);
            }
          } else if constexpr (std::is_same_v<T, IfStmt>) {
            plan(n.then_body, in_pipeline);
            plan(n.else_body, in_pipeline);
          } else {
            if (is_crossing(s)) new_crossing(s, 1);
          }
        },
        s->node);
  }

  void plan_pipeline(const ForStmt& f, const Stmt& self) {
    const int64_t ns = std::max(1, f.num_stages), ci = f.cross_interval;
    if ((ns + ci - 1) / ci > chip_.cross_flag_max)
      fail(self->loc,
           fmt::format("num_stages={} with cross_interval={} signals the consumer {} times per "
                       "batch, but the cross-core flag counter holds {}",
                       ns, ci, (ns + ci - 1) / ci, chip_.cross_flag_max),
           fmt::format("use num_stages <= {} or cross_interval >= {}", chip_.cross_flag_max * ci,
                       (ns + chip_.cross_flag_max - 1) / chip_.cross_flag_max));
    Pipeline pl;
    pl.loc = self->loc;
    pl.k = make_var(f.var->name + "_batch");
    // trip = ceil((end - begin) / step), batches of ns iterations.
    Expr trip = make_binary(BinOp::Sub, f.end, f.begin);
    if (f.step != 1)
      trip = make_binary(BinOp::Div, make_binary(BinOp::Add, trip, make_int(f.step - 1)),
                         make_int(f.step));
    trip = make_binary(BinOp::Max, trip, make_int(0));
    pl.batches =
        make_binary(BinOp::Div, make_binary(BinOp::Add, trip, make_int(ns - 1)), make_int(ns));
    pl.len = make_binary(
        BinOp::Min, make_int(ns),
        make_binary(BinOp::Sub, trip, make_binary(BinOp::Mul, make_var_ref(pl.k), make_int(ns))));
    // Cut the body into stages, alternating cores. Each core keeps its statements in
    // program order; a statement goes to the first stage of its core not before that
    // core's previous statement, and a crossing's consumer half to the first stage of the
    // consumer after its producer half. The cores share no on-chip memory, so this only
    // reorders work of different cores, which the workspaces order.
    struct Raw {
      CoreKind kind;
      std::vector<std::pair<Stmt, int>> items;  // statement, crossing half (-1: none)
      // Author's hand-offs (by crossing): the item after which the producer signals, the
      // item before which the consumer waits.
      std::map<int, size_t> last_write, first_read;
    };
    // Hand-off crossing -> the stage writing it / reading it.
    std::map<int, size_t> write_stage, read_stage;
    std::vector<Raw> raw;
    std::vector<Stmt> hoisted;  // allocations inside the body
    std::map<CoreKind, size_t> last = {{CoreKind::C, 0}, {CoreKind::V, 0}};
    size_t last_any = 0;
    auto place = [&](CoreKind k, size_t from, std::pair<Stmt, int> item) {
      size_t s = from;
      while (s < raw.size() && raw[s].kind != k) ++s;
      if (s == raw.size()) raw.push_back(Raw{k, {}, {}, {}});
      raw[s].items.push_back(std::move(item));
      last[k] = s;
      last_any = s;
      return s;
    };
    for (const Stmt& st : flatten(f.body)) {
      if (std::holds_alternative<AllocStmt>(st->node)) {
        hoisted.push_back(st);
        continue;
      }
      if (is_crossing(st)) {
        int id = new_crossing(st, ns);
        CoreKind pk = crossings_[static_cast<size_t>(id)].producer;
        CoreKind qk = pk == CoreKind::C ? CoreKind::V : CoreKind::C;
        size_t sp = place(pk, last[pk], {st, id});
        place(qk, std::max(last[qk], sp + 1), {st, id});
        continue;
      }
      auto ks = kinds_in(st);
      if (ks.size() == 2)
        fail(st->loc, "a loop or branch inside a Cube/Vector pipeline mixes Cube and Vector work",
             "split it into one loop per core kind, or move it out of the Pipelined loop");
      if (ks.empty()) {
        if (!raw.empty()) raw[last_any].items.push_back({st, -1});
        continue;
      }
      const CoreKind k = *ks.begin();
      // An author's hand-off read goes to a stage after the one writing the tensor.
      std::set<int> writes, reads;
      for (const auto& a : collect_accesses(st, {})) {
        auto h = handoffs_.find(a.region.buffer->id);
        if (h == handoffs_.end()) continue;
        auto it = handoff_of_.find(h->first);
        int id = it != handoff_of_.end() ? it->second : -1;
        if (id < 0) {
          if (count_leaves(p_.body, h->first) != count_leaves(f.body, h->first))
            fail(st->loc,
                 fmt::format("GM tensor '{}' is handed between the cores both inside this "
                             "cross-core pipeline and outside it",
                             h->second.buf->name),
                 "give the pipeline its own workspace");
          id = new_handoff(h->second, ns, st->loc);
        }
        (k == h->second.producer ? writes : reads).insert(id);
      }
      // The author's split is cut where the core changes in program order (the original's
      // CrossCorePipeline): a Vector statement written after the Cube's second stage runs
      // after it even when it reads nothing the Cube made.
      size_t from = last[k];
      if (!handoffs_.empty() && !raw.empty())
        from = raw[last_any].kind == k ? last_any : last_any + 1;
      for (int id : reads) {
        if (!write_stage.count(id))
          fail(st->loc,
               fmt::format("the {} reads GM tensor '{}' before the {} writes it in the same "
                           "iteration of the pipeline",
                           core_name(k), tensor_name(id), core_name(other(k))),
               "write the tensor earlier in the loop body than it is read");
        from = std::max(from, write_stage[id] + 1);
      }
      size_t sg = place(k, from, {st, -1});
      size_t item = raw[sg].items.size() - 1;
      for (int id : writes) {
        if (read_stage.count(id) || (write_stage.count(id) && write_stage[id] != sg))
          fail(st->loc,
               fmt::format("GM tensor '{}' is written again after the other core read it, or "
                           "in two stages of the pipeline",
                           tensor_name(id)),
               "write each hand-off tensor in one run of statements of its core, before its "
               "reads");
        write_stage[id] = sg;
        raw[sg].last_write[id] = item;
      }
      for (int id : reads) {
        if (read_stage.count(id) && read_stage[id] != sg)
          fail(st->loc,
               fmt::format("GM tensor '{}' is read in two stages of the pipeline", tensor_name(id)),
               "read each hand-off tensor in one run of statements of its core");
        read_stage[id] = sg;
        raw[sg].first_read.emplace(id, item);
      }
    }
    for (auto& r : raw) {
      Stage sg;
      sg.kind = r.kind;
      sg.i = make_var(f.var->name);
      Expr i = make_var_ref(sg.i);
      // The original loop variable: begin + (k * ns + i) * step.
      Expr it =
          make_binary(BinOp::Add, make_binary(BinOp::Mul, make_var_ref(pl.k), make_int(ns)), i);
      if (f.step != 1) it = make_binary(BinOp::Mul, it, make_int(f.step));
      Expr j = as_const(f.begin) == 0 ? it : make_binary(BinOp::Add, f.begin, it);
      // Signal every cross_interval iterations and at the last of the batch; wait at the
      // first iteration of each group.
      Expr sig =
          ci == 1 ? make_int(1)
                  : make_binary(
                        BinOp::Or,
                        make_binary(BinOp::Eq,
                                    make_binary(BinOp::Mod, make_binary(BinOp::Add, i, make_int(1)),
                                                make_int(ci)),
                                    make_int(0)),
                        make_binary(BinOp::Eq, i, make_binary(BinOp::Sub, pl.len, make_int(1))));
      Expr w = ci == 1
                   ? make_int(1)
                   : make_binary(BinOp::Eq, make_binary(BinOp::Mod, i, make_int(ci)), make_int(0));
      for (size_t n = 0; n < r.items.size(); ++n) {
        auto& [st, cid] = r.items[n];
        for (const auto& [id, at] : r.first_read)
          if (at == n) {
            sg.consumes.push_back(id);
            sg.body.push_back(guarded(
                w,
                make_stmt(WaitCrossFlagStmt{make_int(crossings_[static_cast<size_t>(id)].ready)},
                          st->loc),
                st->loc));
          }
        if (cid < 0) sg.body.push_back(st);
        for (const auto& [id, at] : r.last_write)
          if (at == n) {
            Crossing& x = crossings_[static_cast<size_t>(id)];
            x.out_pipe = last_pipe(st, x.tensor, AccessKind::Write, x.out_pipe);
            sg.produces.push_back(id);
            sg.body.push_back(
                guarded(sig, make_stmt(SetCrossFlagStmt{x.out_pipe, make_int(x.ready), 2}, st->loc),
                        st->loc));
          }
        if (cid < 0) continue;
        const Crossing& x = crossings_[static_cast<size_t>(cid)];
        const auto& c = std::get<CopyStmt>(st->node);
        if (r.kind == x.producer) {
          sg.produces.push_back(cid);
          sg.body.push_back(crossing_copy(c, x, r.kind, i, nv_, st->loc));
          sg.body.push_back(
              guarded(sig, make_stmt(SetCrossFlagStmt{x.out_pipe, make_int(x.ready), 2}, st->loc),
                      st->loc));
        } else {
          sg.consumes.push_back(cid);
          sg.body.push_back(
              guarded(w, make_stmt(WaitCrossFlagStmt{make_int(x.ready)}, st->loc), st->loc));
          sg.body.push_back(crossing_copy(c, x, r.kind, i, nv_, st->loc));
        }
      }
      struct Subst : RegionRewriter {
        int id;
        Expr j;
        Expr var(const Expr& e, const VarRef& v) override { return v.var->id == id ? j : e; }
      } sub;
      sub.id = f.var->id;
      sub.j = j;
      AddSlot slots;
      slots.to = &slotted_;
      slots.slot = i;
      slots.merged = true;
      for (auto& st : sg.body) st = slots.mutate(sub.mutate(st));
      pl.stages.push_back(std::move(sg));
    }
    version_stages(self, pl, ns);
    hoisted_[self.get()] = hoisted;
    pipelines_[self.get()] = std::move(pl);
  }

  /// Buffers whose value flows from one stage to a later one get ns versions (slot = the
  /// iteration's index in its batch); sharing a buffer that also carries a value across
  /// iterations would change the values once the stages run as separate loops.
  void version_stages(const Stmt& self, Pipeline& pl, int64_t ns) {
    std::map<int, std::vector<size_t>> users;
    std::map<int, Buffer> bufs;
    std::set<int> written;  // read-only buffers may be shared freely
    for (size_t s = 0; s < pl.stages.size(); ++s) {
      std::set<int> seen;
      for (const auto& a : collect_accesses(seq(pl.stages[s].body, pl.loc), {})) {
        if (a.region.buffer->scope == Scope::GM) continue;
        bufs[a.region.buffer->id] = a.region.buffer;
        if (a.kind == AccessKind::Write) written.insert(a.region.buffer->id);
        if (seen.insert(a.region.buffer->id).second) users[a.region.buffer->id].push_back(s);
      }
    }
    std::vector<Stmt> all;
    for (const auto& sg : pl.stages) all.insert(all.end(), sg.body.begin(), sg.body.end());
    Stmt body = seq(all, pl.loc);
    std::map<int, Buffer> versions;
    for (const auto& [id, ss] : users) {
      if (ss.size() < 2 || !written.count(id)) continue;
      const Buffer& b = bufs[id];
      if (exposed(body, id))
        fail(b->loc,
             fmt::format("buffer '{}' carries a value across iterations of the pipeline at {} and "
                         "is used by {} of its stages; split into one loop per stage it would "
                         "change values",
                         b->name, self->loc.str(), ss.size()),
             "keep a loop-carried value in one stage (compute what later stages need into its "
             "own buffer)");
      bool flows = false;
      for (size_t u = 1; u < ss.size(); ++u)
        if (exposed(seq(pl.stages[ss[u]].body, pl.loc), id)) flows = true;
      if (!flows) continue;  // every stage overwrites it first: plain scratch
      auto shape = b->shape;
      shape.insert(shape.begin(), ns);
      versions[id] = make_buffer(b->name, b->scope, b->dtype, shape, b->role, b->loc);
    }
    if (versions.empty()) return;
    for (auto& [id, nb] : versions) version_of_[id] = nb;
    for (auto& sg : pl.stages) {
      AddSlot ver;
      ver.to = &versions;
      ver.slot = make_var_ref(sg.i);
      for (auto& st : sg.body) st = ver.mutate(st);
    }
  }

  // ---- Step 3: emission for one core kind ----
  Stmt emit(const Stmt& s, CoreKind k) {
    if (!s) return nullptr;
    return std::visit(
        [&](const auto& n) -> Stmt {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, SeqStmt>) {
            std::vector<Stmt> out;
            for (const auto& c : n.body) {
              auto at = [&](auto& anchors) {
                auto it = anchors.find({c.get(), k});
                if (it != anchors.end())
                  out.insert(out.end(), it->second.begin(), it->second.end());
              };
              at(before_);
              if (Stmt e = emit(c, k)) out.push_back(e);
              at(after_);
            }
            if (out.empty()) return nullptr;
            return make_stmt(SeqStmt{std::move(out)}, s->loc);
          } else if constexpr (std::is_same_v<T, ForStmt>) {
            if (auto it = pipelines_.find(s.get()); it != pipelines_.end())
              return emit_pipeline(it->second, s, k);
            Stmt b = emit(n.body, k);
            if (!b) return nullptr;
            ForStmt f = n;
            f.body = b;
            return make_stmt(std::move(f), s->loc);
          } else if constexpr (std::is_same_v<T, IfStmt>) {
            Stmt t = emit(n.then_body, k), e = emit(n.else_body, k);
            if (!t && !e) return nullptr;
            if (!t) t = make_stmt(SeqStmt{}, s->loc);
            return make_stmt(IfStmt{n.cond, t, e}, s->loc);
          } else if constexpr (std::is_same_v<T, AllocStmt>) {
            if (owner(n.buffer->scope) != k) return nullptr;
            if (auto it = version_of_.find(n.buffer->id); it != version_of_.end())
              return make_stmt(AllocStmt{it->second}, s->loc);
            return s;
          } else {
            if (auto it = cross_of_.find(s.get()); it != cross_of_.end())
              return emit_crossing(n, crossings_[static_cast<size_t>(it->second)], s, k);
            auto lk = leaf_core(s);
            return lk == k ? s : nullptr;
          }
        },
        s->node);
  }

  /// A crossing outside pipelines: the producer waits for the slot, writes it and signals;
  /// the consumer waits, reads it and frees it.
  template <class T>
  Stmt emit_crossing(const T& n, const Crossing& x, const Stmt& s, CoreKind k) {
    if constexpr (!std::is_same_v<T, CopyStmt>) {
      return s;
    } else {
      Stmt copy = crossing_copy(n, x, k, make_int(0), nv_, s->loc);
      if (k == x.producer)
        return seq({make_stmt(WaitCrossFlagStmt{make_int(x.free)}, s->loc), copy,
                    make_stmt(SetCrossFlagStmt{x.out_pipe, make_int(x.ready), 2}, s->loc)},
                   s->loc);
      return seq({make_stmt(WaitCrossFlagStmt{make_int(x.ready)}, s->loc), copy,
                  make_stmt(SetCrossFlagStmt{Pipe::MTE2, make_int(x.free), 2}, s->loc)},
                 s->loc);
    }
  }

  Stmt emit_pipeline(const Pipeline& pl, const Stmt& self, CoreKind k) {
    std::vector<Stmt> out;
    for (const auto& h : hoisted_.at(self.get()))
      if (Stmt e = emit(h, k)) out.push_back(e);
    std::vector<Stmt> batch;
    for (const auto& sg : pl.stages) {
      if (sg.kind != k) continue;
      for (int id : sg.produces)
        batch.push_back(make_stmt(
            WaitCrossFlagStmt{make_int(crossings_[static_cast<size_t>(id)].free)}, pl.loc));
      ForStmt f;
      f.var = sg.i;
      f.begin = make_int(0);
      f.end = pl.len;
      bool mb = o_.stage_buffers >= 2 && o_.multibuffer;
      f.kind = mb ? ForKind::Pipelined : ForKind::Serial;
      f.num_stages = mb ? o_.stage_buffers : 0;
      f.body = make_stmt(SeqStmt{sg.body}, pl.loc);
      batch.push_back(make_stmt(std::move(f), pl.loc));
      for (int id : sg.consumes)
        batch.push_back(make_stmt(
            SetCrossFlagStmt{Pipe::MTE2, make_int(crossings_[static_cast<size_t>(id)].free), 2},
            pl.loc));
    }
    if (batch.empty() && out.empty()) return nullptr;
    if (!batch.empty()) {
      ForStmt b;
      b.var = pl.k;
      b.begin = make_int(0);
      b.end = pl.batches;
      b.body = make_stmt(SeqStmt{std::move(batch)}, pl.loc);
      out.push_back(make_stmt(std::move(b), pl.loc));
    }
    return seq(std::move(out), pl.loc);
  }

  const Program& p_;
  const ChipConfig& chip_;
  const PassOptions& o_;
  int nv_;
  int next_flag_ = 0;
  std::vector<Crossing> crossings_;
  std::map<const StmtNode*, int> cross_of_;
  std::map<const StmtNode*, Pipeline> pipelines_;
  std::map<const StmtNode*, std::vector<Stmt>> hoisted_;
  std::map<int, Buffer> version_of_;
  std::map<int, Handoff> handoffs_;  // the author's GM hand-offs, by tensor id
  std::map<int, int> handoff_of_;    // tensor id -> its crossing
  std::map<int, Buffer> slotted_;    // tensor id -> its slotted workspace (pipelines)
  // An author's hand-off outside pipelines: flags before / after a statement, per core.
  std::map<std::pair<const StmtNode*, CoreKind>, std::vector<Stmt>> before_, after_;
};

}  // namespace

Program cv_split(const Program& p, const ChipConfig& chip, const PassOptions& o) {
  auto u = check_unscoped(p);
  if (!u.any) return p;
  const StmtNode* conflict = nullptr;
  auto handoffs = find_handoffs(p.body, &conflict);
  if (u.vid || !handoffs.empty()) {
    // The author's own split (the original's automatic form): vid gives each vector core
    // its rows, GM tensors carry the tiles between the cores; the split keeps both and
    // adds the flags.
    const StmtNode* crossing = nullptr;
    for_leaves(p.body, [&](const Stmt& s) {
      if (!crossing && is_crossing(s)) crossing = s.get();
    });
    if (crossing)
      fail(crossing->loc,
           fmt::format("Cube <-> Vector copy in a kernel that {}",
                       u.vid ? "uses vid (vid in unscoped code: the split gives each vector core "
                               "its rows for such copies)"
                             : "hands tiles between the cores through its own GM tensors"),
           "write the kernel in one form: copies between L0C / UB / L1 and whole tiles, or GM "
           "workspaces and vid slicing");
    if (conflict)
      fail(conflict->loc,
           "a GM tensor is written by both the Cube and the Vector code and read across them",
           "give each direction its own tensor");
    return Splitter(p, chip, o, chip.aiv_per_core, std::move(handoffs)).run();
  }
  RowSplit rows(chip.aiv_per_core, split_buffers(p.body));
  Program split = p;
  split.body = rows.mutate(p.body);
  // A pinned UB buffer keeps its offset in each vector core's UB.
  for (const auto& [id, addr] : p.addresses)
    if (Buffer h = rows.lookup(id)) split.addresses[h->id] = addr;
  return Splitter(split, chip, o, chip.aiv_per_core).run();
}

}  // namespace tilepipe::passes

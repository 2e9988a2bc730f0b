// Loop-level source edits of the advisor (contract in include/tilepipe/loop_edits.h).
#include "tilepipe/loop_edits.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "passes/dependence.h"
#include "passes/rewrite.h"

namespace tilepipe::passes {
namespace {

using namespace ir;

/// What a subtree reads and writes, by buffer (every copy, gemm, tile op and reduction, the
/// cross-core copies automatic code writes included, and tensor elements read in
/// expressions), the variables its expressions use (regions, scalars, loop bounds,
/// conditions, let values), and whether it reads any tensor element (a data-dependent value).
class Effects : public RegionRewriter {
 public:
  std::set<int> reads, writes, vars;
  std::map<int, Buffer> buffers;
  bool loads = false;
  Expr var(const Expr& e, const VarRef& v) override {
    vars.insert(v.var->id);
    return e;
  }
  Expr load(const Load& l, std::vector<Expr> index, const Loc& loc) override {
    loads = true;
    read(l.buffer);
    return RegionRewriter::load(l, std::move(index), loc);
  }
  Stmt mutate_leaf(const Stmt& s) override {
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, CopyStmt>) {
            read(n.src.buffer);
            if (n.atomic_add) read(n.dst.buffer);
            write(n.dst.buffer);
          } else if constexpr (std::is_same_v<T, GemmStmt>) {
            read(n.a.buffer);
            read(n.b.buffer);
            if (!n.init) read(n.c.buffer);
            write(n.c.buffer);
          } else if constexpr (std::is_same_v<T, TileOpStmt>) {
            for (const auto& r : n.srcs) read(r.buffer);
            if (n.op == TileOpKind::Axpy) read(n.dst.buffer);
            if (n.scalar)
              if (auto* r = std::get_if<Region>(&n.scalar->value)) read(r->buffer);
            write(n.dst.buffer);
          } else if constexpr (std::is_same_v<T, ReduceStmt>) {
            read(n.src.buffer);
            if (!n.clear) read(n.dst.buffer);
            write(n.dst.buffer);
          }
        },
        s->node);
    return RegionRewriter::mutate_leaf(s);
  }

 private:
  void read(const Buffer& b) {
    reads.insert(b->id);
    buffers[b->id] = b;
  }
  void write(const Buffer& b) {
    writes.insert(b->id);
    buffers[b->id] = b;
  }
};

Effects effects(const Stmt& s) {
  Effects e;
  e.mutate(s);
  return e;
}

/// The variables a subtree binds (loop variables, lets) and the buffers it allocates.
struct Binds : StmtVisitor {
  std::set<int> vars, allocs;
  void visit_for(const ForStmt& s, const StmtNode& n) override {
    vars.insert(s.var->id);
    StmtVisitor::visit_for(s, n);
  }
  void visit_let(const LetStmt& s, const StmtNode&) override { vars.insert(s.var->id); }
  void visit_alloc(const AllocStmt& a, const StmtNode&) override { allocs.insert(a.buffer->id); }
};

bool meets(const std::set<int>& a, const std::set<int>& b) {
  return std::any_of(a.begin(), a.end(), [&](int x) { return b.count(x) > 0; });
}

bool is_work(const Stmt& s) {
  return std::holds_alternative<CopyStmt>(s->node) || std::holds_alternative<TileOpStmt>(s->node) ||
         std::holds_alternative<ReduceStmt>(s->node) || std::holds_alternative<GemmStmt>(s->node) ||
         std::holds_alternative<ForStmt>(s->node);
}

const char* kind_name(const StmtNode& s) {
  if (std::holds_alternative<CopyStmt>(s.node)) return "copy";
  if (std::holds_alternative<TileOpStmt>(s.node)) return "tile op";
  if (std::holds_alternative<ReduceStmt>(s.node)) return "reduction";
  if (std::holds_alternative<GemmStmt>(s.node)) return "gemm";
  return "loop";
}

/// At least one iteration whatever the launch: constant-range bounds with end > begin.
bool runs_once(const ForStmt& f) {
  Range b = eval_range(f.begin, {}), e = eval_range(f.end, {});
  return b.known && e.known && e.lo > b.hi;
}

/// Every loop of the program (outermost first) outside hand-synced scopes: there the author's
/// flags order the pipes around the statements as written, and nothing is moved.
void loops(const Stmt& s, std::vector<const StmtNode*>& out) {
  if (!s) return;
  if (auto* q = std::get_if<SeqStmt>(&s->node)) {
    for (const auto& c : q->body) loops(c, out);
  } else if (auto* f = std::get_if<ForStmt>(&s->node)) {
    out.push_back(s.get());
    loops(f->body, out);
  } else if (auto* i = std::get_if<IfStmt>(&s->node)) {
    loops(i->then_body, out);
    loops(i->else_body, out);
  } else if (auto* sc = std::get_if<ScopeStmt>(&s->node)) {
    if (!has_hand_sync(sc->body)) loops(sc->body, out);
  }
}

std::vector<const StmtNode*> all_loops(const Program& p) {
  std::vector<const StmtNode*> out;
  loops(p.body, out);
  return out;
}

/// "copy at f.py:12, tile op at f.py:13".
std::string describe(const std::vector<const StmtNode*>& stmts) {
  std::vector<std::string> parts;
  for (const auto* s : stmts) parts.push_back(fmt::format("{} at {}", kind_name(*s), s->loc.str()));
  return fmt::format("{}", fmt::join(parts, ", "));
}

/// Rewrites the one loop node `target`.
class AtLoop : public StmtMutator {
 public:
  AtLoop(const StmtNode* target, std::function<Stmt(const ForStmt&, const Stmt&)> edit)
      : target_(target), edit_(std::move(edit)) {}
  Stmt mutate_for(const ForStmt& s, const Stmt& self) override {
    if (self.get() == target_) {
      found = true;
      return edit_(s, self);
    }
    return StmtMutator::mutate_for(s, self);
  }
  /// The edited loop's statements spliced into the sequence that holds it (one flat
  /// sequence, as if written there).
  Stmt mutate_seq(const SeqStmt& s, const Stmt& self) override {
    std::vector<Stmt> body;
    bool changed = false;
    for (const auto& c : s.body) {
      Stmt m = mutate(c);
      changed = changed || m != c;
      auto* q = std::get_if<SeqStmt>(&m->node);
      if (m != c && q && std::holds_alternative<ForStmt>(c->node))
        body.insert(body.end(), q->body.begin(), q->body.end());
      else
        body.push_back(m);
    }
    return changed ? make_stmt(SeqStmt{std::move(body)}, self->loc) : self;
  }
  bool found = false;

 private:
  const StmtNode* target_;
  std::function<Stmt(const ForStmt&, const Stmt&)> edit_;
};

Program edit_loop(const Program& p, const LoopSite& site,
                  std::function<Stmt(const ForStmt&, const Stmt&)> edit) {
  AtLoop m(site.loop, std::move(edit));
  Program out = p;
  out.body = m.mutate(p.body);
  if (!m.found)
    throw std::invalid_argument(
        fmt::format("loop edit: no loop at {} in this program", site.loop->loc.str()));
  return out;
}

}  // namespace

std::vector<LoopSite> serial_tile_loops(const Program& p) {
  std::vector<LoopSite> out;
  for (const auto* node : all_loops(p)) {
    const auto& f = std::get<ForStmt>(node->node);
    const bool one_stage =
        f.kind == ForKind::Serial || (f.kind == ForKind::Pipelined && f.num_stages < 2);
    if (!one_stage || has_hand_sync(f.body)) continue;
    LoopSite site{node, {}, ""};
    struct Loads : StmtVisitor {
      int var = 0;
      std::vector<const StmtNode*>* out = nullptr;
      void visit_copy(const CopyStmt& c, const StmtNode& n) override {
        if (c.src.buffer->scope != Scope::GM || c.dst.buffer->scope == Scope::GM) return;
        if (std::any_of(c.src.start.begin(), c.src.start.end(),
                        [&](const Expr& e) { return uses_var(e, var); }))
          out->push_back(&n);
      }
    } loads;
    loads.var = f.var->id;
    loads.out = &site.stmts;
    loads.visit(f.body);
    if (site.stmts.empty()) continue;
    site.what = "loads a new tile per iteration: " + describe(site.stmts);
    out.push_back(std::move(site));
  }
  return out;
}

std::vector<LoopSite> loop_invariant_work(const Program& p) {
  std::vector<LoopSite> out;
  for (const auto* node : all_loops(p)) {
    const auto& f = std::get<ForStmt>(node->node);
    if (f.kind == ForKind::Parallel || has_hand_sync(f.body) || !runs_once(f)) continue;
    Binds in_loop;
    in_loop.visit(f.body);
    in_loop.vars.insert(f.var->id);
    const std::vector<Stmt> body = flatten(f.body);
    std::vector<Effects> fx;
    for (const auto& s : body) fx.push_back(effects(s));
    LoopSite site{node, {}, ""};
    std::set<size_t> hoisted;
    for (size_t i = 0; i < body.size(); ++i) {
      const Stmt& s = body[i];
      const Effects& e = fx[i];
      if (!is_work(s) || e.loads) continue;
      Binds own;
      own.visit(s);
      bool varies = false;
      for (int v : e.vars) varies = varies || (in_loop.vars.count(v) && !own.vars.count(v));
      if (varies) continue;
      // Writes: on-chip buffers allocated outside the loop, not read by the statement.
      bool ok = !e.writes.empty() && !meets(e.writes, e.reads);
      for (const auto& [id, b] : e.buffers) {
        if (e.writes.count(id) && (b->scope == Scope::GM || in_loop.allocs.count(id))) ok = false;
        // GM reads: the kernel's inputs only (a workspace may be written by the other core).
        if (e.reads.count(id) && b->scope == Scope::GM && b->role != TensorRole::Input) ok = false;
      }
      for (size_t j = 0; ok && j < body.size(); ++j) {
        if (j == i) continue;
        // Nothing else writes what it writes; nothing before it reads that (the first
        // iteration would see the old value); what it reads is written only by statements
        // moved before it.
        if (meets(fx[j].writes, e.writes) || (j < i && meets(fx[j].reads, e.writes)) ||
            (meets(fx[j].writes, e.reads) && !(j < i && hoisted.count(j))))
          ok = false;
      }
      if (!ok) continue;
      hoisted.insert(i);
      site.stmts.push_back(s.get());
    }
    if (site.stmts.empty()) continue;
    site.what = "the same in every iteration: " + describe(site.stmts);
    out.push_back(std::move(site));
  }
  return out;
}

Program pipeline_loop(const Program& p, const LoopSite& site, int num_stages) {
  return edit_loop(p, site, [&](const ForStmt& f, const Stmt& self) {
    ForStmt g = f;
    g.kind = ForKind::Pipelined;
    g.num_stages = num_stages;
    g.cross_interval = 1;
    return make_stmt(std::move(g), self->loc);
  });
}

Program hoist(const Program& p, const LoopSite& site) {
  return edit_loop(p, site, [&](const ForStmt& f, const Stmt& self) {
    std::vector<Stmt> before, rest;
    for (const auto& s : flatten(f.body))
      (std::find(site.stmts.begin(), site.stmts.end(), s.get()) != site.stmts.end() ? before : rest)
          .push_back(s);
    ForStmt g = f;
    g.body = seq(std::move(rest), f.body->loc);
    before.push_back(make_stmt(std::move(g), self->loc));
    return seq(std::move(before), self->loc);
  });
}

}  // namespace tilepipe::passes

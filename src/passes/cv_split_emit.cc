// Step 3 of the Cube/Vector split: the program emitted once per core kind from the plan
// (crossing halves with their flags, hand-off flags, pipeline stages as loops over a batch),
// each into its scope, with the workspaces' initial credits.
#include "passes/cv_split_internal.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes::cv_split_detail {

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
  if (kind == CoreKind::V && nv > 1) {  // the vector core's rows (one AIV: all of them)
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

Program Splitter::run() {
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

Stmt Splitter::emit(const Stmt& s, CoreKind k) {
  if (!s) return nullptr;
  return std::visit(
      [&](const auto& n) -> Stmt {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>) {
          std::vector<Stmt> out;
          for (const auto& c : n.body) {
            auto at = [&](auto& anchors) {
              auto it = anchors.find({c.get(), k});
              if (it != anchors.end()) out.insert(out.end(), it->second.begin(), it->second.end());
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

template <class T>
Stmt Splitter::emit_crossing(const T& n, const Crossing& x, const Stmt& s, CoreKind k) {
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

Stmt Splitter::emit_pipeline(const Pipeline& pl, const Stmt& self, CoreKind k) {
  std::vector<Stmt> out;
  for (const auto& h : hoisted_.at(self.get()))
    if (Stmt e = emit(h, k)) out.push_back(e);
  std::vector<Stmt> batch;
  for (const auto& sg : pl.stages) {
    if (sg.kind != k) continue;
    for (int id : sg.produces)
      batch.push_back(
          make_stmt(WaitCrossFlagStmt{make_int(crossings_[static_cast<size_t>(id)].free)}, pl.loc));
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

}  // namespace tilepipe::passes::cv_split_detail

// Step 2 of the Cube/Vector split: the crossings (L0C -> UB / UB -> L1 copies through GM
// workspaces), the author's hand-offs and the cross-core pipelines are planned: workspaces,
// flag ids, stages and the versions of buffers that flow between stages.
#include <fmt/format.h>

#include <algorithm>

#include "passes/cv_split_internal.h"
#include "passes/rewrite.h"

namespace tilepipe::passes::cv_split_detail {

namespace {

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

Stmt guarded(Expr cond, Stmt s, const Loc& loc) {
  if (auto c = as_const(cond)) return *c ? s : nullptr;
  return make_stmt(IfStmt{std::move(cond), std::move(s), nullptr}, loc);
}

}  // namespace

void Splitter::check_flags(const Loc& loc, const std::string& what) const {
  if (next_flag_ + 2 > chip_.cross_flag_ids)
    fail(loc,
         fmt::format("{} needs cross-core flags {} and {}, but the chip has {} per core (two "
                     "per crossing)",
                     what, next_flag_, next_flag_ + 1, chip_.cross_flag_ids),
         "exchange fewer tiles between the cores (merge them into one buffer)");
}

int Splitter::new_handoff(const Handoff& h, int64_t slots, const Loc& loc) {
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

void Splitter::plan_handoff(const Handoff& h) {
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

const std::string& Splitter::tensor_name(int crossing) const {
  return handoffs_.at(crossings_[static_cast<size_t>(crossing)].tensor).buf->name;
}

int Splitter::new_crossing(const Stmt& s, int64_t slots) {
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

void Splitter::plan(const Stmt& s, bool in_pipeline) {
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
        } else if constexpr (std::is_same_v<T, LetStmt>) {
          fail(s->loc,
               fmt::format("a scalar binding of '{}' in unscoped code: the Cube/Vector split "
                           "does not place bindings",
                           n.var->name),
               "bind it inside a scope (T.Scope), or write the value into its uses");
        } else {
          if (is_crossing(s)) new_crossing(s, 1);
        }
      },
      s->node);
}

void Splitter::plan_pipeline(const ForStmt& f, const Stmt& self) {
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
    Expr it = make_binary(BinOp::Add, make_binary(BinOp::Mul, make_var_ref(pl.k), make_int(ns)), i);
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
        sg.body.push_back(guarded(
            sig, make_stmt(SetCrossFlagStmt{x.out_pipe, make_int(x.ready), 2}, st->loc), st->loc));
      } else {
        sg.consumes.push_back(cid);
        sg.body.push_back(
            guarded(w, make_stmt(WaitCrossFlagStmt{make_int(x.ready)}, st->loc), st->loc));
        sg.body.push_back(crossing_copy(c, x, r.kind, i, nv_, st->loc));
      }
    }
    Substitute sub({{f.var->id, j}}, false);
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

void Splitter::version_stages(const Stmt& self, Pipeline& pl, int64_t ns) {
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

}  // namespace tilepipe::passes::cv_split_detail

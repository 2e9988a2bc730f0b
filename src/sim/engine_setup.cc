// The engine before its first step and after its last (class Engine, engine.h): per
// template the instruction cost, the issue facts and start codes, fetch's code of every
// block; the cores and their cross-core flags; the SimResult of the run.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>

#include "engine.h"
#include "tilepipe/numeric.h"

namespace tilepipe::sim {

Engine::Engine(const lower::LoweredProgram& p, const ChipConfig& chip, HostData* io,
               const SimOptions& o)
    : p_(p),
      chip_(chip),
      io_(io),
      opts_(o),
      functional_(o.mode == Mode::Functional),
      depth_(chip.pipe_queue_depth),
      launch_(chip.launch_cycles()),
      block_start_(chip.block_start_cycles()),
      hbm_(chip.hbm_bw, launch_),
      l2_(chip.l2_bw, launch_),
      l2res_(tensor_bytes(p), chip.l2_bytes),
      fills_(p.gm.size()) {
  // die.l2_warm_inputs: the inputs a benchmark's earlier calls left in the L2 (each that
  // fits whole, in argument order; one larger than what is left was streamed through an
  // LRU cache and leaves nothing a read from its start could hit).
  if (chip.l2_warm_inputs)
    for (size_t i = 0; i < p.gm.size(); ++i)
      if (!p.gm[i].workspace && p.gm[i].buffer->role == ir::TensorRole::Input)
        l2res_.preload(static_cast<int>(i), p.gm[i].buffer->bytes());
  for (const auto* cp : {&p.aic, &p.aiv})
    for (const auto& t : cp->instrs)
      for (const auto& site : o.whatif_free_sites)
        if (t.loc.str() == site) free_ops_.insert(&t);
  // An instruction's cost depends on its template only (static shapes): once per template.
  for (int k = 0; k < 2; ++k) {
    const auto& instrs = (k == 0 ? p.aic : p.aiv).instrs;
    for (const auto& t : instrs) {
      Instr in;
      in.t = &t;
      for (int i = 0; i < t.num_acc; ++i)
        in.acc[static_cast<size_t>(i)].t = &t.acc[static_cast<size_t>(i)];
      costs_[static_cast<size_t>(k)].push_back(instr_cost(in, chip));
      facts_[static_cast<size_t>(k)].push_back(issue_facts(t, starts_[static_cast<size_t>(k)]));
    }
    compile_code((k == 0 ? p.aic : p.aiv).body, facts_[static_cast<size_t>(k)]);
  }
}

std::vector<int64_t> Engine::tensor_bytes(const lower::LoweredProgram& p) {
  std::vector<int64_t> b;
  for (const auto& g : p.gm) b.push_back(g.buffer->bytes());
  return b;
}

void Engine::setup_cores() {
  int n = static_cast<int>(std::min<int64_t>(chip_.ai_cores, p_.block_num));
  cross_.resize(static_cast<size_t>(n));
  for (auto& x : cross_) {
    for (int v = 0; v < 2; ++v) {
      x.c2v[v].resize(static_cast<size_t>(chip_.cross_flag_ids));
      x.v2c[v].resize(static_cast<size_t>(chip_.cross_flag_ids));
    }
  }
  block_ends_.resize(static_cast<size_t>(n));
  sync_all_.resize(static_cast<size_t>(chip_.cross_flag_ids));
  check_sync_all();
  if (opts_.detect_races) {
    race_ = std::make_unique<RaceDetector>(n);
    if (functional_) race_->defer_same_value_writes();  // the values decide write-write pairs
  }
  op_hooks_ = race_ || opts_.observer || functional_;
  if (functional_) {
    written_.resize(p_.gm.size());
    for (size_t i = 0; i < p_.gm.size(); ++i)
      if (!p_.gm[i].workspace && p_.gm[i].buffer->role == ir::TensorRole::Output)
        written_[i].assign(static_cast<size_t>(p_.gm[i].buffer->elements()), false);
  }
  for (int ai = 0; ai < n; ++ai) {
    if (!p_.aic.empty()) add_core(CoreKind::C, ai, 0, &p_.aic);
    if (!p_.aiv.empty())
      for (int v = 0; v < chip_.aiv_per_core; ++v) add_core(CoreKind::V, ai, v, &p_.aiv);
  }
  members_ = n > 0 ? static_cast<int>(cores_.size()) / n : 0;
  for (auto& c : cores_) push(c);
}

/// T.sync_all waits for every core of the launch at once: every block must be resident
/// (a later block would start only after the earlier ones end, which wait for it), and its
/// flag id is its own (a mode-2 set of that id would be taken by its waits, as on the NPU).
void Engine::check_sync_all() {
  std::map<int64_t, const lower::OpTemplate*> all, pair;  // constant ids: T.sync_all / mode 2
  for (const auto* prog : {&p_.aic, &p_.aiv})
    for (const auto& t : prog->instrs) {
      if (t.op != Opcode::SetCross) continue;
      if (is_sync_all(t) && p_.block_num > chip_.ai_cores)
        fail(t.loc, "sync-all",
             fmt::format("T.sync_all waits for every block at once, and {} blocks do not fit "
                         "on the {} AI cores: the first ones would wait forever for the rest "
                         "(a hang on the NPU)",
                         p_.block_num, chip_.ai_cores),
             fmt::format("launch at most {} blocks and loop over the work inside", chip_.ai_cores));
      if (t.flag_id.is_const()) (is_sync_all(t) ? all : pair).emplace(t.flag_id.ops[0].value, &t);
    }
  for (const auto& [id, t] : pair)
    if (all.count(id))
      fail(t->loc, "sync-all",
           fmt::format("cross-core flag #{} is also T.sync_all's (at {}): its waits would take "
                       "this set",
                       id, all.at(id)->loc.str()),
           "use another cross-core flag id");
}

void Engine::add_core(CoreKind kind, int ai, int vid, const lower::CoreProgram* prog) {
  Core c;
  c.index = static_cast<int>(cores_.size());
  c.kind = kind;
  c.ai_core = ai;
  c.vid = vid;
  c.prog = prog;
  c.costs = costs_[kind == CoreKind::C ? 0 : 1].data();
  c.slots.assign(static_cast<size_t>(prog->num_slots), 0);
  c.slots[lower::kSlotVid] = vid;
  c.next_block = ai;
  c.t = launch_;  // the kernel's first blocks start after the launch
  c.flags.resize(static_cast<size_t>(kPipes * kPipes * chip_.event_ids));
  c.tally.waits.resize(prog->instrs.size());
  for (auto& ps : c.pipes) ps.started.assign(static_cast<size_t>(chip_.pipe_queue_depth), 0.0);
  if (!prog->loads.empty())
    c.dcache =
        ScalarDCache(chip_.scalar_dcache_bytes, chip_.scalar_dcache_line, chip_.scalar_dcache_ways);
  // Values live where the run needs them: everywhere, or where scalar loads read and where
  // the ops computing what they read write (OpTemplate::materialise).
  const bool materialises = std::any_of(prog->instrs.begin(), prog->instrs.end(),
                                        [](const lower::OpTemplate& t) { return t.materialise; });
  if (functional_ || !prog->loads.empty() || materialises)
    for (int s = 0; s < 6; ++s)
      c.local[static_cast<size_t>(s)].assign(static_cast<size_t>(prog->scope_bytes[s]), 0);
  c.stats.name = core_name(ai, kind, vid);
  if (race_) race_->name_core(c.index, c.stats.name);
  c.stats.ai_core = ai;
  c.role = kind == CoreKind::C ? 0 : 1 + vid;
  c.stats.kind = kind;
  c.stats.vid = vid;
  cores_.push_back(std::move(c));
}

/// Builds the code of block b and of the blocks inside it; returns it.
const std::vector<int32_t>& Engine::compile_code(const lower::Block& b,
                                                 const std::vector<IssueFacts>& facts) {
  auto& code = code_[&b];  // a node of the map: stays where it is as the map grows
  for (const auto& it : b.items) {
    if (it.kind == lower::Item::Instr) {
      code.push_back(facts[static_cast<size_t>(it.instr)].skipped ? kSkipped : it.instr);
      continue;
    }
    auto sub = [&](const std::shared_ptr<lower::Block>& body) {
      return body ? &compile_code(*body, facts) : nullptr;
    };
    Control ctl{&it, sub(it.body), sub(it.else_body)};
    code.push_back(kControl - static_cast<int32_t>(controls_.size()));
    controls_.push_back(ctl);
  }
  return code;
}

/// The StartCode of expression x, checked against [0, hi].
StartCode Engine::start_code(const lower::CExpr& x, int64_t hi, int64_t stride, int acc, int d) {
  StartCode s;
  s.hi = hi;
  s.stride = stride;
  s.acc = static_cast<int8_t>(acc);
  s.d = static_cast<int8_t>(d);
  const auto& a = x.aff;
  auto fits = [](int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; };
  s.generic = x.has_load || x.form != lower::CExpr::Form::Affine || a.nterms > 2 || a.nsteps < 0 ||
              a.nsteps > 1;
  for (int i = 0; i < a.nterms && !s.generic; ++i)
    s.generic = !fits(a.term_coef[static_cast<size_t>(i)]) ||
                a.term_slot[static_cast<size_t>(i)] > UINT8_MAX;
  if (a.nsteps == 1 && !s.generic) {
    const lower::CExpr::Step& st = a.steps[0];
    s.generic = !fits(st.mask);
    s.mask = static_cast<int32_t>(st.mask);
    s.shift = static_cast<uint8_t>(st.shift);
    s.mul = st.mul;
    s.add = st.add;
  }
  if (s.generic) return s;
  s.c0 = a.c0;
  if (a.nterms > 0) {
    s.coef0 = static_cast<int32_t>(a.term_coef[0]);
    s.slot0 = static_cast<uint8_t>(a.term_slot[0]);
  }
  if (a.nterms > 1) {
    s.coef1 = static_cast<int32_t>(a.term_coef[1]);
    s.slot1 = static_cast<uint8_t>(a.term_slot[1]);
  }
  return s;
}

/// How many ids the flags of a sync instruction have (event ids per pipe pair, or
/// cross-core flag ids).
int64_t Engine::flag_ids(const lower::OpTemplate& t) const {
  return t.op == Opcode::SetCross || t.op == Opcode::WaitCross ? chip_.cross_flag_ids
                                                               : chip_.event_ids;
}

IssueFacts Engine::issue_facts(const lower::OpTemplate& t, std::vector<StartCode>& starts) const {
  IssueFacts f;
  f.first_start = static_cast<uint32_t>(starts.size());
  f.num_acc = static_cast<uint8_t>(t.num_acc);
  for (int i = 0; i < t.num_acc; ++i) {
    const lower::AccessTemplate& a = t.acc[static_cast<size_t>(i)];
    f.const_off[static_cast<size_t>(i)] = a.const_off;
    for (int k = 0; k < a.nvar; ++k) {
      const size_t d = static_cast<size_t>(a.var_dim[static_cast<size_t>(k)]);
      starts.push_back(start_code(a.start[d], a.dim[d] - a.dim_extent[d], a.dim_stride[d], i,
                                  static_cast<int>(d)));
    }
  }
  f.num_starts = static_cast<uint32_t>(starts.size()) - f.first_start;
  f.has_scalar = t.scalar_kind != lower::OpTemplate::ScalarKind::None;
  f.pipe = t.pipe;
  if (t.op == Opcode::WaitCross || (t.op == Opcode::WaitFlag && t.flag_dst == Pipe::S))
    f.route = IssueFacts::ScalarWait;
  else if (t.pipe == Pipe::S && t.op != Opcode::Vec)  // an element store (Vec on S) is an Op
    f.route = IssueFacts::ScalarSet;
  else if (t.op == Opcode::SetFlag || t.op == Opcode::SetCross)
    f.route = IssueFacts::Set;
  else if (t.op == Opcode::WaitFlag && !t.dropped)
    f.route = IssueFacts::Wait;
  else if (t.op == Opcode::WaitFlag || t.op == Opcode::Barrier)
    f.route = IssueFacts::Queued;
  f.skipped = t.dropped && t.op != Opcode::WaitFlag && t.op != Opcode::WaitCross;
  // A vector compute op is the original's count-form call: the scalar unit also switches the
  // mask mode and writes the mask before it and restores both after (issue.vector_mask_ops).
  // An element store (a Vec on S) is the scalar unit's own write of UB, one scalar op.
  const bool store = t.op == Opcode::Vec && t.pipe == Pipe::S;
  const bool masked = t.op == Opcode::Vec && !store && t.tile_op != ir::TileOpKind::Reinterpret;
  f.issue_cycles = t.dropped ? 0
                             : chip_.issue_cycles +
                                   (masked ? chip_.vector_mask_ops * chip_.scalar_op_cycles : 0) +
                                   (store ? chip_.scalar_op_cycles : 0);
  if (t.op == Opcode::SetFlag || t.op == Opcode::WaitFlag || t.op == Opcode::SetCross ||
      t.op == Opcode::WaitCross) {
    // A constant id in range needs no work per instruction; any other one is checked
    // where it is evaluated (instantiate), so its error names the loop state.
    const int64_t limit = flag_ids(t);
    const bool fixed =
        t.flag_id.is_const() && t.flag_id.ops[0].value >= 0 && t.flag_id.ops[0].value < limit;
    f.eval_flag = !fixed;
    if (fixed) f.flag_id = static_cast<int32_t>(t.flag_id.ops[0].value);
    if (!fixed) starts.push_back(start_code(t.flag_id, limit - 1, 0, 0, -1));
  }
  return f;
}

SimResult Engine::collect() {
  SimResult r;
  r.fast_forward = jumped_;
  std::map<const lower::OpTemplate*, WaitSite> waits;
  for (const auto& c : cores_) {
    r.instructions += c.tally.executed;
    r.gm_bytes_hbm += c.tally.hbm_bytes;
    r.scalar_gm_loads.reads += c.tally.scalar_loads.reads;
    r.scalar_gm_loads.misses += c.tally.scalar_loads.misses;
    r.gm_bytes_l2 += c.tally.l2_bytes;
    for (const auto& w : c.tally.waits) {
      if (!w.op) continue;
      auto& site = waits[w.op];
      site.op = w.op;
      site.cycles += w.cycles;
      site.count += w.count;
    }
  }
  for (const auto& [op, w] : waits) r.waits.push_back(w);
  std::stable_sort(r.waits.begin(), r.waits.end(), [](const WaitSite& a, const WaitSite& b) {
    if (a.cycles != b.cycles) return a.cycles > b.cycles;
    return std::tie(a.op->loc.line, a.op->loc.column, a.op->name) <
           std::tie(b.op->loc.line, b.op->loc.column, b.op->name);
  });
  r.lower_bound = opts_.lower_bound_only;
  for (auto& c : cores_) {
    double end = c.t;
    for (const auto& ps : c.pipes) end = std::max(end, ps.done);
    if (opts_.lower_bound_only) {
      // Every pipe works after the launch and outside the starts of the core's later blocks.
      const int64_t blocks = (p_.block_num - c.ai_core + chip_.ai_cores - 1) / chip_.ai_cores;
      const double overhead = launch_ + static_cast<double>(blocks - 1) * block_start_;
      for (const auto& st : c.tally.pipes) end = std::max(end, overhead + st.busy_cycles);
    }
    c.stats.end_cycle = end;
    c.stats.pipes = c.tally.pipes;
    r.cycles = std::max(r.cycles, end);
  }
  for (auto& c : cores_) {
    if (!opts_.lower_bound_only) {
      for (int p = 0; p < kPipes; ++p) {
        Pipe pp = static_cast<Pipe>(p);
        if (!has_pipe(c.kind, pp)) continue;
        CycleAccount& a = c.stats.pipes[static_cast<size_t>(p)].account;
        if (pp == Pipe::S) {
          a.busy = c.stats.pipes[static_cast<size_t>(p)].busy_cycles;
          a.head = launch_;
          a.cross = c.tally.blocked_cross;
          a.flag = c.tally.blocked_flag;
          a.barrier = c.tally.blocked_barrier;
          a.dep = c.tally.blocked_queue;
          a.tail = std::max(0.0, r.cycles - c.t);
          continue;
        }
        const PipeAcct& pa = c.pipes[static_cast<size_t>(p)].acct;  // `a` is tally's account
        if (pa.started)
          a.tail = std::max(0.0, r.cycles - pa.t);
        else
          a.head = r.cycles;
      }
    }
    r.cores.push_back(c.stats);
  }
  std::array<double, 2> psum{};
  std::array<int64_t, 2> pn{};
  for (const auto& c : cores_) {
    for (auto [to, from] : {std::pair{&r.c2v, &c.tally.c2v}, std::pair{&r.v2c, &c.tally.v2c}}) {
      to->sets += from->sets;
      to->waits += from->waits;
      to->wait_cycles += from->wait_cycles;
      to->max_pending = std::max(to->max_pending, from->max_pending);
    }
    for (size_t d = 0; d < 2; ++d) {
      psum[d] += c.tally.pending_sum[d];
      pn[d] += c.tally.pending_n[d];
    }
  }
  if (pn[0]) r.c2v.mean_pending = psum[0] / static_cast<double>(pn[0]);
  if (pn[1]) r.v2c.mean_pending = psum[1] / static_cast<double>(pn[1]);
  values_exec_->drain_all();
  if (values_exec_->skipped()) interrupted(r.cycles);
  for (size_t i = 0; i < written_.size(); ++i) {
    const auto& w = written_[i];
    const auto first = std::find(w.begin(), w.end(), false);
    if (first == w.end()) continue;
    r.unwritten.push_back({p_.gm[i].buffer->name, std::count(first, w.end(), false),
                           static_cast<int64_t>(w.size()), first - w.begin()});
  }
  if (functional_ && io_) {
    const auto& keep = opts_.write_back;
    for (size_t i = 0; i < p_.gm.size(); ++i) {
      const auto& b = *p_.gm[i].buffer;
      if (!keep.empty() && std::find(keep.begin(), keep.end(), b.name) == keep.end()) continue;
      if (opts_.raw_outputs && (b.dtype == ir::DType::I64 || b.dtype == ir::DType::U64)) {
        (*opts_.raw_outputs)[b.name] = gm_[i];
        continue;
      }
      auto& out = (*io_)[b.name];
      out.resize(static_cast<size_t>(b.elements()));
      load_elems(b.dtype, gm_[i].data(), out.data(), out.size());
    }
  }
  return r;
}

}  // namespace tilepipe::sim

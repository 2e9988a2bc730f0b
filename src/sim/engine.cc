// The engine's run loop and issue core (class Engine, engine.h): the schedule of cores,
// each core's scalar unit walking its control flow and issuing instructions, and the pipes
// starting them (queues, hazards, a GM copy's time through the die's shared bandwidth, the
// cycle account, intra-core sets and waits). The hot path of every instruction; the other
// sections are in engine_*.cc.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>

#include "engine.h"
#include "tilepipe/numeric.h"

namespace tilepipe::sim {

namespace {

/// Position of a pipe in its core's dataflow; a flag against the flow is a credit.
constexpr int flow_rank(Pipe p) {
  switch (p) {
    case Pipe::MTE2:
      return 0;
    case Pipe::MTE1:
    case Pipe::V:
      return 1;
    case Pipe::M:
    case Pipe::MTE3:
      return 2;
    case Pipe::FIX:
      return 3;
    case Pipe::S:
      return -1;
  }
  return -1;
}

/// What a pipe's head waiting on the flag src -> dst waits for, by src * kPipes + dst: a
/// table, since every wait_flag asks.
constexpr auto kWaitGap = [] {
  std::array<GapKind, ir::kNumPipes * ir::kNumPipes> g{};
  for (int s = 0; s < ir::kNumPipes; ++s)
    for (int d = 0; d < ir::kNumPipes; ++d)
      g[static_cast<size_t>(s * ir::kNumPipes + d)] =
          flow_rank(static_cast<Pipe>(d)) < flow_rank(static_cast<Pipe>(s)) ? kGapSlot : kGapFlag;
  return g;
}();

int mem_key(const Access& a) {
  return a.t->memory;
}

}  // namespace

SimResult Engine::run() {
  setup_memory();
  setup_cores();
  for (const auto& m : gm_) values_ |= !m.empty();
  for (const Core& c : cores_)
    for (const auto& m : c.local) values_ |= !m.empty();
  setup_values();
  setup_fast_forward();
  if (cancelled()) interrupted(0);
  const auto started = std::chrono::steady_clock::now();
  const bool limits = opts_.max_wall_s > 0 || opts_.cancel;
  uint32_t steps = 0;
  while (!heap_.empty()) {
    if (jump_check_) try_jump();
    if (clocks_.size() >= clocks_collect_at_ && free_clocks_.empty()) [[unlikely]]
      collect_clocks();
    auto [t, idx] = heap_.top();
    if (opts_.progress) opts_.progress(t);
    // A step runs one core for at most a quantum; the clock and the cancel flag are read
    // every 4096 of them.
    if (limits && (++steps & 4095) == 0) [[unlikely]]
      check_limits(started, t);
    heap_.pop();
    Core& c = cores_[static_cast<size_t>(idx)];
    c.in_heap = false;
    double horizon = heap_.empty() ? 1e300 : heap_.top().first + kQuantum;
    if (opts_.lower_bound_only)
      run_core<true>(c, horizon);
    else
      run_core<false>(c, horizon);
  }
  if (!opts_.lower_bound_only) check_finished();
  if (race_ && race_found()) throw UserError(race_->take_reports());
  SimResult r = collect();
  if (!opts_.lower_bound_only) check_invariants(r);
  return r;
}

/// Walks control flow to the next instruction template: its index, kStreamEnd or
/// kBlockWait.
int Engine::fetch(Core& c) {
  for (;;) {
    if (c.stack.empty()) [[unlikely]] {
      if (c.next_block >= p_.block_num) return kStreamEnd;
      if (!next_block(c)) return kBlockWait;
    }
    Frame& f = c.stack.back();
    if (f.pos < f.size) {
      const int32_t k = f.code[f.pos++];
      if (k >= 0) return k;
      // A dropped set or barrier is not issued (mutation testing); a dropped wait is, to
      // keep the flag counts balanced (consume_dropped).
      if (k == kSkipped) continue;
      enter(c, controls_[static_cast<size_t>(kControl - k)]);
      continue;
    }
    if (f.loop) {
      int64_t& v = c.slots[static_cast<size_t>(f.loop->slot)];
      v += f.loop->step;
      scalar(c, chip_.scalar_op_cycles);  // increment + compare + branch of the loop
      if (v < f.end) {
        f.pos = 0;
        if (ff_) {
          if (const OuterLoop* o = outer_loop(f.loop)) {
            c.history.period = o->period;
            c.history.gm_moves = o->gm_moves;
            jump_check_ |= record_backedge(c, f, flags_in_flight(c), opts_.fast_forward);
          }
        }
        continue;
      }
    }
    c.stack.pop_back();
  }
}

/// Core c has issued its block and its AI core has another. As on the hardware, a block
/// starts only once the previous block on the AI core has finished on every core of it
/// (the kernel function's end waits for every pipe; a Cube/Vector kernel's blocks run on
/// groups of AIC + AIVs), die.block_start_us later; flags do not carry over. False while
/// c waits for the others: it leaves the schedule, and the last one to finish starts the
/// next block on every core of the group.
bool Engine::next_block(Core& c) {
  if (c.next_block == c.ai_core) {  // its first block: starts at the launch
    enter_block(c);
    return true;
  }
  if (opts_.lower_bound_only) {  // no scheduling: only the start's cost
    c.t += block_start_;
    enter_block(c);
    return true;
  }
  double end = c.t;
  for (const auto& ps : c.pipes) {
    if (!ps.queue.empty()) return false;  // a wait that never ends: check_finished reports it
    end = std::max(end, ps.done);
  }
  BlockEnd& b = block_ends_[static_cast<size_t>(c.ai_core)];
  b.end = std::max(b.end, end);
  if (++b.arrived < members_) return false;
  const double start = b.end + block_start_;
  b = {};
  const std::span<Core> group(cores_.data() + static_cast<ptrdiff_t>(c.ai_core) * members_,
                              static_cast<size_t>(members_));
  std::vector<Diagnostic> diags;
  const std::string when = fmt::format("block cid={} ends", c.slots[lower::kSlotCid]);
  for (const Core& m : group) unmatched_flags(m, when, diags);
  unmatched_cross(static_cast<size_t>(c.ai_core), when, diags);
  if (!diags.empty()) fail_flags(std::move(diags));
  if (race_) race_->barrier(c.ai_core);
  for (Core& m : group) {
    const double before = m.t;
    m.t = start;
    block(m, before, kBlockedBarrier);
    m.s_clock = -1;
    m.history.snaps.clear();  // a new loop instance: fast-forward starts a new history
    enter_block(m);
    if (&m != &c) push(m);
  }
  return true;
}

/// Core c starts its next block.
void Engine::enter_block(Core& c) {
  c.slots[lower::kSlotCid] = c.next_block;
  c.next_block += chip_.ai_cores;
  c.stack.push_back(frame(&c.prog->body, code_.at(&c.prog->body), nullptr, 0));
}

/// A loop or if of the control flow: evaluates its bounds or condition and enters the body.
void Engine::enter(Core& c, const Control& ctl) {
  const lower::Item& it = *ctl.item;
  const double sc = chip_.scalar_op_cycles;
  if (it.kind == lower::Item::Let) {
    c.slots[static_cast<size_t>(it.slot)] = eval(c, it.begin, it.loc);
    scalar(c, sc);  // the move into the register
    return;
  }
  if (it.kind == lower::Item::Loop) {
    int64_t b = eval(c, it.begin, it.loc), e = eval(c, it.end, it.loc);
    scalar(c, 2 * sc);
    if (b < e) {
      c.slots[static_cast<size_t>(it.slot)] = b;
      c.stack.push_back(frame(it.body.get(), *ctl.body, &it, e));
    }
    return;
  }
  scalar(c, sc);
  bool cond = eval(c, it.cond, it.loc) != 0;
  const lower::Block* b = cond ? it.body.get() : it.else_body.get();
  if (b && !b->items.empty())
    c.stack.push_back(frame(b, *(cond ? ctl.body : ctl.else_body), nullptr, 0));
}

Frame Engine::frame(const lower::Block* b, const std::vector<int32_t>& code,
                    const lower::Item* loop, int64_t end) {
  return {b, 0, loop, end, code.data(), code.size()};
}

Access Engine::resolve(Core& c, const lower::AccessTemplate& a, const lower::OpTemplate& t) {
  int64_t off = a.const_off;
  for (int k = 0; k < a.nvar; ++k) {
    const int d = a.var_dim[static_cast<size_t>(k)];
    const int64_t s = eval(c, a.start[d], t.loc);
    if (s < 0 || s + a.dim_extent[d] > a.dim[d]) [[unlikely]]
      slice_out_of_bounds(c, a, t, d, s);
    off += s * a.dim_stride[d];
  }
  return Access{&a, nullptr, off};  // mem: execute_values, where values are kept
}

/// Fills `in` (the reused scratch slot or the pending slot: every field but `issue`, which
/// the issue loop sets, is written) for template t.
void Engine::instantiate(Core& c, const lower::OpTemplate& t, const IssueFacts& f,
                         const StartCode* starts, Instr& in) {
  in.t = &t;
  for (int i = 0; i < f.num_acc; ++i)
    in.acc[static_cast<size_t>(i)] =
        Access{&t.acc[static_cast<size_t>(i)], nullptr, f.const_off[static_cast<size_t>(i)]};
  const StartCode* s = starts + f.first_start;
  for (const StartCode* e = s + f.num_starts; s != e; ++s) {
    const int64_t v = value(c, *s, t);
    if (v < 0 || v > s->hi) [[unlikely]]
      slice_out_of_bounds(c, t.acc[static_cast<size_t>(s->acc)], t, s->d, v);
    in.acc[static_cast<size_t>(s->acc)].offset += v * s->stride;
  }
  in.scalar = 0;
  in.flag_id = f.flag_id;
  in.s_clock = -1;
  if (f.has_scalar) [[unlikely]]
    scalar_operand(c, t, in);
  if (f.eval_flag) {
    const int64_t id = value(c, *s, t);  // the entry after the starts
    if (id < 0 || id > s->hi) [[unlikely]]
      bad_flag_id(c, t, id);
    in.flag_id = static_cast<int32_t>(id);
  }
}

/// A StartCode's value for core c.
int64_t Engine::value(Core& c, const StartCode& s, const lower::OpTemplate& t) {
  if (s.generic) [[unlikely]]
    return eval(c, s.d < 0 ? t.flag_id : t.acc[static_cast<size_t>(s.acc)].start[s.d], t.loc);
  const int64_t* slots = c.slots.data();
  const int64_t v = s.c0 + int64_t{s.coef0} * slots[s.slot0] + int64_t{s.coef1} * slots[s.slot1];
  // Unsigned like CExpr::Affine's steps.
  return static_cast<int64_t>(static_cast<uint64_t>((v >> s.shift) & s.mask) *
                                  static_cast<uint64_t>(s.mul) +
                              static_cast<uint64_t>(s.add));
}

/// The scalar operand of a vector instruction (tile ops with a scalar).
void Engine::scalar_operand(Core& c, const lower::OpTemplate& t, Instr& in) {
  switch (t.scalar_kind) {
    case lower::OpTemplate::ScalarKind::Imm:
      in.scalar = t.scalar_imm;
      break;
    case lower::OpTemplate::ScalarKind::Expr:
      in.scalar = static_cast<double>(eval(c, t.scalar_expr, t.loc));
      break;
    case lower::OpTemplate::ScalarKind::UbRead:
      // The scalar unit reads UB now, at issue; a read not ordered after the V write by a
      // V->S flag is a race (reported by check), whatever value it happens to see here.
      {
        const Access r = resolve(c, t.scalar_read, t);
        scalar(c, chip_.scalar_op_cycles);
        if (race_) race_access(c, Pipe::S, r, RaceKind::Read, race_site(c, Pipe::S, in.t));
        // A materialised op (mark_materialised) computes a value a scalar load will read.
        if (functional_ || t.materialise) await_ub(c, r);
        if (functional_ || t.materialise)
          in.scalar = load_elem(t.scalar_read.dtype,
                                memory(c, t.scalar_read) + r.offset * t.scalar_read.elem_bytes);
        break;
      }
    case lower::OpTemplate::ScalarKind::None:
      break;
  }
}

/// Issues core c's instructions until it blocks, its stream ends or its clock passes
/// `horizon`. kBound: lower-bound mode (no flags, no scheduling).
template <bool kBound>
void Engine::run_core(Core& c, double horizon) {
  check_budget(c);
  // The budget is checked where the clock passes it or the horizon, whichever comes first:
  // the clock moves only by issuing.
  const double stop = std::min(horizon, opts_.max_cycles);
  const IssueFacts* facts = facts_[c.kind == CoreKind::C ? 0 : 1].data();
  const StartCode* starts = starts_[c.kind == CoreKind::C ? 0 : 1].data();
  for (;;) {
    if (c.has_pending) {
      if (!try_scalar_wait(c, c.pending)) return;  // stays blocked; woken by a cross set
      c.has_pending = false;
    } else {
      const int k = fetch(c);
      if (k < 0) {
        c.stream_done = k == kStreamEnd;
        return;  // done, or waiting at a block boundary (next_block pushes it back)
      }
      const lower::OpTemplate& t = c.prog->instrs[static_cast<size_t>(k)];
      const IssueFacts& f = facts[k];
      // An instruction for a pipe is built in the engine's scratch slot, which stays in
      // cache (mostly it starts at once; dispatch queues a copy otherwise); a scalar-unit
      // one where the scalar unit may have to keep it (pending).
      const bool queue = !kBound && f.route < IssueFacts::ScalarWait;
      Instr& in = queue ? scratch_ : c.pending;
      instantiate(c, t, f, starts, in);
      if (queue) queue_stall(c, c.pipes[static_cast<size_t>(f.pipe)]);
      scalar(c, f.issue_cycles);
      in.issue = c.t;
      ++c.tally.pipes[static_cast<size_t>(Pipe::S)].instructions;
      if (kBound) {
        bound_dispatch(c, in);
      } else if (!dispatch(c, in, f)) {
        c.has_pending = true;
        return;
      }
    }
    if (c.t > stop) [[unlikely]] {
      check_budget(c);
      push(c);
      return;
    }
  }
}

void Engine::check_budget(const Core& c) {
  if (c.t > opts_.max_cycles) [[unlikely]]
    fail(c.has_pending ? c.pending.t->loc : ir::Loc{}, "cycle-budget",
         fmt::format("{} passed the cycle budget of {:.0f} cycles", c.stats.name, opts_.max_cycles),
         "raise the budget (--max-cycles; from Python tilelang.set_max_cycles) or check for a loop "
         "that does not end");
}

/// The scalar unit stalls while the target pipe's queue is full: the instruction
/// pipe_queue_depth places earlier must have started. (One still blocked on a flag has no
/// start time yet; the queue is then treated as open.)
void Engine::queue_stall(Core& c, const PipeState& ps) {
  const size_t queued = ps.queue.size();
  if (queued >= static_cast<size_t>(depth_)) return;
  // Its slot: dispatched - depth places, which is popped + queued, modulo the depth. Before
  // `depth` instructions were dispatched, a slot no pop wrote yet: 0, shifted like c.t by
  // fast-forward.
  size_t slot = static_cast<size_t>(ps.pop_slot) + queued;
  if (slot >= static_cast<size_t>(depth_)) slot -= static_cast<size_t>(depth_);
  const double free = ps.started[slot];
  if (free <= c.t) return;
  c.tally.blocked_queue += free - c.t;
  c.t = free;
}

/// The head of pipe p's queue started at `start`.
void Engine::leave_queue(PipeState& ps, double start) {
  ps.started[static_cast<size_t>(ps.pop_slot)] = start;
  if (++ps.pop_slot == depth_) ps.pop_slot = 0;
}

/// Accounts pipe p's timeline up to an event that starts at `s` (issued at `issue`) and
/// occupies the pipe for `occ`; the gap before it is charged to `kind` where the
/// instruction was already issued, else to what blocked the scalar unit, else to issue.
/// Inlined: a call costs about as much as its work, once per instruction.
void Engine::account(Core& c, PipeState& ps, PipeStats& st, double issue, double s, double occ,
                     GapKind kind) {
  PipeAcct& pa = ps.acct;
  CycleAccount& ca = st.account;
  if (!pa.started) {
    pa.started = true;
    pa.cursor = c.blocked_base;
    pa.t = std::min(issue, s);
    ca.head = pa.t;
  }
  double a = pa.t;
  if (s > a) {
    double lim = std::min(issue, s);
    if (lim > a) {
      double covered = 0;
      while (pa.cursor < c.blocked_base + c.blocked.size()) {
        const Blocked& iv = c.blocked[pa.cursor - c.blocked_base];
        if (iv.e <= a) {
          ++pa.cursor;
          continue;
        }
        if (iv.b >= lim) break;
        double o = std::min(iv.e, lim) - std::max(iv.b, a);
        (iv.kind == kBlockedCross ? ca.cross : iv.kind == kBlockedFlag ? ca.flag : ca.barrier) += o;
        covered += o;
        if (iv.e > lim) break;
        ++pa.cursor;
      }
      ca.issue += (lim - a) - covered;
    }
    double from = std::max(a, issue), w = s - from;
    if (w > 0) {
      switch (kind) {
        case kGapFlag:
          ca.flag += w;
          break;
        case kGapSlot:
          ca.slot += w;
          break;
        case kGapDep:
          ca.dep += w;
          break;
        case kGapBarrier:
          ca.barrier += w;
          break;
        case kGapNone:
          ca.issue += w;
          break;
      }
    }
    pa.t = s;
  }
  double e = s + occ;
  if (e > pa.t) {
    ca.busy += e - pa.t;
    pa.t = e;
  }
}

/// Lower-bound mode: no flags, no scheduling; each pipe's occupancy at the per-core rate.
void Engine::bound_dispatch(Core& c, Instr& in) {
  const auto& t = *in.t;
  if (lower::is_sync(t.op) || t.pipe == Pipe::S) return;
  PipeStats& st = c.tally.pipes[static_cast<size_t>(t.pipe)];
  Cost cost = cost_of(c, t);
  if (t.op == Opcode::Copy) {
    bool read = in.acc[1].t->scope == ir::Scope::GM;
    const Access& g = read ? in.acc[1] : in.acc[0];
    if (g.t->scope == ir::Scope::GM) {
      double rate = t.pipe == Pipe::MTE2   ? std::max(chip_.mte2_bw_l2, chip_.mte2_bw_hbm)
                    : t.pipe == Pipe::MTE3 ? chip_.mte3_bw
                                           : chip_.fix_bw;
      cost.occupancy = static_cast<double>(g.bytes()) / rate;
    }
  }
  if (free_ops_.count(in.t)) cost.occupancy = 0;
  st.busy_cycles += cost.occupancy;
  ++st.instructions;
  ++c.tally.executed;
  if (t.materialise) execute_values(c, in);
}

/// Sends an instruction to its pipe (or handles it on the scalar unit). False if the
/// scalar unit must block on it.
bool Engine::dispatch(Core& c, Instr& in, const IssueFacts& f) {
  if (f.route == IssueFacts::ScalarWait) return try_scalar_wait(c, in);
  if (f.route == IssueFacts::ScalarSet) {  // set_flag(S, X) / set_cross_flag(S): fires at issue
    fire(c, in, c.t);
    return true;
  }
  if (race_) in.s_clock = scalar_clock(c);
  PipeState& ps = c.pipes[static_cast<size_t>(f.pipe)];
  // Mostly the queue is empty: an instruction that would be its head starts here.
  if (ps.queue.empty()) {
    PipeStats& st = c.tally.pipes[static_cast<size_t>(f.pipe)];
    switch (f.route) {
      case IssueFacts::Op:
        start_op(c, f.pipe, ps, st, in);
        return true;
      case IssueFacts::Set:
        set_now(c, ps, st, in);
        return true;
      case IssueFacts::Wait:  // unless its set has not arrived
        if (wait_now(c, ps, st, in)) return true;
        break;
      default:
        break;
    }
  }
  ps.queue.push_back(in);
  drain(c, f.pipe);
  return true;
}

/// A set fires. Inlined: the intra-core set is a few stores, about the cost of a call.
void Engine::fire(Core& c, const Instr& in, double when) {
  const auto& t = *in.t;
  if (t.op == Opcode::SetCross) {
    deliver_cross(c, in, when);
    return;
  }
  Flag& f = c.flags[flag_key(t.flag_src, t.flag_dst, in.flag_id)];
  SetRecord& r = f.sets.back_slot();  // built in place, committed unless a dropped wait took it
  r = record(c, in, when, when + chip_.flag_latency);
  f.last = {r.time, &t.loc};
  if (f.debt > 0) [[unlikely]] {  // a dropped wait already took this set
    --f.debt;
    return;
  }
  f.sets.commit_back();
  // Mostly the wait is not issued yet and the pipe has nothing to start.
  if (t.flag_dst != Pipe::S && !c.pipes[static_cast<size_t>(t.flag_dst)].queue.empty())
    drain(c, t.flag_dst);
}

/// When `in`, ready at `ready` (issued and its pipe free), starts: later where an operand
/// overlaps a recent write of the pipe that ends later.
double Engine::hazard_start(PipeState& ps, const Instr& in, double ready) const {
  double start = ready;
  // Back-to-back mmads accumulating into one L0C tile pipeline inside the cube
  // (hardware.md): only their L0A/L0B operands order them.
  const int first = in.t->op == Opcode::Mmad ? 1 : 0, n = in.t->num_acc;
  uint32_t live = ps.live;
  for (uint32_t bits = live; bits; bits &= bits - 1) {
    const int i = std::countr_zero(bits);
    const RecentWrite& w = ps.recent[static_cast<size_t>(i)];
    if (w.end <= ready) {  // later instructions are ready no earlier
      live &= ~(uint32_t{1} << i);
      continue;
    }
    if (w.end <= start) continue;  // cannot raise the start
    for (int k = first; k < n; ++k) {
      const Access& a = in.acc[static_cast<size_t>(k)];
      // Most operands share the write's memory: the byte ranges filter first.
      if (w.lo < a.byte_hi() && a.byte_lo() < w.hi && w.mem == mem_key(a)) {
        start = w.end;
        break;  // the other operands give the same w.end
      }
    }
  }
  ps.live = live;
  return start;
}

/// A copy that reads or writes GM: its bytes flow through the die's shared HBM / L2
/// bandwidth, so its occupancy depends on what the other cores move at the same time.
void Engine::gm_transfer(Core& c, const Instr& in, double start, Cost& cost, PipeStats& st) {
  const auto& t = *in.t;
  const int g = gm_operand(t);
  if (g < 0) return;
  double landing = 0;  // the latest in-flight fill among the lines this copy hits
  GmWork w =
      touch_gm(t, in.acc[static_cast<size_t>(g)], l2res_, c.read_ranges, &fills_, start, &landing);
  ++st.transfers;
  st.reloaded_bytes += w.reloaded;
  double core_rate = t.pipe == Pipe::MTE2   ? chip_.mte2_bw_l2
                     : t.pipe == Pipe::MTE3 ? chip_.mte3_bw
                                            : chip_.fix_bw;
  // The bandwidth the runs cost, split like the bytes between HBM and L2.
  const double scale = w.charged / (w.hbm + w.l2);
  double end = start;
  if (w.hbm > 0) end = hbm_.transfer(end, w.hbm * scale, chip_.mte2_bw_hbm, opts_.max_cycles);
  if (w.l2 > 0) end = l2_.transfer(end, w.l2 * scale, core_rate, opts_.max_cycles);
  c.tally.hbm_bytes += w.hbm;
  c.tally.charged_bytes += w.charged;
  c.tally.l2_bytes += w.l2;
  c.tally.pipes[static_cast<size_t>(t.pipe)].bytes += w.hbm + w.l2;
  cost.occupancy = end - start;
  if (t.acc[1].scope != ir::Scope::GM) return;
  // A read served entirely by L2 skips the HBM round trip.
  if (w.hbm == 0 && t.pipe == Pipe::MTE2) cost.latency = chip_.mte2_latency_l2;
  // Its data is complete when its last byte is: a line another core's fill has not landed
  // yet arrives with that fill, or no later than this copy's own miss would have brought it
  // (the transfer that allocated the line may start later in simulated time: the engine
  // processes cores up to 2000 cycles apart, docs/simulator.md).
  if (landing > 0)
    cost.latency = std::max(cost.latency, std::min(landing - end, chip_.mte2_latency));
  // The lines this copy missed land when its data does.
  fills_.filled(end + cost.latency);
}

/// Starts every queued instruction of pipe p that can start.
void Engine::drain(Core& c, Pipe p) {
  PipeState& ps = c.pipes[static_cast<size_t>(p)];
  PipeStats& st = c.tally.pipes[static_cast<size_t>(p)];
  while (!ps.queue.empty()) {
    Instr& head = ps.queue.front();
    const auto& t = *head.t;
    switch (t.op) {
      case Opcode::WaitFlag: {
        if (t.dropped) {
          drop_wait(c, ps, head);
          break;
        }
        if (!start_wait(c, p, ps, st, head)) return;  // blocked until the set arrives
        ps.queue.pop_front();
        break;
      }
      case Opcode::SetFlag:
      case Opcode::SetCross: {
        // Popped first (fire may drain this pipe again), yet its slot stays intact: only
        // run_core pushes to a pipe queue, and fire never gets there.
        ps.queue.pop_front();
        start_set(c, ps, st, head);
        break;
      }
      case Opcode::Barrier: {
        if (opts_.whatif_no_barriers) {
          ++st.instructions;
          leave_queue(ps, std::max(head.issue, ps.ready));
          ps.queue.pop_front();
          break;
        }
        double start = std::max(head.issue, ps.done);
        account(c, ps, st, head.issue, start, 0, kGapBarrier);
        ps.ready = start;
        ps.done = start;
        ++st.instructions;
        leave_queue(ps, start);
        ps.queue.pop_front();
        break;
      }
      default:
        start_op(c, p, ps, st, head);
        ps.queue.pop_front();  // only now: nothing in start_op pushes to this queue
    }
  }
}

/// A wait_flag at the head of pipe p takes its set; false while the set has not arrived.
bool Engine::start_wait(Core& c, Pipe p, PipeState& ps, PipeStats& st, const Instr& head) {
  const auto& t = *head.t;
  auto& q = c.flags[flag_key(t.flag_src, t.flag_dst, head.flag_id)].sets;
  if (q.empty()) return false;
  double start = std::max({head.issue, ps.ready, q.front().time});
  double from = std::max(head.issue, ps.ready);
  st.wait_flag_cycles += start - from;
  account(
      c, ps, st, head.issue, start, 0,
      kWaitGap[static_cast<size_t>(t.flag_src) * ir::kNumPipes + static_cast<size_t>(t.flag_dst)]);
  consumed(c, p, head, q.front(), from, start, false);
  q.pop_front();
  check_double_set(c, q, start, head);
  ps.ready = start;
  ps.done = std::max(ps.done, start);
  ++st.instructions;
  leave_queue(ps, start);
  return true;
}

/// A set_flag / set_cross_flag at the head of its pipe (already popped) fires once the
/// pipe's earlier work is done.
void Engine::start_set(Core& c, PipeState& ps, PipeStats& st, const Instr& in) {
  double when = std::max({in.issue, ps.done, ps.ready});
  ps.ready = std::max(ps.ready, in.issue);
  account(c, ps, st, in.issue, ps.ready, 0, kGapNone);
  ++st.instructions;
  leave_queue(ps, ps.ready);
  fire(c, in, when);
}

// start_set and start_wait for an instruction dispatched to an empty pipe queue: out of
// line, since inlined into dispatch (so run_core) they cost more than the call.
void Engine::set_now(Core& c, PipeState& ps, PipeStats& st, const Instr& in) {
  start_set(c, ps, st, in);
}

bool Engine::wait_now(Core& c, PipeState& ps, PipeStats& st, const Instr& in) {
  return start_wait(c, in.t->pipe, ps, st, in);
}

/// A dropped wait_flag at the head of its pipe: in pipe order, so it takes the same set
/// the wait would take.
void Engine::drop_wait(Core& c, PipeState& ps, const Instr& head) {
  consume_dropped(c, head);
  leave_queue(ps, std::max(head.issue, ps.ready));
  ps.queue.pop_front();
}

/// Starts a compute or copy instruction at the head of pipe p.
void Engine::start_op(Core& c, Pipe p, PipeState& ps, PipeStats& st, const Instr& in) {
  const auto& t = *in.t;
  Cost cost = cost_of(c, t);
  const double ready = std::max(in.issue, ps.ready), start = hazard_start(ps, in, ready);
  leave_queue(ps, start);
  st.wait_dep_cycles += start - ready;
  if (t.op == Opcode::Copy) gm_transfer(c, in, start, cost, st);
  if (!free_ops_.empty() && free_ops_.count(in.t)) cost = Cost{};
  account(c, ps, st, in.issue, start, cost.occupancy, kGapDep);
  double end = start + cost.occupancy + cost.latency;
  if (end > opts_.max_cycles) [[unlikely]]
    over_budget(c, t, end);
  ps.ready = start + cost.occupancy;
  ps.done = std::max(ps.done, end);
  st.busy_cycles += cost.occupancy;
  ++st.instructions;
  ++c.tally.executed;
  const Access& d = in.acc[0];
  ps.recent[static_cast<size_t>(ps.next_recent)] = {mem_key(d), d.byte_lo(), d.byte_hi(), end};
  ps.live |= uint32_t{1} << ps.next_recent;
  ps.next_recent = (ps.next_recent + 1) & (PipeState::kRecent - 1);
  if (op_hooks_ || t.materialise) [[unlikely]]
    after_op(c, p, in, start, end, cost.occupancy);
}

/// What start_op does besides timing: race detection and the observer, values.
void Engine::after_op(Core& c, Pipe p, const Instr& in, double start, double end,
                      double occupancy) {
  if (race_ || opts_.observer) observe_op(c, p, in, start, end, occupancy);
  if (functional_ || in.t->materialise) execute_values(c, in);
}

std::string core_name(int ai_core, ir::CoreKind kind, int vid) {
  return kind == CoreKind::C ? fmt::format("core{}.AIC", ai_core)
                             : fmt::format("core{}.AIV{}", ai_core, vid);
}

SimResult simulate(const lower::LoweredProgram& prog, const ChipConfig& chip, HostData* io,
                   const SimOptions& opts) {
  return Engine(prog, chip, io, opts).run();
}

}  // namespace tilepipe::sim

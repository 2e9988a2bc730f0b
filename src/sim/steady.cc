#include "steady.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

namespace tilepipe::sim {

void Tally::add_iterations(const Tally& later, const Tally& earlier, int64_t span, int64_t m) {
  // Counts grow by the same amount every iteration of a steady window: exact integers.
  const double f = static_cast<double>(m) / static_cast<double>(span);
  auto count = [&](int64_t a, int64_t b) { return (a - b) / span * m; };
  for (size_t p = 0; p < pipes.size(); ++p) {
    PipeStats& s = pipes[p];
    const PipeStats &a = later.pipes[p], &b = earlier.pipes[p];
    s.busy_cycles += f * (a.busy_cycles - b.busy_cycles);
    s.instructions += count(a.instructions, b.instructions);
    s.wait_flag_cycles += f * (a.wait_flag_cycles - b.wait_flag_cycles);
    s.wait_dep_cycles += f * (a.wait_dep_cycles - b.wait_dep_cycles);
    s.bytes += f * (a.bytes - b.bytes);
    s.transfers += count(a.transfers, b.transfers);
    s.reloaded_bytes += f * (a.reloaded_bytes - b.reloaded_bytes);
    CycleAccount& x = s.account;
    const CycleAccount &xa = a.account, &xb = b.account;
    for (auto field :
         {&CycleAccount::busy, &CycleAccount::flag, &CycleAccount::slot, &CycleAccount::dep,
          &CycleAccount::barrier, &CycleAccount::cross, &CycleAccount::issue})
      x.*field += f * (xa.*field - xb.*field);
  }
  blocked_cross += f * (later.blocked_cross - earlier.blocked_cross);
  blocked_flag += f * (later.blocked_flag - earlier.blocked_flag);
  blocked_barrier += f * (later.blocked_barrier - earlier.blocked_barrier);
  blocked_queue += f * (later.blocked_queue - earlier.blocked_queue);
  scalar_loads.reads += count(later.scalar_loads.reads, earlier.scalar_loads.reads);
  scalar_loads.misses += count(later.scalar_loads.misses, earlier.scalar_loads.misses);
  for (auto [x, a, b] :
       {std::tuple{&c2v, &later.c2v, &earlier.c2v}, std::tuple{&v2c, &later.v2c, &earlier.v2c}}) {
    x->sets += count(a->sets, b->sets);
    x->waits += count(a->waits, b->waits);
    x->wait_cycles += f * (a->wait_cycles - b->wait_cycles);
  }
  for (size_t d = 0; d < 2; ++d) {
    pending_sum[d] += f * (later.pending_sum[d] - earlier.pending_sum[d]);
    pending_n[d] += count(later.pending_n[d], earlier.pending_n[d]);
  }
  for (size_t w = 0; w < waits.size(); ++w) {
    waits[w].cycles += f * (later.waits[w].cycles - earlier.waits[w].cycles);
    waits[w].count += count(later.waits[w].count, earlier.waits[w].count);
  }
  executed += count(later.executed, earlier.executed);
  hbm_bytes += f * (later.hbm_bytes - earlier.hbm_bytes);
  l2_bytes += f * (later.l2_bytes - earlier.l2_bytes);
  charged_bytes += f * (later.charged_bytes - earlier.charged_bytes);
}

namespace {

constexpr int64_t kMaxPeriod = 1 << 20;

/// Period in slot `slot` of expression `e`, as lcm of the constant divisors and moduli
/// applied to values that depend on the slot: 1 if `e` does not depend on it, 0 if unknown
/// (a data load, or a division by a non-constant).
int64_t expr_period(const lower::CExpr& e, int slot) {
  struct V {
    bool dep = false, cst = false;
    int64_t value = 0, period = 1;
  };
  std::vector<V> st;
  for (const auto& op : e.ops) {
    switch (op.kind) {
      case lower::CExpr::Const:
        st.push_back({false, true, op.value, 1});
        break;
      case lower::CExpr::Slot:
        st.push_back({op.value == slot, false, 0, 1});
        break;
      case lower::CExpr::Load: {
        V v;
        for (int k = 0; k < lower::CExpr::load_rank(op); ++k) {
          v.dep = v.dep || st.back().dep;
          st.pop_back();
        }
        if (v.dep) return 0;
        st.push_back(v);
        break;
      }
      case lower::CExpr::Bin: {
        V b = st.back();
        st.pop_back();
        V& a = st.back();
        bool divides = op.bin == ir::BinOp::Div || op.bin == ir::BinOp::Mod;
        a.period = std::lcm(a.period, b.period);
        if (divides && a.dep) {
          if (!b.cst || b.value == 0) return 0;
          a.period = std::lcm(a.period, std::abs(b.value));
        }
        if (divides && b.dep) return 0;
        a.dep = a.dep || b.dep;
        a.cst = false;
        if (a.period > kMaxPeriod) return 0;
        break;
      }
      case lower::CExpr::Leaf:  // only in the folded program, never in `ops`
        return 0;
      case lower::CExpr::Sel: {
        V c = st.back();
        st.pop_back();
        V b = st.back();
        st.pop_back();
        V& a = st.back();
        a.period = std::lcm(a.period, std::lcm(b.period, c.period));
        a.dep = a.dep || b.dep || c.dep;
        a.cst = false;
        if (a.period > kMaxPeriod) return 0;
        break;
      }
    }
  }
  return st.empty() || !st.back().dep ? 1 : st.back().period;
}

/// lcm of the periods, 0 if any is unknown or too long.
int64_t combine(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  int64_t l = std::lcm(a, b);
  return l > kMaxPeriod ? 0 : l;
}

int64_t block_period(const lower::Block& b, int slot) {
  int64_t p = 1;
  for (const auto& it : b.items) {
    if (it.kind == lower::Item::Loop) {
      p = combine(p, combine(expr_period(it.begin, slot), expr_period(it.end, slot)));
      p = combine(p, block_period(*it.body, slot));
    } else if (it.kind == lower::Item::If) {
      p = combine(p, expr_period(it.cond, slot));
      if (it.body) p = combine(p, block_period(*it.body, slot));
      if (it.else_body) p = combine(p, block_period(*it.else_body, slot));
    }
  }
  return p;
}

int64_t access_period(const lower::AccessTemplate& a, int slot) {
  int64_t p = 1;
  for (int d = 0; d < a.dims; ++d) p = combine(p, expr_period(a.start[d], slot));
  return p;
}

/// The GM traffic of the iterations between two back-edges.
GmWork gm_work(const Tally& later, const Tally& earlier) {
  GmWork w;
  w.hbm = later.hbm_bytes - earlier.hbm_bytes;
  w.l2 = later.l2_bytes - earlier.l2_bytes;
  w.charged = later.charged_bytes - earlier.charged_bytes;
  for (size_t p = 0; p < later.pipes.size(); ++p) {
    w.reloaded += later.pipes[p].reloaded_bytes - earlier.pipes[p].reloaded_bytes;
    w.transfers += later.pipes[p].transfers - earlier.pipes[p].transfers;
  }
  return w;
}

/// The same instructions on every pipe, and the same GM traffic, in a->b as in b->c.
bool same_work(const LoopSnapshot& a, const LoopSnapshot& b, const LoopSnapshot& c) {
  if (c.tally.executed - b.tally.executed != b.tally.executed - a.tally.executed) return false;
  for (size_t p = 0; p < a.tally.pipes.size(); ++p)
    if (c.tally.pipes[p].instructions - b.tally.pipes[p].instructions !=
        b.tally.pipes[p].instructions - a.tally.pipes[p].instructions)
      return false;
  return gm_work(c.tally, b.tally) == gm_work(b.tally, a.tally);
}

/// Windows are whole numbers of twice the iteration period, so that the first snapshot,
/// the middle one and the last are on the same phase of every ring.
int64_t window_unit(const LoopHistory& h) {
  return 2 * h.period;
}

int64_t round_up(int64_t n, int64_t u) {
  return (n + u - 1) / u * u;
}

/// The iterations of the window (steady.h) that ends at the last snapshot; 0 if the
/// history is too short.
size_t window(const LoopHistory& h, const FastForwardOptions& o) {
  const auto& s = h.snaps;
  const int64_t u = window_unit(h);
  const int64_t max = round_up(std::max<int64_t>(o.max_window, u), u);
  for (int64_t n = round_up(std::max<int64_t>(o.min_window, u), u);
       n <= max && n < static_cast<int64_t>(s.size()); n += u)
    if (s.back().tally.executed - s[s.size() - 1 - static_cast<size_t>(n)].tally.executed >=
            o.window_instructions ||
        n == max)
      return static_cast<size_t>(n);
  return 0;
}

/// The snapshots the history keeps: enough for the longest window.
size_t history_length(const LoopHistory& h, const FastForwardOptions& o) {
  const int64_t u = window_unit(h);
  return static_cast<size_t>(round_up(std::max<int64_t>(o.max_window, u), u)) + 1;
}

/// Clock `x` moved by the same amount as the scalar unit over both halves of the window:
/// the core's pipes neither drift away from its issue nor change pace.
bool keeps_pace(double x0, double x1, double x2, double t0, double t1, double t2, double tol) {
  const double half = t1 - t0;
  return std::abs((x1 - x0) - half) <= tol * half && std::abs((x2 - x1) - (t2 - t1)) <= tol * half;
}

/// Over the window the core did the same work every iteration (per period), and its
/// state at the window's first, middle and last back-edge is the same state shifted in
/// time: equal queues and flags in flight, every active pipe's clocks keeping pace with the
/// scalar unit, both halves equally long.
bool steady(const LoopHistory& h, const FastForwardOptions& o) {
  const size_t n = window(h, o);
  if (n == 0) return false;
  const auto& s = h.snaps;
  const size_t p = static_cast<size_t>(h.period);
  const size_t first = s.size() - 1 - n, mid = first + n / 2, last = s.size() - 1;
  for (size_t k = first + 2 * p; k <= last; ++k)
    if (!same_work(s[k - 2 * p], s[k - p], s[k])) return false;
  const LoopSnapshot &a = s[first], &b = s[mid], &c = s[last];
  if (b.t - a.t <= 0 || std::abs((b.t - a.t) - (c.t - b.t)) > o.trend_tolerance * (b.t - a.t))
    return false;
  if (a.queued != b.queued || b.queued != c.queued || a.flags_in_flight != b.flags_in_flight ||
      b.flags_in_flight != c.flags_in_flight)
    return false;
  for (size_t q = 0; q < a.ready.size(); ++q) {
    // The scalar unit's clock is t itself; a pipe without instructions has no clock.
    if (q == static_cast<size_t>(ir::Pipe::S) ||
        c.tally.pipes[q].instructions == a.tally.pipes[q].instructions)
      continue;
    if (!keeps_pace(a.ready[q], b.ready[q], c.ready[q], a.t, b.t, c.t, o.trend_tolerance) ||
        !keeps_pace(a.done[q], b.done[q], c.done[q], a.t, b.t, c.t, o.trend_tolerance))
      return false;
  }
  return true;
}

/// The first snapshot of a window of n iterations.
const LoopSnapshot& window_start(const LoopHistory& h, size_t n) {
  return h.snaps[h.snaps.size() - 1 - n];
}

}  // namespace

int64_t iteration_period(const lower::CoreProgram& prog, const lower::Item& loop) {
  const int slot = loop.slot;
  int64_t p = block_period(*loop.body, slot);
  for (const auto& t : prog.instrs) {
    // GM addresses may move with the iteration: the jump lands on other data, same timing.
    for (int i = 0; i < t.num_acc; ++i)
      if (t.acc[static_cast<size_t>(i)].scope != ir::Scope::GM)
        p = combine(p, access_period(t.acc[static_cast<size_t>(i)], slot));
    p = combine(p, expr_period(t.flag_id, slot));
    p = combine(p, expr_period(t.scalar_expr, slot));
    if (t.scalar_kind == lower::OpTemplate::ScalarKind::UbRead)
      p = combine(p, access_period(t.scalar_read, slot));
  }
  return p;
}

namespace {

bool uses_any(const lower::CExpr& e, const std::vector<bool>& slots) {
  for (const auto& op : e.ops)
    if (op.kind == lower::CExpr::Slot && slots[static_cast<size_t>(op.value)]) return true;
  return false;
}

bool is_gm_copy(const lower::OpTemplate& t) {
  return t.op == lower::Opcode::Copy &&
         (t.acc[0].scope == ir::Scope::GM || t.acc[1].scope == ir::Scope::GM);
}

/// Marks the slots of nested loops whose bounds depend on a marked slot; true if a GM copy's
/// address or a branch depends on one.
bool moves(const lower::CoreProgram& prog, const lower::Block& b, std::vector<bool>& dep) {
  for (const auto& it : b.items) {
    if (it.kind == lower::Item::Loop) {
      if (uses_any(it.begin, dep) || uses_any(it.end, dep))
        dep[static_cast<size_t>(it.slot)] = true;
      if (moves(prog, *it.body, dep)) return true;
    } else if (it.kind == lower::Item::If) {
      if (uses_any(it.cond, dep)) return true;
      if (it.body && moves(prog, *it.body, dep)) return true;
      if (it.else_body && moves(prog, *it.else_body, dep)) return true;
    } else {
      const auto& t = prog.instrs[static_cast<size_t>(it.instr)];
      if (!is_gm_copy(t)) continue;
      for (int i = 0; i < t.num_acc; ++i) {
        const auto& a = t.acc[static_cast<size_t>(i)];
        if (a.scope != ir::Scope::GM) continue;
        for (int d = 0; d < a.dims; ++d)
          if (uses_any(a.start[d], dep)) return true;
      }
    }
  }
  return false;
}

bool skeleton(const lower::CoreProgram& prog, const lower::Block& b, GmSkeleton& out) {
  std::vector<size_t> keep;
  for (size_t i = 0; i < b.items.size(); ++i) {
    const auto& it = b.items[i];
    bool gm = false;
    if (it.kind == lower::Item::Loop) {
      gm = skeleton(prog, *it.body, out);
    } else if (it.kind == lower::Item::If) {
      gm = it.body && skeleton(prog, *it.body, out);
      gm = (it.else_body && skeleton(prog, *it.else_body, out)) || gm;
    } else {
      gm = is_gm_copy(prog.instrs[static_cast<size_t>(it.instr)]);
    }
    if (gm) keep.push_back(i);
  }
  const bool any = !keep.empty();
  out[&b] = std::move(keep);
  return any;
}

}  // namespace

bool gm_moves(const lower::CoreProgram& prog, const lower::Item& loop) {
  std::vector<bool> dep(static_cast<size_t>(prog.num_slots), false);
  dep[static_cast<size_t>(loop.slot)] = true;
  return moves(prog, *loop.body, dep);
}

GmSkeleton gm_skeleton(const lower::CoreProgram& prog) {
  GmSkeleton s;
  skeleton(prog, prog.body, s);
  return s;
}

bool record_backedge(Core& c, const Frame& f, int64_t flags_in_flight,
                     const FastForwardOptions& o) {
  LoopHistory& h = c.history;
  const int64_t next = c.slots[static_cast<size_t>(f.loop->slot)];
  if (h.loop != f.loop || (!h.snaps.empty() && h.snaps.back().iter + f.loop->step != next)) {
    h.loop = f.loop;
    h.snaps.clear();
  }
  LoopSnapshot s;
  s.iter = next;
  s.t = c.t;
  s.tally = c.tally;
  for (size_t p = 0; p < c.pipes.size(); ++p) {
    s.ready[p] = c.pipes[p].ready;
    s.done[p] = c.pipes[p].done;
    s.queued[p] = static_cast<int64_t>(c.pipes[p].queue.size());
  }
  s.flags_in_flight = flags_in_flight;
  h.snaps.push_back(std::move(s));
  if (h.snaps.size() > history_length(h, o)) h.snaps.pop_front();
  return steady(h, o);
}

GmWork expected_gm_work(const Core& c, int64_t i) {
  const auto& s = c.history.snaps;
  const size_t p = static_cast<size_t>(c.history.period);
  const size_t k = s.size() - 1 - p + static_cast<size_t>(i % c.history.period);
  return gm_work(s[k + 1].tally, s[k].tally);
}

Jump plan_jump(const std::vector<Core>& cores, size_t ai_cores, const FastForwardOptions& o) {
  int64_t m = INT64_MAX, period = 1;
  std::vector<double> sum(ai_cores, 0.0);
  std::vector<int> n(ai_cores, 0);
  for (const Core& c : cores) {
    if (c.stream_done) continue;
    const LoopHistory& h = c.history;
    // Inside the loop instance the history describes, still in its steady state.
    const Frame* f = nullptr;
    for (const Frame& fr : c.stack)
      if (fr.loop == h.loop) f = &fr;
    if (!f || !steady(h, o)) return {};
    const lower::Item& loop = *h.loop;
    int64_t cur = c.slots[static_cast<size_t>(loop.slot)];
    if (cur != h.snaps.back().iter) return {};
    int64_t after = (f->end - cur + loop.step - 1) / loop.step - 1;  // iterations after this one
    m = std::min(m, after - o.tail);
    period = std::lcm(period, h.period);
    const size_t n_win = window(h, o);
    sum[static_cast<size_t>(c.ai_core)] +=
        (h.snaps.back().t - window_start(h, n_win).t) / static_cast<double>(n_win);
    ++n[static_cast<size_t>(c.ai_core)];
  }
  if (m == INT64_MAX) return {};
  m -= m % period;  // land on the same phase of every ring of buffers and flags
  if (m < o.min_jump) return {};
  Jump j;
  j.iterations = m;
  j.period = period;
  j.cycles.assign(ai_cores, 0.0);
  int groups = 0;
  for (size_t a = 0; a < ai_cores; ++a) {
    if (n[a] == 0) continue;
    // The cores of one AI core hand each other flags: they move together.
    j.cycles[a] = static_cast<double>(m) * sum[a] / n[a];
    j.mean_cycles += j.cycles[a];
    ++groups;
  }
  j.mean_cycles /= groups;
  // AI cores whose periods differ only by the jitter of the shared bandwidth move by one
  // common shift: the die's state, their relative phases included, repeats as a whole.
  double lo = INFINITY, hi = 0;
  for (size_t a = 0; a < ai_cores; ++a)
    if (n[a] > 0) {
      lo = std::min(lo, j.cycles[a]);
      hi = std::max(hi, j.cycles[a]);
    }
  if (hi - lo <= o.trend_tolerance * j.mean_cycles)
    for (size_t a = 0; a < ai_cores; ++a)
      if (n[a] > 0) j.cycles[a] = j.mean_cycles;
  return j;
}

namespace {

void shift(Flag& f, double dt) {
  f.sets.for_each([dt](SetRecord& r) {
    r.time += dt;
    r.fired += dt;
  });
  if (f.last.time >= 0) f.last.time += dt;
}

}  // namespace

void apply_jump(const Jump& j, std::vector<Core>& cores, std::vector<CrossFlags>& cross,
                const FastForwardOptions& o) {
  for (Core& c : cores) {
    if (c.stream_done) continue;
    const double dt = j.cycles[static_cast<size_t>(c.ai_core)];
    LoopHistory& h = c.history;
    c.slots[static_cast<size_t>(h.loop->slot)] += j.iterations * h.loop->step;
    c.t += dt;
    if (c.has_pending) c.pending.issue += dt;
    for (PipeState& ps : c.pipes) {
      ps.ready += dt;
      ps.done += dt;
      ps.queue.for_each([dt](Instr& in) { in.issue += dt; });
      for (RecentWrite& w : ps.recent) w.end += dt;
      for (double& st : ps.started) st += dt;
      if (ps.acct.started) ps.acct.t += dt;
    }
    c.blocked.for_each([dt](Blocked& b) {
      b.b += dt;
      b.e += dt;
    });
    for (auto& f : c.flags) shift(f, dt);
    const size_t n = window(h, o);
    c.tally.add_iterations(h.snaps.back().tally, window_start(h, n).tally, static_cast<int64_t>(n),
                           j.iterations);
    h.snaps.clear();  // the next back-edges start a new history
  }
  for (size_t a = 0; a < cross.size(); ++a) {
    const double dt = j.cycles[a];
    CrossFlags& x = cross[a];
    for (int v = 0; v < 2; ++v) {
      for (auto& f : x.c2v[static_cast<size_t>(v)]) shift(f, dt);
      for (auto& f : x.v2c[static_cast<size_t>(v)]) shift(f, dt);
    }
  }
}

}  // namespace tilepipe::sim

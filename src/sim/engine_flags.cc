// The engine's flags besides the pipes' own sets and waits (class Engine, engine.h): waits
// on the scalar unit (wait_flag(X, S), wait_cross_flag) and the time it spends blocked,
// dropped waits (mutation testing), cross-core sets and their delivery, flag misuse
// (double sets, cross-core counter overflow).
#include <fmt/format.h>

#include <algorithm>

#include "engine.h"

namespace tilepipe::sim {

/// Waits handled by the scalar unit itself; false while the flag is not available.
bool Engine::try_scalar_wait(Core& c, const Instr& in) {
  if (in.t->dropped) {
    consume_dropped(c, in);
    return true;
  }
  if (in.t->op == Opcode::WaitCross) {
    CrossFlags& x = cross_[static_cast<size_t>(c.ai_core)];
    size_t id = static_cast<size_t>(in.flag_id);
    // The wait blocks every pipe of the core (hardware.md): it takes effect only once every
    // pipe has reached it, so the core's pipes drain at each cross-core wait.
    // The pipes of the other core kind never run here (their ready stays at most c.t).
    double reached = c.t, before = c.t;
    for (Pipe p : pipes_of(c.kind))
      reached = std::max(reached, c.pipes[static_cast<size_t>(p)].ready);
    if (c.kind == CoreKind::V) {
      auto& q = x.c2v[static_cast<size_t>(c.vid)][id].sets;
      if (q.empty()) return false;
      c.t = std::max(reached, q.front().time);
      consumed(c, Pipe::S, in, q.front(), in.issue, c.t, true);
      q.pop_front();
      check_cross_overflow(q, c.t, in, c);
      cross_wait(c, before, c.tally.c2v);
    } else {
      auto& q0 = x.v2c[0][id].sets;
      auto& q1 = x.v2c[1][id].sets;
      bool two = !p_.aiv.empty() && chip_.aiv_per_core >= 2;
      if (q0.empty() || (two && q1.empty())) return false;
      c.t = std::max({reached, q0.front().time, two ? q1.front().time : 0.0});
      consumed(c, Pipe::S, in, q0.front(), in.issue, c.t, true);
      if (two) consumed(c, Pipe::S, in, q1.front(), in.issue, c.t, true);
      q0.pop_front();
      if (two) q1.pop_front();
      check_cross_overflow(q0, c.t, in, c);
      cross_wait(c, before, c.tally.v2c);
    }
    return true;
  }
  // wait_flag(X, S): the scalar unit waits for pipe X.
  auto& q = c.flags[flag_key(in.t->flag_src, in.t->flag_dst, in.flag_id)].sets;
  if (q.empty()) return false;
  double before = c.t;
  c.t = std::max(c.t, q.front().time);
  consumed(c, Pipe::S, in, q.front(), in.issue, c.t, false);
  q.pop_front();
  check_double_set(c, q, c.t, in);
  block(c, before, kBlockedFlag);
  return true;
}

/// A dropped wait (mutation testing) takes the set it would have taken, in the same FIFO
/// order, without waiting for it and without a happens-before edge; when the set has not
/// arrived yet, the next set of that flag is swallowed on arrival instead.
void Engine::consume_dropped(Core& c, const Instr& in) {
  auto take = [](Flag& f) {
    if (f.sets.empty())
      ++f.debt;
    else
      f.sets.pop_front();
  };
  size_t id = static_cast<size_t>(in.flag_id);
  if (in.t->op == Opcode::WaitCross) {
    CrossFlags& x = cross_[static_cast<size_t>(c.ai_core)];
    if (c.kind == CoreKind::V) {
      size_t v = static_cast<size_t>(c.vid);
      take(x.c2v[v][id]);
    } else {
      take(x.v2c[0][id]);
      if (!p_.aiv.empty() && chip_.aiv_per_core >= 2) take(x.v2c[1][id]);
    }
    return;
  }
  take(c.flags[flag_key(in.t->flag_src, in.t->flag_dst, in.flag_id)]);
}

void Engine::cross_wait(Core& c, double before, CrossStats& st) {
  ++st.waits;
  st.wait_cycles += c.t - before;
  block(c, before, kBlockedCross);
}

/// The scalar unit was blocked from `before` to now: pipes that starve meanwhile wait on
/// this (a BlockedKind) rather than on issue.
void Engine::block(Core& c, double before, BlockedKind kind) {
  if (c.t <= before) return;
  (kind == kBlockedCross  ? c.tally.blocked_cross
   : kind == kBlockedFlag ? c.tally.blocked_flag
                          : c.tally.blocked_barrier) += c.t - before;
  c.blocked.push_back({before, c.t, kind});
  if (c.blocked.size() < 1024) return;
  size_t min_cursor = c.blocked_base + c.blocked.size();
  for (const auto& ps : c.pipes)
    if (ps.acct.started) min_cursor = std::min(min_cursor, ps.acct.cursor);
  while (c.blocked_base < min_cursor && !c.blocked.empty()) {
    c.blocked.pop_front();
    ++c.blocked_base;
  }
}

void Engine::check_cross_overflow(const Ring<SetRecord>& q, double now, const Instr& in,
                                  const Core& c) {
  size_t max = static_cast<size_t>(chip_.cross_flag_max);
  if (q.size() >= max && q[max - 1].time <= now)
    fail(q[max - 1].op->loc, "cross-flag",
         fmt::format("cross-core flag #{} of core {} counts past {} before {} waits ({})",
                     in.flag_id, c.ai_core, chip_.cross_flag_max, c.stats.name, in.t->loc.str()),
         "the counter is 4 bits: wait more often, or signal every cross_interval iterations");
}

void Engine::double_set(const Core& c, const Ring<SetRecord>& q, const Instr& wait) {
  const auto& t = *wait.t;
  fail(q.front().op->loc, "flag-double-set",
       fmt::format("{}: flag {}->{} #{} set again before its wait at {} consumed the previous "
                   "set (hangs on hardware)",
                   c.stats.name, ir::to_string(t.flag_src), ir::to_string(t.flag_dst), wait.flag_id,
                   t.loc.str()),
       "pair every set with exactly one wait before setting the flag again");
}

void Engine::deliver_cross(Core& c, const Instr& in, double when) {
  if (is_sync_all(*in.t)) {
    arrive_all(c, in, when);
    return;
  }
  CrossFlags& x = cross_[static_cast<size_t>(c.ai_core)];
  size_t id = static_cast<size_t>(in.flag_id);
  double visible = when + chip_.cross_flag_latency;
  SetRecord r = record(c, in, when, visible);
  CrossStats& cs = c.kind == CoreKind::C ? c.tally.c2v : c.tally.v2c;
  ++cs.sets;
  if (c.kind == CoreKind::C)  // to each AIV of the AI core (one with threads=1)
    for (size_t v = 0; v < static_cast<size_t>(chip_.aiv_per_core); ++v)
      deliver(c, x.c2v[v][id], r);
  else
    deliver(c, x.v2c[static_cast<size_t>(c.vid)][id], r);
  // Wake the peers blocked on a cross wait. add_core adds an AI core's cores one after
  // another (AIC, AIV0, AIV1): they are the run of cores around c with its ai_core.
  const size_t first =
      static_cast<size_t>(c.index - (c.kind == CoreKind::C ? 0 : (p_.aic.empty() ? 0 : 1) + c.vid));
  for (size_t i = first; i < cores_.size() && cores_[i].ai_core == c.ai_core; ++i) {
    Core& peer = cores_[i];
    if (peer.kind != c.kind && peer.has_pending && !peer.in_heap) push(peer);
  }
}

/// A core reaches T.sync_all (a set of mode ir::kSyncAllMode and id `in.flag_id`). Once
/// every core of the launch has, each finds its own cross-core flag of that id set (the
/// AIC: from both AIVs, as its wait takes), sync.cross_flag_latency after the last arrival:
/// AscendC's SyncAll is FFTS cross-core flags (hardware.md). The wait that follows takes it
/// as any other.
void Engine::arrive_all(Core& c, const Instr& in, double when) {
  AllSync& s = sync_all_[static_cast<size_t>(in.flag_id)];
  if (s.here.empty()) s.here.assign(cores_.size(), 0);
  if (s.here[static_cast<size_t>(c.index)]++)
    fail(in.t->loc, "sync-all",
         fmt::format("{} reaches T.sync_all (cross-core flag #{}) again before every core "
                     "arrived at the previous one",
                     c.stats.name, in.flag_id),
         "wait for each T.sync_all before the next (T.sync_all does: a set of its mode alone "
         "does not)");
  s.latest = std::max(s.latest, when);
  if (race_) race_->arrive_all(c.ai_core, clocks_[static_cast<size_t>(release(c, in))]);
  if (++s.arrived < static_cast<int>(cores_.size())) return;
  if (race_) race_->complete_all();
  const bool two = !p_.aiv.empty() && chip_.aiv_per_core >= 2;
  const size_t id = static_cast<size_t>(in.flag_id);
  int vc = -1, vc_ai = -1;
  for (Core& m : cores_) {
    if (race_ && m.ai_core != vc_ai) {  // cores_ holds an AI core's cores together
      vc = new_clock(race_->all_clock(m.ai_core));
      vc_ai = m.ai_core;
    }
    const SetRecord r{s.latest + chip_.cross_flag_latency, s.latest, in.t, c.index, vc};
    CrossFlags& x = cross_[static_cast<size_t>(m.ai_core)];
    if (m.kind == CoreKind::V) {
      deliver(c, x.c2v[static_cast<size_t>(m.vid)][id], r);
    } else {
      deliver(c, x.v2c[0][id], r);
      if (two) deliver(c, x.v2c[1][id], r);
    }
    if (m.has_pending && !m.in_heap) push(m);
  }
  s = {};
}

/// Cross-core set `r` of core `c` reaches flag `f`.
void Engine::deliver(Core& c, Flag& f, const SetRecord& r) {
  f.last = {r.time, &r.op->loc};
  pending(c, f.sets.size() + 1);
  if (f.debt > 0)  // a dropped wait already took this set
    --f.debt;
  else
    f.sets.push_back(r);
}

/// A cross-core set of core `c` finds n - 1 sets of its flag id still in flight.
void Engine::pending(Core& c, size_t n) {
  size_t d = c.kind == CoreKind::C ? 0 : 1;
  CrossStats& cs = d == 0 ? c.tally.c2v : c.tally.v2c;
  cs.max_pending = std::max(cs.max_pending, static_cast<int64_t>(n));
  c.tally.pending_sum[d] += static_cast<double>(n);
  ++c.tally.pending_n[d];
}

}  // namespace tilepipe::sim

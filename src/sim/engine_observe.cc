// What the engine does for race detection and observers (class Engine, engine.h): the
// vector clocks that sets release and waits acquire, every access of an instruction, the
// instruction and flag events.
#include <algorithm>

#include "engine.h"

namespace tilepipe::sim {

/// Race detection: the clock a set releases (index into clocks_).
int Engine::release(Core& c, const Instr& in) {
  int tid = RaceDetector::thread(c.role, in.t->pipe);
  const int vc = new_clock(race_->release(c.ai_core, tid));
  if (in.t->pipe == Pipe::S) c.s_clock = -1;
  return vc;
}

/// A new entry of clocks_: a free one if there is one.
int Engine::new_clock(const VectorClock& vc) {
  if (free_clocks_.empty()) {
    clocks_.push_back(vc);
    return static_cast<int>(clocks_.size()) - 1;
  }
  const int i = free_clocks_.back();
  free_clocks_.pop_back();
  clocks_[static_cast<size_t>(i)] = vc;
  return i;
}

/// Frees the entries of clocks_ that no set in flight, queued or pending instruction, or
/// core's scalar snapshot refers to, so that their number stays proportional to what is in
/// flight, not to the sets run. Called between scheduling steps (Engine::run), where every
/// instruction and set record sits in one of those places.
void Engine::collect_clocks() {
  std::vector<char> live(clocks_.size(), 0);
  auto mark = [&](int i) {
    if (i >= 0) live[static_cast<size_t>(i)] = 1;
  };
  auto mark_sets = [&](Flag& f) { f.sets.for_each([&](SetRecord& r) { mark(r.vc); }); };
  for (Core& c : cores_) {
    mark(c.s_clock);
    if (c.has_pending) mark(c.pending.s_clock);
    for (auto& ps : c.pipes) ps.queue.for_each([&](Instr& in) { mark(in.s_clock); });
    for (Flag& f : c.flags) mark_sets(f);
  }
  for (CrossFlags& x : cross_)
    for (auto* dir : {&x.c2v, &x.v2c})
      for (auto& flags : *dir)
        for (Flag& f : flags) mark_sets(f);
  free_clocks_.clear();
  for (size_t i = live.size(); i-- > 0;)
    if (!live[i]) free_clocks_.push_back(static_cast<int32_t>(i));
  clocks_collect_at_ = std::max(clocks_collect_at_, 2 * (clocks_.size() - free_clocks_.size()));
}

/// Race detection: the waiter's threads acquire the clock set `r` released.
void Engine::acquire_set(Core& c, Pipe pipe, const SetRecord& r, bool cross) {
  race_->acquire(c.ai_core, RaceDetector::thread(c.role, pipe), clocks_[static_cast<size_t>(r.vc)]);
  if (pipe == Pipe::S) {
    race_->publish_stores(c.ai_core, RaceDetector::thread(c.role, Pipe::S));
    c.s_clock = -1;
    if (cross)  // a cross-core wait blocks every pipe of the core (hardware.md)
      for (int p = 0; p < kPipes; ++p) {
        const int tid = RaceDetector::thread(c.role, static_cast<Pipe>(p));
        race_->acquire(c.ai_core, tid, clocks_[static_cast<size_t>(r.vc)]);
        if (is_sync_all(*r.op)) race_->pass_all(c.ai_core, tid);  // past T.sync_all
      }
  }
}

void Engine::observe_flag(const Core& c, Pipe pipe, const Instr& wait, const SetRecord& r,
                          double from, double done, bool cross) {
  opts_.observer->on_flag(
      FlagEvent{r.core, c.index, r.op->pipe, pipe, r.fired, done, from, r.op, wait.t, cross});
}

int Engine::scalar_clock(Core& c) {
  if (c.s_clock < 0)
    c.s_clock = new_clock(race_->clock(c.ai_core, RaceDetector::thread(c.role, Pipe::S)));
  return c.s_clock;
}

int Engine::race_site(Core& c, Pipe pipe, const lower::OpTemplate* op) {
  loop_values(c, race_loops_);
  return race_->site(c.index, pipe, op, race_loops_);
}

void Engine::race_access(Core& c, Pipe pipe, const Access& a, RaceKind kind, int site, bool store) {
  int64_t mem = a.t->scope == ir::Scope::GM
                    ? a.t->gm_index
                    : (int64_t{1} << 32) + c.index * 8 + static_cast<int64_t>(a.t->scope);
  race_->access(c.ai_core, RaceDetector::thread(c.role, pipe), mem, a, kind, site, store);
}

/// Race detection and the observer for an instruction that started on pipe p.
void Engine::observe_op(Core& c, Pipe p, const Instr& in, double start, double end,
                        double occupancy) {
  const auto& t = *in.t;
  if (race_) {
    race_->acquire(c.ai_core, RaceDetector::thread(c.role, p),
                   clocks_[static_cast<size_t>(in.s_clock)]);
    const int site = race_site(c, p, in.t);
    for (int i = t.num_acc - 1; i >= 0; --i)
      race_access(c, p, in.acc[static_cast<size_t>(i)],
                  i > 0          ? RaceKind::Read
                  : t.atomic_add ? RaceKind::AtomicAdd
                                 : RaceKind::Write,
                  site, i == 0 && p == Pipe::S);  // the scalar unit's element store
  }
  if (opts_.observer)
    opts_.observer->on_instr(InstrEvent{c.index, p, in.t, in.issue, start, end, occupancy,
                                        in.acc[t.num_acc > 1 ? 1 : 0].bytes(),
                                        t.op == Opcode::Mmad ? 2.0 * t.m * t.n * t.k : 0.0});
}

}  // namespace tilepipe::sim

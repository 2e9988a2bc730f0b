// What the engine does for race detection and observers (class Engine, engine.h): the
// vector clocks that sets release and waits acquire, every access of an instruction, the
// instruction and flag events.
#include <algorithm>

#include "engine.h"

namespace tilepipe::sim {

/// Race detection: the clock a set releases (index into clocks_).
int Engine::release(Core& c, const Instr& in) {
  int tid = RaceDetector::thread(c.role, in.t->pipe);
  clocks_.push_back(race_->release(c.ai_core, tid));
  if (in.t->pipe == Pipe::S) c.s_clock = -1;
  return static_cast<int>(clocks_.size()) - 1;
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
  if (c.s_clock < 0) {
    clocks_.push_back(race_->clock(c.ai_core, RaceDetector::thread(c.role, Pipe::S)));
    c.s_clock = static_cast<int>(clocks_.size()) - 1;
  }
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

// The engine's side of steady-state fast-forward (class Engine, engine.h; the model is
// steady.h): the outermost loops that can jump, the jump itself, and the replay of the GM
// addresses of the skipped iterations through the L2 model.
#include <algorithm>
#include <cmath>
#include <utility>

#include "engine.h"

namespace tilepipe::sim {

const GmSkeleton& Engine::skeleton(const Core& c) const {
  return c.kind == CoreKind::C ? skeleton_aic_ : skeleton_aiv_;
}

void Engine::find_outer_loops(const lower::CoreProgram& prog, const lower::Block& b) {
  for (const auto& it : b.items) {
    if (it.kind == lower::Item::Loop) {
      int64_t p = iteration_period(prog, it);
      if (p > 0) outer_loops_.push_back({&it, p, gm_moves(prog, it)});
    }
    if (it.kind == lower::Item::If) {
      if (it.body) find_outer_loops(prog, *it.body);
      if (it.else_body) find_outer_loops(prog, *it.else_body);
    }
  }
}

void Engine::setup_fast_forward() {
  const auto& o = opts_.fast_forward;
  const bool observed_part = o.observed_from > 0 || std::isfinite(o.observed_to);
  // Not across T.sync_all: its arrivals couple every core's history.
  auto sync_all = [](const lower::CoreProgram& prog) {
    return std::ranges::any_of(prog.instrs, is_sync_all);
  };
  ff_ = o.enabled && !functional_ && (!opts_.observer || observed_part) && !opts_.detect_races &&
        p_.aic.loads.empty() && p_.aiv.loads.empty() && !p_.aic.lets && !p_.aiv.lets &&
        !sync_all(p_.aic) && !sync_all(p_.aiv);
  if (!ff_) return;
  find_outer_loops(p_.aic, p_.aic.body);
  find_outer_loops(p_.aiv, p_.aiv.body);
  skeleton_aic_ = gm_skeleton(p_.aic);
  skeleton_aiv_ = gm_skeleton(p_.aiv);
}

/// Flag sets waiting to be consumed by core c (its own and the cross-core ones).
int64_t Engine::flags_in_flight(const Core& c) const {
  int64_t n = 0;
  for (const auto& f : c.flags) n += static_cast<int64_t>(f.sets.size());
  const CrossFlags& x = cross_[static_cast<size_t>(c.ai_core)];
  for (int v = 0; v < 2; ++v) {
    if (c.kind == CoreKind::V && v != c.vid) continue;
    const auto& in =
        c.kind == CoreKind::V ? x.c2v[static_cast<size_t>(v)] : x.v2c[static_cast<size_t>(v)];
    for (const auto& f : in) n += static_cast<int64_t>(f.sets.size());
  }
  return n;
}

/// Between two core runs every core is at an instruction boundary: if all are steady and
/// the replay of the skipped iterations' GM addresses proves their traffic, shift the die
/// and the schedule forward.
void Engine::try_jump() {
  jump_check_ = false;
  Jump j = plan_jump(cores_, cross_.size(), opts_.fast_forward);
  if (j.iterations == 0) return;
  if (opts_.observer && !outside_observed(j)) return;
  if (!prove_traffic(j)) return;
  apply_jump(j, cores_, cross_, opts_.fast_forward);
  hbm_.shift(j.mean_cycles);
  l2_.shift(j.mean_cycles);
  std::vector<HeapItem> items;
  for (; !heap_.empty(); heap_.pop()) items.push_back(heap_.top());
  for (auto& [t, idx] : items)
    heap_.push({t + j.cycles[static_cast<size_t>(cores_[static_cast<size_t>(idx)].ai_core)], idx});
  ++jumped_.jumps;
  for (const Core& c : cores_)
    if (!c.stream_done) jumped_.iterations += j.iterations;
  jumped_.cycles += j.mean_cycles;
}

/// An observer sees only [observed_from, observed_to): a jump may skip iterations after
/// that window (every running core's next event starts at or after its end) or before it
/// (shortened so every core's skipped work ends by its start); never inside it.
bool Engine::outside_observed(Jump& j) const {
  const auto& o = opts_.fast_forward;
  double next = 1e300, room = 1.0;  // earliest next event; fraction of the jump that fits
  for (const Core& c : cores_) {
    if (c.stream_done) continue;
    double first = c.t, last = c.t;
    for (const auto& ps : c.pipes) {
      if (!ps.queue.empty()) first = std::min(first, ps.ready);
      last = std::max(last, ps.done);
    }
    next = std::min(next, first);
    const double dt = j.cycles[static_cast<size_t>(c.ai_core)];
    if (dt > 0) room = std::min(room, (o.observed_from - last) / dt);
  }
  if (next >= o.observed_to) return true;
  if (room >= 1.0) return true;
  int64_t m = room > 0 ? static_cast<int64_t>(room * static_cast<double>(j.iterations)) : 0;
  m -= m % j.period;
  if (m < o.min_jump) return false;
  j.shorten(m);
  return true;
}

/// Replays the GM addresses of the iterations `j` skips and keeps the L2 state they leave;
/// shortens `j` to the iterations whose traffic is proven, false if too few are. Cores
/// whose GM addresses repeat every iteration need no replay (the window proved them).
bool Engine::prove_traffic(Jump& j) {
  bool moves = false;
  for (const Core& c : cores_) moves |= !c.stream_done && c.history.gm_moves;
  if (!moves) return true;
  // Replay on copies first: the first iteration whose traffic differs from the window's
  // (a phase change of the L2 hits) limits the jump.
  L2Residency l2 = l2res_;
  std::vector<ReadRanges> ranges;
  for (const Core& c : cores_) ranges.push_back(c.read_ranges);
  int64_t m = replay(j.iterations, l2, ranges);
  m -= m % j.period;
  if (m < opts_.fast_forward.min_jump) return false;
  if (m != j.iterations) {  // replay exactly the shorter jump on the real state
    j.shorten(m);
    l2 = l2res_;
    for (size_t i = 0; i < cores_.size(); ++i) ranges[i] = cores_[i].read_ranges;
    if (replay(m, l2, ranges) != m) return false;
  }
  l2res_ = std::move(l2);
  for (size_t i = 0; i < cores_.size(); ++i) cores_[i].read_ranges = std::move(ranges[i]);
  return true;
}

/// Walks one core's control flow from its current position through the GM copies of the
/// iterations a jump would skip, without timing: the address replay of fast-forward. It
/// visits only the items of the program's GM skeleton (steady.h).
class Engine::Replay {
 public:
  Replay(Engine& e, Core& c, int64_t iterations)
      : e_(&e), c_(&c), skel_(&e.skeleton(c)), slots_(c.slots), outer_(c.history.loop) {
    // The frames down to the first one the skeleton skips (a loop or branch without GM
    // copies): the walk resumes after the item that holds the core's position.
    for (size_t i = 0; i < c.stack.size(); ++i) {
      const Frame& f = c.stack[i];
      if (i > 0 && stack_.back().pos == 0) break;
      const auto& keep = skel_->at(f.block);
      size_t k =
          static_cast<size_t>(std::lower_bound(keep.begin(), keep.end(), f.pos) - keep.begin());
      if (i > 0) {
        const Frame& parent = c.stack[i - 1];
        const auto& pk = skel_->at(parent.block);
        if (stack_.back().pos > pk.size() || pk[stack_.back().pos - 1] != parent.pos - 1) break;
      }
      stack_.push_back({f.block, k, f.loop, f.end});
      if (f.loop == outer_) outer_depth_ = stack_.size();
    }
    start_ = stack_;
    target_ = c.slots[static_cast<size_t>(outer_->slot)] + iterations * outer_->step;
  }

  /// GM traffic up to the next back-edge of the outer loop, or, once the loop variable has
  /// reached the target, up to the position the core is at now (the end of the jump).
  GmWork segment(L2Residency& l2, ReadRanges& ranges) {
    GmWork w;
    std::swap(c_->slots, slots_);  // expressions read the core's slots
    while (!at_end()) {
      Frame& f = stack_.back();
      const auto& keep = skel_->at(f.block);
      if (f.pos >= keep.size()) {
        if (f.loop) {
          int64_t& v = c_->slots[static_cast<size_t>(f.loop->slot)];
          v += f.loop->step;
          if (v < f.end) {
            f.pos = 0;
            if (f.loop == outer_) break;
            continue;
          }
        }
        if (stack_.size() == outer_depth_) {  // the loop ended: plan_jump keeps a tail
          failed_ = true;
          break;
        }
        stack_.pop_back();
        continue;
      }
      const lower::Item& it = f.block->items[keep[f.pos++]];
      if (it.kind == lower::Item::Loop) {
        int64_t b = e_->eval(*c_, it.begin, it.loc), end = e_->eval(*c_, it.end, it.loc);
        if (b < end) {
          c_->slots[static_cast<size_t>(it.slot)] = b;
          stack_.push_back({it.body.get(), 0, &it, end});
        }
      } else if (it.kind == lower::Item::If) {
        bool cond = e_->eval(*c_, it.cond, it.loc) != 0;
        const lower::Block* b = cond ? it.body.get() : it.else_body.get();
        if (b) stack_.push_back({b, 0, nullptr, 0});
      } else {
        const lower::OpTemplate& t = c_->prog->instrs[static_cast<size_t>(it.instr)];
        if (t.dropped) continue;
        const auto& a = t.acc[static_cast<size_t>(gm_operand(t))];
        w += e_->touch_gm(t, e_->resolve(*c_, a, t), l2, ranges);
      }
    }
    std::swap(c_->slots, slots_);
    return w;
  }

 private:
  /// Back at the core's current position, target_ - start iterations later.
  bool at_end() const {
    if (c_->slots[static_cast<size_t>(outer_->slot)] != target_ || stack_.size() != start_.size())
      return false;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Frame &a = stack_[i], &b = start_[i];
      if (a.block != b.block || a.pos != b.pos) return false;
      if (a.loop && a.loop != outer_ &&
          c_->slots[static_cast<size_t>(a.loop->slot)] != slots_[static_cast<size_t>(a.loop->slot)])
        return false;
    }
    return true;
  }

  Engine* e_;
  Core* c_;
  const GmSkeleton* skel_;
  std::vector<int64_t> slots_;  // the core's own slots while not walking
  const lower::Item* outer_;
  std::vector<Frame> stack_, start_;  // Frame::pos indexes the skeleton's positions
  int64_t target_;
  size_t outer_depth_ = 0;

 public:
  bool failed_ = false;  // walked out of the outer loop
};

/// Replays the GM addresses of the next `m` iterations of every running core, in
/// round-robin order, against `l2` and the cores' `ranges`; returns how many iterations
/// from the start are proven to move exactly the traffic of their window iteration.
int64_t Engine::replay(int64_t m, L2Residency& l2, std::vector<ReadRanges>& ranges) {
  std::vector<std::pair<size_t, Replay>> walks;
  for (size_t i = 0; i < cores_.size(); ++i)
    if (!cores_[i].stream_done && cores_[i].history.gm_moves)
      walks.emplace_back(i, Replay(*this, cores_[i], m));
  std::vector<GmWork> head(walks.size());
  for (int64_t k = 0; k < m; ++k) {
    if (cancelled()) return 0;  // no jump: the run loop stops at its next check
    for (size_t w = 0; w < walks.size(); ++w) {
      auto& [i, walk] = walks[w];
      GmWork got = walk.segment(l2, ranges[i]);
      if (walk.failed_) return 0;
      // The first segment is the rest of the current iteration: checked with the end.
      if (k == 0)
        head[w] = got;
      else if (!(got == expected_gm_work(cores_[i], k)))
        return k - 1;
    }
  }
  for (size_t w = 0; w < walks.size(); ++w) {
    auto& [i, walk] = walks[w];
    head[w] += walk.segment(l2, ranges[i]);
    if (walk.failed_) return 0;
    if (!(head[w] == expected_gm_work(cores_[i], 0))) return 0;
  }
  return m;
}

}  // namespace tilepipe::sim

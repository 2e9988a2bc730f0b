#include "race.h"

#include <fmt/format.h>

#include <algorithm>

namespace tilepipe::sim {

namespace {

/// into = into joined with `vc` (the componentwise max).
void join(VectorClock& into, const VectorClock& vc) {
  for (size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], vc[i]);
}

}  // namespace

RaceDetector::RaceDetector(int ai_cores)
    : clocks_(static_cast<size_t>(ai_cores * kRaceThreads)),
      arriving_(static_cast<size_t>(ai_cores), VectorClock{}),
      passed_(static_cast<size_t>(ai_cores)),
      gen_(static_cast<size_t>(ai_cores * kRaceThreads), 0),
      more_(1),
      tags_(1) {
  for (int ai = 0; ai < ai_cores; ++ai)
    for (int t = 0; t < kRaceThreads; ++t) {
      clock(ai, t).fill(0);
      clock(ai, t)[static_cast<size_t>(t)] = 1;
    }
}

VectorClock RaceDetector::release(int ai, int tid) {
  VectorClock vc = clock(ai, tid);
  auto& own = clock(ai, tid)[static_cast<size_t>(tid)];
  if (is_scalar(tid)) {  // the element stores' epoch (own + 1) too; later ones are own + 3
    ++vc[static_cast<size_t>(tid)];
    own += 2;
  } else {
    ++own;
  }
  return vc;
}

void RaceDetector::acquire(int ai, int tid, const VectorClock& vc) {
  join(clock(ai, tid), vc);
}

void RaceDetector::barrier(int ai) {
  VectorClock all{};
  for (int t = 0; t < kRaceThreads; ++t) join(all, clock(ai, t));
  for (int t = 0; t < kRaceThreads; ++t)
    if (is_scalar(t)) ++all[static_cast<size_t>(t)];  // its element stores (access)
  for (int t = 0; t < kRaceThreads; ++t) {
    clock(ai, t) = all;
    clock(ai, t)[static_cast<size_t>(t)] += is_scalar(t) ? 2 : 1;
  }
}

void RaceDetector::arrive_all(int ai, const VectorClock& vc) {
  join(arriving_[static_cast<size_t>(ai)], vc);
}

void RaceDetector::complete_all() {
  for (size_t ai = 0; ai < arriving_.size(); ++ai) {
    passed_[ai].push_back(arriving_[ai]);
    arriving_[ai] = VectorClock{};
  }
}

/// Records access `e` in `list`: the bytes it touched leave the same thread's earlier
/// entries (its newer access stands for them), which go when they hold none.
void RaceDetector::note(std::vector<Entry>& list, const Entry& e) {
  for (auto& r : list)
    if (r.e.ai == e.e.ai && r.e.tid == e.e.tid) {
      if (same(r.e, e.e)) {  // another row of the same access
        r.mask |= e.mask;
        return;
      }
      r.mask &= ~e.mask;
    }
  std::erase_if(list, [](const Entry& r) { return r.mask == 0; });
  list.push_back(e);
}

/// A write of `mask`'s bytes: the entries keep only the bytes it did not write.
void RaceDetector::forget(std::vector<Entry>& list, uint32_t mask) {
  for (auto& r : list) r.mask &= ~mask;
  std::erase_if(list, [](const Entry& r) { return r.mask == 0; });
}

RaceDetector::Block RaceDetector::copy(const Block& b) {
  Block c = b;
  if (b.more) {
    c.more = 0;
    More& m = more_of(c);  // may move more_: b's lists are read after
    m = more_[b.more];
  }
  return c;
}

size_t RaceDetector::split(Shadow::Page& pg, uint32_t at) {
  auto it = std::upper_bound(pg.runs.begin(), pg.runs.end(), at,
                             [](uint32_t x, const Shadow::Run& r) { return x < r.start; });
  const auto k = static_cast<size_t>(it - pg.runs.begin()) - 1;  // the run holding `at`
  if (pg.runs[k].start == at) return k;
  Block b = copy(pg.runs[k].b);
  pg.runs.insert(pg.runs.begin() + static_cast<ptrdiff_t>(k + 1), Shadow::Run{at, b});
  return k + 1;
}

void RaceDetector::densify(Shadow::Page& pg) {
  pg.dense = std::make_unique<Block[]>(Shadow::kPageBlocks);
  for (size_t k = 0; k < pg.runs.size(); ++k) {
    const uint32_t end = k + 1 < pg.runs.size() ? pg.runs[k + 1].start : Shadow::kPageBlocks;
    pg.dense[pg.runs[k].start] = pg.runs[k].b;  // the run's own side lists
    for (uint32_t b = pg.runs[k].start + 1; b < end; ++b) pg.dense[b] = copy(pg.runs[k].b);
  }
  pg.runs = {};
}

size_t RaceDetector::memory_bytes() const {
  size_t n = sizeof(*this) + clocks_.capacity() * sizeof(VectorClock) +
             more_.capacity() * sizeof(More) + free_more_.capacity() * sizeof(uint32_t) +
             sites_.capacity() * sizeof(Site) + loops_.capacity() * sizeof(int64_t) +
             tags_.size() * sizeof(std::atomic<bool>) + deferred_.capacity() * sizeof(Deferred);
  for (const auto& [mem, sh] : shadow_) {
    n += sizeof(mem) + sizeof(sh) + sh.pages.capacity() * sizeof(sh.pages[0]);
    for (const auto& pg : sh.pages)
      if (pg)
        n += sizeof(*pg) + pg->runs.capacity() * sizeof(Shadow::Run) +
             (pg->dense ? Shadow::kPageBlocks * sizeof(Block) : 0);
  }
  for (const More& m : more_)
    n += (m.writes.capacity() + m.reads.capacity() + m.atomics.capacity()) * sizeof(Entry);
  return n;
}

RaceDetector::More& RaceDetector::more_of(Block& blk) {
  if (!blk.more) {
    if (free_more_.empty()) {
      blk.more = static_cast<uint32_t>(more_.size());
      more_.emplace_back();
    } else {
      blk.more = free_more_.back();
      free_more_.pop_back();
    }
  }
  return more_[blk.more];
}

std::string loop_state_text(const std::string& core, std::span<const int64_t> state) {
  std::string s = fmt::format("{}, cid={}", core, state[0]);
  for (size_t i = 1; i + 1 < state.size(); i += 2)
    s += fmt::format(", loop@{}={}", state[i], state[i + 1]);
  return s;
}

void RaceDetector::name_core(int core, std::string name) {
  if (static_cast<size_t>(core) >= core_names_.size()) {
    core_names_.resize(static_cast<size_t>(core) + 1);
    core_site_.resize(static_cast<size_t>(core) + 1, -1);
  }
  core_names_[static_cast<size_t>(core)] = std::move(name);
}

int RaceDetector::site(int core, ir::Pipe pipe, const lower::OpTemplate* op,
                       std::span<const int64_t> loops) {
  if (sites_.size() >= collect_at_) collect_sites();
  int32_t& last = core_site_[static_cast<size_t>(core)];
  int64_t at = -1;  // the core's last loop state, when it is this one
  if (last >= 0) {
    const Site& s = sites_[static_cast<size_t>(last)];
    const auto prev = loops_of(s);
    if (std::equal(prev.begin(), prev.end(), loops.begin(), loops.end())) {
      if (s.op == op && s.pipe == pipe) return last;
      at = s.loops;
    }
  }
  if (at < 0) {
    at = static_cast<int64_t>(loops_.size());
    loops_.push_back(static_cast<int64_t>(loops.size()));
    loops_.insert(loops_.end(), loops.begin(), loops.end());
  }
  sites_.push_back(Site{op, static_cast<uint32_t>(at), core, pipe});
  last = static_cast<int32_t>(sites_.size()) - 1;
  return last;
}

/// Drops the sites (and loop states) no shadow epoch refers to any more, so that their
/// number stays proportional to the shadow's, not to the instructions run.
void RaceDetector::collect_sites() {
  std::vector<int32_t> to(sites_.size(), -1);
  auto each_epoch = [&](auto&& f) {
    auto block = [&](Block& b) {
      f(b.write);
      f(b.read);
    };
    for (auto& [mem, sh] : shadow_)
      for (auto& pg : sh.pages)
        if (pg && pg->dense)
          for (uint32_t i = 0; i < Shadow::kPageBlocks; ++i) block(pg->dense[i]);
        else if (pg)
          for (auto& r : pg->runs) block(r.b);
    for (auto& m : more_)
      for (auto* list : {&m.writes, &m.reads, &m.atomics})
        for (auto& e : *list) f(e.e);
  };
  each_epoch([&](const Epoch& e) {
    if (e.site >= 0) to[static_cast<size_t>(e.site)] = 0;
  });
  for (int32_t s : core_site_)
    if (s >= 0) to[static_cast<size_t>(s)] = 0;
  std::vector<Site> sites;
  std::vector<int64_t> loops;
  int64_t old_at = -1, new_at = -1;  // sites sharing a loop state are adjacent
  for (size_t i = 0; i < sites_.size(); ++i) {
    if (to[i] < 0) continue;
    Site s = sites_[i];
    if (s.loops != old_at) {
      old_at = s.loops;
      new_at = static_cast<int64_t>(loops.size());
      const auto l = loops_of(s);
      loops.push_back(static_cast<int64_t>(l.size()));
      loops.insert(loops.end(), l.begin(), l.end());
    }
    s.loops = static_cast<uint32_t>(new_at);
    to[i] = static_cast<int32_t>(sites.size());
    sites.push_back(s);
  }
  each_epoch([&](Epoch& e) {
    if (e.site >= 0) e.site = to[static_cast<size_t>(e.site)];
  });
  for (int32_t& s : core_site_)
    if (s >= 0) s = to[static_cast<size_t>(s)];
  sites_ = std::move(sites);
  loops_ = std::move(loops);
  collect_at_ = std::max(collect_at_, 2 * sites_.size());
}

AccessSite RaceDetector::site_text(int site) const {
  const Site& s = sites_[static_cast<size_t>(site)];
  const std::string& core = core_names_[static_cast<size_t>(s.core)];
  return AccessSite{core, s.pipe, s.op, loop_state_text(core, loops_of(s))};
}

static const char* verb(RaceKind k) {
  switch (k) {
    case RaceKind::Read:
      return "reads";
    case RaceKind::Write:
      return "writes";
    case RaceKind::AtomicAdd:
      return "atomically adds to";
  }
  return "";
}

uint64_t RaceDetector::pair_key(const Epoch& prev, const Epoch& cur) const {
  const auto* p_op = sites_[static_cast<size_t>(prev.site)].op;
  const auto* cur_op = sites_[static_cast<size_t>(cur.site)].op;
  return reinterpret_cast<uintptr_t>(p_op) * 31 + reinterpret_cast<uintptr_t>(cur_op);
}

void RaceDetector::report(const Epoch& prev, RaceKind prev_kind, const Epoch& cur,
                          RaceKind cur_kind, const Access& a) {
  const uint64_t key = pair_key(prev, cur);
  if (reported_pairs_.count(key) || reports_.size() >= 20) return;
  reported_pairs_[key] = true;
  reports_.push_back(describe(prev, prev_kind, cur, cur_kind, a));
}

/// An unordered pair. On GM in a functional run, a pair of writes, or of a read and a
/// write, waits for the values: the deciding write is the current access when it writes,
/// else the earlier one (its tag).
void RaceDetector::conflict(const Epoch& prev, RaceKind prev_kind, uint32_t prev_tag,
                            const Epoch& now, RaceKind kind, const Access& a) {
  if (defer_writes_ && prev_kind != RaceKind::AtomicAdd) {  // a tagged write: a copy's
    if (kind == RaceKind::Write && tag_) return defer(prev, prev_kind, now, kind, tag_, a);
    if (kind == RaceKind::Read && prev_kind == RaceKind::Write && prev_tag)
      return defer(prev, prev_kind, now, kind, prev_tag, a);
  }
  report(prev, prev_kind, now, kind, a);
}

void RaceDetector::defer(const Epoch& prev, RaceKind prev_kind, const Epoch& cur, RaceKind cur_kind,
                         uint32_t tag, const Access& a) {
  const uint64_t key = pair_key(prev, cur);
  if (reported_pairs_.count(key)) return;
  auto it = deferred_index_.find(key);
  if (it == deferred_index_.end()) {
    if (deferred_.size() >= kMaxDeferred) return report(prev, prev_kind, cur, cur_kind, a);
    it = deferred_index_.emplace(key, deferred_.size()).first;
    deferred_.push_back(Deferred{describe(prev, prev_kind, cur, cur_kind, a), key, {}});
  }
  auto& tags = deferred_[it->second].tags;
  if (tags.empty() || tags.back() != tag) tags.push_back(tag);
}

void RaceDetector::resolve_writes() {
  for (auto& w : deferred_) {
    const bool changed = std::any_of(w.tags.begin(), w.tags.end(), [&](uint32_t t) {
      return tags_[t].load(std::memory_order_relaxed);
    });
    if (changed && !reported_pairs_.count(w.key) && reports_.size() < 20) {
      reported_pairs_[w.key] = true;
      reports_.push_back(std::move(w.d));
    }
  }
  deferred_.clear();
  deferred_index_.clear();
}

Diagnostic RaceDetector::describe(const Epoch& prev, RaceKind prev_kind, const Epoch& now,
                                  RaceKind cur_kind, const Access& a) const {
  const AccessSite p = site_text(prev.site);
  const AccessSite cur = site_text(now.site);
  const char* pw = verb(prev_kind);
  const char* cw = verb(cur_kind);
  std::string same_core = p.core == cur.core ? "" : " (different cores)";
  std::string hint =
      p.core == cur.core
          ? fmt::format(
                "order them with set_flag({0}, {1}, id) after the first and "
                "wait_flag({0}, {1}, id) before the second",
                ir::to_string(p.pipe), ir::to_string(cur.pipe))
          : (p.core.substr(0, p.core.find('.')) != cur.core.substr(0, cur.core.find('.'))
                 ? "cores of different AI cores synchronise only at T.sync_all: give each core "
                   "its own slice of the buffer (index it by cid), or put a T.sync_all between"
             : (p.core.find("AIC") == std::string::npos &&
                cur.core.find("AIC") == std::string::npos)
                 ? "the two AIVs of an AI core cannot order each other: give each its own rows "
                   "(index by vid)"
                 : "order them with set_cross_flag / wait_cross_flag");
  return Diagnostic{
      cur.op->loc,
      "race",
      fmt::format("data race on '{}'{}: {} {} {} at {} ({}) and {} {} {} at {} ({}) with no "
                  "flag ordering them",
                  a.t->buffer->name, same_core, p.core, ir::to_string(p.pipe), pw, p.op->loc.str(),
                  p.iteration, cur.core, ir::to_string(cur.pipe), cw, cur.op->loc.str(),
                  cur.iteration),
      {},
      hint};
}

}  // namespace tilepipe::sim

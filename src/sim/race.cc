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
      gen_(static_cast<size_t>(ai_cores * kRaceThreads), 0) {
  for (int ai = 0; ai < ai_cores; ++ai)
    for (int t = 0; t < kRaceThreads; ++t) {
      clock(ai, t).fill(0);
      clock(ai, t)[static_cast<size_t>(t)] = 1;
    }
}

VectorClock RaceDetector::release(int ai, int tid) {
  VectorClock vc = clock(ai, tid);
  ++clock(ai, tid)[static_cast<size_t>(tid)];
  return vc;
}

void RaceDetector::acquire(int ai, int tid, const VectorClock& vc) {
  join(clock(ai, tid), vc);
}

void RaceDetector::barrier(int ai) {
  VectorClock all{};
  for (int t = 0; t < kRaceThreads; ++t) join(all, clock(ai, t));
  for (int t = 0; t < kRaceThreads; ++t) {
    clock(ai, t) = all;
    ++clock(ai, t)[static_cast<size_t>(t)];
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

bool RaceDetector::ordered(const Epoch& prev, int ai, int tid) const {
  if (prev.ai != ai) {  // AI cores synchronise only at T.sync_all
    const uint32_t k = gen_[static_cast<size_t>(ai * kRaceThreads + tid)];
    return k > 0 && prev.clock <=
                        passed_[static_cast<size_t>(prev.ai)][k - 1][static_cast<size_t>(prev.tid)];
  }
  if (prev.tid == tid) return true;  // program order within a pipe
  return prev.clock <=
         clocks_[static_cast<size_t>(ai * kRaceThreads + tid)][static_cast<size_t>(prev.tid)];
}

void RaceDetector::note(std::vector<Epoch>& list, const Epoch& e) {
  for (auto& r : list)
    if (r.ai == e.ai && r.tid == e.tid) {
      r = e;
      return;
    }
  list.push_back(e);
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

uint64_t RaceDetector::pair_key(const Epoch& prev, const AccessSite& cur) const {
  const AccessSite& p = sites_[static_cast<size_t>(prev.site)];
  return reinterpret_cast<uintptr_t>(p.op) * 31 + reinterpret_cast<uintptr_t>(cur.op);
}

void RaceDetector::report(const Epoch& prev, RaceKind prev_kind, const AccessSite& cur,
                          RaceKind cur_kind, const Access& a) {
  const uint64_t key = pair_key(prev, cur);
  if (reported_pairs_.count(key) || reports_.size() >= 20) return;
  reported_pairs_[key] = true;
  reports_.push_back(describe(prev, prev_kind, cur, cur_kind, a));
}

void RaceDetector::defer_write(const Epoch& prev, const AccessSite& cur, const Access& a) {
  const uint64_t key = pair_key(prev, cur);
  if (reported_pairs_.count(key)) return;
  auto it = deferred_index_.find(key);
  if (it == deferred_index_.end()) {
    if (deferred_.size() >= kMaxDeferred)
      return report(prev, RaceKind::Write, cur, RaceKind::Write, a);
    it = deferred_index_.emplace(key, deferred_.size()).first;
    deferred_.emplace_back(describe(prev, RaceKind::Write, cur, RaceKind::Write, a), key);
  }
  std::atomic<bool>* flag = &deferred_[it->second].changed;
  if (tag_ && tag_ != flag)  // one flag per write: a second pair in it is reported now
    return report(prev, RaceKind::Write, cur, RaceKind::Write, a);
  tag_ = flag;
}

void RaceDetector::resolve_writes() {
  for (auto& w : deferred_)
    if (w.changed.load(std::memory_order_relaxed) && !reported_pairs_.count(w.key) &&
        reports_.size() < 20) {
      reported_pairs_[w.key] = true;
      reports_.push_back(std::move(w.d));
    }
  deferred_.clear();
  deferred_index_.clear();
}

Diagnostic RaceDetector::describe(const Epoch& prev, RaceKind prev_kind, const AccessSite& cur,
                                  RaceKind cur_kind, const Access& a) const {
  const AccessSite& p = sites_[static_cast<size_t>(prev.site)];
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

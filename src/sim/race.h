// Race detector: happens-before over flags, with vector clocks per pipe.
//
// Threads are the pipes of the three cores of one AI core (AIC, AIV0, AIV1 x 7 pipes).
// set_flag / set_cross_flag release the setter's clock, the matching wait acquires it, the
// scalar unit's clock flows into every instruction it dispatches, and a pipe is ordered
// with itself. Accesses are tracked per 32-byte block of each memory; two accesses to a
// block, at least one a write, from different threads with no happens-before path are a
// race. Cores of different AI cores synchronise only at T.sync_all (a barrier of every
// core): an access of another AI core is ordered before a thread that has passed the k-th
// barrier when it precedes what its AI core released arriving at that barrier; any other
// conflict between AI cores is a race. Reads config: nothing.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "instr.h"
#include "tilepipe/verify.h"

namespace tilepipe::sim {

inline constexpr int kRaceThreads = 3 * ir::kNumPipes;  // AIC, AIV0, AIV1
using VectorClock = std::array<uint32_t, kRaceThreads>;

/// Who made an access, for reports.
struct AccessSite {
  std::string core;  // "core3.AIV0"
  ir::Pipe pipe = ir::Pipe::S;
  const lower::OpTemplate* op = nullptr;
  std::string iteration;  // loop state, e.g. "cid=3, loop@57=2"
};

/// How an access touches memory. Atomic adds (the DMA unit's SetAtomicAdd) commute with
/// each other, so two unordered ones are not a race; against a plain read or write they are.
enum class RaceKind : uint8_t { Read, Write, AtomicAdd };

class RaceDetector {
 public:
  explicit RaceDetector(int ai_cores);

  static int thread(int role, ir::Pipe p) { return role * ir::kNumPipes + static_cast<int>(p); }
  VectorClock& clock(int ai, int tid) {
    return clocks_[static_cast<size_t>(ai * kRaceThreads + tid)];
  }

  /// Release: a copy of the thread's clock to hand to the waiter; then the thread advances.
  VectorClock release(int ai, int tid);
  /// Acquire: joins a released clock into the thread's clock.
  void acquire(int ai, int tid, const VectorClock& vc);
  /// Every thread of AI core `ai` has reached a common point (a block boundary): each
  /// acquires all the others' clocks, then advances.
  void barrier(int ai);

  /// T.sync_all: a thread of AI core `ai` arrives, releasing `vc`.
  void arrive_all(int ai, const VectorClock& vc);
  /// Every core has arrived: the barrier's clock per AI core (its arrivals' join) is fixed.
  void complete_all();
  /// What AI core `ai`'s threads acquire from the last completed barrier.
  const VectorClock& all_clock(int ai) const { return passed_[static_cast<size_t>(ai)].back(); }
  /// A thread of `ai` has passed the last completed barrier.
  void pass_all(int ai, int tid) {
    gen_[static_cast<size_t>(ai * kRaceThreads + tid)] =
        static_cast<uint32_t>(passed_[static_cast<size_t>(ai)].size());
  }

  /// Records an access and checks it against earlier conflicting ones. `mem` identifies the
  /// memory (GM tensor or one core's scope); `site` is built lazily only on a report.
  template <class SiteFn>
  void access(int ai, int tid, int64_t mem, const Access& a, RaceKind kind, SiteFn&& site);

  std::vector<Diagnostic> take_reports() { return std::move(reports_); }
  bool found() const { return !reports_.empty(); }

  /// Functional runs: an unordered write-write pair on GM is a race only if the second write
  /// changes the bytes — two cores writing the same values (both AIVs of a kernel that does
  /// not split its rows by vid) leave the same memory in either order. Such a pair is held
  /// until the values are known: `take_tag` gives the flag the value executor sets when the
  /// current access's write changed its bytes, `resolve_writes` (after every value was
  /// applied) reports the pairs whose writes did.
  void defer_same_value_writes() { defer_writes_ = true; }
  std::atomic<bool>* take_tag() { return std::exchange(tag_, nullptr); }
  bool has_deferred() const { return !deferred_.empty(); }
  void resolve_writes();

 private:
  struct Epoch {
    int ai = -1, tid = -1;
    uint32_t clock = 0;
    int site = -1;  // index into sites_
  };
  struct Block {
    Epoch write;
    std::vector<Epoch> reads;    // since the last write, latest per thread
    std::vector<Epoch> atomics;  // atomic adds since the last write, latest per thread
  };
  struct Deferred {
    Diagnostic d;
    uint64_t key;
    std::atomic<bool> changed = false;
  };
  static constexpr size_t kMaxDeferred = 64;  // more pairs are reported as they are found

  static void note(std::vector<Epoch>& list, const Epoch& e);
  bool ordered(const Epoch& prev, int ai, int tid) const;
  uint64_t pair_key(const Epoch& prev, const AccessSite& cur) const;
  Diagnostic describe(const Epoch& prev, RaceKind prev_kind, const AccessSite& cur,
                      RaceKind cur_kind, const Access& a) const;
  void report(const Epoch& prev, RaceKind prev_kind, const AccessSite& cur, RaceKind cur_kind,
              const Access& a);
  void defer_write(const Epoch& prev, const AccessSite& cur, const Access& a);

  std::vector<VectorClock> clocks_;
  std::vector<VectorClock> arriving_;             // per AI core: the open barrier's join
  std::vector<std::vector<VectorClock>> passed_;  // per AI core: each completed barrier's
  std::vector<uint32_t> gen_;                     // per thread: barriers it has passed
  std::unordered_map<int64_t, std::unordered_map<int64_t, Block>> shadow_;
  std::vector<AccessSite> sites_;
  std::vector<Diagnostic> reports_;
  std::unordered_map<uint64_t, bool> reported_pairs_;
  bool defer_writes_ = false;
  std::deque<Deferred> deferred_;  // stable addresses: the executor holds their flags
  std::unordered_map<uint64_t, size_t> deferred_index_;
  std::atomic<bool>* tag_ = nullptr;
};

template <class SiteFn>
void RaceDetector::access(int ai, int tid, int64_t mem, const Access& a, RaceKind kind,
                          SiteFn&& site) {
  auto& blocks = shadow_[mem];
  int cur_site = -1;
  auto cur = [&]() -> int {
    if (cur_site < 0) {
      sites_.push_back(site());
      cur_site = static_cast<int>(sites_.size()) - 1;
    }
    return cur_site;
  };
  auto check = [&](const std::vector<Epoch>& list, RaceKind prev, const Access& acc) {
    for (const auto& e : list)
      if (!ordered(e, ai, tid)) report(e, prev, sites_[static_cast<size_t>(cur())], kind, acc);
  };
  for_each_run(a, [&](int64_t lo, int64_t run) {
    for (int64_t b = lo / 32; b <= (lo + run - 1) / 32; ++b) {
      Block& blk = blocks[b];
      if (blk.write.tid >= 0 && !ordered(blk.write, ai, tid)) {
        if (defer_writes_ && kind == RaceKind::Write && a.t->scope == ir::Scope::GM)
          defer_write(blk.write, sites_[static_cast<size_t>(cur())], a);
        else
          report(blk.write, RaceKind::Write, sites_[static_cast<size_t>(cur())], kind, a);
      }
      if (kind != RaceKind::AtomicAdd) check(blk.atomics, RaceKind::AtomicAdd, a);
      if (kind != RaceKind::Read) check(blk.reads, RaceKind::Read, a);
      const Epoch now{ai, tid, clock(ai, tid)[static_cast<size_t>(tid)], cur()};
      if (kind == RaceKind::Write) {
        blk.reads.clear();
        blk.atomics.clear();
        blk.write = now;
      } else {
        note(kind == RaceKind::Read ? blk.reads : blk.atomics, now);
      }
    }
  });
}

}  // namespace tilepipe::sim

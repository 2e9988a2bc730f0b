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
// conflict between AI cores is a race. The shadow is paged per memory (GM pages only where
// touched), a block holds its write and first read inline, and an access's site is kept as
// numbers, formatted only for a report (docs/simulator.md#race-detection). Reads config:
// nothing.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
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

/// A core's loop state as text: `core`, then cid and each enclosing loop's line and value
/// from `state` = {cid, line, value, line, value, ...}.
std::string loop_state_text(const std::string& core, std::span<const int64_t> state);

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

  /// Names core `core` in reports.
  void name_core(int core, std::string name);
  /// The site of the accesses one instruction makes now: core, pipe, op and the core's
  /// loop state (as loop_state_text reads it). Kept as numbers, formatted only for a
  /// report; the core's previous site is reused when nothing changed.
  int site(int core, ir::Pipe pipe, const lower::OpTemplate* op, std::span<const int64_t> loops);

  /// Records an access made at `site` and checks it against earlier conflicting ones.
  /// `mem` identifies the memory (GM tensor or one core's scope).
  void access(int ai, int tid, int64_t mem, const Access& a, RaceKind kind, int site);

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
  struct Epoch {  // 12 bytes: two sit inline in a Block
    uint32_t clock = 0;
    int32_t site = -1;  // index into sites_
    int16_t ai = -1;
    int16_t tid = -1;  // -1: none
  };
  /// One 32-byte block of a memory: the last write, the first reader since it inline, and
  /// (rarely) more readers and atomic adds in more_[more].
  struct Block {
    Epoch write;
    Epoch read;
    uint32_t more = 0;  // 0: none
  };
  struct More {
    std::vector<Epoch> reads;    // since the last write, latest per thread, after Block::read
    std::vector<Epoch> atomics;  // atomic adds since the last write, latest per thread
  };
  struct Deferred {
    Diagnostic d;
    uint64_t key;
    std::atomic<bool> changed = false;
  };
  static constexpr size_t kMaxDeferred = 64;  // more pairs are reported as they are found

  /// A memory's blocks, paged so that a large GM tensor holds shadow only where touched.
  struct Shadow {
    static constexpr int kPageShift = 9;  // 512 blocks: 16 KiB of memory per page
    std::vector<std::unique_ptr<Block[]>> pages;
    Block& block(int64_t b) {
      const auto p = static_cast<size_t>(b >> kPageShift);
      if (p >= pages.size()) pages.resize(p + 1);
      if (!pages[p]) pages[p] = std::make_unique<Block[]>(size_t{1} << kPageShift);
      return pages[p][static_cast<size_t>(b & ((int64_t{1} << kPageShift) - 1))];
    }
  };
  struct Site {
    const lower::OpTemplate* op;
    uint32_t loops;  // offset of the loop state in loops_
    int32_t core;
    ir::Pipe pipe;
  };

  bool ordered(const Epoch& prev, int ai, int tid) const;
  void check(const Epoch& prev, RaceKind prev_kind, const Epoch& now, RaceKind kind,
             const Access& a) {
    if (prev.tid >= 0 && !ordered(prev, now.ai, now.tid)) report(prev, prev_kind, now, kind, a);
  }
  void visit(Block& blk, const Epoch& now, RaceKind kind, const Access& a);
  static void note(std::vector<Epoch>& list, const Epoch& e);
  uint64_t pair_key(const Epoch& prev, const Epoch& cur) const;
  Diagnostic describe(const Epoch& prev, RaceKind prev_kind, const Epoch& cur, RaceKind cur_kind,
                      const Access& a) const;
  void report(const Epoch& prev, RaceKind prev_kind, const Epoch& cur, RaceKind cur_kind,
              const Access& a);
  void defer_write(const Epoch& prev, const Epoch& cur, const Access& a);
  AccessSite site_text(int site) const;
  std::span<const int64_t> loops_of(const Site& s) const {
    return {loops_.data() + s.loops + 1, static_cast<size_t>(loops_[s.loops])};
  }
  void collect_sites();

  std::vector<VectorClock> clocks_;
  std::vector<VectorClock> arriving_;             // per AI core: the open barrier's join
  std::vector<std::vector<VectorClock>> passed_;  // per AI core: each completed barrier's
  std::vector<uint32_t> gen_;                     // per thread: barriers it has passed
  std::unordered_map<int64_t, Shadow> shadow_;
  int64_t last_mem_ = -1;
  Shadow* last_shadow_ = nullptr;
  std::vector<More> more_;           // [0] unused
  std::vector<uint32_t> free_more_;  // entries of more_ no block holds
  std::vector<Site> sites_;
  std::vector<int64_t> loops_;      // per loop state: its length, then the state
  std::vector<int32_t> core_site_;  // per core: its last site, -1 none
  std::vector<std::string> core_names_;
  size_t collect_at_ = size_t{1} << 20;  // sites_ size that triggers collect_sites
  std::vector<Diagnostic> reports_;
  std::unordered_map<uint64_t, bool> reported_pairs_;
  bool defer_writes_ = false;
  std::deque<Deferred> deferred_;  // stable addresses: the executor holds their flags
  std::unordered_map<uint64_t, size_t> deferred_index_;
  std::atomic<bool>* tag_ = nullptr;
};

inline bool RaceDetector::ordered(const Epoch& prev, int ai, int tid) const {
  if (prev.ai != ai) {  // AI cores synchronise only at T.sync_all
    const uint32_t k = gen_[static_cast<size_t>(ai * kRaceThreads + tid)];
    return k > 0 && prev.clock <=
                        passed_[static_cast<size_t>(prev.ai)][k - 1][static_cast<size_t>(prev.tid)];
  }
  if (prev.tid == tid) return true;  // program order within a pipe
  return prev.clock <=
         clocks_[static_cast<size_t>(ai * kRaceThreads + tid)][static_cast<size_t>(prev.tid)];
}

inline void RaceDetector::access(int ai, int tid, int64_t mem, const Access& a, RaceKind kind,
                                 int site) {
  if (mem != last_mem_) {  // unordered_map nodes stay put: the pointer stays valid
    last_shadow_ = &shadow_[mem];
    last_mem_ = mem;
  }
  Shadow& sh = *last_shadow_;
  const Epoch now{clock(ai, tid)[static_cast<size_t>(tid)], site, static_cast<int16_t>(ai),
                  static_cast<int16_t>(tid)};
  for_each_run(a, [&](int64_t lo, int64_t run) {
    for (int64_t b = lo / 32; b <= (lo + run - 1) / 32; ++b) visit(sh.block(b), now, kind, a);
  });
}

inline void RaceDetector::visit(Block& blk, const Epoch& now, RaceKind kind, const Access& a) {
  if (blk.write.tid >= 0 && !ordered(blk.write, now.ai, now.tid)) {
    if (defer_writes_ && kind == RaceKind::Write && a.t->scope == ir::Scope::GM)
      defer_write(blk.write, now, a);
    else
      report(blk.write, RaceKind::Write, now, kind, a);
  }
  More* m = blk.more ? &more_[blk.more] : nullptr;
  if (m && kind != RaceKind::AtomicAdd)
    for (const auto& e : m->atomics) check(e, RaceKind::AtomicAdd, now, kind, a);
  if (kind != RaceKind::Read) {
    check(blk.read, RaceKind::Read, now, kind, a);
    if (m)
      for (const auto& e : m->reads) check(e, RaceKind::Read, now, kind, a);
  }
  if (kind == RaceKind::Write) {
    blk.write = now;
    blk.read = Epoch{};
    if (m) {
      m->reads.clear();
      m->atomics.clear();
      free_more_.push_back(blk.more);
      blk.more = 0;
    }
    return;
  }
  if (kind == RaceKind::Read &&
      (blk.read.tid < 0 || (blk.read.ai == now.ai && blk.read.tid == now.tid))) {
    blk.read = now;
    return;
  }
  if (!m) {
    if (free_more_.empty()) {
      blk.more = static_cast<uint32_t>(more_.size());
      more_.emplace_back();
    } else {
      blk.more = free_more_.back();
      free_more_.pop_back();
    }
    m = &more_[blk.more];
  }
  note(kind == RaceKind::Read ? m->reads : m->atomics, now);
}

}  // namespace tilepipe::sim

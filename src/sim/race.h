// Race detector: happens-before over flags, with vector clocks per pipe.
//
// Threads are the pipes of the three cores of one AI core (AIC, AIV0, AIV1 x 7 pipes).
// set_flag / set_cross_flag release the setter's clock, the matching wait acquires it, the
// scalar unit's clock flows into every instruction it dispatches, and a pipe is ordered
// with itself. Accesses are tracked per 32-byte block of each memory with a mask of the
// bytes each touched there; two accesses to a byte, at least one a write, from different
// threads with no happens-before path are a race. Cores of different AI cores synchronise only at
// T.sync_all (a barrier of every core): an access of another AI core is ordered before a thread
// that has passed the k-th barrier when it precedes what its AI core released arriving at that
// barrier; any other conflict between AI cores is a race. The shadow is paged per memory (GM pages
// only where touched), a page holds runs of equal blocks until it is cut into many, a block holds
// its write and first read inline, and an access's site is kept as numbers, formatted only for a
// report (docs/simulator.md#race-detection). Reads config:
// nothing.
#pragma once

#include <algorithm>
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
  /// The scalar unit's release also covers its element stores since the last one.
  VectorClock release(int ai, int tid);
  /// Acquire: joins a released clock into the thread's clock.
  void acquire(int ai, int tid, const VectorClock& vc);
  /// The scalar unit waited (a wait_flag(X, S), each flag of a barrier_all on the Vector
  /// core): its element stores so far are done, and the clock it hands to the instructions
  /// it issues next covers them, as PipeBarrier<PIPE_ALL> orders them on the NPU.
  void publish_stores(int ai, int tid) { clock(ai, tid)[static_cast<size_t>(tid)] += 2; }
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
  ///
  /// `store`: an element store of the scalar unit (SetValue). It is ordered with the scalar
  /// unit's own accesses by program order, but not with the instructions it issues after
  /// it: a pipe reading the element needs an S -> pipe flag, as on the NPU. So it takes
  /// the epoch after the scalar unit's clock, which the clock the scalar unit hands to the
  /// instructions it issues does not cover and its next release (set_flag(S, X), a block
  /// boundary) does.
  void access(int ai, int tid, int64_t mem, const Access& a, RaceKind kind, int site,
              bool store = false);
  static bool is_scalar(int tid) { return tid % ir::kNumPipes == static_cast<int>(ir::Pipe::S); }

  std::vector<Diagnostic> take_reports() { return std::move(reports_); }
  /// The bytes the detector holds: shadow, side lists, sites, clocks, tags (its own
  /// accounting, deterministic: capacities, not the allocator's).
  size_t memory_bytes() const;
  bool found() const { return !reports_.empty(); }

  /// Functional runs: an unordered pair of two writes, or of a read and a write, where the
  /// write is a copy (a GM write, or any write of a DMA pipe: MTE1, MTE2, MTE3, FIX) is a
  /// race only if the (later) write changes the bytes: a copy that stores the bytes already
  /// there leaves the same memory, and shows a read the same bytes, in either order (two
  /// cores writing the same values: both AIVs of a kernel that does not split its rows by
  /// vid, or blocks that dequantise the same rows; a loop that reloads a constant tile
  /// into UB each iteration while the vector unit still reads the last load). Every such
  /// write gets a tag, the flag the value executor sets when the write changed its bytes
  /// (`take_tag`, right after the write's accesses); such a pair is held until the values
  /// are known, and `resolve_writes` (after every value was applied) reports the pairs
  /// whose write did. A vector or Cube write is reported at once (its values are computed,
  /// comparing them would cost every instruction a copy of its output).
  void defer_same_value_writes() { defer_writes_ = true; }
  std::atomic<bool>* take_tag() {
    return tag_ ? &tags_[static_cast<size_t>(std::exchange(tag_, 0))] : nullptr;
  }
  bool has_deferred() const { return !deferred_.empty(); }
  void resolve_writes();

 private:
  struct Epoch {  // 12 bytes: two sit inline in a Block
    uint32_t clock = 0;
    int32_t site = -1;  // index into sites_
    int16_t ai = -1;
    int16_t tid = -1;  // -1: none
  };
  /// An access kept in a side list: the bytes of the block it touched, and a write's tag.
  struct Entry {
    Epoch e;
    uint32_t mask;
    uint32_t tag = 0;
  };
  /// One 32-byte block of a memory: the last write and the first reader since it inline,
  /// each with the mask of the block's bytes it touched (bit i: byte i), and (rarely) more
  /// in more_[more]: earlier writes still holding bytes the last did not write (rows shorter
  /// than a block), more readers, atomic adds. Per byte only the last write and each
  /// thread's last read since it matter: a later access ordered after the newest is
  /// ordered after the older ones of its thread.
  struct Block {
    Epoch write;
    Epoch read;
    uint32_t wmask = 0, rmask = 0;
    uint32_t wtag = 0;  // the write's tag (tags_), 0: none
    uint32_t more = 0;  // 0: none
  };
  struct More {
    std::vector<Entry> writes;   // older writes, of bytes the block's write did not cover
    std::vector<Entry> reads;    // since the bytes' last write, after Block::read
    std::vector<Entry> atomics;  // atomic adds since the bytes' last write
  };
  struct Deferred {
    Diagnostic d;
    uint64_t key;
    std::vector<uint32_t> tags;  // the deciding writes: a race if any changed its bytes
  };
  static constexpr size_t kMaxDeferred = 64;  // more pairs are reported as they are found

  /// A memory's blocks, paged so that a large GM tensor holds shadow only where touched. A
  /// page holds its blocks as runs of equal blocks while it has few (an access writes or
  /// reads a run of whole blocks at once, and every block it covers gets the same state),
  /// and one Block per block once an access pattern has cut it into more: a copy of a
  /// 16 KiB row or tile costs one run, not 512 blocks, and the shadow stays exact.
  struct Shadow {
    static constexpr int kPageShift = 9;  // 512 blocks: 16 KiB of memory per page
    static constexpr uint32_t kPageBlocks = uint32_t{1} << kPageShift;
    static constexpr size_t kMaxRuns = 96;  // more: the page turns dense
    struct Run {
      uint32_t start;  // blocks [start, the next run's start) hold `b`
      Block b;
    };
    struct Page {
      std::vector<Run> runs;           // while sparse: sorted, covering the page
      std::unique_ptr<Block[]> dense;  // once cut into more than kMaxRuns runs
    };
    std::vector<std::unique_ptr<Page>> pages;
    Page& page(int64_t p) {
      const auto i = static_cast<size_t>(p);
      if (i >= pages.size()) pages.resize(i + 1);
      if (!pages[i]) {
        pages[i] = std::make_unique<Page>();
        pages[i]->runs.push_back(Run{0, Block{}});
      }
      return *pages[i];
    }
  };
  struct Site {
    const lower::OpTemplate* op;
    uint32_t loops;  // offset of the loop state in loops_
    int32_t core;
    ir::Pipe pipe;
  };

  bool ordered(const Epoch& prev, int ai, int tid) const;
  void check(const Epoch& prev, RaceKind prev_kind, uint32_t prev_tag, const Epoch& now,
             RaceKind kind, const Access& a) {
    if (prev.tid >= 0 && !ordered(prev, now.ai, now.tid))
      conflict(prev, prev_kind, prev_tag, now, kind, a);
  }
  void conflict(const Epoch& prev, RaceKind prev_kind, uint32_t prev_tag, const Epoch& now,
                RaceKind kind, const Access& a);
  void visit(Block& blk, const Epoch& now, RaceKind kind, uint32_t mask, uint32_t tag,
             const Access& a);
  /// Visits blocks [from, to] of page `pg`, each touched on the bytes of `mask`.
  void visit_range(Shadow::Page& pg, uint32_t from, uint32_t to, const Epoch& now, RaceKind kind,
                   uint32_t mask, uint32_t tag, const Access& a);
  /// The index of the run of `pg` that starts at block `at`, splitting the run holding it.
  size_t split(Shadow::Page& pg, uint32_t at);
  void densify(Shadow::Page& pg);
  static bool equal(const Block& x, const Block& y) {
    return x.more == 0 && y.more == 0 && same(x.write, y.write) && same(x.read, y.read) &&
           x.wmask == y.wmask && x.rmask == y.rmask && x.wtag == y.wtag;
  }
  /// A copy of `b` for another block: its own side lists.
  Block copy(const Block& b);
  More& more_of(Block& blk);
  static bool is_copy_pipe(ir::Pipe p) {
    return p == ir::Pipe::MTE1 || p == ir::Pipe::MTE2 || p == ir::Pipe::MTE3 || p == ir::Pipe::FIX;
  }
  static bool same(const Epoch& x, const Epoch& y) {
    return x.clock == y.clock && x.site == y.site && x.ai == y.ai && x.tid == y.tid;
  }
  static void note(std::vector<Entry>& list, const Entry& e);
  static void forget(std::vector<Entry>& list, uint32_t mask);
  uint64_t pair_key(const Epoch& prev, const Epoch& cur) const;
  Diagnostic describe(const Epoch& prev, RaceKind prev_kind, const Epoch& cur, RaceKind cur_kind,
                      const Access& a) const;
  void report(const Epoch& prev, RaceKind prev_kind, const Epoch& cur, RaceKind cur_kind,
              const Access& a);
  void defer(const Epoch& prev, RaceKind prev_kind, const Epoch& cur, RaceKind cur_kind,
             uint32_t tag, const Access& a);
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
  std::vector<Deferred> deferred_;
  std::unordered_map<uint64_t, size_t> deferred_index_;
  std::deque<std::atomic<bool>> tags_;  // [0] unused; stable addresses: the executor sets them
  uint32_t tag_ = 0;                    // the current write's tag, until take_tag
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
                                 int site, bool store) {
  if (mem != last_mem_) {  // unordered_map nodes stay put: the pointer stays valid
    last_shadow_ = &shadow_[mem];
    last_mem_ = mem;
  }
  Shadow& sh = *last_shadow_;
  const Epoch now{clock(ai, tid)[static_cast<size_t>(tid)] + (store ? 1 : 0), site,
                  static_cast<int16_t>(ai), static_cast<int16_t>(tid)};
  uint32_t tag = 0;
  if (defer_writes_ && kind == RaceKind::Write) {
    tag_ = 0;  // conflict() defers only a pair with this write's own tag
    if (a.t->scope == ir::Scope::GM || is_copy_pipe(sites_[static_cast<size_t>(site)].pipe)) {
      tags_.emplace_back(false);
      tag = tag_ = static_cast<uint32_t>(tags_.size() - 1);
    }
  }
  auto mask_of = [](int64_t lo, int64_t hi, int64_t b) {  // bytes of block b in [lo, hi)
    const int64_t from = std::max<int64_t>(lo - b * 32, 0), to = std::min<int64_t>(hi - b * 32, 32);
    return to - from == 32 ? ~0u : ((1u << (to - from)) - 1) << from;
  };
  for_each_run(a, [&](int64_t lo, int64_t run) {
    const int64_t hi = lo + run;  // bytes [lo, hi)
    const int64_t first = lo / 32, last = (hi - 1) / 32;
    const uint32_t first_mask = mask_of(lo, hi, first), last_mask = mask_of(lo, hi, last);
    // Blocks [b0, b1] of one page: a partly touched first or last block on its own, the
    // wholly touched ones between as one range.
    auto range = [&](int64_t b0, int64_t b1) {
      const int64_t base = b0 & ~int64_t{Shadow::kPageBlocks - 1};
      Shadow::Page& pg = sh.page(b0 >> Shadow::kPageShift);
      auto at = [&](int64_t b) { return static_cast<uint32_t>(b - base); };
      if (b0 == first && first_mask != ~0u) {
        visit_range(pg, at(b0), at(b0), now, kind, first_mask, tag, a);
        ++b0;
      }
      const bool part_last = b1 >= b0 && b1 == last && last_mask != ~0u;
      if (b1 - part_last >= b0) visit_range(pg, at(b0), at(b1 - part_last), now, kind, ~0u, tag, a);
      if (part_last) visit_range(pg, at(b1), at(b1), now, kind, last_mask, tag, a);
    };
    for (int64_t b = first; b <= last;) {
      const int64_t end = std::min(last, b | (Shadow::kPageBlocks - 1));
      range(b, end);
      b = end + 1;
    }
  });
}

inline void RaceDetector::visit_range(Shadow::Page& pg, uint32_t from, uint32_t to,
                                      const Epoch& now, RaceKind kind, uint32_t mask, uint32_t tag,
                                      const Access& a) {
  if (pg.dense) {
    for (uint32_t b = from; b <= to; ++b) visit(pg.dense[b], now, kind, mask, tag, a);
    return;
  }
  // Every block of a run holds the same state and takes the same access: one visit each.
  const size_t i = split(pg, from);
  const size_t j = to + 1 < Shadow::kPageBlocks ? split(pg, to + 1) : pg.runs.size();
  for (size_t k = i; k < j; ++k) visit(pg.runs[k].b, now, kind, mask, tag, a);
  // Runs the access left equal join again: a page covered by one copy is one run.
  size_t out = i > 0 ? i - 1 : 0;
  for (size_t k = out + 1; k < pg.runs.size(); ++k) {
    if (k <= j && equal(pg.runs[out].b, pg.runs[k].b)) continue;
    pg.runs[++out] = pg.runs[k];
  }
  pg.runs.resize(out + 1);
  if (pg.runs.size() > Shadow::kMaxRuns) densify(pg);
}

inline void RaceDetector::visit(Block& blk, const Epoch& now, RaceKind kind, uint32_t mask,
                                uint32_t tag, const Access& a) {
  if (blk.wmask & mask) check(blk.write, RaceKind::Write, blk.wtag, now, kind, a);
  More* m = blk.more ? &more_[blk.more] : nullptr;
  if (m) {
    for (const auto& w : m->writes)
      if (w.mask & mask) check(w.e, RaceKind::Write, w.tag, now, kind, a);
    if (kind != RaceKind::AtomicAdd)
      for (const auto& e : m->atomics)
        if (e.mask & mask) check(e.e, RaceKind::AtomicAdd, 0, now, kind, a);
  }
  if (kind != RaceKind::Read) {
    if (blk.rmask & mask) check(blk.read, RaceKind::Read, 0, now, kind, a);
    if (m)
      for (const auto& e : m->reads)
        if (e.mask & mask) check(e.e, RaceKind::Read, 0, now, kind, a);
  }
  if (kind == RaceKind::Write) {
    if (same(blk.write, now)) {  // another row of the same access
      blk.wmask |= mask;
    } else {
      if (blk.wmask & ~mask)  // the last write keeps the bytes this one does not write
        more_of(blk).writes.push_back(Entry{blk.write, blk.wmask & ~mask, blk.wtag});
      blk.write = now;
      blk.wmask = mask;
      blk.wtag = tag;
    }
    if ((blk.rmask &= ~mask) == 0) blk.read = Epoch{};
    if (blk.more) {
      m = &more_[blk.more];
      forget(m->writes, mask);
      forget(m->reads, mask);
      forget(m->atomics, mask);
      if (m->writes.empty() && m->reads.empty() && m->atomics.empty()) {
        free_more_.push_back(blk.more);
        blk.more = 0;
      }
    }
    return;
  }
  if (kind == RaceKind::Read) {
    if (blk.read.tid < 0) {
      blk.read = now;
      blk.rmask = mask;
      return;
    }
    if (blk.read.ai == now.ai && blk.read.tid == now.tid) {
      if (same(blk.read, now) || (blk.rmask & ~mask) == 0) {  // this read covers it
        blk.rmask = same(blk.read, now) ? blk.rmask | mask : mask;
        blk.read = now;
        return;
      }
      blk.rmask &= ~mask;  // the thread's newer read holds these bytes
    }
  }
  note(kind == RaceKind::Read ? more_of(blk).reads : more_of(blk).atomics, Entry{now, mask});
}

}  // namespace tilepipe::sim

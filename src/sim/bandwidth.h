// Shared bandwidth of the die (HBM, L2) as a reservation ledger over time buckets: a
// transfer moves its bytes at up to its per-core rate through buckets that still have
// capacity, so concurrent streams share the die's bytes/cycle. Reads config: hbm_bw, l2_bw
// (passed in). Ignores: bank/channel locality, read/write turnaround.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "ring.h"

namespace tilepipe::sim {

class BandwidthLedger {
 public:
  /// Buckets count from `origin`, where the kernel's traffic can begin (the launch): the
  /// launch moves a run without moving its transfers against the bucket edges.
  explicit BandwidthLedger(double bytes_per_cycle, double origin = 0, double bucket_cycles = 256);
  /// Moves `bytes` from cycle `start` at up to `rate` bytes/cycle; returns the end cycle.
  /// Stops walking buckets once past `limit` (the run's cycle budget) and returns a time
  /// past it: a starved transfer (a die bandwidth near zero) must not walk forever.
  double transfer(double start, double bytes, double rate, double limit);
  /// Moves every reservation `cycles` later (rounded to whole buckets): fast-forward.
  void shift(double cycles);

 private:
  double capacity_;  // bytes per bucket
  double origin_;
  double bucket_;
  int64_t base_ = 0;  // bucket index of used_.front()
  Ring<double> used_;
};

/// Which bytes of GM are resident in L2 (128-byte lines): a touch of a line that is not
/// resident misses (HBM) and allocates it, later touches hit. Written data is allocated
/// too. When the die's L2 capacity is full, allocating evicts a line chosen by CLOCK
/// (second chance: a line touched since the hand last passed it is kept once more), the
/// usual approximation of LRU. A hit sets the line's reference bit, except while the
/// tensor is wholly resident and nothing was evicted yet (the bits matter only after that).
class L2Residency {
 public:
  L2Residency(const std::vector<int64_t>& tensor_bytes, int64_t capacity, int64_t chunk = 128);
  /// Splits [lo, hi) of tensor `t` into (missed, hit) bytes and makes the range resident.
  /// The range is consecutive rows of `row` bytes starting on line boundaries (row a
  /// multiple of the line, or the whole range): the result is that of touching each row.
  std::pair<int64_t, int64_t> touch(int t, int64_t lo, int64_t hi, int64_t row) {
    // A wholly resident tensor needs no reference bits until the first eviction: most
    // touches of a run, inline.
    if (missing_[static_cast<size_t>(t)] == 0 && !evicted_) return {0, hi - lo};
    return touch_lines(t, lo, hi, row);
  }
  int64_t line_bytes() const { return chunk_; }
  int64_t lines(int t) const { return lines_[static_cast<size_t>(t)].count; }
  /// Whether line `line` of tensor `t` is resident.
  bool resident(int t, int64_t line) const {
    const auto& w = lines_[static_cast<size_t>(t)].resident;
    return (w[static_cast<size_t>(line >> 6)] >> (line & 63)) & 1;
  }
  /// Every line of tensor `t` is resident and nothing was ever evicted: a touch of it hits.
  bool settled(int t) const { return missing_[static_cast<size_t>(t)] == 0 && !evicted_; }
  /// Makes tensor `t` (`bytes` long) wholly resident if it fits in what is still free, as
  /// before the run (die.l2_warm_inputs); returns whether it did.
  bool preload(int t, int64_t bytes);

 private:
  std::pair<int64_t, int64_t> touch_lines(int t, int64_t lo, int64_t hi, int64_t row);
  /// One bit per line, 64 lines a word: the inner loop of every GM copy works on words.
  struct Lines {
    std::vector<uint64_t> resident, referenced;
    int64_t count = 0;
  };
  void allocate(int t, int64_t line);

  int64_t capacity_, chunk_, resident_ = 0;
  std::vector<Lines> lines_;
  std::vector<int64_t> missing_;  // lines of each tensor not resident
  bool evicted_ = false;
  bool evicts_ = true;   // some line may be evicted: the tensors do not all fit
  Ring<int64_t> clock_;  // resident lines in allocation order: tensor << 48 | line
};

/// When each L2 line's fill from HBM completes. A read that hits a line whose fill is still in
/// flight (another core's miss brought it moments ago) gets its data when the fill lands, not
/// at the L2's latency: the L2 merges the request with the outstanding fill, the HBM moves the
/// bytes once. Kept apart from L2Residency, which fast-forward copies to replay addresses.
///
/// The fill times live in a direct-mapped table of kSlots lines (a line's slot from a hash of
/// tensor and line), so memory does not grow with a run's length: a line whose slot another
/// line took since counts as landed, which only a table-full of lines filled at once could
/// cause (a kernel has a few thousand lines in flight).
class L2Fills {
 public:
  explicit L2Fills(size_t tensors) : latest_(tensors, 0.0) {}
  /// Before `l2` touches [lo, hi) of tensor t at cycle `now`: remembers the lines that will
  /// miss (filled() stamps them) and returns the latest fill time of the lines that will
  /// hit, or 0 when none is later than `now`.
  double before_touch(const L2Residency& l2, int t, int64_t lo, int64_t hi, double now);
  /// The misses remembered since the last call land in the L2 at `ready`.
  void filled(double ready);

 private:
  static constexpr size_t kSlots = size_t{1} << 19;
  struct Slot {
    uint64_t key = 0;  // tensor << 40 | line, plus 1 (0: empty)
    double ready = 0;
  };
  static uint64_t key(int t, int64_t line) {
    return ((static_cast<uint64_t>(t) << 40) | static_cast<uint64_t>(line)) + 1;
  }
  static size_t slot(uint64_t k) { return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 45); }
  double ready(int t, int64_t line) const;
  std::vector<Slot> table_;     // empty until the first miss
  std::vector<double> latest_;  // per tensor: the latest fill time stamped
  struct Run {
    int t;
    int64_t lo, hi;  // lines
  };
  std::vector<Run> pending_;
};

/// A union of byte ranges of one tensor (what a core has read), split into 4 KiB pages,
/// each a short sorted list of disjoint ranges: adding a range costs its pages, not a search
/// of every range the core ever read (a GEMM core reads thousands of disjoint row pieces).
class RangeSet {
 public:
  /// Adds [lo, hi); returns how many of its bytes were already in the set.
  int64_t add(int64_t lo, int64_t hi);

 private:
  static constexpr int64_t kPage = 4096;
  /// Partly read pages kept at most: past it the oldest is forgotten, so memory stays
  /// bounded on a long streaming kernel whose cores read scattered pieces (a re-read of a
  /// forgotten piece counts as new: `reloaded` is evidence only, never timing).
  static constexpr size_t kMaxPartialPages = 16384;
  // Pages read whole are one bit each (most re-reads find their page here) and leave the map.
  std::vector<uint64_t> full_;
  std::unordered_map<int64_t, std::vector<std::pair<int32_t, int32_t>>> pages_;
  Ring<int64_t> partial_order_;  // pages as they became partial, oldest first (a superset
                                 // of pages_: filled pages are not taken out)
};

/// What one core has read of each tensor (by GM index).
using ReadRanges = std::map<int, RangeSet>;

}  // namespace tilepipe::sim

// The scalar unit's data cache (one per AIC / AIV core): every scalar read of a GM element
// goes through it. Set-associative, LRU, filled a line at a time; the GM tensors the scalar
// unit may read are kernel inputs (read-only, verify_ranges.cc), so a line never goes stale and
// the cache only decides what a read costs: a hit issue.scalar_dcache.hit_cycles, a miss
// issue.scalar_load_cycles.
#pragma once

#include <cstdint>
#include <vector>

namespace tilepipe::sim {

class ScalarDCache {
 public:
  ScalarDCache() = default;
  ScalarDCache(int64_t bytes, int line_bytes, int ways)
      : line_bytes_(line_bytes),
        ways_(ways),
        sets_(bytes / line_bytes / ways),
        tags_(static_cast<size_t>(bytes / line_bytes), kEmpty) {}

  /// Reads the line holding byte `offset` of GM tensor `tensor`: true on a hit. A miss
  /// fills the line, evicting the set's least recently used one. Each set keeps its ways
  /// in recency order, most recent first. GM tensors start at line-aligned addresses far
  /// apart, so the set is the line's index within its tensor.
  bool read(int tensor, int64_t offset) {
    const int64_t line = offset / line_bytes_;
    const uint64_t tag = (static_cast<uint64_t>(tensor) << 48) ^ static_cast<uint64_t>(line);
    uint64_t* set = tags_.data() + (line % sets_) * ways_;
    int w = 0;
    while (w < ways_ - 1 && set[w] != tag) ++w;
    const bool hit = set[w] == tag;
    for (; w > 0; --w) set[w] = set[w - 1];
    set[0] = tag;
    return hit;
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  int64_t line_bytes_ = 64;
  int64_t ways_ = 1;
  int64_t sets_ = 0;
  std::vector<uint64_t> tags_;
};

}  // namespace tilepipe::sim

// A FIFO on one circular buffer, for the engine's per-instruction queues, the L2's
// CLOCK list and the bandwidth ledgers' buckets.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <vector>

namespace tilepipe::sim {

/// A FIFO on one circular buffer that grows by doubling: no allocation once it has reached
/// its high-water mark (std::deque allocates a node every few elements of a large T, and
/// the engine pushes and pops one per instruction and per flag).
template <class T>
class Ring {
 public:
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  T& operator[](size_t i) { return buf_[(head_ + i) & mask_]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) & mask_]; }
  /// The slot behind the last element, to be filled in place and then committed.
  T& back_slot() {
    if (n_ == cap_) [[unlikely]]
      grow();
    return buf_[(head_ + n_) & mask_];
  }
  void commit_back() { ++n_; }
  /// Room for n elements without growing (an empty ring only).
  void reserve(size_t n) {
    buf_.resize(std::bit_ceil(std::max<size_t>(n, 4)));
    cap_ = buf_.size();
    mask_ = cap_ - 1;
  }
  void push_back(const T& v) {
    back_slot() = v;
    ++n_;
  }
  void pop_front() {
    head_ = (head_ + 1) & mask_;
    // An emptied ring starts again at its first slot: most rings (flag queues, pipe queues)
    // hold a few elements at a time, so they keep reusing the same warm cache lines.
    if (--n_ == 0) head_ = 0;
  }
  template <class F>
  void for_each(F&& f) {
    for (size_t i = 0; i < n_; ++i) f((*this)[i]);
  }

 private:
  [[gnu::noinline]] void grow() {  // keeps back_slot small enough to inline
    std::vector<T> b(std::max<size_t>(4, 2 * buf_.size()));
    // Full: the elements are [head_, end) and then [0, head_).
    auto mid = std::move(buf_.begin() + static_cast<std::ptrdiff_t>(head_), buf_.end(), b.begin());
    std::move(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(head_), mid);
    buf_ = std::move(b);
    head_ = 0;
    cap_ = buf_.size();
    mask_ = cap_ - 1;
  }
  std::vector<T> buf_;
  size_t head_ = 0, n_ = 0, mask_ = 0;
  size_t cap_ = 0;  // buf_.size(), kept: back_slot reads it for every push
};

}  // namespace tilepipe::sim

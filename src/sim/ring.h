// A FIFO on one circular buffer, for the engine's per-instruction queues, the L2's
// CLOCK list and the bandwidth ledgers' buckets.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <memory>
#include <utility>

namespace tilepipe::sim {

/// A FIFO on one circular buffer that grows by doubling: no allocation once it has reached
/// its high-water mark (std::deque allocates a node every few elements of a large T, and
/// the engine pushes and pops one per instruction and per flag).
template <class T>
class Ring {
 public:
  Ring() = default;
  Ring(const Ring& o)
      : buf_(o.buf_ ? std::make_unique<T[]>(o.cap_) : nullptr),
        head_(o.head_),
        n_(o.n_),
        mask_(o.mask_),
        cap_(o.cap_) {
    if (buf_) std::copy(o.buf_.get(), o.buf_.get() + cap_, buf_.get());
  }
  Ring(Ring&& o) noexcept
      : buf_(std::move(o.buf_)),
        head_(std::exchange(o.head_, 0)),
        n_(std::exchange(o.n_, 0)),
        mask_(std::exchange(o.mask_, 0)),
        cap_(std::exchange(o.cap_, 0)) {}
  Ring& operator=(Ring&& o) noexcept {
    Ring(std::move(o)).swap(*this);
    return *this;
  }
  Ring& operator=(const Ring& o) { return *this = Ring(o); }
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
    cap_ = std::bit_ceil(std::max<size_t>(n, 4));
    buf_ = std::make_unique<T[]>(cap_);
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
  void swap(Ring& o) noexcept {
    std::swap(buf_, o.buf_);
    std::swap(head_, o.head_);
    std::swap(n_, o.n_);
    std::swap(mask_, o.mask_);
    std::swap(cap_, o.cap_);
  }
  template <class F>
  void for_each(F&& f) {
    for (size_t i = 0; i < n_; ++i) f((*this)[i]);
  }

 private:
  [[gnu::noinline]] void grow() {  // keeps back_slot small enough to inline
    const size_t cap = std::max<size_t>(4, 2 * cap_);
    auto b = std::make_unique<T[]>(cap);
    // Full: the elements are [head_, cap_) and then [0, head_).
    auto mid = std::move(buf_.get() + head_, buf_.get() + cap_, b.get());
    std::move(buf_.get(), buf_.get() + head_, mid);
    buf_ = std::move(b);
    head_ = 0;
    cap_ = cap;
    mask_ = cap_ - 1;
  }
  // A bare array, not a vector: 16 bytes less, so a Flag (the ring and a few fields) fits
  // one cache line.
  std::unique_ptr<T[]> buf_;
  size_t head_ = 0, n_ = 0, mask_ = 0;
  size_t cap_ = 0;  // kept: back_slot reads it for every push
};

}  // namespace tilepipe::sim

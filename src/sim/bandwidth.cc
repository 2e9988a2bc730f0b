#include "bandwidth.h"

#include <algorithm>
#include <cmath>

namespace tilepipe::sim {

BandwidthLedger::BandwidthLedger(double bytes_per_cycle, double bucket_cycles)
    : capacity_(bytes_per_cycle * bucket_cycles), bucket_(bucket_cycles) {}

double BandwidthLedger::transfer(double start, double bytes, double rate) {
  constexpr int64_t kKeep = 1 << 16;  // buckets kept behind the newest request
  double t = start, left = bytes;
  while (left > 1e-9) {
    auto b = static_cast<int64_t>(std::floor(t / bucket_));
    if (b < base_) {  // older than the window: treat as uncontended
      double end = std::min(static_cast<double>(base_) * bucket_, t + left / rate);
      left -= (end - t) * rate;
      t = end;
      continue;
    }
    while (b - base_ >= static_cast<int64_t>(used_.size())) used_.push_back(0);
    while (static_cast<int64_t>(used_.size()) > 2 * kKeep) {
      used_.pop_front();
      ++base_;
    }
    double& used = used_[static_cast<size_t>(b - base_)];
    double bucket_end = static_cast<double>(b + 1) * bucket_;
    double dt = bucket_end - t;
    double room = std::max(0.0, capacity_ - used);
    double can = std::min(rate * dt, room);
    if (can >= left) {
      // Finishes inside this bucket at the slower of the per-core rate and the share left.
      double eff = std::min(rate, room / dt);
      used += left;
      t += left / eff;
      left = 0;
    } else {
      used += can;
      left -= can;
      t = bucket_end;
    }
  }
  return t;
}

void BandwidthLedger::shift(double cycles) {
  base_ += static_cast<int64_t>(std::llround(cycles / bucket_));
}

L2Residency::L2Residency(const std::vector<int64_t>& tensor_bytes, int64_t capacity, int64_t chunk)
    : capacity_(capacity), chunk_(chunk) {
  for (auto b : tensor_bytes) {
    lines_.emplace_back(static_cast<size_t>((b + chunk - 1) / chunk), kAbsent);
    missing_.push_back(static_cast<int64_t>(lines_.back().size()));
  }
}

void L2Residency::allocate(int t, int64_t line) {
  while (resident_ + chunk_ > capacity_ && !clock_.empty()) {
    auto [vt, vl] = clock_.front();
    clock_.pop_front();
    uint8_t& v = lines_[static_cast<size_t>(vt)][static_cast<size_t>(vl)];
    if (v == kReferenced) {  // second chance
      v = kResident;
      clock_.emplace_back(vt, vl);
      continue;
    }
    v = kAbsent;
    resident_ -= chunk_;
    ++missing_[static_cast<size_t>(vt)];
    evicted_ = true;
  }
  if (resident_ + chunk_ > capacity_) return;  // an L2 smaller than one line
  lines_[static_cast<size_t>(t)][static_cast<size_t>(line)] = kResident;
  resident_ += chunk_;
  --missing_[static_cast<size_t>(t)];
  clock_.emplace_back(t, line);
}

std::pair<int64_t, int64_t> L2Residency::touch(int t, int64_t lo, int64_t hi) {
  if (missing_[static_cast<size_t>(t)] == 0 && !evicted_) return {0, hi - lo};
  auto& c = lines_[static_cast<size_t>(t)];
  int64_t miss = 0;
  for (int64_t k = lo / chunk_; k * chunk_ < hi && k < static_cast<int64_t>(c.size()); ++k) {
    int64_t a = std::max(lo, k * chunk_), b = std::min(hi, (k + 1) * chunk_);
    uint8_t& v = c[static_cast<size_t>(k)];
    if (v != kAbsent) {
      v = kReferenced;
      continue;
    }
    miss += b - a;
    allocate(t, k);
  }
  return {miss, (hi - lo) - miss};
}

}  // namespace tilepipe::sim

#include "bandwidth.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

namespace tilepipe::sim {

BandwidthLedger::BandwidthLedger(double bytes_per_cycle, double origin, double bucket_cycles)
    : capacity_(bytes_per_cycle * bucket_cycles), origin_(origin), bucket_(bucket_cycles) {}

double BandwidthLedger::transfer(double start, double bytes, double rate, double limit) {
  constexpr int64_t kKeep = 1 << 16;  // buckets kept behind the newest request
  double t = start - origin_, left = bytes;
  // floor(t / bucket_) without a libm call
  auto bucket_of = [this](double x) {
    const double q = x / bucket_;
    auto b = static_cast<int64_t>(q);
    return static_cast<double>(b) > q ? b - 1 : b;
  };
  int64_t b = bucket_of(t);
  while (left > 1e-9) {
    if (b < base_) {  // older than the window: treat as uncontended
      double end = std::min(static_cast<double>(base_) * bucket_, t + left / rate);
      left -= (end - t) * rate;
      t = end;
      b = bucket_of(t);
      continue;
    }
    if (b - base_ >= static_cast<int64_t>(used_.size())) {  // a bucket past the window
      // Far past it (a start after a long idle gap): everything kept would be trimmed below,
      // so start the window afresh instead of pushing, and holding, every bucket between.
      if (b - base_ - static_cast<int64_t>(used_.size()) >= 2 * kKeep) {
        while (!used_.empty()) used_.pop_front();
        base_ = b - 2 * kKeep + 1;
      }
      while (b - base_ >= static_cast<int64_t>(used_.size())) used_.push_back(0);
      while (static_cast<int64_t>(used_.size()) > 2 * kKeep) {
        used_.pop_front();
        ++base_;
      }
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
      if (t + origin_ > limit) [[unlikely]]
        return t + origin_ + left / rate;
      // bucket_of(t) without the divide: it is b + 1, or t would stay at the end of bucket b
      // with dt = 0 and the loop never end.
      ++b;
    }
  }
  return t + origin_;
}

void BandwidthLedger::shift(double cycles) {
  base_ += static_cast<int64_t>(std::llround(cycles / bucket_));
}

L2Residency::L2Residency(const std::vector<int64_t>& tensor_bytes, int64_t capacity, int64_t chunk)
    : capacity_(capacity), chunk_(chunk) {
  for (auto b : tensor_bytes) {
    Lines l;
    l.count = (b + chunk - 1) / chunk;
    l.resident.assign(static_cast<size_t>((l.count + 63) / 64), 0);
    l.referenced = l.resident;
    missing_.push_back(l.count);
    lines_.push_back(std::move(l));
  }
  const int64_t lines = std::accumulate(missing_.begin(), missing_.end(), int64_t{0});
  // Where every line fits, none is ever evicted and the CLOCK list would never be read.
  evicts_ = lines * chunk > capacity;
  // The CLOCK list holds each resident line once: at most what fits, or what there is.
  if (evicts_) clock_.reserve(static_cast<size_t>(std::min(capacity / chunk, lines)));
}

bool L2Residency::preload(int t, int64_t bytes) {
  const int64_t lines = lines_[static_cast<size_t>(t)].count;
  if (bytes <= 0 || resident_ + lines * chunk_ > capacity_) return false;
  touch(t, 0, bytes, bytes);
  return true;
}

namespace {
int64_t clock_key(int t, int64_t line) {
  return (static_cast<int64_t>(t) << 48) | line;
}
bool test(const std::vector<uint64_t>& w, int64_t k) {
  return (w[static_cast<size_t>(k >> 6)] >> (k & 63)) & 1;
}
void put(std::vector<uint64_t>& w, int64_t k, bool v) {
  uint64_t bit = uint64_t{1} << (k & 63);
  auto& x = w[static_cast<size_t>(k >> 6)];
  x = v ? x | bit : x & ~bit;
}
}  // namespace

void L2Residency::allocate(int t, int64_t line) {
  while (resident_ + chunk_ > capacity_ && !clock_.empty()) {
    const int vt = static_cast<int>(clock_.front() >> 48);
    const int64_t vl = clock_.front() & ((int64_t{1} << 48) - 1);
    clock_.pop_front();
    Lines& v = lines_[static_cast<size_t>(vt)];
    if (test(v.referenced, vl)) {  // second chance
      put(v.referenced, vl, false);
      clock_.push_back(clock_key(vt, vl));
      continue;
    }
    put(v.resident, vl, false);
    resident_ -= chunk_;
    ++missing_[static_cast<size_t>(vt)];
    evicted_ = true;
  }
  if (resident_ + chunk_ > capacity_) return;  // an L2 smaller than one line
  Lines& l = lines_[static_cast<size_t>(t)];
  put(l.resident, line, true);
  resident_ += chunk_;
  --missing_[static_cast<size_t>(t)];
  if (evicts_) clock_.push_back(clock_key(t, line));
}

std::pair<int64_t, int64_t> L2Residency::touch_lines(int t, int64_t lo, int64_t hi, int64_t row) {
  Lines& l = lines_[static_cast<size_t>(t)];
  const int64_t k0 = lo / chunk_, k1 = std::min(l.count, (hi + chunk_ - 1) / chunk_);
  if (evicts_ && !evicted_ && missing_[static_cast<size_t>(t)] <= k1 - k0 && row < hi - lo) {
    // The tensor may become wholly resident inside the range, and the rows after that point
    // skip their reference bits (which matter only where a line may be evicted): row by row.
    std::pair<int64_t, int64_t> sum{0, 0};
    for (int64_t a = lo; a < hi; a += row) {
      auto [mi, h] = touch(t, a, std::min(hi, a + row), row);
      sum.first += mi;
      sum.second += h;
    }
    return sum;
  }
  int64_t miss = 0;
  for (int64_t w = k0 >> 6; k0 < k1 && w <= (k1 - 1) >> 6; ++w) {
    const int64_t a = std::max(k0, w << 6), b = std::min(k1, (w + 1) << 6);
    const uint64_t mask = (b - a == 64 ? ~uint64_t{0} : ((uint64_t{1} << (b - a)) - 1)) << (a & 63);
    auto& res = l.resident[static_cast<size_t>(w)];
    if ((res & mask) == mask) {  // all hits: one word
      l.referenced[static_cast<size_t>(w)] |= mask;
      continue;
    }
    const uint64_t missed = mask & ~res;
    const int64_t n = std::popcount(missed);
    if (resident_ + n * chunk_ <= capacity_) {
      // Room for every missed line, so nothing is evicted: allocate the word at once, the
      // lines joining the CLOCK list in order as allocate would add them.
      l.referenced[static_cast<size_t>(w)] |= mask & res;
      if (evicts_)
        for (uint64_t bits = missed; bits; bits &= bits - 1)
          clock_.push_back(clock_key(t, (w << 6) + std::countr_zero(bits)));
      // Whole lines, less the parts of the range's first and last lines outside it.
      miss += n * chunk_;
      if (a == k0 && (missed >> (k0 & 63) & 1)) miss -= lo - k0 * chunk_;
      if (b == k1 && (missed >> ((k1 - 1) & 63) & 1)) miss -= k1 * chunk_ - hi;
      res |= missed;
      resident_ += n * chunk_;
      missing_[static_cast<size_t>(t)] -= n;
      continue;
    }
    // A miss allocates and may evict (also lines further on): line by line, in order.
    for (int64_t k = a; k < b; ++k) {
      if (test(l.resident, k)) {
        put(l.referenced, k, true);
        continue;
      }
      miss += std::min(hi, (k + 1) * chunk_) - std::max(lo, k * chunk_);
      allocate(t, k);
    }
  }
  return {miss, (hi - lo) - miss};
}

double L2Fills::ready(int t, int64_t line) const {
  if (table_.empty()) return 0;
  const uint64_t k = key(t, line);
  const Slot& s = table_[slot(k)];
  return s.key == k ? s.ready : 0;
}

double L2Fills::before_touch(const L2Residency& l2, int t, int64_t lo, int64_t hi, double now) {
  const auto ti = static_cast<size_t>(t);
  // A tensor wholly resident since its last fill landed: every touch hits a landed line.
  if (l2.settled(t) && latest_[ti] <= now) return 0;
  const int64_t line = l2.line_bytes(), k0 = lo / line,
                k1 = std::min(l2.lines(t), (hi + line - 1) / line);
  double latest = 0;
  for (int64_t k = k0; k < k1; ++k) {
    if (l2.resident(t, k)) {
      if (latest_[ti] > now) latest = std::max(latest, ready(t, k));
    } else if (!pending_.empty() && pending_.back().t == t && pending_.back().hi == k) {
      ++pending_.back().hi;
    } else {
      pending_.push_back({t, k, k + 1});
    }
  }
  return latest > now ? latest : 0;
}

void L2Fills::filled(double at) {
  if (!pending_.empty() && table_.empty()) table_.resize(kSlots);
  for (const Run& r : pending_) {
    for (int64_t k = r.lo; k < r.hi; ++k) {
      const uint64_t kk = key(r.t, k);
      table_[slot(kk)] = {kk, at};
    }
    latest_[static_cast<size_t>(r.t)] = std::max(latest_[static_cast<size_t>(r.t)], at);
  }
  pending_.clear();
}

int64_t RangeSet::add(int64_t lo, int64_t hi) {
  int64_t overlap = 0;
  const int64_t last_page = (hi - 1) / kPage;
  for (int64_t page = lo / kPage; page <= last_page; ++page) {
    const auto word = static_cast<size_t>(page / 64);
    if (word < full_.size()) {
      // The run of pages read whole from here, within the word: all of it overlaps.
      const int64_t n = std::countr_one(full_[word] >> (page % 64));
      if (n > 0) {
        const int64_t end = std::min(page + n, last_page + 1);
        overlap += std::min(hi, end * kPage) - std::max(lo, page * kPage);
        page = end - 1;
        continue;
      }
    }
    const int64_t base = page * kPage;
    const auto a = static_cast<int32_t>(std::max(lo, base) - base);
    const auto b = static_cast<int32_t>(std::min(hi, base + kPage) - base);
    const uint64_t bit = uint64_t{1} << (page % 64);
    if (a == 0 && b == kPage) {
      // Read whole (most pages of a long run): all that was read of it before overlaps, and
      // it goes straight to full_ without a list to allocate.
      if (!pages_.empty())
        if (auto it = pages_.find(page); it != pages_.end()) {
          for (const auto& [x, y] : it->second) overlap += y - x;
          pages_.erase(it);
        }
      if (word >= full_.size()) full_.resize(word + 1, 0);
      full_[word] |= bit;
      continue;
    }
    auto [slot, added] = pages_.try_emplace(page);
    if (added) {
      // Pages that filled up since stay in the order (they leave pages_ only): forgetting
      // one of those frees nothing, and the order itself stays bounded.
      partial_order_.push_back(page);
      if (partial_order_.size() > kMaxPartialPages) {
        pages_.erase(partial_order_.front());
        partial_order_.pop_front();
      }
    }
    auto& v = slot->second;
    // Ranges that overlap or touch [a, b) merge with it.
    auto first = std::lower_bound(
        v.begin(), v.end(), a,
        [](const std::pair<int32_t, int32_t>& r, int32_t x) { return r.second < x; });
    int32_t nlo = a, nhi = b;
    auto last = first;
    for (; last != v.end() && last->first <= b; ++last) {
      overlap += std::max(0, std::min(b, last->second) - std::max(a, last->first));
      nlo = std::min(nlo, last->first);
      nhi = std::max(nhi, last->second);
    }
    if (first == last) {
      v.insert(first, {nlo, nhi});
    } else {
      *first = {nlo, nhi};
      v.erase(first + 1, last);
    }
    if (v.size() == 1 && v[0] == std::pair<int32_t, int32_t>{0, kPage}) {
      if (word >= full_.size()) full_.resize(word + 1, 0);
      full_[word] |= bit;
      pages_.erase(page);
    }
  }
  return overlap;
}

}  // namespace tilepipe::sim

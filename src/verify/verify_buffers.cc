// Buffers and slices: shapes, slice bounds, UB alignment, and the capacities of GM (the
// die's HBM) and of the on-chip memories.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "verify/verify_internal.h"

namespace tilepipe::verify_detail {

namespace {

std::string kib(int64_t bytes) {
  return fmt::format("{:.1f} KiB", bytes / 1024.0);
}
std::string human_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.1f} GiB", b / (1 << 30));
  if (bytes >= (int64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / (1 << 20));
  return kib(bytes);
}

}  // namespace

void Verifier::declare_gm(const Buffer& b) {
  check_shape(b);
  visible_.back().insert(b->id);
}

bool Verifier::check_shape(const Buffer& b) {
  for (auto d : b->shape) {
    if (d <= 0) {
      error(b->loc, "bad-shape",
            fmt::format("buffer '{}' has shape {}; every dimension must be >= 1", b->name,
                        shape_str(b->shape)),
            "check the kernel parameters that size this buffer");
      return false;
    }
  }
  if (b->shape.empty()) {
    error(b->loc, "bad-shape", fmt::format("buffer '{}' has rank 0", b->name),
          "give it at least one dimension, e.g. {1}");
    return false;
  }
  if (b->bytes() > ir::kMaxBufferBytes) {
    error(b->loc, "bad-shape",
          fmt::format("buffer '{}' has shape {} of {}: more than 2^48 bytes (256 TiB), the "
                      "limit for one buffer",
                      b->name, shape_str(b->shape), ir::to_string(b->dtype)),
          "check the kernel parameters that size this buffer");
    return false;
  }
  return true;
}

bool Verifier::region(const Region& r, const Loc& loc, const char* what) {
  if (!r.buffer) {
    error(loc, "bad-operand", fmt::format("{} operand is empty", what), "pass a buffer or slice");
    return false;
  }
  const auto& b = *r.buffer;
  bool vis = false;
  for (const auto& s : visible_) vis = vis || s.count(b.id);
  if (!vis) {
    error(loc, "undefined-buffer",
          fmt::format("buffer '{}' (allocated at {}) is used outside the block that allocates it",
                      b.name, b.loc.str()),
          "allocate it in a block that encloses every use, e.g. at kernel level");
    return false;
  }
  if (r.start.size() != b.shape.size() || r.extent.size() != b.shape.size()) {
    error(loc, "slice-rank",
          fmt::format("slice of '{}' has {} indices, buffer rank is {}", b.name, r.start.size(),
                      b.shape.size()),
          "index every dimension (trailing dimensions may be omitted: they are taken whole)");
    return false;
  }
  bool ok = true;
  for (size_t d = 0; d < b.shape.size(); ++d) {
    if (r.extent[d] < 1 || r.extent[d] > b.shape[d]) {
      error(loc, "slice-bounds",
            fmt::format("slice of '{}' dimension {}: extent {} outside [1, {}] (shape {})", b.name,
                        d, r.extent[d], b.shape[d], shape_str(b.shape)),
            "use an extent no larger than the dimension");
      ok = false;
      continue;
    }
    Interval iv = range(r.start[d]);
    int64_t max_start = b.shape[d] - r.extent[d];
    bool definitely_out = iv.lo > max_start || iv.hi < 0;
    bool exactly_out = iv.exact && (iv.lo < 0 || iv.hi > max_start);
    if (definitely_out || exactly_out) {
      error(loc, "slice-bounds",
            fmt::format("slice {} of '{}' dimension {} reads [{}, {}) at the extreme, but the "
                        "dimension has {} elements (shape {})",
                        print(r), b.name, d, iv.hi > max_start ? iv.hi : iv.lo,
                        (iv.hi > max_start ? iv.hi : iv.lo) + r.extent[d], b.shape[d],
                        shape_str(b.shape)),
            fmt::format("keep start in [0, {}] for extent {}", max_start, r.extent[d]));
      ok = false;
    }
  }
  return ok;
}

void Verifier::ub_aligned(const Region& r, const Loc& loc, const char* what) {
  if (r.buffer->scope != Scope::UB) return;
  const auto& sh = r.buffer->shape;
  int64_t stride = dtype_bytes(r.buffer->dtype), g = 0;
  for (size_t d = sh.size(); d-- > 0;) {
    int64_t dv = divisor(r.start[d]);
    g = std::gcd(g, dv * stride);
    stride *= sh[d];
  }
  if (g != 0 && g % chip_.ub_align != 0) {
    error(loc, "ub-alignment",
          fmt::format("{} operand {} may start at a byte offset that is a multiple of only {} "
                      "bytes; UB operands must be {}-byte aligned",
                      what, print(r), g, chip_.ub_align),
          "slice whole rows whose size is a multiple of 32 bytes, or pad the row length");
  }
}

void Verifier::check_gm_capacity() {
  std::vector<Buffer> gm(p_.params.begin(), p_.params.end());
  gm.insert(gm.end(), p_.workspaces.begin(), p_.workspaces.end());
  int64_t total = 0;
  for (const auto& b : gm) {
    if (!b || b->bytes() > ir::kMaxBufferBytes) return;  // reported by check_shape
    total += b->bytes();
  }
  if (total <= chip_.hbm_bytes || gm.empty()) return;
  std::stable_sort(gm.begin(), gm.end(),
                   [](const Buffer& a, const Buffer& b) { return a->bytes() > b->bytes(); });
  std::vector<std::string> notes;
  for (size_t i = 0; i < gm.size() && i < 6; ++i)
    notes.push_back(fmt::format("{:<12} {:>10}  shape {}  {}", gm[i]->name,
                                human_bytes(gm[i]->bytes()), shape_str(gm[i]->shape),
                                gm[i]->loc.str()));
  error(gm[0]->loc, "capacity",
        fmt::format("GM overflow: the kernel's tensors need {} ({} bytes), the chip's HBM "
                    "holds {} (die.hbm_bytes = {})",
                    human_bytes(total), total, human_bytes(chip_.hbm_bytes), chip_.hbm_bytes),
        "use smaller shapes (batch, heads or sequence length)", std::move(notes));
}

void Verifier::check_capacity() {
  const auto caps = on_chip_capacities(chip_);
  for (auto [scope, cap] : caps) {
    auto it = allocs_.find(scope);
    if (it == allocs_.end()) continue;
    const int64_t limit = opts_.reserved_tail ? cap->physical : cap->usable;
    // Placed buffers (pinned or planned) occupy [address, address + bytes); the rest
    // follow sequentially after the highest placed byte, as the lowering lays them out.
    int64_t align = scope == Scope::UB ? chip_.ub_align : chip_.l1_align;
    int64_t total = 0;
    const Alloc* first_over = nullptr;
    for (const auto& a : it->second) {
      auto at = p_.addresses.find(a.buf->id);
      if (at == p_.addresses.end()) continue;
      if (at->second < 0 || at->second % align != 0)
        error(a.buf->loc, "bad-address",
              fmt::format("'{}' is placed at byte {} of {}; placements must be {}-byte "
                          "aligned and non-negative",
                          a.buf->name, at->second, to_string(scope), align),
              fmt::format("use a multiple of {}", align));
      total = std::max(total, at->second + a.bytes);
      if (!first_over && total > limit) first_over = &a;
    }
    for (const auto& a : it->second) {
      if (p_.addresses.count(a.buf->id)) continue;
      total = (total + align - 1) / align * align + a.bytes;
      if (!first_over && total > limit) first_over = &a;
    }
    if (!first_over) continue;
    std::vector<Alloc> sorted = it->second;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Alloc& a, const Alloc& b) { return a.bytes > b.bytes; });
    std::vector<std::string> notes;
    for (size_t i = 0; i < sorted.size() && i < 6; ++i) {
      const auto& b = *sorted[i].buf;
      std::string slots =
          b.shape.size() > 2 && b.shape[0] > 1  // [slots, rows, cols], as in the hint
              ? fmt::format(" ({} slots x {})", b.shape[0], kib(sorted[i].bytes / b.shape[0]))
              : "";
      notes.push_back(
          fmt::format("{:<12} {:>10}{}  {}", b.name, kib(sorted[i].bytes), slots, b.loc.str()));
    }
    const auto& big = *sorted.front().buf;
    int64_t excess = total - limit;
    std::string hint;
    if (big.shape.size() > 2 && big.shape[0] > 1) {
      int64_t per = sorted.front().bytes / big.shape[0];
      int64_t fit = big.shape[0] - (excess + per - 1) / per;
      // Name the kernel parameter that sets the slots only if the program declares one
      // (a knob versioning this buffer): a hint must not name a knob the kernel lacks.
      std::string knob = "fewer slots";
      for (const auto& k : p_.knobs)
        if (std::find(k.versioned.begin(), k.versioned.end(), big.name) != k.versioned.end())
          knob = fmt::format("fewer {}", k.param);
      hint = fit >= 1 ? fmt::format(
                            "'{}' has {} slots; {} slots fit ({}), or use smaller "
                            "blocks",
                            big.name, big.shape[0], fit, knob)
                      : fmt::format("shrink '{}' (smaller blocks)", big.name);
    } else {
      hint = fmt::format("free {} : shrink '{}' (smaller blocks) or drop a buffer", kib(excess),
                         big.name);
    }
    error(first_over->buf->loc, "capacity",
          fmt::format("{} overflow on {}: {} needed, {} available ({} bytes > {}{})",
                      to_string(scope), owner(scope) == CoreKind::C ? "AIC" : "AIV", kib(total),
                      kib(limit), total, limit,
                      opts_.reserved_tail && limit != cap->usable
                          ? ", the physical size: the sequential layout may use the reserve"
                          : ""),
          hint, notes);
  }
}

}  // namespace tilepipe::verify_detail

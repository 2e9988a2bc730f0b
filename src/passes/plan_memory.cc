// MEMORY_PLANNING (plan_memory.h): liveness over a linear numbering of the statements
// (widened over the loops that carry a buffer's value across iterations), then first-fit
// placement per scope memory.
#include "passes/plan_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "passes/dependence.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

struct LoopSpan {
  int begin = 0, end = 0;
};

struct BufInfo {
  Buffer buf;
  int alloc_pos = 0;
  std::vector<int> alloc_loops;  // loops enclosing the allocation
  int lo = -1, hi = -1;          // live range (positions, inclusive)
  int64_t bytes = 0;             // rounded to the alignment
  int64_t addr = -1;
};

/// Numbers the statements in program order and records the live range of every buffer.
class Liveness {
 public:
  void walk(const Stmt& s) {
    if (!s) return;
    std::visit([&](const auto& n) { node(n, s); }, s->node);
  }

  std::map<int, BufInfo> bufs;
  std::vector<LoopSpan> loops;
  std::vector<Loc> locs;          // position -> statement location
  std::map<CoreKind, bool> hand;  // a scope of this kind has hand flags

 private:
  int here(const Loc& loc) {
    locs.push_back(loc);
    return static_cast<int>(locs.size()) - 1;
  }

  void use(const Buffer& b, int pos) {
    auto it = bufs.find(b->id);
    if (it == bufs.end()) return;  // GM
    BufInfo& bi = it->second;
    bi.lo = bi.lo < 0 ? pos : std::min(bi.lo, pos);
    bi.hi = std::max(bi.hi, pos);
    for (int l : stack_) {
      if (std::find(bi.alloc_loops.begin(), bi.alloc_loops.end(), l) != bi.alloc_loops.end())
        continue;
      if (carried(l, b->id)) pending_.push_back({b->id, l});
    }
  }

  void node(const SeqStmt& n, const Stmt&) {
    for (const auto& c : n.body) walk(c);
  }
  void node(const ForStmt& n, const Stmt& s) {
    int pos = here(s->loc);
    std::vector<Access> hdr = collect_accesses_header(s);
    for (const auto& a : hdr) use(a.region.buffer, pos);
    int id = static_cast<int>(loops.size());
    loops.push_back({pos, pos});
    loop_bodies_.push_back(n.body);
    stack_.push_back(id);
    walk(n.body);
    stack_.pop_back();
    loops[static_cast<size_t>(id)].end = static_cast<int>(locs.size()) - 1;
  }
  void node(const IfStmt& n, const Stmt& s) {
    int pos = here(s->loc);
    for (const auto& a : collect_accesses_header(s)) use(a.region.buffer, pos);
    walk(n.then_body);
    walk(n.else_body);
  }
  void node(const ScopeStmt& n, const Stmt&) {
    hand[n.kind] = hand[n.kind] || has_hand_sync(n.body);
    walk(n.body);
  }
  void node(const AllocStmt& n, const Stmt& s) {
    int pos = here(s->loc);
    if (n.buffer->scope == Scope::GM) return;
    BufInfo bi;
    bi.buf = n.buffer;
    bi.alloc_pos = pos;
    bi.alloc_loops = stack_;
    bufs[n.buffer->id] = bi;
  }
  template <class T>
  void node(const T&, const Stmt& s) {
    int pos = here(s->loc);
    for (const auto& a : leaf_accesses(s)) use(a.region.buffer, pos);
  }

  /// Does loop `l` carry a value of the buffer from one iteration to the next? Only then
  /// must the buffer stay live over the whole loop: a body that overwrites it before any
  /// read frees its bytes between the uses.
  bool carried(int l, int id) {
    auto key = std::make_pair(l, id);
    auto it = carried_.find(key);
    if (it == carried_.end())
      it = carried_.emplace(key, exposed(loop_bodies_[static_cast<size_t>(l)], id)).first;
    return it->second;
  }

  /// Loads in a loop's bounds or an if's condition.
  static std::vector<Access> collect_accesses_header(const Stmt& s) {
    std::vector<Access> out;
    for (auto& a : collect_accesses(s, {}))
      if (a.stmt == s.get()) out.push_back(std::move(a));
    return out;
  }

 public:
  /// Widens live ranges over the loops that use a buffer without allocating it.
  void finish() {
    for (auto [id, l] : pending_) {
      BufInfo& bi = bufs.at(id);
      bi.lo = std::min(bi.lo, loops[static_cast<size_t>(l)].begin);
      bi.hi = std::max(bi.hi, loops[static_cast<size_t>(l)].end);
    }
    for (auto& [id, bi] : bufs)
      if (bi.lo < 0) bi.lo = bi.hi = bi.alloc_pos;  // never used: a point
  }

 private:
  std::vector<int> stack_;
  std::vector<std::pair<int, int>> pending_;
  std::vector<Stmt> loop_bodies_;
  std::map<std::pair<int, int>, bool> carried_;
};

std::string kib(int64_t bytes) {
  return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024.0);
}

bool overlaps(const BufInfo& a, const BufInfo& b) {
  return a.lo <= b.hi && b.lo <= a.hi;
}

/// The capacity diagnostic: what is live at the peak, and how many slots would fit.
/// Versions of a buffer: the slot count multi-buffering gave it, else (slots written by the
/// author, which the passes do not know) the leading dimension of a buffer of rank >= 3
/// ([slots, rows, cols]; a [rows, cols] tile is not a ring) — of rank >= 2 in hand-synced
/// kernels, whose row vectors are [slots, rows, 1].
int64_t slots_of(const BufInfo& b, const Program& p, bool hand) {
  if (auto it = p.versions.find(b.buf->id); it != p.versions.end()) return it->second;
  const auto& s = b.buf->shape;
  return s.size() >= (hand ? 2u : 3u) ? s[0] : 1;
}

[[noreturn]] void overflow(Scope scope, const ScopeCapacity& cap, std::vector<BufInfo*> all,
                           int64_t needed, const std::vector<Loc>& locs, const Program& prog,
                           bool hand) {
  // The peak: the position where the most bytes are live.
  std::set<int> points;
  for (auto* b : all) points.insert(b->lo);
  int peak = 0;
  int64_t peak_bytes = -1;
  for (int p : points) {
    int64_t sum = 0;
    for (auto* b : all)
      if (b->lo <= p && p <= b->hi) sum += b->bytes;
    if (sum > peak_bytes) {
      peak_bytes = sum;
      peak = p;
    }
  }
  std::vector<BufInfo*> live;
  for (auto* b : all)
    if (b->lo <= peak && peak <= b->hi) live.push_back(b);
  std::stable_sort(live.begin(), live.end(),
                   [](const BufInfo* a, const BufInfo* b) { return a->bytes > b->bytes; });
  std::vector<std::string> notes;
  for (auto* b : live) {
    int64_t n = slots_of(*b, prog, hand);
    std::string slots = n > 1 ? fmt::format(" ({} slots x {})", n, kib(b->bytes / n)) : "";
    notes.push_back(
        fmt::format("{:<12} {:>10}{}  {}", b->buf->name, kib(b->bytes), slots, b->buf->loc.str()));
  }
  // Largest slot count s: every multi-buffer live at the peak cut to at most s slots.
  int64_t max_slots = 0;
  for (auto* b : live) max_slots = std::max(max_slots, slots_of(*b, prog, hand));
  std::string hint;
  int64_t fit = 0;
  for (int64_t s = max_slots - 1; s >= 1 && fit == 0; --s) {
    int64_t sum = 0;
    for (auto* b : live) {
      int64_t n = slots_of(*b, prog, hand);
      sum += n > s ? b->bytes / n * s : b->bytes;
    }
    if (sum <= cap.usable) fit = s;
  }
  // Name the kernel parameter that sets the slots only if the program declares one (a
  // pipeline-stages knob): a hint must not name a knob the kernel lacks.
  std::string stages;
  for (const auto& k : prog.knobs)
    if (k.role == "pipeline_stages") stages = k.param;
  if (fit >= 1 && !stages.empty())
    hint = fmt::format("{} <= {} fits (multi-buffers of at most {} slots), or use smaller blocks",
                       stages, fit, fit);
  else if (fit >= 1)
    hint =
        fmt::format("multi-buffers of at most {} slots fit: fewer slots, or smaller blocks", fit);
  else
    hint = fmt::format("free {}: shrink '{}' (smaller blocks) or drop a buffer",
                       kib(needed - cap.usable), live.empty() ? "?" : live.front()->buf->name);
  Loc at =
      peak >= 0 && peak < static_cast<int>(locs.size()) ? locs[static_cast<size_t>(peak)] : Loc{};
  throw UserError(Diagnostic{
      at, "capacity",
      fmt::format("{} overflow on {}: {} needed, {} available ({} bytes > {}); {} live at the "
                  "peak ({})",
                  to_string(scope), owner(scope) == CoreKind::C ? "AIC" : "AIV", kib(needed),
                  kib(cap.usable), needed, cap.usable, kib(peak_bytes), at.str()),
      notes, hint});
}

}  // namespace

Program plan_memory(const Program& p, const ChipConfig& chip, const PassOptions&) {
  Liveness lv;
  lv.walk(p.body);
  lv.finish();
  Program out = p;
  const auto caps = on_chip_capacities(chip);
  for (auto [scope, cap] : caps) {
    int64_t align = scope == Scope::UB ? chip.ub_align : chip.l1_align;
    std::vector<BufInfo*> all;
    for (auto& [id, bi] : lv.bufs) {
      if (bi.buf->scope != scope) continue;
      bi.bytes = (bi.buf->bytes() + align - 1) / align * align;
      all.push_back(&bi);
    }
    if (all.empty()) continue;
    std::sort(all.begin(), all.end(),
              [](const BufInfo* a, const BufInfo* b) { return a->alloc_pos < b->alloc_pos; });
    bool hand = lv.hand[owner(scope)];
    if (hand) {
      // Sequential, as the lowering lays it out: only the capacity is checked here.
      int64_t end = 0;
      for (auto* b : all)
        if (auto it = p.addresses.find(b->buf->id); it != p.addresses.end())
          end = std::max(end, it->second + b->bytes);
      for (auto* b : all)
        if (!p.addresses.count(b->buf->id)) end = (end + align - 1) / align * align + b->bytes;
      if (end > cap->usable) {
        for (auto* b : all) b->lo = 0, b->hi = 1 << 30;  // everything is live throughout
        overflow(scope, *cap, all, end, lv.locs, p, true);
      }
      continue;
    }
    // Pinned first, then first fit by decreasing size.
    std::vector<BufInfo*> placed;
    for (auto* b : all)
      if (auto it = p.addresses.find(b->buf->id); it != p.addresses.end()) {
        b->addr = it->second;
        placed.push_back(b);
      }
    std::vector<BufInfo*> order;
    for (auto* b : all)
      if (b->addr < 0) order.push_back(b);
    std::stable_sort(order.begin(), order.end(),
                     [](const BufInfo* a, const BufInfo* b) { return a->bytes > b->bytes; });
    int64_t end = 0;
    for (auto* b : placed) end = std::max(end, b->addr + b->bytes);
    for (auto* b : order) {
      std::vector<int64_t> cands = {0};
      for (auto* q : placed)
        if (overlaps(*b, *q)) cands.push_back((q->addr + q->bytes + align - 1) / align * align);
      std::sort(cands.begin(), cands.end());
      for (int64_t c : cands) {
        bool ok = true;
        for (auto* q : placed)
          if (overlaps(*b, *q) && c < q->addr + q->bytes && q->addr < c + b->bytes) ok = false;
        if (ok) {
          b->addr = c;
          break;
        }
      }
      placed.push_back(b);
      end = std::max(end, b->addr + b->bytes);
    }
    if (end > cap->usable) overflow(scope, *cap, all, end, lv.locs, p, false);
    for (auto* b : all) out.addresses[b->buf->id] = b->addr;
  }
  return out;
}

}  // namespace tilepipe::passes

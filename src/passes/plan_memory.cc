// MEMORY_PLANNING (plan_memory.h): liveness over a linear numbering of the statements
// (widened over the loops that carry a buffer's value across iterations), then first-fit
// placement per scope memory.
#include "passes/plan_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

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
  std::vector<std::pair<int, Pipe>> sites;  // (position, pipe) of every access
};

/// What a position does for synchronisation (hand-synced reuse, below). A cross-core flag
/// with a run-time id is not counted (which only ever proves less); an intra-core one
/// matches a flag with the same id expression in the same iteration.
struct SyncEvent {
  enum Kind { None, Set, Wait, SetCross, WaitCross } kind = None;
  Pipe src = Pipe::S, dst = Pipe::S;
  int64_t id = -1;  // constant id, else -1 (intra-core flags: `expr` then)
  Expr expr;
};

/// One position of the linear numbering: its core kind, the regions enclosing it (loop
/// bodies and if branches, outermost first) and its sync effect.
struct Position {
  std::optional<CoreKind> core;
  std::vector<int> regions;
  SyncEvent sync;
};

/// Numbers the statements in program order and records the live range of every buffer.
class Liveness {
 public:
  /// Counts a loop filling a buffer row by row as writing all of it (dependence.h,
  /// `row_fills`): such a buffer is not live across an enclosing loop.
  explicit Liveness(bool row_fills) : row_fills_(row_fills) {}
  void walk(const Stmt& s) {
    if (!s) return;
    std::visit([&](const auto& n) { node(n, s); }, s->node);
  }

  std::map<int, BufInfo> bufs;
  std::vector<LoopSpan> loops;
  std::vector<Loc> locs;          // position -> statement location
  std::vector<Position> at;       // position -> regions, core, sync
  std::vector<int> loop_region;   // loop id -> the region of its body
  std::map<CoreKind, bool> hand;  // a scope of this kind has hand flags

 private:
  int here(const Stmt& s) {
    locs.push_back(s->loc);
    stmts_.push_back(s);
    at.push_back({core_, regions_, {}});
    return static_cast<int>(locs.size()) - 1;
  }

  void use(const Buffer& b, int pos, Pipe pipe = Pipe::S, const Region* region = nullptr) {
    auto it = bufs.find(b->id);
    if (it == bufs.end()) return;  // GM
    BufInfo& bi = it->second;
    bi.sites.push_back({pos, pipe});
    bi.lo = bi.lo < 0 ? pos : std::min(bi.lo, pos);
    bi.hi = std::max(bi.hi, pos);
    for (int l : stack_) {
      if (std::find(bi.alloc_loops.begin(), bi.alloc_loops.end(), l) != bi.alloc_loops.end())
        continue;
      if (carried(l, b->id) || (region && ring_slot(l, *region))) pending_.push_back({b->id, l});
    }
  }

  /// A region of an automatically synchronised scope whose start moves with loop `l`'s
  /// variable (a multi-buffer slot `buf[j % n]`) is live over the whole loop even when each
  /// iteration reads only what it wrote: the slots exist so that iteration j + 1 can fill
  /// one while iteration j still computes on another. Sharing their bytes with the loop's
  /// scratch would serialise exactly that overlap.
  bool ring_slot(int l, const Region& r) const {
    if (!core_ || hand.count(*core_) == 0 || hand.at(*core_)) return false;
    int var = loop_vars_[static_cast<size_t>(l)];
    return std::any_of(r.start.begin(), r.start.end(),
                       [var](const Expr& e) { return uses_var(e, var); });
  }

  void node(const SeqStmt& n, const Stmt&) {
    for (const auto& c : n.body) walk(c);
  }
  void node(const ForStmt& n, const Stmt& s) {
    int pos = here(s);
    std::vector<Access> hdr = collect_accesses_header(s);
    for (const auto& a : hdr) use(a.region.buffer, pos);
    int id = static_cast<int>(loops.size());
    loops.push_back({pos, pos});
    loop_bodies_.push_back(n.body);
    loop_vars_.push_back(n.var->id);
    loop_region.push_back(next_region_);
    stack_.push_back(id);
    regions_.push_back(next_region_++);
    walk(n.body);
    regions_.pop_back();
    stack_.pop_back();
    loops[static_cast<size_t>(id)].end = static_cast<int>(locs.size()) - 1;
  }
  void node(const IfStmt& n, const Stmt& s) {
    int pos = here(s);
    for (const auto& a : collect_accesses_header(s)) use(a.region.buffer, pos);
    for (const Stmt* branch : {&n.then_body, &n.else_body}) {
      regions_.push_back(next_region_++);
      walk(*branch);
      regions_.pop_back();
    }
  }
  void node(const ScopeStmt& n, const Stmt&) {
    hand[n.kind] = hand[n.kind] || has_hand_sync(n.body);
    core_ = n.kind;
    walk(n.body);
    core_.reset();
  }
  void node(const SetFlagStmt& n, const Stmt& s) {
    sync(s, {SyncEvent::Set, n.src, n.dst, id(n.event_id), n.event_id});
  }
  void node(const WaitFlagStmt& n, const Stmt& s) {
    sync(s, {SyncEvent::Wait, n.src, n.dst, id(n.event_id), n.event_id});
  }
  void node(const SetCrossFlagStmt& n, const Stmt& s) {
    sync(s, {SyncEvent::SetCross, n.pipe, n.pipe, id(n.flag_id), n.flag_id});
  }
  void node(const WaitCrossFlagStmt& n, const Stmt& s) {
    sync(s, {SyncEvent::WaitCross, Pipe::S, Pipe::S, id(n.flag_id), n.flag_id});
  }
  void sync(const Stmt& s, SyncEvent e) {
    int pos = here(s);
    bool cross = e.kind == SyncEvent::SetCross || e.kind == SyncEvent::WaitCross;
    if (e.id >= 0 || !cross) at[static_cast<size_t>(pos)].sync = std::move(e);
  }
  static int64_t id(const Expr& e) { return as_const(e).value_or(-1); }
  void node(const AllocStmt& n, const Stmt& s) {
    int pos = here(s);
    if (n.buffer->scope == Scope::GM) return;
    BufInfo bi;
    bi.buf = n.buffer;
    bi.alloc_pos = pos;
    bi.alloc_loops = stack_;
    bufs[n.buffer->id] = bi;
  }
  template <class T>
  void node(const T&, const Stmt& s) {
    int pos = here(s);
    for (const auto& a : leaf_accesses(s)) use(a.region.buffer, pos, a.pipe, &a.region);
  }

  /// Does loop `l` carry a value of the buffer from one iteration to the next? Only then
  /// must the buffer stay live over the whole loop: a body that overwrites it before any
  /// read frees its bytes between the uses.
  bool carried(int l, int id) {
    auto key = std::make_pair(l, id);
    auto it = carried_.find(key);
    if (it == carried_.end())
      it = carried_.emplace(key, exposed(loop_bodies_[static_cast<size_t>(l)], id, row_fills_))
               .first;
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
    // A value made in a loop and read after it is live in every iteration from the first
    // (row 0 of a tile filled per row must survive the later iterations' scratch): widen to
    // the whole loop, to a fixed point (nested loops). A value entering a loop is widened
    // by `carried` above when the body reads it.
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& [id, bi] : bufs)
        for (size_t l = 0; l < loops.size(); ++l) {
          const LoopSpan& sp = loops[l];
          if (std::find(bi.alloc_loops.begin(), bi.alloc_loops.end(), static_cast<int>(l)) !=
              bi.alloc_loops.end())
            continue;
          bool inside = bi.lo <= sp.end && bi.hi > sp.begin;
          if (inside && bi.hi > sp.end && (bi.lo > sp.begin || bi.hi < sp.end) &&
              live_out(bi, sp)) {
            bi.lo = std::min(bi.lo, sp.begin);
            bi.hi = std::max(bi.hi, sp.end);
            changed = true;
          }
        }
    }
  }

 private:
  std::vector<int> stack_;
  std::vector<int> regions_;
  int next_region_ = 0;
  std::optional<CoreKind> core_;
  std::vector<std::pair<int, int>> pending_;
  /// Is the buffer's value at the end of the loop read later? Not when its first access
  /// after the loop overwrites all of it without reading and runs whenever the loop does.
  bool live_out(const BufInfo& bi, const LoopSpan& sp) const {
    auto next = std::find_if(bi.sites.begin(), bi.sites.end(),
                             [&](const auto& site) { return site.first > sp.end; });
    if (next == bi.sites.end()) return true;
    auto q = static_cast<size_t>(next->first);
    const Stmt& s = stmts_[q];
    int id = bi.buf->id;
    return at[q].regions != at[static_cast<size_t>(sp.begin)].regions ||
           exposed(s, id, row_fills_) || !kills(s, id, row_fills_);
  }

  bool row_fills_;
  std::vector<Stmt> stmts_;  // position -> statement
  std::vector<Stmt> loop_bodies_;
  std::vector<int> loop_vars_;
  std::map<std::pair<int, int>, bool> carried_;
};

/// Hand-synced reuse: is every access of `first` ordered before every access of `second`
/// (first's live range ends before second's begins) by the program's own flags — on the
/// path from first's last use to second's first use and, when a loop encloses both, on the
/// path round its back edge (second in iteration k, first in k + 1)?
///
/// Per pipe p that touches `first`, the pipes known to run after p's accesses start as {p}
/// (a pipe is in order); a set_flag(p1, p2) from a known pipe followed by its wait adds p2;
/// the scalar unit known (a wait on S) orders everything after it. A cross-core round trip
/// `set_cross_flag(p1, x) ... wait_cross_flag(y)` from a known pipe orders every pipe when
/// the peer core's only wait of x precedes its only set of y for the wait consumed here:
/// each id has one set site and one wait site, each core's pair sits in one statement
/// sequence, and the peer's set of y that this wait takes is not older than the peer's
/// wait of x (the counting-semaphore order: the k-th wait takes the k-th set).
/// Only statements that run whenever the path does count: every loop body or branch around
/// one must also hold one end of the path. Run-time flag ids are not counted. All of this
/// can only prove less than the hardware orders, never more.
class HandOrder {
 public:
  explicit HandOrder(const Liveness& lv) : lv_(lv) {
    for (size_t x = 0; x < lv.at.size(); ++x) {
      const Position& ps = lv.at[x];
      if (!ps.core) continue;
      int k = static_cast<int>(*ps.core);
      if (ps.sync.kind == SyncEvent::SetCross) sets_[k][ps.sync.id].push_back(static_cast<int>(x));
      if (ps.sync.kind == SyncEvent::WaitCross)
        waits_[k][ps.sync.id].push_back(static_cast<int>(x));
    }
  }

  bool ordered(const BufInfo& a, const BufInfo& b, CoreKind core) const {
    const BufInfo& first = a.hi < b.lo ? a : b;
    const BufInfo& second = a.hi < b.lo ? b : a;
    auto forward = [](int from, int to) {
      std::vector<int> path;
      for (int x = from + 1; x < to; ++x) path.push_back(x);
      return path;
    };
    if (!reaches(first, second, forward, core)) return false;
    // The innermost loop holding both ranges: the path round its back edge.
    const LoopSpan* inner = nullptr;
    for (const LoopSpan& sp : lv_.loops)
      if (sp.begin < first.lo && second.hi <= sp.end && (!inner || sp.begin > inner->begin))
        inner = &sp;
    if (!inner) return true;
    auto round = [inner](int from, int to) {
      std::vector<int> path;
      for (int x = from + 1; x <= inner->end; ++x) path.push_back(x);
      for (int x = inner->begin + 1; x < to; ++x) path.push_back(x);
      return path;
    };
    return reaches(second, first, round, core);
  }

 private:
  using Pipes = std::set<Pipe>;
  static Pipes every() {
    return {Pipe::S, Pipe::MTE1, Pipe::MTE2, Pipe::MTE3, Pipe::M, Pipe::FIX, Pipe::V};
  }

  bool counted(int x, int from, int to) const {
    const auto& rx = lv_.at[static_cast<size_t>(x)].regions;
    const auto& rf = lv_.at[static_cast<size_t>(from)].regions;
    const auto& rt = lv_.at[static_cast<size_t>(to)].regions;
    for (int r : rx)
      if (std::find(rf.begin(), rf.end(), r) == rf.end() &&
          std::find(rt.begin(), rt.end(), r) == rt.end())
        return false;
    return true;
  }

  /// Does the wait at `w` take the set at `s`? Same pipes and a constant id, or the same id
  /// expression in the same iteration (same loops, not round a back edge in between).
  bool matches(int s, int s_wraps, int w, int w_wraps) const {
    const Position& ps = lv_.at[static_cast<size_t>(s)];
    const Position& pw = lv_.at[static_cast<size_t>(w)];
    if (ps.sync.src != pw.sync.src || ps.sync.dst != pw.sync.dst) return false;
    if (ps.sync.id >= 0 || pw.sync.id >= 0) return ps.sync.id == pw.sync.id;
    return s_wraps == w_wraps && ps.regions == pw.regions && ir::equal(ps.sync.expr, pw.sync.expr);
  }

  /// The single site of a cross flag id on one core kind, or -1.
  int site(const std::map<int64_t, std::vector<int>>& sites, int64_t id) const {
    auto it = sites.find(id);
    return it != sites.end() && it->second.size() == 1 ? it->second.front() : -1;
  }

  bool round_trip(int set_x, int wait_y, CoreKind core) const {
    int k = static_cast<int>(core), peer = 1 - k;
    int64_t x = lv_.at[static_cast<size_t>(set_x)].sync.id;
    int64_t y = lv_.at[static_cast<size_t>(wait_y)].sync.id;
    if (site(sets_[k], x) != set_x || site(waits_[k], y) != wait_y) return false;
    int peer_wait_x = site(waits_[peer], x), peer_set_y = site(sets_[peer], y);
    if (peer_wait_x < 0 || peer_set_y < 0) return false;
    const auto& at = lv_.at;
    if (at[static_cast<size_t>(set_x)].regions != at[static_cast<size_t>(wait_y)].regions ||
        at[static_cast<size_t>(peer_wait_x)].regions != at[static_cast<size_t>(peer_set_y)].regions)
      return false;
    // Iterations between: this core's wait is in the set's iteration (0) or the next (1);
    // the peer's set that follows its wait of x is in the same iteration (0) or the next (1).
    int here = wait_y < set_x ? 1 : 0;
    int there = peer_set_y < peer_wait_x ? 1 : 0;
    return here >= there;
  }

  /// Every access of `first` (its last one may be at any of its sites) ordered before every
  /// access of `second` on the path `path(from_site, to_site)`.
  template <class Path>
  bool reaches(const BufInfo& first, const BufInfo& second, Path path, CoreKind core) const {
    for (auto [from, p] : first.sites)
      for (auto [to, q] : second.sites)
        if (!reaches(p, q, from, to, path(from, to), core)) return false;
    return true;
  }

  bool reaches(Pipe p, Pipe q, int from, int to, const std::vector<int>& path,
               CoreKind core) const {
    Pipes known = p == Pipe::S ? every() : Pipes{p};
    std::vector<std::pair<int, int>> pending;  // (set position, wrap count when set)
    std::vector<int> cross;                    // counted set_cross_flag positions from a known pipe
    int wraps = 0, last = -1;
    for (int x : path) {
      if (known.count(q)) return true;
      if (x < last) ++wraps;  // round the back edge: loop variables changed
      last = x;
      const Position& ps = lv_.at[static_cast<size_t>(x)];
      if (ps.core != core || !counted(x, from, to)) continue;
      const SyncEvent& e = ps.sync;
      switch (e.kind) {
        case SyncEvent::Set:
          if (known.count(e.src)) pending.push_back({x, wraps});
          break;
        case SyncEvent::Wait:
          for (auto it = pending.begin(); it != pending.end(); ++it)
            if (matches(it->first, it->second, x, wraps)) {
              pending.erase(it);
              known.insert(e.dst);
              if (e.dst == Pipe::S) known = every();
              break;
            }
          break;
        case SyncEvent::SetCross:
          if (known.count(e.src)) cross.push_back(x);
          break;
        case SyncEvent::WaitCross:
          for (int c : cross)
            if (round_trip(c, x, core)) known = every();
          break;
        case SyncEvent::None:
          break;
      }
    }
    return known.count(q) > 0;
  }

  const Liveness& lv_;
  std::map<int64_t, std::vector<int>> sets_[2], waits_[2];  // core kind -> id -> positions
};

std::string kib(int64_t bytes) {
  return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024.0);
}

bool overlaps(const BufInfo& a, const BufInfo& b) {
  return a.lo <= b.hi && b.lo <= a.hi;
}

/// Pinned first, then first fit by decreasing size: a buffer may share bytes with a placed
/// one unless `clash` says they must not. Returns the end of the highest placed byte.
template <class Clash>
int64_t place(const std::vector<BufInfo*>& all, const Program& p, int64_t align, Clash clash) {
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
      if (clash(*b, *q)) cands.push_back((q->addr + q->bytes + align - 1) / align * align);
    std::sort(cands.begin(), cands.end());
    for (int64_t c : cands) {
      bool ok = true;
      for (auto* q : placed)
        if (clash(*b, *q) && c < q->addr + q->bytes && q->addr < c + b->bytes) ok = false;
      if (ok) {
        b->addr = c;
        break;
      }
    }
    placed.push_back(b);
    end = std::max(end, b->addr + b->bytes);
  }
  return end;
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

[[noreturn]] void overflow(Scope scope, int64_t limit, std::vector<BufInfo*> all, int64_t needed,
                           const std::vector<Loc>& locs, const Program& prog, bool hand,
                           bool physical = false) {
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
    if (sum <= limit) fit = s;
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
                       kib(needed - limit), live.empty() ? "?" : live.front()->buf->name);
  Loc at =
      peak >= 0 && peak < static_cast<int>(locs.size()) ? locs[static_cast<size_t>(peak)] : Loc{};
  throw UserError(Diagnostic{
      at, "capacity",
      fmt::format("{} overflow on {}: {} needed, {} available ({} bytes > {}{}); {} live at "
                  "the peak ({})",
                  to_string(scope), owner(scope) == CoreKind::C ? "AIC" : "AIV", kib(needed),
                  kib(limit), needed, limit,
                  physical ? ", the physical size: the sequential layout may use the reserve" : "",
                  kib(peak_bytes), at.str()),
      notes, hint});
}

}  // namespace

namespace {

Program plan(const Program& p, const ChipConfig& chip, const PassOptions& o, bool row_fills) {
  Liveness lv(row_fills);
  lv.walk(p.body);
  lv.finish();
  Program out = p;
  const HandOrder order(lv);
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
      int64_t limit = o.reserved_tail ? cap->physical : cap->usable;
      if (end <= limit) continue;  // the author's layout fits: keep it
      // Too large in sequence: share bytes between buffers whose live ranges are disjoint
      // and whose reuse the author's own flags order (HandOrder).
      int64_t planned = place(all, p, align, [&](const BufInfo& a, const BufInfo& b) {
        return overlaps(a, b) || !order.ordered(a, b, owner(scope));
      });
      if (planned > cap->usable) {
        for (auto* b : all) b->lo = 0, b->hi = 1 << 30;  // everything is live throughout
        overflow(scope, limit, all, end, lv.locs, p, true, limit != cap->usable);
      }
      for (auto* b : all) out.addresses[b->buf->id] = b->addr;
      continue;
    }
    int64_t end =
        place(all, p, align, [](const BufInfo& a, const BufInfo& b) { return overlaps(a, b); });
    if (end > cap->usable) overflow(scope, cap->usable, all, end, lv.locs, p, false);
    for (auto* b : all) out.addresses[b->buf->id] = b->addr;
  }
  return out;
}

}  // namespace

/// A tile filled row by row (a gather of KV rows) is live only from its rows to its last
/// read in the iteration, as the original's planner sees it; that is used when the plan
/// would not fit otherwise, so that kernels that fit keep their layout (and the
/// synchronisation auto_sync derives from it: SFA auto's cycles).
Program plan_memory(const Program& p, const ChipConfig& chip, const PassOptions& o) {
  try {
    return plan(p, chip, o, false);
  } catch (const UserError& first) {
    if (first.diagnostics().empty() || first.diagnostics().front().kind != "capacity") throw;
    try {
      return plan(p, chip, o, true);
    } catch (const UserError&) {
      throw first;
    }
  }
}

}  // namespace tilepipe::passes

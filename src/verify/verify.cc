// Program checks: scopes, copy directions, shapes, dtypes, slice bounds, capacities,
// alignment, flags. Collects every problem rather than stopping at the first.
#include "tilepipe/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "tilepipe/vec_modes.h"

namespace tilepipe {

using namespace ir;

std::string Diagnostic::str() const {
  // Without a source location (a whole-run budget) the kind says which error it is.
  std::string out = loc.file.empty() ? fmt::format("error: {} ({})", message, kind)
                                     : fmt::format("{}:{}:{}: error: {}", loc.file, loc.line,
                                                   loc.column, message);
  for (const auto& n : notes) out += "\n  " + n;
  if (!hint.empty()) out += "\n  hint: " + hint;
  return out;
}

static std::string join_diags(const std::vector<Diagnostic>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += '\n';
    s += d[i].str();
  }
  return s;
}

UserError::UserError(std::vector<Diagnostic> diags)
    : std::runtime_error(join_diags(diags)), diags_(std::move(diags)) {}

std::array<std::pair<Scope, const ScopeCapacity*>, 5> on_chip_capacities(const ChipConfig& chip) {
  return {{{Scope::L1, &chip.l1},
           {Scope::L0A, &chip.l0a},
           {Scope::L0B, &chip.l0b},
           {Scope::L0C, &chip.l0c},
           {Scope::UB, &chip.ub}}};
}

CoreKind owner(Scope s) {
  return s == Scope::UB ? CoreKind::V : CoreKind::C;
}

std::optional<Pipe> copy_pipe(Scope from, Scope to) {
  if (from == Scope::GM && (to == Scope::L1 || to == Scope::UB)) return Pipe::MTE2;
  if (from == Scope::L1 && (to == Scope::L0A || to == Scope::L0B)) return Pipe::MTE1;
  if (from == Scope::L0C && (to == Scope::GM || to == Scope::L1)) return Pipe::FIX;
  if (from == Scope::UB && to == Scope::GM) return Pipe::MTE3;
  if (from == Scope::UB && to == Scope::UB) return Pipe::V;
  return std::nullopt;
}

std::optional<CoreKind> leaf_core(const Stmt& s) {
  if (auto* a = std::get_if<AllocStmt>(&s->node)) return owner(a->buffer->scope);
  if (std::holds_alternative<GemmStmt>(s->node)) return CoreKind::C;
  if (std::holds_alternative<TileOpStmt>(s->node) || std::holds_alternative<ReduceStmt>(s->node))
    return CoreKind::V;
  if (auto* c = std::get_if<CopyStmt>(&s->node)) {
    if (c->src.buffer->scope != Scope::GM) return owner(c->src.buffer->scope);
    if (c->dst.buffer->scope != Scope::GM) return owner(c->dst.buffer->scope);
  }
  return std::nullopt;
}

bool crosses_cores(Scope from, Scope to) {
  return (from == Scope::L0C && to == Scope::UB) || (from == Scope::UB && to == Scope::L1);
}

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
std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

/// Pipes that exist on each core kind (hardware.md "Pipes").
bool pipe_on(CoreKind k, Pipe p) {
  if (p == Pipe::S || p == Pipe::MTE2) return true;
  if (k == CoreKind::C) return p == Pipe::MTE1 || p == Pipe::M || p == Pipe::FIX;
  return p == Pipe::V || p == Pipe::MTE3;
}

/// Legal intra-core flag pairs (hardware.md "Synchronisation").
bool legal_pair(CoreKind k, Pipe s, Pipe d) {
  using P = Pipe;
  static const std::set<std::pair<P, P>> aic = {
      // hardware.md's AIC list without its MTE3 pairs: this model's AIC has no MTE3 pipe.
      {P::M, P::MTE1},   {P::M, P::MTE2}, {P::M, P::FIX},     {P::MTE1, P::M}, {P::MTE1, P::MTE2},
      {P::MTE1, P::FIX}, {P::MTE2, P::M}, {P::MTE2, P::MTE1}, {P::FIX, P::M},  {P::FIX, P::MTE1}};
  static const std::set<std::pair<P, P>> aiv = {
      {P::S, P::V},    {P::V, P::S},    {P::S, P::MTE2},    {P::MTE2, P::S},
      {P::S, P::MTE3}, {P::MTE3, P::S}, {P::V, P::MTE2},    {P::MTE2, P::V},
      {P::V, P::MTE3}, {P::MTE3, P::V}, {P::MTE2, P::MTE3}, {P::MTE3, P::MTE2}};
  return (k == CoreKind::C ? aic : aiv).count({s, d}) > 0;
}

struct Alloc {
  Buffer buf;
  int64_t bytes;
};

class Verifier {
 public:
  Verifier(const Program& p, const ChipConfig& chip, VerifyOptions opts)
      : p_(p), chip_(chip), opts_(opts) {}

  std::vector<Diagnostic> run() {
    if (p_.block_num < 1) {
      error(p_.loc, "bad-launch", fmt::format("block_num must be >= 1, found {}", p_.block_num),
            "launch at least one block; expert kernels launch the physical core count (" +
                std::to_string(chip_.ai_cores) + ")");
    }
    for (const auto& b : p_.params) declare_gm(b);
    for (const auto& b : p_.workspaces) declare_gm(b);
    check_gm_capacity();
    stmt(p_.body);
    check_load_sources();
    if (opts_.capacity) check_capacity();
    return std::move(diags_);
  }

 private:
  // ---- diagnostics ----
  void error(const Loc& loc, const std::string& kind, std::string msg, std::string hint = {},
             std::vector<std::string> notes = {}) {
    if (diags_.size() >= 50) return;
    diags_.push_back(Diagnostic{loc, kind, std::move(msg), std::move(notes), std::move(hint)});
  }

  void declare_gm(const Buffer& b) {
    check_shape(b);
    visible_.back().insert(b->id);
  }

  bool check_shape(const Buffer& b) {
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

  // ---- expression ranges ----
  Interval range(const Expr& e, std::map<int, int>& uses) {
    return std::visit(
        [&](const auto& n) -> Interval {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, IntImm>)
            return {n.value, n.value, true};
          else if constexpr (std::is_same_v<T, VarRef>) {
            ++uses[n.var->id];
            auto it = vars_.find(n.var->id);
            if (it == vars_.end()) return {INT64_MIN / 4, INT64_MAX / 4, false};
            return it->second;
          } else if constexpr (std::is_same_v<T, CoreIdx>) {
            ++uses[-1];
            return {0, p_.block_num - 1, true};
          } else if constexpr (std::is_same_v<T, VecIdx>) {
            ++uses[-2];
            return {0, scope_ == CoreKind::V ? 1 : 0, true};
          } else if constexpr (std::is_same_v<T, Binary>) {
            Interval a = range(n.a, uses), b = range(n.b, uses);
            return combine(n.op, a, b);
          } else if constexpr (std::is_same_v<T, Select>) {
            range(n.cond, uses);
            Interval a = range(n.then_value, uses), b = range(n.else_value, uses);
            return {std::min(a.lo, b.lo), std::max(a.hi, b.hi), false};
          } else if constexpr (std::is_same_v<T, Load>) {
            for (const auto& i : n.index) range(i, uses);
            load(n, e->loc);
            return {INT64_MIN / 4, INT64_MAX / 4, false};  // a data value: any integer
          } else
            static_assert(sizeof(T) == 0, "Verifier: unhandled expression node");
        },
        e->node);
  }

  /// [lo, hi] from wide arithmetic; past +-2^61 (the "unknown" range) it saturates to unknown
  /// instead of overflowing int64.
  static Interval fit(__int128 lo, __int128 hi, bool exact) {
    constexpr int64_t kLo = INT64_MIN / 4, kHi = INT64_MAX / 4;
    if (lo < kLo || hi > kHi) return {kLo, kHi, false};
    return {static_cast<int64_t>(lo), static_cast<int64_t>(hi), exact};
  }

  static Interval combine(BinOp op, Interval a, Interval b) {
    bool ex = a.exact && b.exact;
    using Wide = __int128;
    auto corners = [&](auto f) {
      int64_t v[4] = {f(a.lo, b.lo), f(a.lo, b.hi), f(a.hi, b.lo), f(a.hi, b.hi)};
      return Interval{*std::min_element(v, v + 4), *std::max_element(v, v + 4), ex};
    };
    switch (op) {
      case BinOp::Add:
        return fit(Wide{a.lo} + b.lo, Wide{a.hi} + b.hi, ex);
      case BinOp::Sub:
        return fit(Wide{a.lo} - b.hi, Wide{a.hi} - b.lo, ex);
      case BinOp::Mul: {
        Wide v[4] = {Wide{a.lo} * b.lo, Wide{a.lo} * b.hi, Wide{a.hi} * b.lo, Wide{a.hi} * b.hi};
        return fit(*std::min_element(v, v + 4), *std::max_element(v, v + 4), ex);
      }
      case BinOp::Min:
        return {std::min(a.lo, b.lo), std::min(a.hi, b.hi), ex};
      case BinOp::Max:
        return {std::max(a.lo, b.lo), std::max(a.hi, b.hi), ex};
      case BinOp::Div:
        if (b.lo > 0)
          return corners([](int64_t x, int64_t y) { return eval_binop(BinOp::Div, x, y); });
        return {INT64_MIN / 4, INT64_MAX / 4, false};
      case BinOp::Mod:
        if (b.lo == b.hi && b.lo > 0) {
          if (a.lo >= 0 && a.hi - a.lo + 1 >= b.lo) return {0, b.lo - 1, ex};
          int64_t l = eval_binop(BinOp::Mod, a.lo, b.lo), h = eval_binop(BinOp::Mod, a.hi, b.lo);
          if (a.lo >= 0 && l <= h && a.hi - a.lo == h - l) return {l, h, ex};
          return {0, b.lo - 1, false};
        }
        return {INT64_MIN / 4, INT64_MAX / 4, false};
      default:
        return {0, 1, false};
    }
  }

  Interval range(const Expr& e) {
    std::map<int, int> uses;
    Interval r = range(e, uses);
    for (auto& [id, n] : uses) r.exact = r.exact && n == 1 && !guarded_.count(id);
    return r;
  }

  /// Largest power-of-two-ish factor known to divide the expression (0 = unknown/any).
  int64_t divisor(const Expr& e) {
    return std::visit(
        [&](const auto& n) -> int64_t {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, IntImm>)
            return n.value == 0 ? 0 : std::abs(n.value);
          else if constexpr (std::is_same_v<T, Binary>) {
            int64_t a = divisor(n.a), b = divisor(n.b);
            if (n.op == BinOp::Mul) return (a == 1 || b == 1) ? std::max(a, b) : a * b;
            if (n.op == BinOp::Add || n.op == BinOp::Sub) return std::gcd(a, b);
            return 1;
          } else
            return 1;
        },
        e->node);
  }

  // ---- scalar loads (data-dependent addressing) ----
  void load(const Load& n, const Loc& loc) {
    if (!n.buffer) {
      error(loc, "bad-operand", "load from an empty tensor", "pass a buffer");
      return;
    }
    const auto& b = *n.buffer;
    Region r{n.buffer, n.index, std::vector<int64_t>(n.index.size(), 1)};
    if (!region(r, loc, "load")) return;
    if (is_float(b.dtype)) {
      error(loc, "load-dtype",
            fmt::format("load reads '{}', a {} tensor; the scalar unit loads integers (indices, "
                        "page tables) to use in addresses and conditions",
                        b.name, to_string(b.dtype)),
            "load from an i32 tensor; float values are tile-op scalars: use at(tensor, {...})");
    }
    if (b.scope == Scope::GM) {
      if (b.role != TensorRole::Input)
        error(loc, "load-source",
              fmt::format("load reads GM tensor '{}', which is not a kernel input; scalar loads "
                          "read read-only inputs (the value must not depend on the kernel's own "
                          "writes or their timing)",
                          b.name),
              "declare the tensor with input(...), or load from a UB copy of an input");
      else
        loaded_gm_[b.id] = loc;
      return;
    }
    if (b.scope != Scope::UB) {
      error(loc, "load-source",
            fmt::format("load reads '{}' in {}; the scalar unit reads GM and UB only", b.name,
                        to_string(b.scope)),
            "load from the GM input, or copy it into a UB buffer of a Vector core");
      return;
    }
    if (!scope_ || *scope_ != CoreKind::V) {
      error(loc, "scope-rule",
            fmt::format("load of UB buffer '{}' outside scope V: UB belongs to the Vector core",
                        b.name),
            "move the code that uses the loaded value into scope_v");
      return;
    }
    loaded_ub_.emplace(b.id, loc);
  }

  /// Records the on-chip / GM buffer an op writes, for check_load_sources: index buffers
  /// may only be filled by GM -> UB copies of kernel inputs, because timing mode carries no
  /// other values.
  void record_write(const Stmt& s) {
    const Region* dst = nullptr;
    bool from_input = false;
    if (auto* c = std::get_if<CopyStmt>(&s->node)) {
      dst = &c->dst;
      from_input = c->src.buffer && c->src.buffer->scope == Scope::GM &&
                   c->src.buffer->role == TensorRole::Input;
    } else if (auto* t = std::get_if<TileOpStmt>(&s->node)) {
      dst = &t->dst;
    } else if (auto* r = std::get_if<ReduceStmt>(&s->node)) {
      dst = &r->dst;
    }
    if (!dst || !dst->buffer) return;
    if (dst->buffer->scope == Scope::GM || !from_input) writes_.emplace(dst->buffer->id, s->loc);
  }

  void check_load_sources() {
    auto report = [&](const std::map<int, Loc>& loaded, const char* why) {
      for (const auto& [id, load_loc] : loaded) {
        auto w = writes_.find(id);
        if (w == writes_.end()) continue;
        error(w->second, "load-source",
              fmt::format("this op writes a tensor that a scalar load reads (at {}); {}",
                          load_loc.str(), why),
              "keep index / page tables read-only: copy them from a GM input into their own "
              "UB buffer and compute elsewhere");
      }
    };
    report(loaded_gm_, "loaded GM inputs are read-only");
    report(loaded_ub_,
           "a loaded UB buffer may only be filled by GM -> UB copies of kernel inputs (timing "
           "mode materialises only those values)");
  }

  // ---- regions ----
  bool region(const Region& r, const Loc& loc, const char* what) {
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
              fmt::format("slice of '{}' dimension {}: extent {} outside [1, {}] (shape {})",
                          b.name, d, r.extent[d], b.shape[d], shape_str(b.shape)),
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

  bool in_scope(const Loc& loc, const char* what) {
    if (!scope_) {
      error(loc, "outside-scope",
            fmt::format("{} outside a scope: expert-mode code runs on a Cube or Vector core", what),
            "wrap it in scope_c(...) (Cube) or scope_v(...) (Vector)");
      return false;
    }
    return true;
  }

  bool operand_on_core(const Region& r, const Loc& loc, const char* what) {
    Scope s = r.buffer->scope;
    if (s == Scope::GM || owner(s) == *scope_) return true;
    error(loc, "scope-rule",
          fmt::format("{} operand '{}' lives in {} (a {} core buffer) but the op is in scope {}",
                      what, r.buffer->name, to_string(s),
                      owner(s) == CoreKind::C ? "Cube" : "Vector", to_string(*scope_)),
          owner(s) == CoreKind::C
              ? "move the op into scope_c, or exchange data through a GM workspace"
              : "move the op into scope_v, or exchange data through a GM workspace");
    return false;
  }

  void ub_aligned(const Region& r, const Loc& loc, const char* what) {
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

  // ---- statements ----
  void stmt(const Stmt& s) {
    if (!s) return;
    // Unscoped (automatic) code: a leaf runs on the core that owns its on-chip operands,
    // and is checked as if it were in that core's scope.
    std::optional<CoreKind> inferred;
    if (opts_.unscoped && !scope_) {
      if (auto* c = std::get_if<CopyStmt>(&s->node); c && crossing(*c)) {
        check_crossing(*c, *s);
        record_write(s);
        return;
      }
      inferred = leaf_core(s);
      scope_ = inferred;
    }
    std::visit([&](const auto& n) { check(n, *s); }, s->node);
    if (inferred) scope_.reset();
    record_write(s);
  }

  /// L0C -> UB and UB -> L1 in unscoped code: the Cube/Vector split turns them into two
  /// copies through a GM workspace.
  static bool crossing(const CopyStmt& c) {
    return crosses_cores(c.src.buffer->scope, c.dst.buffer->scope);
  }

  void check_crossing(const CopyStmt& n, const StmtNode& s) {
    if (!region(n.src, s.loc, "copy source") || !region(n.dst, s.loc, "copy destination")) return;
    if (n.src.elements() != n.dst.elements())
      error(s.loc, "shape-mismatch",
            fmt::format("copy moves {} elements from {} into {} elements of {}", n.src.elements(),
                        print(n.src), n.dst.elements(), print(n.dst)),
            "make both regions the same size");
    DType a = n.src.buffer->dtype, b = n.dst.buffer->dtype;
    bool from_l0c = n.src.buffer->scope == Scope::L0C;
    bool ok = from_l0c
                  ? (a == DType::F32 && (b == DType::F16 || b == DType::BF16 || b == DType::F32))
                  : a == b;
    if (!ok)
      error(s.loc, "dtype-mismatch",
            fmt::format("copy {} -> {} changes dtype {} -> {}; {}", print(n.src), print(n.dst),
                        to_string(a), to_string(b),
                        from_l0c ? "the FIX copy out of L0C casts f32 to f16/bf16/f32 only"
                                 : "UB -> L1 goes through GM unchanged"),
            "copy into a buffer of the source dtype, then cast on UB");
    if (n.transpose || n.pad_value)
      error(s.loc, "bad-operand", "a Cube <-> Vector copy takes no transpose or pad_value",
            "transpose on the L1 -> L0 move instead");
    ub_aligned(n.src, s.loc, "copy source");
    ub_aligned(n.dst, s.loc, "copy destination");
  }

  /// A one-element UB -> UB copy is an element move (`a[i] = b[j]`: the scalar unit's
  /// GetValue / SetValue on hardware), which needs no vector alignment.
  static bool element_move(const CopyStmt& n) {
    return n.src.buffer->scope == Scope::UB && n.dst.buffer->scope == Scope::UB &&
           n.src.elements() == 1 && n.dst.elements() == 1;
  }

  void check(const SeqStmt& n, const StmtNode&) {
    for (const auto& c : n.body) stmt(c);
  }

  void check(const ForStmt& n, const StmtNode& s) {
    if (n.step < 1) {
      error(s.loc, "bad-loop", fmt::format("loop step must be >= 1, found {}", n.step),
            "iterate upward with a positive step");
    }
    if (n.kind == ForKind::Pipelined && (n.num_stages < 0 || n.cross_interval < 1)) {
      error(s.loc, "bad-loop",
            fmt::format("Pipelined needs num_stages >= 0 and cross_interval >= 1, found "
                        "num_stages={}, cross_interval={}",
                        n.num_stages, n.cross_interval),
            "num_stages=0 turns pipelining off; cross_interval=1 syncs every iteration");
    }
    if (n.kind == ForKind::Parallel && !opts_.parallel) {
      error(s.loc, "unsupported",
            "Parallel loops need the vectorize pass, which is off; the loop would silently run "
            "serially",
            "write the loop with serial(...) and explicit tile ops / hand multi-buffering");
    } else if (n.kind == ForKind::Pipelined && !scope_ && !opts_.unscoped) {
      error(s.loc, "unsupported",
            "Pipelined loops outside a scope need the Cube/Vector split (pass option "
            "cv_split), which is off; the loop would silently run serially",
            "switch cv_split on, put the loop inside scope_c / scope_v (intra-core "
            "multi-buffering), or write the Cube/Vector pipeline by hand");
    } else if (n.kind == ForKind::Pipelined && scope_ && n.cross_interval > 1) {
      error(s.loc, "bad-loop",
            fmt::format("cross_interval={} has no effect on a Pipelined loop inside scope {}: it "
                        "spaces Cube/Vector signals, and this loop runs on one core",
                        n.cross_interval, to_string(*scope_)),
            "drop cross_interval (intra-core pipelining overlaps the pipes of one core)");
    }
    // A loop variable's range is exact only for constant bounds: bounds that depend on cid
    // or outer loops correlate it with them, and interval arithmetic would overshoot.
    std::map<int, int> bound_uses;
    Interval b = range(n.begin, bound_uses), e = range(n.end, bound_uses);
    Interval v{b.lo, std::max(b.lo, e.hi - 1), b.exact && e.exact && bound_uses.empty()};
    // From a constant begin the variable only takes begin + multiples of step.
    if (b.lo == b.hi && n.step > 1) v.hi = b.lo + (v.hi - b.lo) / n.step * n.step;
    vars_[n.var->id] = v;
    visible_.emplace_back();
    stmt(n.body);
    visible_.pop_back();
    vars_.erase(n.var->id);
  }

  void check(const IfStmt& n, const StmtNode&) {
    // Under the branches, values of the condition's variables are no longer all reachable
    // (a guarded tail `if (i < 3)` never runs i = 3): their ranges become inexact.
    std::map<int, int> cond_uses;
    range(n.cond, cond_uses);
    std::set<int> outer = guarded_;
    for (const auto& [id, count] : cond_uses) guarded_.insert(id);
    visible_.emplace_back();
    stmt(n.then_body);
    visible_.pop_back();
    visible_.emplace_back();
    stmt(n.else_body);
    visible_.pop_back();
    guarded_ = std::move(outer);
  }

  void check(const ScopeStmt& n, const StmtNode& s) {
    if (scope_) {
      error(s.loc, "scope-rule",
            fmt::format("scope {} nested inside scope {}", to_string(n.kind), to_string(*scope_)),
            "close the outer scope first: scopes do not nest");
      return;
    }
    scope_ = n.kind;
    visible_.emplace_back();
    stmt(n.body);
    visible_.pop_back();
    scope_.reset();
  }

  void check(const AllocStmt& n, const StmtNode& s) {
    const auto& b = *n.buffer;
    if (b.scope == Scope::GM) {
      error(s.loc, "scope-rule", fmt::format("'{}' allocated in GM inside the kernel", b.name),
            "declare GM tensors with input/output/workspace on the KernelBuilder");
      return;
    }
    if (scope_ && owner(b.scope) != *scope_) {
      error(s.loc, "scope-rule",
            fmt::format("{} buffer '{}' allocated in scope {}; {} belongs to the {} core",
                        to_string(b.scope), b.name, to_string(*scope_), to_string(b.scope),
                        owner(b.scope) == CoreKind::C ? "Cube" : "Vector"),
            "allocate it at kernel level or inside the matching scope");
    }
    if (b.scope == Scope::L0C && b.dtype != DType::F32 && b.dtype != DType::I32) {
      error(s.loc, "dtype-mismatch",
            fmt::format("L0C buffer '{}' is {}; the cube accumulates in f32 (or i32 for int8)",
                        b.name, to_string(b.dtype)),
            "allocate L0C as f32 and cast on the FIX copy out");
    }
    if (!check_shape(n.buffer)) return;
    visible_.back().insert(b.id);
    int64_t align = b.scope == Scope::UB ? chip_.ub_align : chip_.l1_align;
    int64_t bytes = (b.bytes() + align - 1) / align * align;
    allocs_[b.scope].push_back(Alloc{n.buffer, bytes});
  }

  void check(const CopyStmt& n, const StmtNode& s) {
    if (!in_scope(s.loc, "copy")) return;
    if (!region(n.src, s.loc, "copy source") || !region(n.dst, s.loc, "copy destination")) return;
    Scope from = n.src.buffer->scope, to = n.dst.buffer->scope;
    auto pipe = copy_pipe(from, to);
    if (!pipe) {
      std::string hint = "legal copies: GM->L1, GM->UB, L1->L0A/L0B, L0C->GM/L1, UB->GM, UB->UB";
      if (crosses_cores(from, to))
        hint =
            "there is no direct L0C<->UB path on A2/A3: go through a GM workspace "
            "(FIX/MTE3 out, MTE2 in) with a cross-core flag";
      error(s.loc, "copy-direction",
            fmt::format("copy from {} to {} is not a hardware data path", to_string(from),
                        to_string(to)),
            hint);
      return;
    }
    if (!pipe_on(*scope_, *pipe)) {
      error(s.loc, "scope-rule",
            fmt::format("copy {} -> {} runs on pipe {}, which the {} core does not have",
                        to_string(from), to_string(to), to_string(*pipe),
                        *scope_ == CoreKind::C ? "Cube" : "Vector"),
            "put the copy in the scope of the core that owns the on-chip buffer");
      return;
    }
    operand_on_core(n.src, s.loc, "copy source");
    operand_on_core(n.dst, s.loc, "copy destination");
    if (n.atomic_add && to != Scope::GM)
      error(s.loc, "copy-direction",
            fmt::format("atomic add {} -> {}: the DMA unit adds into GM only", to_string(from),
                        to_string(to)),
            "atomic_add a UB or L0C tile into a GM tensor");
    if (n.atomic_add && !is_float(n.dst.buffer->dtype) && n.dst.buffer->dtype != DType::I32)
      error(s.loc, "dtype-mismatch",
            fmt::format("atomic add into '{}', a {} tensor; the DMA unit adds f32, f16, bf16 "
                        "or i32",
                        n.dst.buffer->name, to_string(n.dst.buffer->dtype)),
            "accumulate in one of those dtypes");
    if (n.src.elements() != n.dst.elements()) {
      error(s.loc, "shape-mismatch",
            fmt::format("copy moves {} elements from {} {} into {} elements of {} {}",
                        n.src.elements(), print(n.src), shape_str(n.src.extent), n.dst.elements(),
                        print(n.dst), shape_str(n.dst.extent)),
            "make both regions the same size");
    }
    DType a = n.src.buffer->dtype, b = n.dst.buffer->dtype;
    bool cast_ok = (*pipe == Pipe::FIX && a == DType::F32 &&
                    (b == DType::F16 || b == DType::BF16 || b == DType::F32)) ||
                   (*pipe == Pipe::V);
    if (a != b && !cast_ok) {
      error(s.loc, "dtype-mismatch",
            fmt::format("copy {} -> {} changes dtype {} -> {}; only FIX (L0C f32 -> f16/bf16) "
                        "and UB -> UB copies cast",
                        print(n.src), print(n.dst), to_string(a), to_string(b)),
            "copy into a buffer of the same dtype, then tile::cast on UB");
    }
    if (n.transpose && *pipe != Pipe::MTE1) {
      error(s.loc, "bad-operand", "transpose is only available on L1 -> L0A/L0B copies (MTE1)",
            "drop transpose, or transpose on the L1 -> L0 move");
    }
    if (n.pad_value && !(from == Scope::GM && to == Scope::UB)) {
      error(s.loc, "bad-operand", "pad_value is only available on GM -> UB copies",
            "drop pad_value");
    } else if (n.pad_value) {
      // Copies move equal element counts, so there is nothing to pad yet; accepting the
      // option would silently do nothing.
      error(s.loc, "unsupported",
            "pad_value on GM -> UB copies is not modelled yet (copies move equal element "
            "counts)",
            "drop pad_value and fill the rest of the tile with tile::fill");
    }
    if (n.transpose && n.src.squeezed().size() > 2) {
      error(s.loc, "bad-operand", "transpose needs a 2-D tile", "slice a [rows, cols] tile");
    }
    if (!element_move(n)) {
      ub_aligned(n.src, s.loc, "copy source");
      ub_aligned(n.dst, s.loc, "copy destination");
    }
  }

  /// [rows, cols] of a tile seen as a matrix, or nullopt if it has more than 2 real dims.
  static std::optional<std::pair<int64_t, int64_t>> matrix(const Region& r) {
    auto sq = r.squeezed();
    if (sq.size() == 1) return std::pair<int64_t, int64_t>{1, sq[0]};
    if (sq.size() == 2) return std::pair<int64_t, int64_t>{sq[0], sq[1]};
    return std::nullopt;
  }

  void check(const GemmStmt& n, const StmtNode& s) {
    if (!in_scope(s.loc, "gemm")) return;
    if (*scope_ != CoreKind::C) {
      error(s.loc, "scope-rule", "gemm in scope V: matrix multiply runs on the Cube core",
            "move it into scope_c");
      return;
    }
    if (!region(n.a, s.loc, "gemm A") || !region(n.b, s.loc, "gemm B") ||
        !region(n.c, s.loc, "gemm C"))
      return;
    const std::pair<const Region*, Scope> want[] = {
        {&n.a, Scope::L0A}, {&n.b, Scope::L0B}, {&n.c, Scope::L0C}};
    const char* names[] = {"A", "B", "C"};
    bool ok = true;
    for (int i = 0; i < 3; ++i) {
      if (want[i].first->buffer->scope != want[i].second) {
        error(s.loc, "gemm-operand",
              fmt::format("gemm {} operand '{}' is in {}; expected {}", names[i],
                          want[i].first->buffer->name, to_string(want[i].first->buffer->scope),
                          to_string(want[i].second)),
              "copy L1 tiles to L0A (A) and L0B (B) first; accumulate into an L0C buffer");
        ok = false;
      }
    }
    if (!ok) return;
    DType ta = n.a.buffer->dtype, tb = n.b.buffer->dtype, tc = n.c.buffer->dtype;
    bool int8 = ta == DType::I8;
    if (ta != tb || !(ta == DType::F16 || ta == DType::BF16 || int8) ||
        tc != (int8 ? DType::I32 : DType::F32)) {
      error(s.loc, "dtype-mismatch",
            fmt::format("gemm dtypes {} x {} -> {}; expected f16 x f16 -> f32, bf16 x bf16 -> "
                        "f32 or i8 x i8 -> i32",
                        to_string(ta), to_string(tb), to_string(tc)),
            "cast the operands on the way into L1, or allocate L0C as f32");
      return;
    }
    auto ma = matrix(n.a), mb = matrix(n.b), mc = matrix(n.c);
    if (!ma || !mb || !mc) {
      error(s.loc, "shape-mismatch", "gemm operands must be 2-D tiles",
            "slice one [rows, cols] tile of each multi-buffer");
      return;
    }
    auto [am, ak] = n.transpose_a ? std::pair{ma->second, ma->first} : *ma;
    auto [bk, bn] = n.transpose_b ? std::pair{mb->second, mb->first} : *mb;
    if (ak != bk || am != mc->first || bn != mc->second) {
      error(s.loc, "shape-mismatch",
            fmt::format("gemm [{}x{}] x [{}x{}] -> [{}x{}]: expected A [M,K] x B [K,N] -> C [M,N]",
                        am, ak, bk, bn, mc->first, mc->second),
            "check the tile extents and the transpose flags");
      return;
    }
    int64_t k_align = 32 / dtype_bytes(ta);
    if (am % 16 || bn % 16 || ak % k_align) {
      error(s.loc, "fractal-alignment",
            fmt::format("gemm M={} N={} K={}: cube operands are 16x16 fractals, so M and N must "
                        "be multiples of 16 and K a multiple of {} for {}",
                        am, bn, ak, k_align, to_string(ta)),
            "pad the tile to the next multiple of 16 (and mask the extra rows/columns)");
    }
  }

  void check(const TileOpStmt& n, const StmtNode& s) {
    std::string what = std::string("tile.") + to_string(n.op);
    if (!in_scope(s.loc, what.c_str())) return;
    if (*scope_ != CoreKind::V) {
      error(s.loc, "scope-rule",
            fmt::format("{} in scope C: vector ops run on the Vector core", what),
            "move it into scope_v");
      return;
    }
    std::vector<const Region*> ops = {&n.dst};
    for (const auto& r : n.srcs) ops.push_back(&r);
    if (n.scalar)
      if (auto* r = std::get_if<Region>(&n.scalar->value)) ops.push_back(r);
    for (auto* r : ops) {
      if (!region(*r, s.loc, what.c_str())) return;
      if (r->buffer->scope != Scope::UB) {
        error(s.loc, "tile-operand",
              fmt::format("{} operand '{}' is in {}; vector ops take UB tiles", what,
                          r->buffer->name, to_string(r->buffer->scope)),
              "copy the data into a UB buffer first (GM -> UB is MTE2)");
        return;
      }
    }
    if (n.scalar)
      if (auto* r = std::get_if<Region>(&n.scalar->value); r && r->elements() != 1) {
        error(s.loc, "shape-mismatch",
              fmt::format("scalar operand {} has {} elements; expected one element", print(*r),
                          r->elements()),
              "index every dimension of the scalar read");
      }
    // A one-element fill is an element store (`ub[i] = x`: the scalar unit's SetValue on
    // hardware), which needs no vector alignment.
    if (!(n.op == TileOpKind::Fill && n.dst.elements() == 1)) {
      for (const auto& r : n.srcs) ub_aligned(r, s.loc, what.c_str());
      ub_aligned(n.dst, s.loc, what.c_str());
    }

    size_t want_srcs = 0;
    bool scalar_ok = false, scalar_needed = false;
    switch (n.op) {
      case TileOpKind::Add:
      case TileOpKind::Sub:
      case TileOpKind::Mul:
      case TileOpKind::Div:
      case TileOpKind::Max:
      case TileOpKind::Min:
      case TileOpKind::Compare:
      case TileOpKind::BitAnd:
      case TileOpKind::BitOr:
      case TileOpKind::BitXor:
      case TileOpKind::Pow:
        want_srcs = n.scalar ? 1 : 2;
        scalar_ok = true;
        break;
      case TileOpKind::ShiftLeft:
      case TileOpKind::ShiftRight:
        want_srcs = 1;
        scalar_needed = true;
        break;
      case TileOpKind::SelectOp:
        want_srcs = n.scalar ? 2 : 3;
        scalar_ok = true;
        break;
      case TileOpKind::Axpy:
        want_srcs = 1;
        scalar_needed = true;
        break;
      case TileOpKind::Fill:
        want_srcs = 0;
        scalar_needed = true;
        break;
      case TileOpKind::Gather:
      case TileOpKind::Gatherb:
        want_srcs = 2;
        break;
      case TileOpKind::Arange:
        want_srcs = 0;
        scalar_needed = true;
        break;
      case TileOpKind::Sort:
        want_srcs = 1;
        scalar_needed = true;
        break;
      case TileOpKind::MergeSort:  // 2 or 3 ways (an instruction has at most 4 operands)
        want_srcs = std::clamp<size_t>(n.srcs.size(), 2, 3);
        break;
      default:
        want_srcs = 1;
    }
    if (n.srcs.size() != want_srcs || (scalar_needed && !n.scalar) ||
        (n.scalar && !scalar_ok && !scalar_needed)) {
      error(s.loc, "bad-operand",
            fmt::format("{} takes {} tile source(s){}; found {} tile(s){}", what, want_srcs,
                        scalar_needed ? " and a scalar" : "", n.srcs.size(),
                        n.scalar ? " and a scalar" : ""),
            "see docs/ir.md for the operands of each tile op");
      return;
    }
    DType dt = n.dst.buffer->dtype;
    auto same_count = [&](const Region& r) {
      if (r.elements() != n.dst.elements()) {
        error(s.loc, "shape-mismatch",
              fmt::format("{}: source {} has {} elements {} but destination {} has {} {}", what,
                          print(r), r.elements(), shape_str(r.extent), print(n.dst),
                          n.dst.elements(), shape_str(n.dst.extent)),
              "element counts of tile operands must match (use tile::broadcast to expand a "
              "row or column vector)");
        return false;
      }
      return true;
    };
    auto same_dtype = [&](const Region& r) {
      if (r.buffer->dtype != dt) {
        error(s.loc, "dtype-mismatch",
              fmt::format("{}: source '{}' is {} but destination '{}' is {}", what, r.buffer->name,
                          to_string(r.buffer->dtype), n.dst.buffer->name, to_string(dt)),
              "tile::cast one operand first; only cast changes dtype");
      }
    };
    switch (n.op) {
      case TileOpKind::Broadcast: {
        auto src = n.srcs[0].squeezed();
        auto dst = matrix(n.dst);
        same_dtype(n.srcs[0]);
        int64_t len = n.srcs[0].elements();
        bool row_vec = dst && len == dst->first && (src.size() == 1 || src.back() == 1);
        bool col_vec = dst && len == dst->second;
        if (!dst || !(row_vec || col_vec)) {
          error(s.loc, "shape-mismatch",
                fmt::format("broadcast {} {} -> {} {}: expected [R] or [R,1] -> [R,C], or [C] "
                            "or [1,C] -> [R,C]",
                            print(n.srcs[0]), shape_str(n.srcs[0].extent), print(n.dst),
                            shape_str(n.dst.extent)),
                "make the vector length equal the destination's rows or columns");
        }
        break;
      }
      case TileOpKind::BitAnd:
      case TileOpKind::BitOr:
      case TileOpKind::BitXor:
      case TileOpKind::BitNot:
      case TileOpKind::ShiftLeft:
      case TileOpKind::ShiftRight:
        if (is_float(dt))
          error(s.loc, "dtype-mismatch",
                fmt::format("{} on '{}', a {} tile: bit operations take integer tiles", what,
                            n.dst.buffer->name, to_string(dt)),
                "apply it to an integer tile (tile::cast first)");
        for (const auto& r : n.srcs)
          if (same_count(r)) same_dtype(r);
        break;
      case TileOpKind::Transpose: {
        same_dtype(n.srcs[0]);
        auto src = matrix(n.srcs[0]), dst = matrix(n.dst);
        if (!src || !dst || src->first != dst->second || src->second != dst->first)
          error(s.loc, "shape-mismatch",
                fmt::format("transpose {} {} -> {} {}: expected [R, C] -> [C, R]", print(n.srcs[0]),
                            shape_str(n.srcs[0].extent), print(n.dst), shape_str(n.dst.extent)),
                "give the destination the source's shape with rows and columns swapped");
        break;
      }
      case TileOpKind::Gather:
        same_count(n.srcs[1]);
        same_dtype(n.srcs[0]);
        if (n.srcs[1].buffer->dtype != DType::I32)
          error(s.loc, "dtype-mismatch",
                fmt::format("gather offsets '{}' are {}; expected i32", n.srcs[1].buffer->name,
                            to_string(n.srcs[1].buffer->dtype)),
                "store element offsets as i32");
        break;
      case TileOpKind::Arange:
        if (auto* r = std::get_if<Region>(&n.scalar->value))
          error(s.loc, "bad-operand",
                fmt::format("{}: the first value {} is read from UB; expected a number or an "
                            "integer expression",
                            what, print(*r)),
                "pass the first value as a constant or an index expression");
        break;
      case TileOpKind::Sort:
        check_sort(n, s, what);
        break;
      case TileOpKind::MergeSort:
        check_merge_sort(n, s, what);
        break;
      case TileOpKind::GatherMask:
        check_gather_mask(n, s, what);
        break;
      case TileOpKind::Gatherb:
        check_gatherb(n, s, what);
        break;
      case TileOpKind::Compare:
        if (packed_mask(dt, n.dst.elements(), n.srcs[0].elements())) {
          // a bit mask (vec_modes.h): the sources agree with each other
          if (n.srcs.size() == 2 && n.srcs[1].elements() != n.srcs[0].elements())
            error(s.loc, "shape-mismatch",
                  fmt::format("{}: source {} has {} elements but source {} has {}", what,
                              print(n.srcs[1]), n.srcs[1].elements(), print(n.srcs[0]),
                              n.srcs[0].elements()),
                  "compare tiles of the same element count");
        } else {
          for (const auto& r : n.srcs) same_count(r);
        }
        if (n.srcs.size() == 2 && n.srcs[1].buffer->dtype != n.srcs[0].buffer->dtype)
          same_dtype(n.srcs[1]);
        break;
      case TileOpKind::SelectOp:
        for (size_t i = 0; i < n.srcs.size(); ++i)
          if (i > 0 ||
              !packed_mask(n.srcs[0].buffer->dtype, n.srcs[0].elements(), n.dst.elements()))
            same_count(n.srcs[i]);
        for (size_t i = 1; i < n.srcs.size(); ++i) same_dtype(n.srcs[i]);
        break;
      case TileOpKind::Cast:
        same_count(n.srcs[0]);
        if (!valid_cast_round(n.attrs[0]))
          error(s.loc, "bad-operand",
                fmt::format("{}: rounding mode {} is not one of 0..4", what, n.attrs[0]),
                "see CastRound in tilepipe/vec_modes.h");
        break;
      default:
        for (const auto& r : n.srcs) {
          if (same_count(r)) same_dtype(r);
        }
    }
    bool needs_float = n.op == TileOpKind::Exp || n.op == TileOpKind::Ln ||
                       n.op == TileOpKind::Sqrt || n.op == TileOpKind::Rsqrt ||
                       n.op == TileOpKind::Reciprocal || n.op == TileOpKind::Div ||
                       n.op == TileOpKind::Axpy || n.op == TileOpKind::Sin ||
                       n.op == TileOpKind::Cos || n.op == TileOpKind::Round;
    if (needs_float && !is_float(dt)) {
      error(s.loc, "dtype-mismatch",
            fmt::format("{} on {} tile '{}': this op is defined for f16/bf16/f32", what,
                        to_string(dt), n.dst.buffer->name),
            "tile::cast to f32 first");
    }
  }

  /// Sort and merge_sort work on f32 or f16 keys (the hardware's Sort32 / MrgSort types).
  bool sort_dtypes(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
    for (const Region* r : {&n.dst, &n.srcs[0]}) {
      DType d = r->buffer->dtype;
      if (d != DType::F32 && d != DType::F16) {
        error(s.loc, "dtype-mismatch",
              fmt::format("{}: '{}' is {}; sorting takes f32 or f16 tiles", what, r->buffer->name,
                          to_string(d)),
              "tile::cast the keys to f32 first");
        return false;
      }
    }
    for (const auto& r : n.srcs)
      if (r.buffer->dtype != n.dst.buffer->dtype) {
        error(s.loc, "dtype-mismatch",
              fmt::format("{}: source '{}' is {} but destination '{}' is {}", what, r.buffer->name,
                          to_string(r.buffer->dtype), n.dst.buffer->name,
                          to_string(n.dst.buffer->dtype)),
              "give the sorted pairs the keys' dtype");
        return false;
      }
    return true;
  }

  void check_sort(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
    if (!sort_dtypes(n, s, what)) return;
    const int64_t len = n.srcs[0].elements();
    if (len % 32 != 0) {
      error(s.loc, "shape-mismatch",
            fmt::format("{}: source {} has {} elements; expected a multiple of 32 (the hardware "
                        "sorts 32-element blocks and pads the last one in place)",
                        what, print(n.srcs[0]), len),
            fmt::format("allocate the source with {} elements", (len + 31) / 32 * 32));
      return;
    }
    if (n.dst.elements() > 2 * len)
      error(s.loc, "shape-mismatch",
            fmt::format("{}: destination {} has {} elements; the sort gives at most {} "
                        "(a value and an index per source element)",
                        what, print(n.dst), n.dst.elements(), 2 * len),
            "slice the destination to the pairs wanted");
    if (auto* c = std::get_if<double>(&n.scalar->value); c && (*c < 0 || *c > len))
      error(s.loc, "shape-mismatch",
            fmt::format("{}: {} valid elements, but the source {} has {}", what, *c,
                        print(n.srcs[0]), len),
            "pass a count between 0 and the source's element count");
    else if (std::holds_alternative<Region>(n.scalar->value))
      error(s.loc, "bad-operand",
            fmt::format("{}: the valid count is read from UB; expected a number or an integer "
                        "expression",
                        what),
            "pass the count as a constant or an index expression");
  }

  void check_merge_sort(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
    if (!sort_dtypes(n, s, what)) return;
    if (n.dst.buffer->dtype != DType::F32) {
      error(s.loc, "dtype-mismatch",
            fmt::format("{} on f16 pairs: the hardware's f16 MrgSort layout (four halves per "
                        "element) is not modelled",
                        what),
            "sort f32 (value, index) pairs");
      return;
    }
    int64_t total = 0;
    for (const auto& r : n.srcs) {
      if (r.elements() % 2 != 0)
        error(s.loc, "shape-mismatch",
              fmt::format("{}: source {} has {} elements; (value, index) pairs need an even "
                          "count",
                          what, print(r), r.elements()),
              "give each source two elements per sorted entry");
      total += r.elements();
    }
    if (n.dst.elements() < total)
      error(s.loc, "shape-mismatch",
            fmt::format("{}: destination {} has {} elements; the merged lists have {}", what,
                        print(n.dst), n.dst.elements(), total),
            fmt::format("allocate the destination with {} elements", total));
  }

  void check_gather_mask(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
    const int64_t p = n.attrs[0];
    if (p < 1 || p > 7) {
      error(s.loc, "bad-operand",
            fmt::format("{}: pattern {}; expected 1..7 (P0101 P1010 P0001 P0010 P0100 P1000 "
                        "P1111)",
                        what, p),
            "use one of the built-in patterns");
      return;
    }
    if (n.srcs[0].buffer->dtype != n.dst.buffer->dtype)
      error(s.loc, "dtype-mismatch",
            fmt::format("{}: source '{}' is {} but destination '{}' is {}", what,
                        n.srcs[0].buffer->name, to_string(n.srcs[0].buffer->dtype),
                        n.dst.buffer->name, to_string(n.dst.buffer->dtype)),
            "gather_mask moves elements; tile::cast one operand first");
    int64_t kept = 0;
    for (int64_t i = 0, len = n.srcs[0].elements(); i < len; ++i)
      kept += gather_mask_keeps(p, i) ? 1 : 0;
    if (n.dst.elements() < kept)
      error(s.loc, "shape-mismatch",
            fmt::format("{}: the pattern keeps {} of the source's {} elements but destination {} "
                        "holds {}",
                        what, kept, n.srcs[0].elements(), print(n.dst), n.dst.elements()),
            fmt::format("give the destination at least {} elements", kept));
  }

  void check_gatherb(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
    const auto [reps, blk, rep] = n.attrs;
    const DType dt = n.dst.buffer->dtype;
    if (n.srcs[0].buffer->dtype != dt)
      error(s.loc, "dtype-mismatch",
            fmt::format("{}: source '{}' is {} but destination '{}' is {}", what,
                        n.srcs[0].buffer->name, to_string(n.srcs[0].buffer->dtype),
                        n.dst.buffer->name, to_string(dt)),
            "gatherb moves bytes of one type; tile::cast one operand first");
    if (n.srcs[1].buffer->dtype != DType::U32)
      error(s.loc, "dtype-mismatch",
            fmt::format("{}: offsets '{}' are {}; expected u32 byte offsets", what,
                        n.srcs[1].buffer->name, to_string(n.srcs[1].buffer->dtype)),
            "store the byte offsets of the 32-byte blocks as u32");
    if (reps < 1 || blk < 0 || rep < 0) {
      error(s.loc, "bad-operand",
            fmt::format("{}: repeat {}, block stride {}, repeat stride {}; expected a repeat "
                        ">= 1 and strides >= 0",
                        what, reps, blk, rep),
            "pass the repeat count and the strides in 32-byte blocks");
      return;
    }
    if (n.srcs[1].elements() < 8 * reps)
      error(s.loc, "shape-mismatch",
            fmt::format("{}: {} repeats read {} offsets but '{}' has {}", what, reps, 8 * reps,
                        n.srcs[1].buffer->name, n.srcs[1].elements()),
            "one offset per 32-byte block: 8 per repeat");
    const int64_t blocks = (reps - 1) * rep + 7 * blk + 1,
                  have = n.dst.elements() * dtype_bytes(dt) / 32;
    if (blocks > have)
      error(s.loc, "shape-mismatch",
            fmt::format("{}: the last block written is block {} of destination {}, which holds "
                        "{} 32-byte blocks",
                        what, blocks - 1, print(n.dst), have),
            "lower the repeat count or the strides, or enlarge the destination");
  }

  void check(const ReduceStmt& n, const StmtNode& s) {
    const char* what = "reduce";
    if (!in_scope(s.loc, what)) return;
    if (*scope_ != CoreKind::V) {
      error(s.loc, "scope-rule", "reduce in scope C: reductions run on the Vector core",
            "move it into scope_v");
      return;
    }
    if (!region(n.src, s.loc, what) || !region(n.dst, s.loc, what)) return;
    for (const Region* r : {&n.src, &n.dst}) {
      if (r->buffer->scope != Scope::UB) {
        error(s.loc, "tile-operand",
              fmt::format("reduce operand '{}' is in {}; reductions take UB tiles", r->buffer->name,
                          to_string(r->buffer->scope)),
              "copy the data into a UB buffer first");
        return;
      }
    }
    ub_aligned(n.src, s.loc, what);
    if (n.src.buffer->dtype != n.dst.buffer->dtype) {
      error(s.loc, "dtype-mismatch",
            fmt::format("reduce {} -> {}: dtypes {} and {} differ", n.src.buffer->name,
                        n.dst.buffer->name, to_string(n.src.buffer->dtype),
                        to_string(n.dst.buffer->dtype)),
            "reduce into a buffer of the source dtype");
    }
    auto m = matrix(n.src);
    if (!m || !(n.dim == -1 || n.dim == 0 || n.dim == 1)) {
      error(s.loc, "shape-mismatch",
            fmt::format("reduce over {} {} with dim={}: expected a 1-D or 2-D tile and dim in "
                        "{{-1, 0, 1}}",
                        print(n.src), shape_str(n.src.extent), n.dim),
            "slice one 2-D tile");
      return;
    }
    bool one_d = n.src.squeezed().size() == 1;
    int64_t want = one_d ? 1 : (n.dim == 0 ? m->second : m->first);
    if (n.dst.elements() != want) {
      error(s.loc, "shape-mismatch",
            fmt::format("reduce {} {} along dim {} gives {} values, but destination {} holds {}",
                        print(n.src), shape_str(n.src.extent), n.dim, want, print(n.dst),
                        n.dst.elements()),
            fmt::format("use a destination of {} elements, e.g. [{}, 1]", want, want));
    }
  }

  void event_id(const Expr& id, int limit, const Loc& loc, const char* what) {
    Interval iv = range(id);
    if (iv.lo < 0 || iv.hi >= limit) {
      error(loc, "flag-id",
            fmt::format("{} id {} may be {}; ids are 0..{}", what, print(id),
                        iv.lo < 0 ? iv.lo : iv.hi, limit - 1),
            "reuse ids of finished handshakes, or merge buffers that are released together");
    }
  }

  void flag(Pipe src, Pipe dst, const Expr& id, const Loc& loc, const char* what) {
    if (!in_scope(loc, what)) return;
    if (!legal_pair(*scope_, src, dst)) {
      error(loc, "flag-pipes",
            fmt::format("{} {}->{} is not a legal pipe pair on the {} core", what, to_string(src),
                        to_string(dst), *scope_ == CoreKind::C ? "Cube" : "Vector"),
            *scope_ == CoreKind::C
                ? "Cube pairs: M<->MTE1, M<->FIX, MTE1<->MTE2, MTE2->M, M->MTE2, FIX->MTE1, "
                  "MTE1->FIX"
                : "Vector pairs: any two of S, V, MTE2, MTE3");
    }
    event_id(id, chip_.event_ids, loc, what);
  }

  void check(const SetFlagStmt& n, const StmtNode& s) {
    flag(n.src, n.dst, n.event_id, s.loc, "set_flag");
  }
  void check(const WaitFlagStmt& n, const StmtNode& s) {
    flag(n.src, n.dst, n.event_id, s.loc, "wait_flag");
  }
  void check(const PipeBarrierStmt& n, const StmtNode& s) {
    if (!in_scope(s.loc, "pipe_barrier")) return;
    if (n.pipe == Pipe::S || !pipe_on(*scope_, n.pipe)) {
      error(s.loc, "flag-pipes",
            fmt::format("pipe_barrier({}) in scope {}: that pipe has no barrier on this core",
                        to_string(n.pipe), to_string(*scope_)),
            *scope_ == CoreKind::C ? "Cube barriers: MTE1, MTE2, M, FIX"
                                   : "Vector barriers: MTE2, V, MTE3");
    }
  }
  void check(const SetCrossFlagStmt& n, const StmtNode& s) {
    if (!scope_) {
      error(s.loc, "cross-flag",
            "set_cross_flag outside a scope: cross-core flags go between a C and a V scope",
            "put it in scope_c (signals the AIVs) or scope_v (signals the AIC)");
      return;
    }
    if (!pipe_on(*scope_, n.pipe)) {
      error(s.loc, "cross-flag",
            fmt::format("set_cross_flag on pipe {}, which the {} core does not have",
                        to_string(n.pipe), *scope_ == CoreKind::C ? "Cube" : "Vector"),
            "set it on the pipe that wrote the data (FIX/MTE2 on Cube, MTE3/MTE2/V on Vector)");
    }
    if (n.mode != 2) {
      error(s.loc, "cross-flag",
            fmt::format("set_cross_flag mode {} is not modelled; only mode 2 (AIC <-> both AIVs "
                        "of one AI core) is",
                        n.mode),
            "use mode 2");
    }
    event_id(n.flag_id, chip_.cross_flag_ids, s.loc, "set_cross_flag");
  }
  void check(const WaitCrossFlagStmt& n, const StmtNode& s) {
    if (!scope_) {
      error(s.loc, "cross-flag",
            "wait_cross_flag outside a scope: cross-core flags go between a C and a V scope",
            "put it in scope_c or scope_v");
      return;
    }
    event_id(n.flag_id, chip_.cross_flag_ids, s.loc, "wait_cross_flag");
  }

  /// The kernel's GM tensors (parameters and workspaces) must fit in the die's HBM: a
  /// larger program describes no run the chip can make, however few cycles it is given.
  void check_gm_capacity() {
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

  void check_capacity() {
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

  const Program& p_;
  const ChipConfig& chip_;
  VerifyOptions opts_;
  std::vector<Diagnostic> diags_;
  std::optional<CoreKind> scope_;
  std::map<int, Interval> vars_;
  std::set<int> guarded_;  // ids (var id, -1 cid, -2 vid) used by an enclosing if condition
  std::vector<std::set<int>> visible_{1};
  std::map<Scope, std::vector<Alloc>> allocs_;
  std::map<int, Loc> loaded_gm_, loaded_ub_;  // buffer id -> first scalar load
  std::multimap<int, Loc> writes_;            // buffer id -> ops that write it (see record_write)
};

}  // namespace

bool legal_flag_pair(CoreKind k, Pipe src, Pipe dst) {
  return legal_pair(k, src, dst);
}

std::vector<Diagnostic> verify(const Program& p, const ChipConfig& chip, VerifyOptions opts) {
  return Verifier(p, chip, opts).run();
}

void verify_or_throw(const Program& p, const ChipConfig& chip, VerifyOptions opts) {
  auto d = verify(p, chip, opts);
  if (!d.empty()) throw UserError(std::move(d));
}

}  // namespace tilepipe

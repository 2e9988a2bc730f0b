// Integer ranges of index expressions (interval arithmetic), their known divisors, and
// scalar loads: what they may read and what may write the tensors they read.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "verify/verify_internal.h"

namespace tilepipe::verify_detail {

Interval Verifier::range(const Expr& e, std::map<int, int>& uses) {
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

Interval Verifier::fit(__int128 lo, __int128 hi, bool exact) {
  constexpr int64_t kLo = INT64_MIN / 4, kHi = INT64_MAX / 4;
  if (lo < kLo || hi > kHi) return {kLo, kHi, false};
  return {static_cast<int64_t>(lo), static_cast<int64_t>(hi), exact};
}

Interval Verifier::combine(BinOp op, Interval a, Interval b) {
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

Interval Verifier::range(const Expr& e) {
  std::map<int, int> uses;
  Interval r = range(e, uses);
  for (auto& [id, n] : uses) r.exact = r.exact && n == 1 && !guarded_.count(id);
  return r;
}

int64_t Verifier::divisor(const Expr& e) {
  return std::visit(
      [&](const auto& n) -> int64_t {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, IntImm>)
          return n.value == 0 ? 0 : std::abs(n.value);
        else if constexpr (std::is_same_v<T, VarRef>) {
          // a Parallel loop's variable indexes the tile the vectorize pass widens from its
          // first value (0: any alignment)
          return lanes_.count(n.var->id) ? std::abs(vars_.at(n.var->id).lo) : 1;
        } else if constexpr (std::is_same_v<T, Binary>) {
          int64_t a = divisor(n.a), b = divisor(n.b);
          if (n.op == BinOp::Mul) return (a == 1 || b == 1) ? std::max(a, b) : a * b;
          // min / max is one of its operands: a multiple of what both are multiples of
          if (n.op == BinOp::Add || n.op == BinOp::Sub || n.op == BinOp::Min || n.op == BinOp::Max)
            return std::gcd(a, b);
          return 1;
        } else
          return 1;
      },
      e->node);
}

void Verifier::load(const Load& n, const Loc& loc) {
  if (!n.buffer) {
    error(loc, "bad-operand", "load from an empty tensor", "pass a buffer");
    return;
  }
  const auto& b = *n.buffer;
  Region r{n.buffer, n.index, std::vector<int64_t>(n.index.size(), 1)};
  if (!region(r, loc, "load")) return;
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
}

void Verifier::record_write(const Stmt& s) {
  const Region* dst = nullptr;
  if (auto* c = std::get_if<CopyStmt>(&s->node)) {
    dst = &c->dst;
  } else if (auto* t = std::get_if<TileOpStmt>(&s->node)) {
    dst = &t->dst;
  } else if (auto* r = std::get_if<ReduceStmt>(&s->node)) {
    dst = &r->dst;
  }
  if (!dst || !dst->buffer) return;
  if (dst->buffer->scope == Scope::GM) writes_.emplace(dst->buffer->id, s->loc);
}

void Verifier::check_load_sources() {
  for (const auto& [id, load_loc] : loaded_gm_) {
    auto w = writes_.find(id);
    if (w == writes_.end()) continue;
    error(w->second, "load-source",
          fmt::format("this op writes a tensor that a scalar load reads (at {}); loaded GM "
                      "inputs are read-only",
                      load_loc.str()),
          "keep index / page tables read-only: copy the input into a UB buffer and compute "
          "on that copy");
  }
}

}  // namespace tilepipe::verify_detail

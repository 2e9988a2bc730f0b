// Interval arithmetic over index expressions (tilepipe/ir_range.h).
#include "tilepipe/ir_range.h"

#include <algorithm>

namespace tilepipe::ir {

namespace {

constexpr int64_t kBig = INT64_MAX / 8;

Range clamp(__int128 lo, __int128 hi) {
  if (lo < -kBig || hi > kBig) return Range::any();
  return Range::of(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
}

}  // namespace

Range eval_range(const Expr& e, const VarRanges& vars) {
  return std::visit(
      [&](const auto& n) -> Range {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, IntImm>) {
          return Range::of(n.value, n.value);
        } else if constexpr (std::is_same_v<T, VarRef>) {
          auto it = vars.find(n.var->id);
          return it == vars.end() ? Range::any() : it->second;
        } else if constexpr (std::is_same_v<T, CoreIdx>) {
          auto it = vars.find(kCidVar);
          return it == vars.end() ? Range::any() : it->second;
        } else if constexpr (std::is_same_v<T, VecIdx>) {
          auto it = vars.find(kVidVar);
          return it == vars.end() ? Range::of(0, 1) : it->second;
        } else if constexpr (std::is_same_v<T, Binary>) {
          Range a = eval_range(n.a, vars), b = eval_range(n.b, vars);
          const bool divides = !(n.op == BinOp::Div || n.op == BinOp::Mod) || b.lo != 0;
          if (a.known && b.known && a.lo == a.hi && b.lo == b.hi && divides &&
              !binop_overflows(n.op, a.lo, b.lo))  // two points: the one value
            return Range::of(eval_binop(n.op, a.lo, b.lo), eval_binop(n.op, a.lo, b.lo));
          using W = __int128;
          switch (n.op) {
            case BinOp::Add:
              if (!a.known || !b.known) return Range::any();
              return clamp(W{a.lo} + b.lo, W{a.hi} + b.hi);
            case BinOp::Sub:
              if (!a.known || !b.known) return Range::any();
              return clamp(W{a.lo} - b.hi, W{a.hi} - b.lo);
            case BinOp::Mul: {
              if (!a.known || !b.known) return Range::any();
              W v[4] = {W{a.lo} * b.lo, W{a.lo} * b.hi, W{a.hi} * b.lo, W{a.hi} * b.hi};
              return clamp(*std::min_element(v, v + 4), *std::max_element(v, v + 4));
            }
            case BinOp::Min:
              if (!a.known && !b.known) return Range::any();
              if (!a.known) return Range{INT64_MIN / 8, b.hi, false};
              if (!b.known) return Range{INT64_MIN / 8, a.hi, false};
              return Range::of(std::min(a.lo, b.lo), std::min(a.hi, b.hi));
            case BinOp::Max:
              if (!a.known || !b.known) return Range::any();
              return Range::of(std::max(a.lo, b.lo), std::max(a.hi, b.hi));
            case BinOp::Div:
              if (!a.known || !b.known || b.lo <= 0) return Range::any();
              return Range::of(
                  std::min(eval_binop(BinOp::Div, a.lo, b.lo), eval_binop(BinOp::Div, a.lo, b.hi)),
                  std::max(eval_binop(BinOp::Div, a.hi, b.lo), eval_binop(BinOp::Div, a.hi, b.hi)));
            case BinOp::Mod:
              if (!b.known || b.lo <= 0) return Range::any();
              if (a.known && a.lo >= 0 && a.hi < b.lo) return a;
              return Range::of(0, b.hi - 1);
            default:
              return Range::of(0, 1);
          }
        } else if constexpr (std::is_same_v<T, Select>) {
          Range a = eval_range(n.then_value, vars), b = eval_range(n.else_value, vars);
          if (!a.known || !b.known) return Range::any();
          return Range::of(std::min(a.lo, b.lo), std::max(a.hi, b.hi));
        } else if constexpr (std::is_same_v<T, Load>) {
          return Range::any();
        } else {
          static_assert(sizeof(T) == 0, "eval_range: unhandled expression node");
        }
      },
      e->node);
}

std::optional<bool> decided(const Expr& cond, const VarRanges& vars) {
  if (auto c = as_const(cond)) return *c != 0;
  const auto* b = std::get_if<Binary>(&cond->node);
  if (!b) return std::nullopt;
  const Range x = eval_range(b->a, vars), y = eval_range(b->b, vars);
  if (!x.known || !y.known) return std::nullopt;
  switch (b->op) {
    case BinOp::Lt:
      if (x.hi < y.lo) return true;
      if (x.lo >= y.hi) return false;
      return std::nullopt;
    case BinOp::Le:
      if (x.hi <= y.lo) return true;
      if (x.lo > y.hi) return false;
      return std::nullopt;
    case BinOp::Gt:
      if (x.lo > y.hi) return true;
      if (x.hi <= y.lo) return false;
      return std::nullopt;
    case BinOp::Ge:
      if (x.lo >= y.hi) return true;
      if (x.hi < y.lo) return false;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

Range loop_var_range(const ForStmt& f, const VarRanges& vars) {
  Range b = eval_range(f.begin, vars), e = eval_range(f.end, vars);
  if (!b.known || !e.known) return Range::any();
  return Range::of(b.lo, std::max(b.lo, e.hi - 1));
}

namespace {
/// An atom's key: its structure, with variables by identity (appended to `out`).
void key_of(const Expr& e, std::string& out) {
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, IntImm>) {
          out += std::to_string(n.value);
        } else if constexpr (std::is_same_v<T, VarRef>) {
          out += 'v';
          out += std::to_string(n.var->id);
        } else if constexpr (std::is_same_v<T, CoreIdx>) {
          out += "cid";
        } else if constexpr (std::is_same_v<T, VecIdx>) {
          out += "vid";
        } else if constexpr (std::is_same_v<T, Binary>) {
          out += '(';
          key_of(n.a, out);
          out += ' ';
          out += to_string(n.op);
          out += ' ';
          key_of(n.b, out);
          out += ')';
        } else if constexpr (std::is_same_v<T, Select>) {
          out += "sel(";
          for (const Expr* x : {&n.cond, &n.then_value, &n.else_value}) {
            key_of(*x, out);
            out += ',';
          }
          out += ')';
        } else if constexpr (std::is_same_v<T, Load>) {
          out += "load";
          out += std::to_string(n.buffer->id);
          out += '[';
          for (const auto& i : n.index) {
            key_of(i, out);
            out += ',';
          }
          out += ']';
        }
      },
      e->node);
}
}  // namespace

Expr fold(BinOp op, const Expr& a, const Expr& b) {
  auto ca = as_const(a), cb = as_const(b);
  if (ca && cb) return make_binary(op, a, b);
  if ((op == BinOp::Add || op == BinOp::Sub) && cb == 0) return a;
  if (op == BinOp::Add && ca == 0) return b;
  if ((op == BinOp::Mul || op == BinOp::Div) && cb == 1) return a;
  if (op == BinOp::Mul && ca == 1) return b;
  if (op == BinOp::Mul && (ca == 0 || cb == 0)) return make_int(0);
  return make_binary(op, a, b);
}

Linear linear(const Expr& e) {
  Linear l;
  if (auto c = as_const(e)) {
    l.c = *c;
    return l;
  }
  if (auto* b = std::get_if<Binary>(&e->node)) {
    if (b->op == BinOp::Add || b->op == BinOp::Sub) {
      Linear x = linear(b->a), y = linear(b->b);
      int64_t s = b->op == BinOp::Add ? 1 : -1;
      x.c += s * y.c;
      for (auto& [k, v] : y.terms) x.terms[k] += s * v;
      return x;
    }
    if (b->op == BinOp::Div) {
      // (64 * vid + 64) / 2 = 32 * vid + 32: exact when every coefficient divides.
      auto d = as_const(b->b);
      if (d && *d > 0) {
        Linear x = linear(b->a);
        bool exact = x.c % *d == 0;
        for (auto& [_, v] : x.terms) exact = exact && v % *d == 0;
        if (exact) {
          x.c /= *d;
          for (auto& [_, v] : x.terms) v /= *d;
          return x;
        }
      }
    }
    if (b->op == BinOp::Mul) {
      auto ca = as_const(b->a), cb = as_const(b->b);
      if (ca || cb) {
        Linear x = linear(ca ? b->b : b->a);
        int64_t k = ca ? *ca : *cb;
        x.c *= k;
        for (auto& [_, v] : x.terms) v *= k;
        return x;
      }
    }
  }
  std::string key;
  key_of(e, key);
  l.terms[key] = 1;
  return l;
}

std::optional<int64_t> const_diff(const Expr& a, const Expr& b) {
  Linear x = linear(a), y = linear(b);
  int64_t c = y.c - x.c;
  for (auto& [k, v] : x.terms) y.terms[k] -= v;
  for (auto& [_, v] : y.terms)
    if (v != 0) return std::nullopt;
  return c;
}

Expr trip_count(const ForStmt& f) {
  Expr n = make_binary(BinOp::Sub, f.end, f.begin);
  if (f.step != 1)
    n = make_binary(BinOp::Div, make_binary(BinOp::Add, n, make_int(f.step - 1)), make_int(f.step));
  if (auto c = as_const(n); c && *c < 0) return make_int(0);
  return n;
}

}  // namespace tilepipe::ir

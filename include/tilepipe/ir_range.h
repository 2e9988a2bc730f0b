// Integer ranges of index expressions: interval arithmetic over loop variables, cid and vid.
// One home for the verifier's, the passes' and the Python extension's reasoning about
// bounds (docs/ir.md "Integer reasoning"). Conservative: an expression it cannot bound
// (a load, a division by a possibly non-positive value) is `any`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tilepipe/ir.h"

namespace tilepipe::ir {

/// Conservative closed integer range; `known == false` means any value.
struct Range {
  int64_t lo = 0, hi = 0;
  bool known = false;
  static Range any() { return {}; }
  static Range of(int64_t lo, int64_t hi) { return {lo, hi, true}; }
};

/// Ranges of loop variables (by var id) and of cid (-1) and vid (-2; [0, 1] when absent).
using VarRanges = std::map<int, Range>;
inline constexpr int kCidVar = -1;
inline constexpr int kVidVar = -2;

/// Value range of an integer expression given variable ranges (a comparison is [0, 1]).
Range eval_range(const Expr& e, const VarRanges& vars);

/// Range of cid in a launch of `block_num` blocks.
inline Range cid_range(int64_t block_num) {
  return Range::of(0, block_num > 1 ? block_num - 1 : 0);
}

/// Range of vid in a scope of core kind `k`: the two AIVs of an AI core, or the one AIC.
inline Range vid_range(CoreKind k) {
  return k == CoreKind::V ? Range::of(0, 1) : Range::of(0, 0);
}

/// Range of a loop's variable: [begin's lowest, end's highest - 1] (any when either bound
/// is unbounded).
Range loop_var_range(const ForStmt& f, const VarRanges& vars);

/// The outcome of a comparison (`a < b`, `a >= b`, ...) when it is the same for every value
/// the ranges allow, else nullopt: a guard decided at build time is no code at all.
std::optional<bool> decided(const Expr& cond, const VarRanges& vars);

/// `a op b` with constants folded (as make_binary) and the identities `x + 0`, `0 + x`,
/// `x - 0`, `x * 1`, `1 * x`, `x * 0`, `0 * x`, `x / 1` applied, so built expressions stay
/// readable in printed IR and cost the scalar unit no operation that does nothing.
Expr fold(BinOp op, const Expr& a, const Expr& b);

/// Linear form of an integer expression: constant + sum(coefficient * atom). Atoms are what
/// the form cannot open (variables, cid, vid, products of two non-constants, loads, ...),
/// keyed by their structure, so two expressions built alike share their atoms.
struct Linear {
  int64_t c = 0;
  std::map<std::string, int64_t> terms;
};
Linear linear(const Expr& e);

/// b - a when it is the same constant for every value of the variables (a slice
/// `x : x + 64`, a count of flag sets against its waits), else nullopt.
std::optional<int64_t> const_diff(const Expr& a, const Expr& b);

/// How many iterations a loop runs: `end - begin`, or `ceil((end - begin) / step)`; 0 when
/// that is a negative constant.
Expr trip_count(const ForStmt& f);

}  // namespace tilepipe::ir

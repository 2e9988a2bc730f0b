// Random tile programs for the fuzz test: valid ones (a Vector multi-buffered elementwise
// pipeline, a Cube matmul through L1 / L0 / FIX) with a host reference, and the same programs
// with one deliberate defect (wrong scope, overflowing buffer, bad slice, unmatched or
// illegal flag, shape / dtype mismatch, bad shape, missing sync, tiny cycle budget).
//
// `run_fuzz_case` takes a program through build -> verify -> lower -> simulate (functional,
// race detection on) -> compare, and classifies the result the way the CLI would: verified
// and run (exit 0), a diagnostic for the user (exit 2 / 3), or an internal error (anything
// else: a bug). Deterministic: the same seed gives the same program and outcome.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tilepipe/chip.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"

namespace tilepipe::fuzz {

enum class Defect {
  None,
  CopyOutsideScope,
  TileOpInCubeScope,
  UbInCubeScope,
  UbOverflow,
  SliceStartPastEnd,
  SliceExtentTooBig,
  SliceRuntimeOverrun,
  SliceWrongRank,
  MissingDrainWait,
  MissingSet,
  ExtraSet,
  FlagIdTooBig,
  IllegalPipePair,
  DtypeMismatch,
  ShapeMismatch,
  ZeroDim,
  ZeroBlocks,
  ZeroStepLoop,
  MissingWait,
  CrossWaitWithoutCube,
  CycleBudget,
  GemmNotAligned,
  GemmKMismatch,
  GemmInVectorScope,
  Soup,  // random statements over random buffers: anything goes, only crashes are bugs
  Count
};

inline const char* to_string(Defect d) {
  static const char* names[] = {"none",
                                "copy-outside-scope",
                                "tile-op-in-cube-scope",
                                "ub-in-cube-scope",
                                "ub-overflow",
                                "slice-start-past-end",
                                "slice-extent-too-big",
                                "slice-runtime-overrun",
                                "slice-wrong-rank",
                                "missing-drain-wait",
                                "missing-set",
                                "extra-set",
                                "flag-id-too-big",
                                "illegal-pipe-pair",
                                "dtype-mismatch",
                                "shape-mismatch",
                                "zero-dim",
                                "zero-blocks",
                                "zero-step-loop",
                                "missing-wait",
                                "cross-wait-without-cube",
                                "cycle-budget",
                                "gemm-not-aligned",
                                "gemm-k-mismatch",
                                "gemm-in-vector-scope",
                                "soup"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(Defect::Count));
  return names[static_cast<size_t>(d)];
}

struct FuzzCase {
  ir::Program program;
  Defect defect = Defect::None;
  sim::HostData inputs;
  sim::HostData expected;   // outputs by name (valid programs)
  double max_cycles = 1e9;  // after the launch (die.launch_us)
};

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  int64_t range(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(g_() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(int percent) { return range(0, 99) < percent; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(range(0, static_cast<int64_t>(v.size()) - 1))];
  }
  double real(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(g_() >> 11) / static_cast<double>(1ull << 53);
  }

 private:
  std::mt19937_64 g_;
};

/// Values exactly representable in f16 (small multiples of 1/64): sums and products stay
/// exact enough for a tight tolerance.
inline std::vector<double> values(Rng& r, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<double>(r.range(-128, 128)) / 64.0;
  return v;
}

/// Vector pipeline: Z = X op Y over `tiles` tiles of T elements, nb UB buffers per operand,
/// tiles dealt round-robin to the 2 x block_num AIVs, flags as in kernels/elementwise.cc.
inline FuzzCase vector_case(Rng& r, Defect d) {
  using namespace lang;
  FuzzCase fc;
  fc.defect = d;
  const DType dt = r.chance(50) ? f16 : f32;
  const int64_t T = 16 * r.range(1, 16), tiles = r.range(1, 9), nb = r.range(1, 3);
  const int64_t bn = d == Defect::ZeroBlocks ? 0 : r.range(1, 3), workers = 2 * bn;
  const int64_t N = T * tiles;
  const int op = static_cast<int>(r.range(0, 4));
  const bool scale = r.chance(30);
  KernelBuilder kb("fuzz_vec", bn);
  auto X = kb.input("X", {d == Defect::ZeroDim ? 0 : N}, dt);
  auto Y = kb.input("Y", {N}, dt);
  auto Z = kb.output("Z", {N}, dt);
  auto [cid, vid] = kb.launch();
  if (d == Defect::CopyOutsideScope) {
    auto stray = alloc_ub("stray", {T}, dt);
    copy(X(slice(0, T)), stray);
  }
  if (d == Defect::TileOpInCubeScope || d == Defect::UbInCubeScope)
    scope_c([&] {
      auto c = alloc_ub("c", {T}, dt);
      if (d == Defect::TileOpInCubeScope) tile::fill(c, 1.0);
    });
  scope_v([&] {
    const int64_t zt = d == Defect::ShapeMismatch ? T + 16 : T;
    auto xb = alloc_ub("xb", {nb, T}, dt);
    auto yb = alloc_ub("yb", {nb, T}, dt);
    auto zb = alloc_ub("zb", {nb, zt}, d == Defect::DtypeMismatch ? (dt == f16 ? f32 : f16) : dt);
    if (d == Defect::UbOverflow) alloc_ub("huge", {1 << 16}, f32);
    Ex w = cid * 2 + vid;
    for (int64_t s = 0; s < nb; ++s) {
      if (!(d == Defect::MissingSet && s == 0)) set_flag(Pipe::V, Pipe::MTE2, s);
      set_flag(Pipe::MTE3, Pipe::V, s);
    }
    if (d == Defect::ExtraSet) set_flag(Pipe::MTE3, Pipe::V, 0);
    if (d == Defect::IllegalPipePair) set_flag(Pipe::V, Pipe::M, 0);
    if (d == Defect::CrossWaitWithoutCube) wait_cross_flag(1);
    auto body = [&](Ex j) {
      Ex i = w + j * workers, s = j % nb;
      wait_flag(Pipe::V, Pipe::MTE2, s);
      if (d == Defect::SliceStartPastEnd)
        copy(X(slice(N, T)), xb[s]);
      else if (d == Defect::SliceExtentTooBig)
        copy(X(slice(0, N + 16)), xb(s, slice(0, T)));
      else if (d == Defect::SliceRuntimeOverrun)
        copy(X(slice((i + 1) * T, T)), xb[s]);
      else if (d == Defect::SliceWrongRank)
        copy(X(0, slice(i * T, T)), xb[s]);
      else
        copy(X(slice(i * T, T)), xb[s]);
      copy(Y(slice(i * T, T)), yb[s]);
      if (d != Defect::MissingWait) {  // the whole hand-off is missing: a race
        set_flag(Pipe::MTE2, Pipe::V, d == Defect::FlagIdTooBig ? s + 8 : s);
        wait_flag(Pipe::MTE2, Pipe::V, s);
      }
      wait_flag(Pipe::MTE3, Pipe::V, s);
      switch (op) {
        case 0:
          tile::add(zb[s], xb[s], yb[s]);
          break;
        case 1:
          tile::sub(zb[s], xb[s], yb[s]);
          break;
        case 2:
          tile::mul(zb[s], xb[s], yb[s]);
          break;
        case 3:
          tile::max(zb[s], xb[s], yb[s]);
          break;
        default:
          tile::min(zb[s], xb[s], yb[s]);
      }
      if (scale) tile::muls(zb[s], zb[s], 2.0);
      set_flag(Pipe::V, Pipe::MTE2, s);
      set_flag(Pipe::V, Pipe::MTE3, s);
      wait_flag(Pipe::V, Pipe::MTE3, s);
      copy(zb[s], Z(slice(i * T, T)));
      set_flag(Pipe::MTE3, Pipe::V, s);
    };
    Ex count = (Ex(tiles) - w + workers - 1) / workers;
    if (d == Defect::ZeroStepLoop)
      serial(0, count, 0, body);
    else
      serial(count, body);
    for (int64_t s = 0; s < nb; ++s) {
      if (!(d == Defect::MissingDrainWait && s == nb - 1)) wait_flag(Pipe::V, Pipe::MTE2, s);
      wait_flag(Pipe::MTE3, Pipe::V, s);
    }
  });
  fc.program = kb.finish();
  fc.inputs = {{"X", values(r, N)}, {"Y", values(r, N)}};
  std::vector<double> z(static_cast<size_t>(N));
  const auto &x = fc.inputs["X"], &y = fc.inputs["Y"];
  for (size_t i = 0; i < z.size(); ++i) {
    double v = op == 0   ? x[i] + y[i]
               : op == 1 ? x[i] - y[i]
               : op == 2 ? x[i] * y[i]
               : op == 3 ? std::max(x[i], y[i])
                         : std::min(x[i], y[i]);
    z[i] = scale ? 2 * v : v;
  }
  fc.expected = {{"Z", z}};
  if (d == Defect::CycleBudget) fc.max_cycles = 50;
  return fc;
}

/// Cube matmul C[M, N] = A[M, K] x B[K, N] (f16 in, f32 out) on one AI core.
inline FuzzCase cube_case(Rng& r, Defect d) {
  using namespace lang;
  FuzzCase fc;
  fc.defect = d;
  const int64_t M = d == Defect::GemmNotAligned ? 24 : 16 * r.range(1, 4);
  const int64_t N = 16 * r.range(1, 4), K = 16 * r.range(1, 4);
  const int64_t K0 = d == Defect::GemmKMismatch ? K + 16 : K;
  KernelBuilder kb("fuzz_cube", 1);
  auto A = kb.input("A", {M, K}, f16);
  auto B = kb.input("B", {K, N}, f16);
  auto C = kb.output("C", {M, N}, f32);
  kb.launch();
  auto mm = [&] {
    auto a1 = alloc_L1("a1", {M, K}, f16);
    auto b1 = alloc_L1("b1", {K, N}, f16);
    auto a0 = alloc_L0A("a0", {M, K}, f16);
    auto b0 = alloc_L0B("b0", {K0, N}, f16);
    auto c0 = alloc_L0C("c0", {M, N}, d == Defect::DtypeMismatch ? f16 : f32);
    copy(A, a1);
    copy(B, b1);
    if (d != Defect::MissingWait) {
      set_flag(Pipe::MTE2, Pipe::MTE1, 0);
      wait_flag(Pipe::MTE2, Pipe::MTE1, 0);
    }
    copy(a1, a0);
    copy(b1, d == Defect::GemmKMismatch ? Tile(b0(slice(0, K), all)) : Tile(b0));
    set_flag(Pipe::MTE1, Pipe::M, 0);
    wait_flag(Pipe::MTE1, Pipe::M, 0);
    gemm(a0, b0, c0);
    set_flag(Pipe::M, Pipe::FIX, 0);
    wait_flag(Pipe::M, Pipe::FIX, d == Defect::MissingSet ? 1 : 0);
    copy(c0, C);
  };
  if (d == Defect::GemmInVectorScope)
    scope_v(mm);
  else
    scope_c(mm);
  fc.program = kb.finish();
  fc.inputs = {{"A", values(r, M * K)}, {"B", values(r, K * N)}};
  const auto &a = fc.inputs["A"], &b = fc.inputs["B"];
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k)
        c[static_cast<size_t>(i * N + j)] +=
            a[static_cast<size_t>(i * K + k)] * b[static_cast<size_t>(k * N + j)];
  fc.expected = {{"C", c}};
  return fc;
}

inline bool cube_defect(Defect d) {
  return d == Defect::GemmNotAligned || d == Defect::GemmKMismatch ||
         d == Defect::GemmInVectorScope;
}

inline Defect choose_defect(Rng& r) {
  if (r.chance(20)) return Defect::Soup;
  if (!r.chance(50)) return Defect::None;
  return static_cast<Defect>(r.range(1, static_cast<int64_t>(Defect::Soup) - 1));
}

/// Random statements over random GM tensors and on-chip buffers: random ranks, dims,
/// dtypes, scopes, slices (constant, loop- and cid-dependent starts), ops, flags and loops.
/// Mostly invalid; the point is that nothing crashes.
inline FuzzCase soup_case(Rng& r) {
  using namespace lang;
  FuzzCase fc;
  fc.defect = Defect::Soup;
  fc.max_cycles = 1e7;
  const std::vector<DType> dts = {f16, f32, f32, i32, bf16, i8};
  const std::vector<int64_t> dims = {1, 16, 16, 32, 32, 48, 64, 128};
  const std::vector<Pipe> pipes = {Pipe::S, Pipe::MTE1, Pipe::MTE2, Pipe::MTE3,
                                   Pipe::M, Pipe::FIX,  Pipe::V};
  auto shape = [&] {
    std::vector<int64_t> sh(static_cast<size_t>(r.range(1, 3)));
    for (auto& x : sh) x = r.pick(dims);
    return sh;
  };
  KernelBuilder kb("fuzz_soup", r.range(1, 3));
  std::vector<Tensor> bufs;
  for (int i = 0, n = static_cast<int>(r.range(1, 3)); i < n; ++i) {
    auto sh = shape();
    int64_t el = 1;
    for (auto x : sh) el *= x;
    DType dt = r.pick(dts);
    if (r.chance(50)) {
      bufs.push_back(kb.input("in" + std::to_string(i), sh, dt));
      fc.inputs["in" + std::to_string(i)] = values(r, el);
    } else {
      bufs.push_back(kb.output("out" + std::to_string(i), sh, dt));
    }
  }
  auto [cid, vid] = kb.launch();
  std::vector<Ex> vars = {Ex(0), cid, vid};
  bool in_cube = false;
  auto start = [&](int64_t dim) -> Ex {
    switch (r.range(0, 3)) {
      case 0:
        return Ex(r.range(0, dim));
      case 1:
        return r.pick(vars) * r.range(0, 16);
      case 2:
        return (r.pick(vars) + r.range(0, 2)) % std::max<int64_t>(dim, 1);
      default:
        return Ex(0);
    }
  };
  auto tile_of = [&](const Tensor& t) -> Tile {
    if (r.chance(40)) return Tile(t);
    std::vector<Index> idx;
    const auto& sh = t.shape();
    size_t rank = sh.size() + (r.chance(5) ? 1 : 0) - (sh.size() > 1 && r.chance(5) ? 1 : 0);
    for (size_t k = 0; k < rank; ++k) {
      int64_t dim = k < sh.size() ? sh[k] : 1;
      if (r.chance(30))
        idx.push_back(all);
      else
        idx.push_back(slice(start(dim), r.chance(80) ? std::max<int64_t>(1, dim / r.range(1, 2))
                                                     : r.range(1, 2 * dim)));
    }
    return t.slice_of(idx);
  };
  std::function<void(int)> stmts = [&](int depth) {
    for (int i = 0, n = static_cast<int>(r.range(1, 6)); i < n; ++i) {
      switch (r.range(0, 11)) {
        case 0: {
          using AllocFn = Tensor (*)(const std::string&, std::vector<int64_t>, DType, SrcLoc);
          const std::vector<AllocFn> any = {alloc_ub, alloc_L1, alloc_L0A, alloc_L0B, alloc_L0C};
          const std::vector<AllocFn> cube = {alloc_L1, alloc_L0A, alloc_L0B, alloc_L0C};
          AllocFn f = r.chance(15) ? r.pick(any) : in_cube ? r.pick(cube) : AllocFn(alloc_ub);
          bufs.push_back(
              f("b" + std::to_string(bufs.size()), shape(), r.pick(dts), SrcLoc::current()));
          break;
        }
        case 1:
        case 2:
          copy(tile_of(r.pick(bufs)), tile_of(r.pick(bufs)));
          break;
        case 3: {
          Tile dst = tile_of(r.pick(bufs)), a = tile_of(r.pick(bufs));
          switch (r.range(0, 5)) {
            case 0:
              tile::add(dst, a, tile_of(r.pick(bufs)));
              break;
            case 1:
              tile::mul(dst, a, r.real(-2, 2));
              break;
            case 2:
              tile::exp(dst, a);
              break;
            case 3:
              tile::cast(dst, a);
              break;
            case 4:
              tile::broadcast(dst, a);
              break;
            default:
              tile::fill(dst, 1.5);
          }
          break;
        }
        case 4:
          reduce_sum(tile_of(r.pick(bufs)), tile_of(r.pick(bufs)),
                     static_cast<int>(r.range(-1, 1)));
          break;
        case 5:
          gemm(tile_of(r.pick(bufs)), tile_of(r.pick(bufs)), tile_of(r.pick(bufs)));
          break;
        case 6: {
          Pipe a = r.pick(pipes), b = r.pick(pipes);
          Ex id = r.chance(80) ? Ex(r.range(0, 8)) : r.pick(vars);
          set_flag(a, b, id);
          if (r.chance(70)) wait_flag(a, b, id);
          break;
        }
        case 7:
          pipe_barrier(r.pick(pipes));
          break;
        case 8:
          if (r.chance(50))
            set_cross_flag(r.pick(pipes), r.range(0, 16));
          else
            wait_cross_flag(r.range(0, 16));
          break;
        case 9:
          if (depth < 3)
            serial(r.range(0, 4), [&](Ex k) {
              vars.push_back(k);
              stmts(depth + 1);
              vars.pop_back();
            });
          break;
        case 10:
          if (depth < 3) if_(r.pick(vars) < r.range(0, 2), [&] { stmts(depth + 1); });
          break;
        default:
          break;
      }
    }
  };
  // Mostly inside scopes (statements outside one are rejected at once).
  for (int i = 0, n = static_cast<int>(r.range(1, 2)); i < n; ++i) {
    if (r.chance(10)) {
      stmts(0);
    } else if (r.chance(50)) {
      in_cube = false;
      scope_v([&] { stmts(1); });
    } else {
      in_cube = true;
      scope_c([&] { stmts(1); });
    }
  }
  fc.program = kb.finish();
  return fc;
}

/// The defect program `seed` carries (known even when building it throws).
inline Defect defect_of(uint64_t seed) {
  Rng r(seed);
  return choose_defect(r);
}

/// Program number `seed`: about half valid, the rest with one defect.
inline FuzzCase generate(uint64_t seed) {
  Rng r(seed);
  Defect d = choose_defect(r);
  if (d == Defect::Soup) return soup_case(r);
  bool cube = cube_defect(d) || ((d == Defect::None || d == Defect::DtypeMismatch ||
                                  d == Defect::MissingWait || d == Defect::MissingSet) &&
                                 r.chance(30));
  return cube ? cube_case(r, d) : vector_case(r, d);
}

enum class Outcome { Ran, Diagnostic, WrongResult, InternalError };

struct FuzzResult {
  Outcome outcome = Outcome::Ran;
  Defect defect = Defect::None;
  std::string kind;  // diagnostic kind ("build" for BuildError)
  std::string message;
};

/// One case end to end, as `tilepipe check` runs it.
inline FuzzResult run_fuzz_case(uint64_t seed, const ChipConfig& chip) {
  FuzzResult res;
  res.defect = defect_of(seed);
  try {
    FuzzCase fc = generate(seed);
    verify_or_throw(fc.program, chip);
    auto lp = lower::lower(fc.program, chip);
    sim::HostData io = fc.inputs;
    sim::SimOptions o;
    o.mode = sim::Mode::Functional;
    o.max_cycles = chip.launch_cycles() + fc.max_cycles;
    o.detect_races = true;
    sim::simulate(lp, chip, &io, o);
    for (const auto& [name, want] : fc.expected) {
      const auto& got = io.at(name);
      for (size_t i = 0; i < want.size(); ++i)
        if (!(std::fabs(got[i] - want[i]) <= 1e-2 + 1e-2 * std::fabs(want[i]))) {
          res.outcome = Outcome::WrongResult;
          res.message = name + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) +
                        ", expected " + std::to_string(want[i]);
          return res;
        }
    }
  } catch (const UserError& e) {
    res.outcome = Outcome::Diagnostic;
    res.kind = e.diagnostics().empty() ? "?" : e.diagnostics().front().kind;
    res.message = e.what();
  } catch (const lang::BuildError& e) {
    res.outcome = Outcome::Diagnostic;
    res.kind = "build";
    res.message = e.loc.str() + ": " + e.message;
  } catch (const std::exception& e) {
    res.outcome = Outcome::InternalError;
    res.message = e.what();
  } catch (...) {
    res.outcome = Outcome::InternalError;
    res.message = "unknown exception";
  }
  return res;
}

}  // namespace tilepipe::fuzz

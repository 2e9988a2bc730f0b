// The simulator through small DSL programs: functional semantics of single ops against
// hand-computed values, timing closed forms built from the chip config, run-time errors
// (deadlock, flag misuse, bounds, budget) and determinism.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/driver.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/numeric.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"

namespace tilepipe {
namespace {

// A contiguous block far above dma.min_burst_bytes: streams at the full rate.
constexpr int64_t kLargeTransfer = 16384;

using namespace lang;

// ---------------------------------------------------------------------------------------
// Helpers

struct Run {
  sim::SimResult res;
  sim::HostData io;
};

/// verify -> lower -> simulate on the a3 chip; `io` holds the inputs and receives every GM
/// tensor after the run.
Run run(const ir::Program& p, sim::HostData io = {}, sim::SimOptions opts = {}) {
  const ChipConfig& chip = testing::a3();
  verify_or_throw(p, chip);
  lower::LoweredProgram low = lower::lower(p, chip);
  Run r;
  r.io = std::move(io);
  r.res = sim::simulate(low, chip, &r.io, opts);
  return r;
}

sim::SimOptions options(sim::Mode mode, double max_cycles = 1e13,
                        sim::Observer* observer = nullptr) {
  sim::SimOptions o;
  o.mode = mode;
  o.max_cycles = max_cycles;
  o.observer = observer;
  return o;
}

Run run_timing(const ir::Program& p) {
  return run(p, {}, options(sim::Mode::Timing));
}

/// Runs `fn` and expects a UserError with a diagnostic of `kind` whose text holds every
/// fragment.
void expect_sim_error(const std::function<void()>& fn, const std::string& kind,
                      const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected a '" << kind << "' error, but the run finished";
  } catch (const UserError& e) {
    const Diagnostic* hit = nullptr;
    for (const auto& d : e.diagnostics())
      if (d.kind == kind && !hit) hit = &d;
    ASSERT_NE(hit, nullptr) << "no '" << kind << "' diagnostic in:\n" << e.what();
    std::string text = hit->str();
    for (const auto& f : fragments)
      EXPECT_NE(text.find(f), std::string::npos) << "missing '" << f << "' in:\n" << text;
  }
}

/// One intra-core handoff: `from` signals, `to` waits (the producer's work is done).
void handoff(Pipe from, Pipe to, int id = 0) {
  set_flag(from, to, id);
  wait_flag(from, to, id);
}

/// `here()` of the next line followed by ':', so "x.cc:4" cannot match "x.cc:42".
std::string next_line(std::source_location l = std::source_location::current()) {
  return ir::Loc::from(l).file + ":" + std::to_string(static_cast<int>(l.line()) + 1) + ":";
}

double pow2(int e) {
  return std::ldexp(1.0, e);
}

const std::vector<double> kA = {1, -2, 3.5, 0.25, 8, -0.5, 6, 10};
const std::vector<double> kB = {2, 4, -1, 0.5, 8, 2, -3, -4};

// ---------------------------------------------------------------------------------------
// Functional semantics

/// X (f32) -> UB f32 -> GM f32 (Y32), and UB f32 -> UB f16 by tile::cast (Y16) and by a
/// UB -> UB copy (Z16).
ir::Program build_round_trip() {
  KernelBuilder k("round_trip", 1);
  auto X = k.input("X", {8}, f32);
  auto Y32 = k.output("Y32", {8}, f32);
  auto Y16 = k.output("Y16", {8}, f16);
  auto Z16 = k.output("Z16", {8}, f16);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {8}, f32);
    auto h = alloc_ub("h", {8}, f16);
    auto g = alloc_ub("g", {8}, f16);
    if_(vid == 0, [&] {
      copy(X, x);
      handoff(Pipe::MTE2, Pipe::V);
      tile::cast(h, x);
      copy(x, g);
      handoff(Pipe::V, Pipe::MTE3);
      copy(x, Y32);
      copy(h, Y16);
      copy(g, Z16);
    });
  });
  return k.finish();
}

TEST(SimFunctional, CopyRoundTripKeepsF32AndCastRoundsToNearestEven) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> x = {1 + pow2(-11),              // tie -> even (1)
                           1 + 3 * pow2(-11),          // tie -> even (1 + 2^-9): rounds up
                           -(1 + pow2(-11)),           // tie, negative -> -1
                           1 + pow2(-11) + pow2(-20),  // above the tie -> up
                           65504,                      // largest f16
                           65520,                      // rounds past the largest -> inf
                           pow2(-24),                  // smallest f16 subnormal
                           pow2(-25)};                 // subnormal tie -> even (0)
  std::vector<double> want16 = {1, 1 + pow2(-9), -1, 1 + pow2(-10), 65504, inf, pow2(-24), 0};
  auto r = run(build_round_trip(), {{"X", x}});
  EXPECT_EQ(r.io.at("Y32"), x);
  EXPECT_EQ(r.io.at("Y16"), want16);
  EXPECT_EQ(r.io.at("Z16"), want16);
}

/// One result row per op: rows 0-5 tile operand, rows 6-11 scalar 2, row 12 adds(3) via an
/// integer expression scalar, row 13 muls by a UB element read by the scalar unit.
ir::Program build_binary_ops() {
  KernelBuilder k("binary", 1);
  auto A = k.input("A", {8}, f32);
  auto B = k.input("B", {8}, f32);
  auto R = k.output("R", {14, 8}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {8}, f32);
    auto b = alloc_ub("b", {8}, f32);
    auto res = alloc_ub("res", {14, 8}, f32);
    if_(vid == 0, [&] {
      copy(A, a);
      copy(B, b);
      set_flag(Pipe::MTE2, Pipe::V, 0);
      set_flag(Pipe::MTE2, Pipe::S, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::S, 0);
      tile::add(res(0, all), a, b);
      tile::sub(res(1, all), a, b);
      tile::mul(res(2, all), a, b);
      tile::div(res(3, all), a, b);
      tile::max(res(4, all), a, b);
      tile::min(res(5, all), a, b);
      tile::add(res(6, all), a, 2.0);
      tile::sub(res(7, all), a, 2.0);
      tile::mul(res(8, all), a, 2.0);
      tile::div(res(9, all), a, 2.0);
      tile::max(res(10, all), a, 2.0);
      tile::min(res(11, all), a, 2.0);
      tile::adds(res(12, all), a, cid + 3);
      tile::muls(res(13, all), a, at(b, {3}));  // b[3] = 0.5
      handoff(Pipe::V, Pipe::MTE3);
      copy(res, R);
    });
  });
  return k.finish();
}

TEST(SimFunctional, BinaryOpsWithTileAndScalarOperandsMatchHandComputedValues) {
  auto r = run(build_binary_ops(), {{"A", kA}, {"B", kB}});
  const std::vector<std::vector<double>> want = {
      {3, 2, 2.5, 0.75, 16, 1.5, 3, 6},            // a + b
      {-1, -6, 4.5, -0.25, 0, -2.5, 9, 14},        // a - b
      {2, -8, -3.5, 0.125, 64, -1, -18, -40},      // a * b
      {0.5, -0.5, -3.5, 0.5, 1, -0.25, -2, -2.5},  // a / b
      {2, 4, 3.5, 0.5, 8, 2, 6, 10},               // max(a, b)
      {1, -2, -1, 0.25, 8, -0.5, -3, -4},          // min(a, b)
      {3, 0, 5.5, 2.25, 10, 1.5, 8, 12},           // a + 2
      {-1, -4, 1.5, -1.75, 6, -2.5, 4, 8},         // a - 2
      {2, -4, 7, 0.5, 16, -1, 12, 20},             // a * 2
      {0.5, -1, 1.75, 0.125, 4, -0.25, 3, 5},      // a / 2
      {2, 2, 3.5, 2, 8, 2, 6, 10},                 // max(a, 2)
      {1, -2, 2, 0.25, 2, -0.5, 2, 2},             // min(a, 2)
      {4, 1, 6.5, 3.25, 11, 2.5, 9, 13},           // a + (cid + 3)
      {0.5, -1, 1.75, 0.125, 4, -0.25, 3, 5}};     // a * b[3]
  const auto& got = r.io.at("R");
  ASSERT_EQ(got.size(), 14u * 8u);
  for (size_t row = 0; row < want.size(); ++row)
    for (size_t c = 0; c < 8; ++c)
      EXPECT_EQ(got[row * 8 + c], want[row][c]) << "row " << row << " col " << c;
}

/// Inputs by reference (SimOptions::raw_inputs, the Python front end's arrays): the bytes
/// of a tensor of the same dtype as they are, another dtype converted as a HostData value
/// would be; a wrong element count is the host-data error.
TEST(SimFunctional, RawInputsAreReadInPlaceOrConvertedAsValuesWouldBe) {
  KernelBuilder k("raw", 1);
  auto X = k.input("X", {16}, f16);
  auto W = k.input("W", {16}, f16);
  auto Y = k.output("Y", {16}, f16);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {16}, f16);
    auto w = alloc_ub("w", {16}, f16);
    if_(vid == 0, [&] {
      copy(X, x);
      copy(W, w);
      handoff(Pipe::MTE2, Pipe::V);
      tile::add(x, x, w);
      handoff(Pipe::V, Pipe::MTE3);
      copy(x, Y);
    });
  });
  ir::Program p = k.finish();
  std::vector<uint16_t> xbits(16);
  std::vector<float> wf(16);
  std::vector<double> xv(16), wv(16);
  for (int i = 0; i < 16; ++i) {
    xv[i] = 0.25 * i - 1.5;
    xbits[i] = float_to_f16(static_cast<float>(xv[i]));
    wf[i] = 1.0f / 3.0f + static_cast<float>(i);  // not a float16: rounded on the way in
    wv[i] = wf[i];
  }
  sim::SimOptions o = options(sim::Mode::Functional);
  o.raw_inputs["X"] = {xbits.data(), ir::DType::F16, 16};
  o.raw_inputs["W"] = {wf.data(), ir::DType::F32, 16};
  auto raw = run(p, {}, o);
  auto values = run(p, {{"X", xv}, {"W", wv}});
  EXPECT_EQ(raw.io.at("Y"), values.io.at("Y"));
  EXPECT_EQ(raw.io.at("Y")[6], 0.0 + f16_to_float(float_to_f16(1.0f / 3.0f + 6.0f)));
  o.raw_inputs["W"].elements = 15;
  try {
    run(p, {}, o);
    FAIL() << "expected a host-data error";
  } catch (const UserError& e) {
    EXPECT_NE(e.diagnostics().front().message.find("host data for 'W' has 15 values; the "
                                                   "tensor has 16"),
              std::string::npos);
  }
}

/// exp of an f32 operand, correctly rounded: computed in double and rounded once (glibc's
/// expf, which the simulator used, is 0.502 ulp: 1.64926004 at 0.500326693, one ulp high).
TEST(SimFunctional, ExpIsCorrectlyRounded) {
  KernelBuilder k("exp", 1);
  auto X = k.input("X", {8}, f32);
  auto Y = k.output("Y", {8}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {8}, f32);
    if_(vid == 0, [&] {
      copy(X, x);
      handoff(Pipe::MTE2, Pipe::V);
      tile::exp(x, x);
      handoff(Pipe::V, Pipe::MTE3);
      copy(x, Y);
    });
  });
  std::vector<double> x = {0, 1, -1, 2, 0.500326693f, -3, 10, -200};
  auto r = run(k.finish(), {{"X", x}});
  const auto& y = r.io.at("Y");
  EXPECT_EQ(y[0], 1.0);
  EXPECT_FLOAT_EQ(y[1], 2.7182817f);
  EXPECT_FLOAT_EQ(y[2], 0.36787945f);
  EXPECT_FLOAT_EQ(y[3], 7.389056f);
  EXPECT_EQ(y[4], 1.64925992f);
  EXPECT_FLOAT_EQ(y[5], 0.049787067f);
  EXPECT_FLOAT_EQ(y[6], 22026.465f);
  EXPECT_EQ(y[7], 0.0);  // underflows f32
}

TEST(SimFunctional, SinCosAndPowAreComputedInF32) {
  KernelBuilder k("trig", 1);
  auto X = k.input("X", {8}, f32);
  auto E = k.input("E", {8}, f32);
  auto S = k.output("S", {8}, f32);
  auto C = k.output("C", {8}, f32);
  auto P = k.output("P", {8}, f32);
  auto Q = k.output("Q", {8}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {8}, f32);
    auto e = alloc_ub("e", {8}, f32);
    auto y = alloc_ub("y", {8}, f32);
    auto z = alloc_ub("z", {8}, f32);
    auto p = alloc_ub("p", {8}, f32);
    auto q = alloc_ub("q", {8}, f32);
    if_(vid == 0, [&] {
      copy(X, x);
      copy(E, e);
      handoff(Pipe::MTE2, Pipe::V);
      tile::sin(y, x);
      tile::cos(z, x);
      tile::pow(p, x, e);
      tile::pow(q, x, 2.0);
      handoff(Pipe::V, Pipe::MTE3);
      copy(y, S);
      copy(z, C);
      copy(p, P);
      copy(q, Q);
    });
  });
  std::vector<double> x = {0, 1, 2, 0.5, 3, 4, 1.5, 10};
  std::vector<double> e = {1, 2, 0.5, -1, 3, -0.5, 2, 0};
  auto r = run(k.finish(), {{"X", x}, {"E", e}});
  for (size_t i = 0; i < x.size(); ++i) {
    float xf = static_cast<float>(x[i]), ef = static_cast<float>(e[i]);
    EXPECT_FLOAT_EQ(r.io.at("S")[i], std::sin(xf)) << i;
    EXPECT_FLOAT_EQ(r.io.at("C")[i], std::cos(xf)) << i;
    EXPECT_FLOAT_EQ(r.io.at("P")[i], std::pow(xf, ef)) << i;
    EXPECT_FLOAT_EQ(r.io.at("Q")[i], xf * xf) << i;
  }
}

/// Reference of the library's Sort: (value, index) pairs, descending, ties by index, the
/// source past `count` padded with -inf up to the next 32-element block.
std::vector<double> sorted_pairs(std::vector<double> v, int64_t count) {
  const int64_t aligned = (count + 31) / 32 * 32;
  for (int64_t i = count; i < aligned; ++i) v[static_cast<size_t>(i)] = -INFINITY;
  std::vector<int64_t> idx(static_cast<size_t>(aligned));
  for (int64_t i = 0; i < aligned; ++i) idx[static_cast<size_t>(i)] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    return v[static_cast<size_t>(a)] > v[static_cast<size_t>(b)];
  });
  std::vector<double> out;
  for (int64_t i : idx) {
    out.push_back(v[static_cast<size_t>(i)]);
    out.push_back(static_cast<double>(i));
  }
  return out;
}

/// sort of 64 keys (40 valid, ties included) into 128 elements, and topk: the first 10 pairs
/// of the same sort into a 20-element tile.
TEST(SimFunctional, SortGivesDescendingValueIndexPairsAndTopkTheirPrefix) {
  KernelBuilder k("sort", 1);
  auto X = k.input("X", {64}, f32);
  auto S = k.output("S", {128}, f32);
  auto K = k.output("K", {20}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {64}, f32);
    auto s = alloc_ub("s", {128}, f32);
    auto t = alloc_ub("t", {20}, f32);
    if_(vid == 0, [&] {
      copy(X, x);
      handoff(Pipe::MTE2, Pipe::V);
      tile::sort(s, x, cid + 40);  // a run-time count
      tile::sort(t, x, 40);
      handoff(Pipe::V, Pipe::MTE3);
      copy(s, S);
      copy(t, K);
    });
  });
  std::vector<double> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>((i * 37) % 23) - 11;
  auto r = run(k.finish(), {{"X", x}});
  auto want = sorted_pairs(x, 40);
  ASSERT_EQ(want.size(), 128u);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r.io.at("S")[i], want[i]) << i;
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(r.io.at("K")[i], want[i]) << i;
  EXPECT_EQ(r.io.at("S")[2 * 40], -INFINITY);  // the padding sorts last, indices 40..63
  EXPECT_EQ(r.io.at("S")[2 * 40 + 1], 40.0);
}

TEST(SimFunctional, MergeSortMergesDescendingPairListsEarlierListFirst) {
  KernelBuilder k("merge", 1);
  auto A = k.input("A", {6}, f32);
  auto B = k.input("B", {4}, f32);
  auto C = k.input("C", {4}, f32);
  auto M = k.output("M", {14}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {8}, f32);
    auto b = alloc_ub("b", {8}, f32);
    auto c = alloc_ub("c", {8}, f32);
    auto m = alloc_ub("m", {16}, f32);
    if_(vid == 0, [&] {
      copy(A, a(slice(0, 6)));
      copy(B, b(slice(0, 4)));
      copy(C, c(slice(0, 4)));
      handoff(Pipe::MTE2, Pipe::V);
      tile::merge_sort(m(slice(0, 14)), {a(slice(0, 6)), b(slice(0, 4)), c(slice(0, 4))});
      handoff(Pipe::V, Pipe::MTE3);
      copy(m(slice(0, 14)), M);
    });
  });
  auto r =
      run(k.finish(), {{"A", {9, 0, 5, 1, 2, 2}}, {"B", {7, 10, 5, 11}}, {"C", {8, 20, -1, 21}}});
  std::vector<double> want = {9, 0, 8, 20, 7, 10, 5, 1, 5, 11, 2, 2, -1, 21};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r.io.at("M")[i], want[i]) << i;
}

/// Sort32: each block of 32 keys descending (ties by position) with its u32 index, as 8-byte
/// pairs: f32 (key, index bits), f16 (key, 0, low and high 16 index bits).
TEST(SimFunctional, Sort32PairsEachBlockWithItsIndexBits) {
  KernelBuilder k("sort32", 1);
  auto K32 = k.input("K32", {64}, f32);
  auto K16 = k.input("K16", {64}, f16);
  auto I = k.input("I", {64}, u32);
  auto O32 = k.output("O32", {128}, f32);
  auto O16 = k.output("O16", {256}, f16);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto k32 = alloc_ub("k32", {64}, f32);
    auto k16 = alloc_ub("k16", {64}, f16);
    auto idx = alloc_ub("idx", {64}, u32);
    auto o32 = alloc_ub("o32", {128}, f32);
    auto o16 = alloc_ub("o16", {256}, f16);
    if_(vid == 0, [&] {
      copy(K32, k32);
      copy(K16, k16);
      copy(I, idx);
      handoff(Pipe::MTE2, Pipe::V);
      tile::sort32(o32, k32, idx);
      tile::sort32(o16, k16, idx);
      handoff(Pipe::V, Pipe::MTE3);
      copy(o32, O32);
      copy(o16, O16);
    });
  });
  std::vector<double> keys(64), ids(64);
  for (int i = 0; i < 64; ++i) {
    keys[static_cast<size_t>(i)] = (i * 37) % 23;         // repeats: ties keep position order
    ids[static_cast<size_t>(i)] = 65536.0 * (i % 3) + i;  // uses both halves' bits
  }
  auto r = run(k.finish(), {{"K32", keys}, {"K16", keys}, {"I", ids}});
  for (int b = 0; b < 2; ++b) {
    std::vector<int> order(32);
    for (int i = 0; i < 32; ++i) order[static_cast<size_t>(i)] = b * 32 + i;
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
      return keys[static_cast<size_t>(x)] > keys[static_cast<size_t>(y)];
    });
    for (int e = 0; e < 32; ++e) {
      const int i = order[static_cast<size_t>(e)], p = b * 32 + e;
      const auto bits = static_cast<uint32_t>(ids[static_cast<size_t>(i)]);
      EXPECT_EQ(r.io.at("O32")[static_cast<size_t>(2 * p)], keys[static_cast<size_t>(i)]) << p;
      EXPECT_EQ(r.io.at("O32")[static_cast<size_t>(2 * p + 1)], std::bit_cast<float>(bits)) << p;
      EXPECT_EQ(r.io.at("O16")[static_cast<size_t>(4 * p)], keys[static_cast<size_t>(i)]) << p;
      EXPECT_EQ(r.io.at("O16")[static_cast<size_t>(4 * p + 1)], 0.0) << p;
      EXPECT_EQ(r.io.at("O16")[static_cast<size_t>(4 * p + 2)],
                f16_to_float(static_cast<uint16_t>(bits & 0xffff)))
          << p;
      EXPECT_EQ(r.io.at("O16")[static_cast<size_t>(4 * p + 3)],
                f16_to_float(static_cast<uint16_t>(bits >> 16)))
          << p;
    }
  }
}

// T.reinterpretcast: the bytes of an i32 tile read as f32, at no cost.
TEST(SimFunctional, ReinterpretKeepsTheBytes) {
  KernelBuilder k("bits", 1);
  auto X = k.input("X", {8}, i32);
  auto Y = k.output("Y", {8}, f32);
  k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {8}, i32);
    auto y = alloc_ub("y", {8}, f32);
    copy(X, x);
    handoff(Pipe::MTE2, Pipe::V);
    tile::reinterpret(y, x);
    handoff(Pipe::V, Pipe::MTE3);
    copy(y, Y);
  });
  std::vector<double> x = {1065353216, -1082130432, 0, 1078530011, 2139095040, 1, 8, 1};
  auto r = run(k.finish(), {{"X", x}});
  const std::vector<double> want = {
      1.0,           -1.0, 0.0, 3.14159274101257324, INFINITY, 1.40129846e-45, 1.12103877e-44,
      1.40129846e-45};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_FLOAT_EQ(static_cast<float>(r.io.at("Y")[i]), static_cast<float>(want[i])) << i;
}

/// Every built-in pattern on 16 elements, and CreateVecIndex / Round / GatherB on the same
/// run.
TEST(SimFunctional, GatherMaskArangeRoundAndGatherb) {
  KernelBuilder k("masks", 2);
  auto X = k.input("X", {16}, i32);
  auto F = k.input("F", {8}, f32);
  auto O = k.input("O", {8}, u32);
  static const char* const kNames[] = {"G1", "G2", "G3", "G4", "G5", "G6", "G7"};
  std::vector<Tensor> G;
  for (const char* name : kNames) G.push_back(k.output(name, {16}, i32));
  auto A = k.output("A", {2, 16}, i16);
  auto R = k.output("R", {8}, f32);
  auto B = k.output("B", {128}, i32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {16}, i32);
    auto g = alloc_ub("g", {16}, i32);
    auto a = alloc_ub("a", {16}, i16);
    auto f = alloc_ub("f", {8}, f32);
    auto o = alloc_ub("o", {8}, u32);
    auto t = alloc_ub("t", {256}, i32);
    auto b = alloc_ub("b", {128}, i32);
    if_(vid == 0, [&] {
      copy(X, x);
      copy(F, f);
      copy(O, o);
      handoff(Pipe::MTE2, Pipe::V);
      tile::arange(a, cid * 100 - 3);
      tile::round(f, f);
      tile::arange(t, 0);
      tile::fill(b, -1.0);
      tile::gatherb(b, t, o, 1, 2, 0);  // blocks 0, 2, .., 14 of b
      handoff(Pipe::V, Pipe::MTE3);
      copy(a, A(cid, all));
      if_(cid == 0, [&] {
        copy(f, R);
        copy(b, B);
        for (int p = 1; p <= 7; ++p) {
          tile::fill(g, -1.0);
          tile::gather_mask(g, x, p);
          handoff(Pipe::V, Pipe::MTE3);
          copy(g, G[static_cast<size_t>(p - 1)]);
          handoff(Pipe::MTE3, Pipe::V);
        }
      });
    });
  });
  std::vector<double> x(16), o = {0, 992, 64, 32, 128, 96, 480, 512};
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(100 + i);
  auto r =
      run(k.finish(), {{"X", x}, {"F", {0.5, 1.5, 2.5, -0.5, -1.5, 2.4999, -2.6, 7}}, {"O", o}});
  for (int p = 1; p <= 7; ++p) {
    std::vector<double> want;
    for (int64_t i = 0; i < 16; ++i)
      if (ir::gather_mask_keeps(p, i)) want.push_back(x[static_cast<size_t>(i)]);
    while (want.size() < 16) want.push_back(-1);  // the rest of g is kept
    EXPECT_EQ(r.io.at(kNames[p - 1]), want) << "pattern " << p;
  }
  EXPECT_EQ(r.io.at("G1")[1], 102.0);  // P0101 keeps the even positions
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 16; ++i)
      EXPECT_EQ(r.io.at("A")[c * 16 + i], static_cast<double>(c * 100 - 3 + i));
  EXPECT_EQ(r.io.at("R"), (std::vector<double>{1, 2, 3, -1, -2, 2, -3, 7}));
  for (int j = 0; j < 8; ++j)
    for (int e = 0; e < 8; ++e) {
      EXPECT_EQ(r.io.at("B")[(2 * j) * 8 + e], o[static_cast<size_t>(j)] / 4 + e) << j;
      EXPECT_EQ(r.io.at("B")[(2 * j + 1) * 8 + e], -1.0) << j;  // skipped by the stride
    }
}

/// Every block adds its tile into the same GM rows: the values add up, and the race
/// detector accepts concurrent atomic adds but reports a plain write against them.
ir::Program build_atomic(bool plain_write) {
  KernelBuilder k("atomic", 4);
  auto C = k.output("C", {2, 32}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto u = alloc_ub("u", {2, 32}, f32);
    tile::fill(u, cid + 1);
    handoff(Pipe::V, Pipe::MTE3);
    if (plain_write) if_(cid == 3, [&] { copy(u, C); });
    copy(u, C, {.transpose = false, .pad_value = std::nullopt, .atomic_add = true});
  });
  return k.finish();
}

TEST(SimFunctional, AtomicAddsFromEveryCoreAccumulateWithoutARace) {
  sim::SimOptions o;
  o.detect_races = true;
  auto r = run(build_atomic(false), {{"C", std::vector<double>(64, 0.5)}}, o);
  // 4 blocks x 2 AIVs add cid + 1: 2 * (1 + 2 + 3 + 4) = 20 onto the 0.5 already there.
  EXPECT_EQ(r.io.at("C"), std::vector<double>(64, 20.5));
  expect_sim_error([&] { run(build_atomic(true), {}, o); }, "race",
                   {"data race on 'C'", "atomically adds to", "writes"});
}

/// Both AIVs of an AI core write the same GM rows: a race only when the values differ (the
/// memory ends the same in either order when they do not; kernels that leave vid unused
/// rely on it). Functional runs decide by the values; timing runs, which have none, report.
ir::Program both_aivs_write(bool by_vid_value) {
  KernelBuilder k("both_aivs", 1);
  auto Y = k.output("Y", {64}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto y = alloc_ub("y", {64}, f32);
    tile::fill(y, by_vid_value ? Ex(vid) + 1 : Ex(7));
    handoff(Pipe::V, Pipe::MTE3);
    copy(y, Y);
  });
  return k.finish();
}

TEST(SimFunctional, TwoCoresWritingTheSameValuesAreNoRaceButDifferentValuesAre) {
  sim::SimOptions o;
  o.detect_races = true;
  auto r = run(both_aivs_write(false), {}, o);
  EXPECT_EQ(r.io.at("Y"), std::vector<double>(64, 7.0));
  expect_sim_error([&] { run(both_aivs_write(true), {}, o); }, "race",
                   {"data race on 'Y' (different cores)", "AIV0 MTE3 writes", "AIV1 MTE3 writes"});
  sim::SimOptions t = options(sim::Mode::Timing);
  t.detect_races = true;
  expect_sim_error([&] { run(both_aivs_write(false), {}, t); }, "race", {"data race on 'Y'"});
}

/// Integer vector arithmetic wraps in the element's width (an LCG step overflows int32);
/// only conversions saturate.
TEST(SimFunctional, IntegerArithmeticWrapsInTheElementWidth) {
  KernelBuilder k("wrap", 1);
  auto X = k.input("X", {8}, i32);
  auto Y = k.output("Y", {8}, i32);
  auto Z = k.output("Z", {16}, i16);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {8}, i32);
    auto z = alloc_ub("z", {16}, i16);
    if_(vid == 0, [&] {
      copy(X, x);
      handoff(Pipe::MTE2, Pipe::V);
      tile::mul(x, x, 1103515245);
      tile::add(x, x, 12345);
      tile::arange(z, 32760);
      tile::add(z, z, 1);
      handoff(Pipe::V, Pipe::MTE3);
      copy(x, Y);
      copy(z, Z);
    });
  });
  std::vector<double> x = {0, 1, 2, 3, -1, 1000, 123456789, -2147483647};
  auto r = run(k.finish(), {{"X", x}});
  for (size_t i = 0; i < x.size(); ++i) {
    const auto v = static_cast<uint32_t>(static_cast<int64_t>(x[i])) * 1103515245u + 12345u;
    EXPECT_EQ(r.io.at("Y")[i], static_cast<double>(static_cast<int32_t>(v))) << i;
  }
  EXPECT_EQ(r.io.at("Z")[7], -32768.0);  // 32767 + 1 wraps
}

TEST(SimFunctional, AxpyAddsScaledSourceIntoDestination) {
  KernelBuilder k("axpy", 1);
  auto A = k.input("A", {8}, f32);
  auto B = k.input("B", {8}, f32);
  auto Y = k.output("Y", {8}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {8}, f32);
    auto b = alloc_ub("b", {8}, f32);
    if_(vid == 0, [&] {
      copy(A, a);
      copy(B, b);
      handoff(Pipe::MTE2, Pipe::V);
      tile::axpy(b, a, 0.5);  // b = 0.5 * a + b
      handoff(Pipe::V, Pipe::MTE3);
      copy(b, Y);
    });
  });
  auto r = run(k.finish(), {{"A", kA}, {"B", kB}});
  EXPECT_EQ(r.io.at("Y"), (std::vector<double>{2.5, 3, 0.75, 0.625, 12, 1.75, 0, 1}));
}

/// Broadcasts of [R,1] (per row) and [1,C] (per column) into [R,C], for a 4x8 and an
/// ambiguous square 8x8 destination.
ir::Program build_broadcast() {
  KernelBuilder k("broadcast", 1);
  auto Col = k.input("Col", {8, 1}, f32);  // one value per row
  auto Row = k.input("Row", {1, 8}, f32);  // one value per column
  auto PerRow = k.output("PerRow", {4, 8}, f32);
  auto PerCol = k.output("PerCol", {4, 8}, f32);
  auto SqRow = k.output("SqRow", {8, 8}, f32);
  auto SqCol = k.output("SqCol", {8, 8}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto col = alloc_ub("col", {8, 1}, f32);
    auto row = alloc_ub("row", {1, 8}, f32);
    auto pr = alloc_ub("pr", {4, 8}, f32);
    auto pc = alloc_ub("pc", {4, 8}, f32);
    auto sr = alloc_ub("sr", {8, 8}, f32);
    auto sc = alloc_ub("sc", {8, 8}, f32);
    if_(vid == 0, [&] {
      copy(Col, col);
      copy(Row, row);
      handoff(Pipe::MTE2, Pipe::V);
      tile::broadcast(pr, col(rows(0, 4), all));
      tile::broadcast(pc, row);
      tile::broadcast(sr, col);
      tile::broadcast(sc, row);
      handoff(Pipe::V, Pipe::MTE3);
      copy(pr, PerRow);
      copy(pc, PerCol);
      copy(sr, SqRow);
      copy(sc, SqCol);
    });
  });
  return k.finish();
}

TEST(SimFunctional, BroadcastRepeatsARowVectorPerRowAndAColumnVectorPerColumn) {
  std::vector<double> col = {10, 20, 30, 40, 50, 60, 70, 80};
  std::vector<double> row = {1, 2, 3, 4, 5, 6, 7, 8};
  auto r = run(build_broadcast(), {{"Col", col}, {"Row", row}});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(r.io.at("PerRow")[i * 8 + j], col[i]) << i << "," << j;
      EXPECT_EQ(r.io.at("PerCol")[i * 8 + j], row[j]) << i << "," << j;
    }
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(r.io.at("SqRow")[i * 8 + j], col[i]) << i << "," << j;
      EXPECT_EQ(r.io.at("SqCol")[i * 8 + j], row[j]) << i << "," << j;
    }
}

/// src[r][c] = (c - 5) * (r + 1) on [4, 8]: row max 2(r+1), row sum -12(r+1); column c max
/// 4(c-5) for c >= 5 else (c-5), column sum 10(c-5).
std::vector<double> reduce_input() {
  std::vector<double> v;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) v.push_back((c - 5) * (r + 1));
  return v;
}

ir::Program build_reduce(bool clear) {
  KernelBuilder k("reduce", 1);
  auto X = k.input("X", {4, 8}, f32);
  auto RowMax = k.output("RowMax", {4, 1}, f32);
  auto RowSum = k.output("RowSum", {4, 1}, f32);
  auto ColMax = k.output("ColMax", {1, 8}, f32);
  auto ColSum = k.output("ColSum", {1, 8}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {4, 8}, f32);
    auto rm = alloc_ub("rm", {4, 1}, f32);
    auto rs = alloc_ub("rs", {4, 1}, f32);
    auto cm = alloc_ub("cm", {1, 8}, f32);
    auto cs = alloc_ub("cs", {1, 8}, f32);
    if_(vid == 0, [&] {
      copy(X, x);
      handoff(Pipe::MTE2, Pipe::V);
      // Previous contents, merged when clear=false.
      tile::fill(rm, 3.0);
      tile::fill(rs, 1.0);
      tile::fill(cm, 3.0);
      tile::fill(cs, 1.0);
      reduce_max(x, rm, -1, clear);
      reduce_sum(x, rs, -1, clear);
      reduce_max(x, cm, 0, clear);
      reduce_sum(x, cs, 0, clear);
      handoff(Pipe::V, Pipe::MTE3);
      copy(rm, RowMax);
      copy(rs, RowSum);
      copy(cm, ColMax);
      copy(cs, ColSum);
    });
  });
  return k.finish();
}

TEST(SimFunctional, ReduceMaxAndSumPerRowAndAlongDim0) {
  auto r = run(build_reduce(/*clear=*/true), {{"X", reduce_input()}});
  EXPECT_EQ(r.io.at("RowMax"), (std::vector<double>{2, 4, 6, 8}));
  EXPECT_EQ(r.io.at("RowSum"), (std::vector<double>{-12, -24, -36, -48}));
  EXPECT_EQ(r.io.at("ColMax"), (std::vector<double>{-5, -4, -3, -2, -1, 0, 4, 8}));
  EXPECT_EQ(r.io.at("ColSum"), (std::vector<double>{-50, -40, -30, -20, -10, 0, 10, 20}));
}

TEST(SimFunctional, ReduceWithClearFalseMergesIntoDestination) {
  auto r = run(build_reduce(/*clear=*/false), {{"X", reduce_input()}});
  EXPECT_EQ(r.io.at("RowMax"), (std::vector<double>{3, 4, 6, 8}));          // max(3, row max)
  EXPECT_EQ(r.io.at("RowSum"), (std::vector<double>{-11, -23, -35, -47}));  // 1 + row sum
  EXPECT_EQ(r.io.at("ColMax"), (std::vector<double>{3, 3, 3, 3, 3, 3, 4, 8}));
  EXPECT_EQ(r.io.at("ColSum"), (std::vector<double>{-49, -39, -29, -19, -9, 1, 11, 21}));
}

TEST(SimFunctional, CompareMakesAMaskAndSelectPicksByIt) {
  KernelBuilder k("cmpsel", 1);
  auto A = k.input("A", {8}, f32);
  auto B = k.input("B", {8}, f32);
  auto Gt = k.output("Gt", {8}, f32);
  auto Eq = k.output("Eq", {8}, f32);
  auto Le2 = k.output("Le2", {8}, f32);
  auto SelTile = k.output("SelTile", {8}, f32);
  auto SelScalar = k.output("SelScalar", {8}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {8}, f32);
    auto b = alloc_ub("b", {8}, f32);
    auto gt = alloc_ub("gt", {8}, f32);
    auto eq = alloc_ub("eq", {8}, f32);
    auto le = alloc_ub("le", {8}, f32);
    auto s1 = alloc_ub("s1", {8}, f32);
    auto s2 = alloc_ub("s2", {8}, f32);
    if_(vid == 0, [&] {
      copy(A, a);
      copy(B, b);
      handoff(Pipe::MTE2, Pipe::V);
      tile::compare(gt, a, b, CmpMode::GT);
      tile::compare(eq, a, b, CmpMode::EQ);
      tile::compare(le, a, 2.0, CmpMode::LE);
      tile::select(s1, gt, a, b);
      tile::select(s2, le, a, -1.0);
      handoff(Pipe::V, Pipe::MTE3);
      copy(gt, Gt);
      copy(eq, Eq);
      copy(le, Le2);
      copy(s1, SelTile);
      copy(s2, SelScalar);
    });
  });
  auto r = run(k.finish(), {{"A", kA}, {"B", kB}});
  EXPECT_EQ(r.io.at("Gt"), (std::vector<double>{0, 0, 1, 0, 0, 0, 1, 1}));
  EXPECT_EQ(r.io.at("Eq"), (std::vector<double>{0, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(r.io.at("Le2"), (std::vector<double>{1, 1, 0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(r.io.at("SelTile"), (std::vector<double>{2, 4, 3.5, 0.5, 8, 2, 6, 10}));
  EXPECT_EQ(r.io.at("SelScalar"), (std::vector<double>{1, -2, -1, 0.25, -1, -0.5, -1, -1}));
}

/// The original's bit masks: a u8 / i8 compare destination with one eighth of the lanes
/// holds bit k of byte j = lane 8 j + k; select reads such a mask.
TEST(SimFunctional, CompareIntoABitMaskPacksLanesAndSelectReadsTheBits) {
  constexpr int64_t n = 64;
  KernelBuilder k("cmpbits", 1);
  auto A = k.input("A", {n}, f32);
  auto B = k.input("B", {n}, f32);
  auto M = k.output("M", {n / 8}, u8);
  auto Mi = k.output("Mi", {n / 8}, i8);
  auto S = k.output("S", {n}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {n}, f32);
    auto b = alloc_ub("b", {n}, f32);
    auto m = alloc_ub("m", {n / 8}, u8);
    auto mi = alloc_ub("mi", {n / 8}, i8);
    auto s = alloc_ub("s", {n}, f32);
    if_(vid == 0, [&] {
      copy(A, a);
      copy(B, b);
      handoff(Pipe::MTE2, Pipe::V);
      tile::compare(m, a, b, CmpMode::LT);
      tile::compare(mi, a, 0.0, CmpMode::GE);
      tile::select(s, m, a, -1.0);
      handoff(Pipe::V, Pipe::MTE3);
      copy(m, M);
      copy(mi, Mi);
      copy(s, S);
    });
  });
  std::vector<double> a(n), b(n), want_m(n / 8, 0), want_mi(n / 8, 0), want_s(n);
  for (int64_t i = 0; i < n; ++i) {
    a[static_cast<size_t>(i)] = static_cast<double>((i * 7) % 11) - 5;
    b[static_cast<size_t>(i)] = static_cast<double>((i * 3) % 5) - 2;
  }
  for (int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<size_t>(i), j = static_cast<size_t>(i / 8);
    const int bit = 1 << (i % 8);
    if (a[u] < b[u]) want_m[j] += bit;
    if (a[u] >= 0) want_mi[j] += bit;
    want_s[u] = a[u] < b[u] ? a[u] : -1;
  }
  for (auto& v : want_mi) v = v >= 128 ? v - 256 : v;  // int8 bytes
  auto r = run(k.finish(), {{"A", a}, {"B", b}});
  EXPECT_EQ(r.io.at("M"), want_m);
  EXPECT_EQ(r.io.at("Mi"), want_mi);
  EXPECT_EQ(r.io.at("S"), want_s);
}

TEST(SimFunctional, FloatToIntCastRoundsByItsModeAndAConvertingCopyToNearestEven) {
  const std::vector<double> x = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.7, -3.7};
  KernelBuilder k("castround", 1);
  auto X = k.input("X", {8}, f32);
  std::vector<Tensor> outs;
  for (int m = 0; m <= 4; ++m) outs.push_back(k.output(fmt::format("R{}", m), {8}, i32));
  auto C = k.output("C", {8}, i32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto xu = alloc_ub("x", {8}, f32);
    std::vector<Tile> rs;
    for (int m = 0; m <= 4; ++m) rs.push_back(alloc_ub(fmt::format("r{}", m), {8}, i32));
    auto c = alloc_ub("c", {8}, i32);
    if_(vid == 0, [&] {
      copy(X, xu);
      handoff(Pipe::MTE2, Pipe::V);
      for (int m = 0; m <= 4; ++m)
        tile::cast(rs[static_cast<size_t>(m)], xu, static_cast<ir::CastRound>(m));
      copy(xu, c);
      handoff(Pipe::V, Pipe::MTE3);
      for (int m = 0; m <= 4; ++m) copy(rs[static_cast<size_t>(m)], outs[static_cast<size_t>(m)]);
      copy(c, C);
    });
  });
  auto r = run(k.finish(), {{"X", x}});
  const std::vector<double> rint = {-2, -2, -0, 0, 2, 2, 4, -4};
  EXPECT_EQ(r.io.at("R0"), rint);
  EXPECT_EQ(r.io.at("R1"), (std::vector<double>{-3, -2, -1, 0, 1, 2, 3, -4}));
  EXPECT_EQ(r.io.at("R2"), (std::vector<double>{-2, -1, -0, 1, 2, 3, 4, -3}));
  EXPECT_EQ(r.io.at("R3"), (std::vector<double>{-3, -2, -1, 1, 2, 3, 4, -4}));
  EXPECT_EQ(r.io.at("R4"), (std::vector<double>{-2, -1, -0, 0, 1, 2, 3, -3}));
  EXPECT_EQ(r.io.at("C"), rint);
}

/// i32 offsets count elements; u32 ones bytes from the source's start (the hardware's
/// Gather), a partial element rounding down.
TEST(SimFunctional, GatherReadsSourceAtI32ElementOrU32ByteOffsets) {
  KernelBuilder k("gather", 1);
  auto A = k.input("A", {8}, f32);
  auto Off = k.input("Off", {8}, i32);
  auto Bytes = k.input("Bytes", {8}, u32);
  auto Y = k.output("Y", {8}, f32);
  auto Z = k.output("Z", {8}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {8}, f32);
    auto off = alloc_ub("off", {8}, i32);
    auto bytes = alloc_ub("bytes", {8}, u32);
    auto y = alloc_ub("y", {8}, f32);
    auto z = alloc_ub("z", {8}, f32);
    if_(vid == 0, [&] {
      copy(A, a);
      copy(Off, off);
      copy(Bytes, bytes);
      handoff(Pipe::MTE2, Pipe::V);
      tile::gather(y, a, off);
      tile::gather(z, a, bytes);
      handoff(Pipe::V, Pipe::MTE3);
      copy(y, Y);
      copy(z, Z);
    });
  });
  auto r =
      run(k.finish(),
          {{"A", kA}, {"Off", {7, 0, 3, 3, 1, 6, 2, 5}}, {"Bytes", {28, 0, 12, 13, 4, 24, 8, 20}}});
  const std::vector<double> want = {10, 1, 0.25, 0.25, -2, 6, 3.5, -0.5};
  EXPECT_EQ(r.io.at("Y"), want);
  EXPECT_EQ(r.io.at("Z"), want);
}

TEST(SimFunctional, FillWritesOnlyItsSliceAndRoundsToTheDestinationType) {
  KernelBuilder k("fill", 1);
  auto Y = k.output("Y", {4, 8}, f32);
  auto H = k.output("H", {16}, f16);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto y = alloc_ub("y", {4, 8}, f32);
    auto h = alloc_ub("h", {16}, f16);
    if_(vid == 0, [&] {
      tile::fill(y, -2.25);
      tile::fill(y(rows(1, 2), all), 5.0);
      tile::fill(h, 1 + 3 * pow2(-11));
      handoff(Pipe::V, Pipe::MTE3);
      copy(y, Y);
      copy(h, H);
    });
  });
  auto r = run(k.finish());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j)
      EXPECT_EQ(r.io.at("Y")[i * 8 + j], (i == 1 || i == 2) ? 5.0 : -2.25) << i << "," << j;
  EXPECT_EQ(r.io.at("H"), std::vector<double>(16, 1 + pow2(-9)));
}

/// C = A x B^T through L1 / L0A / L0B / L0C with B stored [N, K]; a second mmad with
/// init=false accumulates into the first when `accumulate`.
/// The Cube's arithmetic written out: per fractal of K, an f32 FMA chain from 0 in K order,
/// then one f32 add into C.
std::vector<float> cube_chain(int64_t m, int64_t n, int64_t k, int64_t kf,
                              const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> c(static_cast<size_t>(m * n), 0.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k0 = 0; k0 < k; k0 += kf) {
        float acc = 0;
        for (int64_t kk = k0; kk < std::min(k, k0 + kf); ++kk)
          acc =
              std::fma(a[static_cast<size_t>(i * k + kk)], b[static_cast<size_t>(kk * n + j)], acc);
        float& cij = c[static_cast<size_t>(i * n + j)];
        cij = k0 == 0 ? acc : cij + acc;
      }
  return c;
}

TEST(CubeArithmetic, OneFractalOfKAtATimeWhateverTheSplitAlongK) {
  const int64_t m = 37, n = 70, k = 96;  // edges of every BLAS register tile
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
  uint32_t s = 7;
  auto fp16ish = [&] {  // 11-bit values, as float16 holds: products are exact, sums are not
    s = s * 1664525u + 1013904223u;
    return std::ldexp(static_cast<float>(static_cast<int32_t>(s >> 21) - 1024),
                      -8 - static_cast<int>((s >> 8) & 7u));
  };
  for (auto& x : a) x = fp16ish();
  for (auto& x : b) x = fp16ish();
  const int64_t kf = sim::cube_k_fractal(ir::DType::F16);
  ASSERT_EQ(kf, 16);
  EXPECT_EQ(sim::cube_k_fractal(ir::DType::F32), 8);
  EXPECT_EQ(sim::cube_k_fractal(ir::DType::I8), 32);
  std::vector<float> whole(static_cast<size_t>(m * n)), split(whole.size());
  sim::cube_matmul(m, n, k, kf, a.data(), b.data(), whole.data(), false);
  EXPECT_EQ(whole, cube_chain(m, n, k, kf, a, b));
  // the same product as a kernel's K loop of three mmads (init on the first)
  std::vector<float> ak(static_cast<size_t>(m * 32)), bk(static_cast<size_t>(32 * n));
  for (int64_t step = 0; step < 3; ++step) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t kk = 0; kk < 32; ++kk)
        ak[static_cast<size_t>(i * 32 + kk)] = a[static_cast<size_t>(i * k + step * 32 + kk)];
    std::copy_n(b.begin() + step * 32 * n, 32 * n, bk.begin());
    sim::cube_matmul(m, n, 32, kf, ak.data(), bk.data(), split.data(), step > 0);
  }
  EXPECT_EQ(split, whole);
  // a plain f32 sum in another order differs somewhere: the test can tell them apart
  std::vector<float> plain(whole.size(), 0.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t kk = k - 1; kk >= 0; --kk)
        plain[static_cast<size_t>(i * n + j)] +=
            a[static_cast<size_t>(i * k + kk)] * b[static_cast<size_t>(kk * n + j)];
  EXPECT_NE(plain, whole);
}

ir::Program build_gemm_tb(bool accumulate) {
  KernelBuilder k("gemm_tb", 1);
  auto A = k.input("A", {16, 32}, f16);
  auto Bt = k.input("Bt", {16, 32}, f16);
  auto C = k.output("C", {16, 16}, f32);
  auto C16 = k.output("C16", {16, 16}, f16);
  scope_c([&] {
    auto a1 = alloc_L1("a1", {16, 32}, f16);
    auto b1 = alloc_L1("b1", {16, 32}, f16);
    auto a0 = alloc_L0A("a0", {16, 32}, f16);
    auto b0 = alloc_L0B("b0", {16, 32}, f16);
    auto c0 = alloc_L0C("c0", {16, 16}, f32);
    copy(A, a1);
    copy(Bt, b1);
    handoff(Pipe::MTE2, Pipe::MTE1);
    copy(a1, a0);
    copy(b1, b0);
    handoff(Pipe::MTE1, Pipe::M);
    gemm(a0, b0, c0, {.transpose_b = true});
    if (accumulate) gemm(a0, b0, c0, {.transpose_b = true, .init = false});
    handoff(Pipe::M, Pipe::FIX);
    copy(c0, C);
    copy(c0, C16);  // FIX casts f32 -> f16
  });
  return k.finish();
}

/// C = A x B^T with K=256 two ways: B [N, K] in L0B read transposed by the gemm, or loaded
/// transposed into a [K, N] L0B and multiplied plainly (what `tilepipe emit` writes).
ir::Program build_gemm_transposed_two_ways() {
  KernelBuilder k("gemm_2ways", 1);
  auto A = k.input("A", {32, 256}, f16);
  auto Bt = k.input("Bt", {16, 256}, f16);
  auto C1 = k.output("C1", {32, 16}, f32);
  auto C2 = k.output("C2", {32, 16}, f32);
  scope_c([&] {
    auto a1 = alloc_L1("a1", {32, 256}, f16);
    auto b1 = alloc_L1("b1", {16, 256}, f16);
    auto a0 = alloc_L0A("a0", {32, 256}, f16);
    auto bt0 = alloc_L0B("bt0", {16, 256}, f16);
    auto b0 = alloc_L0B("b0", {256, 16}, f16);
    auto c1 = alloc_L0C("c1", {32, 16}, f32);
    auto c2 = alloc_L0C("c2", {32, 16}, f32);
    copy(A, a1);
    copy(Bt, b1);
    handoff(Pipe::MTE2, Pipe::MTE1);
    copy(a1, a0);
    copy(b1, bt0);
    copy(b1, b0, {.transpose = true, .pad_value = std::nullopt});
    handoff(Pipe::MTE1, Pipe::M);
    gemm(a0, bt0, c1, {.transpose_b = true});
    gemm(a0, b0, c2);
    handoff(Pipe::M, Pipe::FIX);
    copy(c1, C1);
    copy(c2, C2);
  });
  return k.finish();
}

TEST(SimFunctional, TransposedOperandAndTransposingLoadGiveTheSameBits) {
  std::vector<double> a(32 * 256), bt(16 * 256);
  uint32_t x = 12345;
  auto next = [&] {  // values whose f32 sums depend on the summation order
    x = x * 1664525u + 1013904223u;
    return static_cast<double>(static_cast<int>(x >> 20) - 2048) / 97.0;
  };
  for (auto& v : a) v = next();
  for (auto& v : bt) v = next();
  auto r = run(build_gemm_transposed_two_ways(), {{"A", a}, {"Bt", bt}});
  EXPECT_EQ(r.io.at("C1"), r.io.at("C2"));
}

std::vector<double> gemm_a() {
  std::vector<double> a;
  for (int i = 0; i < 16; ++i)
    for (int kk = 0; kk < 32; ++kk) a.push_back((i + kk) % 5 - 2);
  return a;
}
std::vector<double> gemm_bt() {
  std::vector<double> b;
  for (int j = 0; j < 16; ++j)
    for (int kk = 0; kk < 32; ++kk) b.push_back((j * 3 + kk) % 7 - 3);
  return b;
}

TEST(SimFunctional, GemmWithTransposeBMultipliesByTheTransposedOperand) {
  auto a = gemm_a(), bt = gemm_bt();
  auto r = run(build_gemm_tb(false), {{"A", a}, {"Bt", bt}});
  bool differs_from_untransposed = false;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double want = 0, plain = 0;
      for (int kk = 0; kk < 32; ++kk) want += a[i * 32 + kk] * bt[j * 32 + kk];
      // What B without the transpose would give, read as [K=32, N=16] row-major.
      for (int kk = 0; kk < 32; ++kk) plain += a[i * 32 + kk] * bt[kk * 16 + j];
      differs_from_untransposed = differs_from_untransposed || want != plain;
      EXPECT_EQ(r.io.at("C")[i * 16 + j], want) << i << "," << j;
      EXPECT_EQ(r.io.at("C16")[i * 16 + j], want) << i << "," << j;  // small ints: exact
    }
  EXPECT_TRUE(differs_from_untransposed) << "test data cannot tell the transpose apart";
}

TEST(SimFunctional, GemmWithInitFalseAccumulatesIntoL0C) {
  auto a = gemm_a(), bt = gemm_bt();
  auto once = run(build_gemm_tb(false), {{"A", a}, {"Bt", bt}});
  auto twice = run(build_gemm_tb(true), {{"A", a}, {"Bt", bt}});
  for (size_t i = 0; i < 256; ++i) EXPECT_EQ(twice.io.at("C")[i], 2 * once.io.at("C")[i]) << i;
}

/// AIC: C = A x I (identity) -> FIX -> GM workspace, then set_cross_flag. Each AIV waits,
/// reads its half of the rows, adds vid * 1000 and writes them out.
ir::Program build_cross_handoff() {
  KernelBuilder k("cv_handoff", 1);
  auto A = k.input("A", {32, 16}, f16);
  auto I = k.input("I", {16, 16}, f16);
  auto Out = k.output("Out", {32, 16}, f32);
  auto ws = k.workspace("ws", {32, 16}, f32);
  auto [cid, vid] = k.launch();
  scope_c([&] {
    auto a1 = alloc_L1("a1", {32, 16}, f16);
    auto b1 = alloc_L1("b1", {16, 16}, f16);
    auto a0 = alloc_L0A("a0", {32, 16}, f16);
    auto b0 = alloc_L0B("b0", {16, 16}, f16);
    auto c0 = alloc_L0C("c0", {32, 16}, f32);
    copy(A, a1);
    copy(I, b1);
    handoff(Pipe::MTE2, Pipe::MTE1);
    copy(a1, a0);
    copy(b1, b0);
    handoff(Pipe::MTE1, Pipe::M);
    mma(a0, b0, c0, /*init=*/true);
    handoff(Pipe::M, Pipe::FIX);
    copy(c0, ws);
    set_cross_flag(Pipe::FIX, 0);
  });
  scope_v([&] {
    auto x = alloc_ub("x", {16, 16}, f32);
    wait_cross_flag(0);
    copy(ws(rows(vid * 16, 16), all), x);
    handoff(Pipe::MTE2, Pipe::V);
    tile::add(x, x, vid * 1000);
    handoff(Pipe::V, Pipe::MTE3);
    copy(x, Out(rows(vid * 16, 16), all));
  });
  return k.finish();
}

sim::HostData cross_inputs() {
  std::vector<double> a, eye(256, 0.0);
  for (int i = 0; i < 32 * 16; ++i) a.push_back(i % 23 - 11);
  for (int i = 0; i < 16; ++i) eye[static_cast<size_t>(i * 17)] = 1;
  return {{"A", a}, {"I", eye}};
}

TEST(SimFunctional, CubeToVectorHandoffThroughWorkspaceWithCrossFlag) {
  auto in = cross_inputs();
  auto r = run(build_cross_handoff(), in);
  const auto& a = in.at("A");
  const auto& out = r.io.at("Out");
  for (int row = 0; row < 32; ++row)
    for (int c = 0; c < 16; ++c)
      EXPECT_EQ(out[row * 16 + c], a[row * 16 + c] + (row >= 16 ? 1000 : 0)) << row << "," << c;
  // The workspace holds what FIX wrote.
  for (int i = 0; i < 32 * 16; ++i) EXPECT_EQ(r.io.at("ws")[i], a[i]) << i;
}

// ---------------------------------------------------------------------------------------
// Timing closed forms (every constant from the a3 config)

/// Each AIV reads its own row of X (an independent first-touch stream), once, or twice with
/// a pipe_barrier(MTE2) in between so the second read starts when the first is done.
ir::Program build_mte2_reads(int64_t bytes, bool twice) {
  KernelBuilder k("mte2", 1);
  auto X = k.input("X", {2, bytes / 2}, f16);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {bytes / 2}, f16);
    auto b = alloc_ub("b", {bytes / 2}, f16);
    copy(X(vid, all), a);
    if (twice) {
      pipe_barrier(Pipe::MTE2);
      copy(X(vid, all), b);
    }
  });
  return k.finish();
}

/// Copy sizes in multiples of the full-bandwidth transfer size (aligned GM addresses).
class SimTimingMte2Copy : public ::testing::TestWithParam<int64_t> {
 protected:
  const ChipConfig& c = testing::a3();
  const int64_t bytes = GetParam() * kLargeTransfer;
  const double I = c.issue_cycles;     // the copy is the first instruction: issued at L + I
  const double L = c.launch_cycles();  // every time below counts from the launch
  void SetUp() override {
    // Two concurrent streams stay below the die's bandwidth: no sharing effects.
    ASSERT_LE(2 * c.mte2_bw_hbm, c.hbm_bw);
    ASSERT_LE(2 * c.mte2_bw_l2, c.l2_bw);
  }
};

TEST_P(SimTimingMte2Copy, FirstReadCostsLatencyPlusBytesOverHbmBandwidthAfterIssue) {
  auto r = run_timing(build_mte2_reads(bytes, false));
  double want = L + I + c.mte2_latency + bytes / c.mte2_bw_hbm;
  EXPECT_NEAR(r.res.cycles, want, 1e-9 * want);
  EXPECT_DOUBLE_EQ(r.res.gm_bytes_hbm, 2.0 * bytes);
}

TEST_P(SimTimingMte2Copy, RepeatReadHitsL2AndCostsLatencyPlusBytesOverL2Bandwidth) {
  auto r = run_timing(build_mte2_reads(bytes, true));
  double first_end = I + c.mte2_latency + bytes / c.mte2_bw_hbm;
  double second_start = std::max(3 * I, first_end);  // behind the barrier
  double want = L + second_start + c.mte2_latency_l2 + bytes / c.mte2_bw_l2;
  EXPECT_NEAR(r.res.cycles, want, 1e-9 * want);
  EXPECT_DOUBLE_EQ(r.res.gm_bytes_l2, 2.0 * bytes);
}

INSTANTIATE_TEST_SUITE_P(SimDmaBlocks, SimTimingMte2Copy, ::testing::Values(1, 2, 4));

/// Two V adds of f32 [2048] (32 repeats); the second reads the first's result if `dependent`,
/// or waits behind pipe_barrier(V) if `barrier`.
ir::Program build_two_adds(bool dependent, bool barrier) {
  KernelBuilder k("two_adds", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {2048}, f32);
    auto b = alloc_ub("b", {2048}, f32);
    auto c = alloc_ub("c", {2048}, f32);
    auto d = alloc_ub("d", {2048}, f32);
    tile::add(a, b, c);
    if (barrier) pipe_barrier(Pipe::V);
    if (dependent)
      tile::add(d, a, c);
    else
      tile::add(d, b, c);
  });
  return k.finish();
}

/// The scalar unit's issue of one vector compute op: the instruction and the count form's
/// mask writes around it (issue.vector_mask_ops).
double vector_issue(const ChipConfig& c) {
  return c.issue_cycles + c.vector_mask_ops * c.scalar_op_cycles;
}

double add_occupancy(const ChipConfig& c) {
  return std::ceil(2048.0 * 4 / c.vector_repeat_bytes) * c.vector_simple_cycles_per_repeat;
}

TEST(SimTiming, IndependentVectorOpsOverlapByOccupancy) {
  const ChipConfig& c = testing::a3();
  const double I = vector_issue(c), occ = add_occupancy(c), lat = c.vector_startup_add;
  auto r = run_timing(build_two_adds(false, false));
  double s1 = I, s2 = std::max(2 * I, s1 + occ);  // starts when the pipe frees
  EXPECT_DOUBLE_EQ(r.res.cycles, c.launch_cycles() + s2 + occ + lat);
  EXPECT_LT(r.res.cycles, c.launch_cycles() + I + 2 * (occ + lat));
}

/// One f32 [2048] sin (or pow) alone: issue + the library expansion's repeats + exp's latency.
TEST(SimTiming, SinAndPowCostTheirLibraryExpansionFromTheConfig) {
  const ChipConfig& c = testing::a3();
  const double I = vector_issue(c);
  const double rep = std::ceil(2048.0 * 4 / c.vector_repeat_bytes);
  const double epr = c.vector_repeat_bytes / 4.0;
  for (bool pow : {false, true}) {
    KernelBuilder k("one", 1);
    scope_v([&] {
      auto a = alloc_ub("a", {2048}, f32);
      auto b = alloc_ub("b", {2048}, f32);
      if (pow)
        tile::pow(a, b, b);
      else
        tile::sin(a, b);
    });
    auto r = run_timing(k.finish());
    double occ = pow ? rep * (2 * std::max(1.0, epr / c.vector_transcendental_elems_per_cycle) +
                              c.vector_pow_extra_ops * c.vector_simple_cycles_per_repeat)
                     : rep * c.vector_sin_cos_ops * c.vector_simple_cycles_per_repeat;
    EXPECT_DOUBLE_EQ(r.res.cycles, c.launch_cycles() + I + occ + c.vector_startup_exp)
        << (pow ? "pow" : "sin");
  }
}

/// One f32 sort of 2048 keys alone keeps the V pipe busy for Sort32 per block +
/// ceil(log4(64)) = 3 MrgSort passes over every pair + 3 simple passes over the source, all
/// from the config.
TEST(SimTiming, SortCostsSort32BlocksAndMergePassesFromTheConfig) {
  const ChipConfig& c = testing::a3();
  KernelBuilder k("one", 1);
  scope_v([&] {
    auto a = alloc_ub("a", {2048}, f32);
    auto d = alloc_ub("d", {4096}, f32);
    tile::sort(d, a, 2048);
  });
  auto r = run_timing(k.finish());
  const double rep = std::ceil(2048.0 * 4 / c.vector_repeat_bytes);
  const double occ = 64 * c.vector_sort32_cycles_per_block +
                     3 * 2048 / c.vector_mrgsort_elems_per_cycle +
                     3 * rep * c.vector_simple_cycles_per_repeat;
  for (const auto& core : r.res.cores)
    EXPECT_DOUBLE_EQ(core.pipes[static_cast<size_t>(Pipe::V)].busy_cycles, occ) << core.name;
  EXPECT_GE(r.res.cycles, occ + c.vector_startup);
}

TEST(SimTiming, DependentVectorOpWaitsForTheResult) {
  const ChipConfig& c = testing::a3();
  const double I = vector_issue(c), occ = add_occupancy(c), lat = c.vector_startup_add;
  auto r = run_timing(build_two_adds(true, false));
  double s2 = std::max(2 * I, I + occ + lat);
  EXPECT_DOUBLE_EQ(r.res.cycles, c.launch_cycles() + s2 + occ + lat);
}

TEST(SimTiming, PipeBarrierMakesTheNextOpWaitForTheResult) {
  const ChipConfig& c = testing::a3();
  const double I = vector_issue(c), occ = add_occupancy(c), lat = c.vector_startup_add;
  auto r = run_timing(build_two_adds(false, true));
  double s2 = std::max(2 * I + c.issue_cycles, I + occ + lat);  // the barrier in between
  EXPECT_DOUBLE_EQ(r.res.cycles, c.launch_cycles() + s2 + occ + lat);
}

/// Collects every executed instruction.
struct InstrLog : sim::Observer {
  // Op names are copied: the lowered program (which owns the ops) is gone after the run.
  std::vector<std::pair<sim::InstrEvent, std::string>> events;
  void on_instr(const sim::InstrEvent& e) override { events.push_back({e, e.op->name}); }
  const sim::InstrEvent* find(int core, const std::string& name) const {
    for (const auto& [e, n] : events)
      if (e.core == core && n == name) return &e;
    return nullptr;
  }
};

class SimTimingDependencyDistance : public ::testing::TestWithParam<int> {};

TEST_P(SimTimingDependencyDistance, ReaderStartsAfterTheWriterResultWhateverLiesBetween) {
  // exp writes e (one repeat, long startup); `GetParam()` independent one-repeat fills of
  // other buffers follow; then an add reads e. The add must not start before exp's result.
  const int between = GetParam();
  KernelBuilder k("distance", 1);
  scope_v([&] {
    auto src = alloc_ub("src", {64}, f32);
    auto e = alloc_ub("e", {64}, f32);
    auto d = alloc_ub("d", {64}, f32);
    auto other = alloc_ub("other", {8, 64}, f32);
    tile::exp(e, src);
    for (int i = 0; i < between; ++i) tile::fill(other[i], 0.0);
    tile::add(d, e, e);
  });
  ir::Program p = k.finish();
  InstrLog log;
  run(p, {}, options(sim::Mode::Timing, 1e13, &log));
  const sim::InstrEvent* w = log.find(0, "tile.exp");
  const sim::InstrEvent* r = log.find(0, "tile.add");
  ASSERT_NE(w, nullptr);
  ASSERT_NE(r, nullptr);
  EXPECT_GE(r->start, w->end);
}

INSTANTIATE_TEST_SUITE_P(SimWritesBetween, SimTimingDependencyDistance,
                         ::testing::Values(0, 1, 3, 4, 5));

TEST(SimTiming, WaitFlagDelaysConsumerPipeUntilSetPlusFlagLatency) {
  const ChipConfig& c = testing::a3();
  const int64_t bytes = kLargeTransfer;
  const int64_t n = bytes / 4;
  KernelBuilder k("flag", 1);
  auto X = k.input("X", {2, n}, f32);  // one row per AIV: both are first reads
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {n}, f32);
    auto y = alloc_ub("y", {n}, f32);
    copy(X(vid, all), x);               // issued at I
    set_flag(Pipe::MTE2, Pipe::V, 0);   // 2I, fires when the copy ends
    wait_flag(Pipe::MTE2, Pipe::V, 0);  // 3I on V
    tile::add(y, x, x);                 // 4I
  });
  auto r = run_timing(k.finish());
  const double I = c.issue_cycles;
  double copy_end = I + c.mte2_latency + bytes / c.mte2_bw_hbm;
  double visible = std::max(2 * I, copy_end) + c.flag_latency;
  double add_start = std::max(4 * I, visible);
  double occ = std::ceil(static_cast<double>(bytes) / c.vector_repeat_bytes) *
               c.vector_simple_cycles_per_repeat;
  double want = c.launch_cycles() + add_start + occ + c.vector_startup_add;
  EXPECT_NEAR(r.res.cycles, want, 1e-9 * want);
}

/// AIC: a GM -> L1 copy (first read: HBM), then set_cross_flag on MTE2, which fires when the
/// copy is done. Each AIV waits for it, then copies the same bytes GM -> UB (L2 hits).
ir::Program build_cross_timing(int64_t bytes) {
  KernelBuilder k("cross_timing", 1);
  auto X = k.input("X", {bytes / 2}, f16);
  scope_c([&] {
    auto x1 = alloc_L1("x1", {bytes / 2}, f16);
    copy(X, x1);
    set_cross_flag(Pipe::MTE2, 0);
  });
  scope_v([&] {
    auto xu = alloc_ub("xu", {bytes / 2}, f16);
    wait_cross_flag(0);
    copy(X, xu);
  });
  return k.finish();
}

TEST(SimTiming, CrossCoreFlagAddsCrossFlagLatency) {
  const ChipConfig& c = testing::a3();
  const int64_t bytes = kLargeTransfer;
  auto r = run_timing(build_cross_timing(bytes));
  const double I = c.issue_cycles, L = c.launch_cycles();  // times below count from L
  // GM -> L1 converts ND to NZ on the way: dma.nd2nz_efficiency of the bandwidth.
  double aic_copy_end = L + I + c.mte2_latency + bytes / c.dma_nd2nz_efficiency / c.mte2_bw_hbm;
  double set_fires = std::max(L + 2 * I, aic_copy_end);
  double aiv_resumes = std::max(L + I, set_fires + c.cross_flag_latency);
  double aiv_end = aiv_resumes + I + c.mte2_latency_l2 + bytes / c.mte2_bw_l2;
  EXPECT_NEAR(r.res.cycles, aiv_end, 1e-9 * aiv_end);
  ASSERT_EQ(r.res.cores.size(), 3u);
  for (const auto& core : r.res.cores) {
    double want = core.kind == ir::CoreKind::C ? aic_copy_end : aiv_end;
    EXPECT_NEAR(core.end_cycle, want, 1e-9 * want) << core.name;
  }
}

TEST(SimTiming, CrossCoreWaitTakesEffectWhenEveryPipeOfTheCoreReachesIt) {
  // The flag is visible long before the AIV's first copy leaves MTE2, yet the copy after the
  // wait starts only once MTE2 has reached the wait: a cross-core wait blocks every pipe.
  const ChipConfig& c = testing::a3();
  const int64_t bytes = kLargeTransfer;
  KernelBuilder k("cross_drain", 1);
  auto X = k.input("X", {2, bytes / 2}, f16);
  auto Y = k.input("Y", {2, 2 * bytes}, f16);
  auto [cid, vid] = k.launch();
  scope_c([&] { set_cross_flag(Pipe::MTE2, 0); });
  scope_v([&] {
    auto a = alloc_ub("a", {bytes / 2}, f16);
    auto b = alloc_ub("b", {2 * bytes}, f16);
    copy(X(vid, all), a);
    wait_cross_flag(0);
    copy(Y(vid, all), b);
  });
  auto r = run_timing(k.finish());
  const double I = c.issue_cycles;
  double first_leaves = I + bytes / c.mte2_bw_hbm;  // after the launch
  ASSERT_GT(first_leaves, I + c.cross_flag_latency) << "the flag must be visible earlier";
  double want = c.launch_cycles() + first_leaves + I + c.mte2_latency + 4 * bytes / c.mte2_bw_hbm;
  for (const auto& core : r.res.cores) {
    if (core.kind == ir::CoreKind::V) {
      EXPECT_NEAR(core.end_cycle, want, 1e-9 * want) << core.name;
    }
  }
}

TEST(SimTiming, CubeWaitOnVectorCrossFlagNeedsBothAivs) {
  // AIV v copies its row v + 1 times, then signals the AIC; the AIC resumes
  // cross_flag_latency after the later of the two signals.
  const ChipConfig& c = testing::a3();
  KernelBuilder k("v2c", 1);
  auto X = k.input("X", {2, 8192}, f16);
  auto [cid, vid] = k.launch();
  scope_c([&] { wait_cross_flag(1); });
  scope_v([&] {
    auto x = alloc_ub("x", {8192}, f16);
    serial(vid + 1, [&](Ex) { copy(X(vid, all), x); });
    set_cross_flag(Pipe::MTE2, 1);
  });
  auto r = run_timing(k.finish());
  ASSERT_EQ(r.res.cores.size(), 3u);
  double aic = -1, aiv[2] = {-1, -1};
  for (const auto& core : r.res.cores) {
    if (core.kind == ir::CoreKind::C)
      aic = core.end_cycle;
    else
      aiv[core.vid] = core.end_cycle;
  }
  ASSERT_LT(aiv[0], aiv[1]) << "AIV1 does more work";
  EXPECT_DOUBLE_EQ(aic, aiv[1] + c.cross_flag_latency);
  EXPECT_DOUBLE_EQ(r.res.cycles, aic);
}

TEST(SimTiming, TotalCyclesIsTheMaximumCoreEnd) {
  // block_num 3 -> 3 AI cores x 2 AIVs; vid 1 of cid 2 does the most work.
  KernelBuilder k("uneven", 3);
  auto X = k.input("X", {8192}, f16);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {8192}, f16);
    serial(cid * 2 + vid + 1, [&](Ex) { copy(X, x); });
  });
  auto r = run_timing(k.finish());
  ASSERT_EQ(r.res.cores.size(), 6u);
  double mx = 0, mn = 1e300;
  for (const auto& core : r.res.cores) {
    EXPECT_EQ(core.kind, ir::CoreKind::V);
    mx = std::max(mx, core.end_cycle);
    mn = std::min(mn, core.end_cycle);
  }
  EXPECT_DOUBLE_EQ(r.res.cycles, mx);
  EXPECT_LT(mn, mx);
  for (const auto& core : r.res.cores) {
    if (core.ai_core == 2 && core.vid == 1) {
      EXPECT_DOUBLE_EQ(core.end_cycle, mx);
    }
  }
}

TEST(SimTiming, TimingModeGivesTheSameCyclesAsFunctional) {
  auto f = run(build_cross_handoff(), cross_inputs());
  auto t = run_timing(build_cross_handoff());
  EXPECT_EQ(f.res.cycles, t.res.cycles);
  EXPECT_EQ(f.res.instructions, t.res.instructions);
}

// ---------------------------------------------------------------------------------------
// Run-time errors

TEST(SimErrors, MissingSetFlagIsADeadlockNamingPipeFlagAndLine) {
  std::string line;
  auto build = [&] {
    KernelBuilder k("deadlock", 1);
    auto X = k.input("X", {64}, f32);
    scope_v([&] {
      auto x = alloc_ub("x", {64}, f32);
      copy(X, x);
      line = next_line();
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      tile::exp(x, x);
    });
    return k.finish();
  };
  expect_sim_error([&] { run(build()); }, "deadlock",
                   {"deadlock", "V waits MTE2->V #0 forever", "never set", line});
}

TEST(SimErrors, ScalarWaitWithoutSetIsADeadlock) {
  std::string line;
  auto build = [&] {
    KernelBuilder k("deadlock_s", 1);
    scope_v([&] {
      auto x = alloc_ub("x", {64}, f32);
      tile::fill(x, 1.0);
      line = next_line();
      wait_flag(Pipe::V, Pipe::S, 2);
    });
    return k.finish();
  };
  expect_sim_error([&] { run(build()); }, "deadlock",
                   {"deadlock", "scalar waits V->S #2 forever", line});
}

TEST(SimErrors, MissingCrossSetIsADeadlockNamingWaitCrossFlag) {
  std::string line;
  auto build = [&] {
    KernelBuilder k("deadlock_x", 1);
    scope_c([&] { set_cross_flag(Pipe::MTE2, 2); });  // a different id
    scope_v([&] {
      auto x = alloc_ub("x", {64}, f32);
      line = next_line();
      wait_cross_flag(3);
      tile::fill(x, 1.0);
    });
    return k.finish();
  };
  expect_sim_error([&] { run(build()); }, "deadlock",
                   {"deadlock", "wait_cross_flag #3 forever", "never set", line});
}

TEST(SimErrors, SetWithoutWaitAtKernelEndIsUnmatchedFlag) {
  std::string line;
  auto build = [&] {
    KernelBuilder k("unmatched", 1);
    scope_v([&] {
      auto x = alloc_ub("x", {64}, f32);
      tile::fill(x, 1.0);
      line = next_line();
      set_flag(Pipe::V, Pipe::MTE2, 1);
    });
    return k.finish();
  };
  expect_sim_error([&] { run(build()); }, "unmatched-flag",
                   {"flag V->MTE2 #1 is still set when the kernel ends", line});
}

/// A forgotten wait: the hint names the instruction the set guards (where the wait
/// belongs), and the race the missing wait leaves is reported beside the flag error.
TEST(SimErrors, AForgottenWaitNamesItsConsumerAndTheRaceIsReportedToo) {
  std::string set_line, copy_line;
  auto build = [&] {
    KernelBuilder k("forgotten_wait", 1);
    auto Y = k.output("Y", {64}, f32);
    scope_v([&] {
      auto x = alloc_ub("x", {64}, f32);
      tile::fill(x, 1.0);
      set_line = next_line();
      set_flag(Pipe::V, Pipe::MTE3, 0);
      copy_line = next_line();
      copy(x, Y);
    });
    return k.finish();
  };
  sim::SimOptions o;
  o.detect_races = true;
  const std::string at = copy_line.substr(0, copy_line.size() - 1);  // "file:line"
  expect_sim_error([&] { run(build(), {}, o); }, "unmatched-flag",
                   {set_line, "the set guards", at, "wait_flag(V, MTE3, 0) right before it"});
  expect_sim_error([&] { run(build(), {}, o); }, "race", {"data race on 'x'"});
}

TEST(SimErrors, CrossSetNeverWaitedIsUnmatchedFlag) {
  std::string line;
  auto build = [&] {
    KernelBuilder k("unmatched_x", 1);
    scope_c([&] {
      line = next_line();
      set_cross_flag(Pipe::MTE2, 4);
    });
    scope_v([&] {
      auto x = alloc_ub("x", {64}, f32);
      tile::fill(x, 1.0);
    });
    return k.finish();
  };
  expect_sim_error([&] { run(build()); }, "unmatched-flag", {"cross-core flag #4", line});
}

TEST(SimErrors, SetTwiceBeforeTheWaitIsFlagDoubleSet) {
  // MTE2 is idle, so each set fires at its issue; V is busy when it reaches the wait, so
  // both sets are up by then.
  std::string line;
  auto build = [&] {
    KernelBuilder k("double_set", 1);
    scope_v([&] {
      auto y = alloc_ub("y", {8192}, f32);
      set_flag(Pipe::MTE2, Pipe::V, 0);
      line = next_line();
      set_flag(Pipe::MTE2, Pipe::V, 0);
      tile::fill(y, 0.0);
      tile::exp(y, y);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
    });
    return k.finish();
  };
  expect_sim_error([&] { run(build()); }, "flag-double-set",
                   {"flag MTE2->V #0 set again before its wait", line});
}

TEST(SimErrors, BackToBackSetsAfterPipeWorkAreFlagDoubleSet) {
  // set; set; wait; wait with no other work between the sets: both sets fire when the
  // copy ends, so they become visible in the same cycle.
  auto build = [&] {
    KernelBuilder k("double_set_tie", 1);
    auto X = k.input("X", {64}, f32);
    scope_v([&] {
      auto x = alloc_ub("x", {64}, f32);
      copy(X, x);
      set_flag(Pipe::MTE2, Pipe::V, 0);
      set_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
    });
    return k.finish();
  };
  try {
    run(build());
  } catch (const UserError& e) {
    EXPECT_EQ(e.diagnostics().front().kind, "flag-double-set") << e.what();
    return;
  }
  ADD_FAILURE() << "set_flag twice before the wait (both visible in the same cycle) was not "
                   "reported";
}

TEST(SimErrors, SetTwiceBeforeAScalarWaitIsFlagDoubleSet) {
  // Both V->S sets fire while V is idle (cycles apart); the scalar unit then blocks on an
  // unrelated MTE2->S handoff for a whole copy before it reaches the V->S waits.
  auto build = [&] {
    KernelBuilder k("double_set_s", 1);
    auto X = k.input("X", {2, 8192}, f16);
    auto [cid, vid] = k.launch();
    scope_v([&] {
      auto x = alloc_ub("x", {8192}, f16);
      set_flag(Pipe::V, Pipe::S, 0);
      set_flag(Pipe::V, Pipe::S, 0);
      copy(X(vid, all), x);
      handoff(Pipe::MTE2, Pipe::S, 1);
      wait_flag(Pipe::V, Pipe::S, 0);
      wait_flag(Pipe::V, Pipe::S, 0);
    });
    return k.finish();
  };
  try {
    run(build());
  } catch (const UserError& e) {
    EXPECT_EQ(e.diagnostics().front().kind, "flag-double-set") << e.what();
    return;
  }
  ADD_FAILURE() << "set_flag(V, S) twice before wait_flag(V, S) was not reported";
}

TEST(SimErrors, SliceOutOfRangeOnlyAtRunTimeNamesTheLoopState) {
  std::string copy_line, loop_line;
  auto build = [&] {
    KernelBuilder k("bounds", 1);
    auto X = k.input("X", {32}, f32);
    auto [cid, vid] = k.launch();
    scope_v([&] {
      auto x = alloc_ub("x", {16}, f32);
      // The bound depends on cid, so the verifier cannot prove i * 16 + 16 <= 32; i = 2 is
      // out of range.
      loop_line = next_line();
      serial(cid + 3, [&](Ex i) {
        copy_line = next_line();
        copy(X(slice(i * 16, 16)), x);
      });
    });
    return k.finish();
  };
  ir::Program p = build();
  ASSERT_TRUE(verify(p, testing::a3()).empty()) << "the verifier must accept this program";
  std::string loop_at = "loop@" + loop_line.substr(loop_line.find(':') + 1);
  loop_at.pop_back();  // drop the trailing ':'
  expect_sim_error([&] { run(p); }, "slice-bounds",
                   {"'X'", "[32, 48)", "32 elements", loop_at + "=2", "cid=0", copy_line});
}

TEST(SimErrors, FlagIdOutOfRangeAtRunTimeNamesTheLoopState) {
  // The verifier proves ids in range; the simulator still checks each evaluated id (a
  // lowered program may come from elsewhere). Here set_flag's id becomes i + 1 after
  // lowering: 8 at i = 7.
  KernelBuilder k("ids", 1);
  std::string set_line;
  scope_v([&] {
    serial(8, [&](Ex i) {
      set_line = next_line();
      set_flag(Pipe::V, Pipe::MTE2, i);
      wait_flag(Pipe::V, Pipe::MTE2, i);
    });
  });
  const ChipConfig& chip = testing::a3();
  ir::Program p = k.finish();
  verify_or_throw(p, chip);
  lower::LoweredProgram low = lower::lower(p, chip);
  for (auto& t : low.aiv.instrs) {
    if (t.op != lower::Opcode::SetFlag) continue;
    t.flag_id.ops.push_back({lower::CExpr::Const, ir::BinOp::Add, 1});
    t.flag_id.ops.push_back({lower::CExpr::Bin, ir::BinOp::Add, 0});
    t.flag_id.finalize();
  }
  expect_sim_error([&] { sim::simulate(low, chip, nullptr, options(sim::Mode::Timing)); },
                   "flag-id", {"id evaluates to 8", "ids are 0..7", "=7", set_line});
}

TEST(SimErrors, CycleBudgetStopsALongLoop) {
  KernelBuilder k("budget", 1);
  scope_v([&] {
    auto x = alloc_ub("x", {64}, f32);
    serial(int64_t{1} << 40, [&](Ex) { tile::fill(x, 1.0); });
  });
  ir::Program p = k.finish();
  expect_sim_error([&] { run(p, {}, options(sim::Mode::Timing, 10000)); }, "cycle-budget",
                   {"cycle budget of 10000"});
  expect_sim_error([&] { run(p, {}, options(sim::Mode::Functional, 10000)); }, "cycle-budget",
                   {"cycle budget of 10000"});
}

TEST(SimErrors, CycleBudgetCountsPipeTimeNotOnlyIssue) {
  // One MTE2 copy: the scalar unit is done after a few cycles, the pipe after ~1500.
  const ChipConfig& c = testing::a3();
  KernelBuilder k("budget_pipe", 1);
  auto X = k.input("X", {8192}, f16);
  scope_v([&] {
    auto x = alloc_ub("x", {8192}, f16);
    copy(X, x);
  });
  ir::Program p = k.finish();
  const double budget = c.mte2_latency / 2;
  try {
    auto r = run(p, {}, options(sim::Mode::Timing, budget));
    ADD_FAILURE() << "the run took " << r.res.cycles << " cycles, past the budget of " << budget
                  << ", without a cycle-budget error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.diagnostics().front().kind, "cycle-budget") << e.what();
  }
}

TEST(SimErrors, CrossFlagCountingPastTheCounterIsReported) {
  const ChipConfig& c = testing::a3();
  const int sets = c.cross_flag_max + 1;
  KernelBuilder k("cross_overflow", 1);
  auto X = k.input("X", {8192}, f16);
  scope_c([&] { serial(sets, [&](Ex) { set_cross_flag(Pipe::MTE2, 0); }); });
  scope_v([&] {
    auto x = alloc_ub("x", {8192}, f16);
    copy(X, x);  // keeps the AIV's scalar unit busy until every set has arrived
    handoff(Pipe::MTE2, Pipe::S);
    serial(sets, [&](Ex) { wait_cross_flag(0); });
  });
  ir::Program p = k.finish();
  expect_sim_error([&] { run(p); }, "cross-flag",
                   {"counts past " + std::to_string(c.cross_flag_max)});
}

// ---------------------------------------------------------------------------------------
// Determinism

TEST(SimDeterminism, TwoRunsGiveIdenticalCyclesAndValues) {
  auto a = run(build_cross_handoff(), cross_inputs());
  auto b = run(build_cross_handoff(), cross_inputs());
  EXPECT_EQ(a.res.cycles, b.res.cycles);
  EXPECT_EQ(a.res.instructions, b.res.instructions);
  ASSERT_EQ(a.res.cores.size(), b.res.cores.size());
  for (size_t i = 0; i < a.res.cores.size(); ++i) {
    EXPECT_EQ(a.res.cores[i].name, b.res.cores[i].name);
    EXPECT_EQ(a.res.cores[i].end_cycle, b.res.cores[i].end_cycle) << a.res.cores[i].name;
  }
  EXPECT_EQ(a.io, b.io);
}

TEST(SimDeterminism, ManyCoreGemmRunsIdenticallyTwice) {
  const auto& g = kernels::find_kernel("gemm");
  auto params = driver::resolve_params(g, {{"M", "256"}, {"N", "384"}, {"K", "128"}});
  ir::Program p = g.build(params, "expert").program;
  auto in = g.inputs(params, 7);
  auto a = run(p, in);
  auto b = run(p, in);
  EXPECT_EQ(a.res.cycles, b.res.cycles);
  EXPECT_EQ(a.io.at("C"), b.io.at("C"));
  ASSERT_EQ(a.res.cores.size(), b.res.cores.size());
  for (size_t i = 0; i < a.res.cores.size(); ++i)
    EXPECT_EQ(a.res.cores[i].end_cycle, b.res.cores[i].end_cycle) << a.res.cores[i].name;
}

}  // namespace
}  // namespace tilepipe

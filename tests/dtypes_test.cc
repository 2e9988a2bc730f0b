// The element types of A2/A3 through every layer: names and sizes, the hardware's chains of
// casts, the verifier's dtype rules for 64-bit integers and bool masks, the simulator's
// exact 64-bit values (copies, arithmetic, compares, scalar index reads) and cast costs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"
#include "tilepipe/vec_modes.h"
#include "tilepipe/verify.h"

namespace tilepipe {
namespace {

using namespace lang;
using ir::DType;

void handoff(Pipe from, Pipe to) {
  set_flag(from, to, 0);
  wait_flag(from, to, 0);
}

TEST(DTypes, EveryDTypeHasAShortNameThatParsesBackAndItsSize) {
  for (int i = 0; i <= static_cast<int>(DType::Bool); ++i) {
    const auto d = static_cast<DType>(i);
    EXPECT_EQ(ir::dtype_from_string(ir::to_string(d)), d) << ir::to_string(d);
  }
  EXPECT_EQ(ir::dtype_bytes(DType::I64), 8);
  EXPECT_EQ(ir::dtype_bytes(DType::U64), 8);
  EXPECT_EQ(ir::dtype_bytes(DType::Bool), 1);
  EXPECT_EQ(ir::dtype_from_string("float8_e4m3"), std::nullopt);
  EXPECT_TRUE(ir::is_signed_int(DType::I64));
  EXPECT_FALSE(ir::is_signed_int(DType::U64));
}

TEST(DTypes, CastsWithoutAHardwareConversionGoThroughTheShortestChain) {
  using V = std::vector<DType>;
  EXPECT_EQ(ir::cast_path(DType::F32, DType::I64), V{DType::I64});
  EXPECT_EQ(ir::cast_path(DType::I64, DType::F16), (V{DType::F32, DType::F16}));
  EXPECT_EQ(ir::cast_path(DType::I8, DType::F32), (V{DType::F16, DType::F32}));
  EXPECT_EQ(ir::cast_path(DType::Bool, DType::F16), V{DType::F16});
  EXPECT_EQ(ir::cast_path(DType::U8, DType::I64), (V{DType::F16, DType::F32, DType::I64}));
  EXPECT_EQ(ir::cast_path(DType::U32, DType::U32), V{DType::U32});
}

/// One vector op of `what` on a 64-lane tile of `dt` (and a source of the same dtype).
ir::Program one_op(DType dt, const std::function<void(Tile, Tile)>& op) {
  KernelBuilder k("one_op", 1);
  auto X = k.input("X", {64}, dt);
  auto Y = k.output("Y", {64}, dt);
  k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {64}, dt);
    auto y = alloc_ub("y", {64}, dt);
    copy(X, x);
    handoff(Pipe::MTE2, Pipe::V);
    op(y, x);
    handoff(Pipe::V, Pipe::MTE3);
    copy(y, Y);
  });
  return k.finish();
}

TEST(DTypesVerify, I64IndexArithmeticIsAcceptedAndMulIsRefusedNamingTheOpsThereAre) {
  EXPECT_TRUE(
      verify(one_op(i64, [](Tile y, Tile x) { tile::add(y, x, -128); }), testing::a3()).empty());
  EXPECT_TRUE(
      verify(one_op(u64, [](Tile y, Tile x) { tile::max(y, x, x); }), testing::a3()).empty());
  const std::string line = testing::here(1);
  auto p = one_op(i64, [](Tile y, Tile x) { tile::mul(y, x, x); });
  testing::expect_diag(p, "dtype-mismatch",
                       {"tile.mul on 'y', a i64 tile", "no 64-bit mul", "add, sub, max", line});
}

TEST(DTypesVerify, ArithmeticOnABoolMaskAndItsReductionAreRefused) {
  testing::expect_diag(one_op(boolean, [](Tile y, Tile x) { tile::add(y, x, x); }),
                       "dtype-mismatch", {"a bool tile: bool tiles are masks"});
  EXPECT_TRUE(
      verify(one_op(boolean, [](Tile y, Tile x) { tile::max(y, x, x); }), testing::a3()).empty())
      << "max of 0/1 masks is their or";
  testing::expect_diag(one_op(i64, [](Tile y, Tile x) { reduce_sum(x, y); }), "dtype-mismatch",
                       {"reduce over 'x', a i64 tile", "tile::cast to i32"});
}

/// Runs `p` functionally; the 64-bit integer outputs come back as their bytes.
struct Run {
  sim::HostData io;
  std::map<std::string, std::vector<uint8_t>> wide;
};

Run run(const ir::Program& p, const std::map<std::string, sim::RawTensor>& raw) {
  const ChipConfig& chip = testing::a3();
  verify_or_throw(p, chip);
  Run r;
  sim::SimOptions o;
  o.mode = sim::Mode::Functional;
  o.raw_inputs = raw;
  o.raw_outputs = &r.wide;
  sim::simulate(lower::lower(p, chip), chip, &r.io, o);
  return r;
}

template <class I>
std::vector<I> as(const std::vector<uint8_t>& bytes) {
  std::vector<I> v(bytes.size() / sizeof(I));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

TEST(DTypesSim, I64ValuesPastTwoTo53StayExactThroughCopyAddMaxAndCompare) {
  KernelBuilder k("wide", 1);
  auto X = k.input("X", {8}, i64);
  auto U = k.input("U", {8}, u64);
  auto Y = k.output("Y", {8}, i64);
  auto M = k.output("M", {8}, u64);
  auto C = k.output("C", {8}, boolean);
  k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {8}, i64);
    auto u = alloc_ub("u", {8}, u64);
    auto c = alloc_ub("c", {8}, boolean);
    copy(X, x);
    copy(U, u);
    handoff(Pipe::MTE2, Pipe::V);
    tile::add(x, x, 1);
    tile::max(u, u, u);
    tile::compare(c, x, 4611686018427387904.0, CmpMode::GT);  // 2^62
    handoff(Pipe::V, Pipe::MTE3);
    copy(x, Y);
    copy(u, M);
    copy(c, C);
  });
  const int64_t big = (int64_t{1} << 62) + 1;  // not a double: 2^62 + 1
  std::vector<int64_t> x = {big, -big, 0, 9007199254740993, -1, big + 2, INT64_MIN + 5, 7};
  std::vector<uint64_t> u = {UINT64_MAX, uint64_t{1} << 63, 1, 0, 3, 18446744073709551557u, 2, 9};
  auto r = run(k.finish(), {{"X", {x.data(), DType::I64, 8}}, {"U", {u.data(), DType::U64, 8}}});
  std::vector<int64_t> want = x;
  for (auto& v : want) ++v;
  EXPECT_EQ(as<int64_t>(r.wide.at("Y")), want);
  EXPECT_EQ(as<uint64_t>(r.wide.at("M")), u);
  // x + 1 > 2^62 holds for big + 1 and big + 3 only, which a double rounds to 2^62
  EXPECT_EQ(r.io.at("C"), (std::vector<double>{1, 0, 0, 0, 0, 1, 0, 0}));
}

TEST(DTypesSim, AnI64ToBf16CastRoundsToF32FirstAsTheHardwaresTwoCastsDo) {
  KernelBuilder k("i64_bf16", 1);
  auto X = k.input("X", {8}, i64);
  auto Y = k.output("Y", {8}, bf16);
  k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {8}, i64);
    auto y = alloc_ub("y", {8}, bf16);
    copy(X, x);
    handoff(Pipe::MTE2, Pipe::V);
    tile::cast(y, x);
    handoff(Pipe::V, Pipe::MTE3);
    copy(y, Y);
  });
  // 2^24 + 2^16 + 1: f32 rounds it to 2^24 + 2^16 (a tie), which bf16 rounds to even, 2^24;
  // one rounding straight to bf16 would give 2^24 + 2^17
  std::vector<int64_t> x(8, (1 << 24) + (1 << 16) + 1);
  auto r = run(k.finish(), {{"X", {x.data(), DType::I64, 8}}});
  EXPECT_EQ(r.io.at("Y"), std::vector<double>(8, 16777216.0));
}

TEST(DTypesSim, AnI64ElementReadByTheScalarUnitIndexesGmExactly) {
  KernelBuilder k("index", 1);
  auto Idx = k.input("Idx", {4}, i64);
  auto X = k.input("X", {64, 8}, f32);
  auto Y = k.output("Y", {4, 8}, f32);
  k.launch();
  scope_v([&] {
    auto row = alloc_ub("row", {8}, f32);
    serial(4, [&](Ex i) {
      copy(X(load(Idx, {i}), all), row);
      handoff(Pipe::MTE2, Pipe::MTE3);
      copy(row, Y(i, all));
      handoff(Pipe::MTE3, Pipe::MTE2);
    });
  });
  std::vector<int64_t> idx = {63, 0, 17, 5};
  std::vector<double> xv(64 * 8);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<double>(i);
  auto p = k.finish();
  const ChipConfig& chip = testing::a3();
  verify_or_throw(p, chip);
  sim::HostData io = {{"X", xv}};
  sim::SimOptions o;
  o.mode = sim::Mode::Functional;
  o.raw_inputs = {{"Idx", {idx.data(), DType::I64, 4}}};
  sim::simulate(lower::lower(p, chip), chip, &io, o);
  for (size_t r = 0; r < 4; ++r)
    for (size_t c = 0; c < 8; ++c)
      EXPECT_EQ(io.at("Y")[r * 8 + c], static_cast<double>(idx[r] * 8 + static_cast<int64_t>(c)));
}

/// The vector pipe's busy cycles of one cast of 4096 elements from `from` to `to`.
double cast_busy(DType from, DType to) {
  KernelBuilder k("cast_cost", 1);
  k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {4096}, from);
    auto y = alloc_ub("y", {4096}, to);
    tile::cast(y, x);
  });
  const ChipConfig& chip = testing::a3();
  auto p = k.finish();
  verify_or_throw(p, chip);
  sim::SimOptions o;
  o.mode = sim::Mode::Timing;
  auto res = sim::simulate(lower::lower(p, chip), chip, nullptr, o);
  double busy = 0;
  for (const auto& c : res.cores)
    busy = std::max(busy, c.pipes[static_cast<size_t>(Pipe::V)].busy_cycles);
  return busy;
}

TEST(DTypesTiming, ACastTheHardwareDoesInTwoStepsCostsTwoCasts) {
  // i64 -> f32 is one Cast, i64 -> f16 two (through f32), over the same 8-byte source
  const double one = cast_busy(DType::I64, DType::F32), two = cast_busy(DType::I64, DType::F16);
  EXPECT_GT(one, 0);
  EXPECT_DOUBLE_EQ(two, 2 * one);
}

}  // namespace
}  // namespace tilepipe

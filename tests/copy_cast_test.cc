// copy_cast: a GM <-> UB copy that changes dtype becomes a copy and a vector cast through a
// UB temporary (golden IR), the values are the cast's, hand-synced code gets its own flag
// pair, and with the pass off the copy stays the verifier's error.
#include "passes/copy_cast.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/numeric.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

using namespace lang;

/// y = f16(f32(x) * 3): x copied from an f16 tensor into an f32 tile and back.
ir::Program widened(bool hand) {
  KernelBuilder kb("widened", 1);
  auto x = kb.input("x", {16, 64}, f16);
  auto y = kb.output("y", {16, 64}, f16);
  kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {16, 64}, f32);
    copy(x, a);
    if (hand) {
      set_flag(ir::Pipe::MTE2, ir::Pipe::V, 0);
      wait_flag(ir::Pipe::MTE2, ir::Pipe::V, 0);
    }
    tile::mul(a, a, 3.0);
    if (hand) {
      set_flag(ir::Pipe::V, ir::Pipe::MTE3, 0);
      wait_flag(ir::Pipe::V, ir::Pipe::MTE3, 0);
    }
    copy(a, y);
  });
  return kb.finish();
}

TEST(CopyCast, AWideningCopyBecomesACopyIntoATemporaryAndACast) {
  std::string ir = ir::print(passes::copy_cast(widened(false), testing::a3(), {}));
  EXPECT_NE(ir.find("    alloc cast_tmp1: UB f16[16, 64]\n    copy x -> cast_tmp1\n"
                    "    tile.cast a, cast_tmp1\n"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("    alloc cast_tmp2: UB f16[16, 64]\n    tile.cast cast_tmp2, a\n"
                    "    copy cast_tmp2 -> y\n"),
            std::string::npos)
      << ir;
}

TEST(CopyCast, HandSyncedCodeGetsAFlagPairBetweenTheCopyAndTheCast) {
  std::string ir = ir::print(passes::copy_cast(widened(true), testing::a3(), {}));
  EXPECT_NE(ir.find("    copy x -> cast_tmp1\n    set_flag MTE2->V #7\n"
                    "    wait_flag MTE2->V #7\n    tile.cast a, cast_tmp1\n"),
            std::string::npos)
      << ir;
}

TEST(CopyCast, ValuesAreTheCastsInAutomaticAndHandSyncedCode) {
  for (bool hand : {false, true}) {
    passes::PassOptions o;
    ir::Program p = widened(hand);
    verify_or_throw(p, testing::a3(), passes::verify_options(o));
    auto low = lower::lower(passes::run_passes(p, testing::a3(), o), testing::a3());
    std::vector<double> x(16 * 64);
    for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<double>(e % 29) * 0.37 - 5;
    for (auto& v : x) v = round_to(ir::DType::F16, v);
    sim::HostData data = {{"x", x}};
    sim::SimOptions so;
    so.detect_races = true;
    sim::simulate(low, testing::a3(), &data, so);
    for (size_t e = 0; e < x.size(); ++e)
      EXPECT_EQ(data.at("y")[e], round_to(ir::DType::F16, x[e] * 3)) << e << hand;
  }
}

TEST(CopyCast, WithThePassOffTheCopyIsADtypeMismatch) {
  passes::PassOptions o;
  o.copy_cast = false;
  auto diags = verify(widened(false), testing::a3(), passes::verify_options(o));
  ASSERT_FALSE(diags.empty());
  EXPECT_EQ(diags.front().kind, "dtype-mismatch");
  EXPECT_NE(diags.front().str().find("with the copy_cast pass, GM <-> UB copies cast"),
            std::string::npos)
      << diags.front().str();
}

}  // namespace
}  // namespace tilepipe

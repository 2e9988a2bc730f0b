// Correctness: every kernel against its plain C++ reference, in functional mode.
#include <gtest/gtest.h>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/driver.h"

namespace tilepipe {
namespace {

driver::RunReport run(const std::string& name, std::map<std::string, std::string> params,
                      const std::string& variant = "", sim::Mode mode = sim::Mode::Functional) {
  const auto& k = kernels::find_kernel(name);
  driver::RunRequest req;
  req.variant = variant;
  req.params = driver::resolve_params(k, params);
  req.mode = mode;
  return driver::run_kernel(k, req, testing::a3());
}

struct Case {
  std::string kernel, variant;
  std::map<std::string, std::string> params;
};

class KernelMatchesReference : public ::testing::TestWithParam<Case> {};

TEST_P(KernelMatchesReference, WithinStatedTolerance) {
  const Case& c = GetParam();
  auto rep = run(c.kernel, c.params, c.variant);
  ASSERT_TRUE(rep.checked);
  EXPECT_TRUE(rep.correct) << rep.mismatch;
  EXPECT_GT(rep.sim.cycles, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, KernelMatchesReference,
    ::testing::Values(
        Case{"gemm", "", {{"M", "256"}, {"N", "256"}, {"K", "512"}}},
        Case{"gemm", "", {{"M", "48"}, {"N", "80"}, {"K", "96"}}},
        Case{"gemm", "naive", {{"M", "128"}, {"N", "256"}, {"K", "64"}}},
        Case{"gemm", "double_buffer", {{"M", "256"}, {"N", "128"}, {"K", "256"}}},
        Case{"gemm", "", {{"M", "512"}, {"N", "512"}, {"K", "128"}, {"block_num", "7"}}},
        Case{"gemm", "", {{"M", "1024"}, {"N", "512"}, {"K", "64"}, {"block_num", "40"}}},
        Case{"softmax", "", {{"R", "256"}, {"C", "1024"}}},
        Case{"softmax", "", {{"R", "37"}, {"C", "48"}}},
        Case{"softmax", "", {{"R", "64"}, {"C", "512"}, {"block_num", "3"}}},
        Case{"elementwise", "add", {{"N", "65536"}, {"buffers", "1"}}},
        Case{"elementwise", "add", {{"N", "65536"}, {"buffers", "2"}}},
        Case{"elementwise", "mul", {{"N", "65536"}, {"buffers", "3"}}},
        Case{"elementwise", "mul", {{"N", "4096"}, {"tile", "256"}, {"buffers", "3"}}}),
    [](const auto& info) {
      std::string n = info.param.kernel + "_" + std::to_string(info.index);
      return n;
    });

TEST(Kernels, WrongReferenceIsCaught) {
  // The comparison must be able to fail: perturb one output value past the tolerance.
  driver::RunReport rep;
  rep.correct = true;
  std::vector<double> ref = {1.0, 2.0, 3.0};
  std::vector<double> out = {1.0, 2.01, 3.0};
  driver::compare(out, ref, {1e-3, 1e-3}, "Z", rep);
  EXPECT_FALSE(rep.correct);
  EXPECT_NE(rep.mismatch.find("Z[1]"), std::string::npos);
}

TEST(Kernels, TimingModeGivesSameCyclesAsFunctional) {
  for (const char* k : {"gemm", "softmax", "elementwise"}) {
    auto f = run(k, {}, "", sim::Mode::Functional);
    auto t = run(k, {}, "", sim::Mode::Timing);
    EXPECT_EQ(f.sim.cycles, t.sim.cycles) << k;
    EXPECT_EQ(f.sim.instructions, t.sim.instructions) << k;
  }
}

TEST(Kernels, SameSeedSameResult) {
  auto a = run("softmax", {{"R", "64"}, {"C", "256"}});
  auto b = run("softmax", {{"R", "64"}, {"C", "256"}});
  EXPECT_EQ(a.sim.cycles, b.sim.cycles);
  EXPECT_EQ(a.max_abs_err, b.max_abs_err);
}

TEST(Kernels, GemmUsesEveryCubeCoreWhenTasksAllow) {
  auto r = run("gemm", {{"M", "1024"}, {"N", "768"}, {"K", "64"}}, "", sim::Mode::Timing);
  int busy = 0;
  for (const auto& c : r.sim.cores)
    if (c.kind == ir::CoreKind::C && c.pipes[static_cast<size_t>(ir::Pipe::M)].instructions > 0)
      ++busy;
  EXPECT_EQ(busy, 24);
}

TEST(Kernels, MoreBuffersOverlapMoreOnOneCore) {
  // One AI core: its DMA rates, not the die's shared bandwidth, set the pace.
  auto run_nb = [](int nb) {
    return run("elementwise",
               {{"N", "262144"}, {"block_num", "1"}, {"buffers", std::to_string(nb)}}, "",
               sim::Mode::Timing)
        .sim.cycles;
  };
  double t1 = run_nb(1), t2 = run_nb(2), t3 = run_nb(3);
  EXPECT_LT(t2, 0.8 * t1);
  EXPECT_LE(t3, t2 * 1.02);
}

TEST(Params, OutOfRangeNonNumericUnknownAreRejected) {
  const auto& k = kernels::find_kernel("gemm");
  EXPECT_THROW(driver::resolve_params(k, {{"M", "-1"}}), driver::ParamError);
  EXPECT_THROW(driver::resolve_params(k, {{"M", "12x"}}), driver::ParamError);
  EXPECT_THROW(driver::resolve_params(k, {{"Q", "1"}}), driver::ParamError);
  EXPECT_THROW(driver::resolve_params(k, {{"M", "24"}}), driver::ParamError);  // not % 16
  EXPECT_THROW(kernels::find_kernel("nope"), driver::ParamError);
  EXPECT_THROW(driver::resolve_variant(k, "nope"), driver::ParamError);
}

TEST(Params, SoftmaxRowsUpToTheStatedLimitRunAndWiderOnesAreOutOfRange) {
  // One row in and out with two f32 copies fits the UB up to C=16352 (what `list` says).
  auto rep = run("softmax", {{"R", "3"}, {"C", "16352"}});
  EXPECT_TRUE(rep.correct) << rep.mismatch;
  try {
    run("softmax", {{"R", "64"}, {"C", "16368"}});
    FAIL() << "C=16368 was accepted";
  } catch (const driver::ParamError& e) {
    EXPECT_NE(e.message.find("allowed [16, 16352]"), std::string::npos) << e.message;
  }
}

}  // namespace
}  // namespace tilepipe

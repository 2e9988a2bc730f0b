// Fast-forward against --exact for every built-in kernel and variant at five shapes each:
// cycles within 0.5 %, every instruction, transfer and byte count equal. The large shapes
// users run are in bench/ (BM_FastForwardVsExact).
#include <gtest/gtest.h>

#include "differential.h"
#include "registry.h"
#include "test_util.h"

namespace tilepipe {
namespace {

struct Case {
  std::string kernel, variant;
};

std::vector<Case> all_variants() {
  std::vector<Case> out;
  for (const auto& k : kernels::all_kernels())
    for (const auto& v : k.variants) out.push_back({k.name, v});
  return out;
}

class FastForwardVsExact : public ::testing::TestWithParam<Case> {};

TEST_P(FastForwardVsExact, CyclesWithinHalfAPercentAndCountersExact) {
  const auto& k = kernels::find_kernel(GetParam().kernel);
  auto shapes = kernels::differential_shapes(k.name, false);
  ASSERT_GE(shapes.size(), 5u);
  for (const auto& p : shapes) {
    SCOPED_TRACE(::testing::PrintToString(p));
    auto d = driver::run_differential(k, GetParam().variant, p, testing::a3());
    EXPECT_LE(std::abs(d.cycles_err), 0.005)
        << "fast-forward " << d.fast.sim.cycles << " vs exact " << d.exact.sim.cycles << " ("
        << d.fast.sim.fast_forward.jumps << " jumps)";
    EXPECT_EQ(d.counters, "");
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, FastForwardVsExact, ::testing::ValuesIn(all_variants()),
                         [](const auto& info) {
                           return info.param.kernel + "_" + info.param.variant;
                         });

TEST(FastForwardVsExact, JumpsOnLongSteadyLoops) {
  // The suite above proves nothing about jumps that never happen: these shapes must jump.
  // (FA jumps from S=32K on, too slow for this suite: bench BM_FastForwardVsExact.)
  for (auto [kernel, variant, p] :
       std::vector<std::tuple<std::string, std::string, driver::RawParams>>{
           {"softmax", "tile", {{"R", "65536"}, {"C", "512"}}},
           {"softmax", "tile", {{"R", "100000"}, {"C", "128"}}}}) {
    auto d = driver::run_differential(kernels::find_kernel(kernel), variant, p, testing::a3());
    EXPECT_GE(d.fast.sim.fast_forward.jumps, 1) << kernel;
    EXPECT_LE(std::abs(d.cycles_err), 0.005) << kernel;
  }
}

TEST(FastForwardVsExact, NeverJumpsWhenTheL2TrafficChangesPhase) {
  // GEMM's tile loop re-reads panels that the L2 holds or has evicted depending on where the
  // walk is: the window's traffic does not repeat, so the run stays exact.
  auto d = driver::run_differential(kernels::find_kernel("gemm"), "expert",
                                    {{"M", "2048"}, {"N", "2048"}, {"K", "2048"}}, testing::a3());
  EXPECT_EQ(d.fast.sim.cycles, d.exact.sim.cycles);
}

}  // namespace
}  // namespace tilepipe

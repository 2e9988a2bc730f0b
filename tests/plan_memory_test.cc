// MEMORY_PLANNING: buffers with disjoint live ranges share bytes (golden placement), the
// reuse is synced and gives the same values race-free, pinned addresses stay, overflows
// name the live buffers at the peak and the slot count that fits, hand-synced kernels keep
// their layout.
#include "passes/plan_memory.h"
#include "passes/dependence.h"

#include <gtest/gtest.h>

#include "passes/auto_sync.h"
#include "registry.h"
#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

using namespace lang;

/// Two phases over the same rows: y = x + 1 through `a`, then z = 3 * x through `b`.
ir::Program two_phases(int64_t tiles, int64_t cols, bool pin = false) {
  KernelBuilder kb("phases", 1);
  auto x = kb.input("x", {2, tiles, cols}, f32);
  auto y = kb.output("y", {2, tiles, cols}, f32);
  auto z = kb.output("z", {2, tiles, cols}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {cols}, f32);
    auto b = alloc_ub("b", {cols}, f32);
    auto keep = alloc_ub("keep", {8}, f32);
    if (pin) pin_address(keep, 1024);
    tile::fill(keep, 0.0);
    serial(tiles, [&](Ex i) {
      copy(x(vid, i, all), a);
      tile::add(a, a, 1.0);
      copy(a, y(vid, i, all));
    });
    serial(tiles, [&](Ex i) {
      copy(x(vid, i, all), b);
      tile::mul(b, b, 3.0);
      copy(b, z(vid, i, all));
    });
    copy(keep, y(vid, 0, slice(0, 8)));
  });
  return kb.finish();
}

ir::Program planned(const ir::Program& p) {
  verify_or_throw(p, testing::a3(), VerifyOptions{false});
  auto out = passes::plan_memory(p, testing::a3(), {});
  verify_or_throw(out, testing::a3());
  return out;
}

std::string allocs(const ir::Program& p) {
  std::string all = ir::print(p), out;
  size_t at = 0;
  while ((at = all.find("alloc ", at)) != std::string::npos) {
    size_t end = all.find('\n', at);
    out += all.substr(at, end - at) + "\n";
    at = end;
  }
  return out;
}

TEST(PlanMemory, BuffersOfDisjointPhasesShareBytes) {
  EXPECT_EQ(allocs(planned(two_phases(3, 64))), R"(alloc a: UB f32[64] @0
alloc b: UB f32[64] @0
alloc keep: UB f32[8] @256
)");
}

TEST(PlanMemory, PinnedAddressesAreKept) {
  EXPECT_EQ(allocs(planned(two_phases(3, 64, /*pin=*/true))), R"(alloc a: UB f32[64] @0
alloc b: UB f32[64] @0
alloc keep: UB f32[8] @1024
)");
}

TEST(PlanMemory, ReuseFitsWhatTheSequentialLayoutRejects) {
  // a and b are 128 KiB each: 256 KiB in sequence, 128 KiB with reuse.
  auto p = two_phases(1, 32768);
  testing::expect_diag(p, "capacity", {"UB overflow on AIV"});
  EXPECT_EQ(allocs(planned(p)), R"(alloc a: UB f32[32768] @0
alloc b: UB f32[32768] @0
alloc keep: UB f32[8] @131072
)");
}

TEST(PlanMemory, ReusedBytesAreSyncedAndGiveTheSameValuesRaceFree) {
  for (int64_t tiles : {1, 3}) {
    auto p = passes::auto_sync(planned(two_phases(tiles, 64)), testing::a3(), {});
    verify_or_throw(p, testing::a3());
    auto low = lower::lower(p, testing::a3());
    sim::HostData io;
    std::vector<double> x(static_cast<size_t>(2 * tiles * 64));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 11);
    io["x"] = x;
    sim::SimOptions o;
    o.detect_races = true;
    sim::simulate(low, testing::a3(), &io, o);
    for (size_t i = 0; i < x.size(); ++i) {
      bool kept = i % static_cast<size_t>(tiles * 64) < 8;  // row 0 gets keep = 0
      ASSERT_EQ(io.at("y")[i], kept ? 0 : x[i] + 1) << i;
      ASSERT_EQ(io.at("z")[i], 3 * x[i]) << i;
    }
  }
}

TEST(PlanMemory, OverflowNamesTheLiveBuffersAndTheSlotsThatFit) {
  KernelBuilder kb("big", 1);
  auto x = kb.input("x", {8, 64, 128}, f32);
  int line = 0;
  scope_v([&] {
    line = __LINE__ + 1;
    auto ring = alloc_ub("ring", {8, 64, 128}, f32);  // 8 slots x 32 KiB
    auto acc = alloc_ub("acc", {64, 64}, f32);        // 16 KiB
    tile::fill(acc, 0.0);
    serial(8, [&](Ex i) {
      copy(x(i, all, all), ring[i]);
      tile::add(acc, acc, ring(i, all, slice(0, 64)));
    });
  });
  auto p = kb.finish();
  testing::expect_user_error(
      [&] { planned(p); },
      {"UB overflow on AIV", "272.0 KiB needed", "ring", "8 slots x 32.0 KiB", "acc",
       "plan_memory_test.cc:" + std::to_string(line), "multi-buffers of at most 5 slots fit"});
}

TEST(PlanMemory, HandSyncedKernelsKeepTheSequentialLayout) {
  for (const auto& k : kernels::all_kernels()) {
    auto params = kernels::resolve_params(k, {});
    for (const auto& v : k.variants) {
      SCOPED_TRACE(k.name + " " + v);
      auto p = k.build(params, v);
      if (!passes::has_hand_sync(p.body)) continue;  // automatic kernels (fa auto)
      EXPECT_TRUE(ir::equal(passes::plan_memory(p, testing::a3(), {}), p));
    }
  }
}

}  // namespace
}  // namespace tilepipe

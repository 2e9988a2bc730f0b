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

TEST(PlanMemory, AValueMadeInALoopAndReadAfterItLivesThroughTheWholeLoop) {
  // c gets one row per iteration and is read after the loop; t is scratch of one iteration.
  // Row 0 of c is written in iteration 0 and must survive iterations 1..3, whose t comes
  // before the row's write in program order: t and c must not share bytes.
  KernelBuilder kb("rows", 1);
  auto y = kb.output("y", {2, 4, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto c = alloc_ub("c", {4, 64}, f32);
    serial(4, [&](Ex i) {
      auto t = alloc_ub("t", {64}, f32);
      tile::fill(t, 1.0);
      tile::add(c(i, all), t, t);
    });
    copy(c, y(vid, all, all));
  });
  EXPECT_EQ(allocs(planned(kb.finish())), R"(alloc c: UB f32[4, 64] @0
alloc t: UB f32[64] @1024
)");
}

TEST(PlanMemory, RingSlotsStayLiveOverTheirLoopSoIterationsOverlap) {
  // ring[j % 2] is written and read in the same iteration, after t's last use (no value is
  // carried), but the two slots are there so that iteration j + 1's load overlaps
  // iteration j's work: they must not share bytes with the loop's scratch t.
  KernelBuilder kb("ring", 1);
  auto x = kb.input("x", {2, 4, 64}, f32);
  auto y = kb.output("y", {2, 4, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto ring = alloc_ub("ring", {2, 64}, f32);
    serial(4, [&](Ex j) {
      auto t = alloc_ub("t", {64}, f32);
      copy(x(vid, j, all), t);
      copy(t, y(vid, j, all));
      copy(x(vid, j, all), ring(j % 2, all));
      copy(ring(j % 2, all), y(vid, j, all));
    });
  });
  EXPECT_EQ(allocs(planned(kb.finish())), R"(alloc ring: UB f32[2, 64] @0
alloc t: UB f32[64] @512
)");
}

TEST(PlanMemory, AValueOverwrittenAfterALoopIsNotWidenedOverIt) {
  // b is used in the second loop and overwritten whole after it: its value does not leave
  // the loop, so it may share bytes with the first loop's a.
  KernelBuilder kb("after", 1);
  auto x = kb.input("x", {2, 4, 64}, f32);
  auto y = kb.output("y", {2, 4, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f32);
    auto b = alloc_ub("b", {64}, f32);
    serial(2, [&](Ex o) {
      serial(2, [&](Ex i) {
        copy(x(vid, o * 2 + i, all), a);
        copy(a, y(vid, o * 2 + i, all));
      });
      serial(2, [&](Ex i) {
        copy(x(vid, o * 2 + i, all), b);
        copy(b, y(vid, o * 2 + i, all));
      });
    });
    tile::fill(b, 0.0);
    copy(b, y(vid, 0, all));
  });
  EXPECT_EQ(allocs(planned(kb.finish())), R"(alloc a: UB f32[64] @0
alloc b: UB f32[64] @0
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

/// A hand-synced Vector kernel of two phases over n-element buffers (128 KiB each by
/// default, 256 KiB in sequence): y = x + 1 through `a`, then z = 3 * x through `b`, with
/// the author's flags inside each phase, repeated `tiles` times in a loop. `order` adds
/// MTE3 -> MTE2 flags: 1 orders phase 1's copy-out of `a` before phase 2's load into `b`,
/// 2 also phase 2's copy-out before the next iteration's load into `a`.
ir::Program hand_phases(int order, int64_t tiles = 1, int64_t n = 32768) {
  KernelBuilder kb("hand_phases", 1);
  auto x = kb.input("x", {2, tiles, n}, f32);
  auto y = kb.output("y", {2, tiles, n}, f32);
  auto z = kb.output("z", {2, tiles, n}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {n}, f32);
    auto b = alloc_ub("b", {n}, f32);
    serial(tiles, [&](Ex i) {
      copy(x(vid, i, all), a);
      set_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      tile::add(a, a, 1.0);
      set_flag(Pipe::V, Pipe::MTE3, 0);
      wait_flag(Pipe::V, Pipe::MTE3, 0);
      copy(a, y(vid, i, all));
      if (order >= 1) {
        set_flag(Pipe::MTE3, Pipe::MTE2, 0);
        wait_flag(Pipe::MTE3, Pipe::MTE2, 0);
      }
      copy(x(vid, i, all), b);
      set_flag(Pipe::MTE2, Pipe::V, 1);
      wait_flag(Pipe::MTE2, Pipe::V, 1);
      tile::mul(b, b, 3.0);
      set_flag(Pipe::V, Pipe::MTE3, 1);
      wait_flag(Pipe::V, Pipe::MTE3, 1);
      copy(b, z(vid, i, all));
      if (order >= 2) {  // round the loop: phase 2's copy-out before the next load into a
        set_flag(Pipe::MTE3, Pipe::MTE2, 1);
        wait_flag(Pipe::MTE3, Pipe::MTE2, 1);
      }
    });
  });
  return kb.finish();
}

TEST(PlanMemory, HandSyncedReuseWhereTheAuthorsFlagsOrderIt) {
  // 256 KiB in sequence; the flags order a's last use before b's first: they share bytes.
  EXPECT_EQ(allocs(planned(hand_phases(2))), R"(alloc a: UB f32[32768] @0
alloc b: UB f32[32768] @0
)");
  // The same values, race-free, also round a loop (each phase waits for the other's
  // copy-out through the author's MTE3 -> MTE2 flags).
  for (int64_t tiles : {1, 3}) {
    auto p = planned(hand_phases(2, tiles));
    auto low = lower::lower(p, testing::a3());
    sim::HostData io;
    std::vector<double> x(static_cast<size_t>(2 * tiles * 32768));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 13);
    io["x"] = x;
    sim::SimOptions o;
    o.detect_races = true;
    sim::simulate(low, testing::a3(), &io, o);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(io.at("y")[i], x[i] + 1) << i;
      ASSERT_EQ(io.at("z")[i], 3 * x[i]) << i;
    }
  }
}

TEST(PlanMemory, HandSyncedBuffersTheFlagsDoNotOrderStayApart) {
  // Without the MTE3 -> MTE2 flag, b's load could overwrite a while MTE3 still copies it
  // out: no reuse, so the sequential layout's overflow stands.
  testing::expect_user_error([&] { planned(hand_phases(0)); },
                             {"UB overflow on AIV", "256.0 KiB needed", "a", "b"});
  // In a loop, the flag after phase 1 alone does not order phase 2 of iteration k before
  // the load into `a` of iteration k + 1.
  testing::expect_user_error([&] { planned(hand_phases(1, 3)); }, {"UB overflow on AIV"});
}

TEST(PlanMemory, HandSyncedLayoutThatFitsIsKept) {
  // The author's sequential layout fits: kept exactly, even where reuse would be safe.
  auto p = hand_phases(2, 3, 64);
  EXPECT_TRUE(ir::equal(passes::plan_memory(p, testing::a3(), {}), p));
}

TEST(PlanMemory, ReservedTailAdmitsTheAuthorsLayoutUpToThePhysicalSize) {
  // Three 64 KiB UB buffers: 196608 B, the physical UB, 256 B past the usable 196352.
  KernelBuilder kb("three", 1);
  auto x = kb.input("x", {2, 16384}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {16384}, f32);
    auto b = alloc_ub("b", {16384}, f32);
    auto c = alloc_ub("c", {16384}, f32);
    copy(x(vid, all), a);
    copy(x(vid, all), b);
    pipe_barrier(Pipe::MTE2);
    set_flag(Pipe::MTE2, Pipe::V, 0);
    wait_flag(Pipe::MTE2, Pipe::V, 0);
    tile::add(c, a, b);
  });
  auto p = kb.finish();
  testing::expect_user_error([&] { passes::plan_memory(p, testing::a3(), {}); },
                             {"UB overflow on AIV", "196608 bytes > 196352"});
  passes::PassOptions o;
  o.reserved_tail = true;
  auto out = passes::plan_memory(p, testing::a3(), o);
  EXPECT_TRUE(ir::equal(out, p));  // the sequential layout, unchanged
  VerifyOptions v;
  v.reserved_tail = true;
  verify_or_throw(out, testing::a3(), v);
  testing::expect_diag(out, "capacity", {"196608 bytes > 196352"});
  // Past the physical size it is still an overflow, named against the physical size.
  KernelBuilder kb2("four", 1);
  auto x2 = kb2.input("x", {2, 16384}, f32);
  auto [cid2, vid2] = kb2.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {16384}, f32);
    auto b = alloc_ub("b", {16384}, f32);
    auto c = alloc_ub("c", {16384}, f32);
    auto d = alloc_ub("d", {8}, f32);
    copy(x2(vid2, all), a);
    copy(x2(vid2, all), b);
    copy(x2(vid2, slice(0, 8)), d);
    set_flag(Pipe::MTE2, Pipe::V, 0);
    wait_flag(Pipe::MTE2, Pipe::V, 0);
    tile::add(c, a, b);
    tile::add(d, d, 1.0);
  });
  auto p2 = kb2.finish();
  testing::expect_user_error([&] { passes::plan_memory(p2, testing::a3(), o); },
                             {"UB overflow on AIV", "196640 bytes > 196608"});
  auto d = verify(p2, testing::a3(), v);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].message.find("196640 bytes > 196608, the physical size"), std::string::npos)
      << d[0].message;
}

TEST(PlanMemory, HandSyncedKernelsKeepTheSequentialLayout) {
  for (const auto& k : kernels::all_kernels()) {
    auto params = driver::resolve_params(k, {});
    for (const auto& v : k.variants) {
      SCOPED_TRACE(k.name + " " + v);
      auto p = k.build(params, v).program;
      if (!passes::has_hand_sync(p.body)) continue;  // automatic kernels (fa auto)
      EXPECT_TRUE(ir::equal(passes::plan_memory(p, testing::a3(), {}), p));
    }
  }
}

}  // namespace
}  // namespace tilepipe

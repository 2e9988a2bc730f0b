// Intra-core multi-buffering: a Pipelined loop's stage-crossing buffers get num_stages
// versions (golden IR), accumulators and single-pipe scratch keep one; through the whole
// pipeline the values match on any trip count (odd, fewer than stages, non-zero start)
// race-free, the pipes overlap, and too many stages stop with the capacity diagnostic.
#include "passes/multibuffer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

using namespace lang;

/// y = 2 x + 1 per 64-wide row, rows [begin, begin + tiles) of each AIV; `acc` sums rows
/// (carried across iterations) and `tmp` is V-only scratch.
ir::Program pipelined_stream(int64_t begin, int64_t tiles, int ns, int64_t cols = 64) {
  KernelBuilder kb("pstream", 1);
  const int64_t rows_total = begin + tiles;
  auto x = kb.input("x", {2, rows_total, cols}, f32);
  auto y = kb.output("y", {2, rows_total, cols}, f32);
  auto s = kb.output("s", {2, cols}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto buf = alloc_ub("buf", {cols}, f32);
    auto tmp = alloc_ub("tmp", {cols}, f32);
    auto acc = alloc_ub("acc", {cols}, f32);
    tile::fill(acc, 0.0);
    auto& k = KernelBuilder::current();
    Ex i = k.begin_for("i", begin, rows_total, 1, ir::ForKind::Pipelined, PipelineOpts{ns, 1},
                       ir::Loc::from(std::source_location::current()));
    copy(x(vid, i, all), buf);
    tile::mul(tmp, buf, 2.0);
    tile::add(buf, tmp, 1.0);
    tile::add(acc, acc, buf);
    copy(buf, y(vid, i, all));
    k.end_for(ir::Loc::from(std::source_location::current()));
    copy(acc, s(vid, all));
  });
  return kb.finish();
}

ir::Program compiled(const ir::Program& p, passes::PassOptions o = {}) {
  verify_or_throw(p, testing::a3(), passes::verify_options(o));
  return passes::run_passes(p, testing::a3(), o);
}

TEST(Multibuffer, VersionsOnlyTheBufferThatCrossesPipes) {
  auto p = passes::multibuffer(pipelined_stream(0, 5, 3), testing::a3(), {});
  EXPECT_EQ(
      ir::print(p),
      R"(kernel pstream(x: GM f32[2, 5, 64] in, y: GM f32[2, 5, 64] out, s: GM f32[2, 64] out) block_num=1 {
  scope V {
    alloc tmp: UB f32[64]
    alloc acc: UB f32[64]
    tile.fill acc, 0.0
    alloc buf: UB f32[3, 64]
    for i in serial(0, 5) {
      copy x[vid:+1, i:+1, 0:+64] -> buf[(i % 3):+1, 0:+64]
      tile.mul tmp, buf[(i % 3):+1, 0:+64], 2.0
      tile.add buf[(i % 3):+1, 0:+64], tmp, 1.0
      tile.add acc, acc, buf[(i % 3):+1, 0:+64]
      copy buf[(i % 3):+1, 0:+64] -> y[vid:+1, i:+1, 0:+64]
    }
    copy acc -> s[vid:+1, 0:+64]
  }
}
)");
}

TEST(Multibuffer, MatchesReferenceRaceFreeOnAnyTripCount) {
  for (int64_t begin : {0, 2})
    for (int64_t tiles : {1, 2, 3, 7})
      for (int ns : {1, 2, 3, 4}) {
        SCOPED_TRACE(fmt::format("begin={} tiles={} num_stages={}", begin, tiles, ns));
        auto p = compiled(pipelined_stream(begin, tiles, ns));
        auto low = lower::lower(p, testing::a3());
        const int64_t rows = begin + tiles;
        std::vector<double> x(static_cast<size_t>(2 * rows * 64));
        for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<double>(e % 13) - 4;
        sim::HostData io{{"x", x}};
        sim::SimOptions o;
        o.detect_races = true;
        sim::simulate(low, testing::a3(), &io, o);
        for (int64_t v = 0; v < 2; ++v)
          for (int64_t c = 0; c < 64; ++c) {
            double sum = 0;
            for (int64_t r = begin; r < rows; ++r) {
              size_t at = static_cast<size_t>((v * rows + r) * 64 + c);
              ASSERT_EQ(io.at("y")[at], 2 * x[at] + 1);
              sum += 2 * x[at] + 1;
            }
            ASSERT_EQ(io.at("s")[static_cast<size_t>(v * 64 + c)], sum);
          }
      }
}

TEST(Multibuffer, StagesOverlapThePipes) {
  auto cycles = [](int ns) {
    auto low = lower::lower(compiled(pipelined_stream(0, 64, ns, 4096)), testing::a3());
    sim::HostData io;
    sim::SimOptions o;
    o.mode = sim::Mode::Timing;
    return sim::simulate(low, testing::a3(), &io, o).cycles;
  };
  double one = cycles(1), two = cycles(2);
  EXPECT_LT(two, 0.85 * one) << one << " vs " << two;
}

TEST(Multibuffer, TooManyStagesStopWithTheCapacityDiagnostic) {
  // buf is 32 KiB per slot; with tmp and acc (64 KiB) 4 slots fit in 191.75 KiB, 8 do not.
  EXPECT_NO_THROW(compiled(pipelined_stream(0, 8, 3, 8192)));
  testing::expect_user_error(
      [] { compiled(pipelined_stream(0, 8, 8, 8192)); },
      {"UB overflow on AIV", "buf", "8 slots x 32.0 KiB", "multi-buffers of at most 3 slots fit"});
}

TEST(Multibuffer, PipelinedLoopInAHandSyncedScopeIsAnError) {
  KernelBuilder kb("k", 1);
  int line = 0;
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f32);
    set_flag(Pipe::V, Pipe::MTE2, 0);
    wait_flag(Pipe::V, Pipe::MTE2, 0);
    line = __LINE__ + 1;
    pipelined(4, {.num_stages = 2}, [&](Ex) { tile::relu(u, u); });
  });
  auto p = kb.finish();
  testing::expect_user_error([&] { compiled(p); },
                             {"Pipelined loop in a scope with hand-written flags",
                              "multibuffer_test.cc:" + std::to_string(line)});
}

TEST(Multibuffer, SwitchedOffPipelinedLoopIsAnErrorNotASerialLoop) {
  passes::PassOptions o;
  o.multibuffer = false;
  testing::expect_user_error([&] { compiled(pipelined_stream(0, 4, 2), o); },
                             {"was not pipelined", "would silently run serially"});
}

}  // namespace
}  // namespace tilepipe

// The advisor's test set: small kernels each with a known best hand fix (a serial loop
// that should be pipelined, a missing multi-buffer, loads and tile ops recomputed in every
// iteration, a serial reduction loop). For each, the advisor's FIRST suggestion must be that
// fix, at the loop's own line, and its shown gain must equal the gain of the hand-fixed
// kernel run on its own. Also: the loop analyses refuse what moving would change, balance
// advice only on unbalanced launches, and on an already-good kernel (FA expert) every
// suggestion's gain is what re-running the suggested change gives.
#include <gtest/gtest.h>

#include <cmath>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/advisor.h"
#include "tilepipe/driver.h"
#include "tilepipe/lang.h"
#include "tilepipe/loop_edits.h"

namespace tilepipe {
namespace {

using namespace lang;
using testing::a3;

/// How the kernel is written: its tile loop and the work in it.
struct Form {
  int stages = 0;              // 0: serial; else pipelined with that many stages
  bool bias_in_loop = false;   // the bias row loaded from GM inside the loop
  bool scale_in_loop = false;  // the scale tile made (a fill and an exp) inside the loop
  bool reduce = false;         // column sums (a carried accumulator) instead of a stream
  int64_t blocks = 24;         // AI cores launched (2: the die's bandwidth is not the limit)
  bool bias_first = true;      // before the loop: the bias load, then the scale (or after)
};

int g_loop_line = 0;  // the line of the tile loop below (the advice must name it)

/// y[r, t] = (x[r, t] + bias) * exp(-0.5) per row r of each AIV over `tiles` tiles (or, `reduce`,
/// s[r] = the sum of x[r, t] over t), in an automatic Vector scope.
ir::Program tile_kernel(const Form& f) {
  constexpr int64_t kTiles = 16, kCols = 4096;
  KernelBuilder kb("tiles", f.blocks);
  auto x = kb.input("x", {f.blocks * 2, kTiles, kCols}, f32);
  auto b = kb.input("b", {kCols}, f32);
  auto y = kb.output("y", {f.blocks * 2, kTiles, kCols}, f32);
  auto s = kb.output("s", {f.blocks * 2, kCols}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto buf = alloc_ub("buf", {kCols}, f32);
    auto out = alloc_ub("out", {kCols}, f32);
    auto bias = alloc_ub("bias", {kCols}, f32);
    auto half = alloc_ub("half", {kCols}, f32);
    auto scale = alloc_ub("scale", {kCols}, f32);
    auto acc = alloc_ub("acc", {kCols}, f32);
    Ex row = cid * 2 + vid;
    auto load_bias = [&] { copy(b(all), bias); };
    auto make_scale = [&] {
      tile::fill(half, -0.5);
      tile::exp(scale, half);
    };
    if (f.reduce) tile::fill(acc, 0.0);
    if (!f.bias_in_loop && f.bias_first) load_bias();
    if (!f.scale_in_loop) make_scale();
    if (!f.bias_in_loop && !f.bias_first) load_bias();
    auto body = [&](Ex t) {
      if (f.bias_in_loop) load_bias();
      if (f.scale_in_loop) make_scale();
      copy(x(row, t, all), buf);
      if (f.reduce) {
        tile::add(acc, acc, buf);
        return;
      }
      tile::add(out, buf, bias);
      tile::mul(out, out, scale);
      copy(out, y(row, t, all));
    };
    const SrcLoc here = SrcLoc::current();
    g_loop_line = static_cast<int>(here.line());
    if (f.stages == 0)
      serial(kTiles, body, here);
    else
      pipelined(kTiles, {.num_stages = f.stages}, body, here);
    if (f.reduce) copy(acc, s(row, all));
  });
  return kb.finish();
}

/// A source with two variants: the kernel as written and as the hand fix writes it.
driver::KernelSource source(const Form& written, const Form& fixed) {
  driver::KernelSource k;
  k.name = "tiles";
  k.variants = {"written", "fixed"};
  k.build = [written, fixed](const driver::Params&, const std::string& v) -> driver::Built {
    return tile_kernel(v == "fixed" ? fixed : written);
  };
  return k;
}

double cycles(const driver::KernelSource& k, const std::string& variant) {
  driver::RunRequest r;
  r.variant = variant;
  r.mode = sim::Mode::Timing;
  return driver::run_kernel(k, r, a3()).sim.cycles;
}

driver::ProfileReport profile(const driver::KernelSource& k, const std::string& variant,
                              const driver::RawParams& raw = {}) {
  driver::RunRequest r;
  r.variant = variant;
  r.params = driver::resolve_params(k, raw);
  r.mode = sim::Mode::Timing;
  return driver::profile_kernel(k, r, a3(), prof::load_rules());
}

double gain_pct(double base, double fixed) {
  return std::round(100 * 100 * (base - fixed) / base) / 100;
}

struct Case {
  std::string name;
  Form written, fixed;
  std::string rule;  // the advice that is the hand fix
};

class FirstSuggestion : public ::testing::TestWithParam<Case> {};

TEST_P(FirstSuggestion, IsTheHandFixWithItsMeasuredGain) {
  const Case& c = GetParam();
  auto k = source(c.written, c.fixed);
  auto rep = profile(k, "written");
  ASSERT_FALSE(rep.advice.empty());
  const auto& first = rep.advice.front();
  std::string all;
  for (const auto& a : rep.advice) all += a.id + " " + a.status + " " + a.text + "\n";
  EXPECT_EQ(first.id, c.rule) << all;
  EXPECT_EQ(first.status, "verified");
  EXPECT_EQ(first.file, "advisor_cases_test.cc");
  EXPECT_EQ(first.line, g_loop_line) << first.text;
  const double base = rep.run.sim.cycles, fixed = cycles(k, "fixed");
  EXPECT_LT(fixed, base);
  EXPECT_DOUBLE_EQ(first.verified_gain_pct, gain_pct(base, fixed)) << all;
}

INSTANTIATE_TEST_SUITE_P(
    Advisor, FirstSuggestion,
    ::testing::Values(Case{"serial_stream", {.stages = 0}, {.stages = 2}, "pipeline_serial_loop"},
                      Case{"one_stage", {.stages = 1}, {.stages = 2}, "pipeline_serial_loop"},
                      Case{"serial_reduction",
                           {.stages = 0, .reduce = true},
                           {.stages = 2, .reduce = true},
                           "pipeline_serial_loop"},
                      // The hand fix moves the load to just before the loop (after the scale).
                      Case{"bias_load_in_loop",
                           {.stages = 2, .bias_in_loop = true, .blocks = 2},
                           {.stages = 2, .blocks = 2, .bias_first = false},
                           "hoist_invariant"},
                      Case{"one_stage_reduction",
                           {.stages = 1, .reduce = true},
                           {.stages = 2, .reduce = true},
                           "pipeline_serial_loop"},
                      Case{"load_and_fill_in_loop",
                           {.stages = 2, .bias_in_loop = true, .scale_in_loop = true, .blocks = 2},
                           {.stages = 2, .blocks = 2},
                           "hoist_invariant"}),
    [](const auto& info) { return info.param.name; });

TEST(AdvisorCases, WithTwoFixesTheFirstSuggestionIsTheOneThatGainsMore) {
  // Serial and with its invariant work inside: each fix alone, by hand; the first
  // suggestion is the better of the two, with that one's gain.
  const Form written{.stages = 0, .bias_in_loop = true, .scale_in_loop = true, .blocks = 2};
  auto pipelined =
      source(written, {.stages = 2, .bias_in_loop = true, .scale_in_loop = true, .blocks = 2});
  auto hoisted = source(written, {.stages = 0, .blocks = 2});
  auto rep = profile(pipelined, "written");
  const double base = rep.run.sim.cycles;
  const double by_pipeline = cycles(pipelined, "fixed"), by_hoist = cycles(hoisted, "fixed");
  ASSERT_GE(rep.advice.size(), 2u);
  const bool pipeline_best = by_pipeline < by_hoist;
  EXPECT_EQ(rep.advice[0].id, pipeline_best ? "pipeline_serial_loop" : "hoist_invariant");
  EXPECT_DOUBLE_EQ(rep.advice[0].verified_gain_pct,
                   gain_pct(base, pipeline_best ? by_pipeline : by_hoist));
  EXPECT_EQ(rep.advice[1].id, pipeline_best ? "hoist_invariant" : "pipeline_serial_loop");
  EXPECT_DOUBLE_EQ(rep.advice[1].verified_gain_pct,
                   gain_pct(base, pipeline_best ? by_hoist : by_pipeline));
}

// ---------------------------------------------------------------------------------------
// The loop analyses: what moving or pipelining would change is left alone.

TEST(LoopEdits, OnlyWorkThatNeverChangesIsInvariant) {
  auto p = tile_kernel({.stages = 2, .bias_in_loop = true, .scale_in_loop = true});
  auto sites = passes::loop_invariant_work(p);
  ASSERT_EQ(sites.size(), 1u);
  // The bias load, the fill and the exp of what the fill wrote (moved with it); not the
  // tile's load, the add or the in-place mul.
  EXPECT_EQ(sites[0].stmts.size(), 3u) << sites[0].what;
  auto hoisted = passes::hoist(p, sites[0]);
  EXPECT_TRUE(passes::loop_invariant_work(hoisted).empty());
  EXPECT_TRUE(ir::equal(hoisted, tile_kernel({.stages = 2})));
  // A written-in-place accumulator and the stream's own loads are never invariant.
  EXPECT_TRUE(passes::loop_invariant_work(tile_kernel({.stages = 0, .reduce = true})).empty());
}

TEST(LoopEdits, WorkReadingWhatTheLoopWritesOrItsVariableStays) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {8, 64}, f32);
  auto y = kb.output("y", {8, 64}, f32);
  kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f32);
    auto c = alloc_ub("c", {64}, f32);
    auto d = alloc_ub("d", {64}, f32);
    serial(8, [&](Ex i) {
      tile::add(d, c, 1.0);  // reads c, written later in the loop: stays
      copy(x(i, all), a);
      tile::mul(c, a, 2.0);  // reads the tile: stays
      copy(c, y(i, all));
      tile::exp(a, d);  // writes a, which the loop also loads: stays
    });
  });
  auto p = kb.finish();
  EXPECT_TRUE(passes::loop_invariant_work(p).empty());
  auto loops = passes::serial_tile_loops(p);
  ASSERT_EQ(loops.size(), 1u);
  auto piped = passes::pipeline_loop(p, loops[0], 2);
  EXPECT_TRUE(passes::serial_tile_loops(piped).empty());
}

TEST(LoopEdits, HandSyncedLoopsAreNotEdited) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {8, 64}, f32);
  auto y = kb.output("y", {8, 64}, f32);
  kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f32);
    auto c = alloc_ub("c", {64}, f32);
    serial(8, [&](Ex i) {
      tile::fill(c, 1.0);
      copy(x(i, all), a);
      pipe_barrier(ir::Pipe::V);
      tile::add(a, a, c);
      copy(a, y(i, all));
    });
  });
  auto p = kb.finish();
  EXPECT_TRUE(passes::loop_invariant_work(p).empty());
  EXPECT_TRUE(passes::serial_tile_loops(p).empty());
}

// ---------------------------------------------------------------------------------------
// Balance advice only when the blocks are unbalanced, and saying why.

TEST(AdvisorCases, BalanceAdviceOnlyOnAnUnbalancedLaunch) {
  const auto& k = kernels::find_kernel("elementwise");
  auto ids = [&](const std::string& blocks) {
    std::set<std::string> out;
    for (const auto& a : profile(k, "add", {{"block_num", blocks}}).advice) out.insert(a.id);
    return out;
  };
  for (const char* balanced : {"24", "48", "8"}) {
    SCOPED_TRACE(balanced);
    auto got = ids(balanced);
    EXPECT_FALSE(got.count("balance_tasks") || got.count("balance_work"));
  }
  auto uneven = ids("30");  // 6 cores run two blocks, 18 run one
  EXPECT_TRUE(uneven.count("balance_tasks"));
  EXPECT_FALSE(uneven.count("balance_work"));
}

// ---------------------------------------------------------------------------------------
// An already-good kernel: every suggestion that claims a gain has it when re-run.

TEST(AdvisorCases, FaExpertClaimsNoGainItDoesNotVerify) {
  const auto& k = kernels::find_kernel("fa");
  const driver::RawParams raw = {{"S", "2048"}, {"H", "4"}};
  auto rep = profile(k, "expert", raw);
  const double base = rep.run.sim.cycles;
  for (const auto& a : rep.advice) {
    SCOPED_TRACE(a.id + ": " + a.text);
    if (a.status == "verified" || a.status == "rejected") {
      EXPECT_GE(a.verified_gain_pct, prof::load_rules().min_verified_gain_pct);
      if (a.param) {  // a knob: the suggested value, run as any run
        driver::RawParams moved = raw;
        moved[*a.param] = std::to_string(a.to);
        driver::RunRequest r;
        r.variant = "expert";
        r.params = driver::resolve_params(k, moved);
        r.mode = sim::Mode::Timing;
        EXPECT_DOUBLE_EQ(a.verified_gain_pct,
                         gain_pct(base, driver::run_kernel(k, r, a3()).sim.cycles));
      }
    } else {
      EXPECT_FALSE(a.param) << "knob advice is always verified";
      EXPECT_EQ(a.verified_gain_pct, 0);
    }
  }
}

}  // namespace
}  // namespace tilepipe

// Evidence counters (cycle accounts sum to the span, lower bound <= timed run, re-loaded
// bytes), the advice rules (table-driven: each rule fires on a crafted profile and its
// neighbours stay silent), the tuner (pruning, rejection, cache, worker-count
// independence) and the HTML report (self-contained, well-formed SVG, expected sections).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/advisor.h"
#include "tilepipe/driver.h"
#include "tilepipe/html.h"
#include "tilepipe/prof.h"
#include "tilepipe/tune.h"

namespace tilepipe {
namespace {

using nlohmann::json;
using testing::a3;

driver::RunReport run_timing(const std::string& kernel, const std::string& variant,
                             const std::map<std::string, std::string>& raw,
                             bool lower_bound = false) {
  const auto& k = kernels::find_kernel(kernel);
  driver::RunRequest req;
  req.variant = variant;
  req.params = driver::resolve_params(k, raw);
  req.mode = sim::Mode::Timing;
  req.lower_bound_only = lower_bound;
  return driver::run_kernel(k, req, a3());
}

bool has_pipe(ir::CoreKind k, ir::Pipe p) {
  using ir::Pipe;
  if (p == Pipe::S || p == Pipe::MTE2) return true;
  if (k == ir::CoreKind::C) return p == Pipe::M || p == Pipe::MTE1 || p == Pipe::FIX;
  return p == Pipe::V || p == Pipe::MTE3;
}

// ---------------------------------------------------------------------------------------
// Evidence in the simulator

TEST(Evidence, CycleAccountOfEveryPipeSumsToTheSpan) {
  for (auto [kernel, variant, raw] :
       std::vector<std::tuple<std::string, std::string, std::map<std::string, std::string>>>{
           {"fa", "baseline", {{"S", "512"}, {"H", "2"}}},
           {"fa", "expert", {{"S", "1024"}, {"H", "4"}}},
           {"gemm", "expert", {}},
           {"elementwise", "add", {}}}) {
    SCOPED_TRACE(kernel + "/" + variant);
    auto rep = run_timing(kernel, variant, raw);
    ASSERT_GT(rep.sim.cycles, 0);
    for (const auto& c : rep.sim.cores)
      for (int p = 0; p < ir::kNumPipes; ++p) {
        if (!has_pipe(c.kind, static_cast<ir::Pipe>(p))) continue;
        const auto& st = c.pipes[static_cast<size_t>(p)];
        EXPECT_NEAR(st.account.sum(), rep.sim.cycles, 1e-6 * rep.sim.cycles)
            << c.name << " " << ir::to_string(static_cast<ir::Pipe>(p));
        EXPECT_NEAR(st.account.busy, st.busy_cycles, 1e-6 * rep.sim.cycles + 1e-9);
      }
  }
}

TEST(Evidence, BarriersAndCrossWaitsAreAccounted) {
  auto base = run_timing("fa", "baseline", {{"S", "512"}, {"H", "2"}});
  double barrier = 0, cross = 0;
  for (const auto& c : base.sim.cores)
    for (const auto& st : c.pipes) {
      barrier += st.account.barrier;
      cross += st.account.cross;
    }
  EXPECT_GT(barrier, 0);  // baseline has a barrier after every op
  EXPECT_GT(cross, 0);
  EXPECT_GT(base.sim.c2v.sets, 0);
  EXPECT_GT(base.sim.v2c.waits, 0);
  auto multibuf = run_timing("fa", "multibuf", {{"S", "512"}, {"H", "2"}});
  double barrier2 = 0;
  for (const auto& c : multibuf.sim.cores)
    for (const auto& st : c.pipes) barrier2 += st.account.barrier;
  EXPECT_EQ(barrier2, 0);
}

TEST(Evidence, LowerBoundModeNeverExceedsTheTimedRun) {
  for (auto variant : {"baseline", "multibuf", "expert"}) {
    SCOPED_TRACE(variant);
    std::map<std::string, std::string> raw = {{"S", "1024"}, {"H", "4"}};
    double timed = run_timing("fa", variant, raw).sim.cycles;
    auto lb = run_timing("fa", variant, raw, true);
    EXPECT_TRUE(lb.sim.lower_bound);
    EXPECT_GT(lb.sim.cycles, 0.2 * timed);
    EXPECT_LE(lb.sim.cycles, timed);
  }
}

TEST(Evidence, QReloadedPerKvTileShowsAsReloadedBytes) {
  std::map<std::string, std::string> raw = {{"S", "1024"}, {"H", "2"}};
  auto reloaded = [&](const std::string& v) {
    double b = 0;
    for (const auto& c : run_timing("fa", v, raw).sim.cores)
      b += c.pipes[static_cast<size_t>(ir::Pipe::MTE2)].reloaded_bytes;
    return b;
  };
  // Baseline reloads Q for every KV tile; l1_vec keeps it in L1 (K/V still re-read).
  EXPECT_GT(reloaded("baseline"), 1.2 * reloaded("l1_vec"));
}

TEST(Evidence, ProgramPatternsAndKnobMetadata) {
  const auto& k = kernels::find_kernel("fa");
  auto evidence = [&](const std::string& v) {
    prof::Recorder rec;
    driver::RunRequest req;
    req.variant = v;
    req.params = driver::resolve_params(k, {{"S", "512"}, {"H", "2"}});
    req.mode = sim::Mode::Timing;
    req.observer = &rec;
    auto rep = driver::run_kernel(k, req, a3());
    return prof::gather_evidence(rep.sim, rep.lowered, a3(), rec);
  };
  auto base = evidence("baseline");
  EXPECT_FALSE(base.scalar_loops.empty());
  EXPECT_FALSE(base.barriers_in_loops.empty());
  auto sync2 = evidence("sync2");
  EXPECT_TRUE(sync2.scalar_loops.empty());
  EXPECT_TRUE(sync2.barriers_in_loops.empty());
  ASSERT_EQ(sync2.unfused.size(), 1u);  // tile.mul(work, scale) + tile.add(buf2d, work)
  EXPECT_TRUE(evidence("expert").unfused.empty());
  ASSERT_EQ(sync2.knobs.size(), 2u);
  EXPECT_EQ(sync2.knobs[0].param, "num_stages");
  EXPECT_EQ(sync2.knobs[0].value, 8);
  EXPECT_EQ(sync2.knobs[1].role, "sync_interval");
  EXPECT_EQ(sync2.knobs[1].value, 2);
  EXPECT_NE(sync2.knobs[0].loc.str().find("fa.cc:"), std::string::npos);
}

// ---------------------------------------------------------------------------------------
// Advice rules, table-driven

struct Crafted {
  prof::Summary s;
  prof::Evidence e;
};

sim::CycleAccount account(double busy, double span) {
  sim::CycleAccount a;
  a.busy = busy;
  a.tail = span - busy;
  return a;
}

/// A profile on which no actionable rule fires.
Crafted neutral() {
  Crafted c;
  const double span = 1000;
  c.s.cycles = c.e.span = span;
  c.s.bound = "V";
  c.s.verdict = "latency-pipeline";
  for (auto p : {"M", "V", "MTE1", "MTE2", "MTE3", "FIX", "S"}) {
    prof::PipeSummary ps;
    ps.pipe = p;
    ps.busy_pct = std::string(p) == "M" || std::string(p) == "V" ? 50 : 20;
    c.s.pipes.push_back(ps);
  }
  for (auto [kind, pipe, busy] :
       std::vector<std::tuple<std::string, std::string, double>>{{"AIC", "M", 500},
                                                                 {"AIC", "MTE2", 200},
                                                                 {"AIC", "S", 50},
                                                                 {"AIV", "V", 500},
                                                                 {"AIV", "MTE2", 200},
                                                                 {"AIV", "S", 50}}) {
    prof::Evidence::Account a;
    a.kind = kind;
    a.pipe = pipe;
    a.cores = 24;
    a.mean = account(busy, span);
    a.max_busy = busy;
    c.e.accounts.push_back(a);
  }
  c.e.lb_cycles = 500;
  c.e.lb_pipe = "AIV.V";
  c.e.gm_transfers = 100;
  c.e.bytes_per_transfer = 16384;
  c.e.mte2_read_bytes = 1e6;
  c.e.hbm_bw_pct = 10;
  c.e.l2_bw_pct = 10;
  c.e.scopes.push_back({"UB", 100000, 196352, "acc_o", "k.cc:10", 32768});
  c.e.block_num = 24;
  c.e.ai_cores = 24;
  ir::Knob stages{"num_stages", "pipeline_stages", 2, 1, 16, 64, {"ws"}, {"k.cc", 40, 1}};
  ir::Knob interval{"cross_interval", "sync_interval", 1, 1, 8, 64, {}, {"k.cc", 41, 1}};
  c.e.knobs = {stages, interval};
  return c;
}

prof::Evidence::Account& acct(Crafted& c, const std::string& kind, const std::string& pipe) {
  for (auto& a : c.e.accounts)
    if (a.kind == kind && a.pipe == pipe) return a;
  throw std::logic_error("no account");
}

void set_busy(Crafted& c, const std::string& pipe, double pct) {
  for (auto& p : c.s.pipes)
    if (p.pipe == pipe) p.busy_pct = pct;
}

/// Every change is 10% faster; knob moves are faster the further they go.
prof::WhatIfResult fake_sim(const prof::WhatIf& w) {
  double cycles = 900;
  for (const auto& [n, v] : w.params) cycles = 1000 - 10.0 * static_cast<double>(v);
  return {true, cycles, ""};
}

std::set<std::string> actionable(const std::vector<prof::Advice>& advice) {
  std::set<std::string> ids;
  for (const auto& a : advice)
    if (a.status != "info") ids.insert(a.id);
  return ids;
}

TEST(AdviceRules, NeutralProfileGivesOnlyTheVerdict) {
  auto c = neutral();
  auto advice = prof::advise(c.s, c.e, prof::load_rules(), fake_sim);
  EXPECT_TRUE(actionable(advice).empty());
  ASSERT_EQ(advice.size(), 1u);
  EXPECT_EQ(advice[0].id, "verdict");
}

TEST(AdviceRules, EachRuleFiresOnItsEvidenceAndItsNeighboursStaySilent) {
  struct Case {
    std::string rule;
    std::function<void(Crafted&)> craft;
  };
  const std::vector<Case> cases = {
      {"vectorise_scalar_loop",
       [](Crafted& c) {
         c.e.scalar_loops.push_back(
             {"k.cc:50", "tile.adds with a scalar UB operand", "k.cc:50", 64, {"k.cc:51"}});
         c.e.lines.push_back({"k.cc:51", "tile.adds", "V", "k.cc:50", 1000, 100, 128});
         c.e.v_instructions = 1000;
         c.e.v_small_instructions = 900;
       }},
      {"l1_residency",
       [](Crafted& c) {
         c.e.reloaded_bytes = 0.8 * c.e.mte2_read_bytes;
         acct(c, "AIC", "MTE2").mean = account(300, c.e.span);
       }},
      {"remove_barriers",
       [](Crafted& c) {
         c.e.barriers_in_loops.push_back({"k.cc:60", "pipe_barrier(V)", "k.cc:55", 9, {}});
       }},
      {"raise_num_stages",
       [](Crafted& c) {
         c.e.v2c.wait_cycles = 0.2 * c.e.span * 24;  // the AIC waits 20% of the run on V
       }},
      {"raise_cross_interval", [](Crafted& c) { c.e.c2v.wait_cycles = 0.1 * c.e.span * 48; }},
      {"fuse_axpy",
       [](Crafted& c) {
         c.e.unfused.push_back({"k.cc:70", "tile.mul then tile.add", "k.cc:65", 64, {}});
       }},
      {"double_buffer",
       [](Crafted& c) {
         auto& a = acct(c, "AIV", "MTE2").mean;
         a.slot = 300;
         a.tail -= 300;
       }},
      {"gm_unsaturated", [](Crafted& c) { set_busy(c, "MTE2", 70); }},
      {"small_tiles",
       [](Crafted& c) {
         c.e.bytes_per_transfer = 1024;
         set_busy(c, "MTE2", 40);
       }},
      {"balance_tasks",
       [](Crafted& c) {
         c.e.core_imbalance = 1.4;
         c.e.block_num = 30;  // 24 cores: a second round of 6
         c.e.ai_cores = 24;
       }},
      {"balance_work",
       [](Crafted& c) {
         c.e.core_imbalance = 1.4;
         c.e.block_num = 48;
         c.e.ai_cores = 24;
       }},
      {"pipeline_serial_loop",
       [](Crafted& c) {
         c.e.serial_tile_loops.push_back(
             {"k.cc:40", "loads a new tile per iteration", "k.cc:40", 0, {"k.cc:41"}});
       }},
      {"hoist_invariant",
       [](Crafted& c) {
         c.e.invariant_work.push_back(
             {"k.cc:50", "the same in every iteration", "k.cc:50", 0, {"k.cc:51"}});
       }},
  };
  const auto rules = prof::load_rules();
  std::set<std::string> covered;
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.rule);
    auto c = neutral();
    tc.craft(c);
    auto advice = prof::advise(c.s, c.e, rules, fake_sim);
    EXPECT_EQ(actionable(advice), std::set<std::string>{tc.rule});
    ASSERT_FALSE(advice.empty());
    EXPECT_EQ(advice[0].id, tc.rule);  // the actionable item ranks first
    EXPECT_FALSE(advice[0].evidence.empty());
    covered.insert(tc.rule);
  }
  // Every actionable rule of the shipped table has a case.
  for (const auto& r : rules.rules)
    if (r.action != "info" && r.action != "roof") {
      EXPECT_TRUE(covered.count(r.id)) << r.id;
    }
}

TEST(AdviceRules, KnobAdviceNamesTheKnobAndItsVerifiedMove) {
  auto c = neutral();
  c.e.v2c.wait_cycles = 0.2 * c.e.span * 24;
  auto advice = prof::advise(c.s, c.e, prof::load_rules(), fake_sim);
  ASSERT_FALSE(advice.empty());
  const auto& a = advice[0];
  ASSERT_TRUE(a.param.has_value());
  EXPECT_EQ(*a.param, "num_stages");
  EXPECT_EQ(a.from, 2);
  EXPECT_EQ(a.to, 8);  // candidates 4, 8, 8: the fastest
  EXPECT_DOUBLE_EQ(a.verified_gain_pct, 8);
  EXPECT_EQ(a.file, "k.cc");
  EXPECT_EQ(a.line, 40);
}

TEST(AdviceRules, ContradictionWithCapacityIsResolvedBySimulatingBoth) {
  auto c = neutral();
  c.e.v2c.wait_cycles = 0.2 * c.e.span * 24;
  auto sim = [](const prof::WhatIf& w) -> prof::WhatIfResult {
    int64_t v = w.params.at("num_stages");
    if (v > 4) return {false, 0, "capacity: UB overflow on AIV"};
    return {true, 950, ""};
  };
  auto advice = prof::advise(c.s, c.e, prof::load_rules(), sim);
  ASSERT_FALSE(advice.empty());
  EXPECT_EQ(advice[0].to, 4);
  bool saw_rejection = false;
  for (const auto& t : advice[0].tried) saw_rejection |= t.find("UB overflow") != std::string::npos;
  EXPECT_TRUE(saw_rejection);
}

TEST(AdviceRules, GainsUnderTheThresholdAreDropped) {
  auto c = neutral();
  c.e.barriers_in_loops.push_back({"k.cc:60", "pipe_barrier(V)", "k.cc:55", 9, {}});
  std::vector<prof::Advice> dropped;
  auto advice = prof::advise(
      c.s, c.e, prof::load_rules(),
      [](const prof::WhatIf&) {
        return prof::WhatIfResult{true, 990, ""};
      },
      &dropped);
  EXPECT_TRUE(actionable(advice).empty());
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].id, "remove_barriers");
}

TEST(AdviceRules, AtARoofNoKnobAdvice) {
  auto c = neutral();
  c.e.lb_cycles = 950;
  c.e.v2c.wait_cycles = 0.2 * c.e.span * 24;  // would raise num_stages
  auto advice = prof::advise(c.s, c.e, prof::load_rules(), fake_sim);
  EXPECT_TRUE(actionable(advice).empty());
  bool roof = false;
  for (const auto& a : advice) roof |= a.id == "at_roof";
  EXPECT_TRUE(roof);
}

TEST(AdviceRules, KnobRulesNeedTheKnobMetadata) {
  auto c = neutral();
  c.e.knobs.clear();
  c.e.v2c.wait_cycles = 0.2 * c.e.span * 24;
  c.e.c2v.wait_cycles = 0.1 * c.e.span * 48;
  EXPECT_TRUE(actionable(prof::advise(c.s, c.e, prof::load_rules(), fake_sim)).empty());
}

TEST(AdviceRules, BadRuleTablesAreRejected) {
  EXPECT_THROW(
      prof::parse_rules(json::parse(R"({"rules":[{"id":"x","title":"t","action":"nope"}]})")),
      std::runtime_error);
  EXPECT_THROW(prof::parse_rules(json::parse(R"({"rules":[{"title":"t"}]})")), json::exception);
}

// ---------------------------------------------------------------------------------------
// The tuner, with fake callbacks

struct FakeTune {
  std::atomic<int> sims{0};
  tune::Callbacks callbacks() {
    tune::Callbacks cb;
    cb.prepare = [](const tune::Point& p) -> tune::Prepared {
      if (p.at("a") == 3) return {false, "capacity: too big", ""};
      return {true, "", tune::hash_hex(json(p).dump())};
    };
    // Time grows with a and b; the bound is tight, so branch and bound prunes.
    cb.lower_bound = [](const tune::Point& p) {
      return 100.0 * static_cast<double>(p.at("a") + p.at("b"));
    };
    cb.simulate = [this](const tune::Point& p) -> tune::Simulated {
      ++sims;
      if (p.at("b") == 2 && p.at("a") == 2) return {false, "deadlock", 0, ""};
      return {true, "", 100.0 * static_cast<double>(p.at("a") + p.at("b")) + 50, "V"};
    };
    return cb;
  }
};

tune::Options tune_opts(int jobs, const std::string& cache = "") {
  tune::Options o;
  o.space = {{"a", {1, 2, 3}}, {"b", {1, 2}}};
  o.jobs = jobs;
  o.cache_dir = cache;
  return o;
}

TEST(Tune, GridPrunesRejectsAndFindsTheBest) {
  FakeTune f;
  auto r = tune::run({{"a", 1}, {"b", 1}}, tune_opts(1), f.callbacks());
  EXPECT_EQ(r.best, (tune::Point{{"a", 1}, {"b", 1}}));
  ASSERT_TRUE(r.best_time_us);
  EXPECT_DOUBLE_EQ(*r.best_time_us, 250);
  EXPECT_EQ(r.configs.size(), 6u);
  EXPECT_EQ(r.rejected, 2);  // a=3 (prepare)
  EXPECT_EQ(r.simulated, 1);
  EXPECT_EQ(r.pruned, 3);  // lower bounds 300, 300, 400 > 250
  EXPECT_EQ(f.sims.load(), 1);
  for (const auto& c : r.configs)
    if (c.params.at("a") == 3) {
      EXPECT_EQ(c.reason, "capacity: too big");
    }
}

TEST(Tune, WorkersDoNotChangeTheResult) {
  FakeTune f1, f4;
  auto r1 = tune::run({{"a", 1}, {"b", 1}}, tune_opts(1), f1.callbacks());
  auto r4 = tune::run({{"a", 1}, {"b", 1}}, tune_opts(4), f4.callbacks());
  EXPECT_EQ(tune::to_json(r1).dump(), tune::to_json(r4).dump());
}

/// An executor like a cluster's: starts every wanted config at once, reports them from
/// another thread in reverse order.
tune::Executor reversed_executor(const tune::Callbacks& cb, int* calls) {
  return
      [cb, calls](const std::vector<tune::Point>& points, const std::function<bool(size_t)>& wanted,
                  const std::function<void(size_t, const tune::Simulated&)>& done) {
        ++*calls;
        std::vector<size_t> started;
        for (size_t k = 0; k < points.size(); ++k)
          if (wanted(k)) started.push_back(k);
        std::thread remote([&] {
          for (auto it = started.rbegin(); it != started.rend(); ++it)
            done(*it, cb.simulate(points[*it]));
        });
        remote.join();
      };
}

TEST(Tune, AnExecutorGivesTheLocalResult) {
  for (std::string strategy : {"grid", "coord"}) {
    FakeTune local, remote;
    auto o = tune_opts(2);
    o.strategy = strategy;
    auto r1 = tune::run({{"a", 2}, {"b", 2}}, o, local.callbacks());
    int calls = 0;
    o.executor = reversed_executor(remote.callbacks(), &calls);
    auto r2 = tune::run({{"a", 2}, {"b", 2}}, o, remote.callbacks());
    EXPECT_GT(calls, 0) << strategy;
    EXPECT_EQ(tune::to_json(r1).dump(), tune::to_json(r2).dump()) << strategy;
  }
}

TEST(Tune, CacheServesTheSecondRun) {
  auto dir =
      std::filesystem::temp_directory_path() / ("tilepipe_tune_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  FakeTune f;
  auto opts = tune_opts(2, dir.string());
  opts.space = {{"a", {2}}, {"b", {1, 2}}};  // no pruning: every config is simulated
  auto first = tune::run({{"a", 2}, {"b", 1}}, opts, f.callbacks());
  EXPECT_EQ(first.simulated, 1);
  EXPECT_EQ(first.pruned, 1);
  int sims = f.sims.load();
  auto second = tune::run({{"a", 2}, {"b", 1}}, opts, f.callbacks());
  EXPECT_EQ(f.sims.load(), sims);  // nothing simulated again
  EXPECT_EQ(second.cached, 1);
  EXPECT_EQ(second.best, first.best);
  std::filesystem::remove_all(dir);
}

TEST(Tune, CoordinateDescentMovesToTheBest) {
  FakeTune f;
  auto opts = tune_opts(2);
  opts.strategy = "coord";
  auto r = tune::run({{"a", 2}, {"b", 2}}, opts, f.callbacks());
  EXPECT_EQ(r.best, (tune::Point{{"a", 1}, {"b", 1}}));
}

TEST(Tune, SpaceSyntax) {
  auto [n, v] = tune::parse_space("num_stages=2,4,4,8");
  EXPECT_EQ(n, "num_stages");
  EXPECT_EQ(v, (std::vector<int64_t>{2, 4, 8}));
  EXPECT_THROW(tune::parse_space("num_stages"), std::invalid_argument);
  EXPECT_THROW(tune::parse_space("num_stages=2,x"), std::invalid_argument);
  EXPECT_THROW(tune::parse_space("num_stages=2,,4"), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------
// The HTML report

/// Checks that every tag inside each <svg>...</svg> is balanced (XML well-formedness of the
/// inline SVG; attribute values are quoted and contain no '<').
void expect_well_formed_svg(const std::string& html) {
  size_t pos = 0;
  int svgs = 0;
  while ((pos = html.find("<svg", pos)) != std::string::npos) {
    size_t end = html.find("</svg>", pos);
    ASSERT_NE(end, std::string::npos);
    std::string svg = html.substr(pos, end + 6 - pos);
    std::vector<std::string> stack;
    for (size_t i = 0; i < svg.size(); ++i) {
      if (svg[i] != '<') continue;
      size_t close = svg.find('>', i);
      ASSERT_NE(close, std::string::npos);
      std::string tag = svg.substr(i + 1, close - i - 1);
      ASSERT_FALSE(tag.empty());
      if (tag[0] == '/') {
        ASSERT_FALSE(stack.empty()) << tag;
        EXPECT_EQ(stack.back(), tag.substr(1));
        stack.pop_back();
      } else if (tag.back() != '/') {
        stack.push_back(tag.substr(0, tag.find_first_of(" \n")));
      }
      EXPECT_EQ(std::count(tag.begin(), tag.end(), '"') % 2, 0) << tag;
      i = close;
    }
    EXPECT_TRUE(stack.empty());
    ++svgs;
    pos = end;
  }
  EXPECT_GT(svgs, 0);
}

json crafted_doc() {
  auto c = neutral();
  c.e.v2c.wait_cycles = 0.2 * c.e.span * 24;
  auto advice = prof::advise(c.s, c.e, prof::load_rules(), fake_sim);
  json p = prof::to_json(c.s);
  p["kernel"] = "k";
  p["variant"] = "v<1>";  // escaped
  p["cycles"] = 1000;
  p["time_us"] = 0.54;
  p["sim_wall_s"] = 1.25;
  p["evidence"] = prof::to_json(c.e);
  p["advice"] = prof::to_json(advice);
  p["model_limits"] = prof::model_limits();
  p["timeline"] = {
      {"bin_cycles", 10},
      {"rows", json::array({{{"core", "core0.AIC"}, {"pipe", "M"}, {"busy", {0.5, 1.0, 0.0}}},
                            {{"core", "core0.AIV0"}, {"pipe", "V"}, {"busy", {1.0, 0.2, 0.7}}}})}};
  json ladder = {{"kernel", "k"},
                 {"reference", "ref"},
                 {"reference_us", 10.0},
                 {"steps", json::array({{{"name", "a"},
                                         {"time_us", 20.0},
                                         {"speedup_vs_prev", 1.0},
                                         {"pct_of_reference", 50.0},
                                         {"bound", "V"},
                                         {"verdict", "compute"}},
                                        {{"name", "b"},
                                         {"time_us", 12.0},
                                         {"speedup_vs_prev", 1.67},
                                         {"pct_of_reference", 83.0},
                                         {"bound", "V"},
                                         {"verdict", "compute"}}})},
                 {"profiles", json::array({p, p})}};
  FakeTune f;
  auto r = tune::run({{"a", 1}, {"b", 1}}, tune_opts(1), f.callbacks());
  json t = tune::to_json(r);
  t["space"] = {{"a", {1, 2, 3}}, {"b", {1, 2}}};
  t["default"] = {{"params", {{"a", 2}, {"b", 2}}}, {"time_us", 450.0}};
  t["speedup_vs_default"] = 1.8;
  t["strategy"] = "grid";
  t["wall_s"] = 3.5;
  return {{"title", "report <test>"}, {"profile", p}, {"ladder", ladder}, {"tune", t}};
}

TEST(HtmlReport, SelfContainedWellFormedWithTheExpectedSections) {
  std::string html = prof::html_report(crafted_doc());
  EXPECT_NE(html.find("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'"),
            std::string::npos);
  // No external references: the only URL is the SVG namespace.
  std::string stripped = html;
  for (size_t p; (p = stripped.find("http://www.w3.org/2000/svg")) != std::string::npos;)
    stripped.erase(p, 26);
  EXPECT_EQ(stripped.find("http:"), std::string::npos);
  EXPECT_EQ(stripped.find("https:"), std::string::npos);
  EXPECT_EQ(stripped.find("src="), std::string::npos);
  EXPECT_EQ(stripped.find("<link"), std::string::npos);
  EXPECT_EQ(stripped.find("url("), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos);  // only the JSON data block
  for (const char* section :
       {"Verdict:", "Advice (ranked)", "Timeline overview", "Where each pipe",
        "Cube / Vector balance", "Roofline", "Memory per scope", "Optimisation ladder", "Heat map",
        "What the model does not cover", "raise_num_stages", "id=\"tilepipe-data\""})
    EXPECT_NE(html.find(section), std::string::npos) << section;
  EXPECT_NE(html.find("v&lt;1&gt;"), std::string::npos);
  EXPECT_EQ(html.substr(0, html.find("<script")).find("v<1>"), std::string::npos);
  expect_well_formed_svg(html);
}

TEST(HtmlReport, SameInputsSameBytesWallTimesLeftOut) {
  json a = crafted_doc(), b = crafted_doc();
  b["profile"]["sim_wall_s"] = 99.0;
  b["tune"]["wall_s"] = 42.0;
  EXPECT_EQ(prof::html_report(a), prof::html_report(b));
  EXPECT_EQ(prof::html_report(a).find("wall_s"), std::string::npos);
}

}  // namespace
}  // namespace tilepipe

// The driver over kernel sources (include/tilepipe/driver.h): the catalogue, sources' own
// pass configs, sources without a reference, and the verbs that once skipped the pass
// pipeline (tune's prepare, check --list-syncs) on an automatic-mode kernel.
#include <gtest/gtest.h>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/driver.h"
#include "tilepipe/driver_syncs.h"
#include "tilepipe/lang.h"

namespace tilepipe {
namespace {

using namespace lang;
using testing::a3;

/// Z = X + Y on the Vector cores in automatic mode: no flags written, auto_sync adds them.
ir::Program auto_vadd(const driver::Params& p) {
  const int64_t n = p.at("N"), T = 1024;
  KernelBuilder k("auto_vadd", /*block_num=*/4);
  auto X = k.input("X", {n}, f32), Y = k.input("Y", {n}, f32);
  auto Z = k.output("Z", {n}, f32);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {T}, f32), y = alloc_ub("y", {T}, f32);
    serial(cid * 2 + vid, n / T, 8, [&](Ex t) {
      copy(X(slice(t * T, T)), x);
      copy(Y(slice(t * T, T)), y);
      tile::add(x, x, y);
      copy(x, Z(slice(t * T, T)));
    });
  });
  return k.finish();
}

driver::KernelSource auto_vadd_source(std::optional<passes::PassOptions> own) {
  driver::KernelSource k;
  k.name = "auto_vadd";
  k.params = {{"N", 8192, 1024, 1 << 20, "elements"}};
  k.build = [own](const driver::Params& p, const std::string&) -> driver::Built {
    return own ? driver::Built(auto_vadd(p), *own) : driver::Built(auto_vadd(p));
  };
  k.inputs = [](const driver::Params& p, uint64_t seed) -> sim::HostData {
    return {{"X", driver::random_tensor(p.at("N"), ir::DType::F32, seed)},
            {"Y", driver::random_tensor(p.at("N"), ir::DType::F32, seed + 1)}};
  };
  return k;
}

driver::RunRequest functional_check(const driver::KernelSource& k) {
  driver::RunRequest req;
  req.params = driver::resolve_params(k, {});
  req.detect_races = true;
  return req;
}

TEST(Driver, RegisteredSourcesAreFoundByNameAndResolversMakeTheRest) {
  driver::register_kernel(auto_vadd_source(std::nullopt));
  EXPECT_EQ(driver::find_kernel("auto_vadd").name, "auto_vadd");
  driver::register_resolver([](const std::string& spec) -> std::optional<driver::KernelSource> {
    if (spec != "made:vadd") return std::nullopt;
    auto k = auto_vadd_source(std::nullopt);
    k.name = spec;
    return k;
  });
  EXPECT_EQ(driver::find_kernel("made:vadd").name, "made:vadd");
  try {
    driver::find_kernel("nothing.py:k");
    FAIL() << "an unknown spec was accepted";
  } catch (const driver::ParamError& e) {
    EXPECT_NE(e.message.find("unknown kernel 'nothing.py:k'"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("auto_vadd"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("Python front end"), std::string::npos) << e.message;
  }
}

TEST(Driver, ASourceWithoutAReferenceRunsUncheckedAndReturnsItsTensors) {
  auto k = auto_vadd_source(std::nullopt);
  auto rep = driver::run_kernel(k, functional_check(k), a3());
  EXPECT_FALSE(rep.checked);
  ASSERT_EQ(rep.outputs.count("Z"), 1u);
  const auto x = driver::random_tensor(8192, ir::DType::F32, 1);
  const auto y = driver::random_tensor(8192, ir::DType::F32, 2);
  for (size_t i = 0; i < x.size(); i += 997) EXPECT_FLOAT_EQ(rep.outputs["Z"][i], x[i] + y[i]);
}

TEST(Driver, ASourcesOwnPassConfigsReplaceTheRequestsOptions) {
  passes::PassOptions no_sync;
  no_sync.auto_sync = false;
  auto k = auto_vadd_source(no_sync);
  // The request's defaults would synchronise; the source's configs say no: a race.
  EXPECT_THROW(driver::run_kernel(k, functional_check(k), a3()), driver::SimFailure);
  auto c = driver::compile(k, functional_check(k), a3());
  EXPECT_FALSE(c.pass_options.auto_sync);
  // --no-pass still applies on top of the source's configs.
  auto req = functional_check(auto_vadd_source(std::nullopt));
  req.no_pass = {"auto_sync"};
  EXPECT_FALSE(driver::compile(k, req, a3()).pass_options.auto_sync);
}

// Regression: `tilepipe tune fa --variant auto` rejected every config ("tile.fill outside a
// scope" at fa.cc:438): the tuner's prepare verified the program before the passes.
TEST(Driver, TuningAnAutomaticKernelCompilesThroughThePasses) {
  const auto& k = kernels::find_kernel("fa");
  driver::RunRequest base;
  base.variant = "auto";
  base.params = driver::resolve_params(k, {});
  base.mode = sim::Mode::Timing;
  auto cb = driver::tune_callbacks(k, base, a3(), "a3");
  tune::Point p;
  for (const auto& [n, v] : base.params) p[n] = v;
  p["num_stages"] = 2;
  auto prepared = cb.prepare(p);
  EXPECT_TRUE(prepared.ok) << prepared.reason;
  auto s = cb.simulate(p);
  EXPECT_TRUE(s.ok) << s.reason;
  EXPECT_GT(s.cycles, 0);
}

// Regression: `tilepipe check fa --variant auto --list-syncs` printed verifier errors: the
// sync list lowered the program without the passes (so without its synchronisation).
TEST(Driver, ListingTheSyncsOfAnAutomaticKernelListsThoseThePassesInserted) {
  const auto& k = kernels::find_kernel("fa");
  driver::RunRequest req;
  req.variant = "auto";
  req.params = driver::resolve_params(k, {});
  auto syncs = driver::kernel_syncs(k, req, a3());
  int cross = 0;
  for (const auto& s : syncs) cross += s.kind == "set_cross_flag";
  EXPECT_GT(syncs.size(), 10u);
  EXPECT_GT(cross, 0);
}

// A worker's evaluation of a tuning config (tune --scheduler) is the local search's own.
TEST(Driver, AWorkersEvaluationIsTheLocalSimulation) {
  auto k = auto_vadd_source(std::nullopt);
  k.name = "remote_vadd";
  driver::register_kernel(k);
  driver::RunRequest base;
  base.variant = driver::resolve_variant(k, "");
  base.params = driver::resolve_params(k, {});
  base.mode = sim::Mode::Timing;
  const std::string text = driver::chip_config_text("a3");
  driver::TuneJob job{"remote_vadd", base.variant, base.params, text, "a3.json"};
  for (int64_t n : {8192, 16384}) {
    tune::Point p = {{"N", n}};
    auto local = driver::tune_callbacks(k, base, a3(), text).simulate(p);
    auto remote = driver::evaluate(job, p);
    EXPECT_TRUE(remote.ok) << remote.reason;
    EXPECT_EQ(remote.cycles, local.cycles);
    EXPECT_EQ(remote.bound, local.bound);
  }
  // What the worker cannot reach is bad input, not a rejected config.
  job.spec = "no_such_kernel";
  EXPECT_THROW(driver::evaluate(job, {}), driver::ParamError);
  job.spec = "remote_vadd";
  job.chip_text = "{}";
  EXPECT_THROW(driver::evaluate(job, {}), driver::ParamError);
}

TEST(Driver, ASchedulerNeedsAConnector) {
  try {
    driver::connect_scheduler("tcp://127.0.0.1:8786", {});
    FAIL() << "no connector is registered in the C++ tests";
  } catch (const driver::ParamError& e) {
    EXPECT_NE(e.message.find("--scheduler tcp://127.0.0.1:8786"), std::string::npos) << e.message;
  }
}

}  // namespace
}  // namespace tilepipe

// Sparse Flash Attention: every version matches the reference, race- and deadlock-free, on
// shapes with -1 indices, indices past the active length, a causal bound, topk not a
// multiple of n_base, several tasks / batches / kv heads and a scattered block table; the
// tolerance catches a dropped mask; the ladder at the published shape orders as published.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "kernel_check.h"
#include "registry.h"
#include "tilepipe/driver.h"

namespace tilepipe {
namespace {

struct SfaCase {
  std::string variant;
  std::map<std::string, std::string> params;
};

const std::map<std::string, std::string> kSmall = {{"H", "16"}, {"KV_S", "1024"}, {"topk", "256"}};
// Causal bound, 2 batches of 2 tokens, 2 kv heads (4 tasks of 16 heads), scale 1/sqrt(576).
const std::map<std::string, std::string> kCausal = {
    {"B", "2"},      {"T", "4"},        {"H", "32"},     {"KV_N", "2"},       {"KV_S", "512"},
    {"topk", "128"}, {"act_kv", "300"}, {"causal", "1"}, {"scale_milli", "0"}};

class SfaMatchesReference : public ::testing::TestWithParam<SfaCase> {};

TEST_P(SfaMatchesReference, RaceFreeAndWithinTolerance) {
  testing::expect_matches_reference("sfa", GetParam().variant, GetParam().params);
}

std::vector<SfaCase> cases() {
  std::vector<SfaCase> out;
  for (const char* v : {"baseline", "developer", "pa", "no_cv_pipeline"}) {
    out.push_back({v, kSmall});
    // topk 200: the last chunk holds 8 of 64 (or 200 of 256) indices; act_kv 900 < KV_S
    // puts some indices past the active length.
    out.push_back({v, {{"H", "16"}, {"KV_S", "1024"}, {"topk", "200"}, {"act_kv", "900"}}});
    out.push_back({v, kCausal});
  }
  // More tasks (32) than cores (24), so some cores run two.
  out.push_back({"pa", {{"T", "2"}, {"H", "256"}, {"KV_S", "256"}, {"topk", "64"}}});
  // The automatic version: a whole number of chunks, so topk 200 becomes 192 in chunks of
  // 64 (3 chunks, odd against the 2 pipeline stages); one chunk; the causal case; more tasks
  // than cores.
  out.push_back({"auto", kSmall});
  out.push_back(
      {"auto",
       {{"H", "16"}, {"KV_S", "1024"}, {"topk", "192"}, {"n_base", "64"}, {"act_kv", "900"}}});
  out.push_back({"auto", {{"H", "16"}, {"KV_S", "1024"}, {"topk", "128"}}});
  out.push_back({"auto", kCausal});
  out.push_back({"auto", {{"T", "2"}, {"H", "256"}, {"KV_S", "256"}, {"topk", "64"}}});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sfa, SfaMatchesReference, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return info.param.variant + "_" + std::to_string(info.index);
                         });

TEST(SfaInputs, BlockTableIsAScatteredPermutationAndIndicesHaveInvalidEntries) {
  const auto& k = kernels::find_kernel("sfa");
  auto p = driver::resolve_params(k, {{"KV_S", "2560"}, {"act_kv", "2000"}});
  auto in = k.inputs(p, 1);
  auto bt = in.at("block_table");
  ASSERT_EQ(bt.size(), 20u);
  auto sorted = bt;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(sorted[i], static_cast<double>(i));
  int in_place = 0;
  for (size_t i = 0; i < bt.size(); ++i) in_place += bt[i] == static_cast<double>(i);
  EXPECT_LT(in_place, 5) << "the pages must be scattered, not the identity";
  const auto& si = in.at("sparse_indices");
  auto minus_one = std::count(si.begin(), si.end(), -1.0);
  auto past_active = std::count_if(si.begin(), si.end(), [](double v) { return v >= 2000; });
  EXPECT_GT(minus_one, 50);
  EXPECT_GT(past_active, 50);
  EXPECT_EQ(si[0], 0.0);  // every query attends to at least one valid position
  // Same seed, same inputs.
  EXPECT_EQ(k.inputs(p, 1).at("sparse_indices"), si);
}

TEST(SfaTolerance, CatchesADroppedMask) {
  // A kernel that dropped the mask attends the -1 (and past-the-bound) entries at the
  // position they are redirected to (0): its output is the reference of inputs where
  // those entries are 0. The tolerance must reject it.
  const auto& k = kernels::find_kernel("sfa");
  auto p = driver::resolve_params(
      k, {{"H", "16"}, {"KV_S", "1024"}, {"topk", "256"}, {"act_kv", "900"}});
  auto in = k.inputs(p, 3);
  driver::RunRequest req;
  req.variant = "pa";
  req.params = p;
  req.seed = 3;
  auto rep = driver::run_kernel(k, req, testing::a3());
  ASSERT_TRUE(rep.correct) << rep.mismatch;
  auto unmasked = in;
  for (auto& v : unmasked["sparse_indices"])
    if (v < 0 || v >= 900) v = 0;
  auto ref = k.reference(p, "pa", unmasked).at("out");
  sim::HostData io = in;
  // The kernel's own output, from a functional run with the same inputs.
  auto low = rep.lowered;
  sim::SimOptions o;
  sim::simulate(low, testing::a3(), &io, o);
  driver::RunReport cmp;
  cmp.correct = true;
  driver::compare(io.at("out"), ref, k.tol, "out", cmp);
  EXPECT_FALSE(cmp.correct);
  EXPECT_GT(cmp.max_abs_err, 5 * k.tol.atol);
}

TEST(SfaTiming, TimingModeFollowsTheRealIndicesAndMatchesFunctionalCycles) {
  const auto& k = kernels::find_kernel("sfa");
  for (const char* v : {"baseline", "no_cv_pipeline"}) {
    driver::RunRequest req;
    req.variant = v;
    req.params = driver::resolve_params(k, kSmall);
    auto functional = driver::run_kernel(k, req, testing::a3());
    req.mode = sim::Mode::Timing;
    auto timing = driver::run_kernel(k, req, testing::a3());
    EXPECT_EQ(functional.sim.cycles, timing.sim.cycles) << v;
  }
}

TEST(SfaLadder, PublishedShapeRunsFastAndEachVersionIsFaster) {
  const auto& k = kernels::find_kernel("sfa");
  auto t0 = std::chrono::steady_clock::now();
  auto lad = driver::run_ladder(k, {{"KV_S", "2560"}}, testing::a3(), 2);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(wall, 10.0);
  ASSERT_EQ(lad.steps.size(), 4u);
  EXPECT_EQ(lad.params.at("H"), 128);
  EXPECT_EQ(lad.params.at("topk"), 2048);
  const char* order[] = {"baseline", "developer", "pa", "no_cv_pipeline"};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(lad.steps[i].name, order[i]);
  for (size_t i = 1; i < 4; ++i)
    EXPECT_LT(lad.steps[i].time_us, lad.steps[i - 1].time_us) << lad.steps[i].name;
  EXPECT_LT(lad.reference_us, 0) << "no published absolute SFA time is known";
}

TEST(SfaParams, RejectsShapesTheKernelIsNotWrittenFor) {
  const auto& k = kernels::find_kernel("sfa");
  EXPECT_THROW(driver::resolve_params(k, {{"topk", "100"}}), driver::ParamError);
  EXPECT_THROW(driver::resolve_params(k, {{"T", "3"}, {"B", "2"}}), driver::ParamError);
  EXPECT_THROW(driver::resolve_params(k, {{"KV_S", "1000"}}), driver::ParamError);
  EXPECT_THROW(driver::resolve_params(k, {{"act_kv", "3000"}}), driver::ParamError);
  EXPECT_THROW(driver::resolve_params(k, {{"m_base", "24"}}), driver::ParamError);
  EXPECT_THROW(driver::resolve_params(k, {{"H", "24"}}), driver::ParamError);
}

}  // namespace
}  // namespace tilepipe

namespace tilepipe {
namespace {

TEST(SfaAuto, IsWrittenAsDataflowOnly) {
  const auto& k = kernels::find_kernel("sfa");
  auto p = k.build(driver::resolve_params(k, kSmall), "auto").program;
  std::string ir = ir::print(p);
  for (const char* word : {"scope", "flag", "barrier", "workspace", "vid"})
    EXPECT_EQ(ir.find(word), std::string::npos) << word << " in\n" << ir;
}

TEST(SfaAuto, PartialChunksAreAParameterError) {
  const auto& k = kernels::find_kernel("sfa");
  try {
    k.build(driver::resolve_params(k, {{"H", "16"}, {"KV_S", "1024"}, {"topk", "200"}}), "auto")
        .program;
    ADD_FAILURE() << "topk 200 in chunks of 128 was accepted";
  } catch (const driver::ParamError& e) {
    EXPECT_NE(e.message.find("n_base=128 must divide topk=200"), std::string::npos) << e.message;
  }
}

}  // namespace
}  // namespace tilepipe

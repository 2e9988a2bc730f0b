// The `tilepipe` binary against its contract (docs/cli.md): JSON output of `run` and
// `list`, exit status 2 with a one-line message for every kind of bad input, `check`, and
// timing mode agreeing with functional mode.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "registry.h"
#include "tilepipe/chip.h"

namespace tilepipe {
namespace {

using namespace clitest;

/// `run ARGS --json`, expecting exit 0 and exactly one JSON object on stdout.
json run_json(const std::string& args) {
  CliResult r = cli("run " + args + " --json");
  EXPECT_EQ(r.code, 0) << "stderr: " << r.err;
  json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << "stdout is not one JSON object:\n" << r.out;
  return j.is_object() ? j : json::object();
}

// ---------------------------------------------------------------------------------------
// run --json

struct RunCase {
  std::string kernel;
  std::vector<std::pair<std::string, int64_t>> params;
  std::string busy_pipe;  // the pipe that does the kernel's work
};

class CliRunJson : public ::testing::TestWithParam<RunCase> {};

TEST_P(CliRunJson, PrintsCorrectResultWithCyclesPipesBoundAndWallTime) {
  const RunCase& c = GetParam();
  std::string args = c.kernel;
  for (const auto& [k, v] : c.params) args += " --param " + k + "=" + std::to_string(v);
  json j = run_json(args);
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j.value("kernel", ""), c.kernel);
  EXPECT_EQ(j.value("chip", ""), "a3");
  EXPECT_EQ(j.value("mode", ""), "functional");
  EXPECT_TRUE(j.contains("variant") && j["variant"].is_string());
  ASSERT_TRUE(j.contains("params") && j["params"].is_object());
  for (const auto& [k, v] : c.params) EXPECT_EQ(j["params"].value(k, int64_t{-1}), v) << k;

  ASSERT_TRUE(j.contains("correct"));
  EXPECT_EQ(j["correct"], true) << j.dump(2);
  EXPECT_TRUE(j.contains("max_abs_err") && j["max_abs_err"].is_number());
  EXPECT_TRUE(j.contains("max_rel_err") && j["max_rel_err"].is_number());

  ASSERT_TRUE(j.contains("cycles") && j["cycles"].is_number());
  const double cycles = j["cycles"].get<double>();
  EXPECT_GT(cycles, 0);
  ASSERT_TRUE(j.contains("time_us") && j["time_us"].is_number());
  EXPECT_NEAR(j["time_us"].get<double>(), cycles / load_chip_config("a3").clock_mhz, 1e-9 * cycles);

  ASSERT_TRUE(j.contains("pipes") && j["pipes"].is_object());
  std::vector<std::string> pipes = {"M", "V", "MTE1", "MTE2", "MTE3", "FIX", "S"};
  for (const auto& p : pipes) {
    ASSERT_TRUE(j["pipes"].contains(p)) << p;
    ASSERT_TRUE(j["pipes"][p].contains("busy_pct") && j["pipes"][p]["busy_pct"].is_number()) << p;
    double pct = j["pipes"][p]["busy_pct"].get<double>();
    EXPECT_GE(pct, 0) << p;
    EXPECT_LE(pct, 100) << p;
  }
  EXPECT_GT(j["pipes"][c.busy_pipe]["busy_pct"].get<double>(), 0) << c.busy_pipe;

  ASSERT_TRUE(j.contains("bound") && j["bound"].is_string());
  std::vector<std::string> bounds = pipes;
  for (const char* b : {"sync", "issue", "bandwidth"}) bounds.push_back(b);
  EXPECT_NE(std::find(bounds.begin(), bounds.end(), j["bound"].get<std::string>()), bounds.end())
      << j["bound"];

  ASSERT_TRUE(j.contains("sim_wall_s") && j["sim_wall_s"].is_number());
  EXPECT_GE(j["sim_wall_s"].get<double>(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    CliKernels, CliRunJson,
    ::testing::Values(RunCase{"gemm", {{"M", 256}, {"N", 256}, {"K", 512}}, "M"},
                      RunCase{"softmax", {{"R", 64}, {"C", 512}}, "V"},
                      RunCase{"elementwise", {{"N", 65536}}, "V"}),
    [](const auto& info) { return info.param.kernel; });

TEST(CliRun, TimingModeGivesTheSameCyclesAsFunctional) {
  for (const std::string k :
       {"gemm --param M=256 --param N=256 --param K=512", "softmax --param R=64 --param C=512",
        "elementwise --param N=65536"}) {
    SCOPED_TRACE(k);
    json f = run_json(k + " --mode functional");
    json t = run_json(k + " --mode timing");
    ASSERT_TRUE(f.contains("cycles") && t.contains("cycles"));
    EXPECT_EQ(f["cycles"], t["cycles"]);
    EXPECT_EQ(t.value("mode", ""), "timing");
    EXPECT_FALSE(t.contains("correct")) << "timing mode computes no values to check";
  }
}

TEST(CliDifferential, FastForwardAgreesWithExactAndSaysSoInJson) {
  auto r = cli("differential fa --variant expert --param S=2048 --param H=2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j.value("counters", ""), "identical");
  EXPECT_LE(std::abs(j["cycles_err_pct"].get<double>()), 0.5);
  EXPECT_GT(j["exact_cycles"].get<double>(), 0);
  EXPECT_TRUE(j.value("ok", false));
  EXPECT_EQ(cli("differential nosuch").code, 2);
}

TEST(CliRun, ChipGivenAsJsonPathIsUsed) {
  json j = run_json("gemm --chip '" + std::string(TILEPIPE_CONFIG_DIR) + "/a2.json'");
  EXPECT_EQ(j.value("chip", ""), "a2");
  EXPECT_EQ(j.value("correct", false), true);
}

// ---------------------------------------------------------------------------------------
// Bad input: exit 2 and one line that says what was wrong and what is allowed

TEST(CliBadInput, NegativeParamNamesTheAllowedRange) {
  const auto& g = kernels::find_kernel("gemm");
  auto spec =
      std::find_if(g.params.begin(), g.params.end(), [](const auto& p) { return p.name == "M"; });
  ASSERT_NE(spec, g.params.end());
  expect_bad_input("run gemm --param M=-1",
                   {"M=-1", fmt::format("[{}, {}]", spec->min, spec->max)});
}

TEST(CliBadInput, NonNumericParamIsRejected) {
  expect_bad_input("run gemm --param M=12x", {"M=12x", "integer"});
}

TEST(CliBadInput, UnknownParamNameListsTheParameters) {
  expect_bad_input("run gemm --param Q=1", {"'Q'", "M", "N", "K"});
}

TEST(CliBadInput, ParamWithoutEqualsIsRejected) {
  expect_bad_input("run gemm --param M", {"'M'", "NAME=VALUE"});
}

TEST(CliBadInput, UnknownFlagIsRejected) {
  expect_bad_input("run gemm --bogus", {"--bogus"});
}

TEST(CliBadInput, UnknownKernelListsTheKernels) {
  expect_bad_input("run nope", {"'nope'", "gemm", "softmax", "elementwise"});
}

TEST(CliBadInput, UnknownVariantListsTheVariants) {
  expect_bad_input("run gemm --variant nope", {"'nope'", "expert"});
}

TEST(CliBadInput, BadModeListsTheModes) {
  expect_bad_input("run gemm --mode fast", {"fast", "timing", "functional"});
}

TEST(CliBadInput, UnknownChipNameListsTheChips) {
  expect_bad_input("run gemm --chip a9", {"'a9'", "a2", "a3"});
}

TEST(CliBadInput, MalformedChipJsonFileIsRejected) {
  const fs::path p = scratch().file("broken_chip.json");
  {
    std::ofstream f(p);
    f << "{ \"name\": \"broken\",\n  \"die\": { \"ai_cores\": \n";
  }
  expect_bad_input("run gemm --chip '" + p.string() + "'", {p.string(), "JSON"});
  fs::remove(p);
}

TEST(CliBadInput, MissingChipFileIsRejected) {
  const fs::path p = scratch().file("no_such_chip.json");
  expect_bad_input("run gemm --chip '" + p.string() + "'", {p.string()});
}

TEST(CliBadInput, MissingSubcommandIsRejected) {
  CliResult r = cli("");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
}

// ---------------------------------------------------------------------------------------
// list and check

TEST(CliList, JsonListsTheThreeKernelsWithTheirParameters) {
  CliResult r = cli("list --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_TRUE(j.contains("kernels") && j["kernels"].is_array());
  const std::vector<std::pair<std::string, std::vector<std::string>>> want = {
      {"gemm", {"M", "N", "K"}}, {"softmax", {"R", "C"}}, {"elementwise", {"N"}}};
  for (const auto& [name, params] : want) {
    SCOPED_TRACE(name);
    const json* k = nullptr;
    for (const auto& e : j["kernels"])
      if (e.value("name", "") == name) k = &e;
    ASSERT_NE(k, nullptr) << "kernel missing from list";
    ASSERT_TRUE(k->contains("variants") && (*k)["variants"].is_array());
    EXPECT_FALSE((*k)["variants"].empty());
    ASSERT_TRUE(k->contains("params") && (*k)["params"].is_array());
    for (const auto& p : (*k)["params"]) {
      ASSERT_TRUE(p.contains("name") && p.contains("default") && p.contains("min") &&
                  p.contains("max"))
          << p.dump();
      EXPECT_LE(p["min"].get<int64_t>(), p["default"].get<int64_t>()) << p.dump();
      EXPECT_LE(p["default"].get<int64_t>(), p["max"].get<int64_t>()) << p.dump();
    }
    for (const auto& want_param : params) {
      bool found = false;
      for (const auto& p : (*k)["params"]) found = found || p.value("name", "") == want_param;
      EXPECT_TRUE(found) << "parameter " << want_param;
    }
  }
}

TEST(CliCheck, SoftmaxPassesWithExitZero) {
  CliResult r = cli("check softmax");
  EXPECT_EQ(r.code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
}

TEST(CliCheck, JsonReportsOk) {
  CliResult r = cli("check softmax --param R=64 --param C=512 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j.value("ok", false), true);
  EXPECT_EQ(j.value("correct", false), true);
}

TEST(CliCheck, SfaEveryVariantPassesWithExitZero) {
  for (const char* v : {"baseline", "developer", "pa", "no_cv_pipeline"}) {
    CliResult r = cli(fmt::format(
        "check sfa --variant {} --param H=16 --param KV_S=512 --param topk=136 --json", v));
    EXPECT_EQ(r.code, 0) << v << ": " << r.err;
    json j = json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_EQ(j.value("correct", false), true) << v;
  }
}

TEST(CliLadder, SfaHasNoReferenceColumnAndFourStepsInOrder) {
  CliResult r = cli("ladder sfa --param KV_S=2560 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_LT(j.value("reference_us", 0.0), 0);
  ASSERT_EQ(j["steps"].size(), 4u);
  EXPECT_EQ(j["steps"][3].value("name", ""), "no_cv_pipeline");
  EXPECT_NE(r.err.find("no published reference time"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tilepipe

namespace tilepipe {
namespace {

TEST(CliProfile, MistunedFaAdviceNamesNumStagesWithAVerifiedGain) {
  CliResult r =
      cli("profile fa --variant expert --param S=1024 --param H=4 --param num_stages=2 "
          "--param cross_interval=1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_FALSE(j["advice"].empty());
  const json& a = j["advice"][0];
  EXPECT_EQ(a["id"], "raise_num_stages");
  EXPECT_EQ(a["suggest"]["param"], "num_stages");
  EXPECT_EQ(a["suggest"]["from"], 2);
  EXPECT_GE(a["verified_gain_pct"].get<double>(), 3);
  EXPECT_FALSE(a["evidence"].empty());
  EXPECT_EQ(a["where"]["file"], "fa.cc");
  EXPECT_TRUE(j.contains("model_limits"));
}

TEST(CliTune, FindsAConfigRejectsOverflowAndServesTheSecondRunFromTheCache) {
  std::string dir = scratch().file("tune-cache").string();
  std::string html = scratch().file("tune.html").string();
  std::string args =
      "tune fa --variant expert --param S=2048 --param H=2 --space num_stages=2,16 "
      "--space cross_interval=1,2 -j 2 --cache-dir '" +
      dir + "' --json";
  CliResult r = cli(args + " --html '" + html + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["configs"].size(), 4u);
  EXPECT_GT(j["best_time_us"].get<double>(), 0);
  EXPECT_EQ(j["cached"], 0);
  EXPECT_NE(read_text(html).find("Heat map"), std::string::npos);
  CliResult again = cli(args);
  ASSERT_EQ(again.code, 0) << again.err;
  json k = json::parse(again.out);
  EXPECT_EQ(k["best"], j["best"]);
  EXPECT_EQ(k["simulated"], 0);
  EXPECT_EQ(k["cached"].get<int>(), j["simulated"].get<int>());
}

}  // namespace
}  // namespace tilepipe

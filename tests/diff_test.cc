// `tilepipe diff` and the per-line cycles it compares, through the binary: a report diffed
// with itself is empty, two FA variants' line deltas add up to their cycle difference, bad
// inputs are one-line errors (docs/cli.md#tilepipe-diff, #per-line-cycles).
#include <cmath>
#include <functional>

#include "cli_util.h"

namespace tilepipe {
namespace {

using clitest::cli;
using clitest::expect_bad_input;
using clitest::scratch;
using nlohmann::json;

// Small shapes: each run is a fraction of a second.
const std::string kFa = "fa --param S=1024 --param H=1";
const std::string kGemm = "gemm --param M=256 --param N=256 --param K=512";

/// Writes `tilepipe ARGS --json`'s stdout to NAME in the scratch directory.
std::string report(const std::string& args, const std::string& name) {
  auto r = cli(args + " --json");
  EXPECT_EQ(r.code, 0) << r.err;
  const auto path = scratch().file(name).string();
  std::ofstream(path) << r.out;
  return path;
}

/// Every number under a key containing "delta", anywhere in `j`.
void each_delta(const json& j, const std::function<void(const std::string&, double)>& f) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key().find("delta") != std::string::npos && it.value().is_number())
        f(it.key(), it.value().get<double>());
      each_delta(it.value(), f);
    }
  } else if (j.is_array()) {
    for (const auto& x : j) each_delta(x, f);
  }
}

TEST(Profile, LinesGiveEveryCycleOfTheCriticalCoreToALine) {
  auto r = cli("profile " + kFa + " --variant expert --no-verify --lines --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  const json& meta = j["line_attribution"];
  double sum = meta["launch_cycles"].get<double>();
  for (const auto& l : j["lines"]) {
    EXPECT_EQ(l["file"], "fa.cc");
    EXPECT_GT(l["line"].get<int>(), 0);
    double waits = 0;
    for (const auto& w : l["waits_on"]) waits += w.get<double>();
    EXPECT_NEAR(waits, l["stall_cycles"].get<double>(), 1e-6);
    EXPECT_NEAR(l["cycles"].get<double>(),
                l["busy_cycles"].get<double>() + l["stall_cycles"].get<double>(), 1e-6);
    sum += l["cycles"].get<double>();
  }
  EXPECT_NEAR(sum, j["cycles"].get<double>(), 1e-9 * j["cycles"].get<double>());
  EXPECT_EQ(meta["files"]["fa.cc"], 100.0);
  // The launch is apart: kernel-only (msprof's Task Duration) + launch = the whole.
  EXPECT_DOUBLE_EQ(j["launch_us"].get<double>(), 5.0);  // a3's die.launch_us
  EXPECT_NEAR(j["kernel_us"].get<double>() + j["launch_us"].get<double>(),
              j["time_us"].get<double>(), 1e-9);
  EXPECT_NE(r.err.find("per-line cycles on the critical core"), std::string::npos) << r.err;
}

TEST(Diff, AReportDiffedWithItselfIsEmpty) {
  const std::string a = report("profile " + kGemm + " --no-verify", "self.json");
  auto r = cli("diff " + a + " " + a + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json d = json::parse(r.out);
  int deltas = 0;
  each_delta(d, [&](const std::string& key, double v) {
    ++deltas;
    EXPECT_EQ(v, 0) << key;
  });
  EXPECT_GT(deltas, 40);  // the pipes' fields alone are 28
  EXPECT_TRUE(d["no_change"].get<bool>());
  EXPECT_FALSE(d["bound"]["changed"].get<bool>());
  EXPECT_FALSE(d["lines"].empty());
  auto t = cli("diff " + a + " " + a);
  EXPECT_EQ(t.code, 0);
  EXPECT_NE(t.out.find("no change"), std::string::npos) << t.out;
}

TEST(Diff, TwoFaVariantsLineDeltasAddUpToTheCycleDifference) {
  const std::string html = scratch().file("fa_diff.html").string();
  auto r = cli("diff " + kFa + " --variant expert --variant auto --json --html " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  json d = json::parse(r.out);
  EXPECT_EQ(d["a"]["variant"], "expert");
  EXPECT_EQ(d["b"]["variant"], "auto");
  const double delta = d["cycles"]["delta"].get<double>();
  EXPECT_NE(delta, 0);
  EXPECT_DOUBLE_EQ(delta, d["cycles"]["b"].get<double>() - d["cycles"]["a"].get<double>());
  ASSERT_TRUE(d["lines_total"]["available"].get<bool>());
  double sum = 0;
  for (const auto& l : d["lines"]) sum += l["cycles"]["delta"].get<double>();
  EXPECT_NEAR(sum, d["lines_total"]["lines_cycles_delta"].get<double>(), 1e-6);
  EXPECT_NEAR(sum + d["lines_total"]["launch_cycles"]["delta"].get<double>(), delta,
              1e-9 * d["cycles"]["a"].get<double>());
  // Largest change first.
  ASSERT_GE(d["lines"].size(), 2u);
  EXPECT_GE(std::abs(d["lines"][0]["cycles"]["delta"].get<double>()),
            std::abs(d["lines"][1]["cycles"]["delta"].get<double>()));
  for (const char* p : {"M", "V", "MTE2", "MTE3", "S"})
    EXPECT_TRUE(d["pipes"][p]["instructions"].contains("delta")) << p;
  EXPECT_FALSE(d["no_change"].get<bool>());
  const std::string what = d["what_changed"].get<std::string>();
  EXPECT_NE(what.find("B takes"), std::string::npos) << what;
  EXPECT_NE(what.find("The bound"), std::string::npos) << what;
  const std::string page = clitest::read_text(html);
  EXPECT_NE(page.find("What changed"), std::string::npos);
  EXPECT_NE(page.find("Lines that changed most"), std::string::npos);
  // The same two runs give the same diff.
  auto again = cli("diff " + kFa + " --variant expert --variant auto --json");
  d.erase("html");
  EXPECT_EQ(json::parse(again.out), d);
}

TEST(Diff, RunReportsDiffWithTheirLinesAndParameters) {
  const std::string a = report("run " + kGemm + " --mode timing --lines", "run_a.json");
  const std::string b = report(
      "run gemm --param M=256 --param N=256 --param K=1024 --mode timing "
      "--lines",
      "run_b.json");
  auto r = cli("diff " + a + " " + b + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json d = json::parse(r.out);
  EXPECT_TRUE(d["same_kernel"].get<bool>());
  EXPECT_TRUE(d["lines_total"]["available"].get<bool>());
  EXPECT_GT(d["cycles"]["delta"].get<double>(), 0);  // twice the K loop
  EXPECT_NEAR(d["lines_total"]["lines_cycles_delta"].get<double>(),
              d["cycles"]["delta"].get<double>(), 1e-6 * d["cycles"]["b"].get<double>());
  // A run report without --lines: the rest is compared, the lines' absence said.
  const std::string c = report("run " + kGemm + " --mode timing", "run_c.json");
  auto r2 = cli("diff " + a + " " + c);
  EXPECT_EQ(r2.code, 0) << r2.err;
  EXPECT_NE(r2.out.find("report B has no per-line cycles"), std::string::npos) << r2.out;
}

TEST(Diff, ReportsOfDifferentKernelsAreComparedAndSaidToBe) {
  const std::string a = report("run " + kGemm + " --mode timing --lines", "k_a.json");
  const std::string b = report("run elementwise --mode timing --lines", "k_b.json");
  auto r = cli("diff " + a + " " + b + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json d = json::parse(r.out);
  EXPECT_FALSE(d["same_kernel"].get<bool>());
  ASSERT_EQ(d["notes"].size(), 1u);
  EXPECT_NE(d["notes"][0].get<std::string>().find("different kernels (gemm and elementwise)"),
            std::string::npos);
}

TEST(Diff, BadInputsAreOneLineErrors) {
  const std::string good = report("run " + kGemm + " --mode timing", "good.json");
  const std::string missing = scratch().file("missing.json").string();
  expect_bad_input("diff " + missing + " " + good, {"report A", "does not exist"});
  const std::string text = scratch().file("text.json").string();
  std::ofstream(text) << "cycles: 12\n";
  expect_bad_input("diff " + good + " " + text + " --json", {"report B", "is not JSON"});
  const std::string list = report("list", "list.json");
  expect_bad_input("diff " + list + " " + good,
                   {"not a run or profile report", "no string 'kernel'"});
  const std::string error = scratch().file("error.json").string();
  std::ofstream(error) << R"({"error": "tilepipe: kernel 'x' not found", "exit_code": 2})";
  expect_bad_input("diff " + good + " " + error, {"an error report", "kernel 'x' not found"});
  expect_bad_input("diff " + good, {"one report", "give a second report"});
  expect_bad_input("diff " + good + " " + good + " --variant expert", {"two report files"});
  expect_bad_input("diff " + kGemm + " --variant expert --variant naive --variant swizzle",
                   {"3 --variant given"});
  expect_bad_input("diff gemm elementwise", {"expected two report files"});
}

}  // namespace
}  // namespace tilepipe

// Fidelity anchors and calibration (src/driver/anchors.cc, calibrate.cc): the anchors file
// loads and runs, a measurements CSV is read with its errors named, and a fit recovers a
// known synthetic truth (measurements simulated with a perturbed config, fitted from the
// original one).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/fidelity.h"

namespace tilepipe {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

struct TempDir {
  TempDir() {
    path = fs::temp_directory_path() /
           fs::path("tilepipe_calibrate_" + std::to_string(::getpid()) + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
  fs::path path;
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const driver::ParamError& e) {
    return e.message;
  }
  return "";
}

ojson a3_json() {
  std::ifstream in(chip_config_path("a3"));
  return ojson::parse(in);
}

TEST(Anchors, ThePublishedFileLoadsWithEveryAnchorKind) {
  kernels::register_all();
  auto set = driver::load_anchors(driver::default_anchors_path());
  ASSERT_GE(set.anchors.size(), 20u);
  int corpus = 0, cpp = 0;
  for (const auto& a : set.anchors) {
    EXPECT_GT(a.measured_us, 0) << a.name;
    EXPECT_FALSE(a.source.empty()) << a.name;
    (a.in_corpus ? corpus : cpp)++;
    // Every C++ anchor names a kernel and parameters the driver accepts.
    if (!a.in_corpus) {
      auto k = driver::find_kernel(a.kernel);
      EXPECT_NO_THROW(driver::resolve_params(k, a.params)) << a.name;
      EXPECT_NO_THROW(driver::resolve_variant(k, a.variant)) << a.name;
    }
  }
  EXPECT_EQ(corpus, 8);  // FA expert at 32K / 64K / 128K, FA auto, the four SFA files
  // The FA files run at the published shape: 12 query heads on 1 KV head.
  for (const auto& a : set.anchors)
    if (a.name.rfind("fa-file.", 0) == 0) {
      EXPECT_EQ(a.params.at("heads_q"), "12") << a.name;
      EXPECT_EQ(a.params.at("heads_kv"), "1") << a.name;
    }
  EXPECT_FALSE(driver::corpus_dir(set).empty());
}

TEST(Anchors, OnlySelectsByNameOrGroupAndRejectsAPatternThatMatchesNothing) {
  auto set = driver::load_anchors(driver::default_anchors_path());
  auto copies = driver::select_anchors(set, {"copy"});
  ASSERT_EQ(copies.anchors.size(), 3u);
  EXPECT_EQ(driver::select_anchors(set, {"fa.expert.*"}).anchors.size(), 3u);
  EXPECT_NE(error_of([&] {
              driver::select_anchors(set, {"nope*"});
            }).find("--only 'nope*' matches no anchor"),
            std::string::npos);
}

TEST(Anchors, TheCopyAnchorsRunWithinTenPercentAndPythonFilesAreSkippedWithoutTheFrontEnd) {
  kernels::register_all();
  auto set = driver::select_anchors(driver::load_anchors(driver::default_anchors_path()),
                                    {"copy", "sfa-file.pa"});
  driver::AnchorOptions o;
  o.corpus = driver::corpus_dir(set);
  o.jobs = 2;
  auto runs = driver::run_anchors(set, o);
  ASSERT_EQ(runs.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(runs[i].status, "ok") << set.anchors[i].name << ": " << runs[i].note;
    EXPECT_LT(std::fabs(runs[i].error_pct), 10) << set.anchors[i].name;
  }
  // The test binary registers no resolver: a Python anchor is skipped, saying why.
  EXPECT_EQ(runs[3].status, "skipped");
  EXPECT_NE(runs[3].note.find("Python front end"), std::string::npos) << runs[3].note;
  auto s = driver::summarize_errors(set, runs);
  EXPECT_EQ(s.n, 3);
  EXPECT_LT(s.max_abs_pct, 10);
}

TEST(Anchors, ACsvNamesItsKernelsParamsAndTimesAndItsErrorsTheirLine) {
  TempDir dir;
  auto set = driver::load_anchors(dir.file("m.csv",
                                           "# on-board times\n"
                                           "name,kernel,variant,params,measured_us,source\n"
                                           "a,gm_read,blocks,N=1024 block_num=24,12.5,msprof\n"
                                           "b,sub/mine.py:f,,\"M=1;K=2\",3,\n"));
  ASSERT_EQ(set.anchors.size(), 2u);
  EXPECT_EQ(set.anchors[0].params.at("N"), "1024");
  EXPECT_EQ(set.anchors[0].params.at("block_num"), "24");
  EXPECT_DOUBLE_EQ(set.anchors[0].measured_us, 12.5);
  // A relative Python file is relative to the CSV's directory.
  EXPECT_EQ(set.anchors[1].kernel, (dir.path / "sub/mine.py:f").string());
  EXPECT_EQ(set.anchors[1].params.at("K"), "2");
  EXPECT_TRUE(driver::is_python_anchor(set.anchors[1]));
  std::string bad = dir.file("bad.csv", "kernel,measured_us\ngemm,-3\n");
  EXPECT_NE(error_of([&] { driver::load_anchors(bad); }).find("bad.csv:2: measured_us '-3'"),
            std::string::npos);
  std::string col = dir.file("col.csv", "kernel,time\n");
  EXPECT_NE(error_of([&] { driver::load_anchors(col); }).find("unknown column 'time'"),
            std::string::npos);
}

/// How a source measured is one protocol for all its anchors: a warm source's anchors run
/// with their inputs in the L2 whatever the chip says (a GEMM whose first reads miss to HBM
/// reads faster), and two rows of one source cannot disagree.
TEST(Anchors, AWarmSourceRunsItsAnchorsWithTheirInputsInTheL2) {
  kernels::register_all();
  TempDir dir;
  auto set =
      driver::load_anchors(dir.file("w.csv",
                                    "name,kernel,variant,params,measured_us,source,l2\n"
                                    "cold,gemm,expert,M=2048 N=2048 K=2048,70,bench A,\n"
                                    "warm,gemm,expert,M=2048 N=2048 K=2048,70,bench B,warm\n"));
  EXPECT_FALSE(set.anchors[0].protocol.l2_warm);
  EXPECT_TRUE(set.anchors[1].protocol.l2_warm);
  driver::AnchorOptions o;
  o.jobs = 2;
  auto runs = driver::run_anchors(set, o);
  ASSERT_EQ(runs[0].status, "ok") << runs[0].note;
  ASSERT_EQ(runs[1].status, "ok") << runs[1].note;
  EXPECT_LT(runs[1].simulated_us, 0.9 * runs[0].simulated_us);
  std::string bad = dir.file("bad.csv", "kernel,measured_us,l2\ngemm,3,yes\n");
  EXPECT_NE(error_of([&] { driver::load_anchors(bad); }).find("l2 'yes' must be warm or cold"),
            std::string::npos);
  std::string mixed = dir.file("mixed.csv",
                               "kernel,measured_us,source,launch\n"
                               "gemm,3,bench,included\n"
                               "gemm,4,bench,excluded\n");
  EXPECT_NE(error_of([&] { driver::load_anchors(mixed); }).find("one source, one protocol"),
            std::string::npos);
  std::string old = dir.file("old.csv", "kernel,measured_us,l2_warm\ngemm,3,1\n");
  EXPECT_NE(error_of([&] { driver::load_anchors(old); }).find("no 'l2_warm' column"),
            std::string::npos);
}

/// The published file: every anchor names its set, its family and a source whose protocol
/// it runs with; an anchor cannot carry a switch of its own.
TEST(Anchors, EveryPublishedAnchorHasASetAFamilyAndItsSourcesProtocol) {
  auto set = driver::load_anchors(driver::default_anchors_path());
  std::map<std::string, int> sets;
  std::map<std::string, std::pair<bool, bool>> protocol_of;
  for (const auto& a : set.anchors) {
    sets[a.set]++;
    EXPECT_FALSE(a.family.empty()) << a.name;
    EXPECT_FALSE(a.citation.empty()) << a.name;
    EXPECT_FALSE(a.protocol.timer.empty()) << a.name;
    EXPECT_FALSE(a.protocol.evidence.empty()) << a.name;
    auto p = std::make_pair(a.protocol.l2_warm, a.protocol.launch_included);
    auto [it, fresh] = protocol_of.try_emplace(a.source, p);
    EXPECT_TRUE(fresh || it->second == p) << a.name;
    // Only the SFA bench makes its inputs on the device right before the call.
    EXPECT_EQ(a.protocol.l2_warm, a.source == "bench_sfa") << a.name;
  }
  EXPECT_GE(sets["calibration"], 2);
  EXPECT_GE(sets["validation"], 2);
  EXPECT_EQ(sets.size(), 2u);
  TempDir dir;
  std::string warm = dir.file("w.json",
                              R"({"sources": {"s": {"citation": "c", "protocol": {"l2": "cold",
                                 "launch": "excluded", "timer": "t", "evidence": "e"}}},
                                 "anchors": [{"name": "a", "set": "calibration", "kernel": "gemm",
                                 "measured_us": 3, "source": "s", "l2_warm": true}]})");
  EXPECT_NE(error_of([&] { driver::load_anchors(warm); }).find("\"l2_warm\" is not an anchor key"),
            std::string::npos);
  std::string noset = dir.file("n.json",
                               R"({"sources": {"s": {"citation": "c", "protocol": {"l2": "cold",
                                  "launch": "excluded", "timer": "t", "evidence": "e"}}},
                                  "anchors": [{"name": "a", "kernel": "gemm", "measured_us": 3,
                                  "source": "s"}]})");
  EXPECT_NE(error_of([&] { driver::load_anchors(noset); }).find("\"set\" is missing"),
            std::string::npos);
}

/// The model's time is the kernel's from its first block's start; the launch (die.launch_us)
/// is reported apart and compared only when the source's timer covers it.
TEST(Anchors, TheLaunchIsReportedApartAndChargedOnlyWhenTheProtocolIncludesIt) {
  kernels::register_all();
  TempDir dir;
  auto set = driver::load_anchors(dir.file("l.csv",
                                           "name,kernel,variant,params,measured_us,source,launch\n"
                                           "task,gm_read,blocks,N=1024,10,msprof,excluded\n"
                                           "host,gm_read,blocks,N=1024,10,host timer,included\n"));
  driver::AnchorOptions o;
  o.chip = load_chip_config("a3");
  auto runs = driver::run_anchors(set, o);
  ASSERT_EQ(runs[0].status, "ok") << runs[0].note;
  ASSERT_EQ(runs[1].status, "ok") << runs[1].note;
  EXPECT_EQ(runs[0].launch_us, o.chip->launch_us);
  EXPECT_GT(runs[0].launch_us, 0);
  EXPECT_DOUBLE_EQ(runs[0].kernel_us, runs[1].kernel_us);
  EXPECT_DOUBLE_EQ(runs[0].simulated_us, runs[0].kernel_us);
  EXPECT_DOUBLE_EQ(runs[1].simulated_us, runs[1].kernel_us + runs[1].launch_us);
  EXPECT_NEAR(runs[1].cycles * o.chip->us_per_cycle(), runs[1].simulated_us, 1e-9);
}

TEST(Calibrate, ChipValuesAreSetByDottedKeyAndUnknownKeysAreNamed) {
  ojson c = a3_json();
  driver::set_chip_value(c, "dma.nd2nz_efficiency", 0.9125);
  EXPECT_DOUBLE_EQ(driver::get_chip_value(c, "dma.nd2nz_efficiency"), 0.9125);
  driver::set_chip_value(c, "memory.ub.banks", 47.6);  // an integer key stays integer
  EXPECT_EQ(c["memory"]["ub"]["banks"]["value"], 48);
  // A number the file writes without a fraction (7) is still a number to the loader.
  driver::set_chip_value(c, "vector.reduce_cycles_per_repeat", 3.5);
  EXPECT_DOUBLE_EQ(driver::get_chip_value(c, "vector.reduce_cycles_per_repeat"), 3.5);
  EXPECT_NE(error_of([&] {
              driver::get_chip_value(c, "dma.mte2_latncy");
            }).find("unknown chip config key 'dma.mte2_latncy'"),
            std::string::npos);
}

TEST(Calibrate, EveryDocumentedRangeIsOneTheLoaderAccepts) {
  ojson base = a3_json();
  for (const auto& [key, r] : driver::load_fit_ranges()) {
    SCOPED_TRACE(key);
    for (double v : {r.lo, r.hi}) {
      ojson c = base;
      driver::set_chip_value(c, key, v);
      EXPECT_NO_THROW(parse_chip_config(c.dump(), key));
    }
    EXPECT_FALSE(r.source.empty());
  }
}

TEST(Calibrate, RecoversAKnownSyntheticTruth) {
  kernels::register_all();
  // Reads that are latency-bound (a 1024^2 matrix: 11 blocks per core) and bandwidth-bound
  // (8192^2) pin the HBM latency and bandwidth apart.
  driver::AnchorSet set;
  set.origin = "synthetic";
  for (auto [variant, n] : std::vector<std::pair<std::string, int>>{
           {"blocks", 1024}, {"blocks", 2048}, {"blocks", 8192}, {"rows128", 1024}}) {
    driver::Anchor a;
    a.name = variant + "." + std::to_string(n);
    a.kernel = "gm_read";
    a.variant = variant;
    a.params = {{"N", std::to_string(n)}};
    set.anchors.push_back(a);
  }
  // The reads must be served by HBM to pin its parameters: the L2 starts empty (a3 makes
  // inputs that fit resident at the start, die.l2_warm_inputs, and these all fit).
  ojson cold = a3_json();
  driver::set_chip_value(cold, "die.l2_warm_inputs", 0);
  TempDir dir;
  const std::string cold_path = dir.file("a3_cold.json", cold.dump());
  ojson truth = cold;
  driver::set_chip_value(truth, "die.hbm_bw", 820);
  driver::set_chip_value(truth, "dma.mte2_latency", 1100);
  driver::AnchorOptions o;
  o.chip = parse_chip_config(truth.dump(), "truth");
  o.jobs = 2;
  auto runs = driver::run_anchors(set, o);
  for (size_t i = 0; i < runs.size(); ++i) {
    ASSERT_EQ(runs[i].status, "ok") << runs[i].note;
    set.anchors[i].measured_us = runs[i].simulated_us;
  }

  driver::CalibrationRequest req;
  req.chip = cold_path;
  req.fit = {"die.hbm_bw", "dma.mte2_latency"};
  req.measurements = set;
  req.jobs = 2;
  auto res = driver::calibrate(req);
  ASSERT_EQ(res.params.size(), 2u);
  EXPECT_NEAR(res.params[0].value, 820, 820 * 0.02) << "die.hbm_bw";
  EXPECT_NEAR(res.params[1].value, 1100, 1100 * 0.03) << "dma.mte2_latency";
  EXPECT_LT(res.loss_after, 1e-4);
  EXPECT_GT(res.loss_before, 100 * res.loss_after);
  for (size_t i = 0; i < set.anchors.size(); ++i) {
    EXPECT_LT(std::fabs(res.after[i].error_pct), 1) << set.anchors[i].name;
    // Leave-one-out: the other three predict the fourth.
    ASSERT_FALSE(std::isnan(res.loo_error_pct[i])) << set.anchors[i].name;
    EXPECT_LT(std::fabs(res.loo_error_pct[i]), 3) << set.anchors[i].name;
  }
  // The written config loads, holds the fitted values, and says where they came from.
  ChipConfig fitted = parse_chip_config(res.config.dump(), "fitted");
  EXPECT_EQ(fitted.hbm_bw, res.params[0].value);
  EXPECT_NE(fitted.sources.at("die.hbm_bw").find("Calibrated by `tilepipe calibrate`"),
            std::string::npos);
  EXPECT_EQ(res.config["calibration"]["fit"].size(), 2u);
  EXPECT_EQ(res.config["calibration"]["table"].size(), 4u);
}

TEST(Calibrate, RefusesAKeyWithoutARangeAndARangeTheLoaderRejects) {
  kernels::register_all();
  driver::CalibrationRequest req;
  req.measurements = driver::select_anchors(driver::load_anchors(driver::default_anchors_path()),
                                            {"copy.blocks", "copy.rows128"});
  req.fit = {"die.clock_mhz"};
  EXPECT_NE(error_of([&] { driver::calibrate(req); })
                .find("--fit die.clock_mhz: no documented "
                      "range"),
            std::string::npos);
  req.fit = {"dma.nd2nz_efficiency=0.5:1.5"};
  EXPECT_NE(error_of([&] { driver::calibrate(req); })
                .find("outside what the chip config loader "
                      "accepts"),
            std::string::npos);
}

/// Cheap reads of gm_read as measurements: two families (blocks, rows), calibration and
/// validation rows, fitted on die.hbm_bw only.
driver::AnchorSet cheap_reads(double validation_us) {
  driver::AnchorSet set;
  set.origin = "synthetic";
  struct Row {
    const char* variant;
    int n;
    double us;
    const char* set;
  };
  for (const Row& r :
       {Row{"blocks", 1024, 9.0, "calibration"}, Row{"blocks", 2048, 25.0, "calibration"},
        Row{"rows128", 1024, 9.5, "calibration"},
        Row{"rows128", 2048, validation_us, "validation"}}) {
    driver::Anchor a;
    a.name = fmt::format("{}.{}", r.variant, r.n);
    a.kernel = "gm_read";
    a.variant = r.variant;
    a.family = r.variant;
    a.set = r.set;
    a.params = {{"N", std::to_string(r.n)}};
    a.measured_us = r.us;
    set.anchors.push_back(a);
  }
  return set;
}

driver::CalibrationResult fit_cheap_reads(double validation_us) {
  driver::CalibrationRequest req;
  req.fit = {"die.hbm_bw"};
  req.measurements = cheap_reads(validation_us);
  req.jobs = 2;
  req.max_evals = 12;
  req.leave_one_out = false;
  return driver::calibrate(req);
}

TEST(Calibrate, AValidationMeasurementNeverMovesAFittedParameter) {
  kernels::register_all();
  auto a = fit_cheap_reads(30.0);
  auto b = fit_cheap_reads(90.0);  // the validation row's time perturbed threefold
  ASSERT_EQ(a.params.size(), 1u);
  EXPECT_EQ(a.params[0].value, b.params[0].value);
  EXPECT_EQ(a.loss_after, b.loss_after);
  EXPECT_FALSE(a.used[3]);  // simulated and reported, never in the objective
  ASSERT_EQ(a.after[3].status, "ok") << a.after[3].note;
  EXPECT_NEAR(a.after[3].simulated_us, b.after[3].simulated_us, 1e-9);
  EXPECT_NE(a.after[3].error_pct, b.after[3].error_pct);
  auto row = driver::calibration_row(cheap_reads(30.0).anchors[3], a, 3);
  EXPECT_EQ(row["set"], "validation");
  EXPECT_FALSE(row.contains("loo_error_pct"));
}

TEST(Calibrate, LeaveOneFamilyOutRefitsWithoutEachFamilyAndPredictsIt) {
  kernels::register_all();
  auto res = fit_cheap_reads(30.0);
  ASSERT_EQ(res.families.size(), 2u);  // blocks, rows128: calibration families only
  EXPECT_EQ(res.families[0].family, "blocks");
  EXPECT_EQ(res.families[0].members, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(res.families[1].family, "rows128");
  EXPECT_EQ(res.families[1].members, (std::vector<size_t>{2}));
  for (const auto& f : res.families) {
    ASSERT_EQ(f.values.size(), 1u);
    ASSERT_EQ(f.error_pct.size(), f.members.size());
    for (double e : f.error_pct) EXPECT_FALSE(std::isnan(e)) << f.family;
  }
  // Without the blocks the one 1024^2 read in 128-byte rows is left, and its time does not
  // move with die.hbm_bw (its per-core DMA rate binds): that fit cannot leave its start.
  EXPECT_FALSE(res.families[0].determined);
  EXPECT_EQ(res.families[0].values[0], res.params[0].start);
  EXPECT_TRUE(res.families[1].determined);  // the blocks read at die.hbm_bw
  auto rows = driver::family_rows(cheap_reads(30.0), res);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1]["members"][0]["name"], "rows128.1024");
  EXPECT_TRUE(rows[0].contains("mean_abs_error_pct"));
}

}  // namespace
}  // namespace tilepipe

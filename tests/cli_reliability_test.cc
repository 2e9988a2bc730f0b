// Reliability of the command line (issue 7): the sync inventory and mutation commands of
// `check`, hostile inputs (each exits 2 with a one-line reason), outputs written atomically,
// and determinism (same program + config + seed -> byte-identical outputs, whatever -j).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"

namespace tilepipe {
namespace {

using namespace clitest;

json parse(const std::string& s) {
  json j = json::parse(s, nullptr, false);
  EXPECT_TRUE(j.is_object()) << s;
  return j.is_object() ? j : json::object();
}

const std::string kFa = "check fa --variant expert --param S=512 --param H=1";

// ---------------------------------------------------------------------------------------
// check --list-syncs / --drop-sync / --find-redundant

TEST(CliSyncs, ListSyncsJsonHasEveryFieldAndDslSources) {
  CliResult r = cli(kFa + " --list-syncs --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = parse(r.out);
  ASSERT_TRUE(j.contains("syncs") && j["syncs"].is_array());
  ASSERT_GT(j["syncs"].size(), 20u);
  int i = 0;
  for (const auto& s : j["syncs"]) {
    EXPECT_EQ(s.value("index", -1), i++);
    for (const char* f : {"kind", "pipes", "event_id", "source", "core"})
      EXPECT_TRUE(s.contains(f) && s[f].is_string()) << f << " in " << s.dump();
    EXPECT_EQ(s.value("source", "").rfind("fa.cc:", 0), 0u) << s.dump();
  }
  EXPECT_EQ(j["syncs"][0].value("kind", ""), "set_flag");
  // Stable: a second listing is byte-identical.
  EXPECT_EQ(cli(kFa + " --list-syncs --json").out, r.out);
}

/// The first (or last) sync of `kind` on `pipes` of `core` in the listing (null if none).
json sync_of(const std::string& core, const std::string& kind, const std::string& pipes,
             bool last = false) {
  json j = parse(cli(kFa + " --list-syncs --json").out), hit;
  for (const auto& s : j["syncs"])
    if (s.value("core", "") == core && s.value("kind", "") == kind &&
        s.value("pipes", "") == pipes && (hit.is_null() || last))
      hit = s;
  return hit;
}

TEST(CliSyncs, DropSyncReportsRaceWithSourceLinesAndExitsNonzero) {
  json w = sync_of("AIV", "wait_flag", "MTE2->V");  // before the softmax reads the tile
  ASSERT_FALSE(w.is_null());
  CliResult r = cli(kFa + fmt::format(" --drop-sync {} --json", w["index"].get<int>()));
  EXPECT_EQ(r.code, 3) << r.err;
  json j = parse(r.out);
  EXPECT_EQ(j.value("outcome", ""), "race");
  EXPECT_EQ(j.value("ok", true), false);
  ASSERT_TRUE(j.contains("errors") && !j["errors"].empty());
  EXPECT_EQ(j["errors"][0].value("kind", ""), "race");
  EXPECT_NE(r.err.find("race found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error: data race on 'io'"), std::string::npos) << r.err;
  EXPECT_NE(j["errors"][0].value("where", "").find("fa.cc:"), std::string::npos);
}

TEST(CliSyncs, DropSyncOfASetReportsDeadlock) {
  json s = sync_of("AIV", "set_flag", "MTE2->V"), w = sync_of("AIV", "wait_flag", "MTE2->V");
  ASSERT_FALSE(s.is_null() || w.is_null());
  CliResult r = cli(kFa + fmt::format(" --drop-sync {}", s["index"].get<int>()));
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_NE(r.out.find("deadlock found"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find(w["source"].get<std::string>() + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("MTE2->V #0 forever; never set"), std::string::npos) << r.err;
}

TEST(CliSyncs, DropSyncOfADrainWaitIsRedundantExitZero) {
  json w = sync_of("AIC", "wait_cross_flag", "S", /*last=*/true);  // the AIC's final drain
  ASSERT_FALSE(w.is_null());
  CliResult r = cli(kFa + fmt::format(" --drop-sync {}", w["index"].get<int>()));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("redundant: no race, no deadlock, identical result"), std::string::npos)
      << r.out;
}

TEST(CliSyncs, FindRedundantListsRedundantSyncsWithCycles) {
  CliResult r = cli("check gemm --param M=128 --param N=128 --param K=256 --find-redundant --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = parse(r.out);
  ASSERT_TRUE(j.contains("redundant") && j["redundant"].is_array());
  ASSERT_FALSE(j["redundant"].empty());
  for (int i : j["redundant"]) {
    const auto& s = j["syncs"][static_cast<size_t>(i)];
    EXPECT_EQ(s.value("outcome", ""), "redundant");
    EXPECT_TRUE(s.contains("saved_cycles")) << s.dump();
  }
  EXPECT_TRUE(j.contains("combined") && j["combined"].contains("saved_cycles"));
  EXPECT_NE(r.err.find("redundant (each on its own; cycles it costs)"), std::string::npos) << r.err;
}

TEST(CliSyncs, DropSyncOutOfRangeOrNotANumberIsBadInput) {
  expect_bad_input(kFa + " --drop-sync 100000",
                   {"--drop-sync 100000", "expected a sync index in [0,", "--list-syncs"});
  expect_bad_input(kFa + " --drop-sync -3", {"--drop-sync -3", "expected a sync index"});
  expect_bad_input(kFa + " --drop-sync x", {"--drop-sync"});
  expect_bad_input(kFa + " --list-syncs --find-redundant", {"excludes"});
}

// ---------------------------------------------------------------------------------------
// Hostile inputs: exit 2, nothing on stdout, one line that says what was wrong

TEST(CliHostile, NumericParametersOutOfEveryKind) {
  expect_bad_input("run gemm --param M=0", {"M=0", "out of range", "[16, 65536]"});
  expect_bad_input("run gemm --param M=-16", {"M=-16", "[16, 65536]"});
  expect_bad_input("run gemm --param M=99999999999999999999999", {"M=9999", "integer"});
  expect_bad_input("run gemm --param M=1e3", {"M=1e3", "integer"});
  expect_bad_input("run gemm --param M=0x10", {"M=0x10", "integer"});
  expect_bad_input("run gemm --param M=", {"M=", "integer"});
  expect_bad_input("run gemm --param =5", {"'=5'", "NAME=VALUE"});
  expect_bad_input("run gemm --param M=abc --json", {"M=abc"});
}

TEST(CliHostile, SeedAndCycleBudget) {
  expect_bad_input("run gemm --seed -1", {"--seed '-1'", "[0, 18446744073709551615]"});
  expect_bad_input("run gemm --seed 18446744073709551616", {"--seed", "whole number"});
  expect_bad_input("run gemm --seed 7x", {"--seed '7x'"});
  expect_bad_input("run gemm --max-cycles 0", {"--max-cycles '0'", "> 0"});
  expect_bad_input("run gemm --max-cycles -5", {"--max-cycles '-5'", "> 0"});
  expect_bad_input("run gemm --max-cycles inf", {"--max-cycles 'inf'"});
  expect_bad_input("run gemm --max-cycles many", {"--max-cycles 'many'"});
  expect_bad_input("ladder fa -j 0", {"--jobs", "1 to 256"});
  expect_bad_input("ladder fa -j 100000", {"--jobs", "1 to 256"});
}

TEST(CliHostile, UnknownKernelVariantChip) {
  expect_bad_input("check nope", {"unknown kernel 'nope'", "fa"});
  expect_bad_input("run fa --variant turbo", {"no variant 'turbo'", "expert"});
  expect_bad_input("check fa --chip a9", {"unknown chip 'a9'", "a3"});
  expect_bad_input("ladder softmax", {"no optimisation ladder", "fa", "gemm"});
}

TEST(CliHostile, NumStagesThatCannotFitSaysWhatFits) {
  // The cross-core counter (15 signals per batch) is checked with the parameters.
  expect_bad_input(
      "run fa --variant expert --param num_stages=31",
      {"num_stages=31", "counter holds 15", "num_stages <= 30", "cross_interval >= 3"});
  // UB: the capacity error names the largest num_stages that fits.
  CliResult r =
      cli("run fa --variant expert --param S=1024 --param H=1 --param num_stages=200 "
          "--param cross_interval=14");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("error: UB overflow on AIV"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: use --param num_stages=126 (the largest that fits)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("error: UB overflow"), r.err.find("error:")) << "the reason comes first";
}

TEST(CliHostile, OutputInAMissingDirectoryFailsBeforeTheRun) {
  const std::string missing = scratch().file("no_such_dir").string();
  expect_bad_input("run gemm --trace '" + missing + "/t.json'", {missing, "does not exist"});
  expect_bad_input("run gemm --csv-dir '" + missing + "'", {missing, "does not exist"});
  expect_bad_input("run gemm --trace '" + scratch().file("").string() + "'", {"is a directory"});
}

TEST(CliHostile, ReadOnlyOutputIsRejected) {
  // Root ignores directory permissions: use a directory no one may write then.
  std::string dir = "/proc/1";
  fs::path ro = scratch().file("read_only");
  if (::geteuid() != 0) {
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    dir = ro.string();
  }
  expect_bad_input("run gemm --trace '" + dir + "/t.json'", {"not writable"});
  expect_bad_input("run gemm --csv-dir '" + dir + "'", {"not writable"});
  if (::geteuid() != 0) {
    fs::path f = scratch().file("ro_trace.json");
    std::ofstream(f) << "old";
    fs::permissions(f, fs::perms::owner_read);
    expect_bad_input("run gemm --trace '" + f.string() + "'", {"read-only"});
    fs::permissions(ro, fs::perms::owner_all);
  }
}

TEST(CliOutput, TraceIsWrittenThroughATemporaryFileThatDoesNotRemain) {
  fs::path dir = scratch().file("atomic");
  fs::create_directories(dir);
  CliResult r =
      cli("run gemm --trace '" + (dir / "t.json").string() + "' --csv-dir '" + dir.string() + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"code_exe.csv", "pipe_utilization.csv", "t.json"}));
  EXPECT_TRUE(json::parse(read_text(dir / "t.json"), nullptr, false).is_object());
}

// ---------------------------------------------------------------------------------------
// Determinism

/// The JSON without the wall-clock time and the trace path: the only fields allowed to differ.
std::string without_wall(const std::string& out) {
  json j = parse(out);
  j.erase("sim_wall_s");
  j.erase("trace");
  if (j.contains("steps"))
    for (auto& s : j["steps"]) s.erase("sim_wall_s");
  return j.dump();
}

TEST(Determinism, SameInputsGiveByteIdenticalTraceCsvSummaryAndJson) {
  fs::path a = scratch().file("det_a"), b = scratch().file("det_b");
  fs::create_directories(a);
  fs::create_directories(b);
  const std::string run = "run fa --variant expert --param S=512 --param H=2 --seed 5 --json";
  CliResult ra =
      cli(run + " --trace '" + (a / "t.json").string() + "' --csv-dir '" + a.string() + "'");
  CliResult rb =
      cli(run + " --trace '" + (b / "t.json").string() + "' --csv-dir '" + b.string() + "'");
  ASSERT_EQ(ra.code, 0) << ra.err;
  ASSERT_EQ(rb.code, 0) << rb.err;
  EXPECT_EQ(without_wall(ra.out), without_wall(rb.out));
  EXPECT_EQ(ra.err, rb.err) << "the text summary";
  for (const char* f : {"t.json", "pipe_utilization.csv", "code_exe.csv"}) {
    std::string x = read_text(a / f), y = read_text(b / f);
    EXPECT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == y) << f << " differs between two identical runs";
  }
  // A different seed changes the values (the check is not vacuous) but not the cycles.
  CliResult rc = cli("run fa --variant expert --param S=512 --param H=2 --seed 6 --json");
  ASSERT_EQ(rc.code, 0) << rc.err;
  json ja = parse(ra.out), jc = parse(rc.out);
  EXPECT_NE(ja.value("max_abs_err", 0.0), jc.value("max_abs_err", 0.0));
  EXPECT_EQ(ja.value("cycles", 0.0), jc.value("cycles", 0.0));
}

TEST(Determinism, LadderResultsDoNotDependOnJobs) {
  const std::string lad = "ladder fa --param S=1024 --param H=1 --json";
  CliResult one = cli(lad + " -j 1"), three = cli(lad + " -j 3"), again = cli(lad + " -j 3");
  ASSERT_EQ(one.code, 0) << one.err;
  ASSERT_EQ(three.code, 0) << three.err;
  EXPECT_EQ(without_wall(one.out), without_wall(three.out));
  EXPECT_EQ(without_wall(three.out), without_wall(again.out));
  EXPECT_EQ(one.err, three.err) << "the text table";
}

TEST(Determinism, CheckFindingsAreStable) {
  json w = sync_of("AIV", "wait_flag", "MTE2->V");
  ASSERT_FALSE(w.is_null());
  CliResult a = cli(kFa + fmt::format(" --drop-sync {} --json", w["index"].get<int>()));
  CliResult b = cli(kFa + fmt::format(" --drop-sync {} --json", w["index"].get<int>()));
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.err, b.err);
}

}  // namespace
}  // namespace tilepipe

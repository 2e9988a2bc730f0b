// Long runs say so: a progress bar on stderr when it is a terminal (a pseudo-terminal from
// util-linux `script` here), whole lines at an interval when it is not (a CI log), and
// `--json` stdout stays one JSON object either way; a functional run that will take minutes
// says so early, with the time, and suggests `--mode timing`.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "cli_util.h"
#include "progress.h"

namespace tilepipe {
namespace {

using namespace clitest;

/// Runs `tilepipe ARGS` with stderr on a pseudo-terminal (util-linux `script`) and stdout
/// into `out`; returns what the terminal showed once `until` appeared on it (the run is then
/// stopped) or the run ended, within a minute. The bar appears after `delay_s` seconds.
std::string on_terminal(const std::string& args, const fs::path& out, double delay_s,
                        const std::string& until = "") {
  static int n = 0;
  const std::string id = std::to_string(n++);
  const fs::path screen = scratch().file("screen" + id), pid = scratch().file("pid" + id),
                 done = scratch().file("done" + id);
  const std::string inner = "TILEPIPE_PROGRESS_DELAY=" + std::to_string(delay_s) + " '" +
                            std::string(TILEPIPE_CLI) + "' " + args + " >'" + out.string() + "'";
  const std::string cmd = "(timeout 60 script -qec \"" + inner + "\" /dev/null >'" +
                          screen.string() + "' 2>&1 </dev/null & echo $! >'" + pid.string() +
                          "'; wait $!; touch '" + done.string() + "') &";
  if (std::system(cmd.c_str()) != 0) return "";
  using namespace std::chrono_literals;
  for (auto end = std::chrono::steady_clock::now() + 70s;
       !fs::exists(done) && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(50ms);
    if (!until.empty() && read_text(screen).find(until) != std::string::npos) {
      std::string p = read_text(pid);
      if (!p.empty()) ::kill(std::stoi(p), SIGTERM);  // timeout passes it on to the run
      break;
    }
  }
  for (int i = 0; i < 200 && !fs::exists(done); ++i) std::this_thread::sleep_for(50ms);
  return read_text(screen);
}

TEST(Progress, ShownOnATerminalNeverInJsonStdout) {
  const fs::path out = scratch().file("progress.json");
  std::string screen = on_terminal(
      "run fa --variant expert --mode timing --exact --param S=2048 --param H=4 --json", out, 0);
  EXPECT_NE(screen.find("simulating ["), std::string::npos) << screen;
  EXPECT_NE(screen.find("% "), std::string::npos) << screen;
  EXPECT_NE(screen.find(" cycles"), std::string::npos) << screen;
  json j = json::parse(read_text(out));  // stdout: exactly the JSON object
  EXPECT_GT(j.at("cycles").get<double>(), 0);
}

TEST(Progress, NotATerminalGetsWholeLinesAtAnIntervalAndAShortRunNothing) {
  // A CI log: after the delay, one plain line per interval, never a bar or a carriage return.
  setenv("TILEPIPE_PROGRESS_DELAY", "0", 1);
  setenv("TILEPIPE_PROGRESS_INTERVAL", "0.05", 1);
  CliResult r = clitest::cli(
      "run fa --variant expert --mode timing --exact --param S=8192 --param H=4 --json");
  unsetenv("TILEPIPE_PROGRESS_INTERVAL");
  unsetenv("TILEPIPE_PROGRESS_DELAY");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("tilepipe: simulating "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" cycles"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
  EXPECT_EQ(json::parse(r.out).at("cycles").get<double>() > 0, true);  // stdout: the JSON only
  // With the default delay (5 s) a short run prints no progress at all.
  CliResult quick = clitest::cli("run gemm --param M=256 --param N=256 --param K=256");
  ASSERT_EQ(quick.code, 0) << quick.err;
  EXPECT_EQ(quick.err.find("simulating"), std::string::npos) << quick.err;
}

TEST(Progress, AFunctionalRunOfMinutesSaysSoAndSuggestsTimingMode) {
  // Stopped once the warning is shown: it comes as soon as the rate is measured.
  const fs::path out = scratch().file("slow.txt");
  // FA at S=16K, H=16: about 2.2 TFLOP of simulated math, minutes at the functional
  // engine's rate.
  std::string screen = on_terminal("run fa --variant expert --param S=16384 --param H=16", out, 0.3,
                                   "usually in seconds");
  EXPECT_NE(screen.find("this functional run needs about"), std::string::npos) << screen;
  EXPECT_NE(screen.find("`--mode timing` gives the same cycles"), std::string::npos) << screen;
}

TEST(Progress, HumanCountsAndDurations) {
  EXPECT_EQ(tilepipe::cli::human_count(950), "950");
  EXPECT_EQ(tilepipe::cli::human_count(12500), "12 k");
  EXPECT_EQ(tilepipe::cli::human_count(96.4e6), "96.4 M");
  EXPECT_EQ(tilepipe::cli::human_duration(7.4), "0:07");
  EXPECT_EQ(tilepipe::cli::human_duration(750), "12:30");
  EXPECT_EQ(tilepipe::cli::human_duration(3723), "1:02:03");
}

}  // namespace
}  // namespace tilepipe

// Helpers of the command-line tests: run the `tilepipe` binary with captured output, and
// expect the one-line bad-input error (exit 2) of docs/errors.md.
#pragma once

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

namespace tilepipe {
namespace clitest {

namespace fs = std::filesystem;
using nlohmann::json;

/// A per-process scratch directory, removed when the test binary exits.
class Scratch {
 public:
  Scratch()
      : dir_(fs::temp_directory_path() / ("tilepipe_cli_test_" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path file(const std::string& name) const { return dir_ / name; }

 private:
  fs::path dir_;
};

inline const Scratch& scratch() {
  static const Scratch s;
  return s;
}

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct CliResult {
  int code = -1;  // exit status; -1 if the process did not exit normally
  std::string out, err;
};

/// Runs the shell command `command` with stdout and stderr captured (stdin empty).
inline CliResult run_captured(const std::string& command) {
  static int n = 0;
  const std::string id = std::to_string(n++);
  const fs::path out = scratch().file(id + ".out"), err = scratch().file(id + ".err");
  const std::string cmd = command + " >'" + out.string() + "' 2>'" + err.string() + "' </dev/null";
  int status = std::system(cmd.c_str());
  CliResult r;
  r.code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

/// Runs `tilepipe ARGS` with stdout and stderr captured (a hang is cut off by `timeout`).
inline CliResult cli(const std::string& args) {
  return run_captured("timeout 300 '" + std::string(TILEPIPE_CLI) + "' " + args);
}

inline size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')) +
         (!s.empty() && s.back() != '\n' ? 1 : 0);
}

/// Exit 2, nothing on stdout, exactly one line on stderr holding every fragment.
inline void expect_bad_input(const std::string& args, const std::vector<std::string>& fragments) {
  SCOPED_TRACE("tilepipe " + args);
  CliResult r = cli(args);
  EXPECT_EQ(r.code, 2) << "stderr: " << r.err;
  if (args.find("--json") != std::string::npos) {
    // --json keeps its promise of exactly one JSON object on stdout, errors included.
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error") && j["exit_code"] == 2) << r.out;
  } else {
    EXPECT_EQ(r.out, "");
  }
  EXPECT_EQ(count_lines(r.err), 1u) << "stderr:\n" << r.err;
  for (const auto& f : fragments)
    EXPECT_NE(r.err.find(f), std::string::npos) << "missing '" << f << "' in: " << r.err;
}

}  // namespace clitest
}  // namespace tilepipe

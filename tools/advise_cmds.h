// `tilepipe profile`, `tilepipe tune` and the ladder's --html / --advise: command logic
// kept out of cli.cc (which only registers the flags). Bad input throws
// driver::ParamError (exit 2).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tilepipe/driver.h"

namespace tilepipe::cli {

struct ProfileArgs {
  std::string kernel, variant, chip = "a3", mode = "timing";
  std::map<std::string, std::string> params;
  uint64_t seed = 1;
  std::string inputs;  // --inputs FILE.npz
  double max_cycles = 1e13, max_wall_s = 0;
  bool json = false, no_verify = false, lines = false, werror = false;
  std::string html, rules;
};
int cmd_profile(const ProfileArgs& a);

/// The arrays of `--inputs FILE.npz` (null when the flag was not given).
std::shared_ptr<const driver::GivenInputs> given_inputs(const std::string& path);
/// The report's lines on what depends on input values (stderr text; "" when nothing does).
std::string inputs_text(const driver::InputsReport& r);

struct TuneArgs {
  std::string kernel, variant, chip = "a3", strategy = "grid", cache_dir, html;
  std::string inputs;     // --inputs FILE.npz
  std::string scheduler;  // a cluster's address (driver::connect_scheduler); "" = local threads
  std::map<std::string, std::string> params;
  std::vector<std::string> space;
  int jobs = 0, max_evals = 0;
  bool json = false, no_cache = false;
};
int cmd_tune(const TuneArgs& a);

/// `tilepipe diff`: two report files, or two runs of one kernel (docs/cli.md#tilepipe-diff).
struct DiffArgs {
  std::vector<std::string> inputs;    // two report files, or one kernel
  std::vector<std::string> variants;  // kernel: A's and B's (one: both)
  std::string chip = "a3", html;
  std::map<std::string, std::string> params, params_b;  // A's; B's on top of A's
  bool json = false;
};
int cmd_diff(const DiffArgs& a);

/// Per-step profiles with verified advice for a ladder; writes `html` if not empty and
/// returns the steps' advice as JSON (added to the ladder's JSON under "advice").
nlohmann::ordered_json ladder_advice(const driver::KernelSource& k, const driver::LadderReport& rep,
                                     const ChipConfig& chip, const nlohmann::ordered_json& ladder,
                                     const std::string& html, int jobs);

}  // namespace tilepipe::cli

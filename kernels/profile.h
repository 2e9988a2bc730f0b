// Profile (run + evidence + verified advice) and tune, at the harness level: the what-if
// and tuning callbacks build, verify, lower and simulate a kernel with changed parameters.
#pragma once

#include <string>
#include <vector>

#include "harness.h"
#include "tilepipe/advisor.h"
#include "tilepipe/prof.h"
#include "tilepipe/tune.h"

namespace tilepipe::kernels {

/// Re-simulates `base` (timing mode) with a what-if applied; never throws for program or
/// parameter errors (they come back as a rejection with the reason).
prof::Simulate what_if_runner(const KernelDef& k, const RunRequest& base, const ChipConfig& chip);

struct ProfileReport {
  RunReport run;
  prof::Summary summary;
  prof::Evidence evidence;
  std::vector<prof::Advice> advice;
  std::vector<prof::Advice> dropped;  // verified gain under the threshold
  prof::Timeline timeline;
  std::vector<std::string> core_names;
};

/// Runs `req` with a recorder attached, gathers evidence and (with `verify`) verified
/// advice. Throws like run_kernel.
ProfileReport profile_kernel(const KernelDef& k, const RunRequest& req, const ChipConfig& chip,
                             const prof::RuleSet& rules, bool verify = true);

/// The tuner's callbacks for one kernel, variant and chip. `chip_text` identifies the chip
/// config in cache keys (the file's contents).
tune::Callbacks tune_callbacks(const KernelDef& k, const RunRequest& base, const ChipConfig& chip,
                               const std::string& chip_text);

/// Text of a chip config (by name from the configs directory or a .json path), for keys.
std::string chip_config_text(const std::string& name_or_path);

/// Default cache directory: $XDG_CACHE_HOME/tilepipe/tune if set, else out/.tune-cache.
std::string default_cache_dir();

}  // namespace tilepipe::kernels

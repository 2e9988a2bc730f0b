// `tilepipe check --list-syncs / --drop-sync K / --find-redundant` (docs/cli.md): the sync
// inventory and mutation commands, kept out of tools/cli.cc.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "tilepipe/chip.h"
#include "tilepipe/driver.h"

namespace tilepipe::cli {

struct SyncArgs {
  bool list = false;
  std::vector<int> drop;
  bool find_redundant = false;
  bool any() const { return list || find_redundant || !drop.empty(); }
};

/// Runs the requested sync command; `header` holds kernel, variant, chip and params. Returns
/// the exit code (0, or 3 when a dropped sync is caught / the check fails). Throws
/// ParamError for a bad index, UserError / SimFailure when the unmutated kernel fails.
int run_sync_command(const SyncArgs& a, const driver::KernelSource& k,
                     const driver::RunRequest& req, const ChipConfig& chip, bool as_json,
                     nlohmann::ordered_json header);

}  // namespace tilepipe::cli

// Fast-forward against exact simulation (issue: "fast-forward that is right or does not
// jump"): the shapes each built-in kernel family is compared at, and the comparison. Used by
// the differential test (small and medium shapes) and by the benchmark (the large ones
// users run).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "harness.h"

namespace tilepipe::kernels {

using RawParams = std::map<std::string, std::string>;

/// Five shapes per kernel family; `large` adds the sizes that take minutes exactly.
std::vector<RawParams> differential_shapes(const std::string& kernel, bool large);

struct Differential {
  RunReport fast, exact;
  double cycles_err = 0;  // (fast - exact) / exact
  std::string counters;   // "" if every instruction count and byte count matches, else which
};

Differential run_differential(const KernelDef& k, const std::string& variant,
                              const RawParams& params, const ChipConfig& chip);

}  // namespace tilepipe::kernels

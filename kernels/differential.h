// Fast-forward against exact simulation: the shapes each built-in kernel family is compared
// at by driver::run_differential. Used by the differential test (small and medium shapes) and
// by the benchmark (the large ones users run).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tilepipe/driver.h"

namespace tilepipe::kernels {

using driver::RawParams;

/// Five shapes per kernel family; `large` adds the sizes that take minutes exactly.
std::vector<RawParams> differential_shapes(const std::string& kernel, bool large);

}  // namespace tilepipe::kernels

// Shared check of the kernel suites: one variant at one shape matches its reference, with
// race and deadlock detection on.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/driver.h"

namespace tilepipe::testing {

inline void expect_matches_reference(const std::string& kernel, const std::string& variant,
                                     const std::map<std::string, std::string>& params) {
  const auto& k = kernels::find_kernel(kernel);
  driver::RunRequest req;
  req.variant = variant;
  req.params = driver::resolve_params(k, params);
  req.detect_races = true;  // throws UserError on a race or deadlock
  auto rep = driver::run_kernel(k, req, a3());
  EXPECT_TRUE(rep.correct) << rep.mismatch;
  EXPECT_LT(rep.max_abs_err, k.tol.atol);
}

}  // namespace tilepipe::testing

// The kernel catalogue: each kernel family is a DSL builder with named integer parameters,
// a seeded input generator and a plain C++ reference. The CLI, tests and benchmarks reach
// kernels only through this table.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "params.h"
#include "tilepipe/ir.h"
#include "tilepipe/sim.h"

namespace tilepipe::kernels {

struct Tolerance {
  double rtol, atol;
};

struct KernelDef {
  std::string name;
  std::string summary;
  std::vector<std::string> variants;  // first is the default
  std::vector<ParamSpec> params;
  /// Cross-parameter checks beyond each range; returns "" when fine.
  std::function<std::string(const Params&)> validate;
  std::function<ir::Program(const Params&, const std::string& variant)> build;
  /// Input tensors by name, generated from `seed` (values already representable in the
  /// tensor dtype).
  std::function<sim::HostData(const Params&, uint64_t seed)> inputs;
  /// Expected output tensors by name, computed from the inputs.
  std::function<sim::HostData(const Params&, const std::string& variant, const sim::HostData&)>
      reference;
  Tolerance tol;
  /// Optimisation ladder: variants in order (empty = none) and parameter defaults for it.
  std::vector<std::string> ladder = {};
  Params ladder_defaults = {};
  /// Published reference time in us for these parameters (hand-written AscendC), or < 0.
  std::function<double(const Params&)> reference_us = {};
  std::string reference_name = {};
};

const std::vector<KernelDef>& all_kernels();
/// Throws ParamError listing the known kernels.
const KernelDef& find_kernel(const std::string& name);
/// Defaults overlaid with `raw` (k -> decimal text); throws ParamError on an unknown name,
/// non-numeric or out-of-range value, or a failed cross-check.
Params resolve_params(const KernelDef& k, const std::map<std::string, std::string>& raw);
/// Throws ParamError if `variant` is not one of k's.
std::string resolve_variant(const KernelDef& k, const std::string& variant);

/// Deterministic uniform values in [lo, hi), rounded to `dtype` (platform-independent).
std::vector<double> random_tensor(int64_t n, ir::DType dtype, uint64_t seed, double lo = -1.0,
                                  double hi = 1.0);

// Kernel families (kernels/<name>.cc).
KernelDef gemm_kernel();
KernelDef softmax_kernel();
KernelDef elementwise_kernel();
KernelDef fa_kernel();
KernelDef sfa_kernel();

}  // namespace tilepipe::kernels

#include "registry.h"

#include <fmt/format.h>

#include "tilepipe/numeric.h"

namespace tilepipe::kernels {

const std::vector<KernelDef>& all_kernels() {
  static const std::vector<KernelDef> k = {gemm_kernel(), softmax_kernel(), elementwise_kernel(),
                                           fa_kernel(), sfa_kernel()};
  return k;
}

const KernelDef& find_kernel(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& k : all_kernels()) {
    if (k.name == name) return k;
    names.push_back(k.name);
  }
  throw ParamError{fmt::format("unknown kernel '{}'; available: {}", name, fmt::join(names, ", "))};
}

std::string resolve_variant(const KernelDef& k, const std::string& variant) {
  if (variant.empty()) return k.variants.front();
  for (const auto& v : k.variants)
    if (v == variant) return v;
  throw ParamError{fmt::format("kernel '{}' has no variant '{}'; available: {}", k.name, variant,
                               fmt::join(k.variants, ", "))};
}

Params resolve_params(const KernelDef& k, const std::map<std::string, std::string>& raw) {
  Params p = parse_param_values(k.name, k.params, raw);
  if (k.validate) {
    std::string err = k.validate(p);
    if (!err.empty()) throw ParamError{fmt::format("kernel '{}': {}", k.name, err)};
  }
  return p;
}

std::vector<double> random_tensor(int64_t n, ir::DType dtype, uint64_t seed, double lo, double hi) {
  std::vector<double> v(static_cast<size_t>(n));
  // splitmix64: the same stream on every platform and standard library; the seed itself
  // is mixed first so seeds s and s+1 give unrelated streams.
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  uint64_t s = mix(seed + 0x2545F4914F6CDD1Dull);
  for (auto& x : v) {
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = mix(s);
    double u = static_cast<double>(z >> 11) * 0x1.0p-53;
    x = round_to(dtype, lo + (hi - lo) * u);
  }
  return v;
}

}  // namespace tilepipe::kernels

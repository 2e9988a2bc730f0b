#include "registry.h"

#include <fmt/format.h>

namespace tilepipe::kernels {

const std::vector<KernelSource>& all_kernels() {
  static const std::vector<KernelSource> k = [] {
    std::vector<KernelSource> v = {gemm_kernel(),  softmax_kernel(), elementwise_kernel(),
                                   fa_kernel(),    sfa_kernel(),     gm_read_kernel(),
                                   ubench_kernel()};
    for (auto& s : v) s.origin = "built-in";
    return v;
  }();
  return k;
}

const KernelSource& find_kernel(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& k : all_kernels()) {
    if (k.name == name) return k;
    names.push_back(k.name);
  }
  throw ParamError{fmt::format("unknown kernel '{}'; available: {}", name, fmt::join(names, ", "))};
}

void register_all() {
  for (const auto& k : all_kernels()) driver::register_kernel(k);
}

}  // namespace tilepipe::kernels

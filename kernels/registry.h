// The built-in kernel families: each a DSL builder with named integer parameters, a seeded
// input generator and a plain C++ reference, as driver::KernelSource values (origin
// "built-in"). register_all() hands them to the driver, where every verb finds them.
#pragma once

#include <string>
#include <vector>

#include "tilepipe/driver.h"

namespace tilepipe::kernels {

using driver::KernelSource;
using driver::ParamError;
using driver::Params;
using driver::ParamSpec;
using driver::random_tensor;
using driver::Tolerance;

/// The built-in families, in `tilepipe list` order.
const std::vector<KernelSource>& all_kernels();
/// A built-in by name; throws ParamError listing them.
const KernelSource& find_kernel(const std::string& name);
/// Registers every built-in with the driver (driver::register_kernel); idempotent.
void register_all();

// Kernel families (kernels/<name>.cc).
KernelSource gemm_kernel();
KernelSource softmax_kernel();
KernelSource elementwise_kernel();
KernelSource fa_kernel();
KernelSource sfa_kernel();
KernelSource gm_read_kernel();
KernelSource ubench_kernel();

}  // namespace tilepipe::kernels

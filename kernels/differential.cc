#include "differential.h"

#include <fmt/format.h>

#include <cmath>

namespace tilepipe::kernels {

std::vector<RawParams> differential_shapes(const std::string& kernel, bool large) {
  std::vector<RawParams> s;
  if (kernel == "gemm") {
    s = {{{"M", "256"}, {"N", "256"}, {"K", "512"}},
         {{"M", "1536"}, {"N", "1536"}, {"K", "1536"}},
         {{"M", "2048"}, {"N", "1024"}, {"K", "4096"}},
         {{"M", "4096"}, {"N", "4096"}, {"K", "256"}},
         {{"M", "1040"}, {"N", "2064"}, {"K", "528"}}};
    if (large)
      s = {{{"M", "4096"}, {"N", "4096"}, {"K", "4096"}},
           {{"M", "6144"}, {"N", "6144"}, {"K", "6144"}},
           {{"M", "8192"}, {"N", "8192"}, {"K", "8192"}}};
  } else if (kernel == "softmax") {
    s = {{{"R", "256"}, {"C", "1024"}},
         {{"R", "4096"}, {"C", "512"}},
         {{"R", "65536"}, {"C", "512"}},
         {{"R", "100000"}, {"C", "128"}},
         {{"R", "3000"}, {"C", "1024"}}};
    if (large) s = {{{"R", "1048576"}, {"C", "512"}}, {{"R", "262144"}, {"C", "1024"}}};
  } else if (kernel == "elementwise") {
    s = {{{"N", "1048576"}},
         {{"N", "16777216"}},
         {{"N", "67108864"}, {"buffers", "3"}},
         {{"N", "4194304"}, {"buffers", "1"}},
         {{"N", "8388608"}, {"tile", "2048"}}};
    if (large) s = {{{"N", "268435456"}}, {{"N", "1073741824"}, {"tile", "16384"}}};
  } else if (kernel == "fa") {
    s = {{{"S", "1024"}},
         {{"S", "2048"}, {"H", "4"}},
         {{"S", "4096"}, {"H", "2"}},
         {{"S", "8192"}, {"H", "1"}},
         {{"S", "2048"}, {"H", "12"}, {"KV_H", "12"}}};
    if (large) s = {{{"S", "16384"}}, {{"S", "32768"}}};
  } else if (kernel == "sfa") {
    s = {{{"KV_S", "2560"}},
         {{"KV_S", "6400"}},
         {{"KV_S", "48000"}},
         {{"KV_S", "6400"}, {"T", "4"}},
         {{"KV_S", "2560"}, {"B", "2"}, {"T", "2"}}};
    if (large) s = {{{"KV_S", "48000"}, {"B", "16"}}};
  }
  return s;
}

namespace {

/// Names the first counter of `a` that differs from `b`'s ("" if none).
std::string counter_mismatch(const sim::SimResult& a, const sim::SimResult& b) {
  if (a.instructions != b.instructions)
    return fmt::format("instructions {} vs {}", a.instructions, b.instructions);
  auto near = [](double x, double y) {
    return std::abs(x - y) <= 1e-6 * std::max(1.0, std::abs(y));
  };
  if (!near(a.gm_bytes_hbm, b.gm_bytes_hbm) || !near(a.gm_bytes_l2, b.gm_bytes_l2))
    return fmt::format("GM bytes hbm {} / l2 {} vs {} / {}", a.gm_bytes_hbm, a.gm_bytes_l2,
                       b.gm_bytes_hbm, b.gm_bytes_l2);
  for (size_t c = 0; c < a.cores.size(); ++c)
    for (size_t p = 0; p < a.cores[c].pipes.size(); ++p) {
      const auto &x = a.cores[c].pipes[p], &y = b.cores[c].pipes[p];
      if (x.instructions != y.instructions || x.transfers != y.transfers || !near(x.bytes, y.bytes))
        return fmt::format("{} {}: instructions {} vs {}, transfers {} vs {}, bytes {} vs {}",
                           a.cores[c].name, ir::to_string(static_cast<ir::Pipe>(p)), x.instructions,
                           y.instructions, x.transfers, y.transfers, x.bytes, y.bytes);
    }
  return "";
}

}  // namespace

Differential run_differential(const KernelDef& k, const std::string& variant,
                              const RawParams& params, const ChipConfig& chip) {
  RunRequest req;
  req.variant = variant;
  req.params = resolve_params(k, params);
  req.mode = sim::Mode::Timing;
  Differential d;
  d.fast = run_kernel(k, req, chip);
  req.fast_forward.enabled = false;
  d.exact = run_kernel(k, req, chip);
  d.cycles_err = (d.fast.sim.cycles - d.exact.sim.cycles) / d.exact.sim.cycles;
  d.counters = counter_mismatch(d.fast.sim, d.exact.sim);
  return d;
}

}  // namespace tilepipe::kernels

// Fast-forward against exact simulation: one config timed both ways, and what differs.
#include <fmt/format.h>

#include <cmath>

#include "tilepipe/driver.h"

namespace tilepipe::driver {

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

Differential run_differential(const KernelSource& k, const std::string& variant,
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

}  // namespace tilepipe::driver

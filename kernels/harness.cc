#include "harness.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "tilepipe/lower.h"
#include "tilepipe/verify.h"

namespace tilepipe::kernels {

void compare(const std::vector<double>& out, const std::vector<double>& ref, Tolerance tol,
             const std::string& name, RunReport& rep) {
  if (out.size() != ref.size()) {
    rep.correct = false;
    rep.mismatch = fmt::format("{}: {} values, reference has {}", name, out.size(), ref.size());
    return;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    double err = std::fabs(out[i] - ref[i]);
    if (std::isnan(out[i]) != std::isnan(ref[i])) err = INFINITY;
    double rel = err / std::max(std::fabs(ref[i]), 1e-30);
    rep.max_abs_err = std::max(rep.max_abs_err, err);
    if (std::fabs(ref[i]) > tol.atol) rep.max_rel_err = std::max(rep.max_rel_err, rel);
    if (!(err <= tol.atol + tol.rtol * std::fabs(ref[i])) && rep.correct) {
      rep.correct = false;
      rep.mismatch = fmt::format("{}[{}] = {:.6g}, reference {:.6g} (|diff| {:.3g} > atol {} + "
                                 "rtol {} * |ref|)",
                                 name, i, out[i], ref[i], err, tol.atol, tol.rtol);
    }
  }
}

RunReport run_kernel(const KernelDef& k, const RunRequest& req, const ChipConfig& chip) {
  RunReport rep;
  rep.variant = resolve_variant(k, req.variant);
  rep.program = k.build(req.params, rep.variant);
  verify_or_throw(rep.program, chip);
  rep.lowered = lower::lower(rep.program, chip);

  sim::HostData io;
  if (req.mode == sim::Mode::Functional) io = k.inputs(req.params, req.seed);
  sim::HostData in = io;
  sim::SimOptions opts{req.mode, req.max_cycles, req.observer, req.detect_races};
  auto t0 = std::chrono::steady_clock::now();
  rep.sim = sim::simulate(rep.lowered, chip, &io, opts);
  rep.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (req.mode == sim::Mode::Functional) {
    rep.checked = true;
    rep.correct = true;
    for (const auto& [name, ref] : k.reference(req.params, rep.variant, in))
      compare(io.at(name), ref, k.tol, name, rep);
  }
  return rep;
}

}  // namespace tilepipe::kernels

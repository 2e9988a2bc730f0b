// One kernel run end to end: build -> verify -> lower -> simulate -> compare with the
// reference. Shared by the CLI, the tests and the benchmarks.
#pragma once

#include <functional>
#include <string>

#include "registry.h"
#include "tilepipe/chip.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"

namespace tilepipe::kernels {

struct RunRequest {
  std::string variant;  // empty = the kernel's default
  Params params;        // already resolved (resolve_params)
  sim::Mode mode = sim::Mode::Functional;
  uint64_t seed = 1;
  double max_cycles = 1e13;
  double max_wall_s = 0;  // wall-clock budget of the simulation (0: none)
  bool detect_races = false;
  sim::FastForwardOptions fast_forward;  // timing mode: skip steady loop iterations
  sim::Observer* observer = nullptr;
  /// Applied to the lowered program before the run (mutation testing, kernels/mutate.h).
  std::function<void(lower::LoweredProgram&)> mutate = {};
  /// Told the program about to be simulated (after `mutate`), e.g. to bind a trace writer.
  std::function<void(const lower::LoweredProgram&)> on_lowered = {};
  /// Passed to the simulator (sim::SimOptions::progress).
  std::function<void(double cycles)> progress = {};
  passes::PassOptions pass_options;  // automatic-mode passes between verify and lower
  passes::PrintOptions print;        // --print-after / --print-after-all
  /// What-if / lower-bound switches passed to the simulator (timing mode only).
  bool whatif_no_barriers = false;
  std::vector<std::string> whatif_free_sites;
  bool lower_bound_only = false;
};

struct RunReport {
  std::string variant;
  ir::Program program;  // after the passes: what was lowered
  lower::LoweredProgram lowered;
  sim::SimResult sim;
  double sim_wall_s = 0;
  bool checked = false;  // functional mode compared outputs with the reference
  bool correct = false;
  double max_abs_err = 0;
  double max_rel_err = 0;
  std::string mismatch;   // first failing element, when !correct
  sim::HostData outputs;  // functional mode: the output tensors the reference checks
};

/// A program error found while simulating (deadlock, race, flag misuse, run-time slice out
/// of range), as opposed to one the verifier rejects before the run.
class SimFailure : public UserError {
 public:
  explicit SimFailure(const UserError& e) : UserError(e.diagnostics()) {}
};

/// Throws UserError (rejected program), SimFailure (found while running) or ParamError.
RunReport run_kernel(const KernelDef& k, const RunRequest& req, const ChipConfig& chip);

/// Compares `out` with `ref` elementwise: ok when |out - ref| <= atol + rtol * |ref|.
void compare(const std::vector<double>& out, const std::vector<double>& ref, Tolerance tol,
             const std::string& name, RunReport& rep);

}  // namespace tilepipe::kernels

namespace tilepipe::kernels {

struct LadderStep {
  std::string name;
  RunReport run;
  double time_us = 0;
  double speedup_vs_prev = 1;
  double pct_of_reference = 0;  // reference time / this time, in %
};

struct LadderReport {
  Params params;
  double reference_us = -1;
  std::vector<LadderStep> steps;
};

/// Runs task(0) .. task(n - 1) on `jobs` worker threads (at least one), each index once;
/// rethrows the first failure (by index) after all have finished. Tasks write only their
/// own slots, so results do not depend on `jobs`.
void for_each_parallel(size_t n, int jobs, const std::function<void(size_t)>& task);

/// Runs every ladder step of `k` in timing mode (up to `jobs` at once; results do not
/// depend on `jobs`). `raw` overrides the ladder's parameter defaults. Throws ParamError
/// if the kernel has no ladder.
LadderReport run_ladder(const KernelDef& k, const std::map<std::string, std::string>& raw,
                        const ChipConfig& chip, int jobs, bool fast_forward = true);

}  // namespace tilepipe::kernels

// The driver: every verb of the product (compile, run, check, profile, report, ladder,
// tune, differential) written once, over a *kernel source* — anything that builds an
// ir::Program from named integer parameters. The C++ kernels (kernels/registry.cc), a
// Python file (python/ext, `FILE.py[:kernel]`) and a user's own C++ kernel registered with
// register_kernel() are three kinds of source; the CLI and the Python module are thin
// clients of this header (docs/architecture.md).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tilepipe/advisor.h"
#include "tilepipe/chip.h"
#include "tilepipe/ir_deps.h"
#include "tilepipe/kernel_params.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/prof.h"
#include "tilepipe/sim.h"
#include "tilepipe/tune.h"
#include "tilepipe/verify.h"

namespace tilepipe::driver {

using RawParams = std::map<std::string, std::string>;

struct Tolerance {
  double rtol, atol;
};

/// What a source builds: the program as written, and the pass configs it carries (a Python
/// kernel's pass_configs and T.func_attr; none: the request's options apply).
struct Built {
  Built(ir::Program p) : program(std::move(p)) {}  // NOLINT: a plain program is a Built
  Built(ir::Program p, passes::PassOptions o) : program(std::move(p)), pass_options(o) {}
  ir::Program program;
  std::optional<passes::PassOptions> pass_options;
};

/// A kernel source. Only `name` and `build` are required; a source without `reference`
/// is checked for races, deadlocks and flag misuse but has no values to compare.
struct KernelSource {
  std::string name;
  std::string summary;
  std::vector<std::string> variants = {""};  // first is the default
  std::vector<ParamSpec> params;
  /// Cross-parameter checks beyond each range; returns "" when fine.
  std::function<std::string(const Params&)> validate = {};
  std::function<Built(const Params&, const std::string& variant)> build;
  /// Input tensors by name, generated from `seed` (values representable in their dtype).
  /// Empty: every input is zero.
  std::function<sim::HostData(const Params&, uint64_t seed)> inputs = {};
  /// Expected output tensors by name, computed from the inputs (empty: no value check).
  std::function<sim::HostData(const Params&, const std::string& variant, const sim::HostData&)>
      reference = {};
  Tolerance tol = {1e-3, 1e-3};
  /// Optimisation ladder: variants in order (empty = none) and parameter defaults for it.
  std::vector<std::string> ladder = {};
  Params ladder_defaults = {};
  /// Published reference time in us for these parameters (hand-written AscendC), or < 0.
  std::function<double(const Params&)> reference_us = {};
  std::string reference_name = {};
  /// Where it comes from, for messages: "built-in", a file path, "registered".
  std::string origin = "registered";
  /// `profile` also times the other variants, side by side (a Python file's two lowerings
  /// of automatic kernels, docs/python.md).
  bool profile_variants = false;
  /// `inputs` makes its values up from the seed (false: they are the user's own, e.g. the
  /// arrays a Python script passed to its kernel). Reports say which.
  bool seeded_inputs = true;
};

// ---- the catalogue ----------------------------------------------------------------------

/// Adds (or replaces, by name) a source every verb can reach by name.
void register_kernel(KernelSource k);
/// Kernel specs a resolver understands (e.g. "model.py:attn") become sources on demand; a
/// resolver returns nullopt for specs that are not its kind and throws ParamError for a
/// spec of its kind that cannot be loaded.
using Resolver = std::function<std::optional<KernelSource>(const std::string& spec)>;
void register_resolver(Resolver r);
/// Whether any resolver is registered (e.g. the Python front end's, for FILE.py specs).
bool has_resolvers();
/// Registered sources in registration order.
std::vector<KernelSource> kernels();
/// A registered name, else the first resolver that accepts `spec`; throws ParamError
/// listing the known kernels.
KernelSource find_kernel(const std::string& spec);
/// Defaults overlaid with `raw` (name -> decimal text); throws ParamError on an unknown name,
/// non-numeric or out-of-range value, or a failed cross-check.
Params resolve_params(const KernelSource& k, const RawParams& raw);
/// Throws ParamError if `variant` is not one of k's ("" is the default).
std::string resolve_variant(const KernelSource& k, const std::string& variant);

/// "name [variant]", or the name alone for a source with one unnamed variant (messages).
std::string label(const KernelSource& k, const std::string& variant);

/// Deterministic uniform values in [lo, hi), rounded to `dtype` (platform-independent).
std::vector<double> random_tensor(int64_t n, ir::DType dtype, uint64_t seed, double lo = -1.0,
                                  double hi = 1.0);

// ---- compile and run --------------------------------------------------------------------

/// A program error found while simulating (deadlock, race, flag misuse, run-time slice out
/// of range, a budget, an interrupt), as opposed to one the verifier rejects before the
/// run; its kind says which (run_error_kind).
class SimFailure : public UserError {
 public:
  explicit SimFailure(const UserError& e)
      : UserError(e.diagnostics(), run_error_kind(e.diagnostics())) {}
};

// ---- the user's inputs ------------------------------------------------------------------

/// A kernel's arrays by parameter name, from a NumPy .npz file (`--inputs FILE.npz`).
struct GivenInputs {
  struct Array {
    std::string dtype;           // NumPy's name: float16, int32, ...
    std::vector<int64_t> shape;  // C order
    std::vector<double> values;  // C order
  };
  std::string file;
  std::map<std::string, Array> arrays;
};

/// Reads an archive np.savez or np.savez_compressed wrote (stored or deflated members of
/// .npy arrays, C or Fortran order). Throws ParamError naming the file and what is wrong.
GivenInputs load_inputs(const std::string& path);

/// The given arrays as the run's host data for program `p` (its GM parameters, as built).
/// Throws ParamError naming the file and the tensor for an array that is no parameter of
/// the kernel, an input the file does not give, a shape or a dtype that differs from the
/// declaration (bfloat16 takes float32 arrays, rounded; uint8 and bool take bool ones).
sim::HostData host_inputs(const GivenInputs& in, const ir::Program& p, const std::string& kernel);

struct CompileRequest {
  std::string variant;                 // empty = the kernel's default
  Params params;                       // already resolved (resolve_params)
  passes::PassOptions pass_options;    // used when the source carries none
  std::vector<std::string> no_pass;    // passes switched off on top (--no-pass)
  std::vector<std::string> with_pass;  // passes switched on on top (--pass), e.g. cross_drains
  passes::PrintOptions print;          // --print-after / --print-after-all
  /// Applied to the program as built, before the verifier (the advisor's what-if runs of a
  /// loop edit: include/tilepipe/loop_edits.h); may throw ParamError.
  std::function<void(ir::Program&)> edit_source = {};
  /// Warnings become errors (--warnings-as-errors; TILEPIPE_WERROR=1 does the same).
  bool warnings_as_errors = false;
};

struct Compiled {
  std::string variant;
  ir::Program source;                // as built, before the passes
  ir::Program program;               // after the passes: what was lowered
  passes::PassOptions pass_options;  // what the pipeline ran with
  lower::LoweredProgram lowered;
  /// The verifier's warnings (docs/errors.md "Warnings"), at the author's lines: of the
  /// program as built and of the copies the passes made from the author's code.
  std::vector<Diagnostic> warnings;
};

/// Build, verify, the pass pipeline (re-verified), lower. Throws ParamError, UserError (a
/// capacity error's hint names the largest pipeline-stages knob value that fits; with
/// warnings as errors, any warning) or lang::BuildError.
Compiled compile(const KernelSource& k, const CompileRequest& req, const ChipConfig& chip);

struct RunRequest : CompileRequest {
  sim::Mode mode = sim::Mode::Functional;
  uint64_t seed = 1;
  double max_cycles = 1e13;
  double max_wall_s = 0;                      // wall-clock budget of the simulation (0: none)
  const std::atomic<bool>* cancel = nullptr;  // raised: the run stops ("interrupted")
  bool detect_races = false;
  sim::FastForwardOptions fast_forward;  // timing mode: skip steady loop iterations
  sim::Observer* observer = nullptr;
  /// Applied to the lowered program before the run (sync mutation, driver_syncs.h).
  std::function<void(lower::LoweredProgram&)> mutate = {};
  /// Told the program about to be simulated (after `mutate`), e.g. to bind a trace writer.
  std::function<void(const lower::LoweredProgram&)> on_lowered = {};
  /// Passed to the simulator (sim::SimOptions::progress).
  std::function<void(double cycles)> progress = {};
  /// What-if / lower-bound switches passed to the simulator (timing mode only).
  bool whatif_no_barriers = false;
  std::vector<std::string> whatif_free_sites;
  bool lower_bound_only = false;
  /// The user's arrays (--inputs), used instead of the source's `inputs`; null: the source's.
  std::shared_ptr<const GivenInputs> given_inputs;
  /// Host arrays in: the input tensors by name, instead of those the source generates from
  /// `seed` (a Python kernel call's arguments; missing ones are zeros): the run takes them
  /// (moves from *inputs: no second copy of a large tensor); and tensors read in place
  /// (sim::SimOptions::raw_inputs; must outlive the run).
  sim::HostData* inputs = nullptr;
  std::map<std::string, sim::RawTensor> raw_inputs;
  /// Host arrays out (functional mode): the GM tensors to return in RunReport::outputs
  /// (empty: the reference-checked ones, or every parameter without a reference), and
  /// where 64-bit integer ones land as their exact bytes (sim::SimOptions::raw_outputs).
  std::vector<std::string> write_back;
  std::map<std::string, std::vector<uint8_t>>* raw_outputs = nullptr;
};

/// Where a run's input values come from, and what in the program depends on them (the
/// report's `inputs` and `data_dependent`): statements whose control flow or addresses
/// follow the values (ir::data_dependence) make the time hold for those values only.
struct InputsReport {
  std::string source;  // "seeded" (made up from `seed`), "file" (--inputs), "host" (the user's)
  uint64_t seed = 0;
  std::string file;
  std::vector<ir::DataUse> uses;
  /// One sentence for reports: what depends on which tensor, at which lines, and where its
  /// values came from; "" when the time depends on no input value.
  std::string note() const;
};
InputsReport inputs_report(const KernelSource& k, const RunRequest& req, const ir::Program& p);
/// The same for the program `req` compiles to (e.g. a tuning search's best config).
InputsReport inputs_report(const KernelSource& k, const RunRequest& req, const ChipConfig& chip);
/// {"inputs": {source, seed | file}, "data_dependent": {depends, uses: [{tensor, use,
/// where}], note}}: the two fields every report carries.
nlohmann::ordered_json inputs_json(const InputsReport& r);

struct RunReport {
  std::string variant;
  ir::Program source;   // as built, before the passes (the author's loops and lines)
  ir::Program program;  // after the passes: what was lowered
  lower::LoweredProgram lowered;
  sim::SimResult sim;
  double sim_wall_s = 0;
  bool checked = false;  // functional mode compared outputs with the reference
  bool correct = false;
  double max_abs_err = 0;
  double max_rel_err = 0;
  std::vector<Diagnostic> warnings;  // Compiled::warnings
  std::string mismatch;              // first failing element, when !correct
  sim::HostData outputs;  // functional mode: the tensors the kernel wrote (reference-checked
                          // ones when the source has a reference)
  InputsReport inputs;    // where the input values came from, what depends on them
};

/// Throws UserError (rejected program), SimFailure (found while running) or ParamError.
RunReport run_kernel(const KernelSource& k, const RunRequest& req, const ChipConfig& chip);
/// run_kernel of a program compile(k, req, chip) made (a front end's kernel compiled once,
/// called many times); req's compile fields are not read again.
RunReport run_compiled(const KernelSource& k, const Compiled& c, const RunRequest& req,
                       const ChipConfig& chip);

/// "B=1 H=12 S=32768": parameters in name order ("no parameters" when there are none).
std::string params_text(const Params& p);
/// The first words of every console report (profile, tune, ladder): what ran, at which
/// parameters, on which chip: "fa [expert] (B=1 H=12 S=32768) on a3".
std::string report_heading(const KernelSource& k, const std::string& variant, const Params& p,
                           const std::string& chip);

/// What a run's report starts with: kernel, variant (resolved), chip, mode, params.
nlohmann::ordered_json run_header(const KernelSource& k, const std::string& variant,
                                  const RunRequest& req, const ChipConfig& chip);
/// The report of a run as every verb (run, check, profile) and the Python module (a kernel's
/// summary()) print it: run_header, cycles, time_us, the value check (when checked:
/// correct, max_abs_err, max_rel_err, tolerance, mismatch when wrong), the summary
/// (prof::to_json: kernel / launch time, pipes, bound, ...), instructions, the per-line
/// cycles when given (lines_json), fast_forward (when it skipped iterations), sim_wall_s.
nlohmann::ordered_json run_json(const KernelSource& k, const RunReport& rep, const RunRequest& req,
                                const ChipConfig& chip, const prof::Summary& summary,
                                const prof::LineAttribution* lines = nullptr);

/// The simulated cycles of a run from the simulator's lower-bound walk (no timing, far
/// cheaper than the run): for progress bars; 0 if the program is rejected.
double estimate_cycles(const KernelSource& k, RunRequest req, const ChipConfig& chip);

/// Compares `out` with `ref` elementwise: ok when |out - ref| <= atol + rtol * |ref|.
void compare(const std::vector<double>& out, const std::vector<double>& ref, Tolerance tol,
             const std::string& name, RunReport& rep);

/// Runs task(0) .. task(n - 1) on `jobs` worker threads (at least one), each index once;
/// rethrows the first failure (by index) after all have finished. Tasks write only their
/// own slots, so results do not depend on `jobs`.
void for_each_parallel(size_t n, int jobs, const std::function<void(size_t)>& task);

/// "kind at file:line: message" of a rejection's first diagnostic.
std::string first_reason(const UserError& e);

/// Warnings as the JSON reports carry them: [{file, line, kind, message, fix}].
nlohmann::ordered_json warnings_json(const std::vector<Diagnostic>& w);

// ---- emit: the compiled program as a TileLang-Ascend expert-mode file -------------------

/// How the emitted @tilelang.jit factory is named and called.
struct EmitSource {
  std::string factory;  // its name (made a Python identifier)
  Params params;        // its parameters, with the values the program was built for
  std::string label;    // where the program came from, for the header comment
};

/// `c.program` (after the passes) as a TileLang-Ascend expert-mode Python file: scopes,
/// allocations pinned where the lowering placed them, copies, T.mma, T.tile ops, flags and
/// cross flags with their ids, loops as loops, and pass configs that turn the original's
/// automatic sync, CV split and planning off. Throws UserError (kind "emit") at the first
/// construct with no expert-mode spelling; deterministic.
std::string emit_expert(const Compiled& c, const EmitSource& src);
/// compile(k, req, chip), then emit_expert with k's name and req.params.
std::string emit_expert(const KernelSource& k, const CompileRequest& req, const ChipConfig& chip);

// ---- ladder -----------------------------------------------------------------------------

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

/// Runs every ladder step of `k` in timing mode (up to `jobs` at once; results do not
/// depend on `jobs`). `raw` overrides the ladder's parameter defaults. Throws ParamError
/// if the kernel has no ladder.
LadderReport run_ladder(const KernelSource& k, const RawParams& raw, const ChipConfig& chip,
                        int jobs, bool fast_forward = true);

// ---- profile, advice, report ------------------------------------------------------------

/// Re-simulates `base` (timing mode) with a what-if applied; never throws for program or
/// parameter errors (they come back as a rejection with the reason).
prof::Simulate what_if_runner(const KernelSource& k, const RunRequest& base,
                              const ChipConfig& chip);

struct ProfileReport {
  RunReport run;
  prof::Summary summary;
  prof::Evidence evidence;
  std::vector<prof::Advice> advice;
  std::vector<prof::Advice> dropped;  // verified gain under the threshold
  prof::Timeline timeline;
  std::vector<std::string> core_names;
  prof::LineAttribution lines;  // every cycle of the span given to a source line
  /// With KernelSource::profile_variants: every variant's timing-mode cycles, in the
  /// source's order (error: why that variant did not run).
  struct VariantCycles {
    std::string variant;
    double cycles = 0;
    std::string error;
  };
  std::vector<VariantCycles> variants;
};

/// Runs `req` with a recorder attached (req.observer, if set, must be a prof::Recorder),
/// gathers evidence and (with `verify`) verified advice. Throws like run_kernel.
ProfileReport profile_kernel(const KernelSource& k, const RunRequest& req, const ChipConfig& chip,
                             const prof::RuleSet& rules, bool verify = true);

/// The JSON of `run --json` plus evidence, metrics, advice and the model's limits.
nlohmann::ordered_json profile_json(const KernelSource& k, const ProfileReport& rep,
                                    const RunRequest& req, const ChipConfig& chip);
/// The per-line cycles of a report (`run --lines`, `profile`): {"lines": [{file, line, op,
/// pipe, cycles, busy_cycles, stall_cycles, waits_on, instructions}], "line_attribution":
/// {core, cycles, launch_cycles, kernel_cycles, files: {file: % of kernel_cycles}}}.
nlohmann::ordered_json lines_json(const prof::LineAttribution& a);
/// The report's per-core, per-pipe busy fractions by time bin.
nlohmann::ordered_json timeline_json(const prof::Timeline& t,
                                     const std::vector<std::string>& names);
/// The self-contained HTML profile report (summary, timeline, evidence, advice).
std::string profile_html(const KernelSource& k, const ProfileReport& rep, const RunRequest& req,
                         const ChipConfig& chip);

/// Per-step profiles with verified advice for a ladder: each step's profile_json with its
/// timeline, in step order.
std::vector<nlohmann::ordered_json> ladder_profiles(const KernelSource& k, const LadderReport& rep,
                                                    const ChipConfig& chip, int jobs);

// ---- tune -------------------------------------------------------------------------------

/// The tuner's callbacks for one kernel, variant and chip. `chip_text` identifies the chip
/// config in cache keys (the file's contents).
tune::Callbacks tune_callbacks(const KernelSource& k, const RunRequest& base,
                               const ChipConfig& chip, const std::string& chip_text);

/// Text of a chip config (by name from the configs directory or a .json path), for keys.
std::string chip_config_text(const std::string& name_or_path);

/// Default cache directory: $XDG_CACHE_HOME/tilepipe/tune if set, else out/.tune-cache.
std::string default_cache_dir();

// ---- tuning elsewhere: a worker's view of a search, and cluster executors ---------------

/// What a worker needs to simulate configs of one search as tune_callbacks(k, base, chip,
/// chip_text).simulate does, with nothing but the built-in kernels and the resolvers of its
/// process: the kernel by spec, the chip by its config's text.
struct TuneJob {
  std::string spec;         // what find_kernel takes: a built-in name, a Python FILE.py[:NAME]
  std::string variant;      // resolved (resolve_variant)
  Params params;            // the base request's parameters (resolved)
  std::string chip_text;    // the chip config's JSON (chip_config_text)
  std::string chip_origin;  // its file, for messages
};

/// One config of `job` simulated through tune_callbacks(...).simulate: what a remote worker
/// runs (python/ext: `_tilepipe.evaluate`). Throws ParamError for a kernel, variant or chip
/// this process cannot reach; program errors come back as a rejection, as in a local run.
tune::Simulated evaluate(const TuneJob& job, const tune::Point& p);
/// The same with the kernel already found (find_kernel(job.spec)), e.g. kept across configs.
tune::Simulated evaluate(const KernelSource& k, const TuneJob& job, const tune::Point& p);

/// Makes the executor of `tune --scheduler ADDRESS` for one search: a front end that can
/// reach a cluster registers one (the Python module: Dask distributed, python/tilepipe/
/// cluster.py). Throws ParamError when the scheduler cannot be reached.
using SchedulerConnector =
    std::function<tune::Executor(const std::string& address, const TuneJob& job)>;
void register_scheduler(SchedulerConnector c);
/// The registered connector's executor; throws ParamError when none is registered.
tune::Executor connect_scheduler(const std::string& address, const TuneJob& job);

// ---- fast-forward against exact ---------------------------------------------------------

struct Differential {
  RunReport fast, exact;
  double cycles_err = 0;  // (fast - exact) / exact
  std::string counters;   // "" if every instruction count and byte count matches, else which
};

/// Timing runs of one config with and without fast-forward, and how they differ.
Differential run_differential(const KernelSource& k, const std::string& variant,
                              const RawParams& params, const ChipConfig& chip);

}  // namespace tilepipe::driver

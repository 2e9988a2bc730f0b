// Fidelity and calibration (driver layer): on-board times — the published anchors of
// configs/fidelity.json, or a user's own measurements in a CSV — simulated through the
// driver's kernel sources, their errors (`tilepipe fidelity`), and a fit of named chip-config
// parameters to them within their documented ranges (configs/fit_ranges.json) with NLopt,
// with leave-one-out errors and a chip config that records where its values came from
// (`tilepipe calibrate`). docs/fidelity.md, docs/cli.md.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tilepipe/driver.h"

namespace tilepipe::driver {

/// How a source measured its times: one protocol for every anchor of the source (no anchor
/// has a switch of its own), with the evidence for it. docs/fidelity.md, "Protocols".
struct Protocol {
  /// The kernel's inputs were in the L2 when it started (produced or read on the device just
  /// before): the anchor runs with die.l2_warm_inputs = 1, else with 0.
  bool l2_warm = false;
  /// The time includes the host launch (die.launch_us); an msprof task duration does not.
  bool launch_included = false;
  std::string timer;     // what the timer covers
  std::string evidence;  // why this protocol
};

/// One on-board time and the kernel it was measured on.
struct Anchor {
  std::string name;
  std::string group;                // a tag `--only` also matches (e.g. "fa-ladder")
  std::string family;               // the kernel family leave-one-family-out leaves out
  std::string set = "calibration";  // or "validation": never used by a fit
  std::string kernel;               // a registered kernel name, or a Python file FILE.py[:NAME]
  bool in_corpus = false;           // `kernel` is a path relative to the corpus directory
  std::vector<std::string> args;    // a Python script's own fixed arguments
  std::string variant;              // "" = the kernel's default
  RawParams params;
  std::string chip;  // the chip config it was measured on ("" = the run's)
  double measured_us = 0;
  std::string kind = "measured";  // or "derived": computed from a published ratio
  std::string source;             // the source's id (anchors file) or citation (CSV)
  std::string citation;           // where the source publishes its numbers
  std::string note;               // what this anchor adds to its source's citation
  Protocol protocol;              // the source's
  double weight = 1;              // weight of its squared log error in a fit
};

struct AnchorSet {
  std::string origin;  // the file read
  std::string corpus;  // the corpus directory as the file gives it ("" = none)
  std::vector<Anchor> anchors;
};

/// configs/fidelity.json in the configs directory (config_dir()).
std::string default_anchors_path();

/// Reads an anchors file: JSON in configs/fidelity.json's format, or (a path ending in
/// .csv) a measurements CSV (docs/cli.md, "tilepipe calibrate"). A relative Python path of a
/// CSV row is relative to the CSV's directory. Throws ParamError naming the file and the
/// anchor or line.
AnchorSet load_anchors(const std::string& path);

/// The anchors whose name or group matches one of `patterns` (shell globs: `fa.*`,
/// `sfa-file`), in file order; all when `patterns` is empty. Throws ParamError naming a
/// pattern that matches nothing.
AnchorSet select_anchors(const AnchorSet& set, const std::vector<std::string>& patterns);

/// The corpus directory Python anchors are relative to: `override` if given, else
/// $TILELANG_CORPUS, else the set's `corpus` relative to its file's directory.
std::string corpus_dir(const AnchorSet& set, const std::string& override_dir = "");

/// Whether the anchor's kernel is a Python file.
bool is_python_anchor(const Anchor& a);

/// The kernel spec find_kernel() takes: the name, or the Python file (resolved in `corpus`)
/// followed by its fixed arguments, quoted as a shell would need.
std::string anchor_spec(const Anchor& a, const std::string& corpus);

/// One anchor simulated.
struct AnchorRun {
  std::string status = "ok";  // "ok", "skipped" (cannot run here: note says why), "error"
  std::string note;
  std::string chip;  // the chip config's name
  double cycles = 0;
  double simulated_us = 0;  // what is compared: kernel_us, + launch_us if the protocol has it
  double kernel_us = 0;     // from the first block's start to the end (no launch)
  double launch_us = 0;     // the chip's die.launch_us
  double error_pct = 0;     // 100 x (simulated - measured) / measured
  double wall_s = 0;        // build, compile and simulation
  /// With AnchorOptions::other_variants: the source's other variants that build another
  /// program (a Python file's tilepipe lowering beside the original-compatible one), in the
  /// source's order, with their simulated time (0 and `error` set when one is rejected).
  struct Variant {
    std::string name;
    double simulated_us = 0;
    std::string error;
  };
  std::vector<Variant> others;
};

struct AnchorOptions {
  /// Every anchor on this chip; none: each on its own `chip` (loaded by name or path).
  std::optional<ChipConfig> chip;
  std::string corpus;  // corpus directory (corpus_dir())
  bool fast_forward = true;
  int jobs = 1;
  /// Also time the other variants of sources that show theirs side by side
  /// (KernelSource::profile_variants), for anchors that name no variant.
  bool other_variants = false;
  /// Called after each anchor finishes (any thread, one call at a time).
  std::function<void(size_t index, const AnchorRun&)> done = {};
};

/// Simulates every anchor (timing mode) on up to `jobs` threads; results in anchor order do
/// not depend on `jobs`. Never throws for one anchor: a Python file without the front end in
/// this process or a corpus file that is not there is "skipped", any other failure "error".
std::vector<AnchorRun> run_anchors(const AnchorSet& set, const AnchorOptions& opts);

struct ErrorSummary {
  int n = 0;  // anchors that ran
  double mean_abs_pct = 0, max_abs_pct = 0;
  std::string max_name;  // the anchor with the largest |error|
};

/// Mean and max |error| over the anchors that ran, of `kind` ("measured" / "derived") and of
/// `which_set` ("calibration" / "validation") only, when given.
ErrorSummary summarize_errors(const AnchorSet& set, const std::vector<AnchorRun>& runs,
                              const std::string& kind = "", const std::string& which_set = "");

/// One chip-config parameter and where its value comes from (`tilepipe fidelity`).
struct ParameterSource {
  std::string name;  // dotted key
  double value = 0;
  std::string unit, chip;
  std::string basis;   // "cited: ...", "microbenchmark: ...", "fit: A, B", "assumed from a3",
                       // "estimate: ..."; "unstated" for a config that gives none
  std::string conf;    // H / M / L
  std::string detail;  // the config's "source" text
};

/// Every numeric parameter of a chip config (by name or path) with its basis, in file order.
/// Throws ConfigError for a config the loader rejects.
std::vector<ParameterSource> parameter_sources(const std::string& chip);

// ---- calibration ------------------------------------------------------------------------

/// A chip-config parameter's documented range for fitting, with its source.
struct FitRange {
  double lo = 0, hi = 0;
  std::string source;
};

/// configs/fit_ranges.json (or `path`): dotted key -> range. Throws ParamError.
std::map<std::string, FitRange> load_fit_ranges(const std::string& path = "");

/// A chip config's JSON text with one numeric leaf (a dotted key: "dma.mte2_latency") set
/// to `value` (rounded for an integer leaf). Throws ParamError for a key the config does
/// not have.
void set_chip_value(nlohmann::ordered_json& config, const std::string& key, double value);
double get_chip_value(const nlohmann::ordered_json& config, const std::string& key);

struct CalibrationRequest {
  std::string chip = "a3";       // the starting config: a name or a .json path
  std::vector<std::string> fit;  // dotted keys, each optionally KEY=LO:HI (its range)
  AnchorSet measurements;
  std::string corpus;             // corpus directory for corpus-relative Python files
  std::string ranges_path;        // "" = configs/fit_ranges.json
  std::string measurements_name;  // how the output names the measurements (the file)
  std::string output_name;        // the chip name written ("" = the starting config's)
  int jobs = 1;
  int max_evals = 0;  // per fit; 0 = 30 x (parameters + 1)
  bool leave_one_out = true;
  bool leave_one_family_out = true;
  bool fast_forward = true;
  /// Progress lines (a fit started or finished); may be empty.
  std::function<void(const std::string&)> progress = {};
};

struct FittedParam {
  std::string key;
  FitRange range;
  bool integer = false;
  double start = 0, value = 0;
};

/// Leave-one-family-out: the fit without one family's calibration measurements, and its
/// prediction of them.
struct FamilyFit {
  std::string family;
  std::vector<size_t> members;    // the family's calibration measurements that ran
  std::vector<double> values;     // the parameters fitted without them
  std::vector<double> error_pct;  // per member: its error at those values (NaN: did not run)
  double mean_abs_pct = 0;
  /// False when no other family's measurement moved with the parameters (the fit without
  /// this family stays where it starts): the family alone determines them.
  bool determined = true;
};

struct CalibrationResult {
  std::vector<FittedParam> params;
  std::vector<AnchorRun> before, after;  // per measurement: the starting and the fitted config
  std::vector<bool> used;  // per measurement: a calibration measurement that ran on the start
  std::vector<FamilyFit> families;  // leave-one-family-out, in order of first appearance
  /// Leave-one-out, per measurement: the fit without it, and its prediction by that fit.
  std::vector<std::vector<double>> loo_values;
  std::vector<double> loo_us, loo_error_pct;  // NaN when not computed
  double loss_before = 0, loss_after = 0;     // sum of weight x ln(simulated / measured)^2
  int evaluations = 0;                        // configs simulated by the main fit
  int simulations = 0;                        // kernel runs of the whole calibration
  std::string method;                         // "NLopt LN_BOBYQA"
  nlohmann::ordered_json config;              // the fitted chip config, with provenance
};

/// Fits the named parameters: minimises the weighted sum of squared log errors of the
/// calibration measurements that run (validation measurements are simulated before and after
/// and never enter the objective), over each parameter's documented range (or the one given), with
/// a derivative-free bounded method (NLopt BOBYQA); the fitted values are rounded to 4 significant
/// digits and the result's `after` runs and `config` are those of the rounded values. Leave-one-out
/// refits without each calibration measurement, leave-one-family-out without each family (when
/// there are two or more). Throws ParamError (unknown key, no range, a range the loader rejects,
/// fewer than two measurements that run) or ConfigError.
CalibrationResult calibrate(const CalibrationRequest& req);

/// Measurement `i` of a calibration as a JSON row: its name and measured time, then its
/// status and note when the fit could not use it, else the simulated times and errors
/// before and after the fit and (when computed) the leave-one-out time and error.
nlohmann::ordered_json calibration_row(const Anchor& measurement, const CalibrationResult& res,
                                       size_t i);

/// The leave-one-family-out result as JSON rows: family, parameters fitted without it,
/// whether the other families determine them, and its members' errors.
nlohmann::ordered_json family_rows(const AnchorSet& measurements, const CalibrationResult& res);

}  // namespace tilepipe::driver

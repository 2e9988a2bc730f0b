// The advisor: rules as data (configs/advice_rules.json) over the run's metrics and
// evidence; each rule is silent unless its evidence holds. Suggestions name kernel knobs
// from the lowering's knob metadata (never a kernel name) and are verified by re-simulating
// the change through a caller-supplied callback (what-if runs); advice whose verified gain
// is under the table's threshold is dropped.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tilepipe/prof.h"

namespace tilepipe::prof {

struct Condition {
  std::string metric, op;  // op: ">=", ">", "<=", "<", "==", "!="
  double threshold = 0;
};

struct Rule {
  std::string id, title, severity;  // severity: "high", "medium", "low", "info"
  std::vector<Condition> when;      // all must hold
  std::string action;          // "info", "raise_knob", "lower_knob", "whatif", "roof", "overflow"
  std::string knob_role;       // raise/lower_knob: the knob metadata role
  std::string whatif;          // "no_barriers", "zero_sync", "zero_issue", "vectorise", "fuse",
                               // "faster:P"; loop edits "pipeline" / "hoist" (with their `where`)
  std::string text;            // suggestion text; {where}, {knob}, {pipe} are filled in
  std::string predict_metric;  // predicted gain = metric x factor (capped at 90)
  double predict_factor = 0;
  std::string where;           // "knob", "barrier", "unfused", "scalar_loop", "largest_buffer",
                               // "bound_line", "serial_tile_loop", "invariant"
  std::string scope = "core";  // "core" (intra-core) or "cross" (between cores)
};

struct RuleSet {
  double min_verified_gain_pct = 3;
  double error_band_pct = 12;  // the simulator's stated error (docs/fidelity.md)
  /// "One core fast first": verified intra-core advice with at least this gain ranks before
  /// cross-core advice; below it, everything ranks by verified gain.
  double core_first_min_gain_pct = 5;
  std::vector<Rule> rules;
};

/// Parses a rule table; throws std::runtime_error naming the bad entry.
RuleSet parse_rules(const nlohmann::json& j);
/// The rule table shipped in the configs directory ($TILEPIPE_CONFIG_DIR/advice_rules.json).
RuleSet load_rules(const std::string& path = "");

/// A change to re-simulate.
struct WhatIf {
  std::map<std::string, int64_t> params;  // parameter overrides
  bool no_barriers = false;               // pipe barriers removed
  bool zero_sync = false;                 // intra- and cross-core flag latency 0
  bool zero_issue = false;                // issue and scalar-op cycles 0
  std::vector<std::string> free_sites;    // instructions at these file:line take no time
  std::string faster_pipe;                // this pipe's cost halved
  /// Source edits (the program as built, then compiled as any run): the serial loop of
  /// Evidence::serial_tile_loops[pipeline_site] made Pipelined(num_stages); the statements
  /// of Evidence::invariant_work[hoist_site] moved before their loop. -1: none.
  int pipeline_site = -1;
  int num_stages = 2;
  int hoist_site = -1;
};
struct WhatIfResult {
  bool ok = false;
  double cycles = 0;
  std::string reason;  // why the change was rejected (capacity, verifier, run-time error)
};
using Simulate = std::function<WhatIfResult(const WhatIf&)>;

struct Advice {
  std::string id, title, severity;
  struct Item {
    std::string metric, op;
    double value = 0, threshold = 0;
  };
  std::vector<Item> evidence;
  std::string file;
  int line = 0;
  std::optional<std::string> param;  // suggest: {param, from, to}
  int64_t from = 0, to = 0;
  std::string text;
  double predicted_gain_pct = 0;
  double verified_gain_pct = 0;
  std::string scope;               // "core" or "cross"
  std::string status;              // "verified", "info", "rejected"
  std::vector<std::string> tried;  // what-if runs behind the verification
};

/// Evaluates every rule; `sim` re-simulates changes (null: nothing is verified and only
/// info items are returned). Ranked: verified by gain, then info.
/// `dropped` (optional) receives the items whose verified gain missed the threshold.
std::vector<Advice> advise(const Summary& s, const Evidence& e, const RuleSet& rules,
                           const Simulate& sim, std::vector<Advice>* dropped = nullptr);
nlohmann::ordered_json to_json(const std::vector<Advice>& advice);
std::string to_text(const std::vector<Advice>& advice);

/// What the model does not cover (said plainly in every report).
std::vector<std::string> model_limits();

}  // namespace tilepipe::prof

// The autotuner: enumerates a parameter space (grid or coordinate descent), drops configs
// that do not build / verify / lower (with the reason), evaluates the rest in order of
// their roofline lower bound with branch-and-bound (a config whose lower bound exceeds the
// best time so far cannot win and is not simulated), on parallel workers, through an
// on-disk cache. Kernel-agnostic: the caller supplies "prepare" (build -> verify -> lower,
// cache key, lower bound) and "simulate" callbacks. The simulations go through an executor:
// local threads by default, or one that sends them elsewhere (a cluster: driver.h's
// connect_scheduler). Results do not depend on the number of workers nor on the executor:
// statuses are assigned as the sequential algorithm would.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tilepipe::tune {

using Point = std::map<std::string, int64_t>;

struct Prepared {
  bool ok = false;
  std::string reason;  // why the config was rejected
  std::string key;     // cache key (hex): lowered program, params, chip, simulator version
};
struct Simulated {
  bool ok = false;
  std::string reason;
  double cycles = 0;
  std::string bound;
};

/// Runs a search's simulations somewhere. `points` are in evaluation order; for each k in
/// [0, points.size()), in that order, the executor asks `wanted(k)` just before starting
/// config k (false: the config is not needed any more, e.g. pruned by a result that came
/// in; nothing is reported for it), and reports the simulation of each started config once
/// with `done(k, result)`, in any order and from any thread. It returns when every started
/// config is reported, or throws (the search throws). `wanted` and `done` are thread-safe.
/// Starting configs as workers free up (rather than all at once) keeps the pruning of the
/// local run; which configs are simulated may differ, the results do not.
using Executor =
    std::function<void(const std::vector<Point>& points, const std::function<bool(size_t)>& wanted,
                       const std::function<void(size_t, const Simulated&)>& done)>;

/// The default executor: `simulate` on `jobs` threads (at least one).
Executor local_executor(int jobs, std::function<Simulated(const Point&)> simulate);

struct Options {
  std::vector<std::pair<std::string, std::vector<int64_t>>> space;  // in --space order
  std::string strategy = "grid";                                    // or "coord"
  int jobs = 1;           // threads of prepare / lower bound, and of the default executor
  Executor executor;      // empty: local_executor(jobs, callbacks.simulate)
  int max_evals = 0;      // 0 = no limit
  std::string cache_dir;  // "" = no cache
  double us_per_cycle = 1;
  double error_band_pct = 12;
  bool progress = false;  // progress bar with ETA on stderr
};

struct ConfigResult {
  Point params;
  std::string status;  // "simulated", "cached", "pruned", "rejected", "skipped"
  std::string reason;
  double time_us = -1, lb_us = -1;
  std::string bound;
};

struct Result {
  Point best;
  std::optional<double> best_time_us;  // empty: no config was simulated successfully
  std::vector<ConfigResult> configs;   // enumeration order
  int simulated = 0, pruned = 0, rejected = 0, cached = 0, skipped = 0;
  std::vector<Point> within_error_band;  // configs within the simulator's error of the best
  /// Set when the cache directory could not be used: the search ran without a cache.
  std::string cache_warning;
};

struct Callbacks {
  std::function<Prepared(const Point&)> prepare;    // cheap: build, verify, lower, key
  std::function<double(const Point&)> lower_bound;  // roofline lower bound in cycles
  std::function<Simulated(const Point&)> simulate;
  /// Optional: why a timed config gives no right result ("" when it does), e.g. a functional
  /// run with the checks. Costly, so asked of the best config only, in rank order until one
  /// passes: the ones it fails are rejected with that reason.
  std::function<std::string(const Point&)> check;
};

/// `base` holds the parameters outside the space (and the defaults of those in it).
Result run(const Point& base, const Options& o, const Callbacks& cb);

/// FNV-1a 64-bit hash as 16 hex digits (cache keys).
std::string hash_hex(const std::string& text);

/// `k=v1,v2,...` -> (k, [v1, v2, ...]); throws std::invalid_argument with the reason.
std::pair<std::string, std::vector<int64_t>> parse_space(const std::string& spec);

nlohmann::ordered_json to_json(const Result& r);
/// The rejected configs, `[{params, reason}]` (reason on one line), in enumeration order.
nlohmann::ordered_json rejected_json(const Result& r);

}  // namespace tilepipe::tune

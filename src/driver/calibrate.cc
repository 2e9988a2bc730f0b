// Calibration: named chip-config parameters fitted to on-board times within their documented
// ranges (configs/fit_ranges.json) by NLopt's BOBYQA on the sum of squared log errors, with
// a leave-one-out refit per measurement and a chip config whose changed values say where
// they came from.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <nlopt.hpp>
#include <set>
#include <sstream>

#include "tilepipe/fidelity.h"
#include "tilepipe/json_input.h"

namespace tilepipe::driver {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

std::string read_text(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw ParamError{fmt::format("{}: expected a readable {}, found {}", path, what,
                                 fs::exists(path, ec) ? "something else" : "no such file")};
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The leaf object of a dotted key ("dma.mte2_latency" -> config["dma"]["mte2_latency"]), or
/// nullptr.
template <class J>
J* leaf(J& config, const std::string& key) {
  J* node = &config;
  size_t start = 0;
  while (true) {
    size_t dot = key.find('.', start);
    std::string part =
        key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!node->is_object() || !node->contains(part)) return nullptr;
    node = &(*node)[part];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (!node->is_object() || !node->contains("value") || !(*node)["value"].is_number())
    return nullptr;
  return node;
}

/// Whether the loader reads `key` as an integer (the file may write 7 for a number).
bool integer_key(const std::string& key, const ojson& value) {
  for (const auto& k : chip_config_keys())
    if (k.key == key) return k.integer;
  return value.is_number_integer();
}

/// `v` with 4 significant digits (what the written config holds).
double round4(double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  return std::round(v * scale) / scale;
}

std::string num(double v) {
  return fmt::format("{:.6g}", v);
}

/// What one run adds to the objective before its weight: ln(simulated / measured)^2.
double sq_log_error(double simulated, double measured) {
  double r = std::log(simulated / measured);
  return r * r;
}

// A config that makes an anchor fail (a capacity or deadlock the starting config did not
// have) costs as much as an error of e^5: the fit moves away from it.
constexpr double kFailurePenalty = 25;

class Fitter {
 public:
  Fitter(const CalibrationRequest& req, const ojson& start, std::vector<FittedParam> params)
      : req_(req), start_(start), params_(std::move(params)) {}

  int simulations() const { return simulations_; }

  /// Parameter values (in their units) from the optimiser's unit cube.
  std::vector<double> values(const std::vector<double>& u) const {
    std::vector<double> x(u.size());
    for (size_t i = 0; i < u.size(); ++i) {
      const auto& p = params_[i];
      double v = p.range.lo + std::clamp(u[i], 0.0, 1.0) * (p.range.hi - p.range.lo);
      x[i] = p.integer ? std::round(v) : v;
    }
    return x;
  }

  std::vector<double> unit(const std::vector<double>& x) const {
    std::vector<double> u(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const auto& p = params_[i];
      u[i] = std::clamp((x[i] - p.range.lo) / (p.range.hi - p.range.lo), 0.0, 1.0);
    }
    return u;
  }

  ojson config(const std::vector<double>& x) const {
    ojson c = start_;
    for (size_t i = 0; i < x.size(); ++i) set_chip_value(c, params_[i].key, x[i]);
    return c;
  }

  /// The runs of the measurements in `which` at values `x` (simulated once per config).
  std::vector<AnchorRun> runs(const std::vector<double>& x, const std::vector<size_t>& which) {
    std::vector<size_t> missing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i : which)
        if (!memo_.count({i, x})) missing.push_back(i);
    }
    if (!missing.empty()) {
      AnchorSet subset;
      subset.origin = req_.measurements.origin;
      for (size_t i : missing) subset.anchors.push_back(req_.measurements.anchors[i]);
      AnchorOptions o;
      o.corpus = req_.corpus;
      o.fast_forward = req_.fast_forward;
      o.jobs = req_.jobs;
      std::vector<AnchorRun> got;
      try {
        o.chip = parse_chip_config(config(x).dump(), "calibration candidate");
        got = run_anchors(subset, o);
      } catch (const ConfigError& e) {
        got.assign(missing.size(), AnchorRun{});
        for (auto& r : got) {
          r.status = "error";
          r.note = e.message;
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      simulations_ += static_cast<int>(missing.size());
      for (size_t j = 0; j < missing.size(); ++j) memo_[{missing[j], x}] = got[j];
    }
    std::vector<AnchorRun> out;
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i : which) out.push_back(memo_.at({i, x}));
    return out;
  }

  double loss(const std::vector<double>& x, const std::vector<size_t>& which) {
    auto rs = runs(x, which);
    double l = 0;
    for (size_t j = 0; j < which.size(); ++j) {
      const Anchor& a = req_.measurements.anchors[which[j]];
      l += a.weight * (rs[j].status == "ok" ? sq_log_error(rs[j].simulated_us, a.measured_us)
                                            : kFailurePenalty);
    }
    return l;
  }

  struct Fit {
    std::vector<double> x;
    double loss = 0;
    int evaluations = 0;
    bool flat = true;  // every evaluation gave the same loss: the measurements ignore the values
  };

  /// BOBYQA over the unit cube from the starting values, on the measurements in `which`,
  /// restarted from the best point with a full-size trust region while a round improves the
  /// loss by more than 1 %: simulated times are piecewise constant (cycles, integer
  /// parameters) and the bandwidth sharing of many streams makes them slightly rough, which
  /// can shrink a single run's trust region onto a dent.
  Fit fit(const std::vector<size_t>& which) {
    const size_t n = params_.size();
    struct Data {
      Fitter* self;
      const std::vector<size_t>* which;
      Fit best;
      int evals = 0;
      double first = 0;
    } data{this, &which, {}, 0, 0};
    data.best.loss = std::numeric_limits<double>::infinity();
    const int budget = req_.max_evals > 0 ? req_.max_evals : 30 * static_cast<int>(n + 1);
    std::vector<double> start;
    for (const auto& p : params_) start.push_back(p.start);
    std::vector<double> u = unit(start);
    double round_start = std::numeric_limits<double>::infinity();
    for (int round = 0; round < 5 && data.evals < budget; ++round) {
      nlopt::opt opt(nlopt::LN_BOBYQA, static_cast<unsigned>(n));
      opt.set_lower_bounds(std::vector<double>(n, 0.0));
      opt.set_upper_bounds(std::vector<double>(n, 1.0));
      opt.set_min_objective(
          [](unsigned m, const double* p, double*, void* raw) -> double {
            auto* d = static_cast<Data*>(raw);
            std::vector<double> x = d->self->values(std::vector<double>(p, p + m));
            double l = d->self->loss(x, *d->which);
            if (d->evals > 0 && l != d->first) d->best.flat = false;
            if (d->evals == 0) d->first = l;
            ++d->evals;
            if (l < d->best.loss) {
              d->best.loss = l;
              d->best.x = x;
            }
            return l;
          },
          &data);
      // A thousandth of each range: below the rounding of the written value for most
      // ranges; the simulated times are piecewise constant below that anyway.
      opt.set_xtol_abs(1e-3);
      opt.set_initial_step(0.15);
      opt.set_maxeval(budget - data.evals);
      double f = 0;
      try {
        opt.optimize(u, f);
      } catch (const nlopt::roundoff_limited&) {
        // The best point so far is kept.
      } catch (const std::runtime_error&) {
        // "nlopt failure" on a flat objective: likewise.
      }
      if (data.best.x.empty()) break;
      if (!(data.best.loss < 0.99 * round_start)) break;
      round_start = data.best.loss;
      u = unit(data.best.x);
    }
    data.best.evaluations = data.evals;
    if (data.best.x.empty()) data.best.x = values(u);
    return data.best;
  }

 private:
  const CalibrationRequest& req_;
  const ojson& start_;
  std::vector<FittedParam> params_;
  std::mutex mu_;
  std::map<std::pair<size_t, std::vector<double>>, AnchorRun> memo_;
  int simulations_ = 0;
};

}  // namespace

std::map<std::string, FitRange> load_fit_ranges(const std::string& path_in) {
  std::string path = path_in.empty() ? config_dir() + "/fit_ranges.json" : path_in;
  nlohmann::json root;
  try {
    root = parse_json_input(read_text(path, "fit range table (configs/fit_ranges.json)"), path,
                            "a fit range table: an object with a \"ranges\" object "
                            "(configs/fit_ranges.json)");
  } catch (const JsonInputError& e) {
    throw ParamError{e.what()};
  }
  if (!root.is_object() || !root.contains("ranges") || !root["ranges"].is_object())
    throw ParamError{path + ": expected an object with a \"ranges\" object"};
  std::map<std::string, FitRange> out;
  for (const auto& [key, r] : root["ranges"].items()) {
    if (!r.is_object() || !r.contains("lo") || !r.contains("hi") || !r["lo"].is_number() ||
        !r["hi"].is_number() || !r.contains("source") || !r["source"].is_string() ||
        !(r["lo"].get<double>() < r["hi"].get<double>()))
      throw ParamError{fmt::format(
          "{}: range '{}': expected {{\"lo\": N, \"hi\": M, \"source\": \"...\"}} with lo < hi",
          path, key)};
    out[key] = {r["lo"].get<double>(), r["hi"].get<double>(), r["source"].get<std::string>()};
  }
  return out;
}

double get_chip_value(const nlohmann::ordered_json& config, const std::string& key) {
  const auto* l = leaf(config, key);
  if (!l) {
    std::vector<std::string> keys;
    for (const auto& k : chip_config_keys()) keys.push_back(k.key);
    throw ParamError{fmt::format(
        "unknown chip config key '{}': expected a dotted path to a value of the chip config, "
        "one of {}",
        key, fmt::join(keys, ", "))};
  }
  return (*l)["value"].get<double>();
}

void set_chip_value(nlohmann::ordered_json& config, const std::string& key, double value) {
  get_chip_value(config, key);  // throws for an unknown key
  auto* l = leaf(config, key);
  if (integer_key(key, (*l)["value"]))
    (*l)["value"] = static_cast<int64_t>(std::llround(value));
  else
    (*l)["value"] = value;
}

CalibrationResult calibrate(const CalibrationRequest& req) {
  const std::string chip_path = chip_config_path(req.chip);
  load_chip_config(req.chip);  // a config the loader rejects: its ConfigError, now
  ojson start = ojson::parse(read_text(chip_path, "chip config"));
  start.erase("calibration");  // a calibrated config calibrated again records the new fit

  std::map<std::string, FitRange> table;
  bool table_loaded = false;
  std::vector<FittedParam> params;
  std::set<std::string> seen;
  for (const std::string& spec : req.fit) {
    FittedParam p;
    auto eq = spec.find('=');
    p.key = spec.substr(0, eq);
    if (!seen.insert(p.key).second) throw ParamError{fmt::format("--fit names '{}' twice", p.key)};
    p.start = get_chip_value(start, p.key);
    p.integer = integer_key(p.key, leaf(start, p.key)->at("value"));
    if (eq != std::string::npos) {
      std::string range = spec.substr(eq + 1);
      auto colon = range.find(':');
      char* end1 = nullptr;
      char* end2 = nullptr;
      std::string lo = range.substr(0, colon);
      std::string hi = colon == std::string::npos ? "" : range.substr(colon + 1);
      p.range.lo = std::strtod(lo.c_str(), &end1);
      p.range.hi = std::strtod(hi.c_str(), &end2);
      if (colon == std::string::npos || lo.empty() || hi.empty() || *end1 || *end2 ||
          !(p.range.lo < p.range.hi) || !std::isfinite(p.range.hi))
        throw ParamError{fmt::format(
            "--fit '{}': expected KEY or KEY=LO:HI with numbers LO < HI (the range to fit {} "
            "in, in the config's unit)",
            spec, p.key)};
      p.range.source = "given on the command line (--fit)";
    } else {
      if (!table_loaded) {
        table = load_fit_ranges(req.ranges_path);
        table_loaded = true;
      }
      auto it = table.find(p.key);
      if (it == table.end()) {
        std::vector<std::string> keys;
        for (const auto& [k, r] : table) keys.push_back(k);
        throw ParamError{fmt::format(
            "--fit {}: no documented range in {}; give one (--fit {}=LO:HI) or fit one of {}",
            p.key, req.ranges_path.empty() ? "configs/fit_ranges.json" : req.ranges_path, p.key,
            fmt::join(keys, ", "))};
      }
      p.range = it->second;
    }
    // The range must be one the loader accepts at both ends.
    for (double v : {p.range.lo, p.range.hi}) {
      ojson c = start;
      set_chip_value(c, p.key, v);
      try {
        parse_chip_config(c.dump(), chip_path);
      } catch (const ConfigError& e) {
        throw ParamError{
            fmt::format("--fit {}: the range [{}, {}] is outside what the chip "
                        "config loader accepts: {}",
                        p.key, num(p.range.lo), num(p.range.hi), e.message)};
      }
    }
    p.start = std::clamp(p.start, p.range.lo, p.range.hi);
    params.push_back(p);
  }
  if (params.empty()) throw ParamError{"--fit names no parameter: --fit KEY[,KEY...]"};

  CalibrationResult res;
  res.method = "NLopt LN_BOBYQA";
  Fitter fitter(req, start, params);
  const size_t n = req.measurements.anchors.size();
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  std::vector<double> x0;
  for (const auto& p : params) x0.push_back(p.start);
  if (req.progress)
    req.progress(fmt::format("simulating {} measurements on the starting config", n));
  res.before = fitter.runs(x0, all);
  std::vector<size_t> used;
  res.used.assign(n, false);
  for (size_t i = 0; i < n; ++i)
    if (res.before[i].status == "ok" && req.measurements.anchors[i].set == "calibration") {
      used.push_back(i);
      res.used[i] = true;
    }
  if (used.size() < 2) {
    std::string why;
    for (size_t i = 0; i < n && why.empty(); ++i)
      if (!res.used[i] && res.before[i].status != "ok")
        why = fmt::format(" (first not run: {}: {})", req.measurements.anchors[i].name,
                          res.before[i].note);
    throw ParamError{fmt::format(
        "{} of {} measurements are calibration measurements that ran on the starting config; a "
        "fit needs at least two (validation measurements are never fitted on){}",
        used.size(), n, why)};
  }
  res.loss_before = fitter.loss(x0, used);

  if (req.progress)
    req.progress(
        fmt::format("fitting {} parameter(s) to {} measurements", params.size(), used.size()));
  auto best = fitter.fit(used);
  res.evaluations = best.evaluations;
  std::vector<double> x = best.x;
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::clamp(params[i].integer ? std::round(x[i]) : round4(x[i]), params[i].range.lo,
                      params[i].range.hi);
  for (size_t i = 0; i < x.size(); ++i) params[i].value = x[i];
  res.params = params;
  res.after = fitter.runs(x, all);
  res.loss_after = fitter.loss(x, used);

  res.loo_values.assign(n, {});
  res.loo_us.assign(n, std::nan(""));
  res.loo_error_pct.assign(n, std::nan(""));
  if (req.leave_one_out && used.size() >= 2) {
    for (size_t i : used) {
      std::vector<size_t> rest;
      for (size_t j : used)
        if (j != i) rest.push_back(j);
      if (req.progress)
        req.progress(
            fmt::format("leave-one-out: refit without {}", req.measurements.anchors[i].name));
      auto f = fitter.fit(rest);
      res.loo_values[i] = f.x;
      AnchorRun r = fitter.runs(f.x, {i}).front();
      if (r.status == "ok") {
        res.loo_us[i] = r.simulated_us;
        res.loo_error_pct[i] = r.error_pct;
      }
    }
  }
  if (req.leave_one_family_out) {
    std::vector<std::string> order;
    for (size_t i : used)
      if (std::find(order.begin(), order.end(), req.measurements.anchors[i].family) == order.end())
        order.push_back(req.measurements.anchors[i].family);
    for (const std::string& fam : order) {
      if (order.size() < 2) break;
      FamilyFit ff;
      ff.family = fam;
      std::vector<size_t> rest;
      for (size_t j : used)
        (req.measurements.anchors[j].family == fam ? ff.members : rest).push_back(j);
      if (req.progress)
        req.progress(fmt::format("leave-one-family-out: refit without {} ({} measurements)", fam,
                                 ff.members.size()));
      auto f = fitter.fit(rest);
      ff.values = f.x;
      ff.determined = !f.flat;
      double sum = 0;
      int ran = 0;
      for (const AnchorRun& r : fitter.runs(f.x, ff.members)) {
        ff.error_pct.push_back(r.status == "ok" ? r.error_pct : std::nan(""));
        if (r.status == "ok") {
          sum += std::fabs(r.error_pct);
          ++ran;
        }
      }
      ff.mean_abs_pct = ran ? sum / ran : std::nan("");
      res.families.push_back(std::move(ff));
    }
  }
  res.simulations = fitter.simulations();

  // The written config: the fitted values with their provenance.
  ojson out = fitter.config(x);
  if (!req.output_name.empty()) out["name"] = req.output_name;
  std::string what =
      req.measurements_name.empty() ? req.measurements.origin : req.measurements_name;
  std::vector<std::string> fitted_on;
  for (size_t i : used) fitted_on.push_back(req.measurements.anchors[i].name);
  for (const auto& p : params) {
    auto* l = leaf(out, p.key);
    (*l)["basis"] = fmt::format("fit: {}", fmt::join(fitted_on, ", "));
    std::string old_source = (*l)["source"].get<std::string>();
    std::string old_conf = (*l)["conf"].get<std::string>();
    (*l)["source"] = fmt::format(
        "Calibrated by `tilepipe calibrate` on {} ({} measurements; {}, sum of squared log "
        "errors) within [{}, {}] ({}); before: {} [{}]: {}",
        what, used.size(), res.method, num(p.range.lo), num(p.range.hi), p.range.source,
        num(p.start), old_conf, old_source);
    (*l)["conf"] = "M";
  }
  ojson cal;
  cal["tool"] = "tilepipe calibrate";
  cal["from_chip"] = req.chip;
  cal["measurements"] = what;
  cal["objective"] = "sum over measurements of weight x ln(simulated / measured)^2";
  cal["method"] = res.method;
  cal["fit"] = ojson::array();
  for (const auto& p : params)
    cal["fit"].push_back({{"key", p.key},
                          {"before", p.start},
                          {"after", p.value},
                          {"range", {p.range.lo, p.range.hi}},
                          {"range_source", p.range.source}});
  cal["evaluations"] = res.evaluations;
  double wsum = 0;
  for (size_t i : used) wsum += req.measurements.anchors[i].weight;
  cal["rms_log_error_before"] = wsum > 0 ? std::sqrt(res.loss_before / wsum) : 0.0;
  cal["rms_log_error_after"] = wsum > 0 ? std::sqrt(res.loss_after / wsum) : 0.0;
  cal["table"] = ojson::array();
  for (size_t i = 0; i < n; ++i) {
    cal["table"].push_back(calibration_row(req.measurements.anchors[i], res, i));
  }
  cal["leave_one_family_out"] = family_rows(req.measurements, res);
  out["calibration"] = cal;
  res.config = out;
  return res;
}

ojson family_rows(const AnchorSet& measurements, const CalibrationResult& res) {
  ojson rows = ojson::array();
  for (const auto& f : res.families) {
    ojson members = ojson::array();
    for (size_t k = 0; k < f.members.size(); ++k) {
      ojson m = {{"name", measurements.anchors[f.members[k]].name}};
      if (!std::isnan(f.error_pct[k])) m["error_pct"] = f.error_pct[k];
      members.push_back(m);
    }
    rows.push_back({{"family", f.family},
                    {"params", f.values},
                    {"determined_without_it", f.determined},
                    {"mean_abs_error_pct",
                     std::isnan(f.mean_abs_pct) ? ojson(nullptr) : ojson(f.mean_abs_pct)},
                    {"members", members}});
  }
  return rows;
}

ojson calibration_row(const Anchor& a, const CalibrationResult& res, size_t i) {
  ojson row = {
      {"name", a.name}, {"set", a.set}, {"family", a.family}, {"measured_us", a.measured_us}};
  if (res.before[i].status != "ok") {
    row["status"] = res.before[i].status;
    row["note"] = res.before[i].note;
    return row;
  }
  row["before_us"] = res.before[i].simulated_us;
  row["before_error_pct"] = res.before[i].error_pct;
  row["after_us"] = res.after[i].simulated_us;
  row["after_error_pct"] = res.after[i].error_pct;
  if (!std::isnan(res.loo_error_pct[i])) {
    row["loo_us"] = res.loo_us[i];
    row["loo_error_pct"] = res.loo_error_pct[i];
  }
  return row;
}

}  // namespace tilepipe::driver

#include "advise_cmds.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "outputs.h"
#include "tilepipe/advisor.h"
#include "tilepipe/driver.h"
#include "tilepipe/html.h"
#include "tilepipe/tune.h"

namespace tilepipe::cli {
namespace {

using json = nlohmann::ordered_json;

void write(const std::string& path, const std::string& content) {
  try {
    prof::write_file_atomic(path, content);
  } catch (const std::runtime_error& e) {
    throw driver::ParamError{e.what()};
  }
}

prof::RuleSet rules_from(const std::string& path) {
  try {
    return prof::load_rules(path);
  } catch (const std::runtime_error& e) {
    throw driver::ParamError{e.what()};
  }
}

/// Why a search found no config: how many were rejected or skipped, and the first
/// rejection's diagnostic (usually the same for all).
std::string no_config_ran(const tune::Result& r) {
  std::string msg =
      fmt::format("tune: no config could be simulated ({} rejected, {} skipped of {})", r.rejected,
                  r.skipped, r.configs.size());
  for (const auto& c : r.configs)
    if (c.status == "rejected")
      return msg + fmt::format("; the first rejected, {}: {}", json(c.params).dump(),
                               prof::one_line(c.reason));
  return msg + "; raise --max-evals or widen the --space";
}

/// The rejected configs, one line each (the first ten, then how many more).
std::string rejected_text(const json& rejected) {
  constexpr size_t kShown = 10;
  std::string o;
  size_t n = 0;
  for (const auto& x : rejected)
    if (n++ < kShown)
      o += fmt::format("  rejected {}: {}\n", x["params"].dump(), x["reason"].get<std::string>());
  if (n > kShown) o += fmt::format("  ... and {} more rejected (all in --json)\n", n - kShown);
  return o;
}

}  // namespace

std::shared_ptr<const driver::GivenInputs> given_inputs(const std::string& path) {
  if (path.empty()) return nullptr;
  return std::make_shared<const driver::GivenInputs>(driver::load_inputs(path));
}

std::string inputs_text(const driver::InputsReport& r) {
  std::string note = r.note();
  return note.empty() ? "" : "data-dependent: " + note + "\n";
}

int cmd_profile(const ProfileArgs& a) {
  const driver::KernelSource k = driver::find_kernel(a.kernel);
  driver::RunRequest req;
  req.variant = a.variant;
  req.params = driver::resolve_params(k, a.params);
  req.mode = a.mode == "functional" ? sim::Mode::Functional : sim::Mode::Timing;
  req.seed = a.seed;
  req.given_inputs = given_inputs(a.inputs);
  req.max_cycles = a.max_cycles;
  req.max_wall_s = a.max_wall_s;
  req.warnings_as_errors = a.werror;
  check_outputs({{"--html", a.html}}, a.chip, a.rules);
  ChipConfig chip = load_chip_config(a.chip);
  prof::RuleSet rules = rules_from(a.rules);
  auto t0 = std::chrono::steady_clock::now();
  auto rep = driver::profile_kernel(k, req, chip, rules, !a.no_verify);
  for (const auto& w : rep.run.warnings) std::cerr << w.str() << "\n";
  json out = driver::profile_json(k, rep, req, chip);
  out["advise_wall_s"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() -
      rep.run.sim_wall_s;
  std::string text = prof::to_text(rep.summary) + (a.lines ? prof::to_text(rep.lines) : "") +
                     prof::to_text(rep.advice) + inputs_text(rep.run.inputs);
  for (const auto& v : rep.variants)
    text += v.error.empty() ? fmt::format("variant {:<10} {:.0f} cycles ({:.2f} us)\n", v.variant,
                                          v.cycles, v.cycles * chip.us_per_cycle())
                            : fmt::format("variant {:<10} not run: {}\n", v.variant, v.error);
  if (!a.html.empty()) {
    write(a.html, driver::profile_html(k, rep, req, chip));
    out["html"] = a.html;
  }
  std::cerr << text;
  if (a.json)
    std::cout << out.dump(2) << "\n";
  else
    std::cout << fmt::format("{}: {:.0f} cycles ({:.2f} us), {} advice item(s)\n",
                             driver::report_heading(k, rep.run.variant, req.params, chip.name),
                             rep.run.sim.cycles, rep.run.sim.cycles * chip.us_per_cycle(),
                             rep.advice.size());
  return 0;
}

int cmd_tune(const TuneArgs& a) {
  const driver::KernelSource k = driver::find_kernel(a.kernel);
  check_outputs({{"--html", a.html}}, a.chip);
  ChipConfig chip = load_chip_config(a.chip);
  driver::RunRequest base;
  base.variant = driver::resolve_variant(k, a.variant);
  base.mode = sim::Mode::Timing;
  base.given_inputs = given_inputs(a.inputs);
  if (base.given_inputs && !a.scheduler.empty())
    throw driver::ParamError{
        "tune --inputs with --scheduler: the cluster's workers take no arrays; search locally "
        "(without --scheduler), or without --inputs"};
  tune::Options o;
  if (a.space.empty()) throw driver::ParamError{"tune: give at least one --space NAME=V1,V2,..."};
  for (const auto& s : a.space) {
    try {
      auto dim = tune::parse_space(s);
      bool known = false;
      for (const auto& p : k.params) known = known || p.name == dim.first;
      if (!known)
        throw std::invalid_argument(
            fmt::format("--space '{}': kernel '{}' has no parameter '{}' (see `tilepipe list`)", s,
                        k.name, dim.first));
      for (const auto& [name, values] : o.space)
        if (name == dim.first)
          throw std::invalid_argument(fmt::format(
              "--space '{}': parameter '{}' is already searched (--space {}={}); give all its "
              "values in one --space",
              s, name, name, fmt::join(values, ",")));
      o.space.push_back(dim);
    } catch (const std::invalid_argument& e) {
      throw driver::ParamError{e.what()};
    }
  }
  try {
    base.params = driver::resolve_params(k, a.params);
  } catch (const driver::ParamError&) {
    // A searched parameter without a default (a Python factory's argument) starts at its
    // first value; any other problem stays.
    driver::RawParams raw = a.params;
    for (const auto& [name, values] : o.space) raw.try_emplace(name, std::to_string(values[0]));
    base.params = driver::resolve_params(k, raw);
  }
  if (a.strategy != "grid" && a.strategy != "coord")
    throw driver::ParamError{fmt::format("--strategy '{}': expected grid or coord", a.strategy)};
  o.strategy = a.strategy;
  o.jobs =
      a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.max_evals = a.max_evals;
  o.cache_dir = a.no_cache ? "" : (a.cache_dir.empty() ? driver::default_cache_dir() : a.cache_dir);
  o.us_per_cycle = chip.us_per_cycle();
  o.error_band_pct = rules_from("").error_band_pct;
  o.progress = true;
  std::string chip_text = driver::chip_config_text(a.chip);
  auto cb = driver::tune_callbacks(k, base, chip, chip_text);
  if (!a.scheduler.empty())
    o.executor = driver::connect_scheduler(
        a.scheduler, {a.kernel, base.variant, base.params, chip_text, chip_config_path(a.chip)});
  auto t0 = std::chrono::steady_clock::now();
  tune::Point start;
  for (const auto& [n, v] : base.params) start[n] = v;
  tune::Result r = tune::run(start, o, cb);
  if (!r.cache_warning.empty()) {
    std::cerr << "tilepipe tune: warning: " << r.cache_warning << "\n";
    o.cache_dir.clear();  // the default's run below, and the JSON: no cache
  }
  if (!r.best_time_us) throw driver::ParamError{no_config_ran(r)};
  // The default: the given parameters alone, always evaluated (through the cache), whatever
  // the strategy and --max-evals.
  tune::Options d = o;
  d.space.clear();
  d.strategy = "grid";
  d.max_evals = 0;
  d.progress = false;
  tune::Result def = tune::run(start, d, cb);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  json out;
  out["kernel"] = k.name;
  out["variant"] = base.variant;
  out["chip"] = chip.name;
  out["params"] = base.params;
  out["strategy"] = o.strategy;
  json space = json::object();
  for (const auto& [n, v] : o.space) space[n] = v;
  out["space"] = space;
  json body = tune::to_json(r);
  out["best"] = body["best"];
  out["best_time_us"] = body["best_time_us"];
  out["default"] = {{"params", start},
                    {"time_us", def.best_time_us ? json(*def.best_time_us) : json(nullptr)},
                    {"status", def.configs.empty() ? "" : def.configs[0].status},
                    {"reason", def.configs.empty() ? "" : def.configs[0].reason}};
  // Without a default time (its config is rejected) there is no speedup to state.
  out["speedup_vs_default"] =
      def.best_time_us ? json(*def.best_time_us / *r.best_time_us) : json(nullptr);
  out["error_band_pct"] = o.error_band_pct;
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "best" && it.key() != "best_time_us") out[it.key()] = it.value();
  out["cache_dir"] = o.cache_dir;
  if (!r.cache_warning.empty()) out["cache_warning"] = r.cache_warning;
  if (!a.scheduler.empty()) out["scheduler"] = a.scheduler;
  // What depends on input values, in the best config's program.
  driver::RunRequest best = base;
  driver::RawParams best_raw;
  for (const auto& [n, v] : r.best) best_raw[n] = std::to_string(v);
  for (const auto& [n, v] : base.params) best_raw.try_emplace(n, std::to_string(v));
  best.params = driver::resolve_params(k, best_raw);
  const driver::InputsReport inputs = driver::inputs_report(k, best, chip);
  json ij = driver::inputs_json(inputs);
  for (auto it = ij.begin(); it != ij.end(); ++it) out[it.key()] = it.value();
  out["wall_s"] = wall;
  std::string vs_default =
      def.best_time_us ? fmt::format("default {:.1f} us; speedup {:.3f}x", *def.best_time_us,
                                     *def.best_time_us / *r.best_time_us)
                       : fmt::format("default rejected ({})",
                                     def.configs.empty() ? "not evaluated" : def.configs[0].reason);
  std::string text = fmt::format(
      "tune of {} ({}, {} configs): best {} = {:.1f} us; {}\n"
      "  simulated {}, cached {}, pruned {}, rejected {}, skipped {}; {:.1f} s{}\n",
      driver::report_heading(k, base.variant, base.params, chip.name), o.strategy, r.configs.size(),
      json(r.best).dump(), *r.best_time_us, vs_default, r.simulated, r.cached, r.pruned, r.rejected,
      r.skipped, wall, a.scheduler.empty() ? "" : " on the cluster at " + a.scheduler);
  text += rejected_text(out["rejected"]);
  std::cerr << inputs_text(inputs);
  if (!a.html.empty()) {
    json doc = {
        {"title", "tuning " + driver::report_heading(k, base.variant, base.params, chip.name)},
        {"tune", out}};
    write(a.html, prof::html_report(doc));
    out["html"] = a.html;
  }
  print_result(a.json, out, text);
  return 0;
}

json ladder_advice(const driver::KernelSource& k, const driver::LadderReport& rep,
                   const ChipConfig& chip, const json& ladder, const std::string& html, int jobs) {
  std::vector<json> steps = driver::ladder_profiles(k, rep, chip, jobs);
  json advice = json::array();
  for (size_t i = 0; i < steps.size(); ++i)
    advice.push_back({{"step", rep.steps[i].name}, {"advice", steps[i]["advice"]}});
  if (!html.empty()) {
    json doc = {{"title", fmt::format("{} optimisation ladder ({}) on {}", k.name,
                                      driver::params_text(rep.params), chip.name)},
                {"ladder", ladder}};
    doc["ladder"]["profiles"] = steps;
    write(html, prof::html_report(doc));
  }
  return advice;
}

}  // namespace tilepipe::cli

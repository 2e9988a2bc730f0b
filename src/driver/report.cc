// The profile as data: the JSON every client prints (CLI `--json`, Python summary()) and the
// HTML report built from it, so the CLI and the Python module give the same report.
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "tilepipe/driver.h"
#include "tilepipe/html.h"

namespace tilepipe::driver {

using json = nlohmann::ordered_json;

json timeline_json(const prof::Timeline& t, const std::vector<std::string>& names) {
  json rows = json::array();
  for (size_t c = 0; c < t.busy.size() && c < names.size(); ++c) {
    for (int p = 0; p < ir::kNumPipes; ++p) {
      json bins = json::array();
      bool any = false;
      for (const auto& b : t.busy[c]) {
        double v = std::round(1000.0 * b[static_cast<size_t>(p)] / t.bin_cycles) / 1000.0;
        any = any || v > 0;
        bins.push_back(v);
      }
      if (any)
        rows.push_back({{"core", names[c]},
                        {"pipe", ir::to_string(static_cast<ir::Pipe>(p))},
                        {"busy", bins}});
    }
  }
  return {{"bin_cycles", t.bin_cycles}, {"rows", rows}};
}

json lines_json(const prof::LineAttribution& a) {
  json lines = json::array();
  std::map<std::string, double> files;
  for (const auto& l : a.lines) {
    json waits = json::object();
    for (const auto& [why, c] : l.waits_on) waits[why] = c;
    lines.push_back({{"file", l.file},
                     {"line", l.line},
                     {"op", l.op},
                     {"pipe", l.pipe},
                     {"cycles", l.cycles},
                     {"busy_cycles", l.busy_cycles},
                     {"stall_cycles", l.stall_cycles},
                     {"waits_on", waits},
                     {"instructions", l.instructions}});
    files[l.file] += l.cycles;
  }
  const double kernel = a.cycles - a.launch_cycles;
  json meta = {{"core", a.core},
               {"cycles", a.cycles},
               {"launch_cycles", a.launch_cycles},
               {"kernel_cycles", kernel}};
  json pct = json::object();
  for (const auto& [f, c] : files) pct[f] = kernel > 0 ? std::round(1e4 * c / kernel) / 100 : 0;
  meta["files"] = pct;
  if (!a.unavailable.empty()) meta["unavailable"] = a.unavailable;
  return {{"lines", lines}, {"line_attribution", meta}};
}

std::string params_text(const Params& p) {
  if (p.empty()) return "no parameters";
  std::vector<std::string> parts;
  for (const auto& [n, v] : p) parts.push_back(fmt::format("{}={}", n, v));
  return fmt::format("{}", fmt::join(parts, " "));
}

std::string report_heading(const KernelSource& k, const std::string& variant, const Params& p,
                           const std::string& chip) {
  return fmt::format("{} ({}) on {}", label(k, variant), params_text(p), chip);
}

json run_header(const KernelSource& k, const std::string& variant, const RunRequest& req,
                const ChipConfig& chip) {
  json out;
  out["kernel"] = k.name;
  out["variant"] = variant;
  out["chip"] = chip.name;
  out["mode"] = req.mode == sim::Mode::Functional ? "functional" : "timing";
  out["params"] = req.params;
  return out;
}

json run_json(const KernelSource& k, const RunReport& rep, const RunRequest& req,
              const ChipConfig& chip, const prof::Summary& summary,
              const prof::LineAttribution* lines) {
  auto merge = [](json& out, const json& part) {
    for (auto it = part.begin(); it != part.end(); ++it) out[it.key()] = it.value();
  };
  json out = run_header(k, rep.variant, req, chip);
  out["cycles"] = rep.sim.cycles;
  out["time_us"] = rep.sim.cycles * chip.us_per_cycle();
  if (rep.checked) {
    out["correct"] = rep.correct;
    out["max_abs_err"] = rep.max_abs_err;
    out["max_rel_err"] = rep.max_rel_err;
    out["tolerance"] = {{"rtol", k.tol.rtol}, {"atol", k.tol.atol}};
    if (!rep.correct) out["mismatch"] = rep.mismatch;
  }
  out["warnings"] = warnings_json(rep.warnings);
  merge(out, prof::to_json(summary));
  out["instructions"] = rep.sim.instructions;
  if (lines) merge(out, lines_json(*lines));
  if (rep.sim.fast_forward.jumps > 0)
    out["fast_forward"] = {{"jumps", rep.sim.fast_forward.jumps},
                           {"skipped_iterations", rep.sim.fast_forward.iterations},
                           {"skipped_cycles", rep.sim.fast_forward.cycles}};
  out["sim_wall_s"] = rep.sim_wall_s;
  merge(out, inputs_json(rep.inputs));
  return out;
}

json profile_json(const KernelSource& k, const ProfileReport& rep, const RunRequest& req,
                  const ChipConfig& chip) {
  json out = run_json(k, rep.run, req, chip, rep.summary, &rep.lines);
  out["evidence"] = prof::to_json(rep.evidence);
  json metrics = json::object();
  for (const auto& [n, v] : prof::metrics(rep.summary, rep.evidence))
    metrics[n] = std::round(v * 1000) / 1000;
  out["metrics"] = metrics;
  out["advice"] = prof::to_json(rep.advice);
  json dropped = json::array();
  for (const auto& a : rep.dropped)
    dropped.push_back(
        {{"id", a.id}, {"verified_gain_pct", a.verified_gain_pct}, {"what_if", a.tried}});
  out["advice_dropped"] = dropped;
  out["model_limits"] = prof::model_limits();
  if (!rep.variants.empty()) {
    json vs = json::array();
    for (const auto& v : rep.variants) {
      json j = {{"variant", v.variant}};
      if (v.error.empty()) {
        j["cycles"] = v.cycles;
        j["time_us"] = v.cycles * chip.us_per_cycle();
      } else {
        j["error"] = v.error;
      }
      vs.push_back(j);
    }
    out["variants"] = vs;
  }
  return out;
}

std::string profile_html(const KernelSource& k, const ProfileReport& rep, const RunRequest& req,
                         const ChipConfig& chip) {
  json doc = {{"title", "profile of " + report_heading(k, rep.run.variant, req.params, chip.name)},
              {"profile", profile_json(k, rep, req, chip)}};
  doc["profile"]["timeline"] = timeline_json(rep.timeline, rep.core_names);
  return prof::html_report(doc);
}

std::vector<json> ladder_profiles(const KernelSource& k, const LadderReport& rep,
                                  const ChipConfig& chip, int jobs) {
  prof::RuleSet rules = prof::load_rules();
  std::vector<json> steps(rep.steps.size());
  for_each_parallel(rep.steps.size(), jobs, [&](size_t i) {
    RunRequest req;
    req.variant = rep.steps[i].name;
    req.params = rep.params;
    req.mode = sim::Mode::Timing;
    auto p = profile_kernel(k, req, chip, rules, true);
    json j = profile_json(k, p, req, chip);
    j["timeline"] = timeline_json(p.timeline, p.core_names);
    steps[i] = j;
  });
  return steps;
}

}  // namespace tilepipe::driver

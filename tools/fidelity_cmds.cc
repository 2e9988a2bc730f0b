#include "fidelity_cmds.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tilepipe/fidelity.h"
#include "tilepipe/prof.h"

namespace tilepipe::cli {
namespace {

using json = nlohmann::ordered_json;

int default_jobs(int jobs) {
  return jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

double elapsed_s(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// A relative Python path as the anchors file gives it (the table stays narrow).
std::string shown_kernel(const driver::Anchor& a) {
  std::string k = a.kernel;
  for (const auto& w : a.args) k += fmt::format(" {}", w);
  return k;
}

std::string params_text(const driver::RawParams& p) {
  std::string s;
  for (const auto& [k, v] : p) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
  return s;
}

std::string pct(double v) {
  return std::isnan(v) ? "-" : fmt::format("{:+.1f} %", v);
}

/// Parameters as JSON numbers where they are decimal integers (they always are once resolved).
json params_json(const driver::RawParams& p) {
  json j = json::object();
  for (const auto& [k, v] : p) {
    char* end = nullptr;
    long long n = std::strtoll(v.c_str(), &end, 10);
    j[k] = !v.empty() && *end == '\0' ? json(n) : json(v);
  }
  return j;
}

json summary_json(const driver::ErrorSummary& s) {
  return {{"anchors", s.n},
          {"mean_abs_error_pct", s.mean_abs_pct},
          {"max_abs_error_pct", s.max_abs_pct},
          {"max_anchor", s.max_name}};
}

std::string summary_line(const std::string& what, const driver::ErrorSummary& s) {
  if (s.n == 0) return fmt::format("{}: no anchor ran", what);
  return fmt::format("{}: mean |error| {:.1f} % over {} anchor{}, max {:.1f} % ({})", what,
                     s.mean_abs_pct, s.n, s.n == 1 ? "" : "s", s.max_abs_pct, s.max_name);
}

std::string protocol_short(const driver::Protocol& p) {
  return fmt::format("{}{}", p.l2_warm ? "warm" : "cold", p.launch_included ? "+launch" : "");
}

json protocol_json(const driver::Protocol& p) {
  return {{"l2", p.l2_warm ? "warm" : "cold"},
          {"launch", p.launch_included ? "included" : "excluded"},
          {"timer", p.timer},
          {"evidence", p.evidence}};
}

/// Each source of the table once: its citation and protocol, with the evidence.
std::string sources_text(const driver::AnchorSet& set) {
  std::string text =
      "sources (one protocol each; protocol = L2 at the start, +launch when the "
      "time includes die.launch_us):\n";
  std::vector<std::string> seen;
  for (const auto& a : set.anchors) {
    if (std::find(seen.begin(), seen.end(), a.source) != seen.end()) continue;
    seen.push_back(a.source);
    text += fmt::format("  {}: {} [{}]\n    timer: {}\n    evidence: {}\n", a.source, a.citation,
                        protocol_short(a.protocol), a.protocol.timer, a.protocol.evidence);
  }
  return text;
}

driver::AnchorSet load(const std::string& path, const std::vector<std::string>& only) {
  return driver::select_anchors(driver::load_anchors(path), only);
}

/// The table on stdout; with --json the JSON object on stdout and the table on stderr.
int print_report(const std::string& text, const json& out, bool as_json) {
  if (as_json) {
    std::cerr << text;
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << text;
  }
  return 0;
}

}  // namespace

int cmd_fidelity(const FidelityArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string path = a.anchors.empty() ? driver::default_anchors_path() : a.anchors;
  driver::AnchorSet set = load(path, a.only);
  driver::AnchorOptions o;
  if (!a.chip.empty()) o.chip = load_chip_config(a.chip);
  o.corpus = driver::corpus_dir(set, a.corpus);
  o.fast_forward = !a.exact;
  o.jobs = default_jobs(a.jobs);
  o.other_variants = true;  // a Python file's tilepipe lowering beside the original's
  const bool tty = isatty(STDERR_FILENO);
  size_t finished = 0;
  o.done = [&](size_t i, const driver::AnchorRun& r) {
    ++finished;
    if (!tty) return;
    std::cerr << fmt::format(
        "  [{}/{}] {} {}\n", finished, set.anchors.size(), set.anchors[i].name,
        r.status == "ok"
            ? fmt::format("{:.1f} us ({}), {:.1f} s", r.simulated_us, pct(r.error_pct), r.wall_s)
            : r.status + ": " + r.note);
  };
  auto runs = driver::run_anchors(set, o);
  const double wall = elapsed_s(t0);
  auto all = driver::summarize_errors(set, runs);
  auto measured = driver::summarize_errors(set, runs, "measured");
  auto calibration = driver::summarize_errors(set, runs, "", "calibration");
  auto validation = driver::summarize_errors(set, runs, "", "validation");

  json out;
  out["anchors_file"] = set.origin;
  out["corpus"] = o.corpus;
  out["chip"] = a.chip.empty() ? json(nullptr) : json(o.chip->name);
  out["fast_forward"] = o.fast_forward;
  out["jobs"] = o.jobs;
  out["anchors"] = json::array();
  std::string text =
      fmt::format("tilepipe fidelity: {} anchor{} of {} on {}, {}\n", set.anchors.size(),
                  set.anchors.size() == 1 ? "" : "s", set.origin,
                  a.chip.empty() ? "each anchor's chip" : o.chip->name,
                  o.fast_forward ? "timing mode, fast-forward" : "timing mode, exact");
  text += fmt::format("  {:<24} {:<11} {:<8} {:<4} {:<9} {:>12} {:>13} {:>9} {:>7}  {}\n", "anchor",
                      "set", "kind", "chip", "protocol", "measured_us", "simulated_us", "error",
                      "wall_s", "kernel");
  int skipped = 0, errors = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& an = set.anchors[i];
    const auto& r = runs[i];
    json j = {{"name", an.name},
              {"set", an.set},
              {"family", an.family},
              {"group", an.group},
              {"kind", an.kind},
              {"kernel", shown_kernel(an)},
              {"spec", driver::anchor_spec(an, o.corpus)},
              {"variant", an.variant},
              {"params", params_json(an.params)},
              {"chip", r.chip},
              {"measured_us", an.measured_us},
              {"status", r.status}};
    std::string kernel = shown_kernel(an);
    if (!an.variant.empty()) kernel += fmt::format(" [{}]", an.variant);
    if (!an.params.empty()) kernel += fmt::format(" {}", params_text(an.params));
    if (r.status == "ok") {
      j["simulated_us"] = r.simulated_us;
      j["kernel_us"] = r.kernel_us;
      j["launch_us"] = r.launch_us;
      j["cycles"] = r.cycles;
      j["error_pct"] = r.error_pct;
      for (const auto& v : r.others) {
        json jv = {{"variant", v.name}};
        if (v.error.empty()) {
          jv["simulated_us"] = v.simulated_us;
          kernel += fmt::format("; {} lowering {:.1f} us", v.name, v.simulated_us);
        } else {
          jv["error"] = v.error;
          kernel += fmt::format("; {} lowering rejected: {}", v.name, v.error);
        }
        j["other_variants"].push_back(jv);
      }
      text +=
          fmt::format("  {:<24} {:<11} {:<8} {:<4} {:<9} {:>12.1f} {:>13.1f} {:>9} {:>7.1f}  {}\n",
                      an.name, an.set, an.kind, r.chip, protocol_short(an.protocol), an.measured_us,
                      r.simulated_us, pct(r.error_pct), r.wall_s, kernel);
    } else {
      j["note"] = r.note;
      (r.status == "skipped" ? skipped : errors)++;
      text +=
          fmt::format("  {:<24} {:<11} {:<8} {:<4} {:<9} {:>12.1f} {:>13} {:>9} {:>7.1f}  {}: {}\n",
                      an.name, an.set, an.kind, r.chip, protocol_short(an.protocol), an.measured_us,
                      "-", r.status, r.wall_s, kernel, r.note);
    }
    j["wall_s"] = r.wall_s;
    j["source"] = an.source;
    j["citation"] = an.citation;
    if (!an.note.empty()) j["detail"] = an.note;  // "note" says why a run is not ok
    j["protocol"] = protocol_json(an.protocol);
    out["anchors"].push_back(j);
  }
  out["summary"] = {{"all", summary_json(all)},
                    {"measured", summary_json(measured)},
                    {"calibration", summary_json(calibration)},
                    {"validation", summary_json(validation)}};
  out["skipped"] = skipped;
  out["errors"] = errors;
  out["wall_s"] = wall;
  text += summary_line("all anchors", all) + "\n";
  text += summary_line("measured only", measured) + "\n";
  text += summary_line("calibration set", calibration) + "\n";
  text += summary_line("validation set (never fitted on)", validation) + "\n";
  text += sources_text(set);
  std::vector<std::string> chips;
  if (!a.chip.empty()) {
    chips.push_back(a.chip);
  } else {
    chips = chip_names();
    for (const auto& an : set.anchors)
      if (!an.chip.empty() && std::find(chips.begin(), chips.end(), an.chip) == chips.end())
        chips.push_back(an.chip);
  }
  out["parameters"] = json::array();
  text += fmt::format(
      "parameters and their basis (cited / microbenchmark / fit: anchors / "
      "assumed from CHIP / estimate):\n");
  for (const auto& chip : chips)
    for (const auto& p : driver::parameter_sources(chip)) {
      out["parameters"].push_back({{"name", p.name},
                                   {"value", p.value},
                                   {"unit", p.unit},
                                   {"chip", p.chip},
                                   {"source", p.basis},
                                   {"conf", p.conf},
                                   {"detail", p.detail}});
      text += fmt::format("  {:<4} {:<36} {:>12g} {:<14} {}  {}\n", p.chip, p.name, p.value, p.unit,
                          p.conf, p.basis);
    }
  if (skipped || errors)
    text += fmt::format("{} skipped, {} failed (see the rows above)\n", skipped, errors);
  text += fmt::format("wall time {:.1f} s (-j {})\n", wall, o.jobs);
  return print_report(text, out, a.json);
}

int cmd_calibrate(const CalibrateArgs& a) {
  namespace fs = std::filesystem;
  const auto t0 = std::chrono::steady_clock::now();
  if (a.measurements.empty())
    throw driver::ParamError{
        "calibrate needs --measurements FILE (a CSV of kernel, params, measured_us; or an "
        "anchors file such as configs/fidelity.json)"};
  try {
    prof::check_outputs({prof::OutputSpec("-o", a.output)},
                        {{"--chip", chip_config_path(a.chip)}, {"--measurements", a.measurements}});
  } catch (const std::runtime_error& e) {
    throw driver::ParamError{e.what()};
  }
  driver::CalibrationRequest req;
  req.chip = a.chip;
  for (const auto& f : a.fit) {
    // --fit a,b,c and --fit a --fit b alike.
    size_t start = 0;
    while (start <= f.size()) {
      size_t comma = f.find(',', start);
      std::string key =
          f.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!key.empty()) req.fit.push_back(key);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  req.measurements = load(a.measurements, a.only);
  req.measurements_name = fs::path(a.measurements).filename().string();
  req.corpus = driver::corpus_dir(req.measurements, a.corpus);
  req.ranges_path = a.ranges;
  if (!a.output.empty()) req.output_name = fs::path(a.output).stem().string();
  req.jobs = default_jobs(a.jobs);
  req.max_evals = a.max_evals;
  req.leave_one_out = !a.no_loo;
  req.leave_one_family_out = !a.no_loo;
  req.fast_forward = !a.exact;
  req.progress = [](const std::string& line) { std::cerr << "calibrate: " << line << "\n"; };
  auto res = driver::calibrate(req);
  if (!a.output.empty()) {
    try {
      prof::write_file_atomic(a.output, res.config.dump(2) + "\n");
    } catch (const std::runtime_error& e) {
      throw driver::ParamError{e.what()};
    }
  }
  const double wall = elapsed_s(t0);
  const auto& ms = req.measurements.anchors;

  json out;
  out["measurements"] = a.measurements;
  out["chip"] = a.chip;
  out["method"] = res.method;
  out["params"] = json::array();
  std::string text = fmt::format("tilepipe calibrate: {} measurements of {}, starting from {}\n",
                                 ms.size(), a.measurements, a.chip);
  text += fmt::format("  {:<28} {:>21} {:>10} {:>10}\n", "parameter", "range", "before", "after");
  for (const auto& p : res.params) {
    out["params"].push_back({{"key", p.key},
                             {"range", {p.range.lo, p.range.hi}},
                             {"range_source", p.range.source},
                             {"before", p.start},
                             {"after", p.value}});
    text += fmt::format("  {:<28} {:>21} {:>10.6g} {:>10.6g}\n", p.key,
                        fmt::format("[{:g}, {:g}]", p.range.lo, p.range.hi), p.start, p.value);
  }
  out["measurements_table"] = json::array();
  text +=
      fmt::format("  {:<24} {:>12} {:>12} {:>9} {:>12} {:>9} {:>12} {:>9}\n", "measurement",
                  "measured_us", "before_us", "error", "after_us", "error", "loo_us", "loo_err");
  double loo_sum = 0, loo_max = 0, before_sum = 0, after_sum = 0;
  int loo_n = 0, used_n = 0;
  std::string loo_max_name;
  double val_before = 0, val_after = 0;
  int val_n = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    json j = driver::calibration_row(ms[i], res, i);
    if (res.before[i].status != "ok") {
      text += fmt::format("  {:<24} {:>12.1f}  not used: {}: {}\n", ms[i].name, ms[i].measured_us,
                          res.before[i].status, res.before[i].note);
      out["measurements_table"].push_back(j);
      continue;
    }
    if (!res.used[i]) {  // a validation measurement: simulated, never fitted on
      ++val_n;
      val_before += std::fabs(res.before[i].error_pct);
      val_after += std::fabs(res.after[i].error_pct);
      text += fmt::format("  {:<24} {:>12.1f} {:>12.1f} {:>9} {:>12.1f} {:>9}   validation\n",
                          ms[i].name, ms[i].measured_us, res.before[i].simulated_us,
                          pct(res.before[i].error_pct), res.after[i].simulated_us,
                          pct(res.after[i].error_pct));
      out["measurements_table"].push_back(j);
      continue;
    }
    ++used_n;
    before_sum += std::fabs(res.before[i].error_pct);
    after_sum += std::fabs(res.after[i].error_pct);
    if (!std::isnan(res.loo_error_pct[i])) {
      j["loo_params"] = res.loo_values[i];
      ++loo_n;
      loo_sum += std::fabs(res.loo_error_pct[i]);
      if (std::fabs(res.loo_error_pct[i]) >= loo_max) {
        loo_max = std::fabs(res.loo_error_pct[i]);
        loo_max_name = ms[i].name;
      }
    }
    text +=
        fmt::format("  {:<24} {:>12.1f} {:>12.1f} {:>9} {:>12.1f} {:>9} {:>12} {:>9}\n", ms[i].name,
                    ms[i].measured_us, res.before[i].simulated_us, pct(res.before[i].error_pct),
                    res.after[i].simulated_us, pct(res.after[i].error_pct),
                    std::isnan(res.loo_us[i]) ? "-" : fmt::format("{:.1f}", res.loo_us[i]),
                    pct(res.loo_error_pct[i]));
    out["measurements_table"].push_back(j);
  }
  double wsum = 0;
  for (size_t i = 0; i < ms.size(); ++i)
    if (res.used[i]) wsum += ms[i].weight;
  const double rms_before = wsum > 0 ? std::sqrt(res.loss_before / wsum) : 0;
  const double rms_after = wsum > 0 ? std::sqrt(res.loss_after / wsum) : 0;
  out["rms_log_error_before"] = rms_before;
  out["rms_log_error_after"] = rms_after;
  out["mean_abs_error_pct_before"] = used_n ? before_sum / used_n : 0.0;
  out["mean_abs_error_pct_after"] = used_n ? after_sum / used_n : 0.0;
  if (loo_n) {
    out["loo_mean_abs_error_pct"] = loo_sum / loo_n;
    out["loo_max_abs_error_pct"] = loo_max;
  }
  out["evaluations"] = res.evaluations;
  out["simulations"] = res.simulations;
  out["output"] = a.output.empty() ? json(nullptr) : json(a.output);
  out["config"] = res.config;
  out["wall_s"] = wall;
  text += fmt::format(
      "rms log error {:.3g} -> {:.3g} (mean |error| {:.1f} % -> {:.1f} % over {} measurements)\n",
      rms_before, rms_after, used_n ? before_sum / used_n : 0.0, used_n ? after_sum / used_n : 0.0,
      used_n);
  if (loo_n)
    text += fmt::format("leave-one-out: mean |error| {:.1f} %, max {:.1f} % ({})\n",
                        loo_sum / loo_n, loo_max, loo_max_name);
  if (val_n) {
    out["validation_mean_abs_error_pct_before"] = val_before / val_n;
    out["validation_mean_abs_error_pct_after"] = val_after / val_n;
    text += fmt::format(
        "validation (never fitted on): mean |error| {:.1f} % -> {:.1f} % over {} measurements\n",
        val_before / val_n, val_after / val_n, val_n);
  }
  out["leave_one_family_out"] = driver::family_rows(req.measurements, res);
  for (const auto& f : res.families) {
    std::string errs;
    for (size_t k = 0; k < f.members.size(); ++k)
      errs += fmt::format("{}{} {}", k ? ", " : "", ms[f.members[k]].name, pct(f.error_pct[k]));
    text += fmt::format("leave-one-family-out: without {}: mean |error| {} ({}){}\n", f.family,
                        std::isnan(f.mean_abs_pct) ? "-" : fmt::format("{:.1f} %", f.mean_abs_pct),
                        errs,
                        f.determined ? ""
                                     : "; the other families do not move the parameters: this "
                                       "family alone determines them");
  }
  if (res.families.empty())
    text += "leave-one-family-out: not computed (the calibration measurements are one family)\n";
  text +=
      fmt::format("{} configs evaluated by the fit ({}), {} kernel runs in all, {:.1f} s; {}\n",
                  res.evaluations, res.method, res.simulations, wall,
                  a.output.empty() ? "no config written (-o FILE writes it)" : "wrote " + a.output);
  return print_report(text, out, a.json);
}

}  // namespace tilepipe::cli

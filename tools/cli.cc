// The `tilepipe` command line (contract: docs/cli.md). Exit codes: 0 success, 1 internal
// error, 2 bad input (flags, parameters, configs, programs), 3 `check` found a problem.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli.h"

#include "advise_cmds.h"
#include "check_syncs.h"
#include "cli_parse.h"
#include "fidelity_cmds.h"
#include "outputs.h"
#include "progress.h"
#include "tilepipe/chip.h"
#include "tilepipe/driver.h"
#include "tilepipe/ir.h"
#include "tilepipe/lang.h"
#include "tilepipe/prof.h"
#include "tilepipe/verify.h"

namespace {

using namespace tilepipe;
using json = nlohmann::ordered_json;
using namespace tilepipe::cli;

/// A bad command line: reported as one line, exit 2.
class UsageError : public InputError {
 public:
  explicit UsageError(std::string message) : InputError("usage", std::move(message)) {}
};

struct RunArgs {
  std::string kernel;
  std::string variant;
  std::string chip = "a3";
  std::string mode = "functional";
  std::vector<std::string> params;
  std::string seed = "1";
  std::string inputs;
  std::string max_cycles = "1e13";
  std::string max_wall_s;
  bool json = false;
  bool print_ir = false;
  bool exact = false;
  bool no_check = false;
  bool werror = false;
  std::vector<std::string> print_after;
  bool print_after_all = false;
  std::vector<std::string> no_pass;
  std::vector<std::string> with_pass;
  std::string trace;
  std::string trace_window;
  std::string trace_cores;
  std::string csv_dir;
  bool lines = false;
};

void add_run_options(CLI::App* cmd, RunArgs& a, bool with_mode) {
  cmd->add_option("kernel", a.kernel, "kernel name (see `tilepipe list`)")->required();
  cmd->add_option("--variant", a.variant, "kernel variant (default: the kernel's first)");
  cmd->add_option("--chip", a.chip, "chip config: a2, a3, or a path to a .json file");
  if (with_mode)
    cmd->add_option("--mode", a.mode, "timing (fast, no values) or functional (values + check)")
        ->check(CLI::IsMember({"timing", "functional"}));
  cmd->add_option("--param", a.params, "kernel parameter k=v (repeatable)");
  cmd->add_option("--seed", a.seed, "seed of the generated inputs (0 .. 2^64-1)");
  cmd->add_option("--inputs", a.inputs,
                  "the kernel's arrays by parameter name: a NumPy .npz (np.savez), instead of "
                  "generated ones");
  cmd->add_option("--max-cycles", a.max_cycles,
                  "stop a run that passes this many cycles (> 0, default 1e13)");
  cmd->add_option("--max-wall-s", a.max_wall_s,
                  "stop a simulation that runs longer than this many seconds (default: no limit)");
  cmd->add_flag("--json", a.json, "print one JSON object on stdout");
  cmd->add_flag("--print-ir", a.print_ir, "print the kernel's tile IR on stderr");
  if (with_mode) {
    cmd->add_flag("--exact", a.exact,
                  "simulate every loop iteration (timing mode otherwise skips steady ones)");
    cmd->add_flag("--no-check", a.no_check,
                  "functional mode: skip the race detector (faster; TILEPIPE_NO_CHECK=1 does the "
                  "same); flags and deadlocks are always checked");
  }
  cmd->add_flag("--warnings-as-errors", a.werror,
                "treat the verifier's warnings (hardware hazards) as errors; TILEPIPE_WERROR=1 "
                "does the same");
  cmd->add_option("--print-after", a.print_after, "print the IR after this pass on stderr");
  cmd->add_flag("--print-after-all", a.print_after_all, "print the IR after every pass");
  cmd->add_option("--no-pass", a.no_pass,
                  "switch an automatic-mode pass off, e.g. l1_residency (repeatable)");
  cmd->add_option("--pass", a.with_pass,
                  "switch a pass on that is off by default, e.g. cross_drains (repeatable)");
  cmd->add_option("--trace", a.trace,
                  "write a trace of the run to this file: Perfetto protobuf if it ends in "
                  ".pftrace or .perfetto-trace, else Chrome trace JSON (gzip'd if .gz)");
  cmd->add_option("--trace-window", a.trace_window,
                  "trace only events overlapping START:END (cycles, or us with a 'us' suffix)");
  cmd->add_option("--trace-cores", a.trace_cores,
                  "trace only these AI cores, e.g. 0,5-7 (default: all)");
  cmd->add_option("--csv-dir", a.csv_dir,
                  "write pipe_utilization.csv and code_exe.csv into this directory");
  cmd->add_flag("--lines", a.lines,
                "every cycle of the kernel given to a source line: the table on stderr, "
                "`lines` in the JSON (simulates every iteration)");
}

prof::TraceOptions trace_options(const RunArgs& a, const ChipConfig& chip) {
  prof::TraceOptions t;
  for (const auto& [flag, value] :
       {std::pair{"--trace-window", &a.trace_window}, std::pair{"--trace-cores", &a.trace_cores}})
    if (!value->empty() && a.trace.empty())
      throw UsageError{
          fmt::format("{} selects what a trace records: add --trace FILE, e.g. "
                      "--trace out/trace.json.gz",
                      flag)};
  if (!a.trace_window.empty())
    std::tie(t.window_begin, t.window_end) =
        cli::parse_trace_window(a.trace_window, chip.clock_mhz);
  if (!a.trace_cores.empty()) t.ai_cores = cli::parse_core_list(a.trace_cores, chip.ai_cores);
  return t;
}

std::map<std::string, std::string> parse_params(const std::vector<std::string>& raw) {
  std::map<std::string, std::string> out;
  for (const auto& kv : raw) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError{fmt::format("--param '{}': expected NAME=VALUE, e.g. --param M=256", kv)};
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

void write_output(const std::string& path, const std::string& content) {
  try {
    prof::write_file_atomic(path, content);
  } catch (const std::runtime_error& e) {
    throw UsageError{e.what()};
  }
}

int cmd_list(bool as_json) {
  json out = {{"kernels", json::array()}};
  for (const auto& k : driver::kernels()) {
    json params = json::array();
    for (const auto& p : k.params)
      params.push_back(
          {{"name", p.name}, {"default", p.def}, {"min", p.min}, {"max", p.max}, {"help", p.help}});
    out["kernels"].push_back(
        {{"name", k.name}, {"summary", k.summary}, {"variants", k.variants}, {"params", params}});
  }
  // The chips --chip NAME accepts and where they were found (docs/cli.md, "--chip").
  out["chips"] = chip_names();
  out["configs"] = config_dir();
  if (as_json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const auto& k : driver::kernels()) {
    std::cout << fmt::format("{:<12} {}\n", k.name, k.summary);
    std::cout << fmt::format("{:<12} variants: {}\n", "", fmt::join(k.variants, ", "));
    for (const auto& p : k.params)
      std::cout << fmt::format("{:<12}   {}={} [{}..{}] {}\n", "", p.name, p.def, p.min, p.max,
                               p.help);
  }
  std::cout << fmt::format("chips: {} (in {})\n", fmt::join(chip_names(), ", "), config_dir());
  return 0;
}

/// check: a program error found at run time (race, deadlock, flag misuse) is a finding.
int report_check_failure(const driver::SimFailure& e, bool as_json, json out) {
  out["ok"] = false;
  out["errors"] = json::array();
  for (const auto& d : e.diagnostics())
    out["errors"].push_back({{"kind", d.kind}, {"where", d.loc.str()}, {"message", d.message}});
  std::cerr << e.what() << "\n";
  if (as_json) std::cout << out.dump(2) << "\n";
  return kExitCheckFailed;
}

int cmd_run(const RunArgs& a, bool is_check, const cli::SyncArgs* sync = nullptr) {
  const driver::KernelSource k = driver::find_kernel(a.kernel);
  driver::RunRequest req;
  req.variant = a.variant;
  req.params = driver::resolve_params(k, parse_params(a.params));
  req.mode = (is_check || a.mode == "functional") ? sim::Mode::Functional : sim::Mode::Timing;
  req.seed = cli::parse_seed(a.seed);
  req.given_inputs = cli::given_inputs(a.inputs);
  req.max_cycles = cli::parse_max_cycles(a.max_cycles);
  if (!a.max_wall_s.empty()) req.max_wall_s = cli::parse_max_wall_s(a.max_wall_s);
  if (!a.trace.empty())
    if (std::string why = prof::trace_name_problem(a.trace); !why.empty())
      throw UsageError{fmt::format("--trace '{}': {}", a.trace, why)};
  cli::check_outputs(
      {{"--trace", a.trace}, {"--csv-dir", a.csv_dir, {"pipe_utilization.csv", "code_exe.csv"}}},
      a.chip);
  // Functional runs are checked for races by default, as `check` does: a run that prints
  // its result has been checked (timing mode has no values and fast-forwards; flags and
  // deadlocks are checked in every mode).
  req.detect_races =
      is_check || (req.mode == sim::Mode::Functional && !a.no_check && !cli::no_check_env());
  req.fast_forward.enabled = !a.exact;
  req.print.after = {a.print_after.begin(), a.print_after.end()};
  req.print.after_all = a.print_after_all;
  req.no_pass = a.no_pass;
  req.with_pass = a.with_pass;
  req.warnings_as_errors = a.werror;
  ChipConfig chip = load_chip_config(a.chip);
  prof::TraceOptions topts = trace_options(a, chip);
  std::unique_ptr<prof::TraceWriter> trace;
  if (!a.trace.empty()) {
    try {
      trace = std::make_unique<prof::TraceWriter>(a.trace, topts, chip);
    } catch (const std::runtime_error& e) {
      throw UsageError{e.what()};
    }
    req.on_lowered = [&](const lower::LoweredProgram& p) { trace->bind(p); };
  }
  prof::Recorder recorder(trace.get(), a.lines);
  // Per-event recording (trace, per-line CSV and cycles) needs every iteration simulated,
  // except that a trace window alone lets the iterations outside it be fast-forwarded.
  if (trace || !a.csv_dir.empty() || a.lines) req.observer = &recorder;
  if (trace && a.csv_dir.empty() && !a.lines) {
    req.fast_forward.observed_from = topts.window_begin;
    req.fast_forward.observed_to = topts.window_end;
  }
  std::unique_ptr<cli::Progress> progress;
  if (!(sync && sync->any())) {
    // The estimate costs a walk of the program: only a terminal's bar shows it.
    progress = std::make_unique<cli::Progress>(
        cli::Progress::on_terminal() ? driver::estimate_cycles(k, req, chip) : 0,
        req.mode == sim::Mode::Functional);
    req.progress = [&](double cycles) { progress->update(cycles); };
  }

  json out = driver::run_header(k, driver::resolve_variant(k, a.variant), req, chip);

  driver::RunReport rep;
  try {
    if (sync && sync->any()) return cli::run_sync_command(*sync, k, req, chip, a.json, out);
    rep = driver::run_kernel(k, req, chip);
  } catch (const driver::SimFailure& e) {
    // A finding exits 3 under run too (the checks are on by default); a budget or an
    // interrupted run stays what it was.
    if (!is_check && e.kind() != ErrorKind::CheckFinding) throw;
    return report_check_failure(e, a.json, out);
  }
  progress.reset();  // clears the bar before the results are printed
  for (const auto& w : rep.warnings) std::cerr << w.str() << "\n";
  if (a.print_ir) std::cerr << ir::print(rep.program);

  prof::Summary summary = prof::summarize(rep.sim, rep.lowered, chip);
  std::optional<prof::LineAttribution> lines;
  if (a.lines) lines = recorder.attribute_lines(rep.sim, chip.launch_cycles());
  out = driver::run_json(k, rep, req, chip, summary, lines ? &*lines : nullptr);
  const std::string lines_text = lines ? prof::to_text(*lines) : "";
  out["races_checked"] = req.detect_races;
  if (is_check) out["ok"] = !rep.checked || rep.correct;

  if (trace) {
    // A selection that keeps no instruction would write an empty timeline: say why instead.
    if (trace->instructions_kept() == 0 && !(a.trace_window.empty() && a.trace_cores.empty()))
      throw UsageError{fmt::format(
          "{}{}{} selects no instruction: the kernel's instructions run from cycle {:.0f} "
          "(after the {:g} us launch) to cycle {:.0f} ({:.2f} us); choose a window or cores "
          "inside that",
          a.trace_window.empty() ? "" : fmt::format("--trace-window '{}'", a.trace_window),
          !a.trace_window.empty() && !a.trace_cores.empty() ? " with " : "",
          a.trace_cores.empty() ? "" : fmt::format("--trace-cores '{}'", a.trace_cores),
          chip.launch_cycles(), chip.launch_us, rep.sim.cycles,
          rep.sim.cycles * chip.us_per_cycle())};
    try {
      trace->finish(rep.sim, rep.lowered);
    } catch (const std::runtime_error& e) {
      throw UsageError{e.what()};
    }
    out["trace"] = a.trace;
    out["trace_events"] = trace->events();
  }
  if (!a.csv_dir.empty()) {
    write_output(a.csv_dir + "/pipe_utilization.csv", prof::pipe_utilization_csv(rep.sim, chip));
    write_output(a.csv_dir + "/code_exe.csv", prof::code_exe_csv(recorder, chip));
  }
  std::string line =
      fmt::format("{} on {}: {:.0f} cycles ({:.2f} us), bound {}{}",
                  driver::label(k, out["variant"].get<std::string>()), chip.name, rep.sim.cycles,
                  rep.sim.cycles * chip.us_per_cycle(), summary.bound,
                  rep.checked ? fmt::format(", {} (max abs err {:.3g})",
                                            rep.correct ? "correct" : "WRONG", rep.max_abs_err)
                  : is_check  ? ", no race or deadlock (the source has no reference to compare)"
                              : "");
  std::cerr << prof::to_text(summary) << lines_text << cli::inputs_text(rep.inputs);
  if (!rep.correct && rep.checked) line += "\n  first mismatch: " + rep.mismatch;
  print_result(a.json, out, line + "\n");
  if (is_check && rep.checked && !rep.correct) return kExitCheckFailed;
  return 0;
}

struct LadderArgs {
  std::string kernel;
  std::string chip = "a3";
  std::vector<std::string> params;
  int jobs = 0;
  bool json = false;
  bool exact = false;
  std::string html;     // HTML report with per-step profiles and advice
  bool advise = false;  // add per-step advice to the JSON
};

/// One kernel config named on the command line (differential, emit).
struct KernelConfigArgs {
  std::string kernel, variant, chip = "a3";
  std::vector<std::string> params;
};

void add_kernel_config(CLI::App* cmd, KernelConfigArgs& a) {
  cmd->add_option("kernel", a.kernel, "kernel name or FILE.py[:NAME]")->required();
  cmd->add_option("--variant", a.variant, "kernel variant");
  cmd->add_option("--chip", a.chip, "chip config: a2, a3, or a .json path");
  cmd->add_option("--param", a.params, "kernel parameter k=v (repeatable)");
}

struct DifferentialArgs : KernelConfigArgs {
  double tolerance_pct = 0.5;
  bool json = false;
};

/// Fast-forward against exact simulation for one config: exit 3 when the cycles differ by
/// more than the tolerance or an instruction or byte count differs.
int cmd_differential(const DifferentialArgs& a) {
  const driver::KernelSource k = driver::find_kernel(a.kernel);
  ChipConfig chip = load_chip_config(a.chip);
  auto d = driver::run_differential(k, a.variant, parse_params(a.params), chip);
  const double err_pct = 100.0 * d.cycles_err;
  const bool ok = std::abs(err_pct) <= a.tolerance_pct && d.counters.empty();
  json out;
  out["kernel"] = k.name;
  out["variant"] = d.fast.variant;
  out["chip"] = chip.name;
  out["params"] = driver::resolve_params(k, parse_params(a.params));
  out["fast_cycles"] = d.fast.sim.cycles;
  out["exact_cycles"] = d.exact.sim.cycles;
  out["cycles_err_pct"] = err_pct;
  out["tolerance_pct"] = a.tolerance_pct;
  out["jumps"] = d.fast.sim.fast_forward.jumps;
  out["skipped_iterations"] = d.fast.sim.fast_forward.iterations;
  out["counters"] = d.counters.empty() ? "identical" : d.counters;
  out["fast_wall_s"] = d.fast.sim_wall_s;
  out["exact_wall_s"] = d.exact.sim_wall_s;
  out["ok"] = ok;
  std::string line = fmt::format(
      "{} on {}: fast-forward {:.0f} cycles ({} jumps, {} iterations skipped, {:.2f} s), exact "
      "{:.0f} ({:.2f} s): {:+.3f} % (tolerance {} %), counters {}",
      driver::label(k, d.fast.variant), chip.name, d.fast.sim.cycles, d.fast.sim.fast_forward.jumps,
      d.fast.sim.fast_forward.iterations, d.fast.sim_wall_s, d.exact.sim.cycles, d.exact.sim_wall_s,
      err_pct, a.tolerance_pct, d.counters.empty() ? "identical" : d.counters);
  print_result(a.json, out, line + "\n");
  return ok ? 0 : kExitCheckFailed;
}

int cmd_ladder(const LadderArgs& a) {
  const driver::KernelSource k = driver::find_kernel(a.kernel);
  cli::check_outputs({{"--html", a.html}}, a.chip);
  ChipConfig chip = load_chip_config(a.chip);
  int jobs =
      a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto rep = driver::run_ladder(k, parse_params(a.params), chip, jobs, !a.exact);
  json out;
  out["kernel"] = k.name;
  out["chip"] = chip.name;
  out["params"] = rep.params;
  out["reference"] = k.reference_name;
  out["reference_us"] = rep.reference_us;
  out["steps"] = json::array();
  const bool has_ref = rep.reference_us > 0;
  std::string text = has_ref ? fmt::format("{} ladder ({}) on {} (reference: {} = {:.0f} us)\n",
                                           k.name, driver::params_text(rep.params), chip.name,
                                           k.reference_name, rep.reference_us)
                             : fmt::format("{} ladder ({}) on {} (no published reference time)\n",
                                           k.name, driver::params_text(rep.params), chip.name);
  text += fmt::format("  {:<14} {:>8} {:>9} {:>8}  {}\n", "step", "time_us", "speedup", "% ref",
                      "bound");
  for (const auto& s : rep.steps) {
    prof::Summary sum = prof::summarize(s.run.sim, s.run.lowered, chip);
    out["steps"].push_back({{"name", s.name},
                            {"time_us", s.time_us},
                            {"cycles", s.run.sim.cycles},
                            {"speedup_vs_prev", s.speedup_vs_prev},
                            {"pct_of_reference", s.pct_of_reference},
                            {"bound", sum.bound},
                            {"verdict", sum.verdict},
                            {"sim_wall_s", s.run.sim_wall_s},
                            {"skipped_iterations", s.run.sim.fast_forward.iterations}});
    std::string pct = has_ref ? fmt::format("{:.1f}%", s.pct_of_reference) : "-";
    text += fmt::format("  {:<14} {:>8.1f} {:>8.2f}x {:>8}  {} ({})\n", s.name, s.time_us,
                        s.speedup_vs_prev, pct, sum.bound, sum.verdict);
  }
  if (!a.html.empty() || a.advise) {
    json advice = cli::ladder_advice(k, rep, chip, out, a.html, jobs);
    if (a.advise) out["advice"] = advice;
    if (!a.html.empty()) out["html"] = a.html;
  }
  print_result(a.json, out, text);
  return 0;
}

struct EmitArgs : KernelConfigArgs {
  std::string output;
  std::vector<std::string> no_pass;
  std::vector<std::string> with_pass;
  bool json = false;
};

/// The compiled program as an expert-mode Python file (docs/cli.md, "tilepipe emit"): to
/// FILE with -o, else on stdout. A construct with no expert spelling is exit 2, no file.
int cmd_emit(const EmitArgs& a) {
  const driver::KernelSource k = driver::find_kernel(a.kernel);
  if (!a.output.empty()) cli::check_outputs({{"-o", a.output}}, a.chip);
  driver::CompileRequest req;
  req.variant = a.variant;
  req.params = driver::resolve_params(k, parse_params(a.params));
  req.no_pass = a.no_pass;
  req.with_pass = a.with_pass;
  ChipConfig chip = load_chip_config(a.chip);
  const std::string text = driver::emit_expert(k, req, chip);
  json out;
  out["kernel"] = k.name;
  out["variant"] = driver::resolve_variant(k, a.variant);
  out["chip"] = chip.name;
  out["params"] = req.params;
  if (a.output.empty()) {
    if (a.json) out["file"] = text;
    print_result(a.json, out, text);
    return 0;
  }
  write_output(a.output, text);
  out["output"] = a.output;
  out["lines"] = std::count(text.begin(), text.end(), '\n');
  print_result(
      a.json, out,
      fmt::format("{}: wrote {} ({} lines)\n", driver::label(k, out["variant"].get<std::string>()),
                  a.output, out["lines"].get<int64_t>()));
  return 0;
}

std::string one_line(const std::string& s) {
  auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

}  // namespace

bool tilepipe::cli::json_requested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--json") return true;
  return false;
}

int tilepipe::cli::fail(int code, const std::string& message, bool json) {
  std::cerr << message << "\n";
  if (json) std::cout << nlohmann::json{{"error", message}, {"exit_code", code}}.dump() << "\n";
  return code;
}

int tilepipe::cli::main(int argc, char** argv) {
  const bool as_json = json_requested(argc, argv);
  auto fail = [as_json](int code, const std::string& message) {
    return cli::fail(code, message, as_json);
  };
  prof::install_temp_cleanup();
  CLI::App app{"tilepipe: tile-level kernels for Ascend A2/A3, compiled and simulated"};
  app.require_subcommand(1);
  bool list_json = false;
  auto* list = app.add_subcommand("list", "kernels, variants and parameters");
  list->add_flag("--json", list_json, "print one JSON object on stdout");
  RunArgs run_args, check_args;
  auto* run = app.add_subcommand("run", "build, verify, lower and simulate a kernel");
  add_run_options(run, run_args, true);
  auto* check = app.add_subcommand(
      "check", "functional run compared with the reference; exit 3 on mismatch or deadlock");
  add_run_options(check, check_args, false);
  cli::SyncArgs sync_args;
  auto* list_syncs = check->add_flag("--list-syncs", sync_args.list,
                                     "list the sync ops (flags, barriers) of the lowered program");
  auto* drop_sync = check->add_option(
      "--drop-sync", sync_args.drop,
      "drop sync op K (index from --list-syncs; repeatable) and check: race, deadlock, "
      "mismatch or redundant");
  auto* find_redundant = check->add_flag(
      "--find-redundant", sync_args.find_redundant,
      "drop each sync op in turn and list those that can go, with the cycles each costs");
  list_syncs->excludes(drop_sync)->excludes(find_redundant);
  drop_sync->excludes(find_redundant);

  LadderArgs ladder_args;
  auto* ladder = app.add_subcommand("ladder", "run every optimisation step of a kernel family");
  ladder->add_option("kernel", ladder_args.kernel, "kernel with a ladder (fa)")->required();
  ladder->add_option("--chip", ladder_args.chip, "chip config: a2, a3, or a .json path");
  ladder->add_option("--param", ladder_args.params, "kernel parameter k=v (repeatable)");
  ladder->add_option("-j,--jobs", ladder_args.jobs, "steps simulated at once (default: cores)")
      ->check(CLI::Range(1, 256).description("an integer in [1, 256]"));
  ladder->add_flag("--json", ladder_args.json, "print one JSON object on stdout");
  ladder->add_flag("--exact", ladder_args.exact,
                   "simulate every loop iteration (otherwise steady ones are skipped)");
  ladder->add_option("--html", ladder_args.html,
                     "write an HTML report (ladder chart, per-step profile and advice)");
  ladder->add_flag("--advise", ladder_args.advise, "add each step's verified advice to the JSON");

  RunArgs profile_args;
  cli::ProfileArgs prof_extra;
  auto* profile = app.add_subcommand("profile", "run + evidence + verified advice");
  add_run_options(profile, profile_args, true);
  profile_args.mode = "timing";
  profile->add_option("--html", prof_extra.html, "write a self-contained HTML report");
  profile->add_option("--rules", prof_extra.rules, "advice rule table (default: configs/)");
  profile->add_flag("--no-verify", prof_extra.no_verify, "skip the what-if re-simulations");

  cli::TuneArgs tune_args;
  std::vector<std::string> tune_params;
  DifferentialArgs diff_args;
  auto* differential = app.add_subcommand(
      "differential", "time one config with and without fast-forward; exit 3 if they differ");
  add_kernel_config(differential, diff_args);
  differential
      ->add_option("--tolerance-pct", diff_args.tolerance_pct,
                   "largest |fast - exact| / exact in % (default 0.5)")
      // Not CLI::Range: NaN compares false with both bounds and would pass it.
      ->check(CLI::Validator(
          [](std::string& s) {
            char* end = nullptr;
            const double v = std::strtod(s.c_str(), &end);
            return !s.empty() && *end == '\0' && v >= 0 && v <= 100
                       ? std::string()
                       : "expected a percentage in [0, 100], found '" + s + "'";
          },
          "FLOAT in [0, 100]"));
  differential->add_flag("--json", diff_args.json, "print one JSON object on stdout");

  auto* tune = app.add_subcommand("tune", "search kernel parameters for the fastest config");
  tune->add_option("kernel", tune_args.kernel, "kernel name (see `tilepipe list`)")->required();
  tune->add_option("--variant", tune_args.variant, "kernel variant");
  tune->add_option("--chip", tune_args.chip, "chip config: a2, a3, or a .json path");
  tune->add_option("--param", tune_params, "fixed kernel parameter k=v (repeatable)");
  tune->add_option("--space", tune_args.space, "searched parameter k=v1,v2,... (repeatable)");
  tune->add_option("--inputs", tune_args.inputs,
                   "the kernel's arrays by parameter name (.npz), for every config");
  tune->add_option("--strategy", tune_args.strategy, "grid (default) or coord");
  tune->add_option("-j,--jobs", tune_args.jobs, "parallel workers (default: cores)")
      ->check(CLI::Range(1, 256));
  tune->add_option("--max-evals", tune_args.max_evals, "evaluate at most N configs")
      ->check(CLI::Range(1, 1000000));
  tune->add_option("--cache-dir", tune_args.cache_dir,
                   "result cache (default $XDG_CACHE_HOME/tilepipe/tune, else out/.tune-cache)");
  tune->add_flag("--no-cache", tune_args.no_cache, "do not read or write the cache");
  tune->add_option("--html", tune_args.html, "write an HTML report with the heat map");
  tune->add_option("--scheduler", tune_args.scheduler,
                   "simulate the configs on a Dask cluster: its scheduler's address, "
                   "tcp://HOST:PORT (default: local threads)");
  tune->add_flag("--json", tune_args.json, "print one JSON object on stdout");

  cli::FidelityArgs fid_args;
  auto* fidelity = app.add_subcommand(
      "fidelity", "simulate the published on-board anchors and print the errors");
  fidelity->add_option("--anchors", fid_args.anchors,
                       "anchors file (default: fidelity.json in the configs directory)");
  fidelity->add_option("--only", fid_args.only,
                       "anchors whose name or group matches (shell globs; repeatable)");
  fidelity->add_option("--chip", fid_args.chip,
                       "run every anchor on this chip config (default: each anchor's own)");
  fidelity->add_option("--corpus", fid_args.corpus,
                       "TileLang-Ascend examples directory (default: $TILELANG_CORPUS, else the "
                       "anchors file's)");
  fidelity->add_option("-j,--jobs", fid_args.jobs, "anchors simulated at once (default: cores)")
      ->check(CLI::Range(1, 256));
  fidelity->add_flag("--exact", fid_args.exact, "simulate every loop iteration (no fast-forward)");
  fidelity->add_flag("--json", fid_args.json, "print one JSON object on stdout");

  cli::CalibrateArgs cal_args;
  auto* calibrate = app.add_subcommand(
      "calibrate", "fit chip-config parameters to measured times; write the fitted config");
  calibrate
      ->add_option("--measurements", cal_args.measurements,
                   "CSV of measurements (kernel, variant, params, measured_us, ...) or an "
                   "anchors file (.json)")
      ->required();
  calibrate
      ->add_option("--fit", cal_args.fit,
                   "chip-config keys to fit, KEY or KEY=LO:HI, comma-separated or repeated")
      ->required();
  calibrate->add_option("--only", cal_args.only,
                        "measurements whose name or group matches (shell globs; repeatable)");
  calibrate->add_option("--chip", cal_args.chip, "starting chip config: a2, a3, or a .json path");
  calibrate->add_option("-o,--output", cal_args.output, "write the fitted chip config here");
  calibrate->add_option("--corpus", cal_args.corpus, "TileLang-Ascend examples directory");
  calibrate->add_option("--ranges", cal_args.ranges,
                        "fit range table (default: fit_ranges.json in the configs directory)");
  calibrate->add_option("-j,--jobs", cal_args.jobs, "kernels simulated at once (default: cores)")
      ->check(CLI::Range(1, 256));
  calibrate
      ->add_option("--max-evals", cal_args.max_evals,
                   "configs one fit may evaluate (default 30 x (parameters + 1))")
      ->check(CLI::Range(1, 100000));
  calibrate->add_flag("--no-loo", cal_args.no_loo,
                      "skip the leave-one-out and leave-one-family-out refits");
  calibrate->add_flag("--exact", cal_args.exact, "simulate every loop iteration (no fast-forward)");
  calibrate->add_flag("--json", cal_args.json, "print one JSON object on stdout");

  EmitArgs emit_args;
  auto* emit = app.add_subcommand(
      "emit", "write the compiled kernel as a TileLang-Ascend expert-mode Python file");
  add_kernel_config(emit, emit_args);
  emit->add_option("--no-pass", emit_args.no_pass, "switch an automatic-mode pass off");
  emit->add_option("--pass", emit_args.with_pass, "switch a pass on that is off by default");
  emit->add_option("-o,--output", emit_args.output, "write the file here (default: stdout)");
  emit->add_flag("--json", emit_args.json, "print one JSON object on stdout");

  cli::DiffArgs diff_cmd_args;
  std::vector<std::string> diff_params, diff_params_b;
  auto* diff = app.add_subcommand(
      "diff", "compare two reports: A.json B.json, or KERNEL --variant A --variant B");
  diff->add_option("inputs", diff_cmd_args.inputs,
                   "two reports (run/profile --json), or one kernel to run twice")
      ->required();
  diff->add_option("--variant", diff_cmd_args.variants,
                   "kernel: A's variant, then B's (one: both)");
  diff->add_option("--param", diff_params, "kernel: parameter k=v of both runs (repeatable)");
  diff->add_option("--param-b", diff_params_b, "kernel: parameter k=v of run B only (repeatable)");
  diff->add_option("--chip", diff_cmd_args.chip, "kernel: chip config: a2, a3, or a .json path");
  diff->add_option("--html", diff_cmd_args.html, "write a side-by-side HTML page");
  diff->add_flag("--json", diff_cmd_args.json, "print one JSON object on stdout");

  // Listed for --help only: main() hands `run-py` to Python before parsing.
  app.add_subcommand("run-py",
                     "run a TileLang-Ascend Python script: tilepipe run-py FILE.py [args...]")
      ->allow_extras();

  if (argc >= 2 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; }))
      names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end())
      return fail(kExitBadInput, fmt::format("tilepipe: unknown command '{}'; expected one of {} "
                                             "(see `tilepipe --help`)",
                                             argv[1], fmt::join(names, ", ")));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(kExitBadInput, "tilepipe: " + one_line(e.what()) + " (see `tilepipe --help`)");
  }

  try {
    if (list->parsed()) return cmd_list(list_json);
    if (run->parsed()) return cmd_run(run_args, false);
    if (check->parsed()) return cmd_run(check_args, true, &sync_args);
    if (ladder->parsed()) return cmd_ladder(ladder_args);
    if (profile->parsed()) {
      // The run flags profile does not use yet are refused, never silently ignored.
      for (const auto& [flag, given] : {std::pair{"--trace", !profile_args.trace.empty()},
                                        {"--trace-window", !profile_args.trace_window.empty()},
                                        {"--trace-cores", !profile_args.trace_cores.empty()},
                                        {"--csv-dir", !profile_args.csv_dir.empty()},
                                        {"--print-ir", profile_args.print_ir},
                                        {"--print-after", !profile_args.print_after.empty()},
                                        {"--print-after-all", profile_args.print_after_all},
                                        {"--no-pass", !profile_args.no_pass.empty()},
                                        {"--pass", !profile_args.with_pass.empty()},
                                        {"--exact", profile_args.exact}})
        if (given)
          throw UsageError{fmt::format(
              "profile does not take {} yet; use `tilepipe run KERNEL ... {}` for it, and "
              "profile for the summary and advice",
              flag, flag)};
      cli::ProfileArgs pa = prof_extra;
      pa.kernel = profile_args.kernel;
      pa.variant = profile_args.variant;
      pa.chip = profile_args.chip;
      pa.mode = profile_args.mode;
      pa.params = parse_params(profile_args.params);
      pa.seed = cli::parse_seed(profile_args.seed);
      pa.inputs = profile_args.inputs;
      pa.max_cycles = cli::parse_max_cycles(profile_args.max_cycles);
      if (!profile_args.max_wall_s.empty())
        pa.max_wall_s = cli::parse_max_wall_s(profile_args.max_wall_s);
      pa.json = profile_args.json;
      pa.lines = profile_args.lines;
      pa.werror = profile_args.werror;
      return cli::cmd_profile(pa);
    }
    if (differential->parsed()) return cmd_differential(diff_args);
    if (diff->parsed()) {
      diff_cmd_args.params = parse_params(diff_params);
      diff_cmd_args.params_b = parse_params(diff_params_b);
      return cli::cmd_diff(diff_cmd_args);
    }
    if (emit->parsed()) return cmd_emit(emit_args);
    if (fidelity->parsed()) return cli::cmd_fidelity(fid_args);
    if (calibrate->parsed()) return cli::cmd_calibrate(cal_args);
    if (tune->parsed()) {
      tune_args.params = parse_params(tune_params);
      return cli::cmd_tune(tune_args);
    }
  } catch (...) {
    // The one mapping of every layer's errors to exit codes and messages (error.h). A
    // program error a run finds is bad input here (exit 2): cmd_run makes a check finding
    // exit 3 itself, with the verb's JSON.
    ErrorReport r = describe_error(std::current_exception());
    return fail(r.exit_code == kExitCheckFailed ? kExitBadInput : r.exit_code, r.message);
  }
  return 0;
}

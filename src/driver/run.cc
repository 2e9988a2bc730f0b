// Compile (build, verify, passes, lower), run and compare with the reference; the ladder.
#include "tilepipe/driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include "tilepipe/lower.h"
#include "tilepipe/verify.h"

namespace tilepipe::driver {

void compare(const std::vector<double>& out, const std::vector<double>& ref, Tolerance tol,
             const std::string& name, RunReport& rep) {
  if (out.size() != ref.size()) {
    rep.correct = false;
    rep.mismatch = fmt::format("{}: {} values, reference has {}", name, out.size(), ref.size());
    return;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    double err = std::fabs(out[i] - ref[i]);
    if (std::isnan(out[i]) != std::isnan(ref[i])) err = INFINITY;
    double rel = err / std::max(std::fabs(ref[i]), 1e-30);
    rep.max_abs_err = std::max(rep.max_abs_err, err);
    if (std::fabs(ref[i]) > tol.atol) rep.max_rel_err = std::max(rep.max_rel_err, rel);
    if (!(err <= tol.atol + tol.rtol * std::fabs(ref[i])) && rep.correct) {
      rep.correct = false;
      rep.mismatch = fmt::format(
          "{}[{}] = {:.6g}, reference {:.6g} (|diff| {:.3g} > atol {} + "
          "rtol {} * |ref|)",
          name, i, out[i], ref[i], err, tol.atol, tol.rtol);
    }
  }
}

namespace {

bool fits(const KernelSource& k, const Params& p, const std::string& variant,
          const ChipConfig& chip) {
  try {
    for (const auto& d : verify(k.build(p, variant).program, chip))
      if (d.kind == "capacity") return false;
    return true;
  } catch (...) {  // ParamError, BuildError: not a configuration that fits
    return false;
  }
}

/// A capacity error of a program that declares a pipeline-stages knob (ir::Knob, role
/// "pipeline_stages") among the kernel's parameters: the hint names the largest value of
/// that parameter that fits (binary search over build + verify, no simulation). Kernels
/// without such a knob keep the verifier's hint, which names no parameter.
UserError with_stages_hint(const UserError& e, const KernelSource& k, const ir::Program& prog,
                           const CompileRequest& req, const std::string& variant,
                           const ChipConfig& chip) {
  const Params& params = req.params;
  auto diags = e.diagnostics();
  auto cap = std::find_if(diags.begin(), diags.end(),
                          [](const Diagnostic& d) { return d.kind == "capacity"; });
  auto knob = std::find_if(prog.knobs.begin(), prog.knobs.end(), [&](const ir::Knob& kn) {
    return kn.role == "pipeline_stages" && params.count(kn.param);
  });
  if (cap == diags.end() || knob == prog.knobs.end()) return e;
  const std::string& name = knob->param;
  int64_t lo = 0, hi = knob->value;  // fits(lo) (0 = none found), !fits(hi)
  if (hi <= 1) return e;
  Params p = params;
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    p[name] = mid;
    (fits(k, p, variant, chip) ? lo : hi) = mid;
  }
  if (lo >= 1)
    cap->hint =
        fmt::format("use --param {}={} (the largest that fits), or smaller blocks", name, lo);
  return UserError(std::move(diags));
}

}  // namespace

Compiled compile(const KernelSource& k, const CompileRequest& req, const ChipConfig& chip) {
  Compiled c;
  c.variant = resolve_variant(k, req.variant);
  Built built = k.build(req.params, c.variant);
  c.source = std::move(built.program);
  if (req.edit_source) req.edit_source(c.source);
  c.pass_options = built.pass_options.value_or(req.pass_options);
  for (const auto& name : req.with_pass) passes::switch_pass(c.pass_options, name, true);
  for (const auto& name : req.no_pass) passes::switch_pass(c.pass_options, name, false);
  try {
    VerifyOptions vo = passes::verify_options(c.pass_options);
    VerifyResult source = verify_all(c.source, chip, vo);
    if (auto errors = source.errors(); !errors.empty()) throw UserError(std::move(errors));
    c.warnings = source.warnings();
    c.program = passes::run_passes(c.source, chip, c.pass_options, req.print);
    // The copies the passes made from the author's code (a Parallel loop's) are the
    // author's too; the flags they placed are checked by construction.
    vo.capacity = vo.event_id_range = true;
    vo.branch_sync = false;
    for (auto& w : verify_all(c.program, chip, vo).warnings())
      if (std::none_of(c.warnings.begin(), c.warnings.end(), [&](const Diagnostic& d) {
            return d.loc == w.loc && d.kind == w.kind && d.message == w.message;
          }))
        c.warnings.push_back(std::move(w));
  } catch (const UserError& e) {
    throw with_stages_hint(e, k, c.source, req, c.variant, chip);
  }
  if (!c.warnings.empty() && (req.warnings_as_errors || werror_from_env()))
    throw UserError(as_errors(c.warnings));
  c.lowered = lower::lower(c.program, chip);
  return c;
}

RunReport run_kernel(const KernelSource& k, const RunRequest& req, const ChipConfig& chip) {
  return run_compiled(k, compile(k, req, chip), req, chip);
}

RunReport run_compiled(const KernelSource& k, const Compiled& c, const RunRequest& req,
                       const ChipConfig& chip) {
  RunReport rep;
  rep.variant = c.variant;
  rep.warnings = c.warnings;
  rep.source = c.source;
  rep.program = c.program;
  rep.lowered = c.lowered;
  if (req.mutate) req.mutate(rep.lowered);
  if (req.on_lowered) req.on_lowered(rep.lowered);

  rep.inputs = inputs_report(k, req, rep.program);

  sim::HostData io;
  // Timing mode needs the values of what scalar loads read (index / page tables).
  bool loads = false;
  for (const auto& g : rep.lowered.gm) loads = loads || g.scalar_read;
  if (req.given_inputs) {
    io = host_inputs(*req.given_inputs, c.source, k.name);  // checked in every mode
  } else if (req.mode == sim::Mode::Functional || loads) {
    if (req.inputs)
      io = std::move(*req.inputs);
    else if (k.inputs)
      io = k.inputs(req.params, req.seed);
  }
  sim::HostData in = k.reference && req.mode == sim::Mode::Functional ? io : sim::HostData{};
  sim::SimOptions opts;
  opts.mode = req.mode;
  opts.max_cycles = req.max_cycles;
  opts.max_wall_s = req.max_wall_s;
  opts.cancel = req.cancel;
  opts.observer = req.observer;
  opts.detect_races = req.detect_races;
  opts.whatif_no_barriers = req.whatif_no_barriers;
  opts.whatif_free_sites = req.whatif_free_sites;
  opts.lower_bound_only = req.lower_bound_only;
  opts.fast_forward = req.fast_forward;
  opts.progress = req.progress;
  opts.write_back = req.write_back;
  opts.raw_inputs = req.raw_inputs;
  opts.raw_outputs = req.raw_outputs;
  auto t0 = std::chrono::steady_clock::now();
  try {
    rep.sim = sim::simulate(rep.lowered, chip, &io, opts);
  } catch (const SimFailure&) {
    throw;
  } catch (const UserError& e) {
    throw SimFailure(e);
  }
  rep.sim_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (req.mode != sim::Mode::Functional) return rep;
  if (k.reference) {
    rep.checked = true;
    rep.correct = true;
    for (const auto& [name, ref] : k.reference(req.params, rep.variant, in)) {
      compare(io.at(name), ref, k.tol, name, rep);
      if (req.write_back.empty()) rep.outputs[name] = io.at(name);
    }
  }
  // The tensors asked for (64-bit integer ones asked for as bytes are in req.raw_outputs),
  // else without a reference every GM tensor but the workspaces: the run's result
  // (compared bit for bit by sync mutation).
  auto wanted = [&](const std::string& name) {
    if (!req.write_back.empty()) return true;  // the simulator wrote back only those
    return !k.reference && std::any_of(rep.program.params.begin(), rep.program.params.end(),
                                       [&](const ir::Buffer& b) { return b->name == name; });
  };
  for (auto& [name, vals] : io)
    if (wanted(name)) rep.outputs[name] = std::move(vals);
  return rep;
}

double estimate_cycles(const KernelSource& k, RunRequest req, const ChipConfig& chip) {
  req.mode = sim::Mode::Timing;
  req.lower_bound_only = true;
  req.observer = nullptr;
  req.on_lowered = {};
  req.detect_races = false;
  req.print = {};
  try {
    return run_kernel(k, req, chip).sim.cycles;
  } catch (const UserError&) {
    return 0;  // the run itself reports the error
  }
}

nlohmann::ordered_json warnings_json(const std::vector<Diagnostic>& w) {
  auto out = nlohmann::ordered_json::array();
  for (const auto& d : w)
    out.push_back({{"file", d.loc.file},
                   {"line", d.loc.line},
                   {"kind", d.kind},
                   {"message", d.message},
                   {"fix", d.hint}});
  return out;
}

std::string first_reason(const UserError& e) {
  if (e.diagnostics().empty()) return e.what();
  const auto& d = e.diagnostics().front();
  return fmt::format("{} at {}: {}", d.kind, d.loc.str(), d.message);
}

void for_each_parallel(size_t n, int jobs, const std::function<void(size_t)>& task) {
  std::vector<std::exception_ptr> errors(n);
  size_t next = 0;
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= n) return;
        i = next++;
      }
      try {
        task(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < std::max(1, jobs); ++j) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

LadderReport run_ladder(const KernelSource& k, const RawParams& raw, const ChipConfig& chip,
                        int jobs, bool fast_forward) {
  if (k.ladder.empty()) {
    std::vector<std::string> with;
    for (const auto& other : kernels())
      if (!other.ladder.empty()) with.push_back(other.name);
    throw ParamError{fmt::format("kernel '{}' has no optimisation ladder; kernels with one: {}",
                                 k.name, fmt::join(with, ", "))};
  }
  std::map<std::string, std::string> merged;
  for (const auto& [name, v] : k.ladder_defaults) merged[name] = std::to_string(v);
  for (const auto& [name, v] : raw) merged[name] = v;
  LadderReport rep;
  rep.params = resolve_params(k, merged);
  rep.reference_us = k.reference_us ? k.reference_us(rep.params) : -1;
  rep.steps.resize(k.ladder.size());

  // Steps are independent simulations: run them on worker threads, each writing its slot.
  for_each_parallel(k.ladder.size(), jobs, [&](size_t i) {
    RunRequest req;
    req.variant = k.ladder[i];
    req.params = rep.params;
    req.mode = sim::Mode::Timing;
    req.fast_forward.enabled = fast_forward;
    rep.steps[i].name = k.ladder[i];
    rep.steps[i].run = run_kernel(k, req, chip);
  });

  for (size_t i = 0; i < rep.steps.size(); ++i) {
    auto& s = rep.steps[i];
    s.time_us = s.run.sim.cycles * chip.us_per_cycle();
    if (i > 0) s.speedup_vs_prev = rep.steps[i - 1].time_us / s.time_us;
    if (rep.reference_us > 0) s.pct_of_reference = 100.0 * rep.reference_us / s.time_us;
  }
  return rep;
}

}  // namespace tilepipe::driver

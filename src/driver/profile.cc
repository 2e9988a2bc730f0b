// Profile (run + evidence + verified advice), its JSON and HTML report, and the tuner's
// callbacks: what-ifs and tuning configs are compiled and simulated like any run.
#include "tilepipe/driver.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "tilepipe/lang.h"
#include "tilepipe/loop_edits.h"

namespace tilepipe::driver {
namespace {

std::map<std::string, std::string> raw_params(const Params& p) {
  std::map<std::string, std::string> raw;
  for (const auto& [n, v] : p) raw[n] = std::to_string(v);
  return raw;
}

/// Halves the costs of one pipe (the "pipe made faster" what-if).
void speed_up(ChipConfig& c, const std::string& pipe) {
  if (pipe == "V") {
    c.vector_simple_cycles_per_repeat /= 2;
    c.vector_reduce_cycles_per_repeat /= 2;
    c.vector_transcendental_elems_per_cycle *= 2;
  } else if (pipe == "M") {
    c.cube_fractals_per_cycle *= 2;
  } else if (pipe == "MTE2") {
    c.mte2_bw_l2 *= 2;
    c.mte2_bw_hbm *= 2;
    c.hbm_bw *= 2;
    c.l2_bw *= 2;
  } else if (pipe == "MTE3") {
    c.mte3_bw *= 2;
  } else if (pipe == "FIX") {
    c.fix_bw *= 2;
  } else if (pipe == "MTE1") {
    c.mte1_bw_l0a *= 2;
    c.mte1_bw_l0b *= 2;
  }
}

/// The given arrays' names, shapes and values, hashed: a tuning cache key's part for them.
std::string inputs_digest(const GivenInputs& in) {
  std::ostringstream s;
  s.precision(17);
  for (const auto& [name, a] : in.arrays) {
    s << name << ":" << a.dtype;
    for (auto d : a.shape) s << "," << d;
    for (double v : a.values) s << " " << v;
    s << "\n";
  }
  return tune::hash_hex(s.str());
}

/// Site `i` of `sites` (a list the program's own analysis makes), or a ParamError: the
/// what-if's program must be the one its sites were found in.
const passes::LoopSite& site_at(const std::vector<passes::LoopSite>& sites, int i) {
  if (i < 0 || static_cast<size_t>(i) >= sites.size())
    throw ParamError{
        fmt::format("what-if: loop site {} of {} does not exist in this build", i, sites.size())};
  return sites[static_cast<size_t>(i)];
}

/// The advisor's evidence sites of a loop analysis: where = the loop, ops = its statements.
std::vector<prof::Evidence::Site> loop_sites(const std::vector<passes::LoopSite>& sites) {
  std::vector<prof::Evidence::Site> out;
  for (const auto& s : sites) {
    std::vector<std::string> ops;
    for (const auto* st : s.stmts) ops.push_back(st->loc.str());
    out.push_back({s.loop->loc.str(), s.what, s.loop->loc.str(), 0, ops});
  }
  return out;
}

}  // namespace

prof::Simulate what_if_runner(const KernelSource& k, const RunRequest& base,
                              const ChipConfig& chip) {
  return [&k, base, chip](const prof::WhatIf& w) -> prof::WhatIfResult {
    RunRequest r = base;
    r.mode = sim::Mode::Timing;
    r.observer = nullptr;
    r.detect_races = false;
    auto raw = raw_params(base.params);
    for (const auto& [n, v] : w.params) raw[n] = std::to_string(v);
    ChipConfig c = chip;
    if (w.zero_sync) c.flag_latency = c.cross_flag_latency = 0;
    if (w.zero_issue) c.issue_cycles = c.scalar_op_cycles = 0;
    if (!w.faster_pipe.empty()) speed_up(c, w.faster_pipe);
    r.whatif_no_barriers = w.no_barriers;
    r.whatif_free_sites = w.free_sites;
    if (w.pipeline_site >= 0 || w.hoist_site >= 0)
      r.edit_source = [w](ir::Program& p) {
        if (w.pipeline_site >= 0)
          p = passes::pipeline_loop(p, site_at(passes::serial_tile_loops(p), w.pipeline_site),
                                    w.num_stages);
        if (w.hoist_site >= 0)
          p = passes::hoist(p, site_at(passes::loop_invariant_work(p), w.hoist_site));
      };
    try {
      r.params = resolve_params(k, raw);
      auto rep = run_kernel(k, r, c);
      return {true, rep.sim.cycles, ""};
    } catch (const ParamError& e) {
      return {false, 0, e.message};
    } catch (const UserError& e) {
      return {false, 0, first_reason(e)};
    } catch (const lang::BuildError& e) {
      return {false, 0, e.loc.str() + ": " + e.message};
    }
  };
}

ProfileReport profile_kernel(const KernelSource& k, const RunRequest& req, const ChipConfig& chip,
                             const prof::RuleSet& rules, bool verify) {
  ProfileReport rep;
  prof::Recorder rec(nullptr, /*attribute_lines=*/true);
  RunRequest r = req;
  if (!r.observer) r.observer = &rec;
  rep.run = run_kernel(k, r, chip);
  const prof::Recorder& used = r.observer == &rec ? rec : *static_cast<prof::Recorder*>(r.observer);
  rep.summary = prof::summarize(rep.run.sim, rep.run.lowered, chip);
  rep.evidence = prof::gather_evidence(rep.run.sim, rep.run.lowered, chip, used);
  rep.evidence.serial_tile_loops = loop_sites(passes::serial_tile_loops(rep.run.source));
  rep.evidence.invariant_work = loop_sites(passes::loop_invariant_work(rep.run.source));
  rep.timeline = used.timeline();
  rep.lines = used.attribute_lines(rep.run.sim, chip.launch_cycles());
  for (const auto& c : rep.run.sim.cores) rep.core_names.push_back(c.name);
  RunRequest base = req;
  base.variant = rep.run.variant;
  if (k.profile_variants) {
    for (const auto& v : k.variants) {
      ProfileReport::VariantCycles vc{v, rep.run.sim.cycles, ""};
      // A variant whose passes make the same program (a kernel without automatic code) has
      // the same cycles: no second simulation. The programs after the passes are compared,
      // not as built: variants may build one program and differ in their pass options (a
      // Python file's lowerings: the original's barriers of automatic sync, or not).
      RunRequest r2 = base;
      r2.variant = v;
      r2.mode = sim::Mode::Timing;
      r2.observer = nullptr;
      r2.detect_races = false;
      r2.print = {};  // the IR was printed for the variant reported
      try {
        if (v != rep.run.variant && !ir::equal(compile(k, r2, chip).program, rep.run.program))
          vc.cycles = run_kernel(k, r2, chip).sim.cycles;
      } catch (const UserError& e) {
        vc.error = first_reason(e);
      } catch (const lang::BuildError& e) {
        vc.error = e.loc.str() + ": " + e.message;
      }
      rep.variants.push_back(vc);
    }
  }
  rep.advice =
      prof::advise(rep.summary, rep.evidence, rules,
                   verify ? what_if_runner(k, base, chip) : prof::Simulate{}, &rep.dropped);
  return rep;
}

tune::Callbacks tune_callbacks(const KernelSource& k, const RunRequest& base,
                               const ChipConfig& chip, const std::string& chip_text) {
  tune::Callbacks cb;
  auto request = [&k, base](const tune::Point& p) {
    RunRequest r = base;
    r.mode = sim::Mode::Timing;
    r.observer = nullptr;
    r.detect_races = false;
    auto raw = raw_params(base.params);
    for (const auto& [n, v] : p) raw[n] = std::to_string(v);
    r.params = resolve_params(k, raw);
    return r;
  };
  cb.prepare = [&k, &chip, request, chip_text](const tune::Point& p) -> tune::Prepared {
    try {
      RunRequest r = request(p);
      Compiled c = compile(k, r, chip);
      std::ostringstream key;
      key << sim::kSimVersion << "\n" << k.name << "/" << c.variant << "\n";
      for (const auto& [n, v] : r.params) key << n << "=" << v << ";";
      key << "\n"
          << chip_text << "\n"
          << ir::print(c.program) << "\nblocks=" << c.lowered.block_num;
      if (r.given_inputs) key << "\ninputs=" << inputs_digest(*r.given_inputs);
      return {true, "", tune::hash_hex(key.str())};
    } catch (const ParamError& e) {
      return {false, e.message, ""};
    } catch (const UserError& e) {
      return {false, first_reason(e), ""};
    } catch (const lang::BuildError& e) {
      return {false, e.loc.str() + ": " + e.message, ""};
    }
  };
  cb.lower_bound = [&k, &chip, request](const tune::Point& p) {
    RunRequest r = request(p);
    r.lower_bound_only = true;
    try {
      return run_kernel(k, r, chip).sim.cycles;
    } catch (const UserError&) {
      return 0.0;  // no bound: evaluated first, rejected by the timed run
    }
  };
  // A config's functional run with the checks on: the reason it is no right result (a
  // finding of the race, flag or deadlock checks, outputs unlike the reference), or its
  // outputs' unwritten elements.
  auto functional = [&k, &chip, request](const tune::Point& p,
                                         std::vector<sim::SimResult::Unwritten>& unwritten) {
    RunRequest r = request(p);
    r.mode = sim::Mode::Functional;
    r.detect_races = true;
    r.fast_forward = {};
    try {
      auto rep = run_kernel(k, r, chip);
      unwritten = rep.sim.unwritten;
      if (rep.checked && !rep.correct)
        return fmt::format("its outputs differ from the reference: {}", rep.mismatch);
    } catch (const UserError& e) {
      return first_reason(e);
    }
    return std::string();
  };
  // What the starting config leaves unwritten (a kernel may write only some elements of an
  // output by design, a scatter by indices): computed once, on the first config checked.
  struct Base {
    std::once_flag once;
    std::vector<sim::SimResult::Unwritten> unwritten;
  };
  auto base_state = std::make_shared<Base>();
  auto base_unwritten = [ base_state, functional ]() -> const auto& {
    std::call_once(base_state->once, [&] {
      try {
        functional({}, base_state->unwritten);
      } catch (const std::exception&) {  // the starting config does not build: no reference
        base_state->unwritten.clear();
      }
    });
    return base_state->unwritten;
  };
  cb.simulate = [&k, &chip, request](const tune::Point& p) -> tune::Simulated {
    try {
      auto rep = run_kernel(k, request(p), chip);
      auto s = prof::summarize(rep.sim, rep.lowered, chip);
      return {true, "", rep.sim.cycles, s.bound};
    } catch (const UserError& e) {
      return {false, first_reason(e), 0, ""};
    } catch (const ParamError& e) {  // e.g. --inputs arrays that do not fit this config
      return {false, e.message, 0, ""};
    }
  };
  cb.check = [functional, base_unwritten](const tune::Point& p) -> std::string {
    std::vector<sim::SimResult::Unwritten> unwritten;
    try {
      if (std::string why = functional(p, unwritten); !why.empty()) return why;
    } catch (const ParamError& e) {
      return e.message;
    }
    for (const auto& u : unwritten) {
      int64_t base = 0;
      for (const auto& b : base_unwritten())
        if (b.tensor == u.tensor) base = b.elements;
      if (u.elements > base)
        return fmt::format(
            "it leaves {} of the {} elements of output '{}' unwritten (the first "
            "at flat index {}){}",
            u.elements, u.total, u.tensor, u.first,
            base > 0 ? fmt::format("; the starting config leaves {}", base)
                     : std::string("; the starting config writes them all"));
    }
    return "";
  };
  return cb;
}

std::string chip_config_text(const std::string& name_or_path) {
  std::ifstream in(chip_config_path(name_or_path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string default_cache_dir() {
  const char* x = std::getenv("XDG_CACHE_HOME");
  if (x && *x) return std::string(x) + "/tilepipe/tune";
  return "out/.tune-cache";
}

}  // namespace tilepipe::driver

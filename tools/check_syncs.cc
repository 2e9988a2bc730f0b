#include "check_syncs.h"

#include <fmt/format.h>

#include <iostream>
#include <map>

#include "outputs.h"
#include "tilepipe/driver_syncs.h"

namespace tilepipe::cli {
namespace {

using json = nlohmann::ordered_json;
using driver::DropOutcome;
using driver::DropResult;
using driver::SyncOp;

json sync_json(const SyncOp& s) {
  return {{"index", s.index},
          {"kind", s.kind},
          {"core", s.core == ir::CoreKind::C ? "AIC" : "AIV"},
          {"pipes", s.pipes},
          {"event_id", s.event_id},
          {"source", s.source}};
}

std::string sync_text(const SyncOp& s) {
  std::string id = s.event_id.empty() ? "" : " #" + s.event_id;
  return fmt::format("{} {}{} on {} at {}", s.kind, s.pipes, id,
                     s.core == ir::CoreKind::C ? "AIC" : "AIV", s.source);
}

json errors_json(const std::vector<Diagnostic>& diags) {
  json e = json::array();
  for (const auto& d : diags)
    e.push_back({{"kind", d.kind}, {"where", d.loc.str()}, {"message", d.message}});
  return e;
}

std::string outcome_text(const DropResult& r, double baseline) {
  switch (r.outcome) {
    case DropOutcome::Redundant:
      return fmt::format(
          "redundant: no race, no deadlock, identical result; {:.0f} -> {:.0f} cycles "
          "(saves {:.0f})",
          baseline, r.cycles, r.saved_cycles);
    case DropOutcome::Race:
    case DropOutcome::Deadlock:
    case DropOutcome::FlagError:
    case DropOutcome::Error: {
      const char* what = r.outcome == DropOutcome::Race        ? "race found"
                         : r.outcome == DropOutcome::Deadlock  ? "deadlock found"
                         : r.outcome == DropOutcome::FlagError ? "flag error found"
                                                               : "run-time error found";
      std::string where = r.diagnostics.empty() ? "" : " at " + r.diagnostics.front().loc.str();
      return fmt::format("{} ({} report(s), first{})", what, r.diagnostics.size(), where);
    }
    case DropOutcome::Mismatch:
      return "result mismatch (no race reported): " + r.mismatch;
  }
  return "?";
}

int list(const driver::KernelSource& k, const driver::RunRequest& req, const ChipConfig& chip,
         bool as_json, json out) {
  auto syncs = driver::kernel_syncs(k, req, chip);
  out["syncs"] = json::array();
  std::string text = fmt::format("{}: {} sync op(s)\n",
                                 driver::label(k, out["variant"].get<std::string>()), syncs.size());
  text += fmt::format("  {:>4}  {:<4} {:<16} {:<11} {:<18} {}\n", "#", "core", "kind", "pipes",
                      "event_id", "source");
  for (const auto& s : syncs) {
    out["syncs"].push_back(sync_json(s));
    text += fmt::format("  {:>4}  {:<4} {:<16} {:<11} {:<18} {}\n", s.index,
                        s.core == ir::CoreKind::C ? "AIC" : "AIV", s.kind, s.pipes,
                        s.event_id.empty() ? "-" : s.event_id, s.source);
  }
  if (as_json) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << text;
  }
  return 0;
}

int drop(const std::vector<int>& which, const driver::KernelSource& k,
         const driver::RunRequest& req, const ChipConfig& chip, bool as_json, json out) {
  auto syncs = driver::kernel_syncs(k, req, chip);
  // Index errors before the (slower) runs.
  for (int w : which)
    if (w < 0 || w >= static_cast<int>(syncs.size()))
      throw driver::ParamError{fmt::format(
          "--drop-sync {}: expected a sync index in [0, {}] ({} has {} sync op(s)); list "
          "them with --list-syncs",
          w, static_cast<int>(syncs.size()) - 1,
          driver::label(k, out["variant"].get<std::string>()), syncs.size())};
  driver::RunReport base = driver::baseline_check(k, req, chip);
  DropResult r = driver::drop_and_check(k, req, chip, syncs, which, base);
  out["dropped"] = json::array();
  std::vector<std::string> names;
  for (int w : which) {
    out["dropped"].push_back(sync_json(syncs[static_cast<size_t>(w)]));
    names.push_back(fmt::format("{} ({})", w, sync_text(syncs[static_cast<size_t>(w)])));
  }
  const bool redundant = r.outcome == DropOutcome::Redundant;
  out["outcome"] = driver::to_string(r.outcome);
  out["redundant"] = redundant;
  out["ok"] = redundant;
  out["baseline_cycles"] = base.sim.cycles;
  out["cycles"] = r.cycles >= 0 ? json(r.cycles) : json(nullptr);
  if (r.cycles >= 0) out["saved_cycles"] = r.saved_cycles;
  if (!r.diagnostics.empty()) out["errors"] = errors_json(r.diagnostics);
  if (r.outcome == DropOutcome::Mismatch) out["mismatch"] = r.mismatch;
  std::string line =
      fmt::format("drop sync {}: {}", fmt::join(names, ", "), outcome_text(r, base.sim.cycles));
  if (!r.diagnostics.empty()) std::cerr << UserError(r.diagnostics).what() << "\n";
  print_result(as_json, out, line + "\n");
  return redundant ? 0 : 3;
}

int find(const driver::KernelSource& k, const driver::RunRequest& req, const ChipConfig& chip,
         bool as_json, json out) {
  driver::RunReport base = driver::baseline_check(k, req, chip);
  auto syncs = driver::list_syncs(base.lowered);
  auto rep = driver::find_redundant(k, req, chip, syncs, base);
  std::map<std::string, int> counts;
  out["baseline_cycles"] = base.sim.cycles;
  out["syncs"] = json::array();
  out["redundant"] = json::array();
  std::string table;
  for (const auto& s : syncs) {
    const DropResult& r = rep.single[static_cast<size_t>(s.index)];
    ++counts[driver::to_string(r.outcome)];
    json j = sync_json(s);
    j["outcome"] = driver::to_string(r.outcome);
    if (r.cycles >= 0) j["saved_cycles"] = r.saved_cycles;
    if (!r.diagnostics.empty()) j["first_error"] = r.diagnostics.front().loc.str();
    out["syncs"].push_back(j);
    if (r.outcome == DropOutcome::Redundant) {
      out["redundant"].push_back(s.index);
      table += fmt::format("  {:>4}  {:<44} saves {:>8.0f} cycles\n", s.index, sync_text(s),
                           r.saved_cycles);
    }
  }
  out["counts"] = counts;
  out["combined"] = {{"dropped", rep.combined.dropped},
                     {"cycles", rep.combined.cycles},
                     {"saved_cycles", base.sim.cycles - rep.combined.cycles}};
  std::vector<std::string> cs;
  for (const auto& [name, n] : counts) cs.push_back(fmt::format("{} {}", name, n));
  std::string text = fmt::format("{} on {}: {} sync op(s), {:.0f} cycles with all of them\n",
                                 driver::label(k, out["variant"].get<std::string>()), chip.name,
                                 syncs.size(), base.sim.cycles);
  text += fmt::format("  dropping one at a time: {}\n", fmt::join(cs, ", "));
  if (out["redundant"].empty()) {
    text += "  no redundant sync: every one is needed\n";
  } else {
    text += "  redundant (each on its own; cycles it costs):\n" + table;
    text += fmt::format(
        "  together: dropping {} gives {:.0f} cycles (saves {:.0f}); no race, no deadlock, "
        "identical result\n",
        fmt::join(rep.combined.dropped, ", "), rep.combined.cycles,
        base.sim.cycles - rep.combined.cycles);
  }
  for (const auto& s : syncs)
    if (rep.single[static_cast<size_t>(s.index)].outcome == DropOutcome::Mismatch)
      text +=
          fmt::format("  warning: dropping {} changes the result without a race report\n", s.index);
  print_result(as_json, out, text);
  return 0;
}

}  // namespace

int run_sync_command(const SyncArgs& a, const driver::KernelSource& k,
                     const driver::RunRequest& req, const ChipConfig& chip, bool as_json,
                     json header) {
  if (a.list) return list(k, req, chip, as_json, header);
  if (a.find_redundant) return find(k, req, chip, as_json, header);
  return drop(a.drop, k, req, chip, as_json, header);
}

}  // namespace tilepipe::cli

#include "tilepipe/driver_syncs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace tilepipe::driver {
namespace {

using lower::CExpr;
using lower::Opcode;

/// Slot -> "loop@LINE" for the loop variables of a core program.
void loop_names(const lower::Block& b, std::map<int64_t, std::string>& names) {
  for (const auto& it : b.items) {
    if (it.kind == lower::Item::Loop) names[it.slot] = fmt::format("loop@{}", it.loc.line);
    if (it.kind == lower::Item::Let) names[it.slot] = fmt::format("let@{}", it.loc.line);
    if (it.body) loop_names(*it.body, names);
    if (it.else_body) loop_names(*it.else_body, names);
  }
}

/// Infix text of a compiled expression (postfix), for the sync list.
std::string expr_text(const CExpr& e, const std::map<int64_t, std::string>& slots) {
  std::vector<std::string> st;
  auto pop = [&] {
    std::string s = st.empty() ? "?" : st.back();
    if (!st.empty()) st.pop_back();
    return s;
  };
  for (const auto& o : e.ops) {
    switch (o.kind) {
      case CExpr::Const:
        st.push_back(std::to_string(o.value));
        break;
      case CExpr::Slot: {
        auto it = slots.find(o.value);
        st.push_back(o.value == lower::kSlotCid   ? "cid"
                     : o.value == lower::kSlotVid ? "vid"
                     : it != slots.end()          ? it->second
                                                  : fmt::format("slot{}", o.value));
        break;
      }
      case CExpr::Bin: {
        std::string b = pop(), a = pop();
        st.push_back(fmt::format("({} {} {})", a, ir::to_string(o.bin), b));
        break;
      }
      case CExpr::Sel: {
        std::string f = pop(), t = pop(), c = pop();
        st.push_back(fmt::format("select({}, {}, {})", c, t, f));
        break;
      }
      case CExpr::Leaf:  // only in the folded program, never in `ops`
        st.push_back("?");
        break;
      case CExpr::Load: {
        std::vector<std::string> idx(static_cast<size_t>(CExpr::load_rank(o)));
        for (auto i = idx.rbegin(); i != idx.rend(); ++i) *i = pop();
        st.push_back(fmt::format("load{}[{}]", CExpr::load_site(o), fmt::join(idx, ", ")));
        break;
      }
    }
  }
  std::string s = pop();
  if (s.size() > 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
  return s;
}

lower::CoreProgram& program(lower::LoweredProgram& p, ir::CoreKind k) {
  return k == ir::CoreKind::C ? p.aic : p.aiv;
}

bool same_outputs(const sim::HostData& a, const sim::HostData& b, std::string& first) {
  for (const auto& [name, va] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.size() != va.size()) {
      first = fmt::format("{}: missing or of a different size", name);
      return false;
    }
    for (size_t i = 0; i < va.size(); ++i) {
      double x = va[i], y = it->second[i];
      if (x == y || (std::isnan(x) && std::isnan(y))) continue;
      first = fmt::format("{}[{}] = {:.9g}, unmutated run {:.9g}", name, i, y, x);
      return false;
    }
  }
  return true;
}

DropOutcome classify(const std::vector<Diagnostic>& diags) {
  bool race = false, deadlock = false, flag = false;
  for (const auto& d : diags) {
    race = race || d.kind == "race";
    deadlock = deadlock || d.kind == "deadlock";
    flag =
        flag || d.kind == "unmatched-flag" || d.kind == "flag-double-set" || d.kind == "cross-flag";
  }
  return race       ? DropOutcome::Race
         : deadlock ? DropOutcome::Deadlock
         : flag     ? DropOutcome::FlagError
                    : DropOutcome::Error;
}

}  // namespace

const char* to_string(DropOutcome o) {
  switch (o) {
    case DropOutcome::Redundant:
      return "redundant";
    case DropOutcome::Race:
      return "race";
    case DropOutcome::Deadlock:
      return "deadlock";
    case DropOutcome::FlagError:
      return "flag-error";
    case DropOutcome::Mismatch:
      return "mismatch";
    case DropOutcome::Error:
      return "error";
  }
  return "?";
}

std::vector<SyncOp> list_syncs(const lower::LoweredProgram& p) {
  std::vector<SyncOp> out;
  for (const lower::CoreProgram* cp : {&p.aic, &p.aiv}) {
    std::map<int64_t, std::string> slots;
    loop_names(cp->body, slots);
    for (size_t i = 0; i < cp->instrs.size(); ++i) {
      const auto& t = cp->instrs[i];
      if (!lower::is_sync(t.op)) continue;
      SyncOp s;
      s.index = static_cast<int>(out.size());
      s.core = cp->kind;
      s.instr = static_cast<int>(i);
      s.op = t.op;
      s.kind = lower::to_string(t.op);
      s.pipes = (t.op == Opcode::SetFlag || t.op == Opcode::WaitFlag)
                    ? fmt::format("{}->{}", ir::to_string(t.flag_src), ir::to_string(t.flag_dst))
                    : ir::to_string(t.pipe);
      s.event_id = t.op == Opcode::Barrier ? "" : expr_text(t.flag_id, slots);
      s.source = t.loc.str();
      out.push_back(std::move(s));
    }
  }
  return out;
}

std::vector<SyncOp> kernel_syncs(const KernelSource& k, const RunRequest& req,
                                 const ChipConfig& chip) {
  return list_syncs(compile(k, req, chip).lowered);
}

RunReport baseline_check(const KernelSource& k, RunRequest req, const ChipConfig& chip) {
  req.mode = sim::Mode::Functional;
  req.detect_races = true;
  req.mutate = {};
  RunReport rep = run_kernel(k, req, chip);
  if (rep.checked && !rep.correct)
    throw ParamError{
        fmt::format("kernel '{}' does not match its reference even with every sync in place ({}); "
                    "fix the kernel before dropping syncs",
                    label(k, rep.variant), rep.mismatch)};
  return rep;
}

DropResult drop_and_check(const KernelSource& k, RunRequest req, const ChipConfig& chip,
                          const std::vector<SyncOp>& syncs, const std::vector<int>& which,
                          const RunReport& baseline) {
  for (int w : which)
    if (w < 0 || w >= static_cast<int>(syncs.size()))
      throw ParamError{
          fmt::format("--drop-sync {}: expected a sync index in [0, {}], found {}; list them with "
                      "--list-syncs",
                      w, static_cast<int>(syncs.size()) - 1, w)};
  DropResult r;
  r.dropped = which;
  req.mode = sim::Mode::Functional;
  req.detect_races = true;
  req.mutate = [&](lower::LoweredProgram& p) {
    for (int w : which) {
      const SyncOp& s = syncs[static_cast<size_t>(w)];
      program(p, s.core).instrs[static_cast<size_t>(s.instr)].dropped = true;
    }
  };
  try {
    RunReport rep = run_kernel(k, req, chip);
    r.cycles = rep.sim.cycles;
    r.saved_cycles = baseline.sim.cycles - rep.sim.cycles;
    if (!same_outputs(baseline.outputs, rep.outputs, r.mismatch)) r.outcome = DropOutcome::Mismatch;
  } catch (const UserError& e) {  // SimFailure included
    r.diagnostics = e.diagnostics();
    r.outcome = classify(r.diagnostics);
  }
  return r;
}

RedundantReport find_redundant(const KernelSource& k, const RunRequest& req, const ChipConfig& chip,
                               const std::vector<SyncOp>& syncs, const RunReport& baseline) {
  RedundantReport rep;
  std::vector<int> candidates;
  for (const auto& s : syncs) {
    rep.single.push_back(drop_and_check(k, req, chip, syncs, {s.index}, baseline));
    if (rep.single.back().outcome == DropOutcome::Redundant) candidates.push_back(s.index);
  }
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    return rep.single[static_cast<size_t>(a)].saved_cycles >
           rep.single[static_cast<size_t>(b)].saved_cycles;
  });
  rep.combined.cycles = baseline.sim.cycles;
  std::vector<int> kept;
  for (int c : candidates) {
    std::vector<int> trial = kept;
    trial.push_back(c);
    if (kept.empty()) {
      rep.combined = rep.single[static_cast<size_t>(c)];
      kept = trial;
      continue;
    }
    DropResult r = drop_and_check(k, req, chip, syncs, trial, baseline);
    if (r.outcome == DropOutcome::Redundant) {
      rep.combined = r;
      kept = trial;
    }
  }
  std::sort(rep.combined.dropped.begin(), rep.combined.dropped.end());
  return rep;
}

}  // namespace tilepipe::driver

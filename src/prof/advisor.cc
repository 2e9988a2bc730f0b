// The advisor (contract in include/tilepipe/advisor.h).
#include "tilepipe/advisor.h"

#include "tilepipe/json_input.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tilepipe::prof {
namespace {

double r2(double v) {
  return std::round(v * 100) / 100;
}

const std::set<std::string> kOps = {">=", ">", "<=", "<", "==", "!="};

/// Sites a loop-edit rule re-simulates (each one run).
constexpr size_t kMaxEditSites = 4;

bool holds(double v, const std::string& op, double t) {
  if (op == ">=") return v >= t;
  if (op == ">") return v > t;
  if (op == "<=") return v <= t;
  if (op == "<") return v < t;
  if (op == "==") return v == t;
  if (op == "!=") return v != t;
  return false;
}

std::string fill(std::string s, const std::map<std::string, std::string>& vars) {
  for (const auto& [k, v] : vars) {
    std::string key = "{" + k + "}";
    for (size_t pos = s.find(key); pos != std::string::npos; pos = s.find(key, pos + v.size()))
      s.replace(pos, key.size(), v);
  }
  return s;
}

void split_where(const std::string& where, Advice& a) {
  auto colon = where.rfind(':');
  if (colon == std::string::npos) return;
  a.file = where.substr(0, colon);
  a.line = std::atoi(where.c_str() + colon + 1);
}

const ir::Knob* knob(const Evidence& e, const std::string& role) {
  for (const auto& k : e.knobs)
    if (k.role == role) return &k;
  return nullptr;
}

/// Values to try when moving a knob: a few steps in the direction, inside its range.
std::vector<int64_t> candidates(const ir::Knob& k, bool raise) {
  std::set<int64_t> c;
  if (raise) {
    for (int64_t v : {k.value * 2, k.value * 4, k.value + 6})
      if (v > k.value) c.insert(std::min(v, k.max));
  } else {
    for (int64_t v : {k.value / 2, k.value - 1, k.min})
      if (v < k.value) c.insert(std::max(v, k.min));
  }
  c.erase(k.value);
  return {c.begin(), c.end()};
}

/// A json exception's message without its "[json.exception.type_error.302] " prefix.
std::string json_error_detail(const nlohmann::json::exception& ex) {
  std::string detail = ex.what();
  if (auto pos = detail.find("] "); pos != std::string::npos) detail = detail.substr(pos + 2);
  return detail;
}

/// The names a rule may use: anything else is a typo and the rule would never fire.
void check_rule_names(const Rule& x) {
  auto one_of = [&](const char* field, const std::string& v, const std::set<std::string>& ok) {
    if (v.empty() || ok.count(v)) return;
    throw std::runtime_error(fmt::format("advice rule '{}': unknown {} '{}'; expected one of {}",
                                         x.id, field, v, fmt::join(ok, ", ")));
  };
  one_of("knob_role", x.knob_role, {std::begin(ir::kKnobRoles), std::end(ir::kKnobRoles)});
  one_of("where", x.where,
         {"knob", "barrier", "scalar_loop", "unfused", "largest_buffer", "bound_line",
          "serial_tile_loop", "invariant"});
  std::set<std::string> whatifs = {"no_barriers", "zero_sync", "zero_issue", "vectorise",
                                   "fuse",        "pipeline",  "hoist"};
  for (int p = 0; p < ir::kNumPipes; ++p)
    whatifs.insert(std::string("faster:") + ir::to_string(static_cast<ir::Pipe>(p)));
  one_of("whatif", x.whatif, whatifs);
  if ((x.action == "raise_knob" || x.action == "lower_knob" || x.where == "knob") &&
      x.knob_role.empty())
    throw std::runtime_error(fmt::format(
        "advice rule '{}': action '{}' (where '{}') needs a knob_role: one of {}", x.id, x.action,
        x.where, fmt::join(std::begin(ir::kKnobRoles), std::end(ir::kKnobRoles), ", ")));
  if (x.action == "whatif" && x.whatif.empty())
    throw std::runtime_error(
        fmt::format("advice rule '{}': action 'whatif' needs a whatif: one of {}", x.id,
                    fmt::join(whatifs, ", ")));
  // A loop edit is tried at the sites of its own evidence list.
  for (auto [whatif, where] : {std::pair{"pipeline", "serial_tile_loop"}, {"hoist", "invariant"}})
    if ((x.whatif == whatif || x.where == where) &&
        !(x.whatif == whatif && x.where == where && x.action == "whatif"))
      throw std::runtime_error(
          fmt::format("advice rule '{}': the what-if '{}' goes with where '{}' and action 'whatif'",
                      x.id, whatif, where));
}

}  // namespace

RuleSet parse_rules(const nlohmann::json& j) {
  RuleSet rs;
  rs.min_verified_gain_pct = j.value("min_verified_gain_pct", 3.0);
  rs.error_band_pct = j.value("error_band_pct", 12.0);
  rs.core_first_min_gain_pct = j.value("core_first_min_gain_pct", 5.0);
  for (const auto& [name, v] : {std::pair{"min_verified_gain_pct", rs.min_verified_gain_pct},
                                {"error_band_pct", rs.error_band_pct},
                                {"core_first_min_gain_pct", rs.core_first_min_gain_pct}})
    if (!(v >= 0 && v <= 100))
      throw std::runtime_error(
          fmt::format("advice rules: {} is {}; expected a percentage in [0, 100]", name, v));
  static const std::set<std::string> actions = {"info",   "raise_knob", "lower_knob",
                                                "whatif", "roof",       "unverified"};
  for (const auto& r : j.at("rules")) {
    Rule x;
    x.id = r.at("id").get<std::string>();
    x.title = r.at("title").get<std::string>();
    x.severity = r.value("severity", "medium");
    static const std::set<std::string> severities = {"high", "medium", "low", "info"};
    if (!severities.count(x.severity))
      throw std::runtime_error(
          fmt::format("advice rule '{}': unknown severity '{}'; expected high, medium, low or info",
                      x.id, x.severity));
    x.action = r.value("action", "info");
    if (!actions.count(x.action))
      throw std::runtime_error(
          fmt::format("advice rule '{}': unknown action '{}'", x.id, x.action));
    // A name field given empty is a slip: leaving it out is how a rule says "none".
    for (const char* field : {"knob_role", "whatif", "where"})
      if (r.contains(field) && r[field] == "")
        throw std::runtime_error(fmt::format(
            "advice rule '{}': {} is empty; give one of its names or leave the field out", x.id,
            field));
    x.knob_role = r.value("knob_role", "");
    x.whatif = r.value("whatif", "");
    x.text = r.value("text", "");
    x.where = r.value("where", "");
    check_rule_names(x);
    x.scope = r.value("scope", "core");
    if (r.contains("predict")) {
      x.predict_metric = r["predict"].at("metric").get<std::string>();
      x.predict_factor = r["predict"].at("factor").get<double>();
    }
    for (const auto& c : r.value("when", nlohmann::json::array())) {
      Condition cond{c.at("metric").get<std::string>(), c.at("op").get<std::string>(),
                     c.at("value").get<double>()};
      // A condition the run can never satisfy is a typo: the rule would never fire.
      if (!is_metric_name(cond.metric))
        throw std::runtime_error(fmt::format(
            "advice rule '{}': unknown metric '{}'; metrics are the names `tilepipe profile "
            "--json` prints under \"metrics\" (e.g. MTE2.busy_pct, cross.wait_pct)",
            x.id, cond.metric));
      if (!kOps.count(cond.op))
        throw std::runtime_error(
            fmt::format("advice rule '{}': unknown operator '{}' on '{}'; expected one of >=, >, "
                        "<=, <, ==, !=",
                        x.id, cond.op, cond.metric));
      if (!std::isfinite(cond.threshold))
        throw std::runtime_error(fmt::format(
            "advice rule '{}': the threshold of '{}' must be a finite number", x.id, cond.metric));
      x.when.push_back(std::move(cond));
    }
    if (!x.predict_metric.empty() && !is_metric_name(x.predict_metric))
      throw std::runtime_error(
          fmt::format("advice rule '{}': unknown predict metric '{}'", x.id, x.predict_metric));
    rs.rules.push_back(std::move(x));
  }
  return rs;
}

RuleSet load_rules(const std::string& path) {
  std::string p = path;
  if (p.empty()) p = config_dir() + "/advice_rules.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec))
    throw std::runtime_error(
        fmt::format("cannot read the advice rules '{}': not a regular file; pass a rules file like "
                    "configs/advice_rules.json",
                    p));
  std::ifstream in(p);
  if (!in) throw std::runtime_error(fmt::format("cannot read the advice rules '{}'", p));
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = parse_json_input(text.str(), fmt::format("advice rules '{}'", p),
                         "an object with a \"rules\" array (configs/advice_rules.json)");
  } catch (const JsonInputError& ex) {
    throw std::runtime_error(ex.what());
  }
  if (!j.is_object() || !j.contains("rules") || !j["rules"].is_array())
    throw std::runtime_error(fmt::format(
        "advice rules '{}': expected an object with a \"rules\" array (the format of "
        "configs/advice_rules.json){}",
        p,
        j.is_object() && j.contains("die") ? "; this is a chip config: pass it with --chip" : ""));
  try {
    return parse_rules(j);
  } catch (const nlohmann::json::exception& ex) {
    throw std::runtime_error(fmt::format(
        "advice rules '{}': {}; every rule needs \"id\" and \"title\" strings, and every "
        "\"when\" condition \"metric\", \"op\" and a numeric \"value\"",
        p, json_error_detail(ex)));
  }
}

std::vector<Advice> advise(const Summary& s, const Evidence& e, const RuleSet& rules,
                           const Simulate& sim, std::vector<Advice>* dropped) {
  const auto m = metrics(s, e);
  const double base = e.span;
  std::vector<Advice> out;
  bool at_roof = false;
  auto gain = [&](double cycles) { return r2(100 * (base - cycles) / base); };
  for (const auto& rule : rules.rules) {
    Advice a;
    a.id = rule.id;
    a.title = rule.title;
    a.severity = rule.severity;
    a.scope = rule.scope;
    bool fires = true;
    for (const auto& c : rule.when) {
      auto it = m.find(c.metric);
      if (it == m.end() || !holds(it->second, c.op, c.threshold)) {
        fires = false;
        break;
      }
      a.evidence.push_back({c.metric, c.op, r2(it->second), c.threshold});
    }
    if (!fires) continue;
    if (rule.action == "roof") at_roof = true;

    // Where: the knob's loop, the first offending site, or the largest buffer.
    std::map<std::string, std::string> vars = {{"bound", s.bound}, {"verdict", s.verdict}};
    const ir::Knob* kn = rule.knob_role.empty() ? nullptr : knob(e, rule.knob_role);
    if (!rule.knob_role.empty() && !kn) continue;  // the kernel declares no such knob
    std::string where;
    if (kn) {
      where = kn->loc.str();
      vars["knob"] = kn->param;
      vars["value"] = std::to_string(kn->value);
    }
    auto first_site = [&](const std::vector<Evidence::Site>& v) -> const Evidence::Site* {
      return v.empty() ? nullptr : &v.front();
    };
    const Evidence::Site* site = nullptr;
    if (rule.where == "barrier") site = first_site(e.barriers_in_loops);
    if (rule.where == "unfused") site = first_site(e.unfused);
    if (rule.where == "scalar_loop") site = first_site(e.scalar_loops);
    if (rule.where == "serial_tile_loop" || rule.where == "invariant") {
      // A loop edit: tried at each site (the first few, in program order); the advice names
      // the one that gains most.
      if (!sim) continue;
      const auto& sites = rule.where == "invariant" ? e.invariant_work : e.serial_tile_loops;
      std::optional<double> best;
      for (size_t i = 0; i < std::min(sites.size(), kMaxEditSites); ++i) {
        WhatIf w;
        (rule.where == "invariant" ? w.hoist_site : w.pipeline_site) = static_cast<int>(i);
        WhatIfResult r = sim(w);
        a.tried.push_back(r.ok ? fmt::format("what-if {} at {}: {:.0f} cycles", rule.whatif,
                                             sites[i].where, r.cycles)
                               : fmt::format("what-if {} at {}: rejected: {}", rule.whatif,
                                             sites[i].where, r.reason));
        if (r.ok && (!best || r.cycles < *best)) {
          best = r.cycles;
          site = &sites[i];
        }
      }
      if (!best) continue;  // no edit compiles: nothing verified to say
      a.verified_gain_pct = gain(*best);
      a.status = "verified";
      vars["ops"] = fmt::format("{}", fmt::join(site->ops, ", "));
      vars["num_stages"] = std::to_string(WhatIf{}.num_stages);
    }
    if (!rule.where.empty() && rule.where != "knob" && rule.where != "largest_buffer" &&
        rule.where != "bound_line" && !site)
      continue;  // no site: the evidence does not exist
    if (site) {
      where = site->where;
      vars["what"] = site->what;
      if (rule.where == "barrier") {
        std::vector<std::string> pipes;
        for (const auto& b : e.barriers_in_loops) pipes.push_back(b.what + " at " + b.where);
        vars["sites"] = fmt::format("{}", fmt::join(pipes, ", "));
      }
    }
    if (rule.where == "largest_buffer") {
      const Evidence::Scope* worst = nullptr;
      for (const auto& sc : e.scopes)
        if (!worst || sc.used * worst->capacity > worst->used * sc.capacity) worst = &sc;
      if (worst) {
        where = worst->largest_where;
        vars["buffer"] = worst->largest;
        vars["scope"] = worst->scope;
      }
    }
    if (rule.where == "bound_line") {
      const Evidence::Line* line = nullptr;
      for (const auto& l : e.lines)
        if (l.pipe == s.bound) {
          line = &l;
          break;
        }
      // The scalar unit issues every instruction: when it is the bound pipe, the line that
      // issues the most instructions is where its time goes.
      if (!line)
        for (const auto& l : e.lines)
          if (!line || l.instructions > line->instructions) line = &l;
      vars["heaviest"] = "";
      if (line) {
        where = line->where;
        vars["what"] = line->op;
        vars["heaviest"] = fmt::format("; its heaviest line is {} ({})", line->where, line->op);
      }
    }
    vars["where"] = where;
    split_where(where, a);
    a.text = fill(rule.text, vars);
    if (!rule.predict_metric.empty()) {
      auto it = m.find(rule.predict_metric);
      if (it != m.end())
        a.predicted_gain_pct = r2(std::clamp(it->second * rule.predict_factor, 0.0, 90.0));
    }

    if (rule.action == "info" || rule.action == "roof") {
      a.status = "info";
    } else if (rule.action == "unverified") {
      a.status = "unverified";
    } else if (rule.action == "raise_knob" || rule.action == "lower_knob") {
      if (!sim) continue;
      a.param = kn->param;
      a.from = kn->value;
      double best = base;
      int64_t best_v = kn->value;
      std::string why;
      for (int64_t v : candidates(*kn, rule.action == "raise_knob")) {
        WhatIf w;
        w.params[kn->param] = v;
        WhatIfResult r = sim(w);
        if (r.ok) {
          a.tried.push_back(fmt::format("{}={}: {:.0f} cycles ({:+.1f}%)", kn->param, v, r.cycles,
                                        -gain(r.cycles)));
          if (r.cycles < best) {
            best = r.cycles;
            best_v = v;
          }
        } else {
          a.tried.push_back(fmt::format("{}={}: rejected: {}", kn->param, v, r.reason));
          if (why.empty()) why = r.reason;
        }
      }
      a.to = best_v;
      a.verified_gain_pct = gain(best);
      a.status = best_v == kn->value ? "rejected" : "verified";
      vars["to"] = std::to_string(best_v);
      a.text = fill(a.text, vars);
    } else if (rule.action == "whatif" && a.status.empty()) {
      if (!sim) continue;
      WhatIf w;
      if (rule.whatif == "no_barriers") w.no_barriers = true;
      if (rule.whatif == "zero_sync") w.zero_sync = true;
      if (rule.whatif == "zero_issue") w.zero_issue = true;
      if (rule.whatif == "vectorise")
        for (const auto& l : e.scalar_loops)
          w.free_sites.insert(w.free_sites.end(), l.ops.begin(), l.ops.end());
      if (rule.whatif == "fuse")
        for (const auto& u : e.unfused) w.free_sites.push_back(u.where);
      if (rule.whatif.rfind("faster:", 0) == 0) w.faster_pipe = rule.whatif.substr(7);
      WhatIfResult r = sim(w);
      if (!r.ok) continue;
      a.tried.push_back(fmt::format("what-if {}: {:.0f} cycles", rule.whatif, r.cycles));
      a.verified_gain_pct = gain(r.cycles);
      a.status = "verified";
    }
    if ((a.status == "verified" || a.status == "rejected") &&
        a.verified_gain_pct < rules.min_verified_gain_pct) {
      if (dropped) dropped->push_back(std::move(a));
      continue;
    }
    out.push_back(std::move(a));
  }
  if (at_roof) {  // already at a roof: no knob advice
    std::erase_if(out, [](const Advice& a) { return a.status == "verified" || a.param; });
  }
  auto rank = [&](const Advice& a) {
    if (a.status == "verified")
      return a.scope == "core" && a.verified_gain_pct >= rules.core_first_min_gain_pct ? 0 : 1;
    return a.status == "unverified" ? 2 : 3;
  };
  std::stable_sort(out.begin(), out.end(), [&](const Advice& x, const Advice& y) {
    if (rank(x) != rank(y)) return rank(x) < rank(y);
    if (rank(x) <= 1 && x.verified_gain_pct != y.verified_gain_pct)
      return x.verified_gain_pct > y.verified_gain_pct;
    if (rank(x) == 2 && x.predicted_gain_pct != y.predicted_gain_pct)
      return x.predicted_gain_pct > y.predicted_gain_pct;
    return false;  // table order
  });
  return out;
}

nlohmann::ordered_json to_json(const std::vector<Advice>& advice) {
  using json = nlohmann::ordered_json;
  json out = json::array();
  for (const auto& a : advice) {
    json ev = json::array();
    for (const auto& i : a.evidence)
      ev.push_back(
          {{"metric", i.metric}, {"value", i.value}, {"op", i.op}, {"threshold", i.threshold}});
    json j = {{"id", a.id},
              {"title", a.title},
              {"severity", a.severity},
              {"evidence", ev},
              {"where", {{"file", a.file}, {"line", a.line}}}};
    if (a.param)
      j["suggest"] = {{"param", *a.param}, {"from", a.from}, {"to", a.to}, {"text", a.text}};
    else
      j["suggest"] = {{"text", a.text}};
    j["predicted_gain_pct"] = a.predicted_gain_pct;
    if (a.status == "verified" || a.status == "rejected")
      j["verified_gain_pct"] = a.verified_gain_pct;
    else
      j["verified_gain_pct"] = nullptr;
    j["status"] = a.status;
    j["what_if"] = a.tried;
    out.push_back(j);
  }
  return out;
}

std::string to_text(const std::vector<Advice>& advice) {
  std::string o = "advice:\n";
  int n = 0;
  for (const auto& a : advice) {
    std::string gain =
        a.status == "verified" ? fmt::format("verified {:+.1f}%", a.verified_gain_pct) : a.status;
    o += fmt::format("  {}. [{}] {} ({}){}\n", ++n, a.id, a.title, gain,
                     a.file.empty() ? "" : fmt::format(" at {}:{}", a.file, a.line));
    if (!a.text.empty()) o += fmt::format("     {}\n", a.text);
  }
  return o;
}

std::vector<std::string> model_limits() {
  return {"DMA efficiency is fitted to three HBM copy anchors and assumed the same for L2 hits",
          "no UB/L1 bank conflicts, no scalar data cache",
          "L2 residency follows processing order and CLOCK eviction; bandwidth sharing is "
          "approximate",
          "advice verifies one change at a time by re-simulation; combined changes are not "
          "predicted, and gains carry the simulator's error (docs/fidelity.md)",
          "kernel structure (buffer counts, fusion, vectorisation) is verified by what-if runs "
          "that remove the cost (barriers, issue, the mul), not by rewriting the kernel"};
}

}  // namespace tilepipe::prof

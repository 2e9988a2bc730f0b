// Two reports compared (contract in include/tilepipe/diff.h).
#include "tilepipe/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace tilepipe::prof {
namespace {

using json = nlohmann::ordered_json;

// The pipes a diff compares, in the report's order (Cube M first).
const char* const kPipes[] = {"M", "V", "MTE1", "MTE2", "MTE3", "FIX", "S"};
const char* const kPipeFields[] = {"busy_pct", "wait_flag_pct", "wait_dep_pct", "instructions"};

double num(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0;
}

/// {a, b, delta}: the one shape of every compared number.
json pair(double a, double b) {
  return {{"a", a}, {"b", b}, {"delta", b - a}};
}

/// What ran, and as one line for the text and the page: "fa [expert] on a3 S=1024 ...".
json side(const json& r) {
  json s = {{"kernel", r.value("kernel", "")},
            {"variant", r.value("variant", "")},
            {"chip", r.value("chip", "")},
            {"mode", r.value("mode", "")},
            {"params", r.value("params", json::object())}};
  std::string params;
  for (auto it = s["params"].begin(); it != s["params"].end(); ++it)
    params += fmt::format(" {}={}", it.key(), it.value().dump());
  s["label"] = fmt::format("{} [{}] on {}{}", s["kernel"].get<std::string>(),
                           s["variant"].get<std::string>(), s["chip"].get<std::string>(), params);
  return s;
}

struct LineKey {
  std::string file;
  int line;
  bool operator<(const LineKey& o) const { return std::tie(file, line) < std::tie(o.file, o.line); }
};

/// The report's lines by file and line (pointers into `r`, which has "lines").
std::map<LineKey, const json*> lines_of(const json& r) {
  std::map<LineKey, const json*> m;
  for (const auto& l : r["lines"]) m[{l.value("file", ""), l.value("line", 0)}] = &l;
  return m;
}

/// The per-line part: lines of either report, by |cycles delta|, largest first.
void diff_lines(const json& a, const json& b, json& out) {
  const bool have_a = a.contains("lines"), have_b = b.contains("lines");
  json lines = json::array();
  double sum = 0;
  if (have_a && have_b) {
    auto la = lines_of(a), lb = lines_of(b);
    std::map<LineKey, std::pair<const json*, const json*>> both;
    for (const auto& [k, l] : la) both[k].first = l;
    for (const auto& [k, l] : lb) both[k].second = l;
    std::vector<json> rows;
    for (const auto& [k, p] : both) {
      const json none = json::object();
      const json& x = p.first ? *p.first : none;
      const json& y = p.second ? *p.second : none;
      json row = {{"file", k.file},
                  {"line", k.line},
                  {"op", (p.second ? y : x).value("op", "")},
                  {"pipe", (p.second ? y : x).value("pipe", "")},
                  {"cycles", pair(num(x, "cycles"), num(y, "cycles"))},
                  {"busy_cycles", pair(num(x, "busy_cycles"), num(y, "busy_cycles"))},
                  {"stall_cycles", pair(num(x, "stall_cycles"), num(y, "stall_cycles"))},
                  {"instructions", pair(num(x, "instructions"), num(y, "instructions"))}};
      if (!p.first) row["only_in"] = "b";
      if (!p.second) row["only_in"] = "a";
      sum += row["cycles"]["delta"].get<double>();
      rows.push_back(std::move(row));
    }
    std::stable_sort(rows.begin(), rows.end(), [](const json& x, const json& y) {
      return std::abs(x["cycles"]["delta"].get<double>()) >
             std::abs(y["cycles"]["delta"].get<double>());
    });
    for (auto& r : rows) lines.push_back(std::move(r));
  }
  out["lines"] = lines;
  const json& ma = a.value("line_attribution", json::object());
  const json& mb = b.value("line_attribution", json::object());
  json check = {{"available", have_a && have_b},
                {"core", {{"a", ma.value("core", "")}, {"b", mb.value("core", "")}}},
                {"lines_cycles_delta", sum},
                {"launch_cycles", pair(num(ma, "launch_cycles"), num(mb, "launch_cycles"))}};
  if (!(have_a && have_b))
    check["note"] = fmt::format(
        "report {} has no per-line cycles: write it with `tilepipe profile ... --json` or "
        "`tilepipe run ... --lines --json`",
        have_a ? "B" : "A");
  out["lines_total"] = check;
}

std::string signed_num(double v, int digits = 0) {
  return fmt::format("{:+.{}f}", v, digits);
}

/// The paragraph: the time, the largest pipe and instruction changes, the lines that
/// changed most, the bound.
std::string what_changed(const json& d) {
  if (d["no_change"].get<bool>()) return "no change: every number is the same in A and B.";
  const json& c = d["cycles"];
  const double ca = c["a"].get<double>(), cb = c["b"].get<double>();
  std::string o = fmt::format(
      "B takes {:.0f} cycles ({:.2f} us), {} against A's {:.0f} ({:.2f} us)", cb,
      d["time_us"]["b"].get<double>(),
      ca > 0 ? fmt::format("{:+.1f} %", 100 * (cb - ca) / ca) : signed_num(cb - ca) + " cycles", ca,
      d["time_us"]["a"].get<double>());
  o += fmt::format("; kernel-only {:.2f} -> {:.2f} us. ", d["kernel_us"]["a"].get<double>(),
                   d["kernel_us"]["b"].get<double>());
  std::vector<std::pair<double, std::string>> busy, instr;
  for (auto it = d["pipes"].begin(); it != d["pipes"].end(); ++it) {
    const json& p = it.value();
    double db = p["busy_pct"]["delta"].get<double>();
    if (std::abs(db) >= 0.05)
      busy.push_back(
          {std::abs(db), fmt::format("{} busy {:.1f} -> {:.1f} % ({} points)", it.key(),
                                     p["busy_pct"]["a"].get<double>(),
                                     p["busy_pct"]["b"].get<double>(), signed_num(db, 1))});
    double di = p["instructions"]["delta"].get<double>();
    if (di != 0)
      instr.push_back({std::abs(di), fmt::format("{} {:.0f} -> {:.0f}", it.key(),
                                                 p["instructions"]["a"].get<double>(),
                                                 p["instructions"]["b"].get<double>())});
  }
  auto top = [](std::vector<std::pair<double, std::string>> v, size_t n) {
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    std::string s;
    for (size_t i = 0; i < v.size() && i < n; ++i) s += (i ? ", " : "") + v[i].second;
    return s;
  };
  if (!busy.empty()) o += "Largest pipe changes: " + top(busy, 3) + ". ";
  if (!instr.empty()) o += "Instructions per pipe: " + top(instr, 3) + ". ";
  std::string lines;
  int n = 0;
  for (const auto& l : d["lines"]) {
    double dl = l["cycles"]["delta"].get<double>();
    if (std::abs(dl) < 0.5 || n == 3) break;
    lines += fmt::format("{}{}:{} ({}) {} cycles", n++ ? ", " : "", l["file"].get<std::string>(),
                         l["line"].get<int>(), l["op"].get<std::string>(), signed_num(dl));
  }
  if (!lines.empty()) o += "Lines that changed most: " + lines + ". ";
  const json& bd = d["bound"];
  const json& vd = d["verdict"];
  o += bd["changed"].get<bool>() || vd["changed"].get<bool>()
           ? fmt::format("The bound moved from {} ({}) to {} ({}).", bd["a"].get<std::string>(),
                         vd["a"].get<std::string>(), bd["b"].get<std::string>(),
                         vd["b"].get<std::string>())
           : fmt::format("The bound stays {} ({}).", bd["a"].get<std::string>(),
                         vd["a"].get<std::string>());
  return o;
}

/// True when every "delta" under `j` is 0 and nothing "changed".
bool all_zero(const json& j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key().find("delta") != std::string::npos && it.value().is_number() &&
          it.value().get<double>() != 0)
        return false;
      if (it.key() == "changed" && it.value().is_boolean() && it.value().get<bool>()) return false;
      if (!all_zero(it.value())) return false;
    }
  } else if (j.is_array()) {
    for (const auto& x : j)
      if (!all_zero(x)) return false;
  }
  return true;
}

}  // namespace

std::string report_problem(const json& r) {
  if (!r.is_object()) return "not a JSON object";
  if (r.contains("error"))
    return fmt::format("an error report ({})",
                       r["error"].is_string() ? r["error"].get<std::string>() : r["error"].dump());
  for (const char* key : {"kernel", "variant", "chip", "bound", "verdict"})
    if (!r.contains(key) || !r[key].is_string()) return fmt::format("no string '{}'", key);
  for (const char* key : {"cycles", "time_us"})
    if (!r.contains(key) || !r[key].is_number()) return fmt::format("no number '{}'", key);
  if (!r.contains("pipes") || !r["pipes"].is_object()) return "no 'pipes' object";
  if (r.contains("lines") && !r["lines"].is_array()) return "'lines' is not an array";
  return "";
}

json diff_reports(const json& a, const json& b) {
  json d;
  d["a"] = side(a);
  d["b"] = side(b);
  d["same_kernel"] = a["kernel"] == b["kernel"];
  json notes = json::array();
  if (a["kernel"] != b["kernel"])
    notes.push_back(
        fmt::format("A and B are different kernels ({} and {}): lines and "
                    "instructions compare unlike programs",
                    a["kernel"].get<std::string>(), b["kernel"].get<std::string>()));
  if (a["chip"] != b["chip"])
    notes.push_back(fmt::format("A and B ran on different chips ({} and {})",
                                a["chip"].get<std::string>(), b["chip"].get<std::string>()));
  d["notes"] = notes;
  d["cycles"] = pair(num(a, "cycles"), num(b, "cycles"));
  d["cycles"]["delta_pct"] =
      num(a, "cycles") > 0 ? 100 * (num(b, "cycles") - num(a, "cycles")) / num(a, "cycles") : 0;
  for (const char* key : {"time_us", "kernel_us", "launch_us"})
    d[key] = pair(num(a, key), num(b, key));
  d["bound"] = {{"a", a["bound"]}, {"b", b["bound"]}, {"changed", a["bound"] != b["bound"]}};
  d["verdict"] = {
      {"a", a["verdict"]}, {"b", b["verdict"]}, {"changed", a["verdict"] != b["verdict"]}};
  json pipes = json::object();
  const json none = json::object();
  for (const char* p : kPipes) {
    const json& pa = a["pipes"].contains(p) ? a["pipes"][p] : none;
    const json& pb = b["pipes"].contains(p) ? b["pipes"][p] : none;
    json row = json::object();
    for (const char* f : kPipeFields) row[f] = pair(num(pa, f), num(pb, f));
    pipes[p] = row;
  }
  d["pipes"] = pipes;
  d["instructions"] = pair(num(a, "instructions"), num(b, "instructions"));
  diff_lines(a, b, d);
  d["no_change"] = all_zero(d);
  d["what_changed"] = what_changed(d);
  return d;
}

std::string diff_text(const json& d, size_t max_lines) {
  std::string o = fmt::format("A: {}\nB: {}\n", d["a"]["label"].get<std::string>(),
                              d["b"]["label"].get<std::string>());
  for (const auto& n : d["notes"]) o += "note: " + n.get<std::string>() + "\n";
  o += d["what_changed"].get<std::string>() + "\n";
  if (d["no_change"].get<bool>()) return o;
  o += fmt::format("  {:<6} {:>8} {:>8} {:>8}  {:>10} {:>12} {:>12} {:>10}\n", "pipe", "busy% A",
                   "busy% B", "delta", "wait-flag", "instr A", "instr B", "delta");
  for (auto it = d["pipes"].begin(); it != d["pipes"].end(); ++it) {
    const json& p = it.value();
    o += fmt::format("  {:<6} {:>8.2f} {:>8.2f} {:>8} {:>10} {:>12.0f} {:>12.0f} {:>10}\n",
                     it.key(), p["busy_pct"]["a"].get<double>(), p["busy_pct"]["b"].get<double>(),
                     signed_num(p["busy_pct"]["delta"].get<double>(), 2),
                     signed_num(p["wait_flag_pct"]["delta"].get<double>(), 2),
                     p["instructions"]["a"].get<double>(), p["instructions"]["b"].get<double>(),
                     signed_num(p["instructions"]["delta"].get<double>()));
  }
  const json& lt = d["lines_total"];
  if (!lt["available"].get<bool>()) return o + "per-line: " + lt["note"].get<std::string>() + "\n";
  o += fmt::format("  {:<28} {:>12} {:>12} {:>12} {:>12}  {}\n", "line", "cycles A", "cycles B",
                   "delta", "stall delta", "op");
  size_t n = 0;
  for (const auto& l : d["lines"]) {
    if (n++ == max_lines || l["cycles"]["delta"].get<double>() == 0) break;
    o += fmt::format(
        "  {:<28} {:>12.0f} {:>12.0f} {:>12} {:>12}  {}{}\n",
        fmt::format("{}:{}", l["file"].get<std::string>(), l["line"].get<int>()),
        l["cycles"]["a"].get<double>(), l["cycles"]["b"].get<double>(),
        signed_num(l["cycles"]["delta"].get<double>()),
        signed_num(l["stall_cycles"]["delta"].get<double>()), l["op"].get<std::string>(),
        l.contains("only_in") ? " (only in " + l["only_in"].get<std::string>() + ")" : "");
  }
  o += fmt::format(
      "  the lines' deltas sum to {} cycles, the launch's {}: {} together, the cycles' delta is "
      "{}\n",
      signed_num(lt["lines_cycles_delta"].get<double>(), 2),
      signed_num(lt["launch_cycles"]["delta"].get<double>(), 2),
      signed_num(
          lt["lines_cycles_delta"].get<double>() + lt["launch_cycles"]["delta"].get<double>(), 2),
      signed_num(d["cycles"]["delta"].get<double>(), 2));
  return o;
}

}  // namespace tilepipe::prof

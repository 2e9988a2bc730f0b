// The HTML report writer (contract in include/tilepipe/html.h).
#include "tilepipe/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "tilepipe/prof.h"

namespace tilepipe::prof {
namespace {

using json = nlohmann::ordered_json;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string num(double v, int digits = 1) {
  return fmt::format("{:.{}f}", v, digits);
}

double d(const json& j, const char* k, double def = 0) {
  return j.contains(k) && j[k].is_number() ? j[k].get<double>() : def;
}
std::string s(const json& j, const char* k) {
  return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "";
}

json strip_wall(const json& j) {
  if (j.is_object()) {
    json o = json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      if (k.size() >= 6 && k.compare(k.size() - 6, 6, "wall_s") == 0) continue;
      o[k] = strip_wall(it.value());
    }
    return o;
  }
  if (j.is_array()) {
    json a = json::array();
    for (const auto& x : j) a.push_back(strip_wall(x));
    return a;
  }
  return j;
}

const char* kCss =
    R"(body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}
.verdict{background:#f4f6fa;border-left:4px solid #3b6fb6;padding:8px 12px}
.card{border:1px solid #ccd;border-radius:6px;padding:8px 12px;margin:8px 0}
.card.high{border-left:5px solid #c0392b}.card.medium{border-left:5px solid #e67e22}
.card.low{border-left:5px solid #7f8c8d}.card.info{border-left:5px solid #3b6fb6}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
.gain{font-weight:bold;color:#1e7b34}.muted{color:#777}svg{display:block;margin:6px 0}
)";

// Cycle-account categories and their colours (busy first).
const std::vector<std::pair<std::string, std::string>> kCats = {
    {"busy", "#2e86de"},  {"flag", "#f39c12"},    {"slot", "#e67e22"},
    {"dep", "#9b59b6"},   {"barrier", "#c0392b"}, {"cross", "#e74c3c"},
    {"issue", "#16a085"}, {"head", "#bdc3c7"},    {"tail", "#dfe4ea"}};

std::string legend(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string o = "<p>";
  for (const auto& [n, c] : items)
    o += fmt::format(
        "<svg width=\"12\" height=\"12\" style=\"display:inline;margin:0 4px 0 10px\">"
        "<rect width=\"12\" height=\"12\" fill=\"{}\"/></svg>{}",
        c, esc(n));
  return o + "</p>\n";
}

std::string advice_cards(const json& advice) {
  std::string o;
  int n = 0;
  for (const auto& a : advice) {
    std::string sev = s(a, "severity");
    o += fmt::format("<div class=\"card {}\"><b>{}. {}</b> <span class=\"muted\">[{}]</span>",
                     esc(sev), ++n, esc(s(a, "title")), esc(s(a, "id")));
    if (a.contains("verified_gain_pct") && a["verified_gain_pct"].is_number())
      o += fmt::format(" <span class=\"gain\">verified {:+.1f}%</span>",
                       a["verified_gain_pct"].get<double>());
    o += fmt::format(" <span class=\"muted\">predicted {:.1f}%, {}</span>",
                     d(a, "predicted_gain_pct"), esc(s(a, "status")));
    const auto& w = a["where"];
    if (!s(w, "file").empty())
      o += fmt::format(" at <code>{}:{}</code>", esc(s(w, "file")), w.value("line", 0));
    const auto& sg = a["suggest"];
    if (sg.contains("param"))
      o += fmt::format("<p>set <code>{}</code> {} &#8594; {}</p>", esc(s(sg, "param")),
                       sg.value("from", 0), sg.value("to", 0));
    if (!s(sg, "text").empty()) o += "<p>" + esc(s(sg, "text")) + "</p>";
    o += "<table><tr><th>evidence</th><th>value</th><th>rule</th></tr>";
    for (const auto& e : a["evidence"])
      o += fmt::format("<tr><td>{}</td><td>{}</td><td>{} {}</td></tr>", esc(s(e, "metric")),
                       num(d(e, "value"), 2), esc(s(e, "op")), num(d(e, "threshold"), 2));
    o += "</table>";
    if (a.contains("what_if") && !a["what_if"].empty()) {
      o += "<p class=\"muted\">what-if runs: ";
      bool first = true;
      for (const auto& t : a["what_if"]) {
        o += (first ? "" : "; ") + esc(t.get<std::string>());
        first = false;
      }
      o += "</p>";
    }
    o += "</div>\n";
  }
  if (advice.empty()) o += "<p>No advice: no rule's evidence holds.</p>\n";
  return o;
}

/// Horizontal stacked bars, one per row: label + values (as % of 100).
std::string stacked(const std::vector<std::pair<std::string, std::vector<double>>>& rows,
                    const std::vector<std::pair<std::string, std::string>>& cats) {
  const int lw = 110, w = 760, h = 18;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">\n",
      lw + w + 10, static_cast<int>(rows.size()) * (h + 4) + 4);
  int y = 2;
  for (const auto& [label, vals] : rows) {
    o += fmt::format("<text x=\"0\" y=\"{}\" font-size=\"12\">{}</text>", y + 13, esc(label));
    double x = lw;
    for (size_t i = 0; i < vals.size() && i < cats.size(); ++i) {
      double ww = std::max(0.0, vals[i]) * w / 100.0;
      if (ww > 0.05)
        o += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{} "
            "{:.1f}%</title></rect>",
            x, y, ww, h, cats[i].second, esc(cats[i].first), vals[i]);
      x += ww;
    }
    o += "\n";
    y += h + 4;
  }
  return o + "</svg>\n";
}

std::string bars(const std::vector<std::pair<std::string, double>>& rows, double max,
                 const std::string& unit, const std::string& color, double mark = -1,
                 const std::string& mark_label = "") {
  const int lw = 150, w = 600, h = 18;
  if (max <= 0) max = 1;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">\n",
      lw + w + 120, static_cast<int>(rows.size()) * (h + 4) + 20);
  int y = 2;
  for (const auto& [label, v] : rows) {
    double ww = std::max(0.0, v) * w / max;
    o += fmt::format(
        "<text x=\"0\" y=\"{}\" font-size=\"12\">{}</text><rect x=\"{}\" y=\"{}\" "
        "width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/><text x=\"{:.1f}\" y=\"{}\" "
        "font-size=\"11\">{} {}</text>\n",
        y + 13, esc(label), lw, y, ww, h, color, lw + ww + 4, y + 13, num(v), esc(unit));
    y += h + 4;
  }
  if (mark >= 0) {
    double x = lw + mark * w / max;
    o += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"0\" x2=\"{0:.1f}\" y2=\"{1}\" stroke=\"#c0392b\" "
        "stroke-dasharray=\"4 3\"/><text x=\"{2:.1f}\" y=\"{3}\" font-size=\"11\" "
        "fill=\"#c0392b\">{4}</text>\n",
        x, y, x + 3, y + 12, esc(mark_label));
  }
  return o + "</svg>\n";
}

std::string timeline(const json& tl) {
  if (!tl.contains("rows") || tl["rows"].empty()) return "<p>No timeline recorded.</p>\n";
  // Mean over the cores of each kind, per pipe, then the first AI core's rows in full.
  std::map<std::string, std::vector<double>> mean;
  std::map<std::string, int> count;
  size_t bins = 0;
  for (const auto& r : tl["rows"]) {
    std::string core = s(r, "core");
    std::string kind = core.find("AIC") != std::string::npos ? "AIC" : "AIV";
    std::string key = kind + " " + s(r, "pipe") + " (mean)";
    auto& v = mean[key];
    const auto& b = r["busy"];
    bins = std::max(bins, b.size());
    if (v.size() < b.size()) v.resize(b.size(), 0);
    for (size_t i = 0; i < b.size(); ++i) v[i] += b[i].get<double>();
    ++count[key];
  }
  std::vector<std::pair<std::string, std::vector<double>>> rows;
  for (auto& [k, v] : mean) {
    for (auto& x : v) x /= count[k];
    rows.push_back({k, v});
  }
  for (const auto& r : tl["rows"]) {
    std::string core = s(r, "core");
    if (core.rfind("core0.", 0) != 0) continue;
    std::vector<double> v;
    for (const auto& x : r["busy"]) v.push_back(x.get<double>());
    rows.push_back({core + " " + s(r, "pipe"), v});
  }
  const int lw = 150, w = 720, h = 12;
  double bw = bins ? static_cast<double>(w) / static_cast<double>(bins) : w;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">\n",
      lw + w + 10, static_cast<int>(rows.size()) * (h + 2) + 20);
  int y = 2;
  for (const auto& [label, v] : rows) {
    o += fmt::format("<text x=\"0\" y=\"{}\" font-size=\"10\">{}</text>", y + 10, esc(label));
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f4f6fa\"/>", lw, y,
                     w, h);
    for (size_t i = 0; i < v.size(); ++i) {
      double f = std::clamp(v[i], 0.0, 1.0);
      if (f < 0.01) continue;
      o += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"#2e86de\" "
          "fill-opacity=\"{:.2f}\"/>",
          lw + bw * static_cast<double>(i), y, bw, h, f);
    }
    o += "\n";
    y += h + 2;
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\">0</text>", lw, y + 12);
  o += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\">{:.0f} cycles</text>\n", lw + w,
      y + 12, d(tl, "bin_cycles") * static_cast<double>(bins));
  return o + "</svg>\n";
}

/// Cycles per source line on the critical core (the report's "lines"), costliest first.
std::string line_table(const json& p) {
  if (!p.contains("lines")) return "";
  const json& meta = p["line_attribution"];
  std::string o = "<h2>Cycles per source line</h2>\n";
  if (meta.contains("unavailable")) return o + "<p>" + esc(s(meta, "unavailable")) + "</p>\n";
  const double span = d(meta, "cycles", 1);
  o += fmt::format(
      "<p class=\"muted\">Every cycle of the critical core {} given to one line: running "
      "instructions share a stretch, an idle stretch goes to the instruction that starts next "
      "(stall; what released it); {:.0f} launch cycles belong to no line.</p>\n",
      esc(s(meta, "core")), d(meta, "launch_cycles"));
  o += "<table><tr><th>line</th><th>op</th><th>cycles</th><th>%</th><th>busy</th><th>stall</th>"
       "<th>waits on</th></tr>\n";
  size_t n = 0;
  for (const auto& l : p["lines"]) {
    if (n++ == 25) break;
    std::string waits;
    for (auto it = l["waits_on"].begin(); it != l["waits_on"].end(); ++it)
      waits +=
          fmt::format("{}{} {:.0f}", waits.empty() ? "" : ", ", it.key(), it.value().get<double>());
    o += fmt::format(
        "<tr><td><code>{}:{}</code></td><td>{}</td><td>{:.0f}</td><td>{:.1f}</td><td>{:.0f}</td>"
        "<td>{:.0f}</td><td>{}</td></tr>\n",
        esc(s(l, "file")), l.value("line", 0), esc(s(l, "op")), d(l, "cycles"),
        100 * d(l, "cycles") / span, d(l, "busy_cycles"), d(l, "stall_cycles"), esc(waits));
  }
  return o + "</table>\n";
}

/// The report's data dependence (driver::inputs_json): the time holds for the input values
/// it ran on only, and where they came from.
std::string data_note(const json& p) {
  if (!p.contains("data_dependent") || !p["data_dependent"].value("depends", false)) return "";
  return "<div class=\"verdict\"><b>Data-dependent:</b> " + esc(s(p["data_dependent"], "note")) +
         "</div>\n";
}

std::string profile_sections(const json& p) {
  std::string o;
  o += fmt::format(
      "<div class=\"verdict\"><b>Verdict: {} bound</b>, busiest pipe <b>{}</b>; {:.0f} cycles "
      "({:.2f} us) on {}, {} [{}]</div>\n",
      esc(s(p, "verdict")), esc(s(p, "bound")), d(p, "cycles"), d(p, "time_us"), esc(s(p, "chip")),
      esc(s(p, "kernel")), esc(s(p, "variant")));
  o += data_note(p);
  o += "<h2>Advice (ranked)</h2>\n" + advice_cards(p.value("advice", json::array()));
  o += line_table(p);
  const json& ev = p["evidence"];
  o += "<h2>Timeline overview</h2>\n<p class=\"muted\">Busy fraction per time bin: mean over "
       "the cores of each kind, then core 0's pipes.</p>\n";
  o += timeline(p.value("timeline", json::object()));
  o += "<h2>Where each pipe's cycles go</h2>\n";
  std::vector<std::pair<std::string, std::vector<double>>> rows;
  for (const auto& a : ev["accounts"]) {
    std::vector<double> v;
    for (const auto& [c, col] : kCats) v.push_back(d(a, (c + "_pct").c_str()));
    rows.push_back({s(a, "kind") + " " + s(a, "pipe"), v});
  }
  o += legend(kCats) + stacked(rows, kCats);
  o += "<h2>Cube / Vector balance</h2>\n";
  double m = 0, v = 0;
  for (const auto& a : ev["accounts"]) {
    if (s(a, "kind") == "AIC" && s(a, "pipe") == "M") m = d(a, "busy_pct");
    if (s(a, "kind") == "AIV" && s(a, "pipe") == "V") v = d(a, "busy_pct");
  }
  o += bars({{"Cube (AIC M)", m}, {"Vector (AIV V)", v}}, 100, "% busy", "#8e44ad");
  o += fmt::format("<p>cube_vector_ratio (M busy / V busy, all cores) = {}</p>\n",
                   num(d(p, "cube_vector_ratio"), 2));
  o += "<h2>Roofline</h2>\n<p class=\"muted\">Busiest core's occupancy of each pipe: no "
       "schedule of this program beats the longest bar; the dashed line is the kernel's "
       "time.</p>\n";
  std::vector<std::pair<std::string, double>> roof;
  for (const auto& a : ev["accounts"])
    roof.push_back({s(a, "kind") + " " + s(a, "pipe"), d(a, "roofline_cycles")});
  double span = d(ev, "span_cycles");
  o += bars(roof, span, "cycles", "#27ae60", span, "kernel time");
  o += "<h2>Memory per scope</h2>\n";
  std::vector<std::pair<std::string, double>> mem;
  std::string largest;
  for (auto it = ev["scopes"].begin(); it != ev["scopes"].end(); ++it) {
    double cap = d(*it, "capacity_bytes", 1);
    mem.push_back({it.key(), 100.0 * d(*it, "used_bytes") / cap});
    if (!s(*it, "largest").empty())
      largest += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1f} KiB</td></tr>",
                             esc(it.key()), esc(s(*it, "largest")), esc(s(*it, "largest_where")),
                             d(*it, "largest_bytes") / 1024);
  }
  o += bars(mem, 100, "% of capacity", "#d35400", 100, "capacity");
  if (!largest.empty())
    o += "<table><tr><th>scope</th><th>largest buffer</th><th>where</th><th>size</th></tr>" +
         largest + "</table>\n";
  if (p.contains("model_limits")) {
    o += "<h2>What the model does not cover</h2>\n<ul>";
    for (const auto& l : p["model_limits"]) o += "<li>" + esc(l.get<std::string>()) + "</li>";
    o += "</ul>\n";
  }
  return o;
}

std::string ladder_sections(const json& l) {
  std::string o = "<h2>Optimisation ladder</h2>\n";
  std::vector<std::pair<std::string, double>> rows;
  double mx = 0;
  for (const auto& st : l["steps"]) {
    rows.push_back({s(st, "name"), d(st, "time_us")});
    mx = std::max(mx, d(st, "time_us"));
  }
  double ref = d(l, "reference_us", -1);
  o += bars(rows, std::max(mx, ref), "us", "#2e86de", ref > 0 ? ref : -1,
            ref > 0 ? "reference " + esc(s(l, "reference")) : "");
  o += "<table><tr><th>step</th><th>time us</th><th>speedup</th><th>% ref</th><th>bound</th>"
       "<th>first advice</th></tr>\n";
  const json profiles = l.value("profiles", json::array());
  size_t i = 0;
  for (const auto& st : l["steps"]) {
    std::string first = "-";
    if (i < profiles.size() && !profiles[i]["advice"].empty()) {
      const auto& a = profiles[i]["advice"][0];
      first = esc(s(a, "id")) + ": " + esc(s(a, "title"));
      if (a["verified_gain_pct"].is_number())
        first += fmt::format(" (verified {:+.1f}%)", a["verified_gain_pct"].get<double>());
    }
    o += fmt::format(
        "<tr><td>{}</td><td>{:.1f}</td><td>{:.2f}x</td><td>{}</td><td>{} "
        "({})</td><td>{}</td></tr>\n",
        esc(s(st, "name")), d(st, "time_us"), d(st, "speedup_vs_prev"),
        ref > 0 ? num(d(st, "pct_of_reference")) + "%" : "-", esc(s(st, "bound")),
        esc(s(st, "verdict")), first);
    ++i;
  }
  o += "</table>\n";
  for (size_t k = 0; k < profiles.size(); ++k)
    o += fmt::format(
        "<details><summary>Step {}: {} &#8212; profile and advice</summary>\n{}</details>\n", k + 1,
        esc(s(profiles[k], "variant")), profile_sections(profiles[k]));
  return o;
}

/// Heat map of the tune space: the first dimension down, the second across (one column for
/// a 1-D space); each axis named once, its values as row and column headers; cells sized to
/// their widest text so no label overlaps another; a cell's tooltip has its status and reason.
std::string heat_map(const json& t, const std::vector<std::string>& dims,
                     const std::function<std::string(double)>& cell_color) {
  const json xs = dims.size() > 1 ? t["space"][dims[1]] : json::array({nullptr});
  const json& ys = t["space"][dims[0]];
  auto find = [&](const json& y, const json& x) -> const json* {
    const json* found = nullptr;
    for (const auto& c : t["configs"]) {
      bool match = c["params"].value(dims[0], int64_t{-1}) == y.get<int64_t>();
      if (!x.is_null())
        match = match && c["params"].value(dims[1], int64_t{-1}) == x.get<int64_t>();
      if (match) found = &c;
    }
    return found;
  };
  auto label_of = [&](const json* c) {
    if (!c) return std::string("-");
    return (*c)["time_us"].is_number() ? num((*c)["time_us"].get<double>(), 1) : s(*c, "status");
  };
  // About 7 px per character at 12 px (digits and lower case), plus padding.
  auto px = [](const std::string& text) { return 7 * static_cast<int>(text.size()) + 16; };
  int cw = 64;
  for (const auto& x : xs) {
    if (!x.is_null()) cw = std::max(cw, px(x.dump()));
    for (const auto& y : ys) cw = std::max(cw, px(label_of(find(y, x))));
  }
  int lw = px(dims[0] + " \u2193");
  for (const auto& y : ys) lw = std::max(lw, px(y.dump()));
  const int ch = 26, top = dims.size() > 1 ? 44 : 24;
  const int width = lw + cw * static_cast<int>(xs.size()) + 10;
  std::string o = fmt::format(
      "<p>Heat map of simulated time (us): {} down{}; green = fastest, grey = no time (hover a "
      "cell for its status).</p>\n",
      esc(dims[0]), dims.size() > 1 ? ", " + esc(dims[1]) + " across" : "");
  o += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"heat-map\" width=\"{}\" height=\"{}\" "
      "role=\"img\" font-family=\"sans-serif\">\n",
      width, top + ch * static_cast<int>(ys.size()) + 10);
  o += fmt::format("<text x=\"4\" y=\"{}\" font-size=\"12\" font-weight=\"bold\">{} &#8595;</text>",
                   top - 8, esc(dims[0]));
  if (dims.size() > 1)
    o += fmt::format(
        "<text x=\"{}\" y=\"14\" font-size=\"12\" font-weight=\"bold\" "
        "text-anchor=\"middle\">{} &#8594;</text>",
        lw + cw * static_cast<int>(xs.size()) / 2, esc(dims[1]));
  for (size_t xi = 0; xi < xs.size() && dims.size() > 1; ++xi)
    o += fmt::format(
        "<text class=\"col\" x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
        lw + cw * static_cast<int>(xi) + cw / 2, top - 8, xs[xi].dump());
  o += "\n";
  for (size_t yi = 0; yi < ys.size(); ++yi) {
    int y = top + ch * static_cast<int>(yi);
    o += fmt::format(
        "<text class=\"row\" x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"end\">{}</text>",
        lw - 8, y + 17, ys[yi].dump());
    for (size_t xi = 0; xi < xs.size(); ++xi) {
      const json* found = find(ys[yi], xs[xi]);
      int x = lw + cw * static_cast<int>(xi);
      std::string fill = "#eeeeee", tip = "not evaluated";
      if (found) {
        tip = s(*found, "status") +
              (s(*found, "reason").empty() ? "" : ": " + one_line(s(*found, "reason")));
        if ((*found)["time_us"].is_number()) fill = cell_color((*found)["time_us"].get<double>());
      }
      o += fmt::format(
          "<rect class=\"cell\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" "
          "stroke=\"#fff\"><title>{}</title></rect>"
          "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
          x, y, cw, ch, fill, esc(tip), x + cw / 2, y + 17, esc(label_of(found)));
    }
    o += "\n";
  }
  return o + "</svg>\n";
}

std::string tune_sections(const json& t) {
  std::string o = "<h2>Tuning</h2>\n";
  o += fmt::format(
      "<div class=\"verdict\">best <code>{}</code>: <b>{:.1f} us</b>; {}; {} simulated, {} "
      "cached, {} pruned, {} rejected ({} strategy)</div>\n",
      esc(t["best"]["params"].dump()), d(t, "best_time_us"),
      t["default"]["time_us"].is_number()
          ? fmt::format("default {:.1f} us; speedup {:.3f}x", d(t["default"], "time_us"),
                        d(t, "speedup_vs_default"))
          : "default rejected",
      t.value("simulated", 0), t.value("cached", 0), t.value("pruned", 0),
      t.value("rejected_count", 0), esc(s(t, "strategy")));
  o += data_note(t);
  std::vector<std::string> dims;
  for (auto it = t["space"].begin(); it != t["space"].end(); ++it) dims.push_back(it.key());
  double best = d(t, "best_time_us", 1), worst = best;
  for (const auto& c : t["configs"])
    if (c["time_us"].is_number()) worst = std::max(worst, c["time_us"].get<double>());
  auto cell_color = [&](double v) {
    double f = worst > best ? (v - best) / (worst - best) : 0;
    int r = static_cast<int>(46 + f * (231 - 46)), g = static_cast<int>(204 - f * (204 - 76)),
        b = static_cast<int>(113 - f * (113 - 60));
    return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
  };
  if (!dims.empty()) o += heat_map(t, dims, cell_color);
  const json rejected = t.value("rejected", json::array());
  if (rejected.is_array() && !rejected.empty()) {
    o += "<h3>Rejected configs</h3>\n<table "
         "id=\"rejected\"><tr><th>params</th><th>reason</th></tr>\n";
    for (const auto& x : rejected)
      o += fmt::format("<tr><td><code>{}</code></td><td>{}</td></tr>\n", esc(x["params"].dump()),
                       esc(s(x, "reason")));
    o += "</table>\n";
  }
  o += "<table><tr><th>params</th><th>status</th><th>time us</th><th>lower bound us</th>"
       "<th>bound</th><th>reason</th></tr>\n";
  for (const auto& c : t["configs"])
    o += fmt::format(
        "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></"
        "tr>\n",
        esc(c["params"].dump()), esc(s(c, "status")),
        c["time_us"].is_number() ? num(c["time_us"].get<double>()) : "-",
        c["lb_us"].is_number() ? num(c["lb_us"].get<double>()) : "-", esc(s(c, "bound")),
        esc(s(c, "reason")));
  o += "</table>\n";
  return o;
}

/// The side-by-side page of `tilepipe diff` (include/tilepipe/diff.h): A and B in columns,
/// their deltas beside them.
std::string diff_sections(const json& dj) {
  std::string o =
      "<h2>What changed</h2>\n<div class=\"verdict\">" + esc(s(dj, "what_changed")) + "</div>\n";
  for (const auto& n : dj["notes"]) o += "<p><b>note:</b> " + esc(n.get<std::string>()) + "</p>\n";
  auto row = [](const std::string& name, const json& v, int digits) {
    return fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{:+.{}f}</td></tr>\n", esc(name),
                       num(d(v, "a"), digits), num(d(v, "b"), digits), d(v, "delta"), digits);
  };
  o += "<table><tr><th></th><th>A</th><th>B</th><th>delta (B - A)</th></tr>\n";
  o += fmt::format("<tr><td>what ran</td><td>{}</td><td>{}</td><td></td></tr>\n",
                   esc(s(dj["a"], "label")), esc(s(dj["b"], "label")));
  o += row("cycles", dj["cycles"], 0) + row("time us", dj["time_us"], 2) +
       row("kernel-only us", dj["kernel_us"], 2) + row("launch us", dj["launch_us"], 2);
  o += fmt::format("<tr><td>bound (verdict)</td><td>{} ({})</td><td>{} ({})</td><td>{}</td></tr>\n",
                   esc(s(dj["bound"], "a")), esc(s(dj["verdict"], "a")), esc(s(dj["bound"], "b")),
                   esc(s(dj["verdict"], "b")),
                   dj["bound"]["changed"].get<bool>() ? "changed" : "same");
  o += "</table>\n<h2>Pipes</h2>\n<table><tr><th>pipe</th><th>busy % A</th><th>busy % B</th>"
       "<th>delta</th><th>wait-flag % delta</th><th>instructions A</th><th>instructions B</th>"
       "<th>delta</th></tr>\n";
  std::vector<std::pair<std::string, double>> busy;
  for (auto it = dj["pipes"].begin(); it != dj["pipes"].end(); ++it) {
    const json& p = it.value();
    o += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:+.2f}</td><td>{:+.2f}</td><td>{}</td>"
        "<td>{}</td><td>{:+.0f}</td></tr>\n",
        esc(it.key()), num(d(p["busy_pct"], "a"), 2), num(d(p["busy_pct"], "b"), 2),
        d(p["busy_pct"], "delta"), d(p["wait_flag_pct"], "delta"),
        num(d(p["instructions"], "a"), 0), num(d(p["instructions"], "b"), 0),
        d(p["instructions"], "delta"));
    busy.push_back({it.key() + " A", d(p["busy_pct"], "a")});
    busy.push_back({it.key() + " B", d(p["busy_pct"], "b")});
  }
  o += "</table>\n" + bars(busy, 100, "% busy", "#2e86de");
  o += "<h2>Lines that changed most</h2>\n";
  if (!dj["lines_total"]["available"].get<bool>())
    return o + "<p>" + esc(s(dj["lines_total"], "note")) + "</p>\n";
  o += "<table><tr><th>line</th><th>op</th><th>cycles A</th><th>cycles B</th><th>delta</th>"
       "<th>stall delta</th></tr>\n";
  std::vector<std::pair<std::string, double>> cyc;
  double mx = 0;
  size_t n = 0;
  for (const auto& l : dj["lines"]) {
    if (n++ == 30) break;
    const std::string where = fmt::format("{}:{}", s(l, "file"), l.value("line", 0));
    o += fmt::format(
        "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{:+.0f}</td>"
        "<td>{:+.0f}</td></tr>\n",
        esc(where), esc(s(l, "op")), num(d(l["cycles"], "a"), 0), num(d(l["cycles"], "b"), 0),
        d(l["cycles"], "delta"), d(l["stall_cycles"], "delta"));
    if (n <= 10) {
      cyc.push_back({where + " A", d(l["cycles"], "a")});
      cyc.push_back({where + " B", d(l["cycles"], "b")});
      mx = std::max({mx, d(l["cycles"], "a"), d(l["cycles"], "b")});
    }
  }
  const json& lt = dj["lines_total"];
  o += fmt::format(
      "</table>\n<p class=\"muted\">The lines' deltas sum to {:+.2f} cycles and the launch's to "
      "{:+.2f}: together the cycles' delta, {:+.2f} (critical cores {} and {}).</p>\n",
      d(lt, "lines_cycles_delta"), d(lt["launch_cycles"], "delta"),
      d(lt, "lines_cycles_delta") + d(lt["launch_cycles"], "delta"), d(dj["cycles"], "delta"),
      esc(s(lt["core"], "a")), esc(s(lt["core"], "b")));
  return o + bars(cyc, mx, "cycles", "#8e44ad");
}

/// What the report is of: kernel, variant (a ladder: its steps), parameters and chip, from
/// the report's section (every section's JSON names them), in one table at the top.
std::string report_header(const json& doc) {
  const json* sec = nullptr;
  for (const char* k : {"profile", "tune", "ladder"})
    if (doc.contains(k)) sec = &doc[k];
  if (!sec) return "";
  std::string variant = s(*sec, "variant");
  if (sec->contains("steps") && (*sec)["steps"].is_array()) {
    std::vector<std::string> steps;
    for (const auto& st : (*sec)["steps"]) steps.push_back(s(st, "name"));
    variant = fmt::format("every step: {}", fmt::join(steps, ", "));
  }
  std::vector<std::string> params;
  const json given = sec->value("params", json::object());
  if (given.is_object())
    for (auto it = given.begin(); it != given.end(); ++it)
      params.push_back(it.key() + "=" + it.value().dump());
  auto row = [](const char* key, const std::string& v) {
    return fmt::format("<tr><th>{}</th><td data-key=\"{}\">{}</td></tr>", key, key, esc(v));
  };
  return "<table id=\"report-header\">" + row("kernel", s(*sec, "kernel")) +
         row("variant", variant.empty() ? "(the kernel's only one)" : variant) +
         row("params", params.empty() ? "none" : fmt::format("{}", fmt::join(params, " "))) +
         row("chip", s(*sec, "chip")) + "</table>\n";
}

}  // namespace

std::string html_report(const nlohmann::ordered_json& doc_in) {
  json doc = strip_wall(doc_in);
  std::string title = s(doc, "title");
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
      "'unsafe-inline'\">\n";
  o += "<title>" + esc(title) + "</title>\n<style>" + kCss + "</style>\n</head>\n<body>\n";
  o += "<h1>" + esc(title) +
       "</h1>\n<p class=\"muted\">tilepipe report: simulated Ascend "
       "A2/A3 die; times are the simulator's (see docs/fidelity.md for its error).</p>\n";
  o += report_header(doc);
  if (doc.contains("ladder")) o += ladder_sections(doc["ladder"]);
  if (doc.contains("profile")) o += profile_sections(doc["profile"]);
  if (doc.contains("tune")) o += tune_sections(doc["tune"]);
  if (doc.contains("diff")) o += diff_sections(doc["diff"]);
  std::string data = doc.dump();
  for (size_t pos = data.find("</"); pos != std::string::npos; pos = data.find("</", pos + 3))
    data.replace(pos, 2, "<\\/");
  o += "<script type=\"application/json\" id=\"tilepipe-data\">" + data + "</script>\n";
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace tilepipe::prof

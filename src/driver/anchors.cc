// Anchors: on-board times and their kernels (configs/fidelity.json, a measurements CSV),
// selected by name, simulated through the driver, and their errors.
#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "tilepipe/fidelity.h"
#include "tilepipe/json_input.h"
#include "tilepipe/lang.h"

namespace tilepipe::driver {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw ParamError{fmt::format("{}: expected a readable anchors or measurements file, found {}",
                                 path, fs::exists(path, ec) ? "something else" : "no such file")};
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in && !in.eof()) throw ParamError{fmt::format("{}: cannot be read", path)};
  return s.str();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The file part of FILE.py[:NAME].
std::string python_path(const std::string& kernel) {
  static const std::regex spec(R"((.*\.py)(:[A-Za-z_][A-Za-z_0-9]*)?)");
  std::smatch m;
  return std::regex_match(kernel, m, spec) ? m[1].str() : "";
}

/// A relative Python file of an anchor file is relative to that file's directory (made
/// absolute: a Python build runs in its script's directory, and other threads keep running).
/// A measured kernel time a board can give: above a nanosecond, below a day (anything else is
/// a unit or typing mistake, and would turn every error into 0 % or inf %).
constexpr double kMinMeasuredUs = 1e-3, kMaxMeasuredUs = 86400e6;

/// The measured time `v` (microseconds) of anchor `where`, checked against the range above.
double measured_us(double v, const std::string& text, const std::string& where) {
  if (!std::isfinite(v) || v < kMinMeasuredUs || v > kMaxMeasuredUs)
    throw ParamError{fmt::format(
        "{}: measured_us '{}' is not a plausible kernel time: expected microseconds in [{:g}, "
        "{:g}] (a nanosecond to a day); check the unit and the value",
        where, text, kMinMeasuredUs, kMaxMeasuredUs)};
  return v;
}

std::string relative_to(const std::string& kernel, const std::string& origin) {
  std::string path = python_path(kernel);
  if (path.empty() || fs::path(path).is_absolute()) return kernel;
  fs::path dir = fs::absolute(origin).parent_path();
  return (dir / kernel).lexically_normal().string();
}

/// Integer parameter text from a JSON value (a number or a decimal string).
std::string param_text(const json& v, const std::string& where) {
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_string()) return v.get<std::string>();
  throw ParamError{
      fmt::format("{}: a parameter value must be an integer, found {}", where, v.dump())};
}

/// An anchor's family when it names none: its group, else its kernel (a Python file's stem).
std::string default_family(const Anchor& a) {
  if (!a.group.empty()) return a.group;
  std::string py = python_path(a.kernel.substr(0, a.kernel.find(' ')));  // a CSV's args follow
  return py.empty() ? a.kernel : fs::path(py).stem().string();
}

/// "sources": {ID: {"citation", "protocol": {"l2", "launch", "timer", "evidence"}}}.
std::map<std::string, std::pair<std::string, Protocol>> parse_sources(const json& root,
                                                                      const std::string& path) {
  std::map<std::string, std::pair<std::string, Protocol>> out;
  if (!root.contains("sources")) return out;
  if (!root["sources"].is_object())
    throw ParamError{fmt::format(
        "{}: \"sources\" must be an object of ID: {{\"citation\", \"protocol\"}}", path)};
  for (const auto& [id, src] : root["sources"].items()) {
    std::string where = fmt::format("{}: source '{}'", path, id);
    auto text = [&](const json& obj, const char* key, const std::string& in) {
      if (!obj.contains(key) || !obj[key].is_string() || obj[key].get<std::string>().empty())
        throw ParamError{fmt::format("{}: \"{}\" must be a non-empty string", in, key)};
      return obj[key].get<std::string>();
    };
    auto choice = [&](const json& obj, const char* key, const std::string& in, const char* yes,
                      const char* no) {
      std::string v = text(obj, key, in);
      if (v != yes && v != no)
        throw ParamError{
            fmt::format("{}: \"{}\" is \"{}\" or \"{}\", found \"{}\"", in, key, yes, no, v)};
      return v == yes;
    };
    if (!src.is_object() || !src.contains("protocol") || !src["protocol"].is_object())
      throw ParamError{fmt::format(
          "{}: expected {{\"citation\": \"...\", \"protocol\": {{\"l2\": \"cold|warm\", "
          "\"launch\": \"included|excluded\", \"timer\": \"...\", \"evidence\": \"...\"}}}}",
          where)};
    for (const auto& [k, v] : src.items())
      if (k != "citation" && k != "protocol")
        throw ParamError{
            fmt::format("{}: unknown key '{}'; the keys are citation and protocol", where, k)};
    const json& p = src["protocol"];
    std::string pwhere = where + ": protocol";
    for (const auto& [k, v] : p.items())
      if (k != "l2" && k != "launch" && k != "timer" && k != "evidence")
        throw ParamError{fmt::format(
            "{}: unknown key '{}'; the keys are l2, launch, timer and evidence", pwhere, k)};
    Protocol proto;
    proto.l2_warm = choice(p, "l2", pwhere, "warm", "cold");
    proto.launch_included = choice(p, "launch", pwhere, "included", "excluded");
    proto.timer = text(p, "timer", pwhere);
    proto.evidence = text(p, "evidence", pwhere);
    out[id] = {text(src, "citation", where), proto};
  }
  return out;
}

AnchorSet parse_json(const std::string& text, const std::string& path) {
  json root;
  try {
    root =
        parse_json_input(text, path, "an object with an \"anchors\" array (configs/fidelity.json)");
  } catch (const JsonInputError& e) {
    throw ParamError{e.what()};
  }
  if (!root.is_object() || !root.contains("anchors") || !root["anchors"].is_array())
    throw ParamError{fmt::format(
        "{}: expected an object with an \"anchors\" array (configs/fidelity.json)", path)};
  for (const auto& [k, v] : root.items())
    if (k != "anchors" && k != "corpus" && k != "description" && k != "sources")
      throw ParamError{fmt::format(
          "{}: unknown key '{}'; the keys are anchors, sources, corpus and description", path, k)};
  AnchorSet set;
  set.origin = path;
  if (root.contains("corpus")) {
    if (!root["corpus"].is_string())
      throw ParamError{fmt::format("{}: \"corpus\" must be a string (a directory)", path)};
    set.corpus = root["corpus"].get<std::string>();
  }
  const auto sources = parse_sources(root, path);
  static const std::set<std::string> keys = {"name",        "group",  "family",  "set",    "kernel",
                                             "file",        "args",   "variant", "params", "chip",
                                             "measured_us", "source", "note",    "weight", "kind"};
  std::set<std::string> names;
  size_t index = 0;
  for (const auto& j : root["anchors"]) {
    std::string where = fmt::format("{}: anchor {}", path, index++);
    if (!j.is_object()) throw ParamError{where + ": expected an object"};
    if (j.contains("name") && j["name"].is_string())
      where = fmt::format("{}: anchor '{}'", path, j["name"].get<std::string>());
    for (const auto& [k, v] : j.items()) {
      if (k == "l2_warm")
        throw ParamError{fmt::format(
            "{}: \"l2_warm\" is not an anchor key: how a time was measured is its source's "
            "protocol (\"sources\": {{ID: {{\"protocol\": {{\"l2\": \"warm\", ...}}}}}})",
            where)};
      if (!keys.count(k))
        throw ParamError{
            fmt::format("{}: unknown key '{}'; the keys are {}", where, k, fmt::join(keys, ", "))};
    }
    auto str = [&](const char* key, bool required) -> std::string {
      if (!j.contains(key)) {
        if (required) throw ParamError{fmt::format("{}: \"{}\" is missing", where, key)};
        return "";
      }
      if (!j[key].is_string() || (required && j[key].get<std::string>().empty()))
        throw ParamError{fmt::format("{}: \"{}\" must be a non-empty string", where, key)};
      return j[key].get<std::string>();
    };
    Anchor a;
    a.name = str("name", true);
    if (!names.insert(a.name).second)
      throw ParamError{fmt::format("{}: the name is used twice", where)};
    a.group = str("group", false);
    a.set = str("set", true);
    if (a.set != "calibration" && a.set != "validation")
      throw ParamError{fmt::format(
          "{}: \"set\" is \"calibration\" (a fit may use it) or \"validation\" (never fitted "
          "on), found \"{}\"",
          where, a.set)};
    if (j.contains("kernel") == j.contains("file"))
      throw ParamError{fmt::format(
          "{}: give exactly one of \"kernel\" (a kernel name or a Python file relative to this "
          "file) and \"file\" (a Python file relative to the corpus)",
          where)};
    if (j.contains("file")) {
      a.kernel = str("file", true);
      a.in_corpus = true;
      if (python_path(a.kernel).empty())
        throw ParamError{fmt::format("{}: \"file\" must be FILE.py or FILE.py:NAME", where)};
    } else {
      a.kernel = relative_to(str("kernel", true), path);
    }
    a.family = j.contains("family") ? str("family", true) : default_family(a);
    if (j.contains("args")) {
      if (!j["args"].is_array() || python_path(a.kernel).empty())
        throw ParamError{fmt::format(
            "{}: \"args\" is an array of strings, the arguments of a Python script", where)};
      for (const auto& v : j["args"]) {
        if (!v.is_string()) throw ParamError{where + ": \"args\" must hold strings"};
        a.args.push_back(v.get<std::string>());
      }
    }
    a.variant = str("variant", false);
    if (j.contains("params")) {
      if (!j["params"].is_object())
        throw ParamError{where + ": \"params\" must be an object of name: integer"};
      for (const auto& [k, v] : j["params"].items()) a.params[k] = param_text(v, where);
    }
    a.chip = str("chip", false);
    if (!j.contains("measured_us") || !j["measured_us"].is_number())
      throw ParamError{fmt::format("{}: \"measured_us\" must be a number (microseconds)", where)};
    a.measured_us = measured_us(j["measured_us"].get<double>(), j["measured_us"].dump(), where);
    if (j.contains("kind")) {
      a.kind = str("kind", true);
      if (a.kind != "measured" && a.kind != "derived")
        throw ParamError{fmt::format("{}: \"kind\" is \"measured\" or \"derived\"", where)};
    }
    a.source = str("source", true);
    auto src = sources.find(a.source);
    if (src == sources.end()) {
      std::vector<std::string> ids;
      for (const auto& [id, v] : sources) ids.push_back(id);
      throw ParamError{fmt::format(
          "{}: \"source\" '{}' is not a source of the file's \"sources\" (they are: {})", where,
          a.source, ids.empty() ? std::string("none") : fmt::format("{}", fmt::join(ids, ", ")))};
    }
    a.citation = src->second.first;
    a.protocol = src->second.second;
    a.note = str("note", false);
    if (j.contains("weight")) {
      if (!j["weight"].is_number() || !(j["weight"].get<double>() >= 0))
        throw ParamError{fmt::format("{}: \"weight\" must be a number >= 0", where)};
      a.weight = j["weight"].get<double>();
    }
    set.anchors.push_back(std::move(a));
  }
  if (set.anchors.empty())
    throw ParamError{fmt::format(
        "{}: the \"anchors\" array is empty; expected at least one anchor (configs/fidelity.json "
        "shows the form)",
        path)};
  return set;
}

/// One CSV record (RFC 4180: commas, double quotes, "" inside quotes).
std::vector<std::string> csv_fields(const std::string& line, const std::string& where) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  if (quoted) throw ParamError{where + ": a quoted field is not closed"};
  for (auto& f : out) {
    size_t b = f.find_first_not_of(" \t\r"), e = f.find_last_not_of(" \t\r");
    f = b == std::string::npos ? "" : f.substr(b, e - b + 1);
  }
  return out;
}

/// Words split as a shell would (spaces; single and double quotes).
std::vector<std::string> shell_words(const std::string& s, const std::string& where) {
  std::vector<std::string> out;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : s) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) out.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote) throw ParamError{where + ": a quote in \"args\" is not closed"};
  if (in_word) out.push_back(word);
  return out;
}

AnchorSet parse_csv(const std::string& text, const std::string& path) {
  static const std::vector<std::string> known = {
      "name", "kernel", "variant", "params", "args",   "chip", "measured_us", "kind",
      "set",  "family", "source",  "note",   "weight", "l2",   "launch"};
  AnchorSet set;
  set.origin = path;
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header;
  std::set<std::string> names;
  // The first row of each source fixes its protocol: every other row of it must agree.
  std::map<std::string, std::pair<Protocol, int>> protocols;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string where = fmt::format("{}:{}", path, line_no);
    std::string trimmed = line;
    trimmed.erase(0, trimmed.find_first_not_of(" \t\r"));
    if (trimmed.empty() || trimmed[0] == '#') continue;
    auto fields = csv_fields(line, where);
    if (header.empty()) {
      header = fields;
      for (const auto& h : header) {
        if (h == "l2_warm")
          throw ParamError{where +
                           ": there is no 'l2_warm' column: how a source measured is one "
                           "protocol for all its rows, the columns l2 (cold / warm) and launch "
                           "(included / excluded)"};
        if (std::find(known.begin(), known.end(), h) == known.end())
          throw ParamError{
              fmt::format("{}: unknown column '{}'; the columns are {} (kernel and "
                          "measured_us required)",
                          where, h, fmt::join(known, ", "))};
      }
      for (const char* need : {"kernel", "measured_us"})
        if (std::find(header.begin(), header.end(), need) == header.end())
          throw ParamError{fmt::format(
              "{}: the header has no '{}' column; the first line names the columns, e.g. "
              "name,kernel,variant,params,measured_us,source",
              where, need)};
      continue;
    }
    if (fields.size() != header.size())
      throw ParamError{
          fmt::format("{}: {} fields, the header has {}", where, fields.size(), header.size())};
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size(); ++i) row[header[i]] = fields[i];
    Anchor a;
    a.name = row["name"].empty() ? fmt::format("line {}", line_no) : row["name"];
    if (!names.insert(a.name).second)
      throw ParamError{fmt::format("{}: the name '{}' is used twice", where, a.name)};
    if (row["kernel"].empty()) throw ParamError{where + ": the kernel is empty"};
    a.kernel = relative_to(row["kernel"], path);
    a.variant = row["variant"];
    std::string params = row["params"];
    std::replace(params.begin(), params.end(), ';', ' ');
    for (const auto& kv : shell_words(params, where)) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        throw ParamError{
            fmt::format("{}: parameter '{}': expected NAME=VALUE (separated by "
                        "spaces or ';')",
                        where, kv)};
      a.params[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    a.args = shell_words(row["args"], where);
    if (!a.args.empty() && python_path(a.kernel).empty())
      throw ParamError{where + ": \"args\" are the arguments of a Python script"};
    a.chip = row["chip"];
    char* end = nullptr;
    a.measured_us = std::strtod(row["measured_us"].c_str(), &end);
    if (row["measured_us"].empty() || *end != '\0')
      throw ParamError{fmt::format("{}: measured_us '{}' must be a number (microseconds)", where,
                                   row["measured_us"])};
    measured_us(a.measured_us, row["measured_us"], where);
    if (!row["kind"].empty()) {
      a.kind = row["kind"];
      if (a.kind != "measured" && a.kind != "derived")
        throw ParamError{where + ": kind is measured or derived"};
    }
    a.source = row["source"].empty() ? path : row["source"];
    a.citation = a.source;
    a.note = row["note"];
    a.set = row["set"].empty() ? "calibration" : row["set"];
    if (a.set != "calibration" && a.set != "validation")
      throw ParamError{
          fmt::format("{}: set '{}' must be calibration or validation (a fit "
                      "never uses a validation row)",
                      where, a.set)};
    a.family = row["family"].empty() ? default_family(a) : row["family"];
    auto choice = [&](const char* col, const char* yes, const char* no, bool dflt) {
      const std::string& v = row[col];
      if (v.empty()) return dflt;
      if (v != yes && v != no)
        throw ParamError{fmt::format("{}: {} '{}' must be {} or {}", where, col, v, yes, no)};
      return v == yes;
    };
    a.protocol.l2_warm = choice("l2", "warm", "cold", false);
    a.protocol.launch_included = choice("launch", "included", "excluded", false);
    a.protocol.timer = "as the measurements file states (columns l2, launch)";
    a.protocol.evidence = path;
    auto [it, fresh] = protocols.try_emplace(a.source, a.protocol, line_no);
    if (!fresh && (it->second.first.l2_warm != a.protocol.l2_warm ||
                   it->second.first.launch_included != a.protocol.launch_included))
      throw ParamError{fmt::format(
          "{}: source '{}' was measured with another protocol on line {} (l2, launch): one "
          "source, one protocol",
          where, a.source, it->second.second)};
    if (!row["weight"].empty()) {
      a.weight = std::strtod(row["weight"].c_str(), &end);
      if (*end != '\0' || !(a.weight >= 0))
        throw ParamError{
            fmt::format("{}: weight '{}' must be a number >= 0", where, row["weight"])};
    }
    set.anchors.push_back(std::move(a));
  }
  if (header.empty()) throw ParamError{path + ": no header line (and no measurements)"};
  if (set.anchors.empty())
    throw ParamError{path + ": a header but no measurements; expected a line per measured run"};
  return set;
}

std::string quote_word(const std::string& w) {
  if (!w.empty() && w.find_first_of(" \t\n'\"\\$`") == std::string::npos) return w;
  std::string out = "'";
  for (char c : w) out += c == '\'' ? std::string("'\"'\"'") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string default_anchors_path() {
  return config_dir() + "/fidelity.json";
}

AnchorSet load_anchors(const std::string& path) {
  std::string text = read_text(path);
  return ends_with(path, ".csv") ? parse_csv(text, path) : parse_json(text, path);
}

AnchorSet select_anchors(const AnchorSet& set, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return set;
  auto match = [](const std::string& pat, const std::string& s) {
    return !s.empty() && fnmatch(pat.c_str(), s.c_str(), 0) == 0;
  };
  for (const auto& p : patterns) {
    bool any = std::any_of(set.anchors.begin(), set.anchors.end(),
                           [&](const Anchor& a) { return match(p, a.name) || match(p, a.group); });
    if (!any) {
      std::vector<std::string> names;
      for (const auto& a : set.anchors) names.push_back(a.name);
      throw ParamError{fmt::format("--only '{}' matches no anchor of {}; the anchors are {}", p,
                                   set.origin, fmt::join(names, ", "))};
    }
  }
  AnchorSet out = set;
  out.anchors.clear();
  for (const auto& a : set.anchors)
    if (std::any_of(patterns.begin(), patterns.end(),
                    [&](const std::string& p) { return match(p, a.name) || match(p, a.group); }))
      out.anchors.push_back(a);
  return out;
}

std::string corpus_dir(const AnchorSet& set, const std::string& override_dir) {
  // Absolute: a Python build runs in its script's directory while other anchors run.
  fs::path p;
  if (!override_dir.empty()) {
    p = override_dir;
  } else if (const char* env = std::getenv("TILELANG_CORPUS"); env && *env) {
    p = env;
  } else if (!set.corpus.empty()) {
    p = set.corpus;
    if (p.is_relative()) p = fs::absolute(set.origin).parent_path() / p;
  } else {
    return "";
  }
  return fs::absolute(p).lexically_normal().string();
}

bool is_python_anchor(const Anchor& a) {
  return !python_path(a.kernel).empty();
}

std::string anchor_spec(const Anchor& a, const std::string& corpus) {
  if (!is_python_anchor(a)) return a.kernel;
  std::string spec =
      a.in_corpus ? (fs::path(corpus) / a.kernel).lexically_normal().string() : a.kernel;
  for (const auto& w : a.args) {
    spec += ' ';
    spec += quote_word(w);
  }
  return spec;
}

std::vector<AnchorRun> run_anchors(const AnchorSet& set, const AnchorOptions& opts) {
  const size_t n = set.anchors.size();
  std::vector<AnchorRun> runs(n);
  // Chips by name, loaded once (an anchor names the chip it was measured on).
  std::map<std::string, std::optional<ChipConfig>> chips;
  std::map<std::string, std::string> chip_errors;
  if (!opts.chip) {
    for (const auto& a : set.anchors) {
      std::string name = a.chip.empty() ? "a3" : a.chip;
      if (chips.count(name) || chip_errors.count(name)) continue;
      try {
        chips[name] = load_chip_config(name);
      } catch (const ConfigError& e) {
        chip_errors[name] = e.message;
      }
    }
  }
  std::mutex done_mu;
  for_each_parallel(n, opts.jobs, [&](size_t i) {
    const Anchor& a = set.anchors[i];
    AnchorRun& r = runs[i];
    auto t0 = std::chrono::steady_clock::now();
    auto finish = [&] {
      r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (opts.done) {
        std::lock_guard<std::mutex> lock(done_mu);
        opts.done(i, r);
      }
    };
    const ChipConfig* chip = nullptr;
    if (opts.chip) {
      chip = &*opts.chip;
    } else {
      std::string name = a.chip.empty() ? "a3" : a.chip;
      if (chip_errors.count(name)) {
        r.status = "error";
        r.note = chip_errors[name];
        return finish();
      }
      chip = &*chips[name];
    }
    r.chip = chip->name;
    if (is_python_anchor(a)) {
      std::string file = python_path(a.kernel);
      if (a.in_corpus) file = (fs::path(opts.corpus) / file).string();
      // Without the front end no file runs, wherever the corpus is: that reason first.
      if (!has_resolvers()) {
        r.status = "skipped";
        r.note =
            "a Python file needs the Python front end: run the tilepipe binary of a build with "
            "-DTILEPIPE_PYTHON=ON (it hands this command to python3 -m tilepipe.cli)";
        return finish();
      }
      std::error_code ec;
      if (a.in_corpus && (opts.corpus.empty() || !fs::is_regular_file(file, ec))) {
        r.status = "skipped";
        r.note = opts.corpus.empty() ? "no corpus directory: set TILELANG_CORPUS or --corpus DIR"
                                     : fmt::format(
                                           "{} not found (the TileLang-Ascend corpus: set "
                                           "TILELANG_CORPUS or --corpus DIR)",
                                           file);
        return finish();
      }
    }
    try {
      KernelSource k = find_kernel(anchor_spec(a, opts.corpus));
      RunRequest req;
      req.variant = a.variant;
      req.params = resolve_params(k, a.params);
      req.mode = sim::Mode::Timing;
      req.fast_forward.enabled = opts.fast_forward;
      // The source's protocol decides the L2's state at the start, whatever the chip says.
      ChipConfig measured_as;
      if (a.protocol.l2_warm != (chip->l2_warm_inputs != 0)) {
        measured_as = *chip;
        measured_as.l2_warm_inputs = a.protocol.l2_warm ? 1 : 0;
        chip = &measured_as;
      }
      // Every core starts after the launch: the kernel's own time is what follows it, and
      // the launch is compared only when the source's timer covers it.
      const double launch_us = chip->launch_us;
      auto kernel_us = [&](double cycles) {
        return (cycles - chip->launch_cycles()) * chip->us_per_cycle();
      };
      auto compared_us = [&](double cycles) {
        return kernel_us(cycles) + (a.protocol.launch_included ? launch_us : 0.0);
      };
      RunReport rep = run_kernel(k, req, *chip);
      r.cycles = rep.sim.cycles;
      r.launch_us = launch_us;
      r.kernel_us = kernel_us(rep.sim.cycles);
      r.simulated_us = compared_us(rep.sim.cycles);
      r.error_pct = 100.0 * (r.simulated_us - a.measured_us) / a.measured_us;
      if (opts.other_variants && k.profile_variants && a.variant.empty()) {
        const ir::Program mine = k.build(req.params, rep.variant).program;
        for (const auto& v : k.variants) {
          if (v == rep.variant) continue;
          AnchorRun::Variant o{v, r.simulated_us, ""};
          try {
            if (!ir::equal(k.build(req.params, v).program, mine)) {
              RunRequest other = req;
              other.variant = v;
              o.simulated_us = compared_us(run_kernel(k, other, *chip).sim.cycles);
            }
          } catch (const UserError& e) {
            o = {v, 0, first_reason(e)};
          } catch (const lang::BuildError& e) {
            o = {v, 0, e.loc.str() + ": " + e.message};
          }
          r.others.push_back(std::move(o));
        }
      }
    } catch (const ParamError& e) {
      r.status = "error";
      r.note = e.message;
    } catch (const ConfigError& e) {
      r.status = "error";
      r.note = e.message;
    } catch (const UserError& e) {
      r.status = "error";
      r.note = first_reason(e);
    } catch (const lang::BuildError& e) {
      r.status = "error";
      r.note = e.loc.str() + ": " + e.message;
    } catch (const std::exception& e) {
      r.status = "error";
      r.note = e.what();
    }
    finish();
  });
  return runs;
}

ErrorSummary summarize_errors(const AnchorSet& set, const std::vector<AnchorRun>& runs,
                              const std::string& kind, const std::string& which_set) {
  ErrorSummary s;
  double sum = 0;
  for (size_t i = 0; i < runs.size() && i < set.anchors.size(); ++i) {
    if (runs[i].status != "ok" || (!kind.empty() && set.anchors[i].kind != kind) ||
        (!which_set.empty() && set.anchors[i].set != which_set))
      continue;
    double e = std::fabs(runs[i].error_pct);
    ++s.n;
    sum += e;
    if (e >= s.max_abs_pct) {
      s.max_abs_pct = e;
      s.max_name = set.anchors[i].name;
    }
  }
  if (s.n) s.mean_abs_pct = sum / s.n;
  return s;
}

std::vector<ParameterSource> parameter_sources(const std::string& chip) {
  const ChipConfig cfg = load_chip_config(chip);  // a config the loader rejects: its error;
                                                  // else every leaf below is well formed
  const std::string path = chip_config_path(chip);
  std::ifstream in(path, std::ios::binary);
  const json root = json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<ParameterSource> out;
  for (const auto& k : chip_config_keys()) {
    const json* node = &root;
    for (size_t start = 0;;) {
      size_t dot = k.key.find('.', start);
      node = &(*node)[k.key.substr(start, dot == std::string::npos ? dot : dot - start)];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    out.push_back({k.key, (*node)["value"].get<double>(), k.unit, cfg.name,
                   node->contains("basis") ? (*node)["basis"].get<std::string>() : "unstated",
                   (*node)["conf"].get<std::string>(), (*node)["source"].get<std::string>()});
  }
  return out;
}

}  // namespace tilepipe::driver

// Chip-config loader: JSON text -> ChipConfig, with one-line errors that name the file, the
// dotted key, what was expected, what was found and how to fix it.
//
// The schema is the table in schema() below: every numeric leaf of the file is
//   {"value": X, "unit": "...", "source": "...", "conf": "H|M|L", "basis": "..."}
// where the optional "basis" states the kind of evidence in one grammar (basis_problem()).
// and the table says which ChipConfig field it fills, its unit, its kind (integer or number)
// and its physically plausible range. Unknown keys are rejected (they are usually typos).
#include <tilepipe/chip.h>
#include <tilepipe/json_input.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tilepipe {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Schema.

enum class Kind { kInteger, kNumber };

/// A value read from a leaf; `i` is exact for integer leaves, `d` is always set.
struct Number {
  int64_t i = 0;
  double d = 0;
};

/// One numeric leaf: {"value", "unit", "source", "conf"}.
struct Field {
  std::string name;  // key inside its parent object
  std::string unit;  // the only unit accepted in the file
  Kind kind = Kind::kNumber;
  double lo = 0;        // plausible range: lo < v (lo_open) or lo <= v, and v <= hi
  bool lo_open = true;  // true: the value must be > lo (i.e. positive when lo == 0)
  double hi = 0;
  bool pow2 = false;  // integer that must be a power of two (alignments, sizes)
  std::function<void(ChipConfig&, const Number&)> store;
};

/// An object of leaves and sub-objects (a section, or a memory scope).
struct Group {
  std::string name;
  std::vector<Field> fields;
  std::vector<Group> groups;
};

template <class T>
Field field(std::string name, std::string unit, T ChipConfig::*member, double lo, double hi,
            bool lo_open = true, bool pow2 = false) {
  Field f;
  f.name = std::move(name);
  f.unit = std::move(unit);
  f.kind = std::is_integral_v<T> ? Kind::kInteger : Kind::kNumber;
  f.lo = lo;
  f.lo_open = lo_open;
  f.hi = hi;
  f.pow2 = pow2;
  f.store = [member](ChipConfig& c, const Number& n) {
    if constexpr (std::is_integral_v<T>) {
      c.*member = static_cast<T>(n.i);
    } else {
      c.*member = static_cast<T>(n.d);
    }
  };
  return f;
}

constexpr double kKiB = 1024.0;
constexpr double kMiB = 1024.0 * kKiB;
constexpr double kGiB = 1024.0 * kMiB;

/// A per-core memory scope: physical and usable capacity in bytes (and optional extras).
Group scope(std::string name, ScopeCapacity ChipConfig::*member, std::vector<Field> extra = {}) {
  auto part = [member](std::string key, int64_t ScopeCapacity::*p) {
    Field f;
    f.name = std::move(key);
    f.unit = "B";
    f.kind = Kind::kInteger;
    f.lo = 0;
    f.lo_open = true;
    f.hi = 64 * kMiB;  // no per-core buffer on any Ascend part comes close
    f.store = [member, p](ChipConfig& c, const Number& n) { (c.*member).*p = n.i; };
    return f;
  };
  Group g{std::move(name), {}, {}};
  g.fields.push_back(part("physical", &ScopeCapacity::physical));
  g.fields.push_back(part("usable", &ScopeCapacity::usable));
  for (Field& f : extra) g.fields.push_back(std::move(f));
  return g;
}

/// The sections of a chip config, in file order.
const std::vector<Group>& schema() {
  static const std::vector<Group> sections = [] {
    using C = ChipConfig;
    const bool kClosed = false;  // lo itself is allowed (zero is a meaningful value)
    // Bandwidths below these are not a chip but a typo (1e-9 for 1e9): the smallest Ascend
    // part (310, ~25 GB/s at 1 GHz) moves 25 B/cycle on the die, and no DMA engine of any
    // part moves less than a few bytes per cycle.
    const double kMinDieBw = 8, kMinCoreBw = 1;
    // Likewise compute rates (A3: 1 fractal/cycle, 32 transcendental elements/cycle) and
    // efficiency factors (0.25-2 and 0.7-0.94): no part is 16x slower or 64x less efficient.
    const double kMinRate = 1.0 / 16, kMinFactor = 1.0 / 64;
    std::vector<Group> s;
    s.push_back({"die",
                 {
                     field("ai_cores", "count", &C::ai_cores, 0, 1024),
                     // The IR's vid (T.get_subblockid()) is 0 or 1: one or two AIVs.
                     field("aiv_per_core", "count", &C::aiv_per_core, 1, 2, kClosed),
                     field("clock_mhz", "MHz", &C::clock_mhz, 100, 10000, kClosed),
                     field("launch_us", "us", &C::launch_us, 0, 10000, kClosed),
                     field("block_start_us", "us", &C::block_start_us, 0, 100, kClosed),
                     field("hbm_bytes", "B", &C::hbm_bytes, 16 * kMiB, 16384 * kGiB),
                     field("hbm_bw", "B/cycle", &C::hbm_bw, kMinDieBw, 100000, kClosed),
                     field("l2_bytes", "B", &C::l2_bytes, 0, 16 * kGiB),
                     field("l2_bw", "B/cycle", &C::l2_bw, kMinDieBw, 1000000, kClosed),
                     field("l2_warm_inputs", "flag", &C::l2_warm_inputs, 0, 1, kClosed),
                 },
                 {}});
    s.push_back({"memory",
                 {},
                 {
                     scope("l1", &C::l1,
                           {field("align", "B", &C::l1_align, 0, 4096, true, true),
                            field("banks", "count", &C::l1_banks, 0, 1024)}),
                     scope("l0a", &C::l0a),
                     scope("l0b", &C::l0b),
                     scope("l0c", &C::l0c),
                     scope("ub", &C::ub,
                           {field("align", "B", &C::ub_align, 0, 4096, true, true),
                            field("banks", "count", &C::ub_banks, 0, 1024),
                            field("bank_groups", "count", &C::ub_bank_groups, 0, 1024)}),
                 }});
    s.push_back({"sync",
                 {
                     field("event_ids", "count", &C::event_ids, 0, 64),
                     field("cross_flag_ids", "count", &C::cross_flag_ids, 0, 1024),
                     field("cross_flag_max", "count", &C::cross_flag_max, 0, 65535),
                     field("cross_flag_latency", "cycles", &C::cross_flag_latency, 0, 100000),
                     field("flag_latency", "cycles", &C::flag_latency, 0, 10000, kClosed),
                 },
                 {}});
    s.push_back(
        {"issue",
         {
             field("issue_cycles", "cycles", &C::issue_cycles, 0, 1000),
             field("scalar_op_cycles", "cycles", &C::scalar_op_cycles, 0, 1000),
             field("vector_mask_ops", "instructions", &C::vector_mask_ops, 0, 64),
             field("scalar_load_cycles", "cycles", &C::scalar_load_cycles, 0, 100000),
             field("scalar_dcache_bytes", "B", &C::scalar_dcache_bytes, 0, 16 * kMiB, true, true),
             field("scalar_dcache_line", "B", &C::scalar_dcache_line, 0, 4096, true, true),
             field("scalar_dcache_ways", "count", &C::scalar_dcache_ways, 0, 64),
             field("scalar_dcache_hit_cycles", "cycles", &C::scalar_dcache_hit_cycles, 0, 100000),
             field("pipe_queue_depth", "count", &C::pipe_queue_depth, 0, 4096),
         },
         {}});
    s.push_back({"cube",
                 {
                     field("head", "cycles", &C::cube_head, 0, 100000),
                     field("instr_cycles", "cycles", &C::cube_instr_cycles, 0, 100000),
                     field("fractals_per_cycle", "fractals/cycle", &C::cube_fractals_per_cycle,
                           kMinRate, 1024, kClosed),
                     field("int8_rate", "x", &C::cube_int8_rate, kMinFactor, 64, kClosed),
                     field("fp32_rate", "x", &C::cube_fp32_rate, kMinFactor, 64, kClosed),
                 },
                 {}});
    s.push_back({"vector",
                 {
                     field("repeat_bytes", "B", &C::vector_repeat_bytes, 0, 65536, true, true),
                     field("max_repeats", "count", &C::vector_max_repeats, 0, 65535),
                     field("startup", "cycles", &C::vector_startup, 0, 10000),
                     field("startup_add", "cycles", &C::vector_startup_add, 0, 10000),
                     field("startup_mul", "cycles", &C::vector_startup_mul, 0, 10000),
                     field("startup_exp", "cycles", &C::vector_startup_exp, 0, 10000),
                     field("startup_div", "cycles", &C::vector_startup_div, 0, 10000),
                     field("startup_recip", "cycles", &C::vector_startup_recip, 0, 10000),
                     field("startup_reduce", "cycles", &C::vector_startup_reduce, 0, 10000),
                     field("startup_reduce_max", "cycles", &C::vector_startup_reduce_max, 0, 10000),
                     field("simple_cycles_per_repeat", "cycles",
                           &C::vector_simple_cycles_per_repeat, 0, 1000),
                     field("transcendental_elems_per_cycle", "elements/cycle",
                           &C::vector_transcendental_elems_per_cycle, kMinRate, 65536, kClosed),
                     field("reduce_cycles_per_repeat", "cycles",
                           &C::vector_reduce_cycles_per_repeat, 0, 1000),
                     field("sin_cos_ops", "instructions", &C::vector_sin_cos_ops, 1, 1000),
                     field("pow_extra_ops", "instructions", &C::vector_pow_extra_ops, 0, 1000),
                     field("sort32_cycles_per_block", "cycles", &C::vector_sort32_cycles_per_block,
                           1, 100000),
                     field("mrgsort_elems_per_cycle", "elements/cycle",
                           &C::vector_mrgsort_elems_per_cycle, 0.001, 1024),
                 },
                 {}});
    s.push_back(
        {"dma",
         {
             field("mte2_latency", "cycles", &C::mte2_latency, 0, 1000000),
             field("mte2_latency_l2", "cycles", &C::mte2_latency_l2, 0, 1000000),
             field("mte2_bw_l2", "B/cycle", &C::mte2_bw_l2, kMinCoreBw, 100000, kClosed),
             field("mte2_bw_hbm", "B/cycle", &C::mte2_bw_hbm, kMinCoreBw, 100000, kClosed),
             field("mte3_latency", "cycles", &C::mte3_latency, 0, 1000000),
             field("mte3_bw", "B/cycle", &C::mte3_bw, kMinCoreBw, 100000, kClosed),
             field("mte1_latency", "cycles", &C::mte1_latency, 0, 1000000),
             field("mte1_bw_l0a", "B/cycle", &C::mte1_bw_l0a, kMinCoreBw, 100000, kClosed),
             field("mte1_bw_l0b", "B/cycle", &C::mte1_bw_l0b, kMinCoreBw, 100000, kClosed),
             field("fix_latency", "cycles", &C::fix_latency, 0, 1000000),
             field("fix_bw", "B/cycle", &C::fix_bw, kMinCoreBw, 100000, kClosed),
             field("full_bw_align", "B", &C::dma_full_bw_align, 0, 1 << 20, true, true),
             field("min_burst_bytes", "B", &C::dma_min_burst_bytes, 0, 1 << 20, false),
             field("nd2nz_efficiency", "x", &C::dma_nd2nz_efficiency, kMinFactor, 1, kClosed),
             field("misaligned_factor", "x", &C::dma_misaligned_factor, kMinFactor, 1, kClosed),
         },
         {}});
    return s;
  }();
  return sections;
}

// ---------------------------------------------------------------------------------------------
// Messages.

/// Escapes control characters so that every message stays on one line.
std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto u = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += ch;
    }
  }
  return out;
}

/// Cuts `s` to at most `max` bytes without splitting a UTF-8 sequence.
std::string clip(std::string s, size_t max = 60) {
  if (s.size() <= max) return s;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  return s + "...";
}

/// What a JSON value is, for the "found ..." part of a message.
std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return fmt::format("{} (a boolean)", v.get<bool>() ? "true" : "false");
    case json::value_t::number_integer:
      return fmt::format("{}", v.get<int64_t>());
    case json::value_t::number_unsigned:
      return fmt::format("{}", v.get<uint64_t>());
    case json::value_t::number_float: {
      double d = v.get<double>();
      if (!std::isfinite(d)) return "a number too large to represent";
      return fmt::format("{}", d);
    }
    case json::value_t::string:
      return fmt::format("{} (a string)", clip(v.dump()));
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    default:
      return "an unsupported JSON value";
  }
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// The closest allowed key to `key`, or "" when none is close enough to be a typo.
std::string closest(std::string_view key, const std::vector<std::string>& allowed) {
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
  for (const std::string& a : allowed) {
    size_t d = edit_distance(key, a);
    if (d < best_d) {
      best_d = d;
      best = a;
    }
  }
  return best;
}

std::string dotted(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

/// Formats a range bound: integers without a fraction.
std::string bound(double v, Kind kind) {
  if (kind == Kind::kInteger) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

std::string range_text(const Field& f) {
  return fmt::format("{}{}, {}] {}", f.lo_open ? "(" : "[", bound(f.lo, f.kind),
                     bound(f.hi, f.kind), f.unit);
}

std::string leaf_example(const Field& f) {
  return fmt::format(R"({{"value": ..., "unit": "{}", "source": "...", "conf": "H|M|L"}})", f.unit);
}

// ---------------------------------------------------------------------------------------------
// Parsing.

constexpr const char* kBasisGrammar =
    "\"cited: DOCUMENT\", \"microbenchmark: NAME\", \"fit: ANCHOR, ...\", \"assumed from "
    "CHIP\" or \"estimate: WHY\"";

/// What is wrong with a "basis" text, or "" when it follows kBasisGrammar.
std::string basis_problem(const std::string& b) {
  for (const char* kind : {"cited:", "microbenchmark:", "fit:", "estimate:", "assumed from "}) {
    std::string_view k(kind);
    if (b.compare(0, k.size(), k) != 0) continue;
    std::string rest = b.substr(k.size());
    if (rest.find_first_not_of(" ,;") == std::string::npos)
      return fmt::format("'{}' names nothing", kind);
    return "";
  }
  return "it starts with none of the kinds";
}

class Parser {
 public:
  explicit Parser(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(std::string_view key, std::string_view expected, std::string_view found,
                         std::string_view fix) const {
    std::string msg =
        key.empty() ? fmt::format("{}: expected {}, found {}; {}", origin_, expected, found, fix)
                    : fmt::format("{}: key '{}': expected {}, found {}; {}", origin_, key, expected,
                                  found, fix);
    throw ConfigError{one_line(msg)};
  }

  /// Rejects keys of `obj` that are not in `allowed` (reports the first, with a suggestion).
  void check_keys(const json& obj, std::string_view path,
                  const std::vector<std::string>& allowed) const {
    for (const auto& [key, value] : obj.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      std::string near = closest(key, allowed);
      std::string fix = near.empty() ? std::string("remove it or fix its spelling")
                                     : fmt::format("did you mean '{}'?", near);
      fail(dotted(path, key), fmt::format("one of the keys {}", join(allowed, ", ")),
           "an unknown key", fix);
    }
  }

  /// Returns obj[key]; a missing key is an error that says what belongs there.
  const json& member(const json& obj, std::string_view path, const std::string& key,
                     std::string_view expected, std::string_view fix) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail(dotted(path, key), expected, "nothing (the key is missing)", fix);
    return *it;
  }

  std::string string_member(const json& obj, std::string_view path, const std::string& key,
                            bool allow_empty) const {
    const json& v = member(obj, path, key, "a string", fmt::format("add \"{}\": \"...\"", key));
    if (!v.is_string() || (!allow_empty && v.get_ref<const std::string&>().empty())) {
      fail(dotted(path, key), allow_empty ? "a string" : "a non-empty string", describe(v),
           "write it as a quoted string");
    }
    return v.get<std::string>();
  }

  void parse_leaf(const json& v, std::string_view path, const Field& f, ChipConfig& cfg) const {
    std::string key = dotted(path, f.name);
    if (!v.is_object()) {
      fail(key, fmt::format("a value object {}", leaf_example(f)), describe(v),
           "wrap the number with its unit, source and confidence");
    }
    check_keys(v, key, {"value", "unit", "source", "conf", "basis"});

    const json& value =
        member(v, key, "value", fmt::format("the number ({})", f.unit), "add \"value\": N");
    const json& unit = member(v, key, "unit", fmt::format("\"{}\"", f.unit),
                              fmt::format("add \"unit\": \"{}\"", f.unit));
    if (!unit.is_string() || unit.get_ref<const std::string&>() != f.unit) {
      fail(dotted(key, "unit"), fmt::format("\"{}\"", f.unit), describe(unit),
           fmt::format("give the value in {} and write \"unit\": \"{}\"", f.unit, f.unit));
    }
    std::string source = string_member(v, key, "source", false);
    const json& conf =
        member(v, key, "conf", "\"H\", \"M\" or \"L\"",
               "add \"conf\": \"H\" (vendor), \"M\" (secondary) or \"L\" (estimate)");
    if (!conf.is_string() || (conf != "H" && conf != "M" && conf != "L")) {
      fail(dotted(key, "conf"), "\"H\", \"M\" or \"L\"", describe(conf),
           "use H (vendor documentation), M (secondary source) or L (estimate)");
    }

    if (v.contains("basis")) {
      const json& basis = v["basis"];
      std::string problem = basis.is_string() ? basis_problem(basis.get<std::string>())
                                              : std::string("it is not a string");
      if (!problem.empty())
        fail(dotted(key, "basis"), kBasisGrammar, describe(basis), problem + "; fix it");
    }

    Number n = read_number(value, key, f);
    f.store(cfg, n);
    cfg.sources[key] = fmt::format("{} [{}]", source, conf.get<std::string>());
  }

  Number read_number(const json& value, const std::string& key, const Field& f) const {
    std::string expected = fmt::format(
        "{} in {}", f.kind == Kind::kInteger ? "an integer" : "a number", range_text(f));
    std::string fix = "fix the value (check its unit)";
    Number n;
    if (f.kind == Kind::kInteger) {
      if (value.is_number_unsigned()) {
        uint64_t u = value.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
          fail(key, expected, describe(value), fix);
        }
        n.i = static_cast<int64_t>(u);
      } else if (value.is_number_integer()) {
        n.i = value.get<int64_t>();
      } else {
        fail(key, expected, describe(value),
             value.is_number() ? "write a whole number without a fraction"
                               : "write the value as a JSON number, without quotes");
      }
      n.d = static_cast<double>(n.i);
    } else {
      if (!value.is_number()) {
        fail(key, expected, describe(value), "write the value as a JSON number, without quotes");
      }
      n.d = value.get<double>();
    }
    bool above_lo = f.lo_open ? n.d > f.lo : n.d >= f.lo;
    if (!above_lo) {
      std::string why = f.lo != 0   ? "it is below what any Ascend part has; " + fix
                        : f.lo_open ? std::string("the value must be positive; fix it")
                                    : std::string("the value must not be negative; fix it");
      fail(key, expected, describe(value), why);
    }
    if (!(n.d <= f.hi)) {  // also rejects NaN and infinities
      fail(key, expected, describe(value), "it is above what any Ascend part has; " + fix);
    }
    if (f.pow2 && (n.i <= 0 || (n.i & (n.i - 1)) != 0)) {
      fail(key, fmt::format("a power of two ({})", f.unit), describe(value),
           "fix the value (alignments and repeat sizes are powers of two)");
    }
    return n;
  }

  void parse_group(const json& obj, std::string_view path, const Group& g, ChipConfig& cfg) const {
    std::vector<std::string> allowed;
    for (const Field& f : g.fields) allowed.push_back(f.name);
    for (const Group& sub : g.groups) allowed.push_back(sub.name);
    if (!obj.is_object()) {
      fail(path, fmt::format("an object with the keys {}", join(allowed, ", ")), describe(obj),
           "see configs/a3.json for the layout");
    }
    check_keys(obj, path, allowed);
    for (const Field& f : g.fields) {
      const json& v = member(obj, path, f.name, fmt::format("a value object {}", leaf_example(f)),
                             fmt::format("add \"{}\": {}", f.name, leaf_example(f)));
      parse_leaf(v, path, f, cfg);
    }
    for (const Group& sub : g.groups) {
      const json& v = member(obj, path, sub.name, "an object",
                             fmt::format("add \"{}\": {{...}} (see configs/a3.json)", sub.name));
      parse_group(v, dotted(path, sub.name), sub, cfg);
    }
  }

  /// Relations between values that no single range can express.
  void check_consistency(const ChipConfig& c) const {
    struct Scope {
      const char* name;
      const ScopeCapacity& cap;
    };
    for (const Scope& s : {Scope{"l1", c.l1}, Scope{"l0a", c.l0a}, Scope{"l0b", c.l0b},
                           Scope{"l0c", c.l0c}, Scope{"ub", c.ub}}) {
      if (s.cap.usable > s.cap.physical) {
        fail(fmt::format("memory.{}.usable", s.name),
             fmt::format("an integer <= memory.{}.physical ({})", s.name, s.cap.physical),
             fmt::format("{}", s.cap.usable), "fix the value or raise physical");
      }
    }
    if (c.ub_banks % c.ub_bank_groups != 0) {
      fail("memory.ub.bank_groups", fmt::format("a divisor of memory.ub.banks ({})", c.ub_banks),
           fmt::format("{}", c.ub_bank_groups), "fix the value or change banks");
    }
    if (c.scalar_dcache_bytes % (int64_t{c.scalar_dcache_line} * c.scalar_dcache_ways) != 0) {
      fail(
          "issue.scalar_dcache_bytes",
          fmt::format("a multiple of issue.scalar_dcache_line x issue.scalar_dcache_ways ({} x {})",
                      c.scalar_dcache_line, c.scalar_dcache_ways),
          fmt::format("{}", c.scalar_dcache_bytes), "fix the size, the line or the ways");
    }
    if (c.vector_repeat_bytes % c.ub_align != 0) {
      fail("vector.repeat_bytes", fmt::format("a multiple of memory.ub.align ({})", c.ub_align),
           fmt::format("{}", c.vector_repeat_bytes), "fix the value or memory.ub.align");
    }
  }

  ChipConfig parse(const json& root) const {
    // "calibration": what `tilepipe calibrate` fitted (provenance only, not read here).
    std::vector<std::string> allowed = {"name", "description", "calibration"};
    for (const Group& g : schema()) allowed.push_back(g.name);
    if (!root.is_object()) {
      fail("", fmt::format("a JSON object with the keys {}", join(allowed, ", ")), describe(root),
           "see configs/a3.json for the layout");
    }
    check_keys(root, "", allowed);
    ChipConfig cfg;
    cfg.name = string_member(root, "", "name", false);
    string_member(root, "", "description", true);  // for the file's reader: checked, not kept
    if (root.contains("calibration") && !root["calibration"].is_object()) {
      fail("calibration", "an object (the record `tilepipe calibrate` writes)",
           describe(root["calibration"]), "remove the key or restore the object");
    }
    for (const Group& g : schema()) {
      const json& v = member(root, "", g.name, "an object",
                             fmt::format("add \"{}\": {{...}} (see configs/a3.json)", g.name));
      parse_group(v, g.name, g, cfg);
    }
    check_consistency(cfg);
    return cfg;
  }

  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// Whether the JSON file at `p` looks like a chip config (an object with a "die" section):
/// the configs directory also holds other data (advice_rules.json).
bool looks_like_chip(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("die");
}

/// The chip names available in `dir` (the stems of its chip config files), sorted.
std::vector<std::string> available_chips(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    std::error_code type_ec;
    if (p.extension() == ".json" && fs::is_regular_file(p, type_ec) && looks_like_chip(p)) {
      names.push_back(p.stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool is_plain_name(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                              (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
                     }) &&
         name.find("..") == std::string_view::npos;
}

std::string read_file(const std::string& path) {
  namespace fs = std::filesystem;
  constexpr uintmax_t kMaxBytes = 4u << 20;  // a chip config is a few KiB
  auto fail = [&](std::string_view found, std::string_view fix) -> std::string {
    throw ConfigError{one_line(
        fmt::format("{}: expected a readable chip config file, found {}; {}", path, found, fix))};
  };
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return fail("no such file", "check the path");
  if (!fs::is_regular_file(st))
    return fail("something that is not a regular file", "check the path");
  uintmax_t size = fs::file_size(path, ec);
  if (ec) return fail(fmt::format("an unreadable file ({})", ec.message()), "check permissions");
  if (size > kMaxBytes) {
    return fail(fmt::format("a file of {} bytes (limit {})", size, kMaxBytes),
                "point at a chip config, not another file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("a file that cannot be opened", "check permissions");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return fail("a read error", "check the file");
  return text.str();
}

}  // namespace

ChipConfig parse_chip_config(const std::string& json_text, const std::string& origin) {
  Parser parser(origin);
  try {
    return parser.parse(parse_json_input(json_text, origin, "a chip config object"));
  } catch (const JsonInputError& e) {
    throw ConfigError{one_line(e.what())};
  } catch (const json::exception& e) {
    // The checks above should make this unreachable.
    throw ConfigError{one_line(fmt::format(
        "{}: expected a valid chip config, found a value the loader could not read ({}); this is "
        "a bug in tilepipe, please report it with the file",
        origin, e.what()))};
  }
}

std::vector<ChipKey> chip_config_keys() {
  std::vector<ChipKey> out;
  std::function<void(const Group&, const std::string&)> walk = [&](const Group& g,
                                                                   const std::string& path) {
    for (const Field& f : g.fields)
      out.push_back(
          {dotted(path, f.name), f.unit, f.kind == Kind::kInteger, f.lo, f.hi, f.lo_open});
    for (const Group& sub : g.groups) walk(sub, dotted(path, sub.name));
  };
  for (const Group& g : schema()) walk(g, g.name);
  return out;
}

ChipConfig load_chip_config(const std::string& name_or_path) {
  if (ends_with(name_or_path, ".json"))
    return parse_chip_config(read_file(name_or_path), name_or_path);

  std::string dir = config_dir();
  std::vector<std::string> names = available_chips(dir);
  bool known = is_plain_name(name_or_path) &&
               std::find(names.begin(), names.end(), name_or_path) != names.end();
  if (!known) {
    std::string expected =
        names.empty() ? fmt::format("a chip name, but there are no *.json files in {}", dir)
                      : fmt::format("one of {} (the *.json files in {})", join(names, ", "), dir);
    std::string fix = names.empty()
                          ? std::string(
                                "set TILEPIPE_CONFIG_DIR to the configs directory or pass a "
                                "path ending in .json")
                          : std::string("use one of those names or a path ending in .json");
    throw ConfigError{one_line(fmt::format("unknown chip '{}': expected {}, found '{}'; {}",
                                           clip(name_or_path), expected, clip(name_or_path), fix))};
  }
  std::string path = chip_config_path(name_or_path);
  return parse_chip_config(read_file(path), path);
}

std::vector<std::string> chip_names() {
  return available_chips(config_dir());
}

std::string chip_config_path(const std::string& name_or_path) {
  if (ends_with(name_or_path, ".json")) return name_or_path;
  return fmt::format("{}/{}.json", config_dir(), name_or_path);
}

}  // namespace tilepipe

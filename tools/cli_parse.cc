#include "cli_parse.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string_view>

namespace tilepipe::cli {

uint64_t parse_seed(const std::string& s) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
    throw ArgError{fmt::format(
        "--seed '{}': expected a whole number in [0, 18446744073709551615], e.g. --seed 7", s)};
  return v;
}

namespace {

/// A finite number > 0 filling all of `s`, or 0.
double positive(const std::string& s) {
  const char* begin = s.c_str();
  char* end = nullptr;
  double v =
      s.empty() || std::isspace(static_cast<unsigned char>(s[0])) ? 0 : std::strtod(begin, &end);
  return !s.empty() && end == begin + s.size() && v > 0 && std::isfinite(v) ? v : 0;
}

}  // namespace

double parse_max_cycles(const std::string& s) {
  double v = positive(s);
  if (v == 0)
    throw ArgError{fmt::format(
        "--max-cycles '{}': expected a number of cycles > 0 (finite), e.g. --max-cycles 1e9", s)};
  return v;
}

double parse_max_wall_s(const std::string& s) {
  double v = positive(s);
  if (v == 0)
    throw ArgError{fmt::format(
        "--max-wall-s '{}': expected a number of seconds > 0 (finite), e.g. --max-wall-s 600", s)};
  return v;
}

namespace {

/// A non-negative decimal number filling all of `s` (no sign, no spaces), or -1.
double non_negative(const std::string& s) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return -1;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(v) ? v : -1;
}

}  // namespace

std::pair<double, double> parse_trace_window(const std::string& s, double cycles_per_us) {
  auto bound = [&](std::string b) {
    double scale = 1;
    if (b.size() > 2 && b.compare(b.size() - 2, 2, "us") == 0) {
      b.resize(b.size() - 2);
      scale = cycles_per_us;
    }
    double v = non_negative(b);
    return v < 0 ? v : v * scale;
  };
  auto colon = s.find(':');
  double begin = colon == std::string::npos ? -1 : bound(s.substr(0, colon));
  double end = colon == std::string::npos ? -1 : bound(s.substr(colon + 1));
  if (begin < 0 || end < 0 || !(end > begin))
    throw ArgError{fmt::format(
        "--trace-window '{}': expected START:END in cycles, or in microseconds with a 'us' "
        "suffix, with 0 <= START < END, e.g. --trace-window 0:200000 or 100us:150us",
        s)};
  return {begin, end};
}

std::vector<int> parse_core_list(const std::string& s, int ai_cores) {
  auto bad = [&] {
    return ArgError{fmt::format(
        "--trace-cores '{}': expected AI core indices or ranges in [0, {}] separated by "
        "commas, e.g. --trace-cores 0,5-7",
        s, ai_cores - 1)};
  };
  auto index = [&](const std::string& t) {
    int v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v, 10);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || v < 0 || v >= ai_cores)
      throw bad();
    return v;
  };
  std::set<int> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t comma = s.find(',', at);
    std::string item = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    size_t dash = item.find('-');
    int lo = index(item.substr(0, dash));
    int hi = dash == std::string::npos ? lo : index(item.substr(dash + 1));
    if (hi < lo) throw bad();
    for (int c = lo; c <= hi; ++c) out.insert(c);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return {out.begin(), out.end()};
}

bool no_check_env() {
  const char* v = std::getenv("TILEPIPE_NO_CHECK");
  return v != nullptr && *v != '\0' && std::string_view(v) != "0";
}

}  // namespace tilepipe::cli

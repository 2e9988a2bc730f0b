#include "cli_parse.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace tilepipe::cli {

uint64_t parse_seed(const std::string& s) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size())
    throw ArgError{fmt::format(
        "--seed '{}': expected a whole number in [0, 18446744073709551615], e.g. --seed 7", s)};
  return v;
}

double parse_max_cycles(const std::string& s) {
  const char* begin = s.c_str();
  char* end = nullptr;
  double v =
      s.empty() || std::isspace(static_cast<unsigned char>(s[0])) ? 0 : std::strtod(begin, &end);
  if (s.empty() || end != begin + s.size() || !(v > 0) || !std::isfinite(v))
    throw ArgError{fmt::format(
        "--max-cycles '{}': expected a number of cycles > 0 (finite), e.g. --max-cycles 1e9", s)};
  return v;
}

}  // namespace tilepipe::cli

// Parsers of command-line values that are not kernel parameters (`--seed`, `--max-cycles`).
// No dependency beyond the standard library and fmt, so they are fuzzed on their own (fuzz/).
#pragma once

#include <cstdint>
#include <string>

namespace tilepipe::cli {

/// A bad flag value: a one-line message saying what was expected (exit 2).
struct ArgError {
  std::string message;
};

/// `--seed`: a decimal integer in [0, 2^64 - 1], no sign, nothing after it.
uint64_t parse_seed(const std::string& s);
/// `--max-cycles`: a finite number > 0 (1e9, 2500000, ...).
double parse_max_cycles(const std::string& s);

}  // namespace tilepipe::cli

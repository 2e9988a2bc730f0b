// Parsers of command-line values that are not kernel parameters (`--seed`, `--max-cycles`,
// `--trace-window`, `--trace-cores`).
// No dependency beyond the standard library and fmt, so they are fuzzed on their own (fuzz/).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tilepipe/error.h"

namespace tilepipe::cli {

/// A bad flag value: a one-line message saying what was expected (exit 2).
class ArgError : public InputError {
 public:
  explicit ArgError(std::string message) : InputError("usage", std::move(message)) {}
};

/// `--seed`: a decimal integer in [0, 2^64 - 1], no sign, nothing after it.
uint64_t parse_seed(const std::string& s);
/// `--max-cycles`: a finite number > 0 (1e9, 2500000, ...).
double parse_max_cycles(const std::string& s);
/// `--max-wall-s`: a finite number of seconds > 0.
double parse_max_wall_s(const std::string& s);
/// `--trace-window START:END`: each bound in cycles, or in microseconds with a `us` suffix
/// (converted at `cycles_per_us`); 0 <= START < END. Returns [START, END) in cycles.
std::pair<double, double> parse_trace_window(const std::string& s, double cycles_per_us);
/// `--trace-cores LIST`: AI core indices and ranges ("0,3,8-11"), each in [0, ai_cores - 1].
/// Returns the sorted distinct indices.
std::vector<int> parse_core_list(const std::string& s, int ai_cores);
/// TILEPIPE_NO_CHECK set to anything but "" or "0": the user opted out of the race detector
/// on functional runs (the Python front end reads the same variable).
bool no_check_env();

}  // namespace tilepipe::cli

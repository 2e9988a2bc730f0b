// libFuzzer target: the command line's value parsers: `--seed`, `--max-cycles`,
// `--trace-window`, `--trace-cores` (tools/cli_parse.cc) and `--param NAME=VALUE` lists
// (src/driver/params.cc). Every input must parse or throw ArgError / ParamError with a message;
// never a crash, a sanitizer report or another exception. Input lines: seed, max-cycles,
// trace window, trace cores, then NAME=VALUE lines.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include "cli_parse.h"
#include "tilepipe/kernel_params.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tilepipe;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::string seed, cycles, window, cores, line;
  std::getline(in, seed);
  std::getline(in, cycles);
  std::getline(in, window);
  std::getline(in, cores);
  try {
    auto [begin, end] = cli::parse_trace_window(window, 1850.0);
    if (!(begin >= 0 && end > begin)) std::abort();
  } catch (const cli::ArgError& e) {
    if (e.message.empty()) std::abort();
  }
  try {
    for (int c : cli::parse_core_list(cores, 24))
      if (c < 0 || c >= 24) std::abort();
  } catch (const cli::ArgError& e) {
    if (e.message.empty()) std::abort();
  }
  try {
    cli::parse_seed(seed);
  } catch (const cli::ArgError& e) {
    if (e.message.empty()) std::abort();
  }
  try {
    double c = cli::parse_max_cycles(cycles);
    if (!(c > 0)) std::abort();
  } catch (const cli::ArgError& e) {
    if (e.message.empty()) std::abort();
  }
  // The shapes of the real catalogue: small and huge ranges, negative-free minimums.
  static const std::vector<driver::ParamSpec> specs = {
      {"M", 256, 16, 65536, "rows"},
      {"S", 1024, 128, 1 << 20, "sequence length"},
      {"num_stages", 0, 0, 1024, "stages"},
      {"N", 1 << 20, 16, int64_t{1} << 30, "elements"},
      {"scale_milli", 500, 0, 100000, "scale"}};
  std::map<std::string, std::string> raw;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;  // the CLI rejects these before
    raw[line.substr(0, eq)] = line.substr(eq + 1);
  }
  try {
    driver::Params p = driver::parse_param_values("fuzz", specs, raw);
    for (const auto& s : specs)
      if (p.at(s.name) < s.min || p.at(s.name) > s.max) std::abort();  // ranges are enforced
  } catch (const driver::ParamError& e) {
    if (e.message.empty()) std::abort();
  }
  return 0;
}

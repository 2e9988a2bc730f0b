// libFuzzer target: the chip-config parser (src/sim/chip_config.cc). Any input must give a
// ChipConfig or a ConfigError with a one-line reason; never a crash, a sanitizer report or
// another exception. Seed corpus: configs/*.json (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tilepipe/chip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    tilepipe::ChipConfig c = tilepipe::parse_chip_config(text, "fuzz.json");
    if (c.ai_cores <= 0 || c.clock_mhz <= 0) std::abort();  // accepted configs are sane
  } catch (const tilepipe::ConfigError& e) {
    if (e.message.empty()) std::abort();
  }
  return 0;
}

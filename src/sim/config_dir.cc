// Where the chip configs and the advice rules are found at run time (config_dir() in
// tilepipe/chip.h): the one lookup both the chip loader and the advisor use.
#include <dlfcn.h>

#include <cstdlib>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "tilepipe/chip.h"

// Set by CMakeLists.txt: the source tree's configs/ and the relative paths from the installed
// library and binary directories to <prefix>/share/tilepipe/configs.
#ifndef TILEPIPE_SOURCE_CONFIG_DIR
#define TILEPIPE_SOURCE_CONFIG_DIR "configs"
#endif
#ifndef TILEPIPE_LIB_TO_CONFIG
#define TILEPIPE_LIB_TO_CONFIG "../share/tilepipe/configs"
#endif
#ifndef TILEPIPE_BIN_TO_CONFIG
#define TILEPIPE_BIN_TO_CONFIG "../share/tilepipe/configs"
#endif

namespace tilepipe {
namespace {

namespace fs = std::filesystem;

/// An installed configs directory: it holds the advice rules (a chip-config directory given
/// by $TILEPIPE_CONFIG_DIR need not, but an installed one always does).
bool is_installed_configs(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "advice_rules.json", ec);
}

std::string find_installed_or_source() {
  std::vector<fs::path> candidates;
  // The shared library holding this function (<prefix>/lib/libtilepipe_sim.so), or the
  // executable it is linked into when the library is static.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&find_installed_or_source), &info) != 0 &&
      info.dli_fname != nullptr && info.dli_fname[0] == '/') {
    candidates.push_back(fs::path(info.dli_fname).parent_path() / TILEPIPE_LIB_TO_CONFIG);
  }
  // The running executable (<prefix>/bin/tilepipe).
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path() / TILEPIPE_BIN_TO_CONFIG);
  for (const fs::path& c : candidates) {
    if (is_installed_configs(c)) return fs::weakly_canonical(c, ec).string();
  }
  return TILEPIPE_SOURCE_CONFIG_DIR;  // a build tree: the source tree's configs/
}

}  // namespace

std::string config_dir() {
  if (const char* env = std::getenv("TILEPIPE_CONFIG_DIR"); env != nullptr && *env != '\0')
    return env;
  static const std::string found = find_installed_or_source();
  return found;
}

}  // namespace tilepipe

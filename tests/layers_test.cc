// The layers of tilepipe (docs/architecture.md, "Layers"): a header or source file of one
// layer includes only headers of its own layer and of layers below it, so nothing of the
// compiler reaches up into the simulator, the profiler or the driver. The CMake layer
// libraries enforce the same order for links (--no-undefined); this test for includes,
// which a link does not see (a header-only use of an upper layer's type).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = fs::path(TILEPIPE_CONFIG_DIR).parent_path();

/// The layers, lowest first (CMakeLists.txt's TILEPIPE_LAYERS); "top" is what uses them all:
/// the command line (tools/), the Python extension (python/ext/) and the built-in kernels.
const std::vector<std::string> kLayers = {"ir",  "lang", "verify", "passes", "lower",
                                          "sim", "prof", "tune",   "driver", "top"};

/// The layer of each public header (include/tilepipe/): a new header must be placed here.
const std::map<std::string, std::string> kHeaderLayer = {
    {"error.h", "ir"},        {"ir.h", "ir"},
    {"ir_range.h", "ir"},     {"ir_vars.h", "ir"},
    {"numeric.h", "ir"},      {"vec_modes.h", "ir"},
    {"ir_deps.h", "ir"},      {"chip.h", "ir"},
    {"lang.h", "lang"},       {"verify.h", "verify"},
    {"passes.h", "passes"},   {"loop_edits.h", "passes"},
    {"lower.h", "lower"},     {"sim.h", "sim"},
    {"json_input.h", "sim"},  {"prof.h", "prof"},
    {"advisor.h", "prof"},    {"html.h", "prof"},
    {"diff.h", "prof"},       {"tune.h", "tune"},
    {"driver.h", "driver"},   {"driver_syncs.h", "driver"},
    {"fidelity.h", "driver"}, {"kernel_params.h", "driver"},
};

int rank(const std::string& layer) {
  for (size_t i = 0; i < kLayers.size(); ++i)
    if (kLayers[i] == layer) return static_cast<int>(i);
  return -1;
}

/// The layer of an included path: a public header by its table entry, a layer's private
/// header ("passes/auto_sync.h") by its directory; "" for anything else (the standard
/// library, fmt, the tools' and kernels' own headers, which are top).
std::string included_layer(const std::string& path) {
  static const std::regex pub(R"(tilepipe/([A-Za-z0-9_]+\.h))");
  std::smatch m;
  if (std::regex_match(path, m, pub)) {
    auto it = kHeaderLayer.find(m[1]);
    return it == kHeaderLayer.end() ? "unplaced" : it->second;
  }
  auto slash = path.find('/');
  if (slash != std::string::npos && rank(path.substr(0, slash)) >= 0) return path.substr(0, slash);
  return "";
}

struct Violation {
  std::string file, include, why;
};

/// Every #include of `file` (in layer `layer`) that reaches above it.
void check_file(const fs::path& file, const std::string& layer, std::vector<Violation>& out) {
  static const std::regex inc(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, inc)) continue;
    const std::string path = m[1], to = included_layer(path);
    const std::string name = fs::relative(file, kRoot).string();
    if (to == "unplaced")
      out.push_back({name, path, "a public header no layer is given (tests/layers_test.cc)"});
    else if (!to.empty() && rank(to) > rank(layer))
      out.push_back({name, path, layer + " includes " + to});
  }
}

std::vector<Violation> violations() {
  std::vector<Violation> out;
  for (const auto& e : fs::directory_iterator(kRoot / "include" / "tilepipe")) {
    const std::string name = e.path().filename().string();
    auto it = kHeaderLayer.find(name);
    if (it == kHeaderLayer.end()) {
      out.push_back({"include/tilepipe/" + name, "", "a public header no layer is given"});
      continue;
    }
    check_file(e.path(), it->second, out);
  }
  for (const auto& layer : kLayers) {
    if (!fs::is_directory(kRoot / "src" / layer)) continue;
    for (const auto& e : fs::recursive_directory_iterator(kRoot / "src" / layer))
      if (e.is_regular_file()) check_file(e.path(), layer, out);
  }
  return out;
}

TEST(Layers, NoFileIncludesAnUpperLayer) {
  ASSERT_TRUE(fs::is_directory(kRoot / "src" / "ir")) << kRoot;
  for (const auto& v : violations())
    ADD_FAILURE() << v.file << ": #include \"" << v.include << "\": " << v.why;
}

TEST(Layers, EveryLayerDirectoryIsOrdered) {
  // A new src/ directory is a new layer: it must be placed in the order above.
  for (const auto& e : fs::directory_iterator(kRoot / "src")) {
    if (e.is_directory()) {
      EXPECT_GE(rank(e.path().filename().string()), 0)
          << e.path() << " is not in the layer order of tests/layers_test.cc";
    }
  }
}

TEST(Layers, TheCheckSeesAnUpwardInclude) {
  // The check itself: a verify file including the simulator is refused.
  const fs::path probe = fs::temp_directory_path() / "tilepipe_layers_probe.cc";
  std::ofstream(probe) << "#include \"tilepipe/sim.h\"\n#include \"tilepipe/ir.h\"\n";
  std::vector<Violation> out;
  check_file(probe, "verify", out);
  fs::remove(probe);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].include, "tilepipe/sim.h");
}

}  // namespace

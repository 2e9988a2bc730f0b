// Chip-config loader: the shipped configs carry the documented values, and every kind of bad
// config is rejected with a one-line message that names the file and the key.
#include <tilepipe/chip.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tilepipe {
namespace {

using nlohmann::json;

const std::string kDir = TILEPIPE_CONFIG_DIR;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The shipped A3 config as a JSON tree, to be broken in one place by each test.
json a3_json() {
  return json::parse(read_text(kDir + "/a3.json"));
}

/// The message of the ConfigError thrown while parsing `text`, or "<no error>".
std::string error_of(const std::string& text, const std::string& origin = "configs/a3.json") {
  try {
    parse_chip_config(text, origin);
  } catch (const ConfigError& e) {
    return e.message;
  }
  return "<no error>";
}

std::string json_error(const json& j) {
  return error_of(j.dump(2));
}

std::string load_error(const std::string& name_or_path) {
  try {
    load_chip_config(name_or_path);
  } catch (const ConfigError& e) {
    return e.message;
  }
  return "<no error>";
}

testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

testing::AssertionResult OneLine(const std::string& text) {
  if (text.find_first_of("\n\r") == std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "message spans several lines: " << text;
}

/// Sets an environment variable for the lifetime of the object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_.empty()) {
      ::unsetenv(name_);
    } else {
      ::setenv(name_, old_.c_str(), 1);
    }
  }

 private:
  const char* name_;
  std::string old_;
};

/// A fresh empty directory under the system temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("tilepipe_chip_config_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::string p = (path_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

 private:
  std::filesystem::path path_;
};

// ---------------------------------------------------------------------------------------------
// The shipped configs.

TEST(ChipConfigLoader, A3LoadsWithTheDocumentedValues) {
  ChipConfig c = load_chip_config("a3");
  EXPECT_EQ(c.name, "a3");
  EXPECT_EQ(c.ai_cores, 24);
  EXPECT_EQ(c.aiv_per_core, 2);
  EXPECT_DOUBLE_EQ(c.clock_mhz, 1850);
  EXPECT_EQ(c.l1.physical, 524288);
  EXPECT_EQ(c.l1.usable, 524032);
  EXPECT_EQ(c.l0a.physical, 65536);
  EXPECT_EQ(c.l0a.usable, 65536);
  EXPECT_EQ(c.l0b.physical, 65536);
  EXPECT_EQ(c.l0b.usable, 65536);
  EXPECT_EQ(c.l0c.physical, 131072);
  EXPECT_EQ(c.l0c.usable, 131072);
  EXPECT_EQ(c.ub.physical, 196608);
  EXPECT_EQ(c.ub.usable, 196352);
  EXPECT_EQ(c.ub_align, 32);
  EXPECT_EQ(c.l1_align, 32);
  EXPECT_EQ(c.ub_banks, 48);
  EXPECT_EQ(c.ub_bank_groups, 16);
  EXPECT_EQ(c.event_ids, 8);
  EXPECT_EQ(c.cross_flag_ids, 16);
  EXPECT_EQ(c.cross_flag_max, 15);
  EXPECT_DOUBLE_EQ(c.cross_flag_latency, 300);
  EXPECT_DOUBLE_EQ(c.cube_head, 60);
  EXPECT_DOUBLE_EQ(c.cube_fractals_per_cycle, 1);
  EXPECT_DOUBLE_EQ(c.cube_int8_rate, 2);
  EXPECT_DOUBLE_EQ(c.cube_fp32_rate, 0.25);
  EXPECT_EQ(c.vector_repeat_bytes, 256);
  EXPECT_EQ(c.vector_max_repeats, 255);
  EXPECT_DOUBLE_EQ(c.vector_startup, 10);
  EXPECT_DOUBLE_EQ(c.vector_startup_add, 6);
  EXPECT_DOUBLE_EQ(c.vector_startup_mul, 7);
  EXPECT_DOUBLE_EQ(c.vector_startup_exp, 12);
  EXPECT_DOUBLE_EQ(c.vector_startup_div, 13);
  EXPECT_DOUBLE_EQ(c.vector_startup_recip, 5);
  EXPECT_DOUBLE_EQ(c.vector_transcendental_elems_per_cycle, 32);
  EXPECT_DOUBLE_EQ(c.vector_reduce_cycles_per_repeat, 5);
  EXPECT_DOUBLE_EQ(c.mte2_latency, 1400);
  EXPECT_DOUBLE_EQ(c.mte2_bw_l2, 100);
  EXPECT_DOUBLE_EQ(c.mte2_bw_hbm, 32);
  EXPECT_DOUBLE_EQ(c.mte3_latency, 300);
  EXPECT_DOUBLE_EQ(c.mte1_latency, 30);
  EXPECT_DOUBLE_EQ(c.mte1_bw_l0a, 256);
  EXPECT_DOUBLE_EQ(c.mte1_bw_l0b, 128);
  EXPECT_DOUBLE_EQ(c.fix_latency, 50);
  EXPECT_DOUBLE_EQ(c.fix_bw, 128);
  EXPECT_DOUBLE_EQ(c.hbm_bw, 760);
  EXPECT_DOUBLE_EQ(c.l2_bw, 2650);
  EXPECT_EQ(c.l2_bytes, 192ll << 20);
  EXPECT_EQ(c.hbm_bytes, 64ll << 30);
  EXPECT_EQ(c.dma_full_bw_align, 512);
  EXPECT_DOUBLE_EQ(c.dma_min_burst_bytes, 336);
  EXPECT_DOUBLE_EQ(c.dma_misaligned_factor, 0.7);
}

TEST(ChipConfigLoader, A2LoadsWithTheDocumentedValues) {
  ChipConfig c = load_chip_config("a2");
  EXPECT_EQ(c.name, "a2");
  EXPECT_EQ(c.ai_cores, 24);
  EXPECT_DOUBLE_EQ(c.clock_mhz, 1800);
  EXPECT_NEAR(c.us_per_cycle() * 1800.0, 1.0, 1e-12);
  EXPECT_EQ(c.l1.usable, 524032);
  EXPECT_EQ(c.ub.physical, 196608);
  EXPECT_EQ(c.ub.usable, 196352);
  EXPECT_EQ(c.l0c.usable, 131072);
  EXPECT_DOUBLE_EQ(c.hbm_bw, 760);
  EXPECT_DOUBLE_EQ(c.l2_bw, 2720);  // 4.9 TB/s at 1.8 GHz
}

TEST(ChipConfigLoader, A2AndA3DifferOnlyInNameClockAndL2BytesPerCycle) {
  json a2 = json::parse(read_text(kDir + "/a2.json"));
  json a3 = a3_json();
  // The bases differ where a2 assumes what was fitted on a3 (next test).
  std::function<void(json&)> drop_basis = [&](json& j) {
    if (j.is_object() && j.contains("value")) {
      j.erase("basis");
    } else if (j.is_object()) {
      for (auto& [k, v] : j.items()) drop_basis(v);
    }
  };
  for (json* j : {&a2, &a3}) {
    j->erase("name");
    j->erase("description");
    (*j)["die"].erase("clock_mhz");
    (*j)["die"].erase("l2_bw");
    drop_basis(*j);
  }
  EXPECT_EQ(a2, a3);
}

/// Every value of the shipped configs states its kind of evidence; a fit names calibration
/// anchors of configs/fidelity.json measured on that chip, and a chip without such data
/// says it assumes another's value.
/// Dotted key -> "basis" of every leaf of a config that states one.
std::map<std::string, std::string> bases(const json& j, const std::string& path = "") {
  std::map<std::string, std::string> out;
  if (j.is_object() && j.contains("value")) {
    if (j.contains("basis")) out[path] = j["basis"].get<std::string>();
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) out.merge(bases(v, path.empty() ? k : path + "." + k));
  }
  return out;
}

TEST(ChipConfigLoader, EveryShippedValueStatesItsBasisAndAFitNamesCalibrationAnchors) {
  json anchors = json::parse(read_text(kDir + "/fidelity.json"));
  std::map<std::string, json> by_name;
  for (const auto& a : anchors["anchors"]) by_name[a["name"].get<std::string>()] = a;
  const auto a3 = bases(a3_json());
  for (const std::string chip : {"a2", "a3"}) {
    ChipConfig c = load_chip_config(chip);
    const auto basis_of = bases(json::parse(read_text(kDir + "/" + chip + ".json")));
    EXPECT_EQ(basis_of.size(), c.sources.size()) << chip;
    for (const auto& [key, basis] : basis_of) {
      SCOPED_TRACE(chip + " " + key + ": " + basis);
      if (basis.rfind("fit: ", 0) == 0) {
        std::string names = basis.substr(5, basis.find(" (") - 5);
        std::istringstream in(names);
        for (std::string name; std::getline(in, name, ',');) {
          name.erase(0, name.find_first_not_of(' '));
          ASSERT_TRUE(by_name.count(name)) << name;
          EXPECT_EQ(by_name[name]["set"], "calibration") << name;
          EXPECT_EQ(by_name[name]["chip"], chip) << name;
        }
      } else if (basis.rfind("assumed from ", 0) == 0) {
        std::string from = basis.substr(13, basis.find(' ', 13) - 13);
        ASSERT_EQ(from, "a3");
        EXPECT_TRUE(Contains(basis, a3.at(key)));
      }
    }
  }
  const auto a2 = bases(json::parse(read_text(kDir + "/a2.json")));
  for (const auto& [key, basis] : a3) {
    if (basis.rfind("fit: ", 0) == 0) {
      EXPECT_EQ(a2.at(key).rfind("assumed from a3", 0), 0u) << key;
    }
  }
}

TEST(ChipConfigLoader, ABasisOutsideItsGrammarIsRejectedNamingTheKey) {
  json j = a3_json();
  j["cube"]["head"]["basis"] = "because";
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'cube.head.basis'"));
  EXPECT_TRUE(Contains(msg, "\"fit: ANCHOR, ...\""));
  j["cube"]["head"]["basis"] = "fit: ";
  EXPECT_TRUE(Contains(json_error(j), "'fit:' names nothing"));
  j["cube"]["head"]["basis"] = 7;
  EXPECT_TRUE(Contains(json_error(j), "it is not a string"));
  j["cube"]["head"].erase("basis");  // a user's config may leave it out
  EXPECT_EQ(error_of(j.dump()), "<no error>");
}

TEST(ChipConfigLoader, EveryValueRecordsItsSourceAndConfidence) {
  ChipConfig c = load_chip_config("a3");
  ASSERT_TRUE(c.sources.count("memory.ub.usable"));
  EXPECT_TRUE(Contains(c.sources.at("memory.ub.usable"), "196352 B"));
  EXPECT_TRUE(Contains(c.sources.at("memory.ub.usable"), "[H]"));
  EXPECT_TRUE(Contains(c.sources.at("sync.cross_flag_latency"), "[L]"));
  EXPECT_TRUE(Contains(c.sources.at("dma.mte2_latency"), "[M]"));
  // One entry per numeric leaf in the file.
  size_t leaves = 0;
  std::function<void(const json&)> count = [&](const json& j) {
    if (j.is_object() && j.contains("value")) {
      ++leaves;
    } else if (j.is_object()) {
      for (const auto& [k, v] : j.items()) count(v);
    }
  };
  count(a3_json());
  EXPECT_EQ(c.sources.size(), leaves);
  for (const auto& [key, src] : c.sources) {
    bool tagged = src.ends_with(" [H]") || src.ends_with(" [M]") || src.ends_with(" [L]");
    EXPECT_TRUE(tagged) << key << ": " << src;
  }
}

TEST(ChipConfigLoader, PathEndingInJsonLoadsThatFile) {
  ChipConfig c = load_chip_config(kDir + "/a2.json");
  EXPECT_EQ(c.name, "a2");
}

TEST(ChipConfigLoader, EnvironmentVariableOverridesTheConfigDirectory) {
  TempDir dir;
  json j = a3_json();
  j["name"] = "mychip";
  j["die"]["ai_cores"]["value"] = 20;
  dir.write("mychip.json", j.dump());
  ScopedEnv env("TILEPIPE_CONFIG_DIR", dir.path());
  ChipConfig c = load_chip_config("mychip");
  EXPECT_EQ(c.name, "mychip");
  EXPECT_EQ(c.ai_cores, 20);
  EXPECT_TRUE(Contains(load_error("a3"), "expected one of mychip"));
}

// ---------------------------------------------------------------------------------------------
// Rejected configs: each message names the file and the dotted key.

TEST(ChipConfigLoader, MissingKeyIsRejectedNamingTheKey) {
  json j = a3_json();
  j["memory"]["ub"].erase("usable");
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "configs/a3.json: key 'memory.ub.usable'"));
  EXPECT_TRUE(Contains(msg, "missing"));
  EXPECT_TRUE(Contains(msg, "\"unit\": \"B\""));  // the fix shows what to write
}

TEST(ChipConfigLoader, MissingSectionIsRejectedNamingTheSection) {
  json j = a3_json();
  j.erase("vector");
  EXPECT_TRUE(Contains(json_error(j), "key 'vector': expected an object, found nothing"));
}

TEST(ChipConfigLoader, MissingSourceIsRejectedNamingTheKey) {
  json j = a3_json();
  j["cube"]["head"].erase("source");
  EXPECT_TRUE(Contains(json_error(j), "key 'cube.head.source': expected a string, found nothing"));
}

TEST(ChipConfigLoader, StringWhereANumberBelongsIsRejected) {
  json j = a3_json();
  j["die"]["clock_mhz"]["value"] = "1850";
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'die.clock_mhz': expected a number in [100, 10000] MHz"));
  EXPECT_TRUE(Contains(msg, "found \"1850\" (a string)"));
  EXPECT_TRUE(Contains(msg, "without quotes"));
}

TEST(ChipConfigLoader, VectorCoresPerAiCoreAreOneOrTwo) {
  // The IR's vid is 0 or 1: a config with more AIVs per AI core (or none) is refused, never
  // simulated with two (the simulator used to clamp it silently).
  for (int n : {0, 3, 4}) {
    json j = a3_json();
    j["die"]["aiv_per_core"]["value"] = n;
    EXPECT_TRUE(Contains(json_error(j), "key 'die.aiv_per_core': expected an integer in [1, 2]"))
        << n;
  }
  json j = a3_json();
  j["die"]["aiv_per_core"]["value"] = 1;
  EXPECT_EQ(json_error(j), "<no error>");
}

TEST(ChipConfigLoader, FractionWhereAnIntegerBelongsIsRejected) {
  json j = a3_json();
  j["die"]["ai_cores"]["value"] = 24.5;
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'die.ai_cores': expected an integer in (0, 1024] count"));
  EXPECT_TRUE(Contains(msg, "found 24.5"));
}

TEST(ChipConfigLoader, BareNumberInsteadOfAValueObjectIsRejected) {
  json j = a3_json();
  j["memory"]["l1"]["physical"] = 524288;
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'memory.l1.physical': expected a value object"));
  EXPECT_TRUE(Contains(msg, "found 524288"));
}

TEST(ChipConfigLoader, SectionOfTheWrongTypeIsRejected) {
  json j = a3_json();
  j["sync"] = json::array();
  EXPECT_TRUE(Contains(json_error(j), "key 'sync': expected an object with the keys event_ids"));
}

TEST(ChipConfigLoader, NegativeValueIsRejected) {
  json j = a3_json();
  j["dma"]["mte2_latency"]["value"] = -1400;
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'dma.mte2_latency'"));
  EXPECT_TRUE(Contains(msg, "found -1400"));
  EXPECT_TRUE(Contains(msg, "must be positive"));
}

TEST(ChipConfigLoader, ZeroCapacityIsRejected) {
  json j = a3_json();
  j["memory"]["l0a"]["usable"]["value"] = 0;
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'memory.l0a.usable': expected an integer in (0, 67108864] B"));
  EXPECT_TRUE(Contains(msg, "found 0"));
}

TEST(ChipConfigLoader, ZeroLaunchCostIsAccepted) {
  json j = a3_json();
  j["die"]["launch_us"]["value"] = 0;
  EXPECT_EQ(json_error(j), "<no error>");
}

TEST(ChipConfigLoader, ImplausiblyLargeValueIsRejected) {
  json j = a3_json();
  j["die"]["clock_mhz"]["value"] = 1850000;  // Hz written as MHz
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'die.clock_mhz'"));
  EXPECT_TRUE(Contains(msg, "above what any Ascend part has"));
}

TEST(ChipConfigLoader, HugeIntegerIsRejectedNotWrapped) {
  json j = a3_json();
  j["memory"]["ub"]["physical"]["value"] = 18446744073709551615ull;
  EXPECT_TRUE(Contains(json_error(j), "key 'memory.ub.physical'"));
}

TEST(ChipConfigLoader, UsableAbovePhysicalIsRejected) {
  json j = a3_json();
  j["memory"]["ub"]["usable"]["value"] = 300000;
  j["memory"]["ub"]["physical"]["value"] = 196608;
  EXPECT_EQ(json_error(j),
            "configs/a3.json: key 'memory.ub.usable': expected an integer <= memory.ub.physical "
            "(196608), found 300000; fix the value or raise physical");
}

TEST(ChipConfigLoader, MisspelledKeyIsRejectedWithASuggestion) {
  json j = a3_json();
  j["memory"]["ub"]["usabel"] = j["memory"]["ub"]["usable"];
  j["memory"]["ub"].erase("usable");
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'memory.ub.usabel'"));
  EXPECT_TRUE(Contains(msg, "unknown key"));
  EXPECT_TRUE(Contains(msg, "did you mean 'usable'?"));
}

TEST(ChipConfigLoader, UnknownSectionIsRejected) {
  json j = a3_json();
  j["extra"] = json::object();
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'extra'"));
  EXPECT_TRUE(Contains(msg, "unknown key"));
}

TEST(ChipConfigLoader, UnknownKeyInsideAValueObjectIsRejected) {
  json j = a3_json();
  j["cube"]["head"]["vaule"] = 60;
  EXPECT_TRUE(Contains(json_error(j), "key 'cube.head.vaule'"));
  EXPECT_TRUE(Contains(json_error(j), "did you mean 'value'?"));
}

TEST(ChipConfigLoader, WrongUnitIsRejected) {
  json j = a3_json();
  j["memory"]["ub"]["physical"]["unit"] = "KiB";
  j["memory"]["ub"]["physical"]["value"] = 192;
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'memory.ub.physical.unit': expected \"B\", found \"KiB\""));
}

TEST(ChipConfigLoader, ConfidenceOtherThanHMLIsRejected) {
  json j = a3_json();
  j["sync"]["flag_latency"]["conf"] = "high";
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "key 'sync.flag_latency.conf': expected \"H\", \"M\" or \"L\""));
  EXPECT_TRUE(Contains(msg, "found \"high\" (a string)"));
}

TEST(ChipConfigLoader, AlignmentThatIsNotAPowerOfTwoIsRejected) {
  json j = a3_json();
  j["memory"]["ub"]["align"]["value"] = 48;
  EXPECT_TRUE(Contains(json_error(j), "key 'memory.ub.align': expected a power of two"));
}

TEST(ChipConfigLoader, DuplicateKeyIsRejected) {
  std::string text = read_text(kDir + "/a3.json");
  std::string line = "\"ai_cores\":";
  size_t at = text.find(line);
  ASSERT_NE(at, std::string::npos);
  size_t end = text.find('\n', at);
  text.insert(end + 1, text.substr(at, end - at + 1));  // the same key again, next line
  std::string msg = error_of(text);
  EXPECT_TRUE(Contains(msg, "key 'die.ai_cores'"));
  EXPECT_TRUE(Contains(msg, "twice"));
}

TEST(ChipConfigLoader, MalformedJsonIsRejectedWithTheParserPosition) {
  std::string msg = error_of("{\n  \"name\": \"a3\",\n  \"die\": {,\n}", "bad.json");
  EXPECT_TRUE(Contains(msg, "bad.json: malformed JSON"));
  EXPECT_TRUE(Contains(msg, "line 3, column"));
  EXPECT_TRUE(OneLine(msg));
}

TEST(ChipConfigLoader, EmptyTextIsRejectedAsEmpty) {
  EXPECT_TRUE(Contains(error_of(""), "the file is empty"));
  EXPECT_TRUE(Contains(error_of(" \n"), "the file is empty"));
}

TEST(ChipConfigLoader, TopLevelThatIsNotAnObjectIsRejected) {
  std::string msg = error_of("[1, 2, 3]");
  EXPECT_TRUE(Contains(msg, "configs/a3.json: expected a JSON object with the keys name"));
  EXPECT_TRUE(Contains(msg, "found an array"));
}

TEST(ChipConfigLoader, KeysListEveryValueOfTheFileWithItsKindAndRange) {
  auto keys = chip_config_keys();
  ChipConfig a3 = load_chip_config("a3");
  EXPECT_EQ(keys.size(), a3.sources.size());  // one source per value of the file
  for (const auto& k : keys) {
    EXPECT_TRUE(a3.sources.count(k.key)) << k.key;
    EXPECT_LT(k.lo, k.hi) << k.key;
  }
  auto find = [&](const std::string& key) {
    for (const auto& k : keys)
      if (k.key == key) return k;
    ADD_FAILURE() << key;
    return ChipKey{};
  };
  EXPECT_TRUE(find("memory.ub.banks").integer);
  EXPECT_FALSE(find("vector.reduce_cycles_per_repeat").integer);  // the file writes 5
  EXPECT_EQ(find("die.hbm_bw").unit, "B/cycle");
}

TEST(ChipConfigLoader, ACalibrationRecordIsKeptButMustBeAnObject) {
  std::ifstream in(chip_config_path("a3"));
  std::stringstream text;
  text << in.rdbuf();
  std::string base = text.str();
  auto with = [&](const std::string& record) {
    return base.substr(0, base.rfind('}')) + ", \"calibration\": " + record + "}";
  };
  EXPECT_NO_THROW(parse_chip_config(with(R"({"tool": "tilepipe calibrate"})"), "x.json"));
  try {
    parse_chip_config(with("3"), "x.json");
    ADD_FAILURE() << "a calibration record that is not an object was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(e.message.find("key 'calibration': expected an object"), std::string::npos)
        << e.message;
  }
}

TEST(ChipConfigLoader, UnknownChipNameListsTheAvailableNames) {
  std::string msg = load_error("a4");
  EXPECT_TRUE(Contains(msg, "unknown chip 'a4'"));
  EXPECT_TRUE(Contains(msg, "expected one of a2, a3"));
  EXPECT_TRUE(OneLine(msg));
}

TEST(ChipConfigLoader, ChipNameWithAPathIsRejectedNotResolved) {
  EXPECT_TRUE(Contains(load_error("../configs/a3"), "unknown chip '../configs/a3'"));
  EXPECT_TRUE(Contains(load_error(""), "unknown chip ''"));
}

TEST(ChipConfigLoader, MissingFileIsRejectedNamingThePath) {
  std::string msg = load_error("/nonexistent/dir/chip.json");
  EXPECT_TRUE(Contains(msg, "/nonexistent/dir/chip.json: expected a readable chip config file"));
  EXPECT_TRUE(Contains(msg, "no such file"));
}

TEST(ChipConfigLoader, DirectoryNamedLikeAJsonFileIsRejected) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/x.json");
  EXPECT_TRUE(Contains(load_error(dir.path() + "/x.json"), "not a regular file"));
}

TEST(ChipConfigLoader, ErrorFromAFileNamesThatFile) {
  TempDir dir;
  json j = a3_json();
  j["issue"]["issue_cycles"]["value"] = -2;
  std::string path = dir.write("broken.json", j.dump(2));
  EXPECT_TRUE(Contains(load_error(path), path + ": key 'issue.issue_cycles'"));
}

// ---------------------------------------------------------------------------------------------
// Robustness: no input crashes the loader; everything bad becomes a one-line ConfigError.

TEST(ChipConfigLoader, EveryTruncationOfAValidConfigIsRejectedCleanly) {
  std::string text = read_text(kDir + "/a3.json");
  text.erase(text.find_last_not_of(" \n") + 1);  // any shorter prefix is incomplete
  for (size_t n = 0; n < text.size(); n += 13) {
    std::string msg = error_of(text.substr(0, n));
    ASSERT_NE(msg, "<no error>") << "prefix of " << n << " bytes";
    ASSERT_TRUE(OneLine(msg));
  }
}

TEST(ChipConfigLoader, EveryLeafReplacedByOddValuesIsHandled) {
  const json odd[] = {nullptr, "x", json::array(), -1, 1e308};
  json base = a3_json();
  std::vector<std::string> paths;
  std::function<void(const json&, const std::string&)> walk = [&](const json& j,
                                                                  const std::string& p) {
    if (!j.is_object()) return;
    for (const auto& [k, v] : j.items()) {
      std::string child = p + "/" + k;
      if (k != "unit" && k != "source" && k != "conf") paths.push_back(child);
      walk(v, child);
    }
  };
  walk(base, "");
  for (const std::string& p : paths) {
    for (const json& v : odd) {
      json j = base;
      j[json::json_pointer(p)] = v;
      std::string msg = json_error(j);  // may be accepted (e.g. 0.5 cycles), must not crash
      EXPECT_TRUE(OneLine(msg));
    }
  }
}

TEST(ChipConfigLoader, DeeplyNestedInputIsRejectedCleanly) {
  std::string deep(100000, '[');
  EXPECT_NE(error_of(deep), "<no error>");
  EXPECT_TRUE(Contains(error_of(deep + std::string(100000, ']')), "found an array"));
}

TEST(ChipConfigLoader, ControlCharactersInKeysDoNotBreakTheMessageOntoSeveralLines) {
  json j = a3_json();
  j["die"]["bad\nkey"] = 1;
  std::string msg = json_error(j);
  EXPECT_TRUE(Contains(msg, "unknown key"));
  EXPECT_TRUE(OneLine(msg));
}

}  // namespace
}  // namespace tilepipe

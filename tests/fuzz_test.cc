// Fuzz test: a fixed number of random tile programs (tests/fuzz_gen.h), valid and with one
// deliberate defect each. Every one must be verified-and-run with the right result, or end
// in a diagnostic for the user; never an internal error (and, under the sanitizers, never a
// sanitizer report). TILEPIPE_FUZZ_COUNT overrides the count (default 2000) and
// TILEPIPE_FUZZ_SEED the first seed, for longer runs:
//   TILEPIPE_FUZZ_COUNT=10000 build/tilepipe_tests --gtest_filter='Fuzz.*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "fuzz_gen.h"
#include "test_util.h"

namespace tilepipe {
namespace {

uint64_t env_or(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : def;
}

TEST(Fuzz, RandomProgramsRunCorrectlyOrEndInADiagnosticNeverAnInternalError) {
#if defined(__SANITIZE_ADDRESS__)
  const uint64_t def = 500;  // the sanitizer build runs a quarter of them
#else
  const uint64_t def = 2000;
#endif
  const uint64_t count = env_or("TILEPIPE_FUZZ_COUNT", def);
  const uint64_t first = env_or("TILEPIPE_FUZZ_SEED", 1);
  std::map<std::string, int> diag_kinds;
  std::map<std::string, int> defects_run;  // defect -> programs that still ran correctly
  int ran = 0, diagnostics = 0, valid_ran = 0, valid = 0, soups = 0, soup_ran = 0;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    auto r = fuzz::run_fuzz_case(seed, testing::a3());
    const bool is_valid = r.defect == fuzz::Defect::None;
    const bool soup = r.defect == fuzz::Defect::Soup;
    valid += is_valid;
    soups += soup;
    switch (r.outcome) {
      case fuzz::Outcome::Ran:
        ++ran;
        valid_ran += is_valid;
        if (!is_valid && !soup) ++defects_run[fuzz::to_string(r.defect)];
        soup_ran += soup;
        break;
      case fuzz::Outcome::Diagnostic:
        ++diagnostics;
        ++diag_kinds[r.kind];
        // A program without a defect is accepted and runs.
        EXPECT_FALSE(is_valid) << "seed " << seed << ": valid program rejected: " << r.message;
        // Every user diagnostic carries a location in the generator (or the builder).
        EXPECT_NE(r.message.find("fuzz_gen.h:"), std::string::npos)
            << "seed " << seed << " (" << fuzz::to_string(r.defect) << "): " << r.message;
        break;
      case fuzz::Outcome::WrongResult:
        if (soup) break;  // no reference: soup programs only must not crash
        ADD_FAILURE() << "seed " << seed << " (" << fuzz::to_string(r.defect)
                      << "): ran without a diagnostic but gave a wrong result: " << r.message;
        break;
      case fuzz::Outcome::InternalError:
        ADD_FAILURE() << "seed " << seed << " (" << fuzz::to_string(r.defect)
                      << "): internal error: " << r.message;
        break;
    }
  }
  std::string kinds;
  for (const auto& [k, n] : diag_kinds) kinds += " " + k + "=" + std::to_string(n);
  std::string survived;
  for (const auto& [k, n] : defects_run) survived += " " + k + "=" + std::to_string(n);
  std::cout << "[fuzz] " << count << " programs from seed " << first << ": " << valid << " valid, "
            << soups << " random soups (" << soup_ran << " ran), " << ran << " verified-and-run ("
            << valid_ran << " valid), " << diagnostics << " diagnostics (" << kinds
            << " ), defective but ran:" << survived << "\n";
  // The generator is not vacuous: both halves are exercised.
  EXPECT_GT(valid_ran, static_cast<int>(count / 4));
  EXPECT_GT(diagnostics, static_cast<int>(count / 4));
}

TEST(Fuzz, GeneratorIsDeterministic) {
  for (uint64_t seed : {3u, 17u, 123u}) {
    auto a = fuzz::generate(seed), b = fuzz::generate(seed);
    EXPECT_EQ(a.defect, b.defect);
    EXPECT_EQ(ir::print(a.program), ir::print(b.program));
    EXPECT_EQ(a.inputs, b.inputs);
  }
}

}  // namespace
}  // namespace tilepipe

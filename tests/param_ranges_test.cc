// Every value `tilepipe list` documents works: for each kernel and variant of the registry,
// parameters drawn at random inside the declared ranges (seeded, log-uniform so small and
// huge values both occur) give a program that verifies and lowers, or a documented
// constraint error: a ParamError or UserError with a message, whose capacity hint names
// only knobs the kernel has. Programs small enough are also run: timing mode within a cycle
// budget, and functional mode, checked against the reference, when tiny.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regex>
#include <set>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/driver.h"
#include "tilepipe/lang.h"

namespace tilepipe {
namespace {

constexpr int kDrawsPerVariant = 8;
constexpr int64_t kMaxRunGmBytes = 32 << 20;  // larger inputs: verify and lower only
constexpr double kTimingBudget = 3e5;         // cycles; a longer timing run is cut off
constexpr double kFunctionalCycles = 3e4;     // timed shorter: also run with values
constexpr int64_t kMaxFunctionalGmBytes = 1 << 20;

/// Thrown from RunRequest::on_lowered to stop before inputs are made for a large program.
struct TooLargeToRun {};

int64_t gm_bytes(const lower::LoweredProgram& p) {
  int64_t b = 0;
  for (const auto& g : p.gm) b += g.buffer->bytes();
  return b;
}

/// One value of `s`: log-uniform over the range, or uniform (1 in 4), and rounded down to a
/// multiple of 16 .. 128 half the time, since sizes are often asked to be such multiples.
int64_t draw(const driver::ParamSpec& s, std::mt19937_64& rng) {
  if (s.min == s.max) return s.min;
  std::uniform_real_distribution<double> u(std::log(std::max<double>(1, s.min)),
                                           std::log(static_cast<double>(s.max) + 1));
  auto x = static_cast<int64_t>(std::exp(u(rng)));
  if (rng() % 4 == 0)
    x = s.min + static_cast<int64_t>(rng() % static_cast<uint64_t>(s.max - s.min + 1));
  if (rng() % 2) {
    int64_t m = int64_t{16} << (rng() % 4);
    x = x / m * m;
  }
  return std::clamp(x, s.min, s.max);
}

/// Parameters the cross-checks and the variant's build accept (up to 500 draws), else the
/// last draw. Every other draw stays at or below the defaults, so that some runs are small
/// enough to simulate.
std::map<std::string, std::string> draw_params(const driver::KernelSource& k,
                                               const std::string& variant, bool small,
                                               std::mt19937_64& rng) {
  std::map<std::string, std::string> raw;
  for (int tries = 0; tries < 500; ++tries) {
    for (const auto& s : k.params) {
      driver::ParamSpec range = s;
      if (small) range.max = std::max(s.min, s.def);
      raw[s.name] = std::to_string(draw(range, rng));
    }
    try {
      k.build(driver::resolve_params(k, raw), variant);
      return raw;
    } catch (const driver::ParamError&) {
    }
  }
  return raw;
}

std::string describe(const std::map<std::string, std::string>& raw) {
  std::string s;
  for (const auto& [n, v] : raw) s += " --param " + n + "=" + v;
  return s;
}

/// Every parameter name of any kernel: a hint may name only those of its own kernel.
std::set<std::string> all_param_names() {
  std::set<std::string> names;
  for (const auto& k : kernels::all_kernels())
    for (const auto& p : k.params) names.insert(p.name);
  return names;
}

struct Tally {
  int lowered = 0, timed = 0, checked = 0, rejected = 0;
};

void expect_hint_names_own_knobs(const UserError& e, const driver::KernelSource& k,
                                 const std::string& what) {
  static const std::set<std::string> names = all_param_names();
  std::set<std::string> own;
  for (const auto& p : k.params) own.insert(p.name);
  for (const auto& d : e.diagnostics()) {
    EXPECT_FALSE(d.message.empty()) << what;
    for (const auto& n : names) {
      // Named as a parameter: "--param X=", "X <= 4", "fewer X" (not the word "tile").
      std::regex word("(^|[^\\w-])" + n + " ?(=|<=|>=|<|>)|fewer " + n + "\\b");
      if (std::regex_search(d.hint, word)) {
        EXPECT_TRUE(own.count(n)) << what << ": the hint names '" << n << "', which kernel '"
                                  << k.name << "' does not have: " << d.hint;
      }
    }
  }
}

void try_one(const driver::KernelSource& k, const std::string& variant,
             const std::map<std::string, std::string>& raw, Tally& t) {
  const std::string what = "tilepipe run " + k.name + " --variant " + variant + describe(raw);
  driver::RunRequest req;
  req.variant = variant;
  req.mode = sim::Mode::Timing;
  req.max_cycles = kTimingBudget;
  int64_t bytes = 0;
  req.on_lowered = [&](const lower::LoweredProgram& p) {
    bytes = gm_bytes(p);
    if (bytes > kMaxRunGmBytes) throw TooLargeToRun{};
  };
  try {
    req.params = driver::resolve_params(k, raw);
    auto rep = driver::run_kernel(k, req, testing::a3());
    ++t.lowered;
    ++t.timed;
    if (rep.sim.cycles > kFunctionalCycles || bytes > kMaxFunctionalGmBytes) return;
    req.mode = sim::Mode::Functional;
    rep = driver::run_kernel(k, req, testing::a3());
    ++t.checked;
    EXPECT_TRUE(rep.correct) << what << ": " << rep.mismatch;
  } catch (const TooLargeToRun&) {
    ++t.lowered;
  } catch (const driver::ParamError& e) {
    ++t.rejected;
    EXPECT_FALSE(e.message.empty()) << what;
  } catch (const driver::SimFailure& e) {
    // Only the test's own cycle budget may stop a run: anything else is a kernel bug.
    ++t.lowered;
    ASSERT_FALSE(e.diagnostics().empty()) << what;
    EXPECT_EQ(e.diagnostics().front().kind, "cycle-budget") << what << ": " << e.what();
  } catch (const UserError& e) {
    ++t.rejected;
    expect_hint_names_own_knobs(e, k, what);
  } catch (const lang::BuildError& e) {
    ADD_FAILURE() << what << ": the kernel failed to build: " << e.loc.str() << ": " << e.message;
  }
}

TEST(ParamRanges, EveryDrawInRangeRunsOrGivesADocumentedError) {
  std::mt19937_64 rng(17);
  for (const auto& k : kernels::all_kernels()) {
    for (const auto& variant : k.variants) {
      Tally t;
      for (int i = 0; i < kDrawsPerVariant; ++i)
        try_one(k, variant, draw_params(k, variant, i % 2 == 1, rng), t);
      // Most draws must reach the simulator, or the test checks nothing.
      EXPECT_GE(t.lowered, kDrawsPerVariant / 2)
          << k.name << " [" << variant << "]: only " << t.lowered << " of " << kDrawsPerVariant
          << " draws verified and lowered (" << t.rejected << " rejected)";
      EXPECT_GE(t.timed, 1) << k.name << " [" << variant << "]: no draw was simulated";
    }
  }
}

TEST(ParamRanges, SoftmaxAtFourThousandColumnsRuns) {
  const auto& k = kernels::find_kernel("softmax");
  driver::RunRequest req;
  req.params = driver::resolve_params(k, {{"R", "64"}, {"C", "4096"}});
  auto rep = driver::run_kernel(k, req, testing::a3());
  EXPECT_TRUE(rep.correct) << rep.mismatch;
}

TEST(ParamRanges, CapacityHintWithoutStagesKnobNamesNoStages) {
  // A UB overflow in a program that declares no pipeline-stages knob: the hint must not
  // suggest num_stages (the softmax bug of issue 17).
  lang::KernelBuilder kb("overflow", 1);
  auto x = kb.input("X", {16, 16}, ir::DType::F16);
  (void)x;
  lang::scope_v([&] { lang::alloc_ub("big", {4, 128, 256}, ir::DType::F32); });
  try {
    verify_or_throw(kb.finish(), testing::a3());
    FAIL() << "expected a UB overflow";
  } catch (const UserError& e) {
    const auto& d = e.diagnostics().front();
    EXPECT_EQ(d.kind, "capacity");
    EXPECT_EQ(d.hint.find("num_stages"), std::string::npos) << d.hint;
    EXPECT_NE(d.hint.find("fewer slots"), std::string::npos) << d.hint;
  }
}

}  // namespace
}  // namespace tilepipe

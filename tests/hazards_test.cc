// The hardware's own hazards, diagnosed at the author's line: the warning channel (severity,
// warnings-as-errors, the JSON form, the docs table), GM <-> UB copies whose DMA bursts
// would start off a 32-byte block of UB (upstream TileLang-Ascend #1537 / #1777), and
// hand-written flags and barriers that differ between the paths of an if (#1824).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "test_util.h"
#include "tilepipe/driver.h"
#include "tilepipe/lang.h"
#include "tilepipe/verify.h"

namespace tilepipe {
namespace {

using namespace lang;

std::vector<Diagnostic> of_kind(const std::vector<Diagnostic>& d, const std::string& kind) {
  std::vector<Diagnostic> out;
  for (const auto& x : d)
    if (x.kind == kind) out.push_back(x);
  return out;
}

/// Loads column `col` of X [64, 16] f32 (rows of 4 bytes) into UB and writes it back to Y.
/// `pad`: the UB buffer's rows padded to 8 elements (32 bytes), the copy into column 0.
ir::Program column(bool pad, int* line = nullptr) {
  KernelBuilder kb("column", 1);
  auto x = kb.input("x", {64, 16}, f32);
  auto y = kb.output("y", {64, 1}, f32);
  scope_v([&] {
    auto u = alloc_ub("u", {64, pad ? 8 : 1}, f32);
    if (line) *line = __LINE__ + 1;
    copy(x(all, slice(3, 1)), u(all, slice(0, 1)));
    copy(u(all, slice(0, 1)), y);
  });
  return kb.finish();
}

TEST(Hazards, StridedNarrowRowsAreAnErrorAtTheCopyWithTheFix) {
  int line = 0;
  auto d = verify(column(false, &line), testing::a3());
  auto rows = of_kind(d, "dma-row-pitch");
  ASSERT_EQ(rows.size(), 1u) << (d.empty() ? "" : d.front().str());
  EXPECT_EQ(rows[0].loc.line, line);
  EXPECT_EQ(rows[0].severity, Severity::Error);
  EXPECT_NE(rows[0].message.find("4 bytes apart"), std::string::npos) << rows[0].message;
  EXPECT_NE(rows[0].hint.find("[64, 8]"), std::string::npos) << rows[0].hint;
}

TEST(Hazards, RowsPaddedToThirtyTwoBytesAreAccepted) {
  auto r = verify_all(column(true), testing::a3());
  EXPECT_TRUE(r.diagnostics.empty()) << r.diagnostics.front().str();
}

/// A GM tensor [M, W] copied whole to and from a UB buffer of the same shape: one
/// contiguous range on both sides.
ir::Program compact(int64_t w, int* line = nullptr) {
  KernelBuilder kb("compact", 1);
  auto x = kb.input("x", {16, w}, f32);
  auto y = kb.output("y", {16, w}, f32);
  scope_v([&] {
    auto u = alloc_ub("u", {16, w}, f32);
    if (line) *line = __LINE__ + 1;
    copy(x, u);
    copy(u, y);
  });
  return kb.finish();
}

TEST(Hazards, CompactNarrowRowsAreAWarningOfTheReleasedToolchain) {
  int line = 0;
  auto r = verify_all(compact(3, &line), testing::a3());
  EXPECT_TRUE(r.errors().empty());
  auto w = r.warnings();
  ASSERT_EQ(w.size(), 2u);  // the load and the store
  EXPECT_EQ(w[0].kind, "dma-compact-rows");
  EXPECT_EQ(w[0].loc.line, line);
  EXPECT_EQ(w[0].str().rfind(fmt::format("hazards_test.cc:{}:", line), 0), 0u) << w[0].str();
  EXPECT_NE(w[0].str().find(": warning: "), std::string::npos);
  EXPECT_TRUE(verify_all(compact(8), testing::a3()).diagnostics.empty());  // 32-byte rows
}

TEST(Hazards, ARowOfElementsOffThirtyTwoBytesIsStridedToo) {
  // 12 f32 (48 bytes) of each 64-element row: bursts start 48 bytes apart in UB.
  KernelBuilder kb("wide", 1);
  auto x = kb.input("x", {8, 64}, f32);
  scope_v([&] {
    auto u = alloc_ub("u", {8, 12}, f32);
    copy(x(all, slice(0, 12)), u);
  });
  auto d = of_kind(verify(kb.finish(), testing::a3()), "dma-row-pitch");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].message.find("48 bytes apart"), std::string::npos) << d[0].message;
  EXPECT_NE(d[0].hint.find("[8, 16]"), std::string::npos) << d[0].hint;
}

driver::KernelSource source_of(ir::Program p) {
  driver::KernelSource k;
  k.name = p.name;
  k.build = [p](const driver::Params&, const std::string&) { return driver::Built(p); };
  return k;
}

TEST(Hazards, CompileCarriesWarningsAndWarningsAsErrorsStopsIt) {
  auto k = source_of(compact(3));
  driver::CompileRequest req;
  auto c = driver::compile(k, req, testing::a3());
  ASSERT_EQ(c.warnings.size(), 2u);
  auto j = driver::warnings_json(c.warnings);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["kind"], "dma-compact-rows");
  EXPECT_EQ(j[0]["file"], "hazards_test.cc");
  EXPECT_GT(j[0]["line"].get<int>(), 0);
  EXPECT_FALSE(j[0]["fix"].get<std::string>().empty());
  req.warnings_as_errors = true;
  try {
    driver::compile(k, req, testing::a3());
    FAIL() << "warnings as errors did not stop the compilation";
  } catch (const UserError& e) {
    EXPECT_EQ(e.diagnostics().front().kind, "dma-compact-rows");
    EXPECT_EQ(e.diagnostics().front().severity, Severity::Error);
  }
  req.warnings_as_errors = false;
  setenv("TILEPIPE_WERROR", "1", 1);
  EXPECT_THROW(driver::compile(k, req, testing::a3()), UserError);
  setenv("TILEPIPE_WERROR", "0", 1);
  EXPECT_NO_THROW(driver::compile(k, req, testing::a3()));
  unsetenv("TILEPIPE_WERROR");
}

/// Hand-synced: the V -> MTE3 flag is set in one branch and waited after the if.
ir::Program set_in_branch(bool loop_guard, int* line = nullptr) {
  KernelBuilder kb("setbranch", 1);
  auto x = kb.input("x", {2, 64}, f32);
  auto y = kb.output("y", {2, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto u = alloc_ub("u", {64}, f32);
    serial(2, [&](Ex i) {
      copy(x(vid, all), u);
      set_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      tile::add(u, u, u);
      if (line) *line = __LINE__ + 1;
      if_((loop_guard ? i : vid) == 0, [&] { set_flag(Pipe::V, Pipe::MTE3, 0); });
      wait_flag(Pipe::V, Pipe::MTE3, 0);
      copy(u, y(vid, all));
      set_flag(Pipe::MTE3, Pipe::MTE2, 0);
      wait_flag(Pipe::MTE3, Pipe::MTE2, 0);
    });
  });
  return kb.finish();
}

TEST(Hazards, AFlagSetOnOnePathOfAnIfIsAWarningAtTheIf) {
  int line = 0;
  auto r = verify_all(set_in_branch(false, &line), testing::a3());
  EXPECT_TRUE(r.errors().empty());
  auto w = of_kind(r.warnings(), "branch-flags");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].loc.line, line);
  EXPECT_NE(w[0].message.find("V->MTE3 #0"), std::string::npos) << w[0].message;
  // A loop-variable guard is a pipeline's prologue / epilogue: not reported.
  EXPECT_TRUE(verify_all(set_in_branch(true), testing::a3()).warnings().empty());
}

/// Hand-synced: the barrier ordering the load of `a` with its use sits in one branch.
ir::Program barrier_in_branch(bool both, int* line = nullptr) {
  KernelBuilder kb("barbranch", 1);
  auto x = kb.input("x", {2, 64}, f32);
  auto y = kb.output("y", {2, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {64}, f32);
    copy(x(vid, all), a);
    if (line) *line = __LINE__ + 1;
    if_else(
        vid == 0, [&] { pipe_barrier(Pipe::MTE2); },
        [&] {
          if (both) pipe_barrier(Pipe::MTE2);
        });
    set_flag(Pipe::MTE2, Pipe::V, 0);
    wait_flag(Pipe::MTE2, Pipe::V, 0);
    tile::add(a, a, a);
    set_flag(Pipe::V, Pipe::MTE3, 0);
    wait_flag(Pipe::V, Pipe::MTE3, 0);
    copy(a, y(vid, all));
  });
  return kb.finish();
}

TEST(Hazards, ABarrierOnOnePathOfAnIfIsAWarningAtTheIf) {
  int line = 0;
  auto w = of_kind(verify_all(barrier_in_branch(false, &line), testing::a3()).warnings(),
                   "branch-barrier");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].loc.line, line);
  EXPECT_TRUE(verify_all(barrier_in_branch(true), testing::a3()).warnings().empty());
}

TEST(Hazards, EveryWarningKindHasItsSectionInTheErrorsPage) {
  std::ifstream f(std::string(TILEPIPE_CONFIG_DIR) + "/../docs/errors.md");
  ASSERT_TRUE(f) << "docs/errors.md not found";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  const auto warnings = doc.find("## Warnings");
  ASSERT_NE(warnings, std::string::npos);
  for (const char* kind : kWarningKinds)
    EXPECT_NE(doc.find(fmt::format("### `{}`", kind), warnings), std::string::npos) << kind;
}

}  // namespace
}  // namespace tilepipe

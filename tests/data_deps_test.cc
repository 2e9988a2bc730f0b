// ir::data_dependence: which statements' control flow or addresses follow input values.
#include <gtest/gtest.h>

#include "tilepipe/ir_deps.h"
#include "tilepipe/lang.h"

namespace tilepipe {
namespace {

using namespace lang;

std::vector<std::string> uses(const ir::Program& p) {
  std::vector<std::string> out;
  for (const auto& u : ir::data_dependence(p)) out.push_back(u.tensor + " " + u.use);
  return out;
}

TEST(DataDependence, ATripCountReadFromAnInputIsALoopBound) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {8, 64}, f32);
  auto lens = kb.input("lens", {2}, i32);
  auto y = kb.output("y", {8, 64}, f32);
  int line = 0;
  scope_v([&] {
    auto b = alloc_ub("b", {64}, f32);
    line = __LINE__ + 1;
    serial(load(lens, {0}), [&](Ex r) {
      copy(x(slice(r, 1), all), b);
      copy(b, y(slice(r, 1), all));
    });
  });
  auto p = kb.finish();
  auto d = ir::data_dependence(p);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].tensor, "lens");
  EXPECT_EQ(d[0].use, "loop bound");
  EXPECT_EQ(d[0].loc.line, line);
}

TEST(DataDependence, AnIndexThroughUbAndABindingIsAnAddressAndABranch) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64, 32}, f32);
  auto idx = kb.input("idx", {8}, i32);
  auto y = kb.output("y", {8, 32}, f32);
  scope_v([&] {
    auto iu = alloc_ub("iu", {8}, i32);
    auto row = alloc_ub("row", {32}, f32);
    copy(idx, iu);
    serial(8, [&](Ex i) {
      Ex r = let_("r", load(iu, {i}));
      if_(r > 3, [&] {
        copy(x(slice(r, 1), all), row);  // a gather through the UB copy of idx
        copy(row, y(slice(i, 1), all));
      });
    });
  });
  EXPECT_EQ(uses(kb.finish()), (std::vector<std::string>{"idx branch", "idx address"}));
}

TEST(DataDependence, ValuesThatOnlyFeedArithmeticAreNotADependence) {
  KernelBuilder kb("k", 1);
  auto x = kb.input("x", {64}, f32);
  auto s = kb.input("s", {4}, i32);
  auto y = kb.output("y", {64}, f32);
  scope_v([&] {
    auto b = alloc_ub("b", {64}, f32);
    serial(4, [&](Ex i) {
      copy(x, b);
      tile::adds(b, b, Scalar(load(s, {i})));  // a value, not an address or a bound
      copy(b, y);
    });
  });
  EXPECT_TRUE(uses(kb.finish()).empty());
}

}  // namespace
}  // namespace tilepipe

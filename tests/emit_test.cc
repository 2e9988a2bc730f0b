// `tilepipe emit` (driver::emit_expert): what the expert-mode file says for a small automatic
// kernel, and the refusal, at the construct's line, of what has no expert spelling. The
// round trip through the Python front end is python/tests/test_emit.py.
#include <gtest/gtest.h>

#include "test_util.h"
#include "tilepipe/driver.h"
#include "tilepipe/lang.h"

namespace tilepipe {
namespace {

using namespace lang;
using testing::a3;

/// Z = X + Y on the Vector cores, automatic mode (auto_sync writes the flags); with
/// `mask`, Z = X > Y as a 0/1 tile instead.
driver::KernelSource vadd_source(bool mask, int* op_line) {
  driver::KernelSource k;
  k.name = mask ? "vcmp" : "vadd";
  k.params = {{"N", 8192, 1024, 1 << 20, "elements"}};
  k.build = [mask, op_line](const driver::Params& p, const std::string&) -> driver::Built {
    const int64_t n = p.at("N"), T = 1024;
    KernelBuilder kb("vadd", /*block_num=*/4);
    auto X = kb.input("X", {n}, f32), Y = kb.input("Y", {n}, f32);
    auto Z = kb.output("Z", {n}, f32);
    auto [cid, vid] = kb.launch();
    scope_v([&] {
      auto x = alloc_ub("x", {T}, f32), y = alloc_ub("y", {T}, f32);
      serial(cid * 2 + vid, n / T, 8, [&](Ex t) {
        copy(X(slice(t * T, T)), x);
        copy(Y(slice(t * T, T)), y);
        *op_line = __LINE__ + 1;
        mask ? tile::compare(x, x, y, CmpMode::GT) : tile::add(x, x, y);
        copy(x, Z(slice(t * T, T)));
      });
    });
    return kb.finish();
  };
  return k;
}

std::string emit(const driver::KernelSource& k) {
  driver::CompileRequest req;
  req.params = driver::resolve_params(k, {});
  return driver::emit_expert(k, req, a3());
}

TEST(Emit, AnAutomaticKernelBecomesAnExpertFileWithItsPassesWorkSpelledOut) {
  int line = 0;
  const std::string text = emit(vadd_source(false, &line));
  for (const char* want :
       {"@tilelang.jit(out_idx=[2], pass_configs=pass_configs)\ndef vadd(N=8192):\n",
        "    assert (N,) == (8192,), \"emitted for N=8192: run tilepipe emit again",
        "tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: False,",
        "        Z: T.Tensor([8192], \"float32\"),\n",
        "        with T.Kernel(4, is_npu=True) as (cid, vid):\n",
        "            with T.Scope(\"V\"):\n",
        "                x = T.alloc_ub([1024], \"float32\")\n",
        "                T.annotate_address({x: 0, y: 4096})\n",
        "                for i in T.serial(cid * 2 + vid, 8, 8):\n",
        "                    T.copy(X[i * 1024:i * 1024 + 1024], x)\n",
        "                    T.tile.add(x, x, y)\n",
        "T.set_flag(\"MTE2\", \"V\", 0)  # auto_sync\n"})
    EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << text;
  EXPECT_EQ(text, emit(vadd_source(false, &line))) << "emit must be deterministic";
}

TEST(Emit, AConstructWithoutAnExpertSpellingIsRefusedAtItsLine) {
  int line = 0;
  try {
    emit(vadd_source(true, &line));
    FAIL() << "a compare was emitted";
  } catch (const UserError& e) {
    const Diagnostic& d = e.diagnostics().at(0);
    EXPECT_EQ(d.kind, "emit");
    EXPECT_EQ(d.loc.line, line);
    EXPECT_EQ(d.loc.file, "emit_test.cc");
    EXPECT_NE(d.message.find("tile.compare"), std::string::npos) << d.message;
    EXPECT_NE(d.hint.find("bit mask"), std::string::npos) << d.hint;
  }
}

}  // namespace
}  // namespace tilepipe

// gemm_l1: a gemm on L1 operands (the original's gemm_v0) becomes K chunks of L1 -> L0A /
// L0B copies and mmads (golden IR): halved to the chip's staging budget where auto_sync
// places the flags, the original library's chunks of 128 and flags where the author syncs
// or auto_sync is off, a run-time init on the first chunk only; the verifier's located
// errors; the values are the product's.
#include "passes/gemm_l1.h"

#include <gtest/gtest.h>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

using namespace lang;

// The expansions (the statements in the gemm's place).
const char* const GOLDEN_AUTO =
    "    alloc gemm_l0a_64x64: L0A f16[64, 64]\n"
    "    copy a1[0:+64, 0:+64] -> gemm_l0a_64x64\n"
    "    alloc gemm_l0b_64x128: L0B f16[64, 128]\n"
    "    copy b1[0:+64, 0:+128] -> gemm_l0b_64x128\n"
    "    gemm gemm_l0a_64x64 x gemm_l0b_64x128 -> c0 init\n"
    "    copy a1[0:+64, 64:+64] -> gemm_l0a_64x64\n"
    "    copy b1[64:+64, 0:+128] -> gemm_l0b_64x128\n"
    "    gemm gemm_l0a_64x64 x gemm_l0b_64x128 -> c0 acc\n"
    "    copy a1[0:+64, 128:+64] -> gemm_l0a_64x64\n"
    "    copy b1[128:+64, 0:+128] -> gemm_l0b_64x128\n"
    "    gemm gemm_l0a_64x64 x gemm_l0b_64x128 -> c0 acc\n"
    "    copy a1[0:+64, 192:+64] -> gemm_l0a_64x64\n"
    "    copy b1[192:+64, 0:+128] -> gemm_l0b_64x128\n"
    "    gemm gemm_l0a_64x64 x gemm_l0b_64x128 -> c0 acc\n";
const char* const GOLDEN_RUNTIME_INIT =
    "    alloc gemm_l0a_64x32: L0A f16[64, 32]\n"
    "    copy a1 -> gemm_l0a_64x32\n"
    "    alloc gemm_l0b_32x128: L0B f16[32, 128]\n"
    "    copy b1 -> gemm_l0b_32x128\n"
    "    if (cid == 0) {\n"
    "      gemm gemm_l0a_64x32 x gemm_l0b_32x128 -> c0 init\n"
    "    }\n"
    "    else {\n"
    "      gemm gemm_l0a_64x32 x gemm_l0b_32x128 -> c0 acc\n"
    "    }\n";
// the library's protocol, then the author's M -> FIX pair
const char* const GOLDEN_LIBRARY =
    "    set_flag MTE2->MTE1 #0\n"
    "    wait_flag MTE2->MTE1 #0\n"
    "    set_flag FIX->M #0\n"
    "    wait_flag FIX->M #0\n"
    "    set_flag M->MTE1 #0\n"
    "    set_flag M->MTE1 #1\n"
    "    wait_flag M->MTE1 #0\n"
    "    alloc gemm_l0a_2x64x128: L0A f16[2, 64, 128]\n"
    "    copy a1[0:+64, 0:+128] -> gemm_l0a_2x64x128[0:+1, 0:+64, 0:+128]\n"
    "    alloc gemm_l0b_2x128x64: L0B f16[2, 128, 64]\n"
    "    copy b1[0:+128, 0:+64] -> gemm_l0b_2x128x64[0:+1, 0:+128, 0:+64]\n"
    "    set_flag MTE1->M #0\n"
    "    wait_flag MTE1->M #0\n"
    "    pipe_barrier M\n"
    "    gemm gemm_l0a_2x64x128[0:+1, 0:+64, 0:+128] x gemm_l0b_2x128x64[0:+1, 0:+128, 0:+64] -> "
    "c0 init\n"
    "    set_flag M->MTE1 #0\n"
    "    wait_flag M->MTE1 #1\n"
    "    copy a1[0:+64, 128:+128] -> gemm_l0a_2x64x128[1:+1, 0:+64, 0:+128]\n"
    "    copy b1[128:+128, 0:+64] -> gemm_l0b_2x128x64[1:+1, 0:+128, 0:+64]\n"
    "    set_flag MTE1->M #1\n"
    "    wait_flag MTE1->M #1\n"
    "    pipe_barrier M\n"
    "    gemm gemm_l0a_2x64x128[1:+1, 0:+64, 0:+128] x gemm_l0b_2x128x64[1:+1, 0:+128, 0:+64] -> "
    "c0 acc\n"
    "    set_flag M->MTE1 #1\n"
    "    wait_flag M->MTE1 #0\n"
    "    copy a1[0:+64, 256:+64] -> gemm_l0a_2x64x128[0:+1, 0:+64, 0:+64]\n"
    "    copy b1[256:+64, 0:+64] -> gemm_l0b_2x128x64[0:+1, 0:+64, 0:+64]\n"
    "    set_flag MTE1->M #0\n"
    "    wait_flag MTE1->M #0\n"
    "    pipe_barrier M\n"
    "    gemm gemm_l0a_2x64x128[0:+1, 0:+64, 0:+64] x gemm_l0b_2x128x64[0:+1, 0:+64, 0:+64] -> c0 "
    "acc\n"
    "    set_flag M->MTE1 #0\n"
    "    wait_flag M->MTE1 #0\n"
    "    wait_flag M->MTE1 #1\n"
    "    set_flag MTE1->MTE2 #0\n"
    "    wait_flag MTE1->MTE2 #0\n"
    "    set_flag M->FIX #0\n"
    "    wait_flag M->FIX #0\n"
    "    set_flag M->FIX #0\n"
    "    wait_flag M->FIX #0\n";

struct Gemm {
  int64_t m = 64, n = 128, k = 256;
  bool hand = false;         // an author's flag in the Cube scope
  bool transpose_b = false;  // B stored [N, K]
  int64_t b_k = 0;           // B's K when it differs from A's (0: k)
  ir::Expr init = ir::make_int(1);
  ir::Scope b_scope = ir::Scope::L1;
  int64_t k_chunk = 0;
};

/// c = a x b in one Cube scope: GM -> L1 copies, gemm_l1, L0C -> GM.
ir::Program program(const Gemm& g, int line = 0) {
  KernelBuilder kb("gemm_l1", 1);
  const int64_t bk = g.b_k ? g.b_k : g.k;
  const std::vector<int64_t> bs = g.transpose_b ? std::vector{g.n, bk} : std::vector{bk, g.n};
  auto a = kb.input("a", {g.m, g.k}, f16);
  auto b = kb.input("b", bs, f16);
  auto c = kb.output("c", {g.m, g.n}, f32);
  kb.launch();
  scope_c([&] {
    auto a1 = alloc_L1("a1", {g.m, g.k}, f16);
    auto b1 = g.b_scope == ir::Scope::L1 ? alloc_L1("b1", bs, f16) : alloc_L0B("b1", bs, f16);
    auto c0 = alloc_L0C("c0", {g.m, g.n}, f32);
    copy(a, a1);
    if (g.hand) {
      set_flag(ir::Pipe::MTE2, ir::Pipe::MTE1, 0);
      wait_flag(ir::Pipe::MTE2, ir::Pipe::MTE1, 0);
    }
    if (g.b_scope == ir::Scope::L1) copy(b, b1);
    ir::Loc loc{"kernel.py", line, 0};
    kb.emit(
        ir::make_stmt(ir::GemmL1Stmt{full_region(a1.ir()), full_region(b1.ir()),
                                     full_region(c0.ir()), false, g.transpose_b, g.init, g.k_chunk},
                      loc));
    if (g.hand) {
      set_flag(ir::Pipe::M, ir::Pipe::FIX, 0);
      wait_flag(ir::Pipe::M, ir::Pipe::FIX, 0);
    }
    copy(c0, c);
  });
  return kb.finish();
}

/// The printed statements between the last operand copy into L1 and the copy out of C.
std::string expansion(const ir::Program& p, const passes::PassOptions& o = {},
                      const ChipConfig& chip = testing::a3()) {
  std::string ir = ir::print(passes::gemm_l1(p, chip, o));
  size_t from = ir.find("    copy b -> b1\n");
  if (from == std::string::npos) from = ir.find("    copy a -> a1\n");
  from = ir.find('\n', from) + 1;
  return ir.substr(from, ir.find("    copy c0 -> c") - from);
}

TEST(GemmL1, PrintsItsOperandsTransposesAndInit) {
  Gemm g;
  g.transpose_b = true;
  std::string ir = ir::print(program(g));
  EXPECT_NE(ir.find("    gemm_l1 a1 x b1^T -> c0 init\n"), std::string::npos) << ir;
  g.init = ir::make_int(0);
  ir = ir::print(program(g));
  EXPECT_NE(ir.find("    gemm_l1 a1 x b1^T -> c0 acc\n"), std::string::npos) << ir;
}

TEST(GemmL1, AutomaticCodeHalvesKToTheStagingBudget) {
  // A [64 x 256] f16 is 32 KiB, B [256 x 128] 64 KiB: K halves to 64, where B's tile is 16 KiB
  // (a quarter of L0B) and A's 8 KiB.
  EXPECT_EQ(expansion(program({})), GOLDEN_AUTO);
}

TEST(GemmL1, TheBudgetIsAQuarterOfTheChipsL0) {
  ChipConfig chip = testing::a3();
  chip.l0a.usable = chip.l0b.usable = 32 * 1024;  // 8 KiB per staging tile: K in 32s
  const std::string ir = expansion(program({}), {}, chip);
  EXPECT_NE(ir.find("alloc gemm_l0b_32x128: L0B f16[32, 128]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("copy b1[224:+32, 0:+128] -> gemm_l0b_32x128"), std::string::npos) << ir;
}

TEST(GemmL1, ARunTimeInitChoosesTheFirstChunksMmadOnly) {
  Gemm g;
  g.k = 32;
  g.init = ir::make_binary(ir::BinOp::Eq, ir::make_cid(), ir::make_int(0));
  EXPECT_EQ(expansion(program(g)), GOLDEN_RUNTIME_INIT);
}

TEST(GemmL1, AnL0Operand_IsSlicedNotStaged) {
  Gemm g;
  g.b_scope = ir::Scope::L0B;
  g.n = 32;
  g.k = 512;  // A: 64 KiB, halved to K = 128 (16 KiB)
  const std::string ir = expansion(program(g));
  EXPECT_EQ(ir.find("gemm_l0b"), std::string::npos) << ir;
  EXPECT_NE(ir.find("gemm gemm_l0a_64x128 x b1[384:+128, 0:+32] -> c0 acc"), std::string::npos)
      << ir;
}

TEST(GemmL1, HandSyncedCodeRunsTheLibrarysProtocol) {
  Gemm g;
  g.hand = true;
  g.n = 64;
  g.k = 320;  // chunks of 128, 128 and 64 in two slots
  EXPECT_EQ(expansion(program(g)), GOLDEN_LIBRARY);
}

TEST(GemmL1, TheAuthorsKChunkSetsTheChunks) {
  // kL0Size 32: the automatic mode starts from it (it divides K = 256), the library's protocol
  // ping-pongs chunks of 32 instead of 128; one that does not divide K leaves the automatic
  // mode's choice alone.
  Gemm g;
  g.k_chunk = 32;
  EXPECT_NE(ir::print(program(g)).find("gemm_l1 a1 x b1 -> c0 init k_chunk=32\n"),
            std::string::npos);
  std::string ir = expansion(program(g));
  EXPECT_NE(ir.find("copy b1[224:+32, 0:+128] -> gemm_l0b_32x128"), std::string::npos) << ir;
  g.hand = true;
  ir = expansion(program(g));
  EXPECT_NE(ir.find("alloc gemm_l0b_2x32x128: L0B f16[2, 32, 128]"), std::string::npos) << ir;
  g.hand = false;
  g.k_chunk = 48;
  EXPECT_EQ(expansion(program(g)), GOLDEN_AUTO);
}

TEST(GemmL1, AutoSyncOffRunsTheLibrarysProtocol) {
  passes::PassOptions o;
  o.auto_sync = false;
  const std::string ir = expansion(program({}), o);
  EXPECT_NE(ir.find("alloc gemm_l0a_2x64x128: L0A f16[2, 64, 128]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("    set_flag M->MTE1 #1\n"), std::string::npos) << ir;
}

TEST(GemmL1, TheVerifierLocatesShapeAndScopeErrors) {
  passes::PassOptions o;
  const VerifyOptions vo = passes::verify_options(o);
  Gemm g;
  g.b_k = 128;
  auto diags = verify(program(g, 7), testing::a3(), vo);
  ASSERT_FALSE(diags.empty());
  EXPECT_EQ(diags.front().kind, "shape-mismatch");
  EXPECT_NE(diags.front().str().find("kernel.py:7"), std::string::npos) << diags.front().str();
  EXPECT_NE(diags.front().str().find("gemm_l1 [64x256] x [128x128]"), std::string::npos)
      << diags.front().str();
  o.gemm_l1 = false;
  diags = verify(program({}, 9), testing::a3(), passes::verify_options(o));
  ASSERT_FALSE(diags.empty());
  EXPECT_EQ(diags.front().kind, "unsupported");
  EXPECT_NE(diags.front().str().find("kernel.py:9"), std::string::npos) << diags.front().str();
}

TEST(GemmL1, ValuesAreTheProductInAutomaticAndHandSyncedCode) {
  for (bool hand : {false, true}) {
    Gemm g;
    g.hand = hand;
    g.k = 320;
    passes::PassOptions o;
    ir::Program p = program(g);
    verify_or_throw(p, testing::a3(), passes::verify_options(o));
    auto low = lower::lower(passes::run_passes(p, testing::a3(), o), testing::a3());
    std::vector<double> a(g.m * g.k), b(g.k * g.n);
    for (size_t e = 0; e < a.size(); ++e) a[e] = static_cast<double>(e % 7) - 3;
    for (size_t e = 0; e < b.size(); ++e) b[e] = static_cast<double>(e % 5) - 2;
    sim::HostData data = {{"a", a}, {"b", b}};
    sim::SimOptions so;
    so.detect_races = true;
    sim::simulate(low, testing::a3(), &data, so);
    for (int64_t i = 0; i < g.m; i += 13)
      for (int64_t j = 0; j < g.n; j += 11) {
        double want = 0;
        for (int64_t k = 0; k < g.k; ++k) want += a[i * g.k + k] * b[k * g.n + j];
        EXPECT_EQ(data.at("c")[i * g.n + j], want) << i << " " << j << " " << hand;
      }
  }
}

}  // namespace
}  // namespace tilepipe

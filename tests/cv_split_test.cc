// The Cube/Vector split: unscoped code becomes one scope per core kind with GM workspaces
// and cross-core flags (golden IR); a mixed Pipelined loop becomes a cross-core pipeline
// that gives the reference values race-free on any trip count, begin, num_stages and
// cross_interval; what cannot be split is a clear error.
#include "passes/cv_split.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"

namespace tilepipe {
namespace {

using namespace lang;

constexpr int64_t kN = 32;  // tile rows and columns

/// Per tile t of A: S = A_t B (Cube), P = f16(S / 4) (Vector), O = P B (Cube),
/// acc += O (Vector); Y = acc. The FA dataflow in miniature: C, V, C, V stages with a
/// crossing each way between them.
ir::Program mini_attention(int64_t begin, int64_t tiles, int ns, int ci, bool pipelined = true) {
  KernelBuilder kb("mini", 1);
  auto A = kb.input("A", {begin + tiles, kN, kN}, f16);
  auto B = kb.input("B", {kN, kN}, f16);
  auto Y = kb.output("Y", {kN, kN}, f32);
  auto b_l1 = alloc_L1("b_l1", {kN, kN}, f16);
  auto a_l1 = alloc_L1("a_l1", {kN, kN}, f16);
  auto p_l1 = alloc_L1("p_l1", {kN, kN}, f16);
  auto a0 = alloc_L0A("a0", {kN, kN}, f16);
  auto p0 = alloc_L0A("p0", {kN, kN}, f16);
  auto b0 = alloc_L0B("b0", {kN, kN}, f16);
  auto b1 = alloc_L0B("b1", {kN, kN}, f16);
  auto s_c = alloc_L0C("s_c", {kN, kN}, f32);
  auto o_c = alloc_L0C("o_c", {kN, kN}, f32);
  auto s_ub = alloc_ub("s_ub", {kN, kN}, f32);
  auto p_ub = alloc_ub("p_ub", {kN, kN}, f16);
  auto o_ub = alloc_ub("o_ub", {kN, kN}, f32);
  auto acc = alloc_ub("acc", {kN, kN}, f32);
  copy(B, b_l1);
  tile::fill(acc, 0.0);
  auto body = [&](Ex t) {
    copy(A(t, all, all), a_l1);
    copy(a_l1, a0);
    copy(b_l1, b0);
    gemm(a0, b0, s_c);
    copy(s_c, s_ub);
    tile::mul(s_ub, s_ub, 0.25);
    tile::cast(p_ub, s_ub);
    copy(p_ub, p_l1);
    copy(p_l1, p0);
    copy(b_l1, b1);
    gemm(p0, b1, o_c);
    copy(o_c, o_ub);
    tile::add(acc, acc, o_ub);
  };
  if (pipelined) {
    Ex t = kb.begin_for("t", begin, begin + tiles, 1, ir::ForKind::Pipelined, PipelineOpts{ns, ci},
                        ir::Loc::from(std::source_location::current()));
    body(t);
    kb.end_for(ir::Loc::from(std::source_location::current()));
  } else {
    serial(begin, begin + tiles, body);
  }
  copy(acc, Y);
  return kb.finish();
}

ir::Program compiled(const ir::Program& p, passes::PassOptions o = {}) {
  verify_or_throw(p, testing::a3(), passes::verify_options(o));
  return passes::run_passes(p, testing::a3(), o);
}

/// Runs the program on small integer inputs and checks Y against the double reference.
void expect_reference(const ir::Program& p, int64_t begin, int64_t tiles) {
  const int64_t T = begin + tiles;
  std::vector<double> a(static_cast<size_t>(T * kN * kN)), b(static_cast<size_t>(kN * kN));
  for (size_t e = 0; e < a.size(); ++e) a[e] = static_cast<double>(e * 7 % 5) - 2;
  for (size_t e = 0; e < b.size(); ++e) b[e] = static_cast<double>(e * 3 % 7) - 3;
  sim::HostData io{{"A", a}, {"B", b}};
  sim::SimOptions o;
  o.detect_races = true;
  sim::simulate(lower::lower(p, testing::a3()), testing::a3(), &io, o);
  auto at = [](const std::vector<double>& m, int64_t r, int64_t c) {
    return m[static_cast<size_t>(r * kN + c)];
  };
  std::vector<double> y(static_cast<size_t>(kN * kN), 0.0);
  for (int64_t t = begin; t < T; ++t) {
    std::vector<double> pm(static_cast<size_t>(kN * kN));
    for (int64_t r = 0; r < kN; ++r)
      for (int64_t c = 0; c < kN; ++c) {
        double s = 0;
        for (int64_t k = 0; k < kN; ++k)
          s += a[static_cast<size_t>((t * kN + r) * kN + k)] * at(b, k, c);
        pm[static_cast<size_t>(r * kN + c)] = s / 4;  // exact in f16 for these inputs
      }
    for (int64_t r = 0; r < kN; ++r)
      for (int64_t c = 0; c < kN; ++c) {
        double s = 0;
        for (int64_t k = 0; k < kN; ++k) s += at(pm, r, k) * at(b, k, c);
        y[static_cast<size_t>(r * kN + c)] += s;
      }
  }
  const auto& got = io.at("Y");
  for (size_t e = 0; e < y.size(); ++e)
    ASSERT_NEAR(got[e], y[e], 1e-3 * (1 + std::abs(y[e]))) << "element " << e;
}

TEST(CvSplit, SerialLoopCrossingsGoThroughWorkspacesWithFlags) {
  auto p = passes::cv_split(mini_attention(0, 2, 1, 1, false), testing::a3(), {});
  std::string ir = ir::print(p);
  // Two crossings each way, two flags each, workspaces sized [block_num, 1 slot, tile].
  EXPECT_NE(ir.find("workspace ws0: GM f32[1, 1, 32, 32]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("workspace ws1: GM f16[1, 1, 32, 32]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("scope C {"), std::string::npos);
  EXPECT_NE(ir.find("scope V {"), std::string::npos);
  // The vector core's rows: UB buffers halved, GM tiles sliced by vid.
  EXPECT_NE(ir.find("alloc acc: UB f32[16, 32]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("copy acc -> Y[(vid * 16):+16, 0:+32]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("copy s_c -> ws0[cid:+1, 0:+1, 0:+32, 0:+32]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("copy ws0[cid:+1, 0:+1, (vid * 16):+16, 0:+32] -> s_ub"), std::string::npos)
      << ir;
  expect_reference(compiled(mini_attention(0, 3, 1, 1, false)), 0, 3);
}

TEST(CvSplit, PipelineMatchesReferenceRaceFreeOnAnyTripCount) {
  for (int64_t begin : {0, 1})
    for (int64_t tiles : {1, 3, 5})
      for (int ns : {1, 2, 3, 4})
        for (int ci : {1, 2}) {
          SCOPED_TRACE(fmt::format("begin={} tiles={} ns={} ci={}", begin, tiles, ns, ci));
          expect_reference(compiled(mini_attention(begin, tiles, ns, ci)), begin, tiles);
        }
}

TEST(CvSplit, PipelineIsStripMinedIntoStageLoopsPerCore) {
  passes::PassOptions o;
  auto p = passes::cv_split(mini_attention(0, 5, 2, 2), testing::a3(), o);
  std::string ir = ir::print(p);
  // Batches of num_stages tiles; per core one loop per stage, double-buffered.
  EXPECT_NE(ir.find("for t_batch in serial(0, 3)"), std::string::npos) << ir;
  EXPECT_NE(
      ir.find("for t in pipelined(0, min(2, (5 - (t_batch * 2))), num_stages=2, cross_interval=1)"),
      std::string::npos)
      << ir;
  // Workspaces have num_stages slots indexed by the iteration in the batch.
  EXPECT_NE(ir.find("workspace ws0: GM f32[1, 2, 32, 32]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("copy s_c -> ws0[cid:+1, t:+1, 0:+32, 0:+32]"), std::string::npos) << ir;
  // Signals every cross_interval tiles and at the last of a batch; waits at group starts.
  EXPECT_NE(ir.find("if ((((t + 1) % 2) == 0) || (t == (min(2, (5 - (t_batch * 2))) - 1)))"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("if ((t.2 % 2) == 0) {\n          wait_cross_flag #0"), std::string::npos)
      << ir;
  EXPECT_NE(ir.find("copy A[((t_batch * 2) + t):+1, 0:+32, 0:+32] -> a_l1"), std::string::npos)
      << ir;
}

TEST(CvSplit, ScopedProgramsAreLeftUnchanged) {
  KernelBuilder kb("scoped", 1);
  auto x = kb.input("x", {2, 64}, f32);
  auto y = kb.output("y", {2, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto b = alloc_ub("b", {64}, f32);
    copy(x(vid, all), b);
    copy(b, y(vid, all));
  });
  auto p = kb.finish();
  EXPECT_TRUE(ir::equal(passes::cv_split(p, testing::a3(), {}), p));
}

/// Builds an unscoped program around `body` and runs the split, expecting an error.
void expect_split_error(const std::function<void(KernelBuilder&)>& body,
                        const std::vector<std::string>& fragments) {
  SCOPED_TRACE(fragments.front());
  testing::expect_user_error(
      [&] {
        KernelBuilder kb("bad", 1);
        body(kb);
        passes::cv_split(kb.finish(), testing::a3(), {});
      },
      fragments);
}

TEST(CvSplit, WhatCannotBeSplitIsAClearError) {
  expect_split_error(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {64, 64}, f32);
        auto b = alloc_ub("b", {64, 64}, f32);
        copy(x, b);
        scope_v([&] { tile::fill(b, 0.0); });
      },
      {"outside a scope in a program that has scopes"});
  expect_split_error(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {64, 64}, f32);
        auto b = alloc_ub("b", {64, 64}, f32);
        copy(x, b);
        set_flag(Pipe::MTE2, Pipe::V, 0);
      },
      {"hand-written flag in unscoped code"});
  // A Cube tile of `rows` x 32 into UB buffer s: a crossing, so s and what shares its rows
  // are split between the vector cores.
  auto from_cube = [](int64_t rows, Tensor s) {
    auto a0 = alloc_L0A("a0", {rows, 32}, f16);
    auto b0 = alloc_L0B("b0", {32, 32}, f16);
    auto c0 = alloc_L0C("c0", {rows, 32}, f32);
    gemm(a0, b0, c0);
    copy(c0, s);
  };
  // vid (the author's own row split) with a crossing copy (the split's).
  expect_split_error(
      [&](KernelBuilder& kb) {
        auto x = kb.input("x", {2, 64}, f32);
        auto b = alloc_ub("b", {2, 64}, f32);
        copy(x(kb.launch().vid, all), b(0, all));
        from_cube(64, alloc_ub("s", {64, 32}, f32));
      },
      {"Cube <-> Vector copy in a kernel that uses vid", "vid in unscoped code"});
  expect_split_error(
      [&](KernelBuilder&) {
        auto s = alloc_ub("s", {3, 32}, f32);
        from_cube(3, s);
      },
      {"has 3 rows, which do not split between the 2 vector cores"});
  expect_split_error(
      [&](KernelBuilder&) {
        auto s = alloc_ub("s", {64, 32}, f32);
        from_cube(64, s);
        tile::exp(s(rows(0, 32), all), s(rows(0, 32), all));
      },
      {"uses part of the rows of 's'"});
  expect_split_error(
      [&](KernelBuilder&) {
        auto s = alloc_ub("s", {64, 32}, f32);
        auto v = alloc_ub("v", {64}, f32);
        auto t = alloc_ub("t", {2}, f32);
        from_cube(64, s);
        reduce_sum(s(all, 0), v);  // row vector of s: shares its rows
        reduce_sum(v, t);
      },
      {"reduction along the rows"});
  expect_split_error(
      [&](KernelBuilder& kb) {
        auto Y = kb.output("Y", {32}, f32);
        auto s = alloc_ub("s", {64, 32}, f32);
        auto m = alloc_ub("m", {64}, f32);
        from_cube(64, s);
        tile::fill(m, 1.0);  // never meets s row by row, stored in part: replicated
        copy(m(slice(0, 32)), Y);
      },
      {"store of 'm', which every vector core holds whole"});
  // A value carried across iterations by a buffer two stages share.
  expect_split_error(
      [](KernelBuilder& kb) {
        auto A = kb.input("A", {4, 32, 32}, f16);
        auto Y = kb.output("Y", {32, 32}, f32);
        auto a_l1 = alloc_L1("a_l1", {32, 32}, f16);
        auto a0 = alloc_L0A("a0", {32, 32}, f16);
        auto b0 = alloc_L0B("b0", {32, 32}, f16);
        auto c0 = alloc_L0C("c0", {32, 32}, f32);
        auto s = alloc_ub("s", {32, 32}, f32);
        auto acc = alloc_ub("acc", {32, 32}, f32);
        tile::fill(acc, 0.0);
        pipelined(4, PipelineOpts{2, 1}, [&](Ex t) {
          tile::mul(acc, acc, 0.5);  // stage V, before the Cube work: reads last iteration's acc
          copy(A(t, all, all), a_l1);
          copy(a_l1, a0);
          copy(a_l1, b0);
          gemm(a0, b0, c0);
          copy(c0, s);
          tile::add(acc, acc, s);  // a later V stage
        });
        copy(acc, Y);
      },
      {"buffer 'acc' carries a value across iterations of the pipeline", "2 of its stages"});
  // More signals in flight than the 4-bit counter holds.
  expect_split_error(
      [](KernelBuilder& kb) {
        auto A = kb.input("A", {4, 32, 32}, f16);
        auto a_l1 = alloc_L1("a_l1", {32, 32}, f16);
        auto a0 = alloc_L0A("a0", {32, 32}, f16);
        auto b0 = alloc_L0B("b0", {32, 32}, f16);
        auto c0 = alloc_L0C("c0", {32, 32}, f32);
        auto s = alloc_ub("s", {32, 32}, f32);
        pipelined(4, PipelineOpts{16, 1}, [&](Ex t) {
          copy(A(t, all, all), a_l1);
          copy(a_l1, a0);
          copy(a_l1, b0);
          gemm(a0, b0, c0);
          copy(c0, s);
        });
      },
      {"num_stages=16 with cross_interval=1 signals the consumer 16 times",
       "use num_stages <= 15 or cross_interval >= 2"});
  // cross_interval on a loop that runs on one core has no effect.
  expect_split_error(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {4, 64, 64}, f32);
        auto b = alloc_ub("b", {64, 64}, f32);
        pipelined(4, PipelineOpts{2, 2}, [&](Ex t) {
          copy(x(t, all, all), b);
          tile::exp(b, b);
        });
      },
      {"cross_interval=2 has no effect"});
}

/// Y = X[idx] B: rows of X gathered by index (scalar reads of a replicated index vector),
/// one row per copy in a row loop, handed to the Cube as one tile.
/// With `guarded`, each row's copy sits under `if (idx[r] >= 0)`: a header reading a UB
/// element in unscoped code runs on the core of its body (the Vector), where the verifier
/// checks the read and cv_split places the branch.
TEST(CvSplit, GatheredRowsAndReplicatedIndicesMatchTheReference) {
  for (bool guarded : {false, true}) {
    SCOPED_TRACE(guarded ? "guarded" : "plain");
    constexpr int64_t n = 16, N = 40;
    KernelBuilder kb("gather", 1);
    auto X = kb.input("X", {N, 32}, f16);
    auto I = kb.input("I", {n}, i32);
    auto Bm = kb.input("B", {32, 32}, f16);
    auto Y = kb.output("Y", {n, 32}, f32);
    auto idx = alloc_ub("idx", {n}, i32);
    auto g = alloc_ub("g", {n, 32}, f16);
    auto g_l1 = alloc_L1("g_l1", {n, 32}, f16);
    auto b_l1 = alloc_L1("b_l1", {32, 32}, f16);
    auto a0 = alloc_L0A("a0", {n, 32}, f16);
    auto b0 = alloc_L0B("b0", {32, 32}, f16);
    auto c0 = alloc_L0C("c0", {n, 32}, f32);
    auto y = alloc_ub("y", {n, 32}, f32);
    copy(I, idx);
    serial(n, [&](Ex r) {
      auto row = [&] { copy(X(load(idx, {r}), all), g(r, all)); };
      if (guarded)
        if_(load(idx, {r}) >= 0, row);
      else
        row();
    });
    copy(g, g_l1);
    copy(Bm, b_l1);
    copy(g_l1, a0);
    copy(b_l1, b0);
    gemm(a0, b0, c0);
    copy(c0, y);
    copy(y, Y);
    auto p = compiled(kb.finish());
    std::string ir = ir::print(p);
    EXPECT_NE(ir.find("alloc idx: UB i32[16]"), std::string::npos) << ir;   // replicated
    EXPECT_NE(ir.find("alloc g: UB f16[8, 32]"), std::string::npos) << ir;  // split
    std::vector<double> x(N * 32), b(32 * 32), ind(n);
    for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<double>(e % 9) - 4;
    for (size_t e = 0; e < b.size(); ++e) b[e] = static_cast<double>(e % 5) - 2;
    for (int64_t r = 0; r < n; ++r)
      ind[static_cast<size_t>(r)] = static_cast<double>((r * 7 + 3) % N);
    sim::HostData io{{"X", x}, {"I", ind}, {"B", b}};
    sim::SimOptions o;
    o.detect_races = true;
    sim::simulate(lower::lower(p, testing::a3()), testing::a3(), &io, o);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t col = 0; col < 32; ++col) {
        double want = 0;
        for (int64_t k = 0; k < 32; ++k)
          want += x[static_cast<size_t>(ind[static_cast<size_t>(r)] * 32 + k)] *
                  b[static_cast<size_t>(k * 32 + col)];
        ASSERT_EQ(io.at("Y")[static_cast<size_t>(r * 32 + col)], want) << r << "," << col;
      }
  }
}

/// A Cube tile computed from a GM tile (A A) and handed to a UB tile: one crossing.
struct CubeTile {
  Tensor a = alloc_L1("a", {32, 32}, f16), a0 = alloc_L0A("a0", {32, 32}, f16),
         b0 = alloc_L0B("b0", {32, 32}, f16), c0 = alloc_L0C("c0", {32, 32}, f32);
  void into(Tile src, Tensor s) const {
    copy(src, a);
    copy(a, a0);
    copy(a, b0);
    gemm(a0, b0, c0);
    copy(c0, s);
  }
};

/// Runs an unscoped program through the whole pipeline and the simulator (functional, race
/// detection on): it must run ("") or stop with the user diagnostic `kind`, never fail
/// inside tilepipe.
void expect_runs_or_diagnoses(const std::function<void(KernelBuilder&)>& body,
                              const std::string& what, const std::string& kind = "") {
  SCOPED_TRACE(what);
  std::string got;
  try {
    KernelBuilder kb("odd", 1);
    body(kb);
    auto p = compiled(kb.finish());
    sim::SimOptions o;
    o.detect_races = true;
    sim::HostData io;
    sim::simulate(lower::lower(p, testing::a3()), testing::a3(), &io, o);
  } catch (const UserError& e) {
    got = e.diagnostics().front().kind;
  } catch (const lang::BuildError&) {
    got = "build";
  }
  EXPECT_EQ(got, kind);
}

TEST(CvSplit, OddProgramsRunOrEndInADiagnostic) {
  expect_runs_or_diagnoses([](KernelBuilder&) {}, "empty kernel");
  expect_runs_or_diagnoses(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {64}, f32);
        auto y = kb.output("y", {64}, f32);
        copy(x, y);
      },
      "GM -> GM copy", "outside-scope");
  expect_runs_or_diagnoses(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {4, 32, 32}, f16);
        auto s = alloc_ub("s", {32, 32}, f32);
        CubeTile cube;
        pipelined(0, PipelineOpts{3, 1}, [&](Ex t) { cube.into(x(t, all, all), s); });
      },
      "pipeline of zero trips");
  expect_runs_or_diagnoses(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {9, 32, 32}, f16);
        auto y = kb.output("y", {9, 32, 32}, f32);
        auto s = alloc_ub("s", {32, 32}, f32);
        CubeTile cube;
        auto& k = KernelBuilder::current();
        Ex t = k.begin_for("t", 1, 9, 3, ir::ForKind::Pipelined, PipelineOpts{2, 2},
                           ir::Loc::from(std::source_location::current()));
        cube.into(x(t, all, all), s);
        tile::exp(s, s);
        copy(s, y(t, all, all));
        k.end_for(ir::Loc::from(std::source_location::current()));
      },
      "pipeline with step 3 from 1");
  expect_runs_or_diagnoses(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {4, 32, 32}, f16);
        auto s = alloc_ub("s", {32, 32}, f32);
        CubeTile cube;
        pipelined(4, PipelineOpts{2, 1}, [&](Ex t) {
          pipelined(2, PipelineOpts{2, 1}, [&](Ex) { cube.into(x(t, all, all), s); });
        });
      },
      "nested cross-core pipelines", "cv-split");
  expect_runs_or_diagnoses(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {8, 32}, f32);
        auto idx = kb.input("idx", {8}, i32);
        auto y = kb.output("y", {8, 32}, f32);
        auto row = alloc_ub("row", {8, 32}, f32);
        serial(8, [&](Ex r) {
          Ex at = let_("at", load(idx, {r}));
          copy(x(at, all), row(r, all));
        });
        copy(row, y);
      },
      "a let in unscoped code", "cv-split");
  expect_runs_or_diagnoses(
      [](KernelBuilder& kb) {
        auto f = kb.input("f", {8}, i32);
        auto x = kb.input("x", {32, 32}, f16);
        auto fu = alloc_ub("fu", {8}, i32);
        auto xu = alloc_ub("xu", {32, 32}, f16);
        auto p = alloc_L1("p", {32, 32}, f16);
        copy(f, fu);
        copy(x, xu);
        // a crossing runs on both cores: its guard's UB read cannot be the Cube's
        if_(load(fu, {0}) > 0, [&] { copy(xu, p); });
      },
      "a UB guard around a crossing", "scope-rule");
  expect_runs_or_diagnoses(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {4, 32, 32}, f16);
        auto s = alloc_ub("s", {32, 32}, f32);
        CubeTile cube;
        serial(4, [&](Ex t) {
          if_else(
              t % 2 == 0, [&] { cube.into(x(t, all, all), s); }, [&] { tile::fill(s, 1.0); });
        });
      },
      "crossing in one branch");
  expect_runs_or_diagnoses(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {64, 64}, f32);
        auto y = kb.output("y", {64, 64}, f32);
        auto u = alloc_ub("u", {64, 64}, f32);
        copy(x, u);
        tile::exp(u, u);
        copy(u, y);
      },
      "vector-only program (split by its store)");
  expect_runs_or_diagnoses(
      [](KernelBuilder& kb) {
        auto x = kb.input("x", {4, 64}, f32);
        auto u = alloc_ub("u", {64}, f32);
        pipelined(4, PipelineOpts{2, 1}, [&](Ex t) {
          copy(x(t, all), u);
          tile::exp(u, u);
        });
      },
      "single-core pipeline outside scopes");
}

/// mini_attention written the original's automatic way (TileLang-Ascend's
/// AUTO_CV_COMBINE form): the author's GM workspaces carry S, P and O between the cores and
/// vid gives each vector core its rows; the split adds only the flags (and the slots of a
/// pipeline).
ir::Program mini_handoff(int64_t begin, int64_t tiles, int ns, int ci, bool pipelined = true) {
  constexpr int64_t h = kN / 2;
  KernelBuilder kb("mini_ws", 1);
  auto A = kb.input("A", {begin + tiles, kN, kN}, f16);
  auto B = kb.input("B", {kN, kN}, f16);
  auto Y = kb.output("Y", {kN, kN}, f32);
  auto ws_s = kb.workspace("ws_s", {kN, kN}, f32);
  auto ws_p = kb.workspace("ws_p", {kN, kN}, f16);
  auto ws_o = kb.workspace("ws_o", {kN, kN}, f32);
  auto vid = kb.launch().vid;
  auto b_l1 = alloc_L1("b_l1", {kN, kN}, f16);
  auto a_l1 = alloc_L1("a_l1", {kN, kN}, f16);
  auto p_l1 = alloc_L1("p_l1", {kN, kN}, f16);
  auto a0 = alloc_L0A("a0", {kN, kN}, f16);
  auto p0 = alloc_L0A("p0", {kN, kN}, f16);
  auto b0 = alloc_L0B("b0", {kN, kN}, f16);
  auto b1 = alloc_L0B("b1", {kN, kN}, f16);
  auto s_c = alloc_L0C("s_c", {kN, kN}, f32);
  auto o_c = alloc_L0C("o_c", {kN, kN}, f32);
  auto s_ub = alloc_ub("s_ub", {h, kN}, f32);
  auto p_ub = alloc_ub("p_ub", {h, kN}, f16);
  auto o_ub = alloc_ub("o_ub", {h, kN}, f32);
  auto acc = alloc_ub("acc", {h, kN}, f32);
  copy(B, b_l1);
  tile::fill(acc, 0.0);
  auto mine = [&](Tensor t) { return t(rows(vid * h, h), all); };
  auto body = [&](Ex t) {
    copy(A(t, all, all), a_l1);
    copy(a_l1, a0);
    copy(b_l1, b0);
    gemm(a0, b0, s_c);
    copy(s_c, ws_s);
    copy(mine(ws_s), s_ub);
    tile::mul(s_ub, s_ub, 0.25);
    tile::cast(p_ub, s_ub);
    copy(p_ub, mine(ws_p));
    copy(ws_p, p_l1);
    copy(p_l1, p0);
    copy(b_l1, b1);
    gemm(p0, b1, o_c);
    copy(o_c, ws_o);
    copy(mine(ws_o), o_ub);
    tile::add(acc, acc, o_ub);
  };
  if (pipelined) {
    Ex t = kb.begin_for("t", begin, begin + tiles, 1, ir::ForKind::Pipelined, PipelineOpts{ns, ci},
                        ir::Loc::from(std::source_location::current()));
    body(t);
    kb.end_for(ir::Loc::from(std::source_location::current()));
  } else {
    serial(begin, begin + tiles, body);
  }
  copy(acc, mine(Y));
  return kb.finish();
}

/// The vector core's part of the split of mini_handoff's serial loop: each GM hand-off
/// is waited for before its reader and released after it; the author's rows are kept.
TEST(CvSplit, AuthorsWorkspacesGetFlagsAroundTheirWritersAndReaders) {
  auto p = passes::cv_split(mini_handoff(0, 2, 1, 1, false), testing::a3(), {});
  std::string ir = ir::print(p);
  auto v = ir.find("scope V {");
  ASSERT_NE(v, std::string::npos) << ir;
  EXPECT_EQ(ir.substr(v), R"(scope V {
    set_cross_flag MTE2 #1 mode=2
    set_cross_flag MTE2 #5 mode=2
    alloc s_ub: UB f32[16, 32]
    alloc p_ub: UB f16[16, 32]
    alloc o_ub: UB f32[16, 32]
    alloc acc: UB f32[16, 32]
    tile.fill acc, 0.0
    for i in serial(0, 2) {
      wait_cross_flag #0
      copy ws_s[(vid * 16):+16, 0:+32] -> s_ub
      set_cross_flag MTE2 #1 mode=2
      tile.mul s_ub, s_ub, 0.25
      tile.cast p_ub, s_ub
      wait_cross_flag #3
      copy p_ub -> ws_p[(vid * 16):+16, 0:+32]
      set_cross_flag MTE3 #2 mode=2
      wait_cross_flag #4
      copy ws_o[(vid * 16):+16, 0:+32] -> o_ub
      set_cross_flag MTE2 #5 mode=2
      tile.add acc, acc, o_ub
    }
    copy acc -> Y[(vid * 16):+16, 0:+32]
    wait_cross_flag #3
  }
}
)") << ir;
  // The Cube core gives the credit of the tensor it reads (ws_p) and takes back the two
  // it writes; no workspace of the split's own: the author's tensors carry the tiles.
  EXPECT_NE(ir.find("scope C {\n    set_cross_flag MTE2 #3 mode=2"), std::string::npos) << ir;
  EXPECT_NE(ir.find("    wait_cross_flag #1\n    wait_cross_flag #5\n  }\n  scope V"),
            std::string::npos)
      << ir;
  EXPECT_EQ(p.workspaces.size(), 3u);
  expect_reference(compiled(mini_handoff(0, 3, 1, 1, false)), 0, 3);
}

TEST(CvSplit, AuthorsWorkspacesPipelineMatchesReferenceRaceFreeOnAnyTripCount) {
  for (int64_t begin : {0, 1})
    for (int64_t tiles : {1, 3, 5})
      for (int ns : {1, 2, 3})
        for (int ci : {1, 2}) {
          SCOPED_TRACE(fmt::format("begin={} tiles={} ns={} ci={}", begin, tiles, ns, ci));
          expect_reference(compiled(mini_handoff(begin, tiles, ns, ci)), begin, tiles);
        }
  // The author's tensors get one slot per iteration of a batch, stacked along rows.
  auto p = passes::cv_split(mini_handoff(0, 5, 2, 1), testing::a3(), {});
  std::string ir = ir::print(p);
  EXPECT_NE(ir.find("workspace ws_s_slots: GM f32[64, 32]"), std::string::npos) << ir;
  EXPECT_NE(ir.find("copy s_c -> ws_s_slots[(t * 32):+32, 0:+32]"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("workspace ws_s:"), std::string::npos) << ir;
}

TEST(CvSplit, AuthorsWorkspacesThatCannotBePairedAreAClearError) {
  // Read by the Vector core before the Cube core writes it, in one pipeline iteration.
  expect_split_error(
      [](KernelBuilder& kb) {
        auto A = kb.input("A", {4, 32, 32}, f16);
        auto ws = kb.workspace("ws", {32, 32}, f32);
        auto a_l1 = alloc_L1("a_l1", {32, 32}, f16);
        auto a0 = alloc_L0A("a0", {32, 32}, f16);
        auto b0 = alloc_L0B("b0", {32, 32}, f16);
        auto c0 = alloc_L0C("c0", {32, 32}, f32);
        auto s = alloc_ub("s", {16, 32}, f32);
        auto vid = kb.launch().vid;
        pipelined(4, PipelineOpts{2, 1}, [&](Ex t) {
          copy(ws(rows(vid * 16, 16), all), s);
          copy(A(t, all, all), a_l1);
          copy(a_l1, a0);
          copy(a_l1, b0);
          gemm(a0, b0, c0);
          copy(c0, ws);
        });
      },
      {"the Vector reads GM tensor 'ws' before the Cube writes it"});
  // Written by both cores and read across them.
  expect_split_error(
      [](KernelBuilder& kb) {
        auto ws = kb.workspace("ws", {32, 32}, f32);
        auto c0 = alloc_L0C("c0", {32, 32}, f32);
        auto s = alloc_ub("s", {16, 32}, f32);
        auto vid = kb.launch().vid;
        copy(c0, ws);
        copy(s, ws(rows(vid * 16, 16), all));
        copy(ws(rows(vid * 16, 16), all), s);
      },
      {"written by both the Cube and the Vector code"});
  // A kernel input handed over inside a pipeline cannot get slots.
  expect_split_error(
      [](KernelBuilder& kb) {
        auto Y = kb.output("Y", {32, 32}, f32);
        auto c0 = alloc_L0C("c0", {32, 32}, f32);
        auto a0 = alloc_L0A("a0", {32, 32}, f16);
        auto b0 = alloc_L0B("b0", {32, 32}, f16);
        auto s = alloc_ub("s", {16, 32}, f32);
        auto vid = kb.launch().vid;
        pipelined(4, PipelineOpts{2, 1}, [&](Ex) {
          gemm(a0, b0, c0);
          copy(c0, Y);
          copy(Y(rows(vid * 16, 16), all), s);
        });
      },
      {"GM tensor 'Y' is handed between the cores inside a cross-core pipeline",
       "but it is a kernel output"});
}

}  // namespace
}  // namespace tilepipe

// Data-dependent addressing (ir::Load, `load(t, {i...})`) through every layer: printed IR,
// equality, verifier must-fail cases, the scalar-unit cost, run-time bounds and timing mode
// driven by the real index values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"

namespace tilepipe {
namespace {

using namespace lang;
using testing::expect_diag;
using testing::here;

void gather_body(Tensor src, Tensor table, Tensor idx, Tensor out, int64_t rows, DType idx_type);

/// A paged gather in miniature: row j of `out` is row table[idx[j] / 4] * 4 + idx[j] % 4 of
/// `src` (GM page-table load), taken only when idx[j] >= 0 (UB index load in the condition).
ir::Program gather_program(int64_t rows = 4, DType idx_type = i32) {
  KernelBuilder kb("gather", 1);
  auto src = kb.input("src", {16, 8}, f32);
  auto table = kb.input("table", {4}, i32);
  auto idx = kb.input("idx", {rows}, idx_type);
  auto out = kb.output("out", {rows, 8}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] { if_(vid == 0, [&] { gather_body(src, table, idx, out, rows, idx_type); }); });
  return kb.finish();
}

void gather_body(Tensor src, Tensor table, Tensor idx, Tensor out, int64_t rows, DType idx_type) {
  {
    auto iub = alloc_ub("iub", {rows}, idx_type);
    auto row = alloc_ub("row", {rows, 8}, f32);
    copy(idx, iub);
    set_flag(Pipe::MTE2, Pipe::S, 0);
    wait_flag(Pipe::MTE2, Pipe::S, 0);
    tile::fill(row, 0.0);
    set_flag(Pipe::V, Pipe::MTE2, 0);
    wait_flag(Pipe::V, Pipe::MTE2, 0);
    serial(rows, [&](Ex j) {
      Ex i = load(iub, {j});
      if_(i >= 0, [&] { copy(src(load(table, {i / 4}) * 4 + i % 4, all), row(j, all)); });
    });
    set_flag(Pipe::MTE2, Pipe::MTE3, 0);
    wait_flag(Pipe::MTE2, Pipe::MTE3, 0);
    copy(row, out);
  }
}

sim::HostData gather_inputs(std::vector<double> idx) {
  std::vector<double> src(16 * 8);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i);
  return {{"src", src}, {"table", {2, 0, 3, 1}}, {"idx", std::move(idx)}};
}

sim::SimResult run(const ir::Program& p, sim::HostData& io, sim::Mode mode, bool races = false,
                   const ChipConfig& chip = testing::a3()) {
  verify_or_throw(p, chip);
  auto low = lower::lower(p, chip);
  sim::SimOptions o;
  o.mode = mode;
  o.detect_races = races;
  return sim::simulate(low, chip, &io, o);
}

TEST(Load, PrintsAsLoadOfTheTensorAtItsIndices) {
  std::string text = ir::print(gather_program());
  const std::string golden = R"(      for i in serial(0, 4) {
        if (load(iub[i]) >= 0) {
          copy src[((load(table[(load(iub[i]) / 4)]) * 4) + (load(iub[i]) % 4)):+1, 0:+8] -> row[i:+1, 0:+8]
        }
      })";
  EXPECT_NE(text.find(golden), std::string::npos) << text;
}

TEST(Load, EqualityComparesTheTensorAndTheIndices) {
  EXPECT_TRUE(ir::equal(gather_program(), gather_program()));
  EXPECT_FALSE(ir::equal(gather_program(4), gather_program(8)));
  KernelBuilder kb("k", 1);
  auto a = kb.input("a", {4}, i32), b = kb.input("b", {4}, i32);
  EXPECT_TRUE(ir::equal(load(a, {1}).ir(), load(a, {1}).ir()));
  EXPECT_FALSE(ir::equal(load(a, {1}).ir(), load(a, {2}).ir()));
  EXPECT_FALSE(ir::equal(load(a, {1}).ir(), load(b, {1}).ir()));
  kb.finish();
}

TEST(Load, WrongNumberOfIndicesIsABuildError) {
  KernelBuilder kb("k", 1);
  auto a = kb.input("a", {4, 4}, i32);
  try {
    load(a, {1});
    ADD_FAILURE() << "expected a BuildError";
  } catch (const BuildError& e) {
    EXPECT_NE(e.message.find("has 1 indices, but the buffer has rank 2"), std::string::npos)
        << e.message;
  }
  kb.finish();
}

TEST(Load, TheGatherVerifies) {
  auto d = verify(gather_program(), testing::a3());
  EXPECT_TRUE(d.empty()) << (d.empty() ? "" : d.front().str());
}

/// A one-copy kernel whose source row is `row(k)` (k = the kernel's tensors).
template <class F>
ir::Program addressed_by(F&& row) {
  KernelBuilder kb("bad", 1);
  auto src = kb.input("src", {16, 8}, f32);
  auto fidx = kb.input("fidx", {4}, f32);
  auto oidx = kb.output("oidx", {4}, i32);
  kb.launch();
  scope_v([&] {
    auto ub = alloc_ub("ub", {8}, f32);
    auto iub = alloc_ub("iub", {8}, i32);
    copy(src(row(fidx, oidx, iub), all), ub);
  });
  return kb.finish();
}

TEST(Load, FromAnOutputIsRejected) {
  const std::string line = here(1);
  auto p = addressed_by([](auto&, auto& o, auto&) { return load(o, {0}); });
  expect_diag(p, "load-source", {"'oidx', which is not a kernel input", "input(...)", line});
}

TEST(Load, StaticallyOutOfRangeIndexIsRejected) {
  const std::string line = here(1);
  auto p = addressed_by([](auto&, auto&, auto& u) { return load(u, {8}); });
  expect_diag(p, "slice-bounds", {"'iub' dimension 0", line});
}

TEST(Load, WritingALoadedInputIsRejected) {
  KernelBuilder kb("bad", 1);
  auto src = kb.input("src", {16, 8}, f32);
  auto table = kb.input("table", {8}, i32);
  kb.launch();
  std::string store_line;
  scope_v([&] {
    auto ub = alloc_ub("ub", {8}, f32);
    auto iub = alloc_ub("iub", {8}, i32);
    copy(src(load(table, {0}), all), ub);
    store_line = here(1);
    copy(iub, table);
  });
  expect_diag(kb.finish(), "load-source", {"loaded GM inputs are read-only", store_line});
}

TEST(Load, FromL1IsRejected) {
  KernelBuilder kb("bad", 1);
  auto src = kb.input("src", {16, 16}, f16);
  kb.launch();
  std::string line;
  scope_c([&] {
    auto l1 = alloc_L1("l1", {16, 16}, f16);
    auto il1 = alloc_L1("il1", {16}, i32);
    line = here(1);
    copy(src(slice(load(il1, {0}), 1), all), l1(slice(0, 1), all));
  });
  expect_diag(kb.finish(), "load-source", {"'il1' in L1", "GM and UB only", line});
}

/// out's four rows of 8 are src's rows `rows` (src[r, c] = 8 r + c), or zeros for -1.
void expect_gathered_rows(sim::HostData& io, const std::vector<int>& rows) {
  for (int j = 0; j < 4; ++j)
    for (int c = 0; c < 8; ++c)
      EXPECT_EQ(io["out"][static_cast<size_t>(j * 8 + c)],
                rows[static_cast<size_t>(j)] < 0 ? 0.0 : rows[static_cast<size_t>(j)] * 8 + c)
          << "row " << j << " col " << c;
}

TEST(Load, GatherFollowsTheIndicesAndSkipsMinusOne) {
  sim::HostData io = gather_inputs({5, -1, 14, 0});
  run(gather_program(), io, sim::Mode::Functional, /*races=*/true);
  // 5 -> table[1]=0 -> row 1; 14 -> table[3]=1 -> row 6; 0 -> table[0]=2 -> row 8.
  const std::vector<int> expect_rows = {1, -1, 6, 8};
  expect_gathered_rows(io, expect_rows);
}

TEST(Load, OfAFloatElementIsItsValueTowardZero) {
  // The scalar unit's C conversion of a float it reads (`(int32_t)x.GetValue(i)`, the
  // original's T.cast(x, "int32")): -0.5 is 0 (row table[0] * 4 = 8), not floor's -1 (no row).
  sim::HostData io = gather_inputs({5.9, -0.5, 14.2, 0.99});
  run(gather_program(4, f32), io, sim::Mode::Functional, /*races=*/true);
  const std::vector<int> expect_rows = {1, 8, 6, 8};
  expect_gathered_rows(io, expect_rows);
}

TEST(Load, LoopBoundFromALoadRunsThatManyIterations) {
  KernelBuilder kb("count", 1);
  auto src = kb.input("src", {16, 8}, f32);
  auto table = kb.input("table", {4}, i32);
  auto out = kb.output("out", {16, 8}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    if_(vid == 0, [&] {
      auto row = alloc_ub("row", {8}, f32);
      set_flag(Pipe::MTE3, Pipe::MTE2, 0);
      serial(load(table, {3}), [&](Ex j) {  // table[3] rows
        wait_flag(Pipe::MTE3, Pipe::MTE2, 0);
        copy(src(j, all), row);
        set_flag(Pipe::MTE2, Pipe::MTE3, 0);
        wait_flag(Pipe::MTE2, Pipe::MTE3, 0);
        copy(row, out(j, all));
        set_flag(Pipe::MTE3, Pipe::MTE2, 0);
      });
      wait_flag(Pipe::MTE3, Pipe::MTE2, 0);
    });
  });
  sim::HostData io = gather_inputs({0, 0, 0, 0});  // table = {2, 0, 3, 1}: one row
  run(kb.finish(), io, sim::Mode::Functional, /*races=*/true);
  EXPECT_EQ(io["out"][0 * 8 + 5], 5.0);
  EXPECT_EQ(io["out"][1 * 8 + 5], 0.0);
}

TEST(Load, ReadBeforeTheIndexCopyLandsIsARace) {
  KernelBuilder kb("racy", 1);
  auto src = kb.input("src", {16, 8}, f32);
  auto idx = kb.input("idx", {4}, i32);
  kb.launch();
  scope_v([&] {
    auto iub = alloc_ub("iub", {8}, i32);
    auto ub = alloc_ub("ub", {8}, f32);
    copy(idx, iub(slice(0, 4)));  // no MTE2 -> S flag before the scalar reads it
    copy(src(load(iub, {0}), all), ub);
  });
  sim::HostData io = gather_inputs({1, 2, 3, 4});
  try {
    run(kb.finish(), io, sim::Mode::Functional, /*races=*/true);
    ADD_FAILURE() << "expected a race";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("iub"), std::string::npos) << e.what();
  }
}

TEST(Load, IndexPastTheTableIsARuntimeErrorNotAnOutOfBoundsRead) {
  KernelBuilder kb("oob", 1);
  auto src = kb.input("src", {16, 8}, f32);
  auto table = kb.input("table", {4}, i32);
  auto idx = kb.input("idx", {4}, i32);
  kb.launch();
  std::string line;
  scope_v([&] {
    auto ub = alloc_ub("ub", {8}, f32);
    serial(4, [&](Ex j) {
      line = here(1);
      copy(src(load(table, {load(idx, {j})}), all), ub);
    });
  });
  sim::HostData io = gather_inputs({0, 1, 9, 2});
  try {
    run(kb.finish(), io, sim::Mode::Timing);
    ADD_FAILURE() << "expected a slice-bounds error";
  } catch (const UserError& e) {
    std::string t = e.what();
    EXPECT_NE(t.find("load of 'table' at [9]"), std::string::npos) << t;
    EXPECT_NE(t.find("outside [0, 4)"), std::string::npos) << t;
    EXPECT_NE(t.find(line), std::string::npos) << t;
  }
}

/// GM loads of `table` at the given element indices, one per iteration of an otherwise
/// empty loop; S busy cycles of one core and the run's scalar-load counters (both AIV cores
/// of the AI core run the loop, each with its own cache).
struct LoadRun {
  double busy_s = 0;
  sim::ScalarLoadStats loads;
};
LoadRun load_elements(const std::vector<int64_t>& at, sim::Mode mode, const ChipConfig& chip) {
  auto build = [&](bool with_load) {
    KernelBuilder kb("cost", 1);
    auto table = kb.input("table", {64}, i32);
    auto out = kb.output("out", {8}, f32);
    kb.launch();
    scope_v([&] {
      auto ub = alloc_ub("ub", {8}, f32);
      serial(static_cast<int64_t>(at.size()), [&](Ex j) {
        Ex index = Ex(at.back());
        for (size_t k = at.size() - 1; k-- > 0;)
          index = select(j == Ex(int64_t(k)), Ex(at[k]), index);
        Ex id = with_load ? load(table, {index}) * 0 : Ex(0);
        set_flag(Pipe::S, Pipe::V, id);
        wait_flag(Pipe::S, Pipe::V, 0);
      });
      tile::fill(ub, 1.0);
      set_flag(Pipe::V, Pipe::MTE3, 0);
      wait_flag(Pipe::V, Pipe::MTE3, 0);
      copy(ub, out);
    });
    return kb.finish();
  };
  auto go = [&](bool with_load) {
    sim::HostData io = {{"table", std::vector<double>(64, 0.0)}};
    return run(build(with_load), io, mode, false, chip);
  };
  auto with = go(true), without = go(false);
  auto s = [](const sim::SimResult& r) {
    return r.cores[0].pipes[static_cast<size_t>(Pipe::S)].busy_cycles;
  };
  return {s(with) - s(without), with.scalar_gm_loads};
}

/// Reads of one 64-byte line: the first misses (scalar_load_cycles), the others hit the
/// core's scalar data cache (scalar_dcache_hit_cycles), in both modes; the costs are the
/// parameters, not constants.
TEST(Load, GmLoadsGoThroughTheScalarDataCache) {
  ChipConfig chip = testing::a3();
  for (auto mode : {sim::Mode::Functional, sim::Mode::Timing}) {
    LoadRun r = load_elements({0, 1, 2, 15}, mode, chip);
    EXPECT_DOUBLE_EQ(r.busy_s, chip.scalar_load_cycles + 3 * chip.scalar_dcache_hit_cycles);
    EXPECT_EQ(r.loads.reads, 2 * 4);
    EXPECT_EQ(r.loads.misses, 2 * 1);
  }
  chip.scalar_load_cycles = 700;
  chip.scalar_dcache_hit_cycles = 5;
  EXPECT_DOUBLE_EQ(load_elements({0, 1, 2, 15}, sim::Mode::Timing, chip).busy_s, 700 + 3 * 5.0);
  // Element 16 is the next line: a second miss.
  EXPECT_DOUBLE_EQ(load_elements({0, 16, 1, 17}, sim::Mode::Timing, chip).busy_s,
                   2 * 700 + 2 * 5.0);
}

/// A cache of one set of two 64-byte lines: lines 0, 1, 0, 2, 1 miss, miss, hit, miss (2
/// evicts line 1, the least recently used), miss.
TEST(Load, TheScalarDataCacheEvictsTheLeastRecentlyUsedLine) {
  ChipConfig chip = testing::a3();
  chip.scalar_dcache_bytes = 128;
  chip.scalar_dcache_line = 64;
  chip.scalar_dcache_ways = 2;
  LoadRun r = load_elements({0, 16, 0, 32, 16}, sim::Mode::Timing, chip);
  EXPECT_EQ(r.loads.reads, 2 * 5);
  EXPECT_EQ(r.loads.misses, 2 * 4);
  EXPECT_DOUBLE_EQ(r.busy_s, 4 * chip.scalar_load_cycles + chip.scalar_dcache_hit_cycles);
}

/// Row j of `out` is row table[idx[j] / 4] * 4 + idx[j] % 4 of `src`, in two column halves
/// (two copies through the same row), on AIV 0; with `bind` the index and the row are let
/// bindings (let_), otherwise the reads are written into every use.
ir::Program halves_gather(bool bind) {
  KernelBuilder kb("halves", 1);
  auto src = kb.input("src", {16, 16}, f32);
  auto table = kb.input("table", {4}, i32);
  auto idx = kb.input("idx", {4}, i32);
  auto out = kb.output("out", {4, 16}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    if_(vid == 0, [&] {
      auto iub = alloc_ub("iub", {4}, i32);
      auto row = alloc_ub("row", {4, 16}, f32);
      copy(idx, iub);
      set_flag(Pipe::MTE2, Pipe::S, 0);
      wait_flag(Pipe::MTE2, Pipe::S, 0);
      serial(4, [&](Ex j) {
        Ex at = load(iub, {j});
        if (bind) at = let_("at", at);
        Ex r = load(table, {at / 4}) * 4 + at % 4;
        if (bind) r = let_("r", r);
        copy(src(r, rows(0, 8)), row(j, rows(0, 8)));
        copy(src(r, rows(8, 8)), row(j, rows(8, 8)));
      });
      set_flag(Pipe::MTE2, Pipe::MTE3, 0);
      wait_flag(Pipe::MTE2, Pipe::MTE3, 0);
      copy(row, out);
    });
  });
  return kb.finish();
}

sim::HostData halves_inputs() {
  std::vector<double> src(16 * 16);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i);
  return {{"src", src}, {"table", {2, 0, 3, 1}}, {"idx", {5, 1, 14, 0}}};
}

TEST(Let, PrintsAsABindingTheRestOfTheBlockReads) {
  std::string text = ir::print(halves_gather(true));
  const std::string golden = R"(      for i in serial(0, 4) {
        let at = load(iub[i])
        let r = ((load(table[(at / 4)]) * 4) + (at % 4))
        copy src[r:+1, 0:+8] -> row[i:+1, 0:+8]
        copy src[r:+1, 8:+8] -> row[i:+1, 8:+8]
      })";
  EXPECT_NE(text.find(golden), std::string::npos) << text;
  EXPECT_TRUE(ir::equal(halves_gather(true), halves_gather(true)));
  EXPECT_FALSE(ir::equal(halves_gather(true), halves_gather(false)));
}

/// The same rows either way; bound once, each row reads its page-table entry once (4 GM
/// reads) instead of once per copy (8), in both modes, and the scalar unit is busy less.
TEST(Let, ReadsItsElementsOnceWhereItStands) {
  for (auto mode : {sim::Mode::Functional, sim::Mode::Timing}) {
    sim::HostData bound = halves_inputs(), inlined = halves_inputs();
    auto b = run(halves_gather(true), bound, mode, mode == sim::Mode::Functional);
    auto in = run(halves_gather(false), inlined, mode);
    if (mode == sim::Mode::Functional) {
      EXPECT_EQ(bound["out"], inlined["out"]);
      // row 0 of out is src row table[5 / 4] * 4 + 5 % 4 = 0 * 4 + 1 = 1
      EXPECT_EQ(bound["out"][0], 16.0);
    }
    EXPECT_EQ(b.scalar_gm_loads.reads, 4);
    EXPECT_EQ(in.scalar_gm_loads.reads, 8);
    auto s = [](const sim::SimResult& r) {
      return r.cores[0].pipes[static_cast<size_t>(Pipe::S)].busy_cycles;
    };
    EXPECT_LT(s(b), s(in));
  }
}

/// A binding nothing reads is dropped when the kernel is finished (with the bindings only
/// it read), as the original's simplifier drops it: no core pays for a read it never uses.
TEST(Let, ABindingNothingReadsIsDropped) {
  KernelBuilder kb("dead", 1);
  auto table = kb.input("table", {4}, i32);
  auto out = kb.output("out", {8}, f32);
  kb.launch();
  scope_v([&] {
    auto ub = alloc_ub("ub", {8}, f32);
    Ex a = let_("unused_a", load(table, {1}));
    let_("unused_b", load(table, {a}));
    Ex c = let_("kept", load(table, {2}));
    tile::fill(ub, 1.0);
    set_flag(Pipe::V, Pipe::MTE3, c * 0);
    wait_flag(Pipe::V, Pipe::MTE3, 0);
    copy(ub, out);
  });
  std::string text = ir::print(kb.finish());
  EXPECT_EQ(text.find("unused"), std::string::npos) << text;
  EXPECT_NE(text.find("let kept = load(table[2])"), std::string::npos) << text;
}

/// A binding is visible to the rest of its block only: a use after the block is an error at
/// the use, not a read of a stale register.
TEST(Let, AUseOutsideItsBlockIsAnError) {
  KernelBuilder kb("escape", 1);
  auto idx = kb.input("idx", {4}, i32);
  auto out = kb.output("out", {8}, f32);
  kb.launch();
  scope_v([&] {
    auto ub = alloc_ub("ub", {8}, f32);
    Ex v(0);
    serial(4, [&](Ex j) { v = let_("v", load(idx, {j})); });
    tile::fill(ub, 1.0);
    serial(v, [&](Ex) {
      set_flag(Pipe::V, Pipe::MTE3, 0);
      wait_flag(Pipe::V, Pipe::MTE3, 0);
      copy(ub, out);
    });
  });
  ir::Program p = kb.finish();
  verify_or_throw(p, testing::a3());
  try {
    lower::lower(p, testing::a3());
    FAIL() << "lowered a use of 'v' outside its binding";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'v' used outside its loop or binding"), std::string::npos)
        << e.what();
  }
}

/// A variable bound again is assigned (T.alloc_var's store): `x = 0; for j: if j == 2:
/// x = 5 + j`, then row x of src is copied out after the loop, in both modes, with races
/// checked. Automatic sync takes such a variable as having no value: the accesses it
/// indexes may touch any element of their buffer.
ir::Program register_program(bool hand_flags) {
  KernelBuilder kb("register", 1);
  auto src = kb.input("src", {16, 8}, f32);
  auto out = kb.output("out", {1, 8}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    if_(vid == 0, [&] {
      auto row = alloc_ub("row", {1, 8}, f32);
      Ex x = let_("x", 0);
      serial(4, [&](Ex j) { if_(j == 2, [&] { assign(x, j + 5); }); });
      copy(src(slice(x, 1), all), row);
      if (hand_flags) {
        set_flag(Pipe::MTE2, Pipe::MTE3, 0);
        wait_flag(Pipe::MTE2, Pipe::MTE3, 0);
      }
      copy(row, out);
    });
  });
  return kb.finish();
}

TEST(Let, AVariableBoundAgainIsAssignedTheSameRegister) {
  std::string text = ir::print(register_program(true));
  EXPECT_NE(text.find("let x = 0"), std::string::npos) << text;
  EXPECT_NE(text.find("let x = (i + 5)"), std::string::npos) << text;
  for (auto mode : {sim::Mode::Functional, sim::Mode::Timing}) {
    sim::HostData io = gather_inputs({0, 0, 0, 0});
    run(register_program(true), io, mode, mode == sim::Mode::Functional);
    if (mode == sim::Mode::Functional) {
      for (int c = 0; c < 8; ++c) EXPECT_EQ(io["out"][static_cast<size_t>(c)], 7 * 8 + c);
    }
  }
  // Automatic sync orders the copies indexed by the register (no race, the same rows).
  passes::PassOptions o;
  ir::Program synced = passes::run_passes(register_program(false), testing::a3(), o);
  EXPECT_NE(ir::print(synced).find("set_flag MTE2->MTE3"), std::string::npos) << ir::print(synced);
  sim::HostData io = gather_inputs({0, 0, 0, 0});
  run(synced, io, sim::Mode::Functional, true);
  for (int c = 0; c < 8; ++c) EXPECT_EQ(io["out"][static_cast<size_t>(c)], 7 * 8 + c);
}

/// Timing mode runs no data ops, yet the copies and branches that depend on loaded indices
/// follow the real values: skipping -1 rows changes the time, and matches functional mode.
TEST(Load, TimingModeFollowsTheRealIndices) {
  auto cycles = [](std::vector<double> idx, sim::Mode mode) {
    sim::HostData io = gather_inputs(std::move(idx));
    return run(gather_program(), io, mode).cycles;
  };
  double all_valid = cycles({5, 1, 14, 0}, sim::Mode::Timing);
  double some_skipped = cycles({5, -1, -1, 0}, sim::Mode::Timing);
  EXPECT_LT(some_skipped, all_valid);
  EXPECT_DOUBLE_EQ(all_valid, cycles({5, 1, 14, 0}, sim::Mode::Functional));
  EXPECT_DOUBLE_EQ(some_skipped, cycles({5, -1, -1, 0}, sim::Mode::Functional));
}

/// The index tile is computed on chip: the input's indices + 1 by a vector op. Timing mode
/// runs that op too (lower.cc, mark_materialised), so both modes follow the computed
/// indices, and the values are the gather of the shifted rows.
ir::Program shifted_gather_program() {
  KernelBuilder kb("shifted", 1);
  auto src = kb.input("src", {16, 8}, f32);
  auto idx = kb.input("idx", {4}, i32);
  auto out = kb.output("out", {4, 8}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    if_(vid == 0, [&] {
      auto iub = alloc_ub("iub", {8}, i32);
      auto row = alloc_ub("row", {4, 8}, f32);
      copy(idx, iub(slice(0, 4)));
      set_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      tile::adds(iub, iub, 1.0);
      tile::fill(row, 0.0);
      set_flag(Pipe::V, Pipe::S, 0);
      wait_flag(Pipe::V, Pipe::S, 0);
      set_flag(Pipe::V, Pipe::MTE2, 0);
      wait_flag(Pipe::V, Pipe::MTE2, 0);
      serial(4, [&](Ex j) {
        Ex i = load(iub, {j});
        if_(i >= 0, [&] { copy(src(i, all), row(j, all)); });
      });
      set_flag(Pipe::MTE2, Pipe::MTE3, 0);
      wait_flag(Pipe::MTE2, Pipe::MTE3, 0);
      copy(row, out);
    });
  });
  return kb.finish();
}

TEST(Load, AnIndexComputedOnChipDrivesBothModes) {
  sim::HostData io = {{"idx", {4, -2, 13, -1}}};
  std::vector<double> src(16 * 8);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i);
  io["src"] = src;
  sim::HostData timing_io = io, few_io = io;
  run(shifted_gather_program(), io, sim::Mode::Functional, /*races=*/true);
  const std::vector<int> expect_rows = {5, -1, 14, 0};
  expect_gathered_rows(io, expect_rows);
  const double functional = run(shifted_gather_program(), io, sim::Mode::Functional).cycles;
  const double timing = run(shifted_gather_program(), timing_io, sim::Mode::Timing).cycles;
  EXPECT_DOUBLE_EQ(timing, functional);
  few_io["idx"] = {-2, -2, -2, 0};  // three rows skipped once shifted
  EXPECT_LT(run(shifted_gather_program(), few_io, sim::Mode::Timing).cycles, timing);
}

}  // namespace
}  // namespace tilepipe

// The race detector on its own (src/sim/race.h): its site table is collected without
// changing a report, a GM tensor holds shadow only where it is touched, accesses conflict
// only on the bytes they touch (not per 32-byte block), and in functional runs a pair with
// a write that stored the bytes already there (on GM, or a copy's anywhere) is no race.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "sim/race.h"

namespace tilepipe::sim {
namespace {

struct Fixture {
  std::shared_ptr<ir::BufferNode> buf = std::make_shared<ir::BufferNode>(
      ir::BufferNode{0, "x", ir::Scope::GM, ir::DType::F32, {}, ir::TensorRole::None, {}});
  lower::AccessTemplate t;
  lower::OpTemplate writer{}, reader{}, other{};
  Fixture() {
    t.buffer = buf.get();
    t.elem_bytes = 4;
    t.num_elements = t.span = 8;  // one 32-byte block, one run
    t.rank = 1;
    t.extent[0] = 8;
    t.stride[0] = 1;
    writer.loc = {"k.cc", 10, 1};
    reader.loc = {"k.cc", 20, 1};
    other.loc = {"k.cc", 30, 1};
  }
  Access at(int64_t offset) const { return Access{&t, nullptr, offset}; }
  /// `rows` rows of `row` elements, `pitch` elements apart (a strided DMA).
  void rows(int64_t rows, int64_t row, int64_t pitch) {
    t.rank = 2;
    t.extent = {rows, row};
    t.stride = {pitch, 1};
    t.num_elements = rows * row;
    t.span = (rows - 1) * pitch + row;
  }
};

TEST(RaceDetector, CollectingSitesKeepsTheLoopStateOfALiveEpoch) {
  Fixture f;
  RaceDetector d(1);
  d.name_core(0, "core0.AIV0");
  const int v = RaceDetector::thread(1, ir::Pipe::V);
  const int mte3 = RaceDetector::thread(1, ir::Pipe::MTE3);
  const std::vector<int64_t> first = {0, 57, 3};
  d.access(0, v, 0, f.at(0), RaceKind::Write, d.site(0, ir::Pipe::V, &f.writer, first));
  // Over two million later sites, each overwriting the same other block: the table is
  // collected (several times) while the first write stays live.
  for (int64_t i = 0; i < 2'200'000; ++i) {
    const std::vector<int64_t> loops = {0, 57, 4 + i};
    d.access(0, v, 0, f.at(8), RaceKind::Write, d.site(0, ir::Pipe::V, &f.other, loops));
  }
  EXPECT_FALSE(d.found());
  const std::vector<int64_t> later = {0, 57, 9};
  d.access(0, mte3, 0, f.at(0), RaceKind::Read, d.site(0, ir::Pipe::MTE3, &f.reader, later));
  auto reports = d.take_reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].message,
            "data race on 'x': core0.AIV0 V writes at k.cc:10 (core0.AIV0, cid=0, loop@57=3) "
            "and core0.AIV0 MTE3 reads at k.cc:20 (core0.AIV0, cid=0, loop@57=9) with no flag "
            "ordering them");
}

TEST(RaceDetector, AFarGmOffsetIsTrackedAndOrderedByAFlag) {
  Fixture f;
  RaceDetector d(1);
  d.name_core(0, "core0.AIV0");
  const int v = RaceDetector::thread(1, ir::Pipe::V);
  const int mte3 = RaceDetector::thread(1, ir::Pipe::MTE3);
  const std::vector<int64_t> loops = {0};
  const int64_t far = int64_t{3} << 30;  // 12 GiB in: one page of shadow, not 12 GiB of it
  d.access(0, v, 0, f.at(far), RaceKind::Write, d.site(0, ir::Pipe::V, &f.writer, loops));
  d.acquire(0, mte3, d.release(0, v));
  d.access(0, mte3, 0, f.at(far), RaceKind::Read, d.site(0, ir::Pipe::MTE3, &f.reader, loops));
  EXPECT_FALSE(d.found());
  d.access(0, v, 0, f.at(far + 4), RaceKind::Write, d.site(0, ir::Pipe::V, &f.other, loops));
  ASSERT_TRUE(d.found());
  EXPECT_NE(d.take_reports()[0].message.find("MTE3 reads at k.cc:20"), std::string::npos);
}

// Two AIVs writing different 16-byte rows of one 32-byte block of GM (hc_split_sinkhorn's
// `pre`) touch different bytes: no race. The same rows written twice, or a read of bytes
// either wrote, still are.
TEST(RaceDetector, RowsOfOneBlockConflictOnlyWhereTheirBytesMeet) {
  Fixture f;
  f.t.elem_bytes = 2;
  f.rows(4, 8, 16);  // four 16-byte rows, 32 bytes apart: the first half of four blocks
  RaceDetector d(1);
  d.name_core(0, "core0.AIV0");
  d.name_core(1, "core0.AIV1");
  const int v0 = RaceDetector::thread(1, ir::Pipe::MTE3);
  const int v1 = RaceDetector::thread(2, ir::Pipe::MTE3);
  const std::vector<int64_t> loops = {0};
  const int s0 = d.site(0, ir::Pipe::MTE3, &f.writer, loops);
  const int s1 = d.site(1, ir::Pipe::MTE3, &f.other, loops);
  d.access(0, v0, 0, f.at(0), RaceKind::Write, s0);
  d.access(0, v1, 0, f.at(8), RaceKind::Write, s1);  // the second half of each block
  EXPECT_FALSE(d.found());
  // A read of a whole block on AIV0 after its own write: AIV1's half is unordered.
  Fixture whole;
  const int mte2 = RaceDetector::thread(1, ir::Pipe::MTE2);
  d.acquire(0, mte2, d.release(0, v0));
  d.access(0, mte2, 0, whole.at(0), RaceKind::Read, d.site(0, ir::Pipe::MTE2, &f.reader, loops));
  ASSERT_TRUE(d.found());
  EXPECT_NE(d.take_reports()[0].message.find("core0.AIV1 MTE3 writes at k.cc:30"),
            std::string::npos);
  // The second write of AIV0's rows: still remembered beside AIV1's, a race with AIV1.
  RaceDetector e(1);
  e.name_core(0, "core0.AIV0");
  e.name_core(1, "core0.AIV1");
  e.access(0, v0, 0, f.at(0), RaceKind::Write, e.site(0, ir::Pipe::MTE3, &f.writer, loops));
  e.access(0, v1, 0, f.at(8), RaceKind::Write, e.site(1, ir::Pipe::MTE3, &f.other, loops));
  e.access(0, v1, 0, f.at(0), RaceKind::Write, e.site(1, ir::Pipe::MTE3, &f.reader, loops));
  ASSERT_TRUE(e.found());
  EXPECT_NE(e.take_reports()[0].message.find("core0.AIV0 MTE3 writes at k.cc:10"),
            std::string::npos);
}

// In a functional run a read against another core's unordered write of GM waits for the
// write's values: a write that stored the bytes already there is no race in either order;
// one that changed them is.
TEST(RaceDetector, AReadAgainstASameValueWriteIsNoRaceInEitherOrder) {
  Fixture f;
  const int aic = RaceDetector::thread(0, ir::Pipe::MTE2);
  const int aiv = RaceDetector::thread(1, ir::Pipe::MTE3);
  const std::vector<int64_t> loops = {0};
  for (bool write_first : {true, false})
    for (bool changed : {false, true}) {
      RaceDetector d(2);
      d.defer_same_value_writes();
      d.name_core(0, "core0.AIC");
      d.name_core(1, "core1.AIV0");
      const int w = d.site(1, ir::Pipe::MTE3, &f.writer, loops);
      const int r = d.site(0, ir::Pipe::MTE2, &f.reader, loops);
      std::atomic<bool>* tag = nullptr;
      if (!write_first) d.access(0, aic, 0, f.at(0), RaceKind::Read, r);
      d.access(1, aiv, 0, f.at(0), RaceKind::Write, w);  // another AI core
      tag = d.take_tag();
      ASSERT_NE(tag, nullptr);
      if (write_first) d.access(0, aic, 0, f.at(0), RaceKind::Read, r);
      EXPECT_FALSE(d.found());
      tag->store(changed);  // what the value executor finds
      EXPECT_TRUE(d.has_deferred());
      d.resolve_writes();
      EXPECT_EQ(d.found(), changed) << "write first: " << write_first;
    }
}

// The same holds on one core's UB for a copy (a loop reloading a constant tile while the
// vector unit still reads the last load: opt_gdn_solve_tril's identity `i_ub`): the MTE2
// write that stores the bytes already there is no race with the V read, one that changes
// them is; a vector write is reported at once, whatever its values.
TEST(RaceDetector, ACopyIntoUbThatStoresTheBytesAlreadyThereIsNoRace) {
  Fixture f;
  f.buf->scope = f.t.scope = ir::Scope::UB;
  const int v = RaceDetector::thread(1, ir::Pipe::V);
  const int mte2 = RaceDetector::thread(1, ir::Pipe::MTE2);
  const std::vector<int64_t> loops = {0};
  for (bool changed : {false, true}) {
    RaceDetector d(1);
    d.defer_same_value_writes();
    d.name_core(0, "core0.AIV0");
    d.access(0, v, 0, f.at(0), RaceKind::Read, d.site(0, ir::Pipe::V, &f.reader, loops));
    d.access(0, mte2, 0, f.at(0), RaceKind::Write, d.site(0, ir::Pipe::MTE2, &f.writer, loops));
    std::atomic<bool>* tag = d.take_tag();
    ASSERT_NE(tag, nullptr);
    EXPECT_FALSE(d.found());
    tag->store(changed);
    d.resolve_writes();
    EXPECT_EQ(d.found(), changed);
  }
  RaceDetector d(1);
  d.defer_same_value_writes();
  d.name_core(0, "core0.AIV0");
  const int mte3 = RaceDetector::thread(1, ir::Pipe::MTE3);
  d.access(0, mte3, 0, f.at(0), RaceKind::Read, d.site(0, ir::Pipe::MTE3, &f.reader, loops));
  d.access(0, v, 0, f.at(0), RaceKind::Write, d.site(0, ir::Pipe::V, &f.writer, loops));
  EXPECT_EQ(d.take_tag(), nullptr);
  EXPECT_TRUE(d.found());  // a vector write: no values awaited
}

// The scalar unit's element store (SetValue) is ordered with its own later reads by
// program order, but not with a pipe's access the scalar unit issues after it: that needs an
// S -> pipe flag, which covers every store before the set. Block boundaries and the scalar
// unit's waits (a barrier_all) order it too.
TEST(RaceDetector, AnElementStoreNeedsAnSFlagBeforeAPipeReadsIt) {
  Fixture f;
  const int s = RaceDetector::thread(1, ir::Pipe::S);
  const int mte3 = RaceDetector::thread(1, ir::Pipe::MTE3);
  const std::vector<int64_t> loops = {0};
  auto run = [&](bool flag, bool block, bool wait = false) {
    RaceDetector d(1);
    d.name_core(0, "core0.AIV0");
    d.access(0, s, 0, f.at(0), RaceKind::Write, d.site(0, ir::Pipe::S, &f.writer, loops), true);
    d.access(0, s, 0, f.at(0), RaceKind::Read, d.site(0, ir::Pipe::S, &f.reader, loops));
    if (flag) d.acquire(0, mte3, d.release(0, s));
    if (block) d.barrier(0);
    if (wait) d.publish_stores(0, s);
    // What the scalar unit hands to the copy it issues now: its clock.
    d.acquire(0, mte3, d.clock(0, s));
    d.access(0, mte3, 0, f.at(0), RaceKind::Read, d.site(0, ir::Pipe::MTE3, &f.other, loops));
    return d.found();
  };
  EXPECT_TRUE(run(false, false));         // setvalue_example: the store, then the DMA reading it
  EXPECT_FALSE(run(true, false));         // set_flag(S, MTE3) / wait_flag between them
  EXPECT_FALSE(run(false, true));         // the next block
  EXPECT_FALSE(run(false, false, true));  // a wait of the scalar unit: T.barrier_all()
}

// The shadow of a memory is kept per run of equal 32-byte blocks (an access gives every block
// it covers one state): a GiB of GM written and read back by contiguous 64 KiB copies holds a
// few MiB of shadow, not the 1.25 GiB one Block per block would take, and stays exact: an
// unordered write of one element in the middle is the race it was, naming the copy it meets.
TEST(RaceDetector, AGibibyteOfGmCopiedInTilesKeepsAFewMibOfShadow) {
  Fixture f;
  constexpr int64_t kTile = 16384;  // f32 elements: 64 KiB
  constexpr int64_t kTiles = (int64_t{1} << 30) / (kTile * 4);
  f.t.num_elements = f.t.span = f.t.extent[0] = kTile;
  RaceDetector d(1);
  d.name_core(0, "core0.AIV0");
  d.name_core(1, "core0.AIV1");
  const int mte3 = RaceDetector::thread(1, ir::Pipe::MTE3);
  const int mte2 = RaceDetector::thread(1, ir::Pipe::MTE2);
  for (int64_t i = 0; i < kTiles; ++i) {  // each copy its own site (loop value)
    const std::vector<int64_t> loops = {0, 57, i};
    d.access(0, mte3, 0, f.at(i * kTile), RaceKind::Write,
             d.site(0, ir::Pipe::MTE3, &f.writer, loops));
  }
  d.acquire(0, mte2, d.release(0, mte3));
  for (int64_t i = 0; i < kTiles; ++i) {
    const std::vector<int64_t> loops = {0, 58, i};
    d.access(0, mte2, 0, f.at(i * kTile), RaceKind::Read,
             d.site(0, ir::Pipe::MTE2, &f.reader, loops));
  }
  EXPECT_FALSE(d.found());
  EXPECT_LE(d.memory_bytes(), size_t{8} << 20);
  Fixture one;  // one f32 element, from the other AIV
  one.t.num_elements = one.t.span = one.t.extent[0] = 1;
  const std::vector<int64_t> loops = {0};
  d.access(0, RaceDetector::thread(2, ir::Pipe::MTE3), 0, one.at(kTiles / 2 * kTile + 5),
           RaceKind::Write, d.site(1, ir::Pipe::MTE3, &f.other, loops));
  auto reports = d.take_reports();
  ASSERT_EQ(reports.size(), 2u);  // against the last write and the last read of the byte
  EXPECT_NE(reports[0].message.find(fmt::format("MTE3 writes at k.cc:10 (core0.AIV0, cid=0, "
                                                "loop@57={})",
                                                kTiles / 2)),
            std::string::npos)
      << reports[0].message;
}

// A GiB written as 64-row tiles of 256-byte rows (a [16384, 32768] bf16 tensor, block_N = 128,
// rows 64 KiB apart) is cut into 256-byte runs, one per row of a tile: the shadow then holds
// a run per distinct access fragment, at most a quarter of one Block per block.
TEST(RaceDetector, AGibibyteOfGmWrittenInRowsKeepsAShadowPerRowOfATile) {
  Fixture f;
  f.t.elem_bytes = 2;
  constexpr int64_t kRows = 16384, kCols = 32768, kTileRows = 64, kTileCols = 128;
  f.rows(kTileRows, kTileCols, kCols);
  RaceDetector d(1);
  d.name_core(0, "core0.AIV0");
  const int mte3 = RaceDetector::thread(1, ir::Pipe::MTE3);
  for (int64_t r = 0; r < kRows; r += kTileRows)
    for (int64_t c = 0; c < kCols; c += kTileCols) {
      const std::vector<int64_t> loops = {0, 57, r, 58, c};
      d.access(0, mte3, 0, f.at(r * kCols + c), RaceKind::Write,
               d.site(0, ir::Pipe::MTE3, &f.writer, loops));
    }
  EXPECT_FALSE(d.found());
  const size_t dense = (size_t{1} << 30) / 32 * 40;  // one 40-byte Block per 32-byte block
  EXPECT_LE(d.memory_bytes(), dense / 4);
}

}  // namespace
}  // namespace tilepipe::sim

// The race detector on its own (src/sim/race.h): its site table is collected without
// changing a report, and a GM tensor holds shadow only where it is touched.
#include <gtest/gtest.h>

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
    writer.loc = {"k.cc", 10, 1};
    reader.loc = {"k.cc", 20, 1};
    other.loc = {"k.cc", 30, 1};
  }
  Access at(int64_t offset) const { return Access{&t, nullptr, offset}; }
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

}  // namespace
}  // namespace tilepipe::sim

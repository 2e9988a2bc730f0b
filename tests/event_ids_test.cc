// The event_ids pass (passes/event_ids.h): ids past the chip's count renamed injectively
// per core kind and pipe pair (golden IR), the same cycles as the program written with the
// renamed ids, and a located error when no renaming fits.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "passes/event_ids.h"
#include "test_util.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/sim.h"
#include "tilepipe/verify.h"

namespace tilepipe {
namespace {

using namespace lang;

/// A Vector kernel copying X to Y in 4 chunks through two UB slots, handed over with
/// MTE2 -> V flags of ids `load_id(k)` (a run-time id) and a one-off handshake of id `once`,
/// V -> MTE3 flags of id `store`.
ir::Program chunks(const std::function<Ex(Ex)>& load_id, int64_t once, int64_t store = 9) {
  KernelBuilder kb("chunks", 1);
  auto x = kb.input("X", {4, 64}, f32);
  auto y = kb.output("Y", {4, 64}, f32);
  auto [cid, vid] = kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {2, 64}, f32);
    auto b = alloc_ub("b", {2, 64}, f32);
    if_(vid == 0, [&] {
      copy(x(0, all), a(0, all));
      set_flag(Pipe::MTE2, Pipe::V, once);
      wait_flag(Pipe::MTE2, Pipe::V, once);
      serial(4, [&](Ex k) {
        copy(x(k, all), a(k % 2, all));
        set_flag(Pipe::MTE2, Pipe::V, load_id(k));
        wait_flag(Pipe::MTE2, Pipe::V, load_id(k));
        tile::muls(b(k % 2, all), a(k % 2, all), 2.0);
        set_flag(Pipe::V, Pipe::MTE3, store);
        wait_flag(Pipe::V, Pipe::MTE3, store);
        copy(b(k % 2, all), y(k, all));
        set_flag(Pipe::MTE3, Pipe::MTE2, 0);
        wait_flag(Pipe::MTE3, Pipe::MTE2, 0);
      });
    });
  });
  return kb.finish();
}

ir::Program renamed(const ir::Program& p) {
  ir::Program out = passes::event_ids(p, testing::a3(), {});
  verify_or_throw(out, testing::a3());
  return out;
}

TEST(EventIds, RunTimeIdsShiftedAsOneConstantsToFreeIds) {
  // MTE2->V: k % 2 + 11 shifted down by 11, the handshake 10 -> the first id they leave
  // free (2); V->MTE3: 9 -> 0 (free); MTE3->MTE2: 0 stays.
  auto p = chunks([](Ex k) { return k % 2 + 11; }, 10);
  EXPECT_FALSE(verify(p, testing::a3()).empty());  // as written: ids past 0..7
  std::string text = ir::print(renamed(p));
  for (const char* want :
       {"set_flag MTE2->V #2", "wait_flag MTE2->V #2", "set_flag MTE2->V #(((i % 2) + 11) - 11)",
        "set_flag V->MTE3 #0", "wait_flag V->MTE3 #0", "set_flag MTE3->MTE2 #0"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  // Ids in range: the program as it was.
  auto in_range = chunks([](Ex k) { return k % 2 + 1; }, 0, 3);
  EXPECT_TRUE(ir::equal(passes::event_ids(in_range, testing::a3(), {}), in_range));
}

TEST(EventIds, SameCyclesAndValuesAsTheIdsWrittenInRange) {
  auto run = [](const ir::Program& p) {
    sim::HostData io = {{"X", std::vector<double>(256, 1.5)}};
    sim::SimOptions o;
    o.mode = sim::Mode::Functional;
    o.detect_races = true;
    auto r = sim::simulate(lower::lower(p, testing::a3()), testing::a3(), &io, o);
    return std::make_pair(r.cycles, io.at("Y"));
  };
  auto [c1, y1] = run(renamed(chunks([](Ex k) { return k % 2 + 11; }, 10)));
  auto [c2, y2] = run(renamed(chunks([](Ex k) { return k % 2 + 1; }, 0, 3)));
  EXPECT_EQ(c1, c2);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(y1, std::vector<double>(256, 3.0));
}

TEST(EventIds, AHandshakePastTheRangeTakesAnIdFreeThere) {
  // MTE2->V: run-time ids k * 7 / 3 (0, 2, 4, 7) span all 8; the handshake #10 before the
  // loop, where no token is held: id 0. The loop's ids stay as they are.
  auto p = chunks([](Ex k) { return k * 7 / 3; }, 10);
  std::string text = ir::print(renamed(p));
  EXPECT_NE(text.find("set_flag MTE2->V #0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("set_flag MTE2->V #((i * 7) / 3)"), std::string::npos) << text;
  // Run-time ids 1..7 shifted to 0..6: the handshake takes the id they leave free, 7.
  auto q = chunks([](Ex k) { return k * 2 + 1; }, 10);
  EXPECT_NE(ir::print(renamed(q)).find("set_flag MTE2->V #7\n"), std::string::npos);
}

/// Eight MTE2 -> V tokens held across a handshake #`once` (ids 0..7 of a loop), or none.
ir::Program held(int64_t once, bool across) {
  KernelBuilder kb("held", 1);
  auto x = kb.input("X", {8, 64}, f32);
  auto y = kb.output("Y", {8, 64}, f32);
  kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {8, 64}, f32);
    auto give = [&] {
      serial(8, [&](Ex k) {
        copy(x(k, all), a(k, all));
        set_flag(Pipe::MTE2, Pipe::V, k);
      });
    };
    auto take = [&] { serial(8, [&](Ex k) { wait_flag(Pipe::MTE2, Pipe::V, k); }); };
    give();
    if (!across) take();
    set_flag(Pipe::MTE2, Pipe::V, once);
    wait_flag(Pipe::MTE2, Pipe::V, once);
    if (across) take();
    set_flag(Pipe::V, Pipe::MTE3, 0);
    wait_flag(Pipe::V, Pipe::MTE3, 0);
    copy(a, y);
  });
  return kb.finish();
}

TEST(EventIds, AHandshakeWhereEveryIdHoldsATokenIsAnError) {
  EXPECT_NE(ir::print(renamed(held(10, false))).find("set_flag MTE2->V #0\n"), std::string::npos);
  try {
    renamed(held(10, true));
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    const std::string msg = e.diagnostics().front().str();
    EXPECT_NE(msg.find("ids from 0 to 7 (run-time ones among them) and the handshake #10, at "
                       "which each of the 8 ids may hold a token"),
              std::string::npos)
        << msg;
  }
}

TEST(EventIds, NoRenamingFitsIsAnErrorAtTheFirstIdPastTheRange) {
  // MTE2->V uses 0..7 at run time and 10 in a set and wait apart: 11 ids do not fit in 8.
  KernelBuilder kb("apart", 1);
  auto x = kb.input("X", {8, 64}, f32);
  kb.output("Y", {8, 64}, f32);
  kb.launch();
  scope_v([&] {
    auto a = alloc_ub("a", {8, 64}, f32);
    serial(8, [&](Ex k) {
      copy(x(k, all), a(k, all));
      set_flag(Pipe::MTE2, Pipe::V, 10);
      set_flag(Pipe::MTE2, Pipe::V, k);
      wait_flag(Pipe::MTE2, Pipe::V, k);
      wait_flag(Pipe::MTE2, Pipe::V, 10);
    });
  });
  try {
    renamed(kb.finish());
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    const std::string msg = e.diagnostics().front().str();
    EXPECT_NE(msg.find("the MTE2->V flags of the Vector core use ids from 0 to 10"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("event_ids_test.cc"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace tilepipe

// Sync mutation tests (kernels/mutate.h): for every kernel with hand-written flags, dropping
// any single sync op is either caught by the simulator's race / deadlock detection or proven
// redundant (no race, no deadlock, bit-identical outputs). A value mismatch without a race
// report would be a hole in the race detector.
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <string>

#include "registry.h"
#include "test_util.h"
#include "tilepipe/driver_syncs.h"

namespace tilepipe {
namespace {

using driver::DropOutcome;

struct MutationCase {
  std::string kernel, variant;
  std::map<std::string, std::string> params;
  std::string name;
};

void PrintTo(const MutationCase& c, std::ostream* os) {
  *os << c.name;
}

driver::RunRequest request(const MutationCase& c) {
  const auto& k = kernels::find_kernel(c.kernel);
  driver::RunRequest req;
  req.variant = c.variant;
  req.params = driver::resolve_params(k, c.params);
  return req;
}

// Sanitizer builds are several times slower: they drop every `kStride`-th sync only (the
// release build covers every one).
#if defined(__SANITIZE_ADDRESS__)
constexpr int kStride = 4;
#else
constexpr int kStride = 1;
#endif

class DropEverySync : public ::testing::TestWithParam<MutationCase> {};

TEST_P(DropEverySync, IsCaughtByRaceOrDeadlockDetectionOrIsRedundant) {
  const MutationCase& c = GetParam();
  const auto& k = kernels::find_kernel(c.kernel);
  driver::RunRequest req = request(c);
  driver::RunReport base = driver::baseline_check(k, req, testing::a3());
  auto syncs = driver::list_syncs(base.lowered);
  ASSERT_FALSE(syncs.empty());
  std::map<DropOutcome, int> counts;
  for (size_t i = 0; i < syncs.size(); i += kStride) {
    const auto& s = syncs[i];
    SCOPED_TRACE("drop sync " + std::to_string(s.index) + ": " + s.kind + " " + s.pipes + " #" +
                 s.event_id + " at " + s.source);
    auto r = driver::drop_and_check(k, req, testing::a3(), syncs, {s.index}, base);
    ++counts[r.outcome];
    switch (r.outcome) {
      case DropOutcome::Race:
      case DropOutcome::Deadlock:
        ASSERT_FALSE(r.diagnostics.empty());
        EXPECT_EQ(r.diagnostics.front().loc.file, c.kernel + ".cc") << r.diagnostics.front().str();
        break;
      case DropOutcome::Redundant:
        EXPECT_GE(r.cycles, 0);
        EXPECT_EQ(r.saved_cycles, base.sim.cycles - r.cycles);
        break;
      default:
        ADD_FAILURE() << "outcome " << driver::to_string(r.outcome) << ": "
                      << (r.diagnostics.empty() ? r.mismatch : r.diagnostics.front().str());
    }
    // A set that is gone leaves its wait blocked, or lets the next set pair up early: it is
    // never redundant in these kernels (each set has a wait that depends on it).
    if (s.op == lower::Opcode::SetFlag || s.op == lower::Opcode::SetCross) {
      EXPECT_NE(r.outcome, DropOutcome::Redundant);
    }
  }
  if (kStride == 1) {  // every kernel has syncs of both kinds that matter
    EXPECT_GT(counts[DropOutcome::Deadlock], 0);
    EXPECT_GT(counts[DropOutcome::Race], 0);
  }
}

std::vector<MutationCase> cases() {
  const std::map<std::string, std::string> fa = {{"S", "256"}, {"H", "1"}};
  const std::map<std::string, std::string> sfa = {{"H", "16"}, {"KV_S", "512"}, {"topk", "136"}};
  std::vector<MutationCase> out = {
      {"fa", "expert", {{"S", "512"}, {"H", "1"}}, "fa_expert_S512"},
      {"gemm", "expert", {{"M", "128"}, {"N", "128"}, {"K", "256"}}, "gemm"},
      {"softmax", "tile", {{"R", "64"}, {"C", "256"}}, "softmax"},
      {"elementwise", "add", {{"N", "4096"}}, "elementwise"},
  };
  for (const char* v : {"baseline", "multibuf", "pipelined"})
    out.push_back({"fa", v, fa, "fa_" + std::string(v)});
  for (const char* v : {"baseline", "developer", "pa", "no_cv_pipeline"})
    out.push_back({"sfa", v, sfa, "sfa_" + std::string(v)});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Kernels, DropEverySync, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------
// The sync inventory and the three outcomes on FA expert (S=512, H=1).

class FaExpertSyncs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    k_ = &kernels::find_kernel("fa");
    req_ = new driver::RunRequest(request({"fa", "expert", {{"S", "512"}, {"H", "1"}}, ""}));
    base_ = new driver::RunReport(driver::baseline_check(*k_, *req_, testing::a3()));
    syncs_ = new std::vector<driver::SyncOp>(driver::list_syncs(base_->lowered));
  }
  static void TearDownTestSuite() {
    delete req_;
    delete base_;
    delete syncs_;
  }
  /// The first (or last) sync of `kind` on `pipes` of core kind `core`, or null.
  static const driver::SyncOp* find(ir::CoreKind core, const std::string& kind,
                                    const std::string& pipes, bool last = false) {
    const driver::SyncOp* hit = nullptr;
    for (const auto& s : *syncs_)
      if (s.core == core && s.kind == kind && s.pipes == pipes && (!hit || last)) hit = &s;
    return hit;
  }
  static driver::DropResult drop(std::vector<int> which) {
    return driver::drop_and_check(*k_, *req_, testing::a3(), *syncs_, which, *base_);
  }
  static inline const driver::KernelSource* k_ = nullptr;
  static inline driver::RunRequest* req_ = nullptr;
  static inline driver::RunReport* base_ = nullptr;
  static inline std::vector<driver::SyncOp>* syncs_ = nullptr;
};

TEST_F(FaExpertSyncs, ListIsInProgramOrderAicFirstWithSources) {
  ASSERT_GT(syncs_->size(), 20u);
  bool seen_aiv = false;
  for (size_t i = 0; i < syncs_->size(); ++i) {
    const auto& s = (*syncs_)[i];
    EXPECT_EQ(s.index, static_cast<int>(i));
    EXPECT_EQ(s.source.rfind("fa.cc:", 0), 0u) << s.source;
    if (s.core == ir::CoreKind::V) seen_aiv = true;
    if (seen_aiv) {
      EXPECT_EQ(s.core, ir::CoreKind::V) << "AIC syncs come first";
    }
    if (i > 0 && (*syncs_)[i - 1].core == s.core) {
      EXPECT_LT((*syncs_)[i - 1].instr, s.instr);
    }
  }
  EXPECT_TRUE(seen_aiv);
  // Listing is deterministic: a second lowering gives the same list.
  auto again = driver::kernel_syncs(*k_, *req_, testing::a3());
  ASSERT_EQ(again.size(), syncs_->size());
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].kind, (*syncs_)[i].kind);
    EXPECT_EQ(again[i].event_id, (*syncs_)[i].event_id);
    EXPECT_EQ(again[i].source, (*syncs_)[i].source);
  }
}

TEST_F(FaExpertSyncs, DroppingTheWaitBeforeTheSoftmaxIsARaceAtItsLine) {
  // AIV: copy ws1 -> UB on MTE2, set(MTE2, V), wait(MTE2, V), then V reads the tile.
  auto* w = find(ir::CoreKind::V, "wait_flag", "MTE2->V");
  ASSERT_NE(w, nullptr);
  auto r = drop({w->index});
  EXPECT_EQ(r.outcome, DropOutcome::Race);
  ASSERT_FALSE(r.diagnostics.empty());
  EXPECT_EQ(r.diagnostics.front().kind, "race");
  EXPECT_NE(r.diagnostics.front().message.find("MTE2 writes at fa.cc:"), std::string::npos)
      << r.diagnostics.front().message;
}

TEST_F(FaExpertSyncs, DroppingASetDeadlocksItsWait) {
  auto* s = find(ir::CoreKind::V, "set_flag", "MTE2->V");
  auto* w = find(ir::CoreKind::V, "wait_flag", "MTE2->V");
  ASSERT_TRUE(s && w);
  auto r = drop({s->index});
  EXPECT_EQ(r.outcome, DropOutcome::Deadlock);
  // The AIV's matching wait blocks forever (and the AIC, waiting for the AIV, too).
  bool at_wait = false;
  for (const auto& d : r.diagnostics)
    at_wait = at_wait || (d.loc.str() == w->source &&
                          d.message.find("MTE2->V #0 forever; never set") != std::string::npos);
  EXPECT_TRUE(at_wait) << UserError(r.diagnostics).what();
}

TEST_F(FaExpertSyncs, DrainWaitAtKernelEndIsRedundantWithIdenticalOutputs) {
  // The credit drain after the last task orders nothing that follows.
  auto* w = find(ir::CoreKind::C, "wait_flag", "M->MTE1", /*last=*/true);
  ASSERT_NE(w, nullptr);
  auto r = drop({w->index});
  EXPECT_EQ(r.outcome, DropOutcome::Redundant) << driver::to_string(r.outcome);
  EXPECT_TRUE(r.diagnostics.empty());
  EXPECT_TRUE(r.mismatch.empty());
}

TEST(RedundantSyncFinder, CombinesOnlySyncsThatAreRedundantTogether) {
  const auto& k = kernels::find_kernel("gemm");
  auto req = request({"gemm", "expert", {{"M", "128"}, {"N", "128"}, {"K", "256"}}, ""});
  auto base = driver::baseline_check(k, req, testing::a3());
  auto syncs = driver::list_syncs(base.lowered);
  auto rep = driver::find_redundant(k, req, testing::a3(), syncs, base);
  ASSERT_EQ(rep.single.size(), syncs.size());
  ASSERT_FALSE(rep.combined.dropped.empty());
  for (int i : rep.combined.dropped)
    EXPECT_EQ(rep.single[static_cast<size_t>(i)].outcome, DropOutcome::Redundant) << i;
  // Re-check the combination independently: still redundant, same cycles.
  auto again = driver::drop_and_check(k, req, testing::a3(), syncs, rep.combined.dropped, base);
  EXPECT_EQ(again.outcome, DropOutcome::Redundant);
  EXPECT_EQ(again.cycles, rep.combined.cycles);
  EXPECT_EQ(base.sim.cycles - rep.combined.cycles, again.saved_cycles);
}

TEST_F(FaExpertSyncs, IndexOutOfRangeIsAParamError) {
  EXPECT_THROW(drop({static_cast<int>(syncs_->size())}), driver::ParamError);
  EXPECT_THROW(drop({-1}), driver::ParamError);
}

}  // namespace
}  // namespace tilepipe

// The functional engine's values on worker threads (src/sim/values.h): the same bytes as on
// the engine's own thread, whatever the number of workers.
#include <gtest/gtest.h>

#include <random>

#include "registry.h"
#include "sim/values.h"
#include "tilepipe/driver.h"
#include "tilepipe/sim.h"

namespace {

using namespace tilepipe;

/// Runs kernel `name` functionally with 0 (in line), 1 and 5 value threads on the same
/// random inputs; expects identical outputs.
void expect_same_for_every_thread_count(const std::string& name,
                                        const std::map<std::string, std::string>& params) {
  const ChipConfig chip = load_chip_config("a3");
  const auto& k = kernels::find_kernel(name);
  driver::RunRequest req;
  req.params = driver::resolve_params(k, params);
  req.mode = sim::Mode::Timing;
  bool ran = false;
  req.on_lowered = [&](const lower::LoweredProgram& p) {
    sim::HostData in;
    if (k.inputs) {
      in = k.inputs(req.params, 7);  // valid indices where the kernel gathers
    } else {
      std::mt19937 rng(7);
      std::normal_distribution<double> d;
      for (const auto& g : p.gm) {
        auto& v = in[g.buffer->name];
        v.resize(static_cast<size_t>(g.buffer->elements()));
        for (auto& x : v) x = d(rng);
      }
    }
    std::vector<sim::HostData> outs;
    for (int threads : {0, 1, 5}) {
      sim::HostData io = in;
      sim::SimOptions o;
      o.value_threads = threads;
      sim::simulate(p, chip, &io, o);
      outs.push_back(std::move(io));
    }
    EXPECT_EQ(outs[0], outs[1]);
    EXPECT_EQ(outs[0], outs[2]);
    ran = true;
  };
  driver::run_kernel(k, req, chip);
  EXPECT_TRUE(ran);
}

TEST(Values, FaIsTheSameOnEveryThreadCount) {
  expect_same_for_every_thread_count("fa", {{"S", "512"}, {"H", "4"}});
}

// SFA's scalar unit reads its gather indices from UB while the values of earlier
// instructions are still queued: each read waits for the write of its own UB bytes.
TEST(Values, SfaIsTheSameOnEveryThreadCount) {
  expect_same_for_every_thread_count("sfa", {{"H", "16"}, {"topk", "256"}, {"KV_S", "1024"}});
}

TEST(Values, GemmIsTheSameOnEveryThreadCount) {
  expect_same_for_every_thread_count("gemm", {{"M", "512"}, {"N", "512"}, {"K", "256"}});
}

TEST(Values, WriteBackReturnsOnlyTheNamedTensors) {
  const ChipConfig chip = load_chip_config("a3");
  const auto& k = kernels::find_kernel("gemm");
  driver::RunRequest req;
  req.params = driver::resolve_params(k, {{"M", "256"}, {"N", "256"}, {"K", "128"}});
  req.mode = sim::Mode::Timing;
  bool ran = false;
  req.on_lowered = [&](const lower::LoweredProgram& p) {
    sim::HostData in;
    std::string out_name;
    for (const auto& g : p.gm) {
      in[g.buffer->name].assign(static_cast<size_t>(g.buffer->elements()), 0.5);
      out_name = g.buffer->name;  // the last GM tensor: the GEMM's output
    }
    sim::HostData all = in, some = in;
    sim::simulate(p, chip, &all);
    sim::SimOptions o;
    o.write_back = {out_name};
    sim::simulate(p, chip, &some, o);
    for (const auto& [name, vals] : some) {
      if (name == out_name) {
        EXPECT_EQ(vals, all.at(name));
        EXPECT_FALSE(vals.empty());
      } else {
        EXPECT_TRUE(vals.empty()) << name << " was converted back";
        EXPECT_FALSE(all.at(name).empty());
      }
    }
    ran = true;
  };
  driver::run_kernel(k, req, chip);
  EXPECT_TRUE(ran);
}

// A write's own bytes, for the same-value check: a strided access's rows only. The bytes
// between them belong to other writers (other AI cores' tiles of the same rows, applied on
// other workers meanwhile); counting them made a same-value write a race now and then.
TEST(Values, AccessBytesAreTheRowsNotTheSpan) {
  lower::AccessTemplate t;
  t.elem_bytes = 2;
  t.rank = 2;
  t.extent[0] = 3;  // three rows of 4 elements, 10 elements apart
  t.extent[1] = 4;
  t.stride[0] = 10;
  t.stride[1] = 1;
  t.num_elements = 12;
  t.span = 24;
  std::vector<uint8_t> mem(64);
  for (size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<uint8_t>(i);
  const sim::Access a{&t, mem.data(), 2};  // starts at element 2 (byte 4)
  const auto bytes = sim::access_bytes(a);
  ASSERT_EQ(bytes.size(), 24u);
  for (int r = 0; r < 3; ++r)
    for (int b = 0; b < 8; ++b)
      EXPECT_EQ(bytes[static_cast<size_t>(r * 8 + b)], 4 + r * 20 + b) << r << " " << b;
}

}  // namespace

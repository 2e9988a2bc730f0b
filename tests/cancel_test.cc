// SimOptions::cancel (Ctrl-C): a run whose flag goes up stops well within a second with an
// "interrupted" error, in timing and in functional mode (values on worker threads or in
// line); a flag that is already up stops the run before its first step; a flag that stays
// down changes nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "registry.h"
#include "tilepipe/driver.h"
#include "tilepipe/sim.h"

namespace {

using namespace tilepipe;
using Clock = std::chrono::steady_clock;

/// Calls `fn` with kernel `name`'s lowered program on the a3 chip (the driver's own run of
/// it is skipped).
void with_program(const std::string& name, const std::map<std::string, std::string>& params,
                  const std::function<void(const lower::LoweredProgram&, const ChipConfig&)>& fn) {
  const ChipConfig chip = load_chip_config("a3");
  const auto& k = kernels::find_kernel(name);
  driver::RunRequest req;
  req.params = driver::resolve_params(k, params);
  req.mode = sim::Mode::Timing;
  struct Done {};
  req.on_lowered = [&](const lower::LoweredProgram& p) {
    fn(p, chip);
    throw Done{};
  };
  EXPECT_THROW(driver::run_kernel(k, req, chip), Done);
}

/// The message of `e`'s "interrupted" diagnostic, or "" (with a test failure) if it has none.
std::string interrupted_message(const UserError& e) {
  for (const auto& d : e.diagnostics())
    if (d.kind == "interrupted") return d.message;
  ADD_FAILURE() << "no 'interrupted' diagnostic in:\n" << e.what();
  return "";
}

/// Runs `p` with `o` and raises its cancel flag 50 ms into the run; expects the
/// "interrupted" error and returns the seconds from the flag going up to the error.
double seconds_to_stop(const lower::LoweredProgram& p, const ChipConfig& chip, sim::SimOptions o) {
  std::atomic<bool> cancel = false;
  o.cancel = &cancel;
  Clock::time_point raised;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    raised = Clock::now();
    cancel.store(true);
  });
  sim::HostData io;
  Clock::time_point stopped;
  try {
    sim::simulate(p, chip, &io, o);
    stopped = Clock::now();
    ADD_FAILURE() << "the run finished instead of stopping: make it longer";
  } catch (const UserError& e) {
    stopped = Clock::now();
    EXPECT_NE(interrupted_message(e).find("simulation interrupted (Ctrl-C) at cycle "),
              std::string::npos)
        << e.what();
  }
  setter.join();  // `raised` is written before the flag goes up, read only after the join
  return std::chrono::duration<double>(stopped - raised).count();
}

// Long runs: several seconds (timing, every iteration simulated) and well over a minute
// (functional) when nothing stops them.
const std::map<std::string, std::string> kLongFa = {{"S", "32768"}, {"H", "12"}};
const std::map<std::string, std::string> kLongFaFunctional = {{"S", "2048"}, {"H", "12"}};

TEST(Cancel, TimingRunStopsWithinASecondOfTheFlag) {
  with_program("fa", kLongFa, [](const lower::LoweredProgram& p, const ChipConfig& chip) {
    sim::SimOptions o;
    o.mode = sim::Mode::Timing;
    o.fast_forward.enabled = false;
    EXPECT_LT(seconds_to_stop(p, chip, o), 1.0);
  });
}

TEST(Cancel, FastForwardedTimingRunStopsWithinASecondOfTheFlag) {
  with_program("fa", kLongFa, [](const lower::LoweredProgram& p, const ChipConfig& chip) {
    sim::SimOptions o;
    o.mode = sim::Mode::Timing;
    EXPECT_LT(seconds_to_stop(p, chip, o), 1.0);
  });
}

TEST(Cancel, FunctionalRunStopsWithinASecondOfTheFlag) {
  with_program("fa", kLongFaFunctional, [](const lower::LoweredProgram& p, const ChipConfig& chip) {
    for (int threads : {0, 2}) {
      SCOPED_TRACE(threads);
      sim::SimOptions o;
      o.mode = sim::Mode::Functional;
      o.value_threads = threads;
      EXPECT_LT(seconds_to_stop(p, chip, o), 1.0);
    }
  });
}

TEST(Cancel, AFlagAlreadyUpStopsTheRunBeforeItsFirstStep) {
  with_program("fa", kLongFa, [](const lower::LoweredProgram& p, const ChipConfig& chip) {
    const std::atomic<bool> cancel = true;
    sim::SimOptions o;
    o.mode = sim::Mode::Timing;
    o.fast_forward.enabled = false;
    o.cancel = &cancel;
    const auto start = Clock::now();
    try {
      sim::simulate(p, chip, nullptr, o);
      ADD_FAILURE() << "the run finished";
    } catch (const UserError& e) {
      EXPECT_EQ(interrupted_message(e), "simulation interrupted (Ctrl-C) at cycle 0");
    }
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
  });
}

TEST(Cancel, AFlagThatStaysDownChangesNothing) {
  with_program("gemm", {}, [](const lower::LoweredProgram& p, const ChipConfig& chip) {
    const std::atomic<bool> cancel = false;
    sim::SimOptions o;
    o.mode = sim::Mode::Timing;
    const double without = sim::simulate(p, chip, nullptr, o).cycles;
    o.cancel = &cancel;
    EXPECT_EQ(sim::simulate(p, chip, nullptr, o).cycles, without);
  });
}

}  // namespace

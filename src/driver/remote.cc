// Tuning elsewhere: a worker's evaluation of one config from a TuneJob (the same callbacks as
// a local search), and the registry of the cluster executor behind `tune --scheduler`.
#include <fmt/format.h>

#include <mutex>

#include "tilepipe/driver.h"

namespace tilepipe::driver {
namespace {

struct Schedulers {
  std::mutex mu;
  SchedulerConnector connect;
};

Schedulers& schedulers() {
  static Schedulers s;
  return s;
}

}  // namespace

tune::Simulated evaluate(const TuneJob& job, const tune::Point& p) {
  return evaluate(find_kernel(job.spec), job, p);
}

tune::Simulated evaluate(const KernelSource& k, const TuneJob& job, const tune::Point& p) {
  const ChipConfig chip = [&] {
    try {
      return parse_chip_config(job.chip_text, job.chip_origin);
    } catch (const ConfigError& e) {
      throw ParamError{e.message};
    }
  }();
  // The request cmd_tune (tools/advise_cmds.cc) makes: variant and parameters, timing mode.
  RunRequest base;
  base.variant = resolve_variant(k, job.variant);
  base.params = job.params;
  base.mode = sim::Mode::Timing;
  return tune_callbacks(k, base, chip, job.chip_text).simulate(p);
}

void register_scheduler(SchedulerConnector c) {
  auto& s = schedulers();
  std::lock_guard<std::mutex> lock(s.mu);
  s.connect = std::move(c);
}

tune::Executor connect_scheduler(const std::string& address, const TuneJob& job) {
  SchedulerConnector connect;
  {
    auto& s = schedulers();
    std::lock_guard<std::mutex> lock(s.mu);
    connect = s.connect;
  }
  if (!connect)
    throw ParamError{fmt::format(
        "--scheduler {}: this process cannot reach a cluster (the Dask executor is registered by "
        "the Python front end: run the tilepipe binary of a build with -DTILEPIPE_PYTHON=ON, "
        "which hands `tune --scheduler` to python3 -m tilepipe.cli)",
        address)};
  return connect(address, job);
}

}  // namespace tilepipe::driver

// Simulator throughput: functional GEMM (GFLOP/s of simulated math), functional
// elementwise (GB/s moved), and timing-mode GEMM 8192^3 and FA expert (simulated
// instructions/s and simulated cycles per wall second).
#include <benchmark/benchmark.h>

#include "harness.h"

namespace {

using namespace tilepipe;

kernels::RunReport run(const std::string& name, const std::map<std::string, std::string>& p,
                       sim::Mode mode, const std::string& variant = "") {
  static const ChipConfig chip = load_chip_config("a3");
  const auto& k = kernels::find_kernel(name);
  kernels::RunRequest req;
  req.params = kernels::resolve_params(k, p);
  req.mode = mode;
  req.variant = variant;
  return kernels::run_kernel(k, req, chip);
}

void BM_GemmFunctional(benchmark::State& st) {
  std::string n = std::to_string(st.range(0));
  for (auto _ : st) {
    auto r = run("gemm", {{"M", n}, {"N", n}, {"K", n}}, sim::Mode::Functional);
    benchmark::DoNotOptimize(r.sim.cycles);
  }
  double flops = 2.0 * st.range(0) * st.range(0) * st.range(0);
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9 * static_cast<double>(st.iterations()),
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GemmFunctional)->Arg(256)->Arg(512)->Unit(benchmark::kMillisecond);

void BM_ElementwiseFunctional(benchmark::State& st) {
  std::string n = std::to_string(st.range(0));
  for (auto _ : st) {
    auto r = run("elementwise", {{"N", n}}, sim::Mode::Functional);
    benchmark::DoNotOptimize(r.sim.cycles);
  }
  double bytes = 3.0 * 2 * static_cast<double>(st.range(0));  // X, Y in, Z out (fp16)
  st.counters["GB/s"] = benchmark::Counter(bytes * 1e-9 * static_cast<double>(st.iterations()),
                                           benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ElementwiseFunctional)->Arg(1 << 20)->Arg(1 << 22)->Unit(benchmark::kMillisecond);

// Timing-mode throughput of one kernel run per iteration.
void timing_throughput(benchmark::State& st, const std::string& kernel,
                       const std::map<std::string, std::string>& p,
                       const std::string& variant = "") {
  double instrs = 0, cycles = 0;
  for (auto _ : st) {
    auto r = run(kernel, p, sim::Mode::Timing, variant);
    instrs += static_cast<double>(r.sim.instructions);
    cycles += r.sim.cycles;
  }
  st.counters["sim_instr/s"] = benchmark::Counter(instrs, benchmark::Counter::kIsRate);
  st.counters["sim_cycles/s"] = benchmark::Counter(cycles, benchmark::Counter::kIsRate);
}

void BM_GemmTiming(benchmark::State& st) {
  std::string n = std::to_string(st.range(0));
  timing_throughput(st, "gemm", {{"M", n}, {"N", n}, {"K", n}});
}
BENCHMARK(BM_GemmTiming)->Arg(4096)->Arg(8192)->Unit(benchmark::kMillisecond)->Iterations(1);

// The FA expert kernel at the published shape (B=1, H=12, KV_H=1); S=131072 is the issue's
// 10 s target (run it with --benchmark_filter=FaExpert/131072).
void BM_FaExpertTiming(benchmark::State& st) {
  timing_throughput(st, "fa", {{"S", std::to_string(st.range(0))}}, "expert");
}
BENCHMARK(BM_FaExpertTiming)
    ->Arg(8192)
    ->Arg(32768)
    ->Arg(131072)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

// Fast-forward vs exact at large shapes (err_pct, wall times). Exact-simulation speed per kernel
// family (issued and pipe instructions per second). Simulator throughput: functional
// GEMM (GFLOP/s of simulated math), functional elementwise (GB/s moved), and timing-mode GEMM
// 8192^3 and FA expert (simulated instructions/s and simulated cycles per wall second; with and
// without fast-forward).
#include <benchmark/benchmark.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "differential.h"
#include "registry.h"
#include "tilepipe/driver.h"

namespace {

using namespace tilepipe;

const ChipConfig& chip() {
  static const ChipConfig c = load_chip_config("a3");
  return c;
}

driver::RunReport run(const std::string& name, const std::map<std::string, std::string>& p,
                      sim::Mode mode, const std::string& variant = "", bool fast_forward = true) {
  const auto& k = kernels::find_kernel(name);
  driver::RunRequest req;
  req.params = driver::resolve_params(k, p);
  req.mode = mode;
  req.variant = variant;
  req.fast_forward.enabled = fast_forward;
  return driver::run_kernel(k, req, chip());
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

// The race detector's cost: a functional run with races off (arg 0) and on (arg 1), on
// large vector tiles (elementwise, softmax: thousands of shadow blocks per access) and on
// scalar index reads (sfa: many small accesses).
void BM_RaceDetector(benchmark::State& st, const std::string& kernel, const std::string& variant,
                     const std::map<std::string, std::string>& p) {
  const auto& k = kernels::find_kernel(kernel);
  driver::RunRequest req;
  req.params = driver::resolve_params(k, p);
  req.mode = sim::Mode::Functional;
  req.variant = variant;
  req.detect_races = st.range(0) != 0;
  for (auto _ : st) {
    auto r = driver::run_kernel(k, req, chip());
    benchmark::DoNotOptimize(r.sim.cycles);
  }
}
BENCHMARK_CAPTURE(BM_RaceDetector, elementwise, "elementwise", "add", {{"N", "4194304"}})
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RaceDetector, softmax, "softmax", "tile", {{"R", "4096"}, {"C", "1024"}})
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RaceDetector, sfa_pa, "sfa", "pa", {})
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);

// Timing-mode throughput of one kernel run per iteration.
void timing_throughput(benchmark::State& st, const std::string& kernel,
                       const std::map<std::string, std::string>& p, const std::string& variant = "",
                       bool fast_forward = true) {
  double instrs = 0, cycles = 0, skipped = 0;
  for (auto _ : st) {
    auto r = run(kernel, p, sim::Mode::Timing, variant, fast_forward);
    instrs += static_cast<double>(r.sim.instructions);
    cycles += r.sim.cycles;
    skipped += static_cast<double>(r.sim.fast_forward.iterations);
  }
  st.counters["sim_cycles"] = cycles / static_cast<double>(st.iterations());
  st.counters["skipped_iterations"] = skipped / static_cast<double>(st.iterations());
  st.counters["sim_instr/s"] = benchmark::Counter(instrs, benchmark::Counter::kIsRate);
  st.counters["sim_cycles/s"] = benchmark::Counter(cycles, benchmark::Counter::kIsRate);
}

void BM_GemmTiming(benchmark::State& st) {
  std::string n = std::to_string(st.range(0));
  timing_throughput(st, "gemm", {{"M", n}, {"N", n}, {"K", n}});
}
BENCHMARK(BM_GemmTiming)->Arg(4096)->Arg(8192)->Unit(benchmark::kMillisecond)->Iterations(1);

// The FA expert kernel at the published shape (B=1, H=12, KV_H=1); S=131072 is the issue's
// 10 s target (run it with --benchmark_filter=FaExpert). Second argument: fast-forward on
// (1, the default of timing runs) or off (0, every iteration simulated); the sim_cycles
// counters of a pair give fast-forward's error.
void BM_FaExpertTiming(benchmark::State& st) {
  timing_throughput(st, "fa", {{"S", std::to_string(st.range(0))}}, "expert", st.range(1) != 0);
}
BENCHMARK(BM_FaExpertTiming)
    ->Args({8192, 1})
    ->Args({32768, 1})
    ->Args({32768, 0})
    ->Args({131072, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// An automatic variant (dataflow only, everything else from the passes) against a
// hand-written one, in one run: counters cycles_<hand>, cycles_auto and speed =
// cycles_<hand> / cycles_auto (issue 8 asks >= 0.95).
void auto_vs(benchmark::State& st, const std::string& kernel,
             const std::map<std::string, std::string>& p, const std::string& hand) {
  double h = 0, a = 0;
  for (auto _ : st) {
    h = run(kernel, p, sim::Mode::Timing, hand, true).sim.cycles;
    a = run(kernel, p, sim::Mode::Timing, "auto", true).sim.cycles;
  }
  st.counters["cycles_" + hand] = h;
  st.counters["cycles_auto"] = a;
  st.counters["speed"] = h / a;
}

// FA against the expert kernel, both at their defaults (num_stages 14, cross_interval 2).
void BM_FaAutoVsExpert(benchmark::State& st) {
  auto_vs(st, "fa", {{"S", std::to_string(st.range(0))}}, "expert");
}
BENCHMARK(BM_FaAutoVsExpert)->Arg(8192)->Arg(32768)->Unit(benchmark::kMillisecond)->Iterations(1);

// SFA against the fastest hand-written version (no_cv_pipeline) at the published shape.
void BM_SfaAutoVsBest(benchmark::State& st) {
  auto_vs(st, "sfa", {{"KV_S", std::to_string(st.range(0))}}, "no_cv_pipeline");
}
BENCHMARK(BM_SfaAutoVsBest)
    ->Arg(2560)
    ->Arg(6400)
    ->Arg(48000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// Exact simulation speed (fast-forward off: what profiles, traces, race checks and every
// unsteady run cost), per kernel family at a shape of a few seconds. Rates are per CPU second
// of the benchmark's thread (Google Benchmark's kIsRate; a timing run simulates on that one
// thread), so a machine shared with other jobs does not lower them. Counters: issued/s =
// instructions the scalar units issued per second (every instruction once);
// pipe_instr/s = the sum over all pipes' instruction counts, the scalar unit included
// (the measure issue 17 quotes: FA expert S=16K had 41.7 M in 3.1 s).
void BM_ExactThroughput(benchmark::State& st, const std::string& kernel, const std::string& variant,
                        std::map<std::string, std::string> p) {
  double issued = 0, pipe = 0;
  for (auto _ : st) {
    auto r = run(kernel, p, sim::Mode::Timing, variant, false);
    for (const auto& c : r.sim.cores)
      for (int k = 0; k < ir::kNumPipes; ++k) {
        const double n = static_cast<double>(c.pipes[static_cast<size_t>(k)].instructions);
        pipe += n;
        if (static_cast<ir::Pipe>(k) == ir::Pipe::S) issued += n;
      }
  }
  st.counters["issued/s"] = benchmark::Counter(issued, benchmark::Counter::kIsRate);
  st.counters["pipe_instr/s"] = benchmark::Counter(pipe, benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_ExactThroughput, fa_expert_16k, "fa", "expert", {{"S", "16384"}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ExactThroughput, fa_expert_32k, "fa", "expert", {{"S", "32768"}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ExactThroughput, sfa_pa, "sfa", "pa", {{"KV_S", "6400"}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ExactThroughput, gemm_4096, "gemm", "expert",
                  {{"M", "4096"}, {"N", "4096"}, {"K", "4096"}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ExactThroughput, softmax, "softmax", "tile", {{"R", "262144"}, {"C", "1024"}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_ExactThroughput, elementwise, "elementwise", "add", {{"N", "67108864"}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// Fast-forward against exact simulation at the large shapes users run (the CI test covers
// small and medium ones): relative cycle error and both wall times, per kernel and shape.
void BM_FastForwardVsExact(benchmark::State& st, const std::string& kernel,
                           const std::string& variant) {
  const auto& k = kernels::find_kernel(kernel);
  const auto shapes = kernels::differential_shapes(kernel, true);
  const auto& p = shapes[static_cast<size_t>(st.range(0))];
  driver::Differential d;
  for (auto _ : st) d = driver::run_differential(k, variant, p, chip());
  st.SetLabel(fmt::format("{}", fmt::join(p, " ")));
  st.counters["err_pct"] = 100 * d.cycles_err;
  st.counters["counters_equal"] = d.counters.empty();
  st.counters["jumps"] = d.fast.sim.fast_forward.jumps;
  st.counters["ff_wall_s"] = d.fast.sim_wall_s;
  st.counters["exact_wall_s"] = d.exact.sim_wall_s;
}
BENCHMARK_CAPTURE(BM_FastForwardVsExact, gemm, "gemm", "expert")
    ->DenseRange(0, 2)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_FastForwardVsExact, softmax, "softmax", "tile")
    ->DenseRange(0, 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_FastForwardVsExact, elementwise, "elementwise", "add")
    ->DenseRange(0, 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_FastForwardVsExact, fa_expert, "fa", "expert")
    ->DenseRange(0, 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_FastForwardVsExact, fa_auto, "fa", "auto")
    ->DenseRange(0, 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_FastForwardVsExact, sfa_pa, "sfa", "pa")
    ->DenseRange(0, 0)
    ->Unit(benchmark::kSecond)
    ->Iterations(1);

}  // namespace

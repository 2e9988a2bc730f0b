// A kernel of its own, outside the tilepipe tree: README's vector add written in the DSL,
// described as a driver::KernelSource (no registry), then run (functional, checked against a
// C++ reference; timing), profiled (evidence + verified advice) and tuned over its tile size
// through the installed library. Prints one line per step; exits non-zero on any failure.
#include <cstdio>
#include <exception>
#include <string>

#include "tilepipe/chip.h"
#include "tilepipe/cli.h"
#include "tilepipe/driver.h"
#include "tilepipe/kernels/registry.h"
#include "tilepipe/lang.h"

using namespace tilepipe;
using namespace tilepipe::lang;

namespace {

// Z = X + Y on the Vector cores, one `tile`-element tile per step, single-buffered.
ir::Program vadd(const driver::Params& p, const std::string&) {
  const int64_t n = p.at("N"), T = p.at("tile");
  KernelBuilder k("vadd", /*block_num=*/24);
  auto X = k.input("X", {n}, f16), Y = k.input("Y", {n}, f16);
  auto Z = k.output("Z", {n}, f16);
  auto [cid, vid] = k.launch();
  scope_v([&] {
    auto x = alloc_ub("x", {T}, f16), y = alloc_ub("y", {T}, f16);
    Ex w = cid * 2 + vid;  // 48 workers
    serial(w, n / T, 48, [&](Ex t) {
      copy(X(slice(t * T, T)), x);  // MTE2
      copy(Y(slice(t * T, T)), y);
      set_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      tile::add(x, x, y);  // V
      set_flag(Pipe::V, Pipe::MTE3, 0);
      wait_flag(Pipe::V, Pipe::MTE3, 0);
      copy(x, Z(slice(t * T, T)));  // MTE3
      set_flag(Pipe::MTE3, Pipe::MTE2, 0);
      wait_flag(Pipe::MTE3, Pipe::MTE2, 0);
    });
  });
  return k.finish();
}

driver::KernelSource vadd_kernel() {
  driver::KernelSource k;
  k.name = "vadd";
  k.summary = "Z = X + Y (outside project)";
  k.variants = {"default"};
  k.params = {{"N", 1 << 18, 16, 1 << 26, "elements"},
              {"tile", 4096, 16, 16384, "elements per tile"}};
  k.validate = [](const driver::Params& p) -> std::string {
    return p.at("N") % p.at("tile") == 0 ? "" : "tile must divide N";
  };
  k.build = vadd;
  k.inputs = [](const driver::Params& p, uint64_t seed) -> sim::HostData {
    return {{"X", driver::random_tensor(p.at("N"), f16, seed)},
            {"Y", driver::random_tensor(p.at("N"), f16, seed + 1)}};
  };
  k.reference = [](const driver::Params&, const std::string&, const sim::HostData& in) {
    const auto &x = in.at("X"), &y = in.at("Y");
    std::vector<double> z(x.size());
    for (size_t i = 0; i < x.size(); ++i) z[i] = x[i] + y[i];
    return sim::HostData{{"Z", z}};
  };
  k.tol = {1e-3, 1e-6};
  return k;
}

}  // namespace

int main(int argc, char** argv) try {
  driver::register_kernel(vadd_kernel());
  if (argc > 1) {
    kernels::register_all();
    return cli::main(argc, argv);
  }
  const driver::KernelSource k = driver::find_kernel("vadd");
  ChipConfig chip = load_chip_config("a3");  // found in <prefix>/share/tilepipe/configs
  std::printf("configs %s\n", config_dir().c_str());

  // run: functional (values checked against the reference), then timing.
  driver::RunRequest req;
  req.params = driver::resolve_params(k, {});
  req.variant = "default";
  driver::RunReport f = driver::run_kernel(k, req, chip);
  std::printf("functional %s (max abs err %g)\n", f.correct ? "correct" : "WRONG", f.max_abs_err);
  if (!f.checked || !f.correct) return 1;
  req.mode = sim::Mode::Timing;
  driver::RunReport t = driver::run_kernel(k, req, chip);
  std::printf("cycles %.0f  time %.2f us on %s\n", t.sim.cycles, t.sim.cycles * chip.us_per_cycle(),
              chip.name.c_str());

  // profile: the advice rules shipped in the configs directory, what-if verified.
  driver::ProfileReport prof = driver::profile_kernel(k, req, chip, prof::load_rules());
  std::printf("profile %.0f cycles, %zu advice item(s)\n", prof.run.sim.cycles, prof.advice.size());

  // tune: the tile size, no cache.
  tune::Options o;
  o.space = {{"tile", {1024, 2048, 4096, 8192}}};
  o.us_per_cycle = chip.us_per_cycle();
  tune::Result r =
      tune::run({{"N", 1 << 18}, {"tile", 4096}}, o, driver::tune_callbacks(k, req, chip, "a3"));
  if (!r.best_time_us) return 1;
  std::printf("tune best tile=%lld %.2f us (%d simulated)\n",
              static_cast<long long>(r.best.at("tile")), *r.best_time_us, r.simulated);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "vadd: %s\n", e.what());
  return 1;
} catch (const driver::ParamError& e) {
  std::fprintf(stderr, "vadd: %s\n", e.message.c_str());
  return 1;
}

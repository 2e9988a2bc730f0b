// Microbenchmarks: each variant repeats one kind of instruction `ops` times on one AI core,
// so the slope of its time over `ops` isolates one group of chip parameters (docs/fidelity.md,
// "Microbenchmarks"). Run on a board at two values of `ops`, the difference divided by the
// difference in `ops` is the measured per-instruction cost that decides the parameter; the
// simulated slope follows the formula of docs/simulator.md (tests/ubench_test.cc).
#include <fmt/format.h>

#include <algorithm>

#include "registry.h"
#include "tilepipe/lang.h"

namespace tilepipe::kernels {
namespace {

using namespace lang;

constexpr int64_t kSlots = 8;  // independent destinations / DMA buffers in flight

// The vector variants: a [elems] f32 tile per operand (256 elements = one 16 x 16 fp32
// tile, four repeats) on AIV 0.
void vector_body(const std::string& variant, int64_t ops, int64_t elems) {
  auto a = alloc_ub("a", {elems}, f32);
  auto b = alloc_ub("b", {elems}, f32);
  auto c = alloc_ub("c", {kSlots, elems}, f32);
  auto r = alloc_ub("r", {kSlots, 8}, f32);
  tile::fill(a, 1.0);
  tile::fill(b, 0.5);
  serial(ops, [&](Ex i) {
    if (variant == "vec_chain")  // each add reads the previous one's result
      tile::add(a, a, b);
    else if (variant == "vec_exp_chain")
      tile::exp(a, a);
    else if (variant == "vec_indep")  // no add reads another's result
      tile::add(c[i % kSlots], a, b);
    else  // reduce: independent row sums of the whole tile
      reduce_sum(a, r(i % kSlots, slice(0, 1)));
  });
}

ir::Program build(const Params& p, const std::string& variant) {
  const int64_t ops = p.at("ops"), elems = p.at("elems"), bytes = p.at("bytes");
  const int64_t pitch = p.at("pitch"), n = 16 * p.at("n16"), k = 16 * p.at("k16");
  const int64_t nrows = p.at("rows"), row_elems = bytes / 2, pitch_elems = pitch / 2;
  const bool shared = variant == "l2_shared";
  KernelBuilder kb("ubench", shared ? p.at("cores") : 1);
  // l2_shared reads `rows` fresh rows per op; the others cycle through kSlots buffers' rows.
  auto G = kb.input("G", {(shared ? ops : kSlots) * nrows, pitch_elems}, f16);
  auto O = kb.output("O", {kSlots * nrows, pitch_elems}, f16);
  auto idx = kb.input("idx", {ops + 1}, i32);
  auto [cid, vid] = kb.launch();
  (void)cid;
  if (variant == "cube") {  // ops accumulating mmads of [128 x K] x [K x N]
    scope_c([&] {
      auto a0 = alloc_L0A("a0", {128, k}, f16);
      auto b0 = alloc_L0B("b0", {k, n}, f16);
      auto c0 = alloc_L0C("c0", {128, n}, f32);
      mma(a0, b0, c0, /*init=*/true);
      serial(ops, [&](Ex) { mma(a0, b0, c0, /*init=*/false); });
    });
  } else if (variant == "cross_flag") {  // ops round trips AIC -> both AIVs -> AIC
    scope_c([&] {
      serial(ops, [&](Ex) {
        set_cross_flag(Pipe::S, 0);
        wait_cross_flag(1);
      });
    });
    scope_v([&] {
      serial(ops, [&](Ex) {
        wait_cross_flag(0);
        set_cross_flag(Pipe::S, 1);
      });
    });
  } else {
    scope_v([&] {
      if_(vid == 0, [&] {
        if (variant == "mte2" || variant == "mte3") {
          // ops copies of `rows` bursts of `bytes` each, `pitch` bytes apart in GM
          auto t = alloc_ub("t", {kSlots, nrows, row_elems}, f16);
          serial(ops, [&](Ex i) {
            Ex s = i % kSlots;
            auto gm = [&](const Tensor& x) {
              return x(rows(s * nrows, nrows), slice(0, row_elems));
            };
            if (variant == "mte2")
              copy(gm(G), t[s]);
            else
              copy(t[s], gm(O));
          });
        } else if (shared) {
          // ops dependent reads of rows no core read before, the same rows on every core at
          // once: one core's miss fills them from HBM, the others hit lines still in flight.
          // V reads each tile before the next copy overwrites it (hand-synchronised, as every
          // built-in kernel), so every read's latency is on the chain.
          auto t = alloc_ub("t", {nrows, row_elems}, f16);
          auto u = alloc_ub("u", {nrows, row_elems}, f16);
          serial(ops, [&](Ex i) {
            copy(G(rows(i * nrows, nrows), slice(0, row_elems)), t);
            set_flag(Pipe::MTE2, Pipe::V, 0);
            wait_flag(Pipe::MTE2, Pipe::V, 0);
            tile::add(u, t, t);
            set_flag(Pipe::V, Pipe::MTE2, 0);
            wait_flag(Pipe::V, Pipe::MTE2, 0);
          });
        } else if (variant == "scalar_gm") {  // ops dependent scalar reads of GM (index chase)
          // Hand-synchronised (nothing to order): automatic sync cannot index by a variable
          // assigned in a loop.
          set_flag(Pipe::MTE2, Pipe::V, 0);
          wait_flag(Pipe::MTE2, Pipe::V, 0);
          Ex j = let_("j", Ex(0));
          serial(ops, [&](Ex) { assign(j, load(idx, {j})); });
        } else {
          vector_body(variant, ops, elems);
        }
      });
    });
  }
  return kb.finish();
}

std::string validate(const Params& p) {
  if (p.at("elems") % 64 != 0)
    return fmt::format("elems={} must be a multiple of 64 (one 256-byte f32 repeat)",
                       p.at("elems"));
  if (p.at("bytes") % 32 != 0 || p.at("pitch") % 32 != 0)
    return fmt::format("bytes={} and pitch={} must be multiples of 32 (UB blocks)", p.at("bytes"),
                       p.at("pitch"));
  if (p.at("pitch") < p.at("bytes"))
    return fmt::format("pitch={} must be >= bytes={} (the bursts may not overlap)", p.at("pitch"),
                       p.at("bytes"));
  if (kSlots * p.at("rows") * p.at("bytes") > 196352)
    return fmt::format("{} slots x rows={} x bytes={} must fit the 196352-byte UB", kSlots,
                       p.at("rows"), p.at("bytes"));
  return "";
}

sim::HostData inputs(const Params& p, uint64_t) {
  // idx[j] = j + 1: the index chase walks the vector one element per read.
  std::vector<double> idx(static_cast<size_t>(p.at("ops") + 1));
  for (size_t j = 0; j < idx.size(); ++j)
    idx[j] = static_cast<double>(std::min(j + 1, idx.size() - 1));
  return {{"idx", idx}};
}

}  // namespace

KernelSource ubench_kernel() {
  return KernelSource{
      "ubench",
      "microbenchmarks: one instruction kind repeated `ops` times on one AI core; the slope "
      "over ops isolates one chip parameter (docs/fidelity.md, Microbenchmarks)",
      {"vec_chain", "vec_indep", "vec_exp_chain", "reduce", "mte2", "mte3", "cube", "cross_flag",
       "scalar_gm", "l2_shared"},
      {{"ops", 256, 1, 1 << 20, "instructions of the measured kind"},
       {"elems", 256, 64, 8192, "f32 elements per vector operand (256: a 16 x 16 tile)"},
       {"rows", 4, 1, 256, "bursts per DMA (mte2, mte3)"},
       {"bytes", 512, 32, 65536, "bytes per burst (mte2, mte3), multiple of 32"},
       {"pitch", 512, 32, 1 << 20, "GM bytes from one burst's start to the next (>= bytes)"},
       {"n16", 2, 1, 8, "mmad N / 16 (cube; 2: the narrow GEMM's N=32)"},
       {"k16", 16, 1, 16, "mmad K / 16 (cube)"},
       {"cores", 4, 1, 24, "AI cores reading the same rows at once (l2_shared)"}},
      validate,
      build,
      inputs,
      // Timing instruments: nothing to compare (a functional run checks races only).
      [](const Params&, const std::string&, const sim::HostData&) { return sim::HostData{}; },
  };
}

}  // namespace tilepipe::kernels

// Tiled GEMM on the Cube cores: GM -> L1 (MTE2) -> L0A/L0B (MTE1) -> mmad (M) -> L0C -> GM
// (FIX). Fixed-core launch: each of block_num cores walks its own list of output tiles.
// With buffers=2 the L1 and L0 stages are double-buffered, so MTE2, MTE1 and M overlap.
#include <fmt/format.h>

#include "registry.h"
#include "tilepipe/lang.h"

namespace tilepipe::kernels {
namespace {

using namespace lang;

/// Largest tile edge <= cap that divides n (n is a multiple of 16).
int64_t tile_edge(int64_t n, int64_t cap) {
  for (int64_t t = cap; t > 16; t /= 2)
    if (n % t == 0) return t;
  return 16;
}

ir::Program build(const Params& p, const std::string&) {
  const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K"), nb = p.at("buffers");
  const int64_t bm = tile_edge(M, 128), bn = tile_edge(N, 128), bk = tile_edge(K, 64);
  const int64_t tiles_n = N / bn, tasks = (M / bm) * tiles_n, ksteps = K / bk;
  const DType out_t = p.at("out_f16") ? f16 : f32;

  KernelBuilder kb("gemm", p.at("block_num"));
  auto A = kb.input("A", {M, K}, f16);
  auto B = kb.input("B", {K, N}, f16);
  auto C = kb.output("C", {M, N}, out_t);
  auto [cid, vid] = kb.launch();
  const int64_t cores = p.at("block_num");

  scope_c([&] {
    auto a_l1 = alloc_L1("a_l1", {nb, bm, bk}, f16);
    auto b_l1 = alloc_L1("b_l1", {nb, bk, bn}, f16);
    auto a_l0 = alloc_L0A("a_l0", {nb, bm, bk}, f16);
    auto b_l0 = alloc_L0B("b_l0", {nb, bk, bn}, f16);
    auto c_l0 = alloc_L0C("c_l0", {bm, bn}, f32);
    // Credits: every L1 / L0 slot starts free, and so does L0C.
    for (int64_t s = 0; s < nb; ++s) {
      set_flag(Pipe::MTE1, Pipe::MTE2, s);
      set_flag(Pipe::M, Pipe::MTE1, s);
    }
    set_flag(Pipe::FIX, Pipe::M, 0);
    serial(cid, tasks, cores, [&](Ex t) {
      Ex mi = t / tiles_n, ni = t % tiles_n;
      serial(ksteps, [&](Ex k) {
        Ex s = k % nb;
        wait_flag(Pipe::MTE1, Pipe::MTE2, s);
        copy(A(rows(mi * bm, bm), slice(k * bk, bk)), a_l1[s]);
        copy(B(rows(k * bk, bk), slice(ni * bn, bn)), b_l1[s]);
        set_flag(Pipe::MTE2, Pipe::MTE1, s);

        wait_flag(Pipe::MTE2, Pipe::MTE1, s);
        wait_flag(Pipe::M, Pipe::MTE1, s);
        copy(a_l1[s], a_l0[s]);
        copy(b_l1[s], b_l0[s]);
        set_flag(Pipe::MTE1, Pipe::MTE2, s);
        set_flag(Pipe::MTE1, Pipe::M, s);

        wait_flag(Pipe::MTE1, Pipe::M, s);
        if_else(
            k == 0,
            [&] {
              wait_flag(Pipe::FIX, Pipe::M, 0);
              mma(a_l0[s], b_l0[s], c_l0, /*init=*/true);
            },
            [&] { mma(a_l0[s], b_l0[s], c_l0, /*init=*/false); });
        set_flag(Pipe::M, Pipe::MTE1, s);
      });
      set_flag(Pipe::M, Pipe::FIX, 0);
      wait_flag(Pipe::M, Pipe::FIX, 0);
      copy(c_l0, C(rows(mi * bm, bm), slice(ni * bn, bn)));
      set_flag(Pipe::FIX, Pipe::M, 0);
    });
    for (int64_t s = 0; s < nb; ++s) {
      wait_flag(Pipe::MTE1, Pipe::MTE2, s);
      wait_flag(Pipe::M, Pipe::MTE1, s);
    }
    wait_flag(Pipe::FIX, Pipe::M, 0);
  });
  (void)vid;
  return kb.finish();
}

sim::HostData inputs(const Params& p, uint64_t seed) {
  return {{"A", random_tensor(p.at("M") * p.at("K"), f16, seed)},
          {"B", random_tensor(p.at("K") * p.at("N"), f16, seed + 1)}};
}

sim::HostData reference(const Params& p, const std::string&, const sim::HostData& in) {
  const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K");
  const auto& a = in.at("A");
  const auto& b = in.at("B");
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      double av = a[static_cast<size_t>(i * K + k)];
      for (int64_t j = 0; j < N; ++j)
        c[static_cast<size_t>(i * N + j)] += av * b[static_cast<size_t>(k * N + j)];
    }
  return {{"C", c}};
}

std::string validate(const Params& p) {
  for (const char* d : {"M", "N", "K"})
    if (p.at(d) % 16 != 0)
      return fmt::format("{}={} must be a multiple of 16 (cube fractal); pad the matrix", d,
                         p.at(d));
  return "";
}

}  // namespace

KernelDef gemm_kernel() {
  return KernelDef{
      "gemm",
      "C = A x B, fp16 in, fp32 accumulate, tiled through L1 and L0 on the Cube cores",
      {"expert"},
      {{"M", 256, 16, 1 << 16, "rows of A and C, multiple of 16"},
       {"N", 256, 16, 1 << 16, "columns of B and C, multiple of 16"},
       {"K", 512, 16, 1 << 16, "columns of A / rows of B, multiple of 16"},
       {"buffers", 2, 1, 2, "L1/L0 buffers per operand (2 = double buffering)"},
       {"out_f16", 0, 0, 1, "1: C is fp16 (cast on the FIX copy out); 0: fp32"},
       {"block_num", 24, 1, 4096, "cores launched (24 = one per AI core)"}},
      validate,
      build,
      inputs,
      reference,
      // fp32 accumulation of fp16 products: differences come only from summation order
      // (and the fp16 rounding of C when out_f16=1).
      {1e-3, 1e-3},
  };
}

}  // namespace tilepipe::kernels

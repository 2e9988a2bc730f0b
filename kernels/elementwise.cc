// Elementwise Z = X op Y on the Vector cores with 1, 2 or 3 UB buffers per operand: with
// one buffer MTE2 -> V -> MTE3 run back to back; with more, the load of tile i+1 overlaps
// the compute of tile i and the store of tile i-1 (the seed's multi-buffering example).
#include <fmt/format.h>

#include "registry.h"
#include "tilepipe/lang.h"

namespace tilepipe::kernels {
namespace {

using namespace lang;

// UB bytes the kernel may use (A2 and A3 alike): X, Y and Z tiles of f16, `buffers` each,
// so tile x buffers may not pass this many elements.
constexpr int64_t kUbBytes = 196352;
constexpr int64_t kMaxTileElements = kUbBytes / (3 * 2) / 16 * 16;  // 32720

ir::Program build(const Params& p, const std::string& variant) {
  const int64_t n = p.at("N"), T = p.at("tile"), nb = p.at("buffers"), tiles = n / T;
  const int64_t workers = p.at("block_num") * 2;
  KernelBuilder kb("elementwise", p.at("block_num"));
  auto X = kb.input("X", {n}, f16);
  auto Y = kb.input("Y", {n}, f16);
  auto Z = kb.output("Z", {n}, f16);
  auto [cid, vid] = kb.launch();

  scope_v([&] {
    auto xb = alloc_ub("xb", {nb, T}, f16);
    auto yb = alloc_ub("yb", {nb, T}, f16);
    auto zb = alloc_ub("zb", {nb, T}, f16);
    Ex w = cid * 2 + vid;
    for (int64_t s = 0; s < nb; ++s) {
      set_flag(Pipe::V, Pipe::MTE2, s);
      set_flag(Pipe::MTE3, Pipe::V, s);
    }
    // This worker's tiles: w, w + workers, ...; j counts them to pick the buffer slot.
    serial((tiles - w + workers - 1) / workers, [&](Ex j) {
      Ex i = w + j * workers, s = j % nb;
      wait_flag(Pipe::V, Pipe::MTE2, s);
      copy(X(slice(i * T, T)), xb[s]);
      copy(Y(slice(i * T, T)), yb[s]);
      set_flag(Pipe::MTE2, Pipe::V, s);
      wait_flag(Pipe::MTE2, Pipe::V, s);
      wait_flag(Pipe::MTE3, Pipe::V, s);
      if (variant == "mul")
        tile::mul(zb[s], xb[s], yb[s]);
      else
        tile::add(zb[s], xb[s], yb[s]);
      set_flag(Pipe::V, Pipe::MTE2, s);
      set_flag(Pipe::V, Pipe::MTE3, s);
      wait_flag(Pipe::V, Pipe::MTE3, s);
      copy(zb[s], Z(slice(i * T, T)));
      set_flag(Pipe::MTE3, Pipe::V, s);
    });
    for (int64_t s = 0; s < nb; ++s) {
      wait_flag(Pipe::V, Pipe::MTE2, s);
      wait_flag(Pipe::MTE3, Pipe::V, s);
    }
  });
  return kb.finish();
}

sim::HostData inputs(const Params& p, uint64_t seed) {
  return {{"X", random_tensor(p.at("N"), f16, seed)},
          {"Y", random_tensor(p.at("N"), f16, seed + 1)}};
}

sim::HostData reference(const Params&, const std::string& variant, const sim::HostData& in) {
  const auto& x = in.at("X");
  const auto& y = in.at("Y");
  std::vector<double> z(x.size());
  for (size_t i = 0; i < x.size(); ++i) z[i] = variant == "mul" ? x[i] * y[i] : x[i] + y[i];
  return {{"Z", z}};
}

}  // namespace

KernelSource elementwise_kernel() {
  return KernelSource{
      "elementwise",
      "Z = X + Y (or X * Y) on fp16 vectors with 1-3 UB buffers (multi-buffering demo)",
      {"add", "mul"},
      {{"N", 1 << 20, 16, int64_t{1} << 30, "elements"},
       {"tile", 4096, 16, kMaxTileElements,
        "elements per tile (divides N, multiple of 16; tile x buffers <= 32720 to fit the UB)"},
       {"buffers", 2, 1, 3, "UB buffers per operand"},
       {"block_num", 24, 1, 4096, "AI cores launched (each runs 2 AIVs)"}},
      [](const Params& p) -> std::string {
        if (p.at("tile") % 16 != 0)
          return fmt::format("tile={} must be a multiple of 16 (32-byte UB blocks)", p.at("tile"));
        if (p.at("tile") * p.at("buffers") > kMaxTileElements)
          return fmt::format(
              "tile={} x buffers={} must be <= {}: three operands x buffers tiles of f16 fill "
              "the {}-byte UB; use a smaller tile or fewer buffers",
              p.at("tile"), p.at("buffers"), kMaxTileElements, kUbBytes);
        if (p.at("N") % p.at("tile") != 0)
          return fmt::format("tile={} must divide N={}", p.at("tile"), p.at("N"));
        return "";
      },
      build,
      inputs,
      reference,
      // One fp16 rounding of an exact f32 result: half an ulp, 2^-11 relative.
      {1e-3, 1e-6},
  };
}

}  // namespace tilepipe::kernels

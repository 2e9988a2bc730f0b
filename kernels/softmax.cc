// Row-wise softmax on the Vector cores: each AIV takes tiles of `rows` rows, loads them
// (MTE2), computes max / exp / sum / divide in f32 with broadcast + tile ops (V) and
// stores the f16 result (MTE3).
#include <fmt/format.h>

#include <cmath>

#include "registry.h"
#include "tilepipe/lang.h"

namespace tilepipe::kernels {
namespace {

using namespace lang;

// UB bytes the kernel may use (A2 and A3 alike) and what one row of a tile takes: f16 in,
// f32 work, f32 broadcast scratch, f16 out; plus the two f32 [rows, 1] max / sum columns
// (one 32-byte block each for up to 8 rows).
constexpr int64_t kUbBytes = 196352;
constexpr int64_t kBytesPerElement = 2 + 4 + 4 + 2;
constexpr int64_t kMaxC = (kUbBytes - 2 * 32) / kBytesPerElement / 16 * 16;  // 16352

/// Rows per tile: the most (8, 4, 2 or 1) that divide R and fit the UB at C columns.
int64_t row_tile(int64_t R, int64_t C) {
  for (int64_t t = 8; t > 1; t /= 2)
    if (R % t == 0 && kBytesPerElement * t * C + 2 * 32 <= kUbBytes) return t;
  return 1;
}

ir::Program build(const Params& p, const std::string&) {
  const int64_t R = p.at("R"), C = p.at("C"), tr = row_tile(R, C), tiles = R / tr;
  const int64_t workers = p.at("block_num") * 2;
  KernelBuilder kb("softmax", p.at("block_num"));
  auto X = kb.input("X", {R, C}, f16);
  auto Y = kb.output("Y", {R, C}, f16);
  auto [cid, vid] = kb.launch();

  scope_v([&] {
    auto xin = alloc_ub("xin", {tr, C}, f16);
    auto x = alloc_ub("x", {tr, C}, f32);
    auto buf = alloc_ub("buf", {tr, C}, f32);
    auto m = alloc_ub("m", {tr, 1}, f32);
    auto s = alloc_ub("s", {tr, 1}, f32);
    auto yout = alloc_ub("yout", {tr, C}, f16);
    Ex w = cid * 2 + vid;
    set_flag(Pipe::V, Pipe::MTE2, 0);
    set_flag(Pipe::MTE3, Pipe::V, 0);
    serial(w, tiles, workers, [&](Ex t) {
      wait_flag(Pipe::V, Pipe::MTE2, 0);
      copy(X(rows(t * tr, tr), all), xin);
      set_flag(Pipe::MTE2, Pipe::V, 0);
      wait_flag(Pipe::MTE2, Pipe::V, 0);
      tile::cast(x, xin);
      set_flag(Pipe::V, Pipe::MTE2, 0);
      reduce_max(x, m);
      tile::broadcast(buf, m);
      tile::sub(x, x, buf);
      tile::exp(x, x);
      reduce_sum(x, s);
      tile::broadcast(buf, s);
      tile::div(x, x, buf);
      wait_flag(Pipe::MTE3, Pipe::V, 0);
      tile::cast(yout, x);
      set_flag(Pipe::V, Pipe::MTE3, 0);
      wait_flag(Pipe::V, Pipe::MTE3, 0);
      copy(yout, Y(rows(t * tr, tr), all));
      set_flag(Pipe::MTE3, Pipe::V, 0);
    });
    wait_flag(Pipe::V, Pipe::MTE2, 0);
    wait_flag(Pipe::MTE3, Pipe::V, 0);
  });
  return kb.finish();
}

sim::HostData inputs(const Params& p, uint64_t seed) {
  return {{"X", random_tensor(p.at("R") * p.at("C"), f16, seed, -4.0, 4.0)}};
}

sim::HostData reference(const Params& p, const std::string&, const sim::HostData& in) {
  const int64_t R = p.at("R"), C = p.at("C");
  const auto& x = in.at("X");
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    const double* row = &x[static_cast<size_t>(r * C)];
    double mx = row[0], sum = 0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, row[c]);
    for (int64_t c = 0; c < C; ++c) sum += std::exp(row[c] - mx);
    for (int64_t c = 0; c < C; ++c) y[static_cast<size_t>(r * C + c)] = std::exp(row[c] - mx) / sum;
  }
  return {{"Y", y}};
}

}  // namespace

KernelSource softmax_kernel() {
  return KernelSource{
      "softmax",
      "row-wise softmax of an fp16 [R, C] matrix on the Vector cores (f32 math)",
      {"tile"},
      {{"R", 256, 1, 1 << 20, "rows"},
       {"C", 1024, 16, kMaxC,
        "columns (multiple of 16: whole 32-byte blocks per row; a row in and out, with two f32 "
        "copies, fits the UB up to 16352)"},
       {"block_num", 24, 1, 4096, "AI cores launched (each runs 2 AIVs)"}},
      [](const Params& p) {
        return p.at("C") % 16 == 0
                   ? std::string()
                   : fmt::format("C={} must be a multiple of 16 so rows stay 32-byte aligned",
                                 p.at("C"));
      },
      build,
      inputs,
      reference,
      // Output is fp16 (relative step 2^-11); f32 math adds well under that.
      {2e-3, 1e-4},
  };
}

}  // namespace tilepipe::kernels

// Reading an N x N fp16 matrix from GM with every core: the on-board copy anchors of the DMA
// model (docs/fidelity.md, "Copies"; A2/A3 at N = 12288: 215.82 us in large contiguous
// blocks, 564.84 us in 128-byte rows, 230.24 us into L1 with the ND -> NZ conversion). Each
// worker streams its share into a ring of two buffers, so its copies run back to back:
//   blocks    2 whole rows (one contiguous run of 4N bytes) into UB, on the 2 x block_num AIVs
//   rows128   256 x 64 tiles (256 runs of 128 B) into UB, on the AIVs
//   nd2nz_l1  128 x 256 tiles into L1, on the block_num AICs (the Cube's ND -> NZ load)
// The kernel writes nothing: `check` looks for races and deadlocks only.
#include <fmt/format.h>

#include <functional>

#include "registry.h"
#include "tilepipe/lang.h"

namespace tilepipe::kernels {
namespace {

using namespace lang;

constexpr int64_t kUbBytes = 196352;  // usable UB (A2 and A3 alike)

/// Units w, w + workers, ... of `units`: the worker's share, slot j % 2 of the ring.
void stream(Ex w, int64_t workers, int64_t units, const std::function<void(Ex, Ex)>& body) {
  serial((units - w + workers - 1) / workers, [&](Ex j) { body(w + j * workers, j % 2); });
}

ir::Program build(const Params& p, const std::string& variant) {
  const int64_t n = p.at("N"), cores = p.at("block_num");
  KernelBuilder k("gm_read", cores);
  auto X = k.input("X", {n, n}, f16);
  auto [cid, vid] = k.launch();
  if (variant == "nd2nz_l1") {
    scope_c([&] {
      auto t = alloc_L1("t", {2, 128, 256}, f16);
      const int64_t cols = n / 256;
      stream(cid, cores, (n / 128) * cols, [&](Ex i, Ex s) {
        copy(X(rows(i / cols * 128, 128), slice(i % cols * 256, 256)), t[s]);
      });
    });
  } else {
    scope_v([&] {
      Ex w = cid * 2 + vid;
      if (variant == "blocks") {
        auto t = alloc_ub("t", {2, 2, n}, f16);
        stream(w, cores * 2, n / 2,
               [&](Ex i, Ex s) { copy(X(rows(i * 2, 2), slice(0, n)), t[s]); });
      } else {
        auto t = alloc_ub("t", {2, 256, 64}, f16);
        const int64_t cols = n / 64;
        stream(w, cores * 2, (n / 256) * cols, [&](Ex i, Ex s) {
          copy(X(rows(i / cols * 256, 256), slice(i % cols * 64, 64)), t[s]);
        });
      }
    });
  }
  return k.finish();
}

std::string validate(const Params& p) {
  if (p.at("N") % 256 != 0)
    return fmt::format("N={} must be a multiple of 256 (128 x 256 and 256 x 64 tiles)", p.at("N"));
  if (2 * 2 * p.at("N") * 2 > kUbBytes)
    return fmt::format("N={} must be <= {}: two buffers of 2 rows of fp16 fill the {}-byte UB",
                       p.at("N"), kUbBytes / 8 / 256 * 256, kUbBytes);
  return "";
}

}  // namespace

KernelSource gm_read_kernel() {
  return KernelSource{
      "gm_read",
      "every core reads an N x N fp16 matrix from GM (blocks, 128-byte rows, ND -> NZ into "
      "L1): the on-board copy anchors of the DMA model",
      {"blocks", "rows128", "nd2nz_l1"},
      {{"N", 12288, 256, 24320, "matrix side, multiple of 256"},
       {"block_num", 24, 1, 4096, "AI cores launched (the AIVs: 2 per AI core)"}},
      validate,
      build,
      {},
      // Nothing is written: a functional run is checked for races and deadlocks only.
      [](const Params&, const std::string&, const sim::HostData&) { return sim::HostData{}; },
  };
}

}  // namespace tilepipe::kernels

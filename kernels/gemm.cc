// GEMM on the Cube cores, C[M,N] = A[M,K] x B[K,N] (fp16 in, fp32 accumulate), with the
// optimisation ladder of an AscendC matmul on A2/A3 as switches of one builder:
//
//   naive          128x128 output tiles, K in steps of 64, one MTE2 transfer per step and
//                  one slot per buffer: each stage waits for the one before it
//   l1_tiling      + 128x256 base blocks (the whole of L0C) and K split into L1 blocks of
//                  4 x 64: one MTE2 transfer of A [128 x 256] and B [256 x 256] feeds 4
//                  MTE1 moves and 4 mmads (CATLASS's L1 tile 128x256x256, L0 tile
//                  128x256x64)
//   double_buffer  + two L1 blocks and two L0A/L0B tiles in flight (MTE2, MTE1 and M
//                  overlap), the L0C tile accumulated across K in two row halves, so the
//                  FIX copy-out of one half overlaps the mmads of the other and of the next
//                  tile
//   swizzle        + the output tiles walked in strips of 3 tile rows (3 tile columns when
//                  N > M; CATLASS GemmIdentityBlockSwizzle<3, M >= N ? 0 : 1>): the cores
//                  running at the same time share a few A row panels and B column panels,
//                  and each strip starts on the panels the previous one ended on (L2 reuse);
//                  the cores sharing a panel start their K walk at different L1 blocks, so
//                  its first reads from HBM are spread over them instead of all landing on
//                  one core's MTE2 (the others read those blocks from L2)
//   expert         + C written as fp16, cast by FIX on the copy out (half the bytes)
//
// Data path: GM -MTE2-> L1 (ND -> NZ) -MTE1-> L0A / L0B -M-> L0C -FIX-> GM. Fixed-core
// launch: core cid runs tasks cid, cid + block_num, ... (one output tile each). Edge tiles
// (M, N or K not a multiple of the block) are cut to size: the builder emits one body per
// distinct static extent and selects it by the tile's position.
#include <fmt/format.h>

#include <optional>

#include "registry.h"
#include "tilepipe/lang.h"

namespace tilepipe::kernels {
namespace {

using namespace lang;

struct Plan {
  int64_t bm, bn, bk;  // base block: a bm x bn L0C tile, bk of K per mmad
  int64_t kl1;         // base-K slices per MTE2 transfer (an L1 block holds kl1 * bk of K)
  int64_t l1_slots;    // L1 blocks in flight
  int64_t l0_slots;    // L0A / L0B tiles in flight
  int64_t c_parts;     // row parts of the L0C tile, each copied out as soon as it is final
  int64_t strip;       // swizzle: tiles per strip (0 = row-major task order)
  bool stagger;        // cores sharing a panel start their K walk at different L1 blocks
  DType out;           // C: f32, or f16 cast on the FIX copy out
};

const std::vector<std::string> kLadder = {"naive", "l1_tiling", "double_buffer", "swizzle",
                                          "expert"};

std::vector<std::string> all_variants() {
  std::vector<std::string> v = {"expert"};  // the default first
  v.insert(v.end(), kLadder.begin(), kLadder.end() - 1);
  return v;
}

Plan plan_of(const std::string& v, const Params& p) {
  // "" is the default variant (callers that build without resolve_variant); the registry
  // rejects any other name before a build.
  const std::string& name = v.empty() ? kLadder.back() : v;
  size_t step = 0;
  while (step + 1 < kLadder.size() && kLadder[step] != name) ++step;
  Plan pl{128, 128, 64, 1, 1, 1, 1, 0, false, f32};
  if (step >= 1) {
    pl.bn = 256;
    pl.kl1 = 4;
  }
  if (step >= 2) pl.l1_slots = pl.l0_slots = pl.c_parts = 2;
  if (step >= 3) {
    pl.strip = 3;
    pl.stagger = true;
  }
  if (step >= 4) pl.out = f16;
  // Explicit parameters override the variant's tiling (sweeps and the tuner).
  if (p.at("base_m") > 0) pl.bm = p.at("base_m");
  if (p.at("base_n") > 0) pl.bn = p.at("base_n");
  if (p.at("base_k") > 0) pl.bk = p.at("base_k");
  if (p.at("l1_k") > 0) pl.kl1 = p.at("l1_k");
  if (p.at("strip") >= 0 && step >= 3) pl.strip = p.at("strip");
  if (p.at("stagger") >= 0 && step >= 3) pl.stagger = p.at("stagger") == 1;
  return pl;
}

/// Output tile (row, column) of task t: row-major, or in strips of `strip` tile rows walked
/// column by column, every other strip from the right (the last strip may be shorter).
/// `across_rows` = false: the same with rows and columns swapped (strips of tile columns).
std::pair<Ex, Ex> tile_of(Ex t, int64_t tiles_m, int64_t tiles_n, int64_t strip, bool across_rows) {
  if (strip == 0) return {t / tiles_n, t % tiles_n};
  if (!across_rows) {
    auto [n, m] = tile_of(t, tiles_n, tiles_m, strip, true);
    return {m, n};
  }
  Ex s = t / (strip * tiles_n), in = t % (strip * tiles_n);
  Ex height = min(Ex(strip), tiles_m - s * strip);
  Ex col = in / height;
  return {s * strip + in % height, select(s % 2 == 1, tiles_n - 1 - col, col)};
}

/// First L1 block of the K walk of tile (mi, ni) when staggered. The cores running at the
/// same time cover `rows` x `cols` output tiles; those sharing an A row panel start spread
/// evenly over the `blocks` K blocks, and so do those sharing a B column panel, so the first
/// read of each part of a panel is made by one of them and the others find it in L2.
Ex stagger(Ex mi, Ex ni, int64_t rows, int64_t cols, int64_t blocks) {
  return ((mi % rows) * cols + (ni % cols) * rows) * blocks / (rows * cols) % blocks;
}

/// Whether a K step is the tile's last: never, always, or when a condition holds.
struct Last {
  std::optional<Ex> cond;  // with always = false and no cond: never
  bool always = false;
  static Last when(Ex c) { return {std::move(c), false}; }
  static Last always_() { return {std::nullopt, true}; }
  /// This and `c`.
  Last and_(Ex c) const {
    if (always) return when(std::move(c));
    if (cond) return when(*cond && c);
    return {};
  }
};

void if_last(const Last& l, const std::function<void()>& body) {
  if (l.always)
    body();
  else if (l.cond)
    if_(*l.cond, body);
}

/// Calls body(extent) once per distinct extent of tile `i` of `n` elements cut by `block`:
/// the full block for all tiles but the last, the remainder for the last.
void by_extent(Ex i, int64_t n, int64_t block, const std::function<void(int64_t)>& body) {
  const int64_t tiles = (n + block - 1) / block, last = n - (tiles - 1) * block;
  if (last == block)
    body(block);
  else if (tiles == 1)
    body(last);
  else
    if_else(
        i == tiles - 1, [&] { body(last); }, [&] { body(block); });
}

ir::Program build(const Params& p, const std::string& variant) {
  const int64_t M = p.at("M"), N = p.at("N"), K = p.at("K"), cores = p.at("block_num");
  const Plan pl = plan_of(variant, p);
  const int64_t bm = pl.bm, bn = pl.bn, bk = pl.bk, kblk = pl.kl1 * bk;
  const int64_t hp = bm / pl.c_parts;  // rows of one L0C part
  const int64_t tiles_m = (M + bm - 1) / bm, tiles_n = (N + bn - 1) / bn;
  const int64_t full_blocks = K / kblk, tail_kblk = K % kblk;  // L1 blocks of K
  // Output tiles the cores work on at the same time: a strip of `strip` tile rows (or
  // columns, when N > M) by the cores it takes to fill the die.
  const bool across_rows = M >= N;
  const int64_t strip = std::max<int64_t>(pl.strip, 1), across = (cores + strip - 1) / strip;
  const int64_t round_rows = across_rows ? strip : across;
  const int64_t round_cols = across_rows ? across : strip;

  KernelBuilder kb("gemm", cores);
  auto A = kb.input("A", {M, K}, f16);
  auto B = kb.input("B", {K, N}, f16);
  auto C = kb.output("C", {M, N}, pl.out);
  auto [cid, vid] = kb.launch();

  scope_c([&] {
    auto a_l1 = alloc_L1("a_l1", {pl.l1_slots, bm, kblk}, f16);
    auto b_l1 = alloc_L1("b_l1", {pl.l1_slots, kblk, bn}, f16);
    auto a_l0 = alloc_L0A("a_l0", {pl.l0_slots, bm, bk}, f16);
    auto b_l0 = alloc_L0B("b_l0", {pl.l0_slots, bk, bn}, f16);
    auto c_l0 = alloc_L0C("c_l0", {pl.c_parts, hp, bn}, f32);
    // Credits: every L1 block, L0 tile and L0C part starts free.
    for (int64_t s = 0; s < pl.l1_slots; ++s) set_flag(Pipe::MTE1, Pipe::MTE2, s);
    for (int64_t s = 0; s < pl.l0_slots; ++s) set_flag(Pipe::M, Pipe::MTE1, s);
    for (int64_t c = 0; c < pl.c_parts; ++c) set_flag(Pipe::FIX, Pipe::M, c);

    serial(cid, tiles_m * tiles_n, cores, [&](Ex t) {
      auto [mi, ni] = tile_of(t, tiles_m, tiles_n, pl.strip, across_rows);
      Ex m0 = mi * bm, n0 = ni * bn;
      by_extent(mi, M, bm, [&](int64_t tm) {
        by_extent(ni, N, bn, [&](int64_t tn) {
          // L0C parts that hold rows of this tile: [c * hp, c * hp + rows) each.
          std::vector<int64_t> part_rows;
          for (int64_t r = 0; r < tm; r += hp) part_rows.push_back(std::min(hp, tm - r));

          // One base-K slice: L1 -> L0A / L0B (MTE1), then an mmad per L0C part. The first
          // slice of the tile (kk == 0) takes the L0C credit; the last hands the part to FIX.
          auto k_slice = [&](Ex s1, Ex kk, Ex j, int64_t ek, const Last& last) {
            Ex s0 = kk % pl.l0_slots;
            wait_flag(Pipe::M, Pipe::MTE1, s0);
            copy(a_l1(s1, rows(0, tm), slice(j * bk, ek)), a_l0(s0, rows(0, tm), slice(0, ek)));
            copy(b_l1(s1, rows(j * bk, ek), slice(0, tn)), b_l0(s0, rows(0, ek), slice(0, tn)));
            set_flag(Pipe::MTE1, Pipe::M, s0);

            wait_flag(Pipe::MTE1, Pipe::M, s0);
            for (int64_t c = 0; c < static_cast<int64_t>(part_rows.size()); ++c) {
              const int64_t pr = part_rows[static_cast<size_t>(c)];
              auto a = a_l0(s0, rows(c * hp, pr), slice(0, ek));
              auto b = b_l0(s0, rows(0, ek), slice(0, tn));
              auto acc = c_l0(c, rows(0, pr), slice(0, tn));
              if_else(
                  kk == 0,
                  [&] {
                    wait_flag(Pipe::FIX, Pipe::M, c);
                    mma(a, b, acc, /*init=*/true);
                  },
                  [&] { mma(a, b, acc, /*init=*/false); });
              if_last(last, [&] { set_flag(Pipe::M, Pipe::FIX, c); });
            }
            set_flag(Pipe::M, Pipe::MTE1, s0);
          };

          // The it-th L1 block walked, block `blk` of K (`ext` wide): A [tm x ext] and
          // B [ext x tn] in one MTE2 transfer each, then its base-K slices.
          auto l1_block = [&](Ex it, Ex blk, int64_t ext, const Last& last) {
            Ex s1 = it % pl.l1_slots;
            wait_flag(Pipe::MTE1, Pipe::MTE2, s1);
            copy(A(rows(m0, tm), slice(blk * kblk, ext)), a_l1(s1, rows(0, tm), slice(0, ext)));
            copy(B(rows(blk * kblk, ext), slice(n0, tn)), b_l1(s1, rows(0, ext), slice(0, tn)));
            set_flag(Pipe::MTE2, Pipe::MTE1, s1);

            wait_flag(Pipe::MTE2, Pipe::MTE1, s1);
            const int64_t full = ext / bk, tail = ext % bk;
            serial(full, [&](Ex j) {
              k_slice(s1, it * pl.kl1 + j, j, bk, tail == 0 ? last.and_(j == full - 1) : Last{});
            });
            if (tail > 0) k_slice(s1, it * pl.kl1 + full, full, tail, last);
            set_flag(Pipe::MTE1, Pipe::MTE2, s1);
          };

          // The whole L1 blocks (from `k0` on, wrapping around, when staggered), then the
          // narrower tail block.
          if (full_blocks > 0) {
            Ex k0 = stagger(mi, ni, round_rows, round_cols, full_blocks);
            serial(full_blocks, [&](Ex it) {
              Last last = tail_kblk == 0 ? Last::when(it == full_blocks - 1) : Last{};
              l1_block(it, pl.stagger ? (it + k0) % full_blocks : it, kblk, last);
            });
          }
          if (tail_kblk > 0) l1_block(full_blocks, full_blocks, tail_kblk, Last::always_());

          // Copy-out: each part as soon as its last mmad is done (FIX runs beside M).
          for (int64_t c = 0; c < static_cast<int64_t>(part_rows.size()); ++c) {
            const int64_t pr = part_rows[static_cast<size_t>(c)];
            wait_flag(Pipe::M, Pipe::FIX, c);
            copy(c_l0(c, rows(0, pr), slice(0, tn)), C(rows(m0 + c * hp, pr), slice(n0, tn)));
            set_flag(Pipe::FIX, Pipe::M, c);
          }
        });
      });
    });
    for (int64_t s = 0; s < pl.l1_slots; ++s) wait_flag(Pipe::MTE1, Pipe::MTE2, s);
    for (int64_t s = 0; s < pl.l0_slots; ++s) wait_flag(Pipe::M, Pipe::MTE1, s);
    for (int64_t c = 0; c < pl.c_parts; ++c) wait_flag(Pipe::FIX, Pipe::M, c);
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
  if (p.at("base_m") % 32 != 0)
    return fmt::format(
        "base_m={} must be a multiple of 32 (two L0C halves of whole 16-row fractals)",
        p.at("base_m"));
  for (const char* d : {"base_n", "base_k"})
    if (p.at(d) % 16 != 0)
      return fmt::format("{}={} must be a multiple of 16 (cube fractal)", d, p.at(d));
  return "";
}

}  // namespace

KernelSource gemm_kernel() {
  return KernelSource{
      "gemm",
      "C = A x B, fp16 in, fp32 accumulate, tiled through L1 and L0 on the Cube cores; the "
      "AscendC matmul optimisation ladder",
      all_variants(),
      {{"M", 256, 16, 1 << 16, "rows of A and C, multiple of 16"},
       {"N", 256, 16, 1 << 16, "columns of B and C, multiple of 16"},
       {"K", 512, 16, 1 << 16, "columns of A / rows of B, multiple of 16"},
       {"base_m", 0, 0, 1024, "rows of the L0C tile, multiple of 32 (0 = the variant's)"},
       {"base_n", 0, 0, 1024, "columns of the L0C tile, multiple of 16 (0 = the variant's)"},
       {"base_k", 0, 0, 1024, "K per mmad, multiple of 16 (0 = the variant's)"},
       {"l1_k", 0, 0, 64, "base-K slices per L1 block / MTE2 transfer (0 = the variant's)"},
       {"strip", -1, -1, 1024,
        "swizzle: tile rows per strip (tile columns when N > M), 0 = row-major (-1 = the "
        "variant's)"},
       {"stagger", -1, -1, 1,
        "swizzle: 1 = cores sharing a panel start K at different L1 blocks, 0 = all at the "
        "first (-1 = the variant's)"},
       {"block_num", 24, 1, 4096, "cores launched (24 = one per AI core)"}},
      validate,
      build,
      inputs,
      reference,
      // fp32 accumulation of fp16 products: differences come only from summation order
      // (and the fp16 rounding of C in `expert`).
      {1e-3, 1e-3},
      kLadder,
      {{"M", 4096}, {"N", 4096}, {"K", 4096}},
  };
}

}  // namespace tilepipe::kernels

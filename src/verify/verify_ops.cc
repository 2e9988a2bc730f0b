// Copies (hardware data paths, pipes, casts, atomics; the Cube <-> Vector crossings of
// automatic mode), gemm (operand memories, dtypes, fractal alignment) and reductions.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "verify/verify_internal.h"

namespace tilepipe::verify_detail {

namespace {

/// How a region lies in its (row-major) buffer: its elements come in contiguous runs of
/// `elems` (the innermost extent, times the next ones while the dimensions inside are taken
/// whole); `outer` is the innermost dimension outside the run with an extent > 1 (-1: the
/// region is one contiguous run).
struct Run {
  int64_t elems = 1;
  int outer = -1;
};

Run contiguous_run(const Region& r) {
  const auto& shape = r.buffer->shape;
  Run run;
  int d = static_cast<int>(r.extent.size()) - 1;
  for (; d >= 0; --d) {
    run.elems *= r.extent[static_cast<size_t>(d)];
    if (r.extent[static_cast<size_t>(d)] != shape[static_cast<size_t>(d)]) {
      --d;
      break;
    }
  }
  while (d >= 0 && r.extent[static_cast<size_t>(d)] == 1) --d;
  run.outer = d;
  return run;
}

/// Elements between consecutive indices of dimension `d` of a buffer.
int64_t stride(const Buffer& b, int d) {
  int64_t s = 1;
  for (size_t i = static_cast<size_t>(d) + 1; i < b->shape.size(); ++i) s *= b->shape[i];
  return s;
}

}  // namespace

void Verifier::check_dma_rows(const CopyStmt& n, const StmtNode& s) {
  const bool load = n.dst.buffer->scope == Scope::UB;
  const Region& ub = load ? n.dst : n.src;
  const Region& gm = load ? n.src : n.dst;
  if (ub.buffer->dtype != gm.buffer->dtype || ub.elements() != gm.elements()) return;
  const int64_t elem = dtype_bytes(ub.buffer->dtype), block = chip_.ub_align;
  const auto& shape = ub.buffer->shape;
  const int64_t row_bytes = shape.back() * elem;
  // The fix names the UB buffer with its rows padded to whole 32-byte blocks.
  std::vector<int64_t> padded = shape;
  padded.back() = (row_bytes + block - 1) / block * block / elem;
  const std::string pad = fmt::format(
      "pad the rows of '{}' to a multiple of {} bytes (allocate it as {} and copy into the "
      "first {} columns), or copy a contiguous range of GM and slice it in UB",
      ub.buffer->name, block, shape_str(padded), shape.back());
  const Run u = contiguous_run(ub), g = contiguous_run(gm);
  if (u.outer < 0 && g.outer < 0) {
    // One contiguous range on both sides: one burst for a lowering that folds it (the
    // original's since its fix for compact rows); the released toolchain moves each row of
    // the UB buffer as a burst of its own, which starts on the next 32-byte block.
    bool rows = false;
    for (size_t d = 0; d + 1 < ub.extent.size(); ++d) rows = rows || ub.extent[d] > 1;
    if (rows && row_bytes % block != 0)
      warn(s.loc, "dma-compact-rows",
           fmt::format("copy {} -> {} moves several {}-byte rows of UB buffer '{}' {}: "
                       "TileLang-Ascend's released toolchain moves each row as a DMA burst, "
                       "which A2/A3 place on a {}-byte block of UB, so the rows land apart and "
                       "the data is corrupted on the NPU (tilepipe moves one contiguous "
                       "range, as the original does since its fix for compact rows)",
                       print(n.src), print(n.dst), row_bytes, ub.buffer->name, shape_str(shape),
                       block),
           pad);
    return;
  }
  // Several bursts, each placed on a 32-byte block of UB: every burst must start at a
  // multiple of 32 bytes from the region's start. Bursts break where UB's rows break
  // (stride of the run's outer dimension) and where GM's runs break inside a UB run.
  int64_t off = 0;
  if (u.outer >= 0 && stride(ub.buffer, u.outer) * elem % block != 0)
    off = stride(ub.buffer, u.outer) * elem;
  else if (g.outer >= 0 && g.elems % u.elems != 0 && std::gcd(g.elems, u.elems) * elem % block)
    off = std::gcd(g.elems, u.elems) * elem;
  if (off == 0) return;
  error(s.loc, "dma-row-pitch",
        fmt::format("copy {} -> {} is a strided DMA whose bursts would start {} bytes apart in "
                    "UB buffer '{}' {}; A2/A3's DMA starts every burst on a {}-byte block of "
                    "UB, so the rows land in the wrong place and the data is corrupted "
                    "(TileLang-Ascend rejects such copies)",
                    print(n.src), print(n.dst), off, ub.buffer->name, shape_str(shape), block),
        pad);
}

bool Verifier::crossing(const CopyStmt& c) {
  return crosses_cores(c.src.buffer->scope, c.dst.buffer->scope);
}

void Verifier::check_crossing(const CopyStmt& n, const StmtNode& s) {
  if (!region(n.src, s.loc, "copy source") || !region(n.dst, s.loc, "copy destination")) return;
  if (n.src.elements() != n.dst.elements())
    error(s.loc, "shape-mismatch",
          fmt::format("copy moves {} elements from {} into {} elements of {}", n.src.elements(),
                      print(n.src), n.dst.elements(), print(n.dst)),
          "make both regions the same size");
  DType a = n.src.buffer->dtype, b = n.dst.buffer->dtype;
  bool from_l0c = n.src.buffer->scope == Scope::L0C;
  bool ok = from_l0c ? (a == DType::F32 && (b == DType::F16 || b == DType::BF16 || b == DType::F32))
                     : a == b;
  if (!ok)
    error(s.loc, "dtype-mismatch",
          fmt::format("copy {} -> {} changes dtype {} -> {}; {}", print(n.src), print(n.dst),
                      to_string(a), to_string(b),
                      from_l0c ? "the FIX copy out of L0C casts f32 to f16/bf16/f32 only"
                               : "UB -> L1 goes through GM unchanged"),
          "copy into a buffer of the source dtype, then cast on UB");
  if (n.transpose || n.pad_value)
    error(s.loc, "bad-operand", "a Cube <-> Vector copy takes no transpose or pad_value",
          "transpose on the L1 -> L0 move instead");
  ub_aligned(n.src, s.loc, "copy source");
  ub_aligned(n.dst, s.loc, "copy destination");
}

bool Verifier::element_move(const CopyStmt& n) {
  return n.src.buffer->scope == Scope::UB && n.dst.buffer->scope == Scope::UB &&
         n.src.elements() == 1 && n.dst.elements() == 1;
}

void Verifier::check(const CopyStmt& n, const StmtNode& s) {
  if (!in_scope(s.loc, "copy")) return;
  if (!region(n.src, s.loc, "copy source") || !region(n.dst, s.loc, "copy destination")) return;
  Scope from = n.src.buffer->scope, to = n.dst.buffer->scope;
  auto pipe = copy_pipe(from, to);
  if (!pipe) {
    std::string hint = "legal copies: GM->L1, GM->UB, L1->L0A/L0B, L0C->GM/L1, UB->GM, UB->UB";
    if (crosses_cores(from, to))
      hint =
          "there is no direct L0C<->UB path on A2/A3: go through a GM workspace "
          "(FIX/MTE3 out, MTE2 in) with a cross-core flag";
    error(s.loc, "copy-direction",
          fmt::format("copy from {} to {} is not a hardware data path", to_string(from),
                      to_string(to)),
          hint);
    return;
  }
  if (!pipe_on(*scope_, *pipe)) {
    error(s.loc, "scope-rule",
          fmt::format("copy {} -> {} runs on pipe {}, which the {} core does not have",
                      to_string(from), to_string(to), to_string(*pipe),
                      *scope_ == CoreKind::C ? "Cube" : "Vector"),
          "put the copy in the scope of the core that owns the on-chip buffer");
    return;
  }
  operand_on_core(n.src, s.loc, "copy source");
  operand_on_core(n.dst, s.loc, "copy destination");
  if (n.relu && (from != Scope::L0C || n.atomic_add || n.transpose))
    error(s.loc, "copy-direction",
          fmt::format("a copy {} -> {} with relu: only FixPipe (out of L0C, no atomic add or "
                      "transpose) applies a ReLU on the way",
                      to_string(from), to_string(to)),
          "apply T.tile.relu on the Vector core instead");
  if (n.atomic_add && to != Scope::GM)
    error(s.loc, "copy-direction",
          fmt::format("atomic add {} -> {}: the DMA unit adds into GM only", to_string(from),
                      to_string(to)),
          "atomic_add a UB or L0C tile into a GM tensor");
  if (n.atomic_add && !is_float(n.dst.buffer->dtype) && n.dst.buffer->dtype != DType::I32)
    error(s.loc, "dtype-mismatch",
          fmt::format("atomic add into '{}', a {} tensor; the DMA unit adds f32, f16, bf16 "
                      "or i32",
                      n.dst.buffer->name, to_string(n.dst.buffer->dtype)),
          "accumulate in one of those dtypes");
  if (n.src.elements() != n.dst.elements()) {
    error(s.loc, "shape-mismatch",
          fmt::format("copy moves {} elements from {} {} into {} elements of {} {}",
                      n.src.elements(), print(n.src), shape_str(n.src.extent), n.dst.elements(),
                      print(n.dst), shape_str(n.dst.extent)),
          "make both regions the same size");
  }
  DType a = n.src.buffer->dtype, b = n.dst.buffer->dtype;
  bool cast_ok =
      (*pipe == Pipe::FIX && a == DType::F32 &&
       (b == DType::F16 || b == DType::BF16 || b == DType::F32)) ||
      (*pipe == Pipe::V) ||
      (opts_.cast_copies && !n.atomic_add &&
       ((from == Scope::GM && to == Scope::UB) || (from == Scope::UB && to == Scope::GM)));
  if (a != b && !cast_ok) {
    error(s.loc, "dtype-mismatch",
          fmt::format("copy {} -> {} changes dtype {} -> {}; only FIX (L0C f32 -> f16/bf16), "
                      "UB -> UB copies and, with the copy_cast pass, GM <-> UB copies cast",
                      print(n.src), print(n.dst), to_string(a), to_string(b)),
          "copy into a buffer of the same dtype, then tile::cast on UB");
  }
  if (n.transpose && *pipe != Pipe::MTE1) {
    error(s.loc, "bad-operand", "transpose is only available on L1 -> L0A/L0B copies (MTE1)",
          "drop transpose, or transpose on the L1 -> L0 move");
  }
  if (n.pad_value && !(from == Scope::GM && to == Scope::UB)) {
    error(s.loc, "bad-operand", "pad_value is only available on GM -> UB copies", "drop pad_value");
  } else if (n.pad_value) {
    // Copies move equal element counts, so there is nothing to pad yet; accepting the
    // option would silently do nothing.
    error(s.loc, "unsupported",
          "pad_value on GM -> UB copies is not modelled yet (copies move equal element "
          "counts)",
          "drop pad_value and fill the rest of the tile with tile::fill");
  }
  if (n.transpose && n.src.squeezed().size() > 2) {
    error(s.loc, "bad-operand", "transpose needs a 2-D tile", "slice a [rows, cols] tile");
  }
  if (!element_move(n)) {
    ub_aligned(n.src, s.loc, "copy source");
    ub_aligned(n.dst, s.loc, "copy destination");
  }
  if (*pipe == Pipe::MTE2 ? to == Scope::UB : *pipe == Pipe::MTE3) check_dma_rows(n, s);
}

std::optional<std::pair<int64_t, int64_t>> Verifier::matrix(const Region& r) {
  auto sq = r.squeezed();
  if (sq.size() == 1) return std::pair<int64_t, int64_t>{1, sq[0]};
  if (sq.size() == 2) return std::pair<int64_t, int64_t>{sq[0], sq[1]};
  return std::nullopt;
}

void Verifier::check(const GemmStmt& n, const StmtNode& s) {
  check_gemm(n.a, n.b, n.c, n.transpose_a, n.transpose_b,
             {{{Scope::L0A}, {Scope::L0B}, {Scope::L0C}}}, s.loc, "gemm");
}

void Verifier::check(const GemmL1Stmt& n, const StmtNode& s) {
  if (!opts_.gemm_l1) {
    error(s.loc, "unsupported",
          "gemm on L1 operands: the gemm_l1 pass, which stages them through L0A / L0B, is "
          "switched off",
          "switch the gemm_l1 pass on, or copy the operands to L0A / L0B and use T.mma");
    return;
  }
  range(n.init);
  if (!check_gemm(n.a, n.b, n.c, n.transpose_a, n.transpose_b,
                  {{{Scope::L1, Scope::L0A}, {Scope::L1, Scope::L0B}, {Scope::L0C}}}, s.loc,
                  "gemm_l1"))
    return;
  // The pass cuts K along one of the last two dimensions of each operand.
  for (const Region* r : {&n.a, &n.b, &n.c}) {
    const auto& e = r->extent;
    if (r->squeezed().size() != 2 || e.size() < 2 ||
        std::any_of(e.begin(), e.end() - 2, [](int64_t x) { return x != 1; }))
      error(
          s.loc, "shape-mismatch",
          fmt::format("gemm_l1 operand '{}' is not a 2-D tile ({})", r->buffer->name, shape_str(e)),
          "slice one [rows, cols] tile: the last two dimensions, the others of extent 1");
  }
}

bool Verifier::check_gemm(const Region& a, const Region& b, const Region& c, bool ta, bool tb,
                          const std::array<std::vector<Scope>, 3>& want, const Loc& loc,
                          const char* what) {
  if (!in_scope(loc, what)) return false;
  if (*scope_ != CoreKind::C) {
    error(loc, "scope-rule",
          fmt::format("{} in scope V: matrix multiply runs on the Cube core", what),
          "move it into scope_c");
    return false;
  }
  if (!region(a, loc, what) || !region(b, loc, what) || !region(c, loc, what)) return false;
  const Region* ops[] = {&a, &b, &c};
  const char* names[] = {"A", "B", "C"};
  bool ok = true;
  for (int i = 0; i < 3; ++i) {
    const Scope got = ops[i]->buffer->scope;
    if (std::find(want[i].begin(), want[i].end(), got) != want[i].end()) continue;
    std::vector<std::string> expected;
    for (Scope x : want[i]) expected.push_back(to_string(x));
    error(loc, "gemm-operand",
          fmt::format("{} {} operand '{}' is in {}; expected {}", what, names[i],
                      ops[i]->buffer->name, to_string(got), fmt::join(expected, " or ")),
          "copy L1 tiles to L0A (A) and L0B (B) first; accumulate into an L0C buffer");
    ok = false;
  }
  if (!ok) return false;
  DType dta = a.buffer->dtype, dtb = b.buffer->dtype, dtc = c.buffer->dtype;
  bool int8 = dta == DType::I8;
  // AscendC's Mmad on A2/A3: half, bfloat16 and float operands accumulate in float (float at
  // cube.fp32_rate), int8 in int32.
  if (dta != dtb || !(dta == DType::F16 || dta == DType::BF16 || dta == DType::F32 || int8) ||
      dtc != (int8 ? DType::I32 : DType::F32)) {
    error(loc, "dtype-mismatch",
          fmt::format("{} dtypes {} x {} -> {}; expected f16 x f16 -> f32, bf16 x bf16 -> "
                      "f32, f32 x f32 -> f32 or i8 x i8 -> i32",
                      what, to_string(dta), to_string(dtb), to_string(dtc)),
          "cast the operands on the way into L1, or allocate L0C as f32");
    return false;
  }
  auto ma = matrix(a), mb = matrix(b), mc = matrix(c);
  if (!ma || !mb || !mc) {
    error(loc, "shape-mismatch", fmt::format("{} operands must be 2-D tiles", what),
          "slice one [rows, cols] tile of each multi-buffer");
    return false;
  }
  auto [am, ak] = ta ? std::pair{ma->second, ma->first} : *ma;
  auto [bk, bn] = tb ? std::pair{mb->second, mb->first} : *mb;
  if (ak != bk || am != mc->first || bn != mc->second) {
    error(loc, "shape-mismatch",
          fmt::format("{} [{}x{}] x [{}x{}] -> [{}x{}]: expected A [M,K] x B [K,N] -> C [M,N]",
                      what, am, ak, bk, bn, mc->first, mc->second),
          "check the tile extents and the transpose flags");
    return false;
  }
  int64_t k_align = 32 / dtype_bytes(dta);
  if (am % 16 || bn % 16 || ak % k_align) {
    error(loc, "fractal-alignment",
          fmt::format("{} M={} N={} K={}: cube operands are 16x16 fractals, so M and N must "
                      "be multiples of 16 and K a multiple of {} for {}",
                      what, am, bn, ak, k_align, to_string(dta)),
          "pad the tile to the next multiple of 16 (and mask the extra rows/columns)");
    return false;
  }
  return true;
}

void Verifier::check(const ReduceStmt& n, const StmtNode& s) {
  const char* what = "reduce";
  if (!in_scope(s.loc, what)) return;
  if (*scope_ != CoreKind::V) {
    error(s.loc, "scope-rule", "reduce in scope C: reductions run on the Vector core",
          "move it into scope_v");
    return;
  }
  if (!region(n.src, s.loc, what) || !region(n.dst, s.loc, what)) return;
  for (const Region* r : {&n.src, &n.dst}) {
    if (r->buffer->scope != Scope::UB) {
      error(s.loc, "tile-operand",
            fmt::format("reduce operand '{}' is in {}; reductions take UB tiles", r->buffer->name,
                        to_string(r->buffer->scope)),
            "copy the data into a UB buffer first");
      return;
    }
  }
  ub_aligned(n.src, s.loc, what);
  if (n.src.buffer->dtype != n.dst.buffer->dtype) {
    error(s.loc, "dtype-mismatch",
          fmt::format("reduce {} -> {}: dtypes {} and {} differ", n.src.buffer->name,
                      n.dst.buffer->name, to_string(n.src.buffer->dtype),
                      to_string(n.dst.buffer->dtype)),
          "reduce into a buffer of the source dtype");
  }
  // The reductions sum and compare in f32 (the hardware's take f16 / f32): a 64-bit integer
  // would lose its low digits there, and a bool mask is no number to sum.
  if (const DType d = n.src.buffer->dtype; d == DType::I64 || d == DType::U64 || d == DType::Bool)
    error(s.loc, "dtype-mismatch",
          fmt::format("reduce over '{}', a {} tile: the vector unit's reductions take f16, f32 "
                      "and the 32-bit and narrower integers",
                      n.src.buffer->name, to_string(d)),
          d == DType::Bool ? "tile::cast the mask to f16 (or i32) first"
                           : "tile::cast to i32 (or f32) first");
  auto m = matrix(n.src);
  if (!m || !(n.dim == -1 || n.dim == 0 || n.dim == 1)) {
    error(s.loc, "shape-mismatch",
          fmt::format("reduce over {} {} with dim={}: expected a 1-D or 2-D tile and dim in "
                      "{{-1, 0, 1}}",
                      print(n.src), shape_str(n.src.extent), n.dim),
          "slice one 2-D tile");
    return;
  }
  bool one_d = n.src.squeezed().size() == 1;
  int64_t want = one_d ? 1 : (n.dim == 0 ? m->second : m->first);
  if (n.dst.elements() != want) {
    error(s.loc, "shape-mismatch",
          fmt::format("reduce {} {} along dim {} gives {} values, but destination {} holds {}",
                      print(n.src), shape_str(n.src.extent), n.dim, want, print(n.dst),
                      n.dst.elements()),
          fmt::format("use a destination of {} elements, e.g. [{}, 1]", want, want));
  }
}

}  // namespace tilepipe::verify_detail

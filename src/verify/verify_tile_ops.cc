// Vector tile ops: operand counts and memories, element counts, dtypes, and the special
// rules of sort, merge_sort, gather_mask and gatherb.
#include <fmt/format.h>

#include <algorithm>

#include "tilepipe/vec_modes.h"
#include "verify/verify_internal.h"

namespace tilepipe::verify_detail {

void Verifier::check(const TileOpStmt& n, const StmtNode& s) {
  std::string what = std::string("tile.") + to_string(n.op);
  if (!in_scope(s.loc, what.c_str())) return;
  if (*scope_ != CoreKind::V) {
    error(s.loc, "scope-rule",
          fmt::format("{} in scope C: vector ops run on the Vector core", what),
          "move it into scope_v");
    return;
  }
  std::vector<const Region*> ops = {&n.dst};
  for (const auto& r : n.srcs) ops.push_back(&r);
  if (n.scalar)
    if (auto* r = std::get_if<Region>(&n.scalar->value)) ops.push_back(r);
  for (auto* r : ops) {
    if (!region(*r, s.loc, what.c_str())) return;
    if (r->buffer->scope != Scope::UB) {
      error(s.loc, "tile-operand",
            fmt::format("{} operand '{}' is in {}; vector ops take UB tiles", what, r->buffer->name,
                        to_string(r->buffer->scope)),
            "copy the data into a UB buffer first (GM -> UB is MTE2)");
      return;
    }
  }
  if (n.scalar)
    if (auto* r = std::get_if<Region>(&n.scalar->value); r && r->elements() != 1) {
      error(s.loc, "shape-mismatch",
            fmt::format("scalar operand {} has {} elements; expected one element", print(*r),
                        r->elements()),
            "index every dimension of the scalar read");
    }
  // A one-element fill is an element store (`ub[i] = x`: the scalar unit's SetValue on
  // hardware), which needs no vector alignment.
  if (!((n.op == TileOpKind::Fill || n.op == TileOpKind::Store) && n.dst.elements() == 1)) {
    for (const auto& r : n.srcs) ub_aligned(r, s.loc, what.c_str());
    ub_aligned(n.dst, s.loc, what.c_str());
  }

  size_t want_srcs = 0;
  bool scalar_ok = false, scalar_needed = false;
  switch (n.op) {
    case TileOpKind::Add:
    case TileOpKind::Sub:
    case TileOpKind::Mul:
    case TileOpKind::Div:
    case TileOpKind::Max:
    case TileOpKind::Min:
    case TileOpKind::Compare:
    case TileOpKind::BitAnd:
    case TileOpKind::BitOr:
    case TileOpKind::BitXor:
    case TileOpKind::Pow:
      want_srcs = n.scalar ? 1 : 2;
      scalar_ok = true;
      break;
    case TileOpKind::ShiftLeft:
    case TileOpKind::ShiftRight:
      want_srcs = 1;
      scalar_needed = true;
      break;
    case TileOpKind::SelectOp:
      want_srcs = n.scalar ? 2 : 3;
      scalar_ok = true;
      break;
    case TileOpKind::Axpy:
      want_srcs = 1;
      scalar_needed = true;
      break;
    case TileOpKind::Fill:
      want_srcs = 0;
      scalar_needed = true;
      break;
    case TileOpKind::Store:
      if (n.dst.elements() != 1)
        error(s.loc, "shape-mismatch",
              fmt::format("element store into {} of {} elements; expected one element",
                          print(n.dst), n.dst.elements()),
              "index every dimension of the stored element, or fill a tile with T.tile.fill");
      want_srcs = 0;
      scalar_needed = true;
      break;
    case TileOpKind::Gather:
    case TileOpKind::Gatherb:
      want_srcs = 2;
      break;
    case TileOpKind::Arange:
      want_srcs = 0;
      scalar_needed = true;
      break;
    case TileOpKind::Sort:
      want_srcs = 1;
      scalar_needed = true;
      break;
    case TileOpKind::MergeSort:  // 2 or 3 ways (an instruction has at most 4 operands)
      want_srcs = std::clamp<size_t>(n.srcs.size(), 2, 3);
      break;
    case TileOpKind::Sort32:  // keys and their u32 indices
      want_srcs = 2;
      break;
    default:
      want_srcs = 1;
  }
  if (n.srcs.size() != want_srcs || (scalar_needed && !n.scalar) ||
      (n.scalar && !scalar_ok && !scalar_needed)) {
    error(s.loc, "bad-operand",
          fmt::format("{} takes {} tile source(s){}; found {} tile(s){}", what, want_srcs,
                      scalar_needed ? " and a scalar" : "", n.srcs.size(),
                      n.scalar ? " and a scalar" : ""),
          "see docs/ir.md for the operands of each tile op");
    return;
  }
  DType dt = n.dst.buffer->dtype;
  auto same_count = [&](const Region& r) {
    if (r.elements() != n.dst.elements()) {
      error(s.loc, "shape-mismatch",
            fmt::format("{}: source {} has {} elements {} but destination {} has {} {}", what,
                        print(r), r.elements(), shape_str(r.extent), print(n.dst), n.dst.elements(),
                        shape_str(n.dst.extent)),
            "element counts of tile operands must match (use tile::broadcast to expand a "
            "row or column vector)");
      return false;
    }
    return true;
  };
  auto same_dtype = [&](const Region& r) {
    if (r.buffer->dtype != dt) {
      error(s.loc, "dtype-mismatch",
            fmt::format("{}: source '{}' is {} but destination '{}' is {}", what, r.buffer->name,
                        to_string(r.buffer->dtype), n.dst.buffer->name, to_string(dt)),
            "tile::cast one operand first; only cast changes dtype");
    }
  };
  switch (n.op) {
    case TileOpKind::Broadcast: {
      auto src = n.srcs[0].squeezed();
      auto dst = matrix(n.dst);
      same_dtype(n.srcs[0]);
      int64_t len = n.srcs[0].elements();
      bool row_vec = dst && len == dst->first && (src.size() == 1 || src.back() == 1);
      bool col_vec = dst && len == dst->second;
      if (!valid_broadcast_dir(n.attrs[0])) {
        error(s.loc, "bad-operand",
              fmt::format("broadcast direction {} is not one of 0 (by shape), 1 (a column: "
                          "one value per row), 2 (a row repeated down the rows)",
                          n.attrs[0]),
              "set attrs[0] to 0, 1 or 2");
        break;
      }
      // a stated direction needs the vector's length to match it, whatever its shape
      if (n.attrs[0] == static_cast<int64_t>(BroadcastDir::Column)) {
        row_vec = dst && len == dst->first;
        col_vec = false;
      } else if (n.attrs[0] == static_cast<int64_t>(BroadcastDir::Row)) {
        row_vec = false;
      }
      if (!dst || !(row_vec || col_vec)) {
        error(s.loc, "shape-mismatch",
              fmt::format("broadcast {} {} -> {} {}: expected [R] or [R,1] -> [R,C], or [C] "
                          "or [1,C] -> [R,C]",
                          print(n.srcs[0]), shape_str(n.srcs[0].extent), print(n.dst),
                          shape_str(n.dst.extent)),
              "make the vector length equal the destination's rows or columns");
      }
      break;
    }
    case TileOpKind::BitAnd:
    case TileOpKind::BitOr:
    case TileOpKind::BitXor:
    case TileOpKind::BitNot:
    case TileOpKind::ShiftLeft:
    case TileOpKind::ShiftRight:
      if (is_float(dt))
        error(s.loc, "dtype-mismatch",
              fmt::format("{} on '{}', a {} tile: bit operations take integer tiles", what,
                          n.dst.buffer->name, to_string(dt)),
              "apply it to an integer tile (tile::cast first)");
      for (const auto& r : n.srcs)
        if (same_count(r)) same_dtype(r);
      break;
    case TileOpKind::Transpose: {
      same_dtype(n.srcs[0]);
      auto src = matrix(n.srcs[0]), dst = matrix(n.dst);
      if (!src || !dst || src->first != dst->second || src->second != dst->first)
        error(s.loc, "shape-mismatch",
              fmt::format("transpose {} {} -> {} {}: expected [R, C] -> [C, R]", print(n.srcs[0]),
                          shape_str(n.srcs[0].extent), print(n.dst), shape_str(n.dst.extent)),
              "give the destination the source's shape with rows and columns swapped");
      break;
    }
    case TileOpKind::Gather:
      same_count(n.srcs[1]);
      same_dtype(n.srcs[0]);
      if (n.srcs[1].buffer->dtype != DType::I32 && n.srcs[1].buffer->dtype != DType::U32)
        error(s.loc, "dtype-mismatch",
              fmt::format("gather offsets '{}' are {}; expected u32 byte offsets (the "
                          "hardware's form) or i32 element offsets",
                          n.srcs[1].buffer->name, to_string(n.srcs[1].buffer->dtype)),
              "store the offsets as u32 bytes from the source's start");
      break;
    case TileOpKind::Reinterpret: {
      // the same bytes as another dtype: whole buffers (a view of all of src), so the byte
      // counts match (a uint8 [16, 64] mask read as uint16 [16, 32])
      const Region& r = n.srcs[0];
      const int64_t src_bytes = r.elements() * dtype_bytes(r.buffer->dtype);
      const int64_t dst_bytes = n.dst.elements() * dtype_bytes(dt);
      if (src_bytes != dst_bytes)
        error(
            s.loc, "shape-mismatch",
            fmt::format("{}: source {} holds {} bytes ({} x {}) but destination {} holds {} "
                        "({} x {})",
                        what, print(r), src_bytes, shape_str(r.extent), to_string(r.buffer->dtype),
                        print(n.dst), dst_bytes, shape_str(n.dst.extent), to_string(dt)),
            "a reinterpretation names the same bytes: allocate the destination with as many "
            "bytes as the source");
      break;
    }
    case TileOpKind::Cast:
      same_count(n.srcs[0]);
      if (!valid_cast_round(n.attrs[0]))
        error(s.loc, "bad-operand",
              fmt::format("{}: rounding mode {} is not one of 0..4", what, n.attrs[0]),
              "see CastRound in tilepipe/vec_modes.h");
      if (n.attrs[1] != 0 &&
          (n.attrs[1] != kCastIntegral || !is_float(dt) || n.srcs[0].buffer->dtype != dt))
        error(s.loc, "bad-operand",
              fmt::format("{}: attrs[1] = {} from {} into {}; expected 0, or {} (rounding to "
                          "integral values) for a float cast into its own type",
                          what, n.attrs[1], to_string(n.srcs[0].buffer->dtype), to_string(dt),
                          kCastIntegral),
              "round to integral values only between tiles of one float type");
      break;
    case TileOpKind::Arange:
      if (auto* r = std::get_if<Region>(&n.scalar->value))
        error(s.loc, "bad-operand",
              fmt::format("{}: the first value {} is read from UB; expected a number or an "
                          "integer expression",
                          what, print(*r)),
              "pass the first value as a constant or an index expression");
      break;
    case TileOpKind::Sort:
      check_sort(n, s, what);
      break;
    case TileOpKind::MergeSort:
      check_merge_sort(n, s, what);
      break;
    case TileOpKind::Sort32:
      check_sort32(n, s, what);
      break;
    case TileOpKind::GatherMask:
      check_gather_mask(n, s, what);
      break;
    case TileOpKind::Gatherb:
      check_gatherb(n, s, what);
      break;
    case TileOpKind::Compare:
      if (packed_mask(dt, n.dst.elements(), n.srcs[0].elements())) {
        // a bit mask (vec_modes.h): the sources agree with each other
        if (n.srcs.size() == 2 && n.srcs[1].elements() != n.srcs[0].elements())
          error(s.loc, "shape-mismatch",
                fmt::format("{}: source {} has {} elements but source {} has {}", what,
                            print(n.srcs[1]), n.srcs[1].elements(), print(n.srcs[0]),
                            n.srcs[0].elements()),
                "compare tiles of the same element count");
      } else {
        for (const auto& r : n.srcs) same_count(r);
      }
      if (n.srcs.size() == 2 && n.srcs[1].buffer->dtype != n.srcs[0].buffer->dtype)
        same_dtype(n.srcs[1]);
      break;
    case TileOpKind::SelectOp:
      for (size_t i = 0; i < n.srcs.size(); ++i)
        if (i > 0 || !packed_mask(n.srcs[0].buffer->dtype, n.srcs[0].elements(), n.dst.elements()))
          same_count(n.srcs[i]);
      for (size_t i = 1; i < n.srcs.size(); ++i) same_dtype(n.srcs[i]);
      break;
    default:
      for (const auto& r : n.srcs) {
        if (same_count(r)) same_dtype(r);
      }
  }
  bool needs_float = n.op == TileOpKind::Exp || n.op == TileOpKind::Ln ||
                     n.op == TileOpKind::Sqrt || n.op == TileOpKind::Rsqrt ||
                     n.op == TileOpKind::Reciprocal || n.op == TileOpKind::Div ||
                     n.op == TileOpKind::Axpy || n.op == TileOpKind::Sin ||
                     n.op == TileOpKind::Cos || n.op == TileOpKind::Round;
  if (needs_float && !is_float(dt)) {
    error(s.loc, "dtype-mismatch",
          fmt::format("{} on {} tile '{}': this op is defined for f16/bf16/f32", what,
                      to_string(dt), n.dst.buffer->name),
          "tile::cast to f32 first");
  } else {
    narrow_dtypes(n, s, what);
  }
}

namespace {

bool is_wide(DType d) {
  return d == DType::I64 || d == DType::U64;
}

/// Ops that move, fill or convert elements: every dtype's.
bool moves_elements(TileOpKind op) {
  switch (op) {
    case TileOpKind::Fill:
    case TileOpKind::Store:
    case TileOpKind::Cast:
    case TileOpKind::Reinterpret:
    case TileOpKind::Broadcast:
    case TileOpKind::Transpose:
    case TileOpKind::Gather:
    case TileOpKind::GatherMask:
    case TileOpKind::Gatherb:
      return true;
    default:
      return false;
  }
}

bool bit_op(TileOpKind op) {
  return op == TileOpKind::BitAnd || op == TileOpKind::BitOr || op == TileOpKind::BitXor ||
         op == TileOpKind::BitNot || op == TileOpKind::ShiftLeft || op == TileOpKind::ShiftRight;
}

/// The ops the vector unit of A2/A3 has for 64-bit integers (AscendC): data movement, fill,
/// cast, the index arithmetic of add, sub, max, min, compare, select and arange; bit ops.
bool wide_op(TileOpKind op) {
  switch (op) {
    case TileOpKind::Add:
    case TileOpKind::Sub:
    case TileOpKind::Max:
    case TileOpKind::Min:
    case TileOpKind::Compare:
    case TileOpKind::SelectOp:
    case TileOpKind::Arange:
      return true;
    default:
      return moves_elements(op) || bit_op(op);
  }
}

}  // namespace

void Verifier::narrow_dtypes(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
  std::vector<const Region*> ops = {&n.dst};
  for (const auto& r : n.srcs) ops.push_back(&r);
  for (size_t i = 0; i < ops.size(); ++i) {
    const DType d = ops[i]->buffer->dtype;
    // A bool tile is a mask: moved, filled, cast, written by a compare, read by a select
    // (its first source) and combined by max / min (or / and) and the bit ops.
    const bool mask_use =
        (n.op == TileOpKind::Compare && i == 0) || (n.op == TileOpKind::SelectOp && i == 1);
    const bool bool_ok =
        moves_elements(n.op) || mask_use || n.op == TileOpKind::Max || n.op == TileOpKind::Min ||
        (bit_op(n.op) && n.op != TileOpKind::ShiftLeft && n.op != TileOpKind::ShiftRight);
    if (d == DType::Bool && !bool_ok) {
      error(s.loc, "dtype-mismatch",
            fmt::format("{} on '{}', a bool tile: bool tiles are masks (copied, filled, cast, "
                        "written by compare, read by select, combined by max / min and bit "
                        "ops)",
                        what, ops[i]->buffer->name),
            "tile::cast the mask to f16 or i32 first for arithmetic");
      return;
    }
    if (is_wide(d) && !wide_op(n.op)) {
      error(s.loc, "dtype-mismatch",
            fmt::format("{} on '{}', a {} tile: the vector unit of A2/A3 has no 64-bit {} "
                        "(its 64-bit integer ops: copy, fill, cast, add, sub, max, min, "
                        "compare, select, bit ops)",
                        what, ops[i]->buffer->name, to_string(d), to_string(n.op)),
            "tile::cast to i32 (or f32) first");
      return;
    }
  }
}

bool Verifier::sort_dtypes(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
  for (const Region* r : {&n.dst, &n.srcs[0]}) {
    DType d = r->buffer->dtype;
    if (d != DType::F32 && d != DType::F16) {
      error(s.loc, "dtype-mismatch",
            fmt::format("{}: '{}' is {}; sorting takes f32 or f16 tiles", what, r->buffer->name,
                        to_string(d)),
            "tile::cast the keys to f32 first");
      return false;
    }
  }
  for (const auto& r : n.srcs)
    if (r.buffer->dtype != n.dst.buffer->dtype) {
      error(s.loc, "dtype-mismatch",
            fmt::format("{}: source '{}' is {} but destination '{}' is {}", what, r.buffer->name,
                        to_string(r.buffer->dtype), n.dst.buffer->name,
                        to_string(n.dst.buffer->dtype)),
            "give the sorted pairs the keys' dtype");
      return false;
    }
  return true;
}

void Verifier::check_sort(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
  if (!sort_dtypes(n, s, what)) return;
  const int64_t len = n.srcs[0].elements();
  if (len % 32 != 0) {
    error(s.loc, "shape-mismatch",
          fmt::format("{}: source {} has {} elements; expected a multiple of 32 (the hardware "
                      "sorts 32-element blocks and pads the last one in place)",
                      what, print(n.srcs[0]), len),
          fmt::format("allocate the source with {} elements", (len + 31) / 32 * 32));
    return;
  }
  if (n.dst.elements() > 2 * len)
    error(s.loc, "shape-mismatch",
          fmt::format("{}: destination {} has {} elements; the sort gives at most {} "
                      "(a value and an index per source element)",
                      what, print(n.dst), n.dst.elements(), 2 * len),
          "slice the destination to the pairs wanted");
  if (auto* c = std::get_if<double>(&n.scalar->value); c && (*c < 0 || *c > len))
    error(s.loc, "shape-mismatch",
          fmt::format("{}: {} valid elements, but the source {} has {}", what, *c, print(n.srcs[0]),
                      len),
          "pass a count between 0 and the source's element count");
  else if (std::holds_alternative<Region>(n.scalar->value))
    error(s.loc, "bad-operand",
          fmt::format("{}: the valid count is read from UB; expected a number or an integer "
                      "expression",
                      what),
          "pass the count as a constant or an index expression");
}

void Verifier::check_sort32(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
  const Region &keys = n.srcs[0], &idx = n.srcs[1];
  const DType dt = n.dst.buffer->dtype;
  if (dt != keys.buffer->dtype || (dt != DType::F32 && dt != DType::F16)) {
    error(s.loc, "dtype-mismatch",
          fmt::format("{}: keys '{}' are {} and destination '{}' is {}; expected both f32 or "
                      "both f16",
                      what, keys.buffer->name, to_string(keys.buffer->dtype), n.dst.buffer->name,
                      to_string(dt)),
          "tile::cast the keys to f32 first");
    return;
  }
  if (idx.buffer->dtype != DType::U32)
    error(s.loc, "dtype-mismatch",
          fmt::format("{}: indices '{}' are {}; expected u32", what, idx.buffer->name,
                      to_string(idx.buffer->dtype)),
          "store the indices as u32 (one per key)");
  const int64_t len = keys.elements(), per = sort32_elems_per_pair(dt);
  if (len % 32 != 0 || idx.elements() != len || n.dst.elements() != per * len)
    error(s.loc, "shape-mismatch",
          fmt::format("{}: {} keys, {} indices, {} destination elements; expected a multiple "
                      "of 32 keys (one block of 32 per repeat), as many indices, and {} "
                      "destination elements per key (an 8-byte (key, index) pair)",
                      what, len, idx.elements(), n.dst.elements(), per),
          fmt::format("give the destination {} elements", per * len));
}

void Verifier::check_merge_sort(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
  if (!sort_dtypes(n, s, what)) return;
  if (n.dst.buffer->dtype != DType::F32) {
    error(s.loc, "dtype-mismatch",
          fmt::format("{} on f16 pairs: the hardware's f16 MrgSort layout (four halves per "
                      "element) is not modelled",
                      what),
          "sort f32 (value, index) pairs");
    return;
  }
  int64_t total = 0;
  for (const auto& r : n.srcs) {
    if (r.elements() % 2 != 0)
      error(s.loc, "shape-mismatch",
            fmt::format("{}: source {} has {} elements; (value, index) pairs need an even "
                        "count",
                        what, print(r), r.elements()),
            "give each source two elements per sorted entry");
    total += r.elements();
  }
  if (n.dst.elements() < total)
    error(s.loc, "shape-mismatch",
          fmt::format("{}: destination {} has {} elements; the merged lists have {}", what,
                      print(n.dst), n.dst.elements(), total),
          fmt::format("allocate the destination with {} elements", total));
}

void Verifier::check_gather_mask(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
  const int64_t p = n.attrs[0];
  if (p < 1 || p > 7) {
    error(s.loc, "bad-operand",
          fmt::format("{}: pattern {}; expected 1..7 (P0101 P1010 P0001 P0010 P0100 P1000 "
                      "P1111)",
                      what, p),
          "use one of the built-in patterns");
    return;
  }
  if (n.srcs[0].buffer->dtype != n.dst.buffer->dtype)
    error(s.loc, "dtype-mismatch",
          fmt::format("{}: source '{}' is {} but destination '{}' is {}", what,
                      n.srcs[0].buffer->name, to_string(n.srcs[0].buffer->dtype),
                      n.dst.buffer->name, to_string(n.dst.buffer->dtype)),
          "gather_mask moves elements; tile::cast one operand first");
  int64_t kept = 0;
  for (int64_t i = 0, len = n.srcs[0].elements(); i < len; ++i)
    kept += gather_mask_keeps(p, i) ? 1 : 0;
  if (n.dst.elements() < kept)
    error(s.loc, "shape-mismatch",
          fmt::format("{}: the pattern keeps {} of the source's {} elements but destination {} "
                      "holds {}",
                      what, kept, n.srcs[0].elements(), print(n.dst), n.dst.elements()),
          fmt::format("give the destination at least {} elements", kept));
}

void Verifier::check_gatherb(const TileOpStmt& n, const StmtNode& s, const std::string& what) {
  const auto [reps, blk, rep] = n.attrs;
  const DType dt = n.dst.buffer->dtype;
  if (n.srcs[0].buffer->dtype != dt)
    error(s.loc, "dtype-mismatch",
          fmt::format("{}: source '{}' is {} but destination '{}' is {}", what,
                      n.srcs[0].buffer->name, to_string(n.srcs[0].buffer->dtype),
                      n.dst.buffer->name, to_string(dt)),
          "gatherb moves bytes of one type; tile::cast one operand first");
  if (n.srcs[1].buffer->dtype != DType::U32)
    error(s.loc, "dtype-mismatch",
          fmt::format("{}: offsets '{}' are {}; expected u32 byte offsets", what,
                      n.srcs[1].buffer->name, to_string(n.srcs[1].buffer->dtype)),
          "store the byte offsets of the 32-byte blocks as u32");
  if (reps < 1 || blk < 0 || rep < 0) {
    error(s.loc, "bad-operand",
          fmt::format("{}: repeat {}, block stride {}, repeat stride {}; expected a repeat "
                      ">= 1 and strides >= 0",
                      what, reps, blk, rep),
          "pass the repeat count and the strides in 32-byte blocks");
    return;
  }
  if (n.srcs[1].elements() < 8 * reps)
    error(s.loc, "shape-mismatch",
          fmt::format("{}: {} repeats read {} offsets but '{}' has {}", what, reps, 8 * reps,
                      n.srcs[1].buffer->name, n.srcs[1].elements()),
          "one offset per 32-byte block: 8 per repeat");
  const int64_t blocks = (reps - 1) * rep + 7 * blk + 1,
                have = n.dst.elements() * dtype_bytes(dt) / 32;
  if (blocks > have)
    error(s.loc, "shape-mismatch",
          fmt::format("{}: the last block written is block {} of destination {}, which holds "
                      "{} 32-byte blocks",
                      what, blocks - 1, print(n.dst), have),
          "lower the repeat count or the strides, or enlarge the destination");
}

}  // namespace tilepipe::verify_detail

// Operand forms of vector ops that the IR's TileOpStmt carries without extra fields: the
// bit-packed compare / select mask, the cast's rounding mode and the broadcast's direction
// (TileOpStmt::attrs[0]).
// Shared by the verifier and the simulator's values (docs/ir.md "Tile ops").
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tilepipe/ir.h"

namespace tilepipe::ir {

/// A compare destination or a select mask of u8 / i8 with one eighth of the lanes' element
/// count holds one bit per lane (bit k of byte j is lane 8 j + k), as the hardware's
/// Compare writes and Select reads it; with as many elements as lanes it holds one 0/1
/// element per lane.
inline bool packed_mask(DType mask_dtype, int64_t mask_elements, int64_t lanes) {
  return (mask_dtype == DType::U8 || mask_dtype == DType::I8) && lanes > 1 &&
         mask_elements * 8 == lanes;
}

/// Sort32 writes each (key, index) pair as 8 bytes: an f32 key and the u32 index bits, or
/// an f16 key, 2 bytes of padding and the index bits: 2 or 4 elements of the key's type.
inline int64_t sort32_elems_per_pair(DType key) {
  return key == DType::F16 ? 4 : 2;
}

/// A cast's rounding of a float source into an integer destination (attrs[0]); the
/// original's CAST_NONE and CAST_RINT are Rint (to nearest, ties to even). With attrs[1]
/// = kCastIntegral, a float tile cast into its own type is rounded to integral values by
/// it (AscendC's Cast of f32 into f32 with CAST_RINT / FLOOR / CEIL / ROUND / TRUNC).
enum class CastRound : int64_t { Rint = 0, Floor = 1, Ceil = 2, Round = 3, Trunc = 4 };
inline constexpr int64_t kCastIntegral = 1;

inline const char* to_string(CastRound r) {
  switch (r) {
    case CastRound::Rint:
      return "rint";
    case CastRound::Floor:
      return "floor";
    case CastRound::Ceil:
      return "ceil";
    case CastRound::Round:
      return "round";
    case CastRound::Trunc:
      return "trunc";
  }
  return "?";
}

inline bool valid_cast_round(int64_t v) {
  return v >= 0 && v <= 4;
}

/// The conversions the vector unit's Cast does in one instruction on A2/A3 (AscendC's Cast):
/// f16 <-> f32, f32 <-> bf16, f16 / f32 / bf16 -> i32, f16 / f32 -> i16, f16 -> i8 / u8,
/// f32 -> i64, i64 -> f32 / i32, i32 -> f32 / i64 / i16, i16 -> f16 / f32, i8 / u8 -> f16.
/// u16 / u32 / u64 convert as i16 / i32 / i64 and bool as u8 (the same width).
inline bool direct_cast(DType from, DType to) {
  auto twin = [](DType t) {
    switch (t) {
      case DType::U16:
        return DType::I16;
      case DType::U32:
        return DType::I32;
      case DType::U64:
        return DType::I64;
      case DType::Bool:
        return DType::U8;
      default:
        return t;
    }
  };
  using enum DType;
  const DType a = twin(from), b = twin(to);
  if (a == b) return true;
  static constexpr std::pair<DType, DType> kDirect[] = {
      {F16, F32}, {F32, F16}, {F32, BF16}, {BF16, F32}, {F16, I32}, {F32, I32}, {BF16, I32},
      {F16, I16}, {F32, I16}, {F16, I8},   {F16, U8},   {F32, I64}, {I64, F32}, {I64, I32},
      {I32, F32}, {I32, I64}, {I32, I16},  {I16, F16},  {I16, F32}, {I8, F16},  {U8, F16}};
  for (auto [x, y] : kDirect)
    if (x == a && y == b) return true;
  return false;
}

/// The dtypes a cast from `from` to `to` writes, in order, `to` last: the shortest chain of
/// direct casts (an i64 -> f16 cast is i64 -> f32 -> f16, two instructions). Every pair has
/// one: each type reaches f32 or f16 and f32 reaches every type.
inline std::vector<DType> cast_path(DType from, DType to) {
  constexpr int n = static_cast<int>(DType::Bool) + 1;
  std::array<int, n> prev;
  prev.fill(-1);
  prev[static_cast<size_t>(from)] = static_cast<int>(from);
  std::vector<DType> queue = {from};
  for (size_t q = 0; q < queue.size() && prev[static_cast<size_t>(to)] < 0; ++q)
    for (int d = 0; d < n; ++d)
      if (prev[static_cast<size_t>(d)] < 0 && direct_cast(queue[q], static_cast<DType>(d))) {
        prev[static_cast<size_t>(d)] = static_cast<int>(queue[q]);
        queue.push_back(static_cast<DType>(d));
      }
  std::vector<DType> path;
  for (DType d = to; path.empty() || d != from;
       d = static_cast<DType>(prev[static_cast<size_t>(d)]))
    path.insert(path.begin(), d);
  return path;
}

/// A broadcast's direction (attrs[0]). By the source's shape: a [1, C] row, or a vector of
/// the destination's column count but not its row count, repeats down the rows, any other
/// vector gives one value per row. A pass that knows the direction says it, since the shape
/// may stop saying it: a version slot turns a vector [R] into a row-shaped [1, R].
enum class BroadcastDir : int64_t {
  ByShape = 0,
  Column = 1,  // the source holds one value per row
  Row = 2,     // the source is a row, repeated down the rows
};

inline bool valid_broadcast_dir(int64_t v) {
  return v >= 0 && v <= 2;
}

/// A tile as the vector unit sees it: [rows, cols], cols the last extent after leading
/// single dimensions are dropped, rows the product of the others (1 for a vector).
inline std::pair<int64_t, int64_t> tile_matrix(const Region& r) {
  auto sq = r.squeezed();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < sq.size(); ++i) rows *= sq[i];
  return {rows, sq.back()};
}

/// The shape rule of a broadcast by shape: one value per row when the vector (extents as
/// written, outermost first) has the destination's row count and is not shaped as a row
/// [1, n].
inline bool broadcast_per_row_by_shape(const int64_t* extent, int rank, int64_t len, int64_t rows) {
  if (len != rows) return false;
  const bool row_shaped = rank >= 2 && extent[rank - 2] == 1 && extent[rank - 1] == len && len > 1;
  return !row_shaped;
}

/// v rounded to an integer by mode r (the store then saturates to the destination type).
inline double cast_round(CastRound r, double v) {
  switch (r) {
    case CastRound::Floor:
      return std::floor(v);
    case CastRound::Ceil:
      return std::ceil(v);
    case CastRound::Round:
      return std::round(v);  // ties away from zero
    case CastRound::Trunc:
      return std::trunc(v);
    case CastRound::Rint:
    default:
      return std::nearbyint(v);  // the default floating-point environment: ties to even
  }
}

}  // namespace tilepipe::ir

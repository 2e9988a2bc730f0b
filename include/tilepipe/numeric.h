// Storage formats of the simulated machine: fp16 and bf16 with round-to-nearest-even,
// and typed element load/store on raw bytes. Shared by the simulator and kernel references.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "tilepipe/ir.h"

namespace tilepipe {

/// float -> IEEE binary16 bits, round to nearest even; overflow -> inf, NaN stays NaN.
/// Branch-free (selects), so conversion loops vectorise: normals rebias the exponent and
/// round by adding 0xfff + the kept lsb; subnormals let one float add (RNE) align the 10
/// mantissa bits at the bottom of 0.5f. Checked against a bit-by-bit rounding on all 2^32
/// inputs when written (Numeric tests keep the boundaries).
inline uint16_t float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t mag = x & 0x7fffffffu;
  const uint32_t normal = (mag + 0xc8000fffu + ((mag >> 13) & 1u)) >> 13;  // - (112 << 23)
  float m, d;
  std::memcpy(&m, &mag, 4);
  d = m + 0.5f;
  uint32_t du;
  std::memcpy(&du, &d, 4);
  uint32_t r = mag < 0x38800000u ? du - 0x3f000000u : normal;  // below 2^-14: subnormal
  r = mag >= 0x47800000u ? 0x7c00u : r;                        // >= 65536 -> inf
  r = mag > 0x7f800000u ? 0x7e00u : r;                         // NaN
  return static_cast<uint16_t>(sign | r);
}

inline float f16_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu, x;
  if (e == 0) {
    if (m == 0) {
      x = sign;
    } else {  // subnormal: normalise
      e = 113;
      while (!(m & 0x400u)) {
        m <<= 1;
        --e;
      }
      x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (e == 31) {
    x = sign | 0x7f800000u | (m << 13);
  } else {
    x = sign | ((e + 112) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

inline float bf16_to_float(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

/// Rounds a value to what a `t` element can hold (identity for f32 except double->float).
inline double round_to(ir::DType t, double v) {
  switch (t) {
    case ir::DType::F16:
      return f16_to_float(float_to_f16(static_cast<float>(v)));
    case ir::DType::BF16:
      return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    case ir::DType::F32:
      return static_cast<float>(v);
    default:
      return v;
  }
}

inline double load_elem(ir::DType t, const uint8_t* p) {
  switch (t) {
    case ir::DType::F16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return f16_to_float(h);
    }
    case ir::DType::BF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_to_float(h);
    }
    case ir::DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case ir::DType::I32: {
      int32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
    case ir::DType::I8:
      return static_cast<int8_t>(*p);
    case ir::DType::U8:
      return *p;
    case ir::DType::I16: {
      int16_t i;
      std::memcpy(&i, p, 2);
      return i;
    }
    case ir::DType::U16: {
      uint16_t i;
      std::memcpy(&i, p, 2);
      return i;
    }
    case ir::DType::U32: {
      uint32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
    case ir::DType::I64: {  // exact to 2^53 (values are doubles; copies keep every bit)
      int64_t i;
      std::memcpy(&i, p, 8);
      return static_cast<double>(i);
    }
    case ir::DType::U64: {
      uint64_t i;
      std::memcpy(&i, p, 8);
      return static_cast<double>(i);
    }
    case ir::DType::Bool:
      return *p != 0 ? 1 : 0;
  }
  return 0;
}

/// v (a double, or a long double holding a 64-bit integer exactly) saturated into a 64-bit
/// integer type: 2^63 and 2^64 are doubles, INT64_MAX and UINT64_MAX are not, so the top is
/// compared before the conversion.
template <class F>
int64_t saturate_i64(F v) {
  if (v != v) return 0;
  if (v >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

template <class F>
uint64_t saturate_u64(F v) {
  if (v != v || v <= 0) return 0;
  if (v >= 18446744073709551616.0) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(v);
}

/// Stores with the hardware's conversion: RNE for floats, saturation for integers.
inline void store_elem(ir::DType t, uint8_t* p, double v) {
  auto sat = [&](double lo, double hi) {
    if (v != v) return 0.0;
    return v < lo ? lo : (v > hi ? hi : v);
  };
  switch (t) {
    case ir::DType::F16: {
      uint16_t h = float_to_f16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case ir::DType::BF16: {
      uint16_t h = float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case ir::DType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case ir::DType::I32: {
      int32_t i = static_cast<int32_t>(sat(-2147483648.0, 2147483647.0));
      std::memcpy(p, &i, 4);
      return;
    }
    case ir::DType::I8:
      *p = static_cast<uint8_t>(static_cast<int8_t>(sat(-128, 127)));
      return;
    case ir::DType::U8:
      *p = static_cast<uint8_t>(sat(0, 255));
      return;
    case ir::DType::I16: {
      int16_t i = static_cast<int16_t>(sat(-32768, 32767));
      std::memcpy(p, &i, 2);
      return;
    }
    case ir::DType::U16: {
      uint16_t i = static_cast<uint16_t>(sat(0, 65535));
      std::memcpy(p, &i, 2);
      return;
    }
    case ir::DType::U32: {
      uint32_t i = static_cast<uint32_t>(sat(0, 4294967295.0));
      std::memcpy(p, &i, 4);
      return;
    }
    case ir::DType::I64: {
      const int64_t i = saturate_i64(v);
      std::memcpy(p, &i, 8);
      return;
    }
    case ir::DType::U64: {
      const uint64_t i = saturate_u64(v);
      std::memcpy(p, &i, 8);
      return;
    }
    case ir::DType::Bool:  // any nonzero value is true (NaN too, as C++'s conversion)
      *p = v != 0 ? 1 : 0;
      return;
  }
}

/// v as a `t` element holds it after the hardware's conversion (store_elem, then load_elem):
/// the value at each step of a conversion the hardware does in more than one.
inline double convert_to(ir::DType t, double v) {
  uint8_t b[8];
  store_elem(t, b, v);
  return load_elem(t, b);
}

/// load_elem over n contiguous elements: one dtype dispatch, then a plain loop.
inline void load_elems(ir::DType t, const uint8_t* p, double* out, size_t n) {
  if (t == ir::DType::F16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = f16_to_float(h);
    }
  } else if (t == ir::DType::F32) {
    for (size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      out[i] = f;
    }
  } else {
    const size_t eb = static_cast<size_t>(ir::dtype_bytes(t));
    for (size_t i = 0; i < n; ++i) out[i] = load_elem(t, p + i * eb);
  }
}

/// store_elem over n contiguous elements: one dtype dispatch, then a plain loop.
inline void store_elems(ir::DType t, const double* v, uint8_t* p, size_t n) {
  if (t == ir::DType::F16) {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t h = float_to_f16(static_cast<float>(v[i]));
      std::memcpy(p + 2 * i, &h, 2);
    }
  } else if (t == ir::DType::F32) {
    for (size_t i = 0; i < n; ++i) {
      const float f = static_cast<float>(v[i]);
      std::memcpy(p + 4 * i, &f, 4);
    }
  } else {
    const size_t eb = static_cast<size_t>(ir::dtype_bytes(t));
    for (size_t i = 0; i < n; ++i) store_elem(t, p + i * eb, v[i]);
  }
}

}  // namespace tilepipe

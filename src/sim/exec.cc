// Functional semantics of each instruction: reads operands in logical row-major order,
// computes as the hardware does (f32 math for float types, rounding on store to the
// destination dtype; f32 accumulation in the cube), writes the destination.
//
// Speed: values go through per-thread scratch buffers (no allocation per instruction), in
// float where every operand is a float type (each such value is exactly a float, and the
// math is f32 anyway), in long double where an operand is a 64-bit integer (its 64-bit
// mantissa holds every i64 and u64 exactly) and in double otherwise; each loop is compiled per
// dtype and op, so no element pays a switch; the cube's matmul is cube_matmul (OpenBLAS, one
// thread).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "instr.h"
#include "tilepipe/numeric.h"
#include "tilepipe/sim.h"
#include "tilepipe/vec_modes.h"

namespace tilepipe::sim {

using ir::DType;
using ir::TileOpKind;

namespace {

constexpr int elem_bytes(DType d) {
  switch (d) {
    case DType::F32:
    case DType::I32:
    case DType::U32:
      return 4;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
    case DType::U16:
      return 2;
    case DType::I64:
    case DType::U64:
      return 8;
    case DType::I8:
    case DType::U8:
    case DType::Bool:
      return 1;
  }
  return 1;
}

static_assert(std::numeric_limits<long double>::digits >= 64,
              "64-bit integer values need a long double that holds them exactly");

/// Calls f.template operator()<D>() with the dtype as a constant, so a loop's element
/// conversions compile to one conversion each.
template <class F>
void with_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::F16:
      return f.template operator()<DType::F16>();
    case DType::BF16:
      return f.template operator()<DType::BF16>();
    case DType::F32:
      return f.template operator()<DType::F32>();
    case DType::I32:
      return f.template operator()<DType::I32>();
    case DType::I8:
      return f.template operator()<DType::I8>();
    case DType::U8:
      return f.template operator()<DType::U8>();
    case DType::I16:
      return f.template operator()<DType::I16>();
    case DType::U16:
      return f.template operator()<DType::U16>();
    case DType::U32:
      return f.template operator()<DType::U32>();
    case DType::I64:
      return f.template operator()<DType::I64>();
    case DType::U64:
      return f.template operator()<DType::U64>();
    case DType::Bool:
      return f.template operator()<DType::Bool>();
  }
}

/// f16 -> float for every bit pattern: a lookup where f16_to_float branches per element.
const float* f16_table() {
  static const std::vector<float> t = [] {
    std::vector<float> v(1 << 16);
    for (uint32_t h = 0; h < v.size(); ++h) v[h] = f16_to_float(static_cast<uint16_t>(h));
    return v;
  }();
  return t.data();
}

/// Calls f(byte pointer, run length, element stride in bytes) for each innermost run of
/// the access in logical row-major order.
template <class F>
void for_each_row(const Access& a, int eb, F&& f) {
  const auto& t = *a.t;
  uint8_t* base = a.mem + a.offset * eb;
  int64_t e[lower::kMaxRank] = {1, 1, 1, 1}, s[lower::kMaxRank] = {0, 0, 0, 0};
  int off = lower::kMaxRank - t.rank;  // right-align dims into 4
  for (int d = 0; d < t.rank; ++d) {
    e[off + d] = t.extent[d];
    s[off + d] = t.stride[d] * eb;
  }
  for (int64_t i0 = 0; i0 < e[0]; ++i0)
    for (int64_t i1 = 0; i1 < e[1]; ++i1)
      for (int64_t i2 = 0; i2 < e[2]; ++i2) f(base + i0 * s[0] + i1 * s[1] + i2 * s[2], e[3], s[3]);
}

/// Reads the access into out (its elements in logical order) as T.
template <class T>
T* read(const Access& a, T* out) {
  with_dtype(a.t->dtype, [&]<DType D>() {
    constexpr int eb = elem_bytes(D);
    T* o = out;
    for_each_row(a, eb, [&](const uint8_t* p, int64_t n, int64_t s) {
      if constexpr (D == DType::F16) {
        const float* tab = f16_table();
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, p + i * s, 2);
          o[i] = static_cast<T>(tab[h]);
        }
      } else if constexpr (D == DType::F32 && std::is_same_v<T, float>) {
        if (s == 4)
          std::memcpy(o, p, static_cast<size_t>(n) * 4);
        else
          for (int64_t i = 0; i < n; ++i) std::memcpy(o + i, p + i * s, 4);
      } else if constexpr (D == DType::I64 || D == DType::U64) {  // exact in long double
        using I = std::conditional_t<D == DType::I64, int64_t, uint64_t>;
        for (int64_t i = 0; i < n; ++i) {
          I x;
          std::memcpy(&x, p + i * s, 8);
          o[i] = static_cast<T>(x);
        }
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(load_elem(D, p + i * s));
      }
      o += n;
    });
  });
  return out;
}

/// Writes v (logical order) to the access, rounding to its dtype (store_elem).
template <class T>
void write(const Access& a, const T* v) {
  with_dtype(a.t->dtype, [&]<DType D>() {
    constexpr int eb = elem_bytes(D);
    for_each_row(a, eb, [&](uint8_t* p, int64_t n, int64_t s) {
      if constexpr (D == DType::F32 && std::is_same_v<T, float>) {
        if (s == 4)
          std::memcpy(p, v, static_cast<size_t>(n) * 4);
        else
          for (int64_t i = 0; i < n; ++i) std::memcpy(p + i * s, v + i, 4);
      } else if constexpr (D == DType::F16) {
        // The hottest store (Cube results and softmax tiles cast to f16): converted in a
        // loop that vectorises, no round trip through double.
        if (s == 2) {
          uint16_t h[256];
          for (int64_t i0 = 0; i0 < n; i0 += 256) {
            const int64_t k = std::min<int64_t>(256, n - i0);
            for (int64_t i = 0; i < k; ++i) h[i] = float_to_f16(static_cast<float>(v[i0 + i]));
            std::memcpy(p + i0 * 2, h, static_cast<size_t>(k) * 2);
          }
        } else {
          for (int64_t i = 0; i < n; ++i) {
            const uint16_t h = float_to_f16(static_cast<float>(v[i]));
            std::memcpy(p + i * s, &h, 2);
          }
        }
      } else if constexpr (D == DType::I64 || D == DType::U64) {  // saturated, exact
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (D == DType::I64) {
            const int64_t x = saturate_i64(v[i]);
            std::memcpy(p + i * s, &x, 8);
          } else {
            const uint64_t x = saturate_u64(v[i]);
            std::memcpy(p + i * s, &x, 8);
          }
        }
      } else {
        for (int64_t i = 0; i < n; ++i) store_elem(D, p + i * s, static_cast<double>(v[i]));
      }
      v += n;
    });
  });
}

/// Moves the access's elements between memories without converting them: a DMA copy keeps
/// the bits (NaN payloads included).
void copy_raw(const Access& dst, const Access& src) {
  const int eb = dst.t->elem_bytes;
  const auto& sd = *src.t;
  // Source rows in order: each destination run takes the next elements of the source.
  int64_t e[lower::kMaxRank] = {1, 1, 1, 1}, s[lower::kMaxRank] = {0, 0, 0, 0};
  int off = lower::kMaxRank - sd.rank;
  for (int d = 0; d < sd.rank; ++d) {
    e[off + d] = sd.extent[d];
    s[off + d] = sd.stride[d] * eb;
  }
  const uint8_t* sbase = src.mem + src.offset * eb;
  int64_t row = 0, col = 0;  // position in the source: row (flattened outer dims), column
  auto src_at = [&](int64_t r, int64_t c) {
    int64_t i2 = r % e[2], i1 = (r / e[2]) % e[1], i0 = r / (e[2] * e[1]);
    return sbase + i0 * s[0] + i1 * s[1] + i2 * s[2] + c * s[3];
  };
  for_each_row(dst, eb, [&](uint8_t* p, int64_t n, int64_t ds) {
    while (n > 0) {
      int64_t k = std::min(n, e[3] - col);
      const uint8_t* q = src_at(row, col);
      if (ds == eb && s[3] == eb) {
        std::memcpy(p, q, static_cast<size_t>(k * eb));
      } else {
        for (int64_t i = 0; i < k; ++i)
          std::memcpy(p + i * ds, q + i * s[3], static_cast<size_t>(eb));
      }
      p += k * ds;
      n -= k;
      col += k;
      if (col == e[3]) {
        col = 0;
        ++row;
      }
    }
  });
}

/// The two accesses may share bytes (an in-place copy must read everything first).
bool overlap(const Access& a, const Access& b) {
  const uint8_t *alo = a.mem + a.offset * a.t->elem_bytes,
                *blo = b.mem + b.offset * b.t->elem_bytes;
  return alo < blo + b.t->span * b.t->elem_bytes && blo < alo + a.t->span * a.t->elem_bytes;
}

/// Per-thread value buffers, grown to the largest operand seen and then reused.
template <class T>
T* scratch(int i, size_t n) {
  thread_local std::array<std::vector<T>, 6> bufs;
  auto& b = bufs[static_cast<size_t>(i)];
  if (b.size() < n) b.resize(n);
  return b.data();
}

/// out [cols, rows] = x [rows, cols] (row-major), returned.
template <class T>
T* transposed(const T* x, int64_t rows, int64_t cols, T* out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = x[r * cols + c];
  return out;
}

/// Float ops run in f32 (what the vector unit computes for f32; for f16/bf16 the f32 result
/// rounded on store equals the correctly rounded narrow result for + - * / sqrt).
template <TileOpKind Op>
double apply_float(double a, double b) {
  float x = static_cast<float>(a), y = static_cast<float>(b);
  if constexpr (Op == TileOpKind::Add) return x + y;
  if constexpr (Op == TileOpKind::Sub) return x - y;
  if constexpr (Op == TileOpKind::Mul) return x * y;
  if constexpr (Op == TileOpKind::Div) return x / y;
  if constexpr (Op == TileOpKind::Max) return std::fmax(x, y);
  if constexpr (Op == TileOpKind::Min) return std::fmin(x, y);
  if constexpr (Op == TileOpKind::Pow) return std::pow(x, y);
  return 0;
}

/// An integer value (a double, or a long double holding an i64 / u64 exactly) as a 128-bit
/// integer, which holds both signed and unsigned 64-bit values; a value past that range
/// (only a non-integer type's) saturates.
template <class T>
__int128 to_int128(T v) {
  if (v != v) return 0;
  if (v >= static_cast<T>(18446744073709551616.0)) return static_cast<__int128>(~0ull);
  if (v < 0) return saturate_i64(v);
  return static_cast<__int128>(static_cast<uint64_t>(v));
}

/// Integer ops in 128 bits (unsigned, so overflow wraps): the low 64 bits are exact for
/// signed and unsigned operands, and the caller wraps them to the element's width.
template <TileOpKind Op, class T>
uint64_t apply_int(T a, T b) {
  const __int128 x = to_int128(a), y = to_int128(b);
  using U = unsigned __int128;
  if constexpr (Op == TileOpKind::Add) return static_cast<uint64_t>(U(x) + U(y));
  if constexpr (Op == TileOpKind::Sub) return static_cast<uint64_t>(U(x) - U(y));
  if constexpr (Op == TileOpKind::Mul) return static_cast<uint64_t>(U(x) * U(y));
  if constexpr (Op == TileOpKind::Div) return y == 0 ? 0 : static_cast<uint64_t>(x / y);
  if constexpr (Op == TileOpKind::Max) return static_cast<uint64_t>(std::max(x, y));
  if constexpr (Op == TileOpKind::Min) return static_cast<uint64_t>(std::min(x, y));
  if constexpr (Op == TileOpKind::Pow) {  // exact product; a negative exponent truncates
    if (y < 0) return static_cast<uint64_t>(x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0);
    uint64_t r = 1, base = static_cast<uint64_t>(x);
    for (__int128 e = y; e > 0; e >>= 1, base *= base)
      if (e & 1) r *= base;
    return r;
  }
  return 0;
}

/// Calls f.template operator()<Op>() for a binary tile op; false for another op.
template <class F>
bool with_binary(TileOpKind op, F&& f) {
  switch (op) {
    case TileOpKind::Add:
      return f.template operator()<TileOpKind::Add>(), true;
    case TileOpKind::Sub:
      return f.template operator()<TileOpKind::Sub>(), true;
    case TileOpKind::Mul:
      return f.template operator()<TileOpKind::Mul>(), true;
    case TileOpKind::Div:
      return f.template operator()<TileOpKind::Div>(), true;
    case TileOpKind::Max:
      return f.template operator()<TileOpKind::Max>(), true;
    case TileOpKind::Min:
      return f.template operator()<TileOpKind::Min>(), true;
    case TileOpKind::Pow:
      return f.template operator()<TileOpKind::Pow>(), true;
    default:
      return false;
  }
}

/// An integer result reduced to the element's width in two's complement: integer vector
/// arithmetic wraps on the hardware (only conversions, casts and copies, saturate).
template <class T>
T wrap_int(ir::DType dt, uint64_t r) {
  const int w = static_cast<int>(ir::dtype_bytes(dt)) * 8;
  const uint64_t mask = w >= 64 ? ~0ull : (1ull << w) - 1;
  r &= mask;
  if (ir::is_signed_int(dt) && (r >> (w - 1)) & 1)
    return static_cast<T>(static_cast<int64_t>(r | ~mask));
  return static_cast<T>(r);
}

/// The integer bit operations in the element's width (two's complement), wrapping as the
/// hardware's do.
template <class T>
T apply_bits(TileOpKind op, ir::DType dt, T a, T b) {
  const int w = static_cast<int>(ir::dtype_bytes(dt)) * 8;
  const bool sign = ir::is_signed_int(dt);
  const uint64_t mask = w >= 64 ? ~0ull : (1ull << w) - 1;
  uint64_t x = static_cast<uint64_t>(to_int128(a)) & mask;
  uint64_t y = static_cast<uint64_t>(to_int128(b)) & mask;
  uint64_t r = 0;
  int sh = static_cast<int>(std::clamp<__int128>(to_int128(b), 0, w));
  switch (op) {
    case TileOpKind::BitAnd:
      r = x & y;
      break;
    case TileOpKind::BitOr:
      r = x | y;
      break;
    case TileOpKind::BitXor:
      r = x ^ y;
      break;
    case TileOpKind::BitNot:
      r = ~x;
      break;
    case TileOpKind::ShiftLeft:
      r = sh >= w ? 0 : x << sh;
      break;
    case TileOpKind::ShiftRight: {
      bool neg = sign && (x >> (w - 1)) & 1;
      r = sh >= w ? 0 : x >> sh;
      if (neg && sh > 0) r |= sh >= w ? mask : mask & ~(mask >> sh);  // arithmetic
      break;
    }
    default:
      break;
  }
  return wrap_int<T>(dt, r);
}

/// Transcendentals are correctly rounded: computed in double on the f32 operand and rounded
/// once by the store (glibc's float expf / logf are within 0.502 ulp, not exact, and a
/// float16 result near a rounding boundary then differs from a reference computed the same
/// way: docs/simulator.md, "Functional and timing mode").
template <TileOpKind Op>
double apply_unary(double a) {
  const double x = static_cast<float>(a);
  if constexpr (Op == TileOpKind::Exp) return std::exp(x);
  if constexpr (Op == TileOpKind::Ln) return std::log(x);
  if constexpr (Op == TileOpKind::Abs) return std::fabs(a);
  if constexpr (Op == TileOpKind::Sqrt) return std::sqrt(x);
  if constexpr (Op == TileOpKind::Rsqrt) return 1.0 / std::sqrt(x);
  if constexpr (Op == TileOpKind::Reciprocal) return 1.0f / static_cast<float>(x);
  if constexpr (Op == TileOpKind::Relu) return a > 0 ? a : 0.0;
  if constexpr (Op == TileOpKind::Sin) return std::sin(x);
  if constexpr (Op == TileOpKind::Cos) return std::cos(x);
  if constexpr (Op == TileOpKind::Round) return std::round(x);  // halves away from zero
  return a;
}

/// Calls f.template operator()<Op>() for a unary tile op (any other op: the identity).
template <class F>
void with_unary(TileOpKind op, F&& f) {
  switch (op) {
    case TileOpKind::Exp:
      return f.template operator()<TileOpKind::Exp>();
    case TileOpKind::Ln:
      return f.template operator()<TileOpKind::Ln>();
    case TileOpKind::Abs:
      return f.template operator()<TileOpKind::Abs>();
    case TileOpKind::Sqrt:
      return f.template operator()<TileOpKind::Sqrt>();
    case TileOpKind::Rsqrt:
      return f.template operator()<TileOpKind::Rsqrt>();
    case TileOpKind::Reciprocal:
      return f.template operator()<TileOpKind::Reciprocal>();
    case TileOpKind::Relu:
      return f.template operator()<TileOpKind::Relu>();
    case TileOpKind::Sin:
      return f.template operator()<TileOpKind::Sin>();
    case TileOpKind::Cos:
      return f.template operator()<TileOpKind::Cos>();
    case TileOpKind::Round:
      return f.template operator()<TileOpKind::Round>();
    default:
      return f.template operator()<TileOpKind::Fill>();  // apply_unary's identity
  }
}

template <class T>
bool compare(ir::CmpMode m, T a, T b) {
  switch (m) {
    case ir::CmpMode::EQ:
      return a == b;
    case ir::CmpMode::NE:
      return a != b;
    case ir::CmpMode::GT:
      return a > b;
    case ir::CmpMode::GE:
      return a >= b;
    case ir::CmpMode::LT:
      return a < b;
    case ir::CmpMode::LE:
      return a <= b;
  }
  return false;
}

/// Descending by key, ties by the smaller index (Sort32 and MrgSort are stable); a NaN key
/// sorts first so that the order stays a strict weak one.
template <class T>
bool before(T ka, int64_t ia, T kb, int64_t ib) {
  const bool na = std::isnan(static_cast<double>(ka)), nb = std::isnan(static_cast<double>(kb));
  if (na != nb) return na;
  if (!na && ka != kb) return ka > kb;
  return ia < ib;
}

/// The library's Sort: the first `count` elements of src as (value, index) pairs sorted
/// descending, the rest of the last 32-element block padded with -inf (their indices kept);
/// the index is stored as a value of the key's type. out holds dst's old values: only the
/// leading pairs dst has room for change.
template <class T>
void sort_pairs(const T* src, int64_t len, double count, T* out, int64_t n) {
  const int64_t cnt = std::clamp<int64_t>(static_cast<int64_t>(count), 0, len);
  const int64_t aligned = std::min(len, (cnt + 31) / 32 * 32);
  auto key = [&](int64_t i) {
    return i < cnt ? src[i] : static_cast<T>(-std::numeric_limits<float>::infinity());
  };
  std::vector<int64_t> idx(static_cast<size_t>(aligned));
  for (int64_t i = 0; i < aligned; ++i) idx[static_cast<size_t>(i)] = i;
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return before(key(a), a, key(b), b); });
  for (int64_t e = 0; e < std::min(n, 2 * aligned); ++e) {
    const int64_t i = idx[static_cast<size_t>(e / 2)];
    out[e] = e % 2 ? static_cast<T>(i) : key(i);
  }
}

/// Turns n values of type `from` into what a cast to `to` stores: through each intermediate
/// type of the hardware's chain of casts (ir::cast_path: i64 -> f16 rounds to f32 first), a
/// float into an integer type rounded by `mode`; the final store rounds and saturates.
template <class T>
void convert(T* v, size_t n, DType from, DType to, ir::CastRound mode) {
  DType cur = from;
  for (DType d : ir::cast_path(from, to)) {
    const bool round = ir::is_float(cur) && !ir::is_float(d), last = d == to;
    if (round || !last)
      for (size_t i = 0; i < n; ++i) {
        T x = v[i];
        if (round) x = static_cast<T>(ir::cast_round(mode, static_cast<double>(x)));
        if (!last) x = static_cast<T>(convert_to(d, static_cast<double>(x)));
        v[i] = x;
      }
    cur = d;
  }
}

/// Every operand a float type: each value is exactly a float, so T = float loses nothing.
bool all_float(const Instr& in) {
  for (int i = 0; i < in.t->num_acc; ++i)
    if (!ir::is_float(in.acc[static_cast<size_t>(i)].t->dtype)) return false;
  return true;
}

/// Vector ops; T is float or double (all_float). A scalar operand stays a double where the
/// op compares it (it is not rounded before the comparison).
/// Some operand a 64-bit integer type: long double values keep it exact.
bool any_wide(const Instr& in) {
  for (int i = 0; i < in.t->num_acc; ++i) {
    const DType d = in.acc[static_cast<size_t>(i)].t->dtype;
    if (d == DType::I64 || d == DType::U64) return true;
  }
  return false;
}

template <class T>
void exec_vec(const Instr& in) {
  const auto& t = *in.t;
  const Access& dst = in.acc[0];
  const bool fl = ir::is_float(dst.t->dtype);
  const size_t n = static_cast<size_t>(dst.t->elements());
  T* out = scratch<T>(0, n);
  auto operand = [&](int i) {
    const Access& a = in.acc[static_cast<size_t>(i)];
    return read(a, scratch<T>(i, std::max(n, static_cast<size_t>(a.t->elements()))));
  };
  // The second operand of a binary op: a tile, or the scalar for every element.
  auto second = [&](int i) {
    if (t.num_acc > i) return operand(i);
    T* b = scratch<T>(i, n);
    std::fill(b, b + n, static_cast<T>(in.scalar));
    return b;
  };
  if (with_binary(t.tile_op, [&]<TileOpKind Op>() {
        const T* a = operand(1);
        const ir::DType dt = dst.t->dtype;
        auto loop = [&]<bool F>(const auto& b) {
          for (size_t i = 0; i < n; ++i) {
            if constexpr (F)
              out[i] = static_cast<T>(apply_float<Op>(a[i], b(i)));
            else
              out[i] = wrap_int<T>(dt, apply_int<Op, T>(a[i], static_cast<T>(b(i))));
          }
        };
        auto run = [&](const auto& b) {
          if (fl)
            loop.template operator()<true>(b);
          else
            loop.template operator()<false>(b);
        };
        if (t.num_acc > 2) {
          const T* b = operand(2);
          run([b](size_t i) { return b[i]; });
        } else {
          const double s = in.scalar;
          run([s](size_t) { return s; });
        }
      })) {
    write(dst, out);
    return;
  }
  switch (t.tile_op) {
    case TileOpKind::Axpy: {
      const T *x = operand(1), *y = read(dst, scratch<T>(2, n));
      float s = static_cast<float>(in.scalar);
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<float>(s * static_cast<float>(x[i])) + static_cast<float>(y[i]);
      break;
    }
    case TileOpKind::Cast: {
      out = operand(1);
      const auto mode = static_cast<ir::CastRound>(t.attrs[0]);
      if (t.attrs[1] == ir::kCastIntegral)  // a float into its own type: integral values
        for (size_t i = 0; i < n; ++i)
          out[i] = static_cast<T>(ir::cast_round(mode, static_cast<double>(out[i])));
      else
        convert(out, n, in.acc[1].t->dtype, dst.t->dtype, mode);
      break;
    }
    case TileOpKind::Fill:
    case TileOpKind::Store:
      std::fill(out, out + n, static_cast<T>(in.scalar));
      break;
    case TileOpKind::Broadcast: {
      const T* src = operand(1);
      int64_t rows = t.m, cols = t.n;
      const auto dir = static_cast<ir::BroadcastDir>(t.attrs[0]);
      const auto& v = *in.acc[1].t;
      if (dir == ir::BroadcastDir::Column ||
          (dir == ir::BroadcastDir::ByShape &&
           ir::broadcast_per_row_by_shape(v.extent.data(), v.rank, v.elements(), rows)))
        for (int64_t r = 0; r < rows; ++r) std::fill(out + r * cols, out + (r + 1) * cols, src[r]);
      else
        for (int64_t r = 0; r < rows; ++r) std::copy(src, src + cols, out + r * cols);
      break;
    }
    case TileOpKind::Compare: {
      const T* a = operand(1);
      const auto lanes = static_cast<size_t>(in.acc[1].t->elements());
      if (ir::packed_mask(dst.t->dtype, static_cast<int64_t>(n), static_cast<int64_t>(lanes))) {
        // one bit per lane, lane 8 j + k in bit k of byte j
        const T* b = t.num_acc > 2 ? operand(2) : nullptr;
        for (size_t j = 0; j < n; ++j) {
          unsigned byte = 0;
          for (size_t k = 0; k < 8; ++k) {
            const size_t i = 8 * j + k;
            if (compare<T>(t.cmp, a[i], b ? b[i] : static_cast<T>(in.scalar))) byte |= 1u << k;
          }
          out[j] = static_cast<T>(dst.t->dtype == ir::DType::I8
                                      ? static_cast<double>(static_cast<int8_t>(byte))
                                      : static_cast<double>(byte));
        }
        break;
      }
      if (t.num_acc > 2) {
        const T* b = operand(2);
        for (size_t i = 0; i < n; ++i) out[i] = compare<T>(t.cmp, a[i], b[i]) ? 1 : 0;
      } else {
        const T sc = static_cast<T>(in.scalar);
        for (size_t i = 0; i < n; ++i) out[i] = compare<T>(t.cmp, a[i], sc) ? 1 : 0;
      }
      break;
    }
    case TileOpKind::SelectOp: {
      const T *m = operand(1), *a = operand(2), *b = second(3);
      if (ir::packed_mask(in.acc[1].t->dtype, in.acc[1].t->elements(), static_cast<int64_t>(n))) {
        for (size_t i = 0; i < n; ++i) {
          const auto byte = static_cast<uint8_t>(static_cast<int>(m[i / 8]));
          out[i] = (byte >> (i % 8)) & 1u ? a[i] : b[i];
        }
        break;
      }
      for (size_t i = 0; i < n; ++i) out[i] = m[i] != 0 ? a[i] : b[i];
      break;
    }
    case TileOpKind::BitAnd:
    case TileOpKind::BitOr:
    case TileOpKind::BitXor:
    case TileOpKind::BitNot:
    case TileOpKind::ShiftLeft:
    case TileOpKind::ShiftRight: {
      const T *a = operand(1), *b = second(2);
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<T>(apply_bits(t.tile_op, dst.t->dtype, a[i], b[i]));
      break;
    }
    case TileOpKind::Transpose: {  // dst [m, n] from src [n, m]
      const T* src = operand(1);
      for (int64_t i = 0; i < t.m; ++i)
        for (int64_t j = 0; j < t.n; ++j) out[i * t.n + j] = src[j * t.m + i];
      break;
    }
    case TileOpKind::Gather: {
      const T* src = operand(1);
      const T* off = operand(2);
      const auto len = in.acc[1].t->elements();
      // u32 offsets are bytes from src's start (the hardware's Gather), i32 ones elements.
      const int64_t scale = in.acc[2].t->dtype == ir::DType::U32 ? in.acc[1].t->elem_bytes : 1;
      for (size_t i = 0; i < n; ++i) {
        auto o = static_cast<int64_t>(off[i]) / scale;
        out[i] = (o >= 0 && o < len) ? src[o] : T(0);
      }
      break;
    }
    case TileOpKind::Arange:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(in.scalar + static_cast<double>(i));
      break;
    case TileOpKind::Sort:
      read(dst, out);
      sort_pairs(operand(1), in.acc[1].t->elements(), in.scalar, out, static_cast<int64_t>(n));
      break;
    case TileOpKind::MergeSort: {  // k-way merge of descending pair lists
      read(dst, out);
      const T* list[3];
      int64_t len[3], pos[3] = {0, 0, 0};
      const int k = t.num_acc - 1;
      for (int l = 0; l < k; ++l) {
        list[l] = operand(l + 1);
        len[l] = in.acc[static_cast<size_t>(l + 1)].t->elements() / 2;
      }
      for (size_t e = 0; e + 1 < n; e += 2) {
        int best = -1;
        for (int l = 0; l < k; ++l)
          if (pos[l] < len[l] &&
              (best < 0 || before(list[l][2 * pos[l]], l, list[best][2 * pos[best]], best)))
            best = l;
        if (best < 0) break;
        out[e] = list[best][2 * pos[best]];
        out[e + 1] = list[best][2 * pos[best] + 1];
        ++pos[best];
      }
      break;
    }
    case TileOpKind::Sort32: {  // per 32-key block: (key, index bits) pairs, descending
      const T *keys = operand(1), *idx = operand(2);
      const bool half = dst.t->dtype == ir::DType::F16;
      const int64_t per = ir::sort32_elems_per_pair(dst.t->dtype);
      std::array<int64_t, 32> order;
      for (int64_t b0 = 0, len = in.acc[1].t->elements(); b0 < len; b0 += 32) {
        for (int64_t i = 0; i < 32; ++i) order[static_cast<size_t>(i)] = b0 + i;
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return before(keys[a], a, keys[b], b); });
        for (int64_t e = 0; e < 32; ++e) {
          const int64_t i = order[static_cast<size_t>(e)];
          const auto bits = static_cast<uint32_t>(idx[i]);
          T* pair = out + (b0 + e) * per;
          pair[0] = keys[i];
          // The index's bits read as the key's type (a NaN pattern may lose its payload).
          if (half) {
            pair[1] = T(0);
            pair[2] = static_cast<T>(f16_to_float(static_cast<uint16_t>(bits & 0xffff)));
            pair[3] = static_cast<T>(f16_to_float(static_cast<uint16_t>(bits >> 16)));
          } else {
            pair[1] = static_cast<T>(std::bit_cast<float>(bits));
          }
        }
      }
      break;
    }
    case TileOpKind::GatherMask: {
      read(dst, out);
      const T* src = operand(1);
      size_t k = 0;
      for (int64_t i = 0, len = in.acc[1].t->elements(); i < len && k < n; ++i)
        if (ir::gather_mask_keeps(t.attrs[0], i)) out[k++] = src[i];
      break;
    }
    case TileOpKind::Gatherb: {  // 32-byte blocks: of dst at the strides, of src at offsets
      read(dst, out);
      const T *src = operand(1), *off = operand(2);
      const int64_t eb = dst.t->elem_bytes, per = 32 / eb, len = in.acc[1].t->elements();
      for (int64_t r = 0; r < t.attrs[0]; ++r)
        for (int64_t j = 0; j < 8; ++j) {
          const int64_t d = (r * t.attrs[2] + j * t.attrs[1]) * per,
                        s0 = static_cast<int64_t>(off[r * 8 + j]) / eb;
          for (int64_t e = 0; e < per && d + e < static_cast<int64_t>(n); ++e)
            out[d + e] = s0 + e < len ? src[s0 + e] : T(0);
        }
      break;
    }
    default:  // unary
      with_unary(t.tile_op, [&]<TileOpKind Op>() {
        const T* a = operand(1);
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(apply_unary<Op>(a[i]));
      });
  }
  write(dst, out);
}

template <class T>
void exec_reduce(const Instr& in) {
  const auto& t = *in.t;
  const Access& dst = in.acc[0];
  const size_t n_src = static_cast<size_t>(in.acc[1].t->elements());
  const T* src = read(in.acc[1], scratch<T>(1, n_src));
  int64_t rows = t.m, cols = t.n;
  bool per_row = t.reduce_dim == 1;
  int64_t outs = per_row ? rows : cols, len = per_row ? cols : rows;
  if (n_src == static_cast<size_t>(cols) && rows == 1) {
    outs = 1;
    len = cols;
  }
  const size_t n_dst = static_cast<size_t>(dst.t->elements());
  const T* old = t.reduce_clear ? nullptr : read(dst, scratch<T>(2, n_dst));
  T* out = scratch<T>(0, std::max(n_dst, static_cast<size_t>(outs)));
  auto combine = [&](float acc, float v) {
    if (t.reduce == ir::ReduceKind::Sum) return acc + v;
    if (t.reduce == ir::ReduceKind::Max) return std::fmax(acc, v);
    return std::fmin(acc, v);
  };
  for (int64_t o = 0; o < outs; ++o) {
    const bool row = per_row || outs == 1;
    const T* p = src + (row ? o * len : o);
    const int64_t step = row ? 1 : cols;
    float acc = static_cast<float>(p[0]);
    for (int64_t j = 1; j < len; ++j) acc = combine(acc, static_cast<float>(p[j * step]));
    if (old) acc = combine(acc, static_cast<float>(old[o]));
    out[o] = acc;
  }
  write(dst, out);
}

template <class T>
void exec_copy(const Instr& in) {
  const Access &dst = in.acc[0], &src = in.acc[1];
  const size_t n = static_cast<size_t>(src.t->elements());
  if (in.t->relu) {  // FixPipe's ReLU on the f32 accumulator, before its conversion
    T* v = read(src, scratch<T>(1, n));
    for (size_t i = 0; i < n; ++i) v[i] = v[i] > T(0) ? v[i] : T(0);
    return write(dst, v);
  }
  if (in.t->atomic_add) {  // the DMA unit adds the converted source into GM, in its dtype
    const T* v = read(src, scratch<T>(1, n));
    T* acc = read(dst, scratch<T>(2, n));
    const ir::DType dt = dst.t->dtype;
    for (size_t i = 0; i < n; ++i)
      acc[i] =
          static_cast<T>(static_cast<double>(acc[i]) + round_to(dt, static_cast<double>(v[i])));
    return write(dst, acc);
  }
  if (!in.t->transpose && dst.t->dtype == src.t->dtype && !overlap(dst, src))
    return copy_raw(dst, src);
  T* v = read(src, scratch<T>(1, n));
  // A converting UB -> UB copy is the original's Cast with CAST_RINT (its copy_ub_to_ub)
  if (src.t->dtype != dst.t->dtype) convert(v, n, src.t->dtype, dst.t->dtype, ir::CastRound::Rint);
  if (in.t->transpose) v = transposed(v, in.t->m, in.t->n, scratch<T>(2, n));
  write(dst, v);
}

/// T.reinterpretcast: dst names src's bytes. Whole buffers of one width move element by
/// element (copy_raw); of different widths (uint8 read as uint16) both are whole contiguous
/// buffers of the same byte count (the verifier's check), so the bytes move as they lie.
void copy_view(const Access& dst, const Access& src) {
  if (dst.t->elem_bytes == src.t->elem_bytes) return copy_raw(dst, src);
  std::memcpy(dst.mem + dst.offset * dst.t->elem_bytes, src.mem + src.offset * src.t->elem_bytes,
              static_cast<size_t>(dst.bytes()));
}

/// C = A B as the Cube computes it (cube_matmul: one K fractal of the operands' type at a
/// time into f32); with init false the product is added to the old C.
void exec_mmad(const Instr& in) {
  const auto& t = *in.t;
  const int64_t M = t.m, N = t.n, K = t.k;
  const size_t mn = static_cast<size_t>(M) * static_cast<size_t>(N);
  const float* a = read(in.acc[1], scratch<float>(1, static_cast<size_t>(in.acc[1].t->elements())));
  const float* b = read(in.acc[2], scratch<float>(2, static_cast<size_t>(in.acc[2].t->elements())));
  // Operands are laid out [M, K] / [K, N] first: the Cube reads L0 in one fractal order
  // whichever way its operands were loaded.
  if (t.transpose_a) a = transposed(a, K, M, scratch<float>(4, static_cast<size_t>(M * K)));
  if (t.transpose_b) b = transposed(b, N, K, scratch<float>(5, static_cast<size_t>(K * N)));
  float* c = t.init ? scratch<float>(0, mn) : read(in.acc[0], scratch<float>(0, mn));
  cube_matmul(M, N, K, cube_k_fractal(in.acc[1].t->dtype), a, b, c, !t.init);
  write(in.acc[0], c);
}

}  // namespace

void execute(const Instr& in) {
  const bool f = all_float(in), wide = any_wide(in);
  switch (in.t->op) {
    case lower::Opcode::Copy:
      if (wide) return exec_copy<long double>(in);
      return f ? exec_copy<float>(in) : exec_copy<double>(in);
    case lower::Opcode::Mmad:
      return exec_mmad(in);
    case lower::Opcode::Vec:
      if (in.t->tile_op == TileOpKind::Reinterpret) return copy_view(in.acc[0], in.acc[1]);
      if (wide) return exec_vec<long double>(in);
      // Compare and select keep their scalar operand unrounded: double.
      return f && in.t->tile_op != TileOpKind::Compare ? exec_vec<float>(in) : exec_vec<double>(in);
    case lower::Opcode::Reduce:
      return f ? exec_reduce<float>(in) : exec_reduce<double>(in);
    default:
      return;  // flags and barriers move no data
  }
}

}  // namespace tilepipe::sim

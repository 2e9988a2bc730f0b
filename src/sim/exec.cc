// Functional semantics of each instruction: reads operands in logical row-major order,
// computes as the hardware does (f32 math for float types, rounding on store to the
// destination dtype; f32 accumulation in the cube), writes the destination.
#include <algorithm>
#include <cmath>
#include <vector>

#include "instr.h"
#include "tilepipe/numeric.h"

namespace tilepipe::sim {

using ir::TileOpKind;

namespace {

/// Calls f(byte pointer) for each element of the access in logical row-major order.
template <class F>
void for_each(const Access& a, F&& f) {
  const auto& t = *a.t;
  int eb = ir::dtype_bytes(t.dtype);
  uint8_t* base = a.mem + a.offset * eb;
  int64_t e[lower::kMaxRank] = {1, 1, 1, 1}, s[lower::kMaxRank] = {0, 0, 0, 0};
  int off = lower::kMaxRank - t.rank;  // right-align dims into 4
  for (int d = 0; d < t.rank; ++d) {
    e[off + d] = t.extent[d];
    s[off + d] = t.stride[d] * eb;
  }
  for (int64_t i0 = 0; i0 < e[0]; ++i0)
    for (int64_t i1 = 0; i1 < e[1]; ++i1)
      for (int64_t i2 = 0; i2 < e[2]; ++i2) {
        uint8_t* p = base + i0 * s[0] + i1 * s[1] + i2 * s[2];
        for (int64_t i3 = 0; i3 < e[3]; ++i3) f(p + i3 * s[3]);
      }
}

std::vector<double> read(const Access& a) {
  std::vector<double> v;
  v.reserve(static_cast<size_t>(a.t->elements()));
  ir::DType dt = a.t->dtype;
  for_each(a, [&](const uint8_t* p) { v.push_back(load_elem(dt, p)); });
  return v;
}

void write(const Access& a, const std::vector<double>& v) {
  size_t i = 0;
  ir::DType dt = a.t->dtype;
  for_each(a, [&](uint8_t* p) { store_elem(dt, p, v[i++]); });
}

/// Float ops run in f32 (what the vector unit computes for f32; for f16/bf16 the f32 result
/// rounded on store equals the correctly rounded narrow result for + - * / sqrt).
double apply_binary(TileOpKind op, double a, double b, bool is_float) {
  if (is_float) {
    float x = static_cast<float>(a), y = static_cast<float>(b);
    switch (op) {
      case TileOpKind::Add:
        return x + y;
      case TileOpKind::Sub:
        return x - y;
      case TileOpKind::Mul:
        return x * y;
      case TileOpKind::Div:
        return x / y;
      case TileOpKind::Max:
        return std::fmax(x, y);
      case TileOpKind::Min:
        return std::fmin(x, y);
      case TileOpKind::Pow:
        return std::pow(x, y);
      default:
        return 0;
    }
  }
  int64_t x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
  switch (op) {
    case TileOpKind::Add:
      return static_cast<double>(x + y);
    case TileOpKind::Sub:
      return static_cast<double>(x - y);
    case TileOpKind::Mul:
      return static_cast<double>(x * y);
    case TileOpKind::Div:
      return y == 0 ? 0.0 : static_cast<double>(x / y);
    case TileOpKind::Max:
      return static_cast<double>(std::max(x, y));
    case TileOpKind::Min:
      return static_cast<double>(std::min(x, y));
    case TileOpKind::Pow: {  // exact product; a negative exponent truncates toward zero
      if (y < 0) return x == 1 ? 1.0 : x == -1 ? (y % 2 ? -1.0 : 1.0) : 0.0;
      uint64_t r = 1, b = static_cast<uint64_t>(x);  // unsigned: wraps as the store does
      for (int64_t e = y; e > 0; e >>= 1, b *= b)
        if (e & 1) r *= b;
      return static_cast<double>(static_cast<int64_t>(r));
    }
    default:
      return 0;
  }
}

/// The integer bit operations in the element's width (two's complement), wrapping as the
/// hardware's do.
double apply_bits(TileOpKind op, ir::DType dt, double a, double b) {
  const int w = static_cast<int>(ir::dtype_bytes(dt)) * 8;
  const bool sign = dt == ir::DType::I8 || dt == ir::DType::I16 || dt == ir::DType::I32;
  const uint64_t mask = w >= 64 ? ~0ull : (1ull << w) - 1;
  uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(a)) & mask;
  uint64_t y = static_cast<uint64_t>(static_cast<int64_t>(b)) & mask;
  uint64_t r = 0;
  int sh = static_cast<int>(std::clamp<int64_t>(static_cast<int64_t>(b), 0, w));
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
  r &= mask;
  if (sign && (r >> (w - 1)) & 1) return static_cast<double>(static_cast<int64_t>(r | ~mask));
  return static_cast<double>(r);
}

double apply_unary(TileOpKind op, double a) {
  float x = static_cast<float>(a);
  switch (op) {
    case TileOpKind::Exp:
      return std::exp(x);
    case TileOpKind::Ln:
      return std::log(x);
    case TileOpKind::Abs:
      return std::fabs(a);
    case TileOpKind::Sqrt:
      return std::sqrt(x);
    case TileOpKind::Rsqrt:
      return 1.0f / std::sqrt(x);
    case TileOpKind::Reciprocal:
      return 1.0f / x;
    case TileOpKind::Relu:
      return a > 0 ? a : 0.0;
    case TileOpKind::Sin:
      return std::sin(x);
    case TileOpKind::Cos:
      return std::cos(x);
    default:
      return a;
  }
}

bool compare(ir::CmpMode m, double a, double b) {
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

/// Broadcast direction: one value per row unless the source is shaped as a row [1, C] or
/// only its length matches the column count.
bool broadcast_per_row(const lower::AccessTemplate& src, int64_t rows) {
  int64_t len = src.elements();
  if (len != rows) return false;
  int r = src.rank;
  bool row_shaped = r >= 2 && src.extent[r - 2] == 1 && src.extent[r - 1] == len && len > 1;
  return !row_shaped;
}

void exec_vec(const Instr& in) {
  const auto& t = *in.t;
  const Access& dst = in.acc[0];
  ir::DType dt = dst.t->dtype;
  bool fl = ir::is_float(dt);
  size_t n = static_cast<size_t>(dst.t->elements());
  std::vector<double> out(n);
  switch (t.tile_op) {
    case TileOpKind::Add:
    case TileOpKind::Sub:
    case TileOpKind::Mul:
    case TileOpKind::Div:
    case TileOpKind::Max:
    case TileOpKind::Min:
    case TileOpKind::Pow: {
      auto a = read(in.acc[1]);
      if (t.num_acc > 2) {
        auto b = read(in.acc[2]);
        for (size_t i = 0; i < n; ++i) out[i] = apply_binary(t.tile_op, a[i], b[i], fl);
      } else {
        for (size_t i = 0; i < n; ++i) out[i] = apply_binary(t.tile_op, a[i], in.scalar, fl);
      }
      break;
    }
    case TileOpKind::Axpy: {
      auto x = read(in.acc[1]);
      auto y = read(dst);
      float s = static_cast<float>(in.scalar);
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<float>(s * static_cast<float>(x[i])) + static_cast<float>(y[i]);
      break;
    }
    case TileOpKind::Cast: {
      out = read(in.acc[1]);
      break;
    }
    case TileOpKind::Fill: {
      for (auto& v : out) v = in.scalar;
      break;
    }
    case TileOpKind::Broadcast: {
      auto src = read(in.acc[1]);
      int64_t rows = t.m, cols = t.n;
      bool per_row = broadcast_per_row(*in.acc[1].t, rows);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          out[static_cast<size_t>(r * cols + c)] = src[static_cast<size_t>(per_row ? r : c)];
      break;
    }
    case TileOpKind::Compare: {
      auto a = read(in.acc[1]);
      std::vector<double> b = t.num_acc > 2 ? read(in.acc[2]) : std::vector<double>(n, in.scalar);
      for (size_t i = 0; i < n; ++i) out[i] = compare(t.cmp, a[i], b[i]) ? 1 : 0;
      break;
    }
    case TileOpKind::SelectOp: {
      auto m = read(in.acc[1]);
      auto a = read(in.acc[2]);
      std::vector<double> b = t.num_acc > 3 ? read(in.acc[3]) : std::vector<double>(n, in.scalar);
      for (size_t i = 0; i < n; ++i) out[i] = m[i] != 0 ? a[i] : b[i];
      break;
    }
    case TileOpKind::BitAnd:
    case TileOpKind::BitOr:
    case TileOpKind::BitXor:
    case TileOpKind::BitNot:
    case TileOpKind::ShiftLeft:
    case TileOpKind::ShiftRight: {
      auto a = read(in.acc[1]);
      std::vector<double> b = t.num_acc > 2 ? read(in.acc[2]) : std::vector<double>(n, in.scalar);
      for (size_t i = 0; i < n; ++i) out[i] = apply_bits(t.tile_op, dt, a[i], b[i]);
      break;
    }
    case TileOpKind::Transpose: {  // dst [m, n] from src [n, m]
      auto src = read(in.acc[1]);
      for (int64_t i = 0; i < t.m; ++i)
        for (int64_t j = 0; j < t.n; ++j)
          out[static_cast<size_t>(i * t.n + j)] = src[static_cast<size_t>(j * t.m + i)];
      break;
    }
    case TileOpKind::Gather: {
      auto src = read(in.acc[1]);
      auto off = read(in.acc[2]);
      for (size_t i = 0; i < n; ++i) {
        auto o = static_cast<int64_t>(off[i]);
        out[i] =
            (o >= 0 && o < static_cast<int64_t>(src.size())) ? src[static_cast<size_t>(o)] : 0.0;
      }
      break;
    }
    default: {  // unary
      auto a = read(in.acc[1]);
      for (size_t i = 0; i < n; ++i) out[i] = apply_unary(t.tile_op, a[i]);
    }
  }
  write(dst, out);
}

void exec_reduce(const Instr& in) {
  const auto& t = *in.t;
  auto src = read(in.acc[1]);
  const Access& dst = in.acc[0];
  int64_t rows = t.m, cols = t.n;
  bool per_row = t.reduce_dim == 1;
  int64_t outs = per_row ? rows : cols, len = per_row ? cols : rows;
  if (src.size() == static_cast<size_t>(cols) && rows == 1) {
    outs = 1;
    len = cols;
  }
  std::vector<double> old = t.reduce_clear ? std::vector<double>() : read(dst);
  std::vector<double> out(static_cast<size_t>(outs));
  for (int64_t o = 0; o < outs; ++o) {
    float acc = 0;
    for (int64_t j = 0; j < len; ++j) {
      size_t idx = static_cast<size_t>(per_row || outs == 1 ? o * len + j : j * cols + o);
      float v = static_cast<float>(src[idx]);
      if (j == 0)
        acc = v;
      else if (t.reduce == ir::ReduceKind::Sum)
        acc += v;
      else if (t.reduce == ir::ReduceKind::Max)
        acc = std::fmax(acc, v);
      else
        acc = std::fmin(acc, v);
    }
    if (!t.reduce_clear) {
      float prev = static_cast<float>(old[static_cast<size_t>(o)]);
      if (t.reduce == ir::ReduceKind::Sum)
        acc += prev;
      else if (t.reduce == ir::ReduceKind::Max)
        acc = std::fmax(acc, prev);
      else
        acc = std::fmin(acc, prev);
    }
    out[static_cast<size_t>(o)] = acc;
  }
  write(dst, out);
}

void exec_copy(const Instr& in) {
  auto v = read(in.acc[1]);
  if (in.t->transpose) {
    int64_t rows = in.t->m, cols = in.t->n;
    std::vector<double> tr(v.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        tr[static_cast<size_t>(c * rows + r)] = v[static_cast<size_t>(r * cols + c)];
    v.swap(tr);
  }
  write(in.acc[0], v);
}

void exec_mmad(const Instr& in) {
  const auto& t = *in.t;
  int64_t M = t.m, N = t.n, K = t.k;
  auto a = read(in.acc[1]), b = read(in.acc[2]);
  std::vector<float> af(static_cast<size_t>(M * K)), bf(static_cast<size_t>(K * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      af[static_cast<size_t>(i * K + k)] =
          static_cast<float>(a[static_cast<size_t>(t.transpose_a ? k * M + i : i * K + k)]);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j)
      bf[static_cast<size_t>(k * N + j)] =
          static_cast<float>(b[static_cast<size_t>(t.transpose_b ? j * K + k : k * N + j)]);
  std::vector<float> c(static_cast<size_t>(M * N), 0.0f);
  for (int64_t i = 0; i < M; ++i) {
    float* crow = &c[static_cast<size_t>(i * N)];
    for (int64_t k = 0; k < K; ++k) {
      float av = af[static_cast<size_t>(i * K + k)];
      const float* brow = &bf[static_cast<size_t>(k * N)];
      for (int64_t j = 0; j < N; ++j) crow[j] += av * brow[j];
    }
  }
  std::vector<double> out(c.begin(), c.end());
  if (!t.init) {
    auto old = read(in.acc[0]);
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<float>(static_cast<float>(old[i]) + c[i]);
  }
  write(in.acc[0], out);
}

}  // namespace

void execute(const Instr& in) {
  switch (in.t->op) {
    case lower::Opcode::Copy:
      exec_copy(in);
      break;
    case lower::Opcode::Mmad:
      exec_mmad(in);
      break;
    case lower::Opcode::Vec:
      exec_vec(in);
      break;
    case lower::Opcode::Reduce:
      exec_reduce(in);
      break;
    default:
      break;  // flags and barriers move no data
  }
}

}  // namespace tilepipe::sim

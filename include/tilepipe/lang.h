// The embedded DSL: C++ spellings of TileLang-Ascend's `T.` names, building tile IR.
//
// Kernels read like the seed's Python kernels:
//
//   KernelBuilder k("vadd", /*block_num=*/24);
//   auto x = k.input("x", {n}, f16), y = k.output("y", {n}, f16);
//   auto [cid, vid] = k.launch();
//   scope_v([&] {
//     auto buf = alloc_ub("buf", {128}, f16);
//     serial(tiles, [&](Ex t) { copy(x(slice(t * 128, 128)), buf); ... });
//   });
//   ir::Program p = k.finish();
//
// Loops and scopes are lambdas that run once, at build time. Under them sits an explicit
// imperative builder (begin_for / end_for, begin_scope / end_scope, ...) whose calls take the
// source location explicitly, for front ends that are not C++. Every call records the
// location of the kernel line that made it; diagnostics point there.
#pragma once

#include <functional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tilepipe/ir.h"
#include "tilepipe/vec_modes.h"

namespace tilepipe::lang {

using ir::CmpMode;
using ir::DType;
using ir::Pipe;
using SrcLoc = std::source_location;

inline constexpr DType f16 = DType::F16;
inline constexpr DType bf16 = DType::BF16;
inline constexpr DType f32 = DType::F32;
inline constexpr DType i32 = DType::I32;
inline constexpr DType i8 = DType::I8;
inline constexpr DType u8 = DType::U8;
inline constexpr DType i16 = DType::I16;
inline constexpr DType u16 = DType::U16;
inline constexpr DType u32 = DType::U32;
inline constexpr DType i64 = DType::I64;
inline constexpr DType u64 = DType::U64;
inline constexpr DType boolean = DType::Bool;

/// A DSL user error found while building (e.g. wrong number of slice indices). The verifier
/// reports everything else; builder errors are only about the shape of the calls.
class BuildError : public InputError {
 public:
  BuildError(ir::Loc loc, std::string message)
      : InputError("build", std::move(message), std::move(loc)) {}
};

/// An integer expression with arithmetic operators; converts from integers.
class Ex {
 public:
  Ex(int v) : e_(ir::make_int(v)) {}      // NOLINT: implicit by design
  Ex(int64_t v) : e_(ir::make_int(v)) {}  // NOLINT
  explicit Ex(ir::Expr e) : e_(std::move(e)) {}
  const ir::Expr& ir() const { return e_; }

 private:
  ir::Expr e_;
};

Ex operator+(const Ex& a, const Ex& b);
Ex operator-(const Ex& a, const Ex& b);
Ex operator*(const Ex& a, const Ex& b);
Ex operator/(const Ex& a, const Ex& b);  // floor division
Ex operator%(const Ex& a, const Ex& b);
Ex operator<(const Ex& a, const Ex& b);
Ex operator<=(const Ex& a, const Ex& b);
Ex operator>(const Ex& a, const Ex& b);
Ex operator>=(const Ex& a, const Ex& b);
Ex operator==(const Ex& a, const Ex& b);
Ex operator!=(const Ex& a, const Ex& b);
Ex operator&&(const Ex& a, const Ex& b);
Ex operator||(const Ex& a, const Ex& b);
Ex min(const Ex& a, const Ex& b);
Ex max(const Ex& a, const Ex& b);
Ex select(const Ex& cond, const Ex& a, const Ex& b);

/// One index of a slice: a single position (extent 1), a range, or the whole dimension.
struct Range {
  Ex start;
  int64_t extent;
};
inline Range slice(Ex start, int64_t extent) {
  return Range{std::move(start), extent};
}
/// Rows [start, start + n) of a tile: the spelling of `rows(vid * 64, 64)` in the seed.
inline Range rows(Ex start, int64_t n) {
  return Range{std::move(start), n};
}
struct AllTag {};
inline constexpr AllTag all{};

struct Index {
  Index(int v) : v(Ex(v)) {}           // NOLINT
  Index(int64_t v) : v(Ex(v)) {}       // NOLINT
  Index(Ex e) : v(std::move(e)) {}     // NOLINT
  Index(Range r) : v(std::move(r)) {}  // NOLINT
  Index(AllTag) : v(AllTag{}) {}       // NOLINT
  std::variant<Ex, Range, AllTag> v;
};

/// The first index of a slice together with the location of the slicing call: a variadic
/// `operator()` cannot take a defaulted source_location after its pack, but the implicit
/// conversion of its first argument runs at the call site.
struct FirstIndex {
  template <class T>
  requires std::is_constructible_v<Index, T&&> FirstIndex(
      T&& v, SrcLoc l = SrcLoc::current())  // NOLINT: implicit by design
      : idx(std::forward<T>(v)), loc(l) {}
  Index idx;
  SrcLoc loc;
};

/// A slice of a buffer: what ops take as operands.
class Tile {
 public:
  explicit Tile(ir::Region r) : r_(std::move(r)) {}
  const ir::Region& ir() const { return r_; }

 private:
  ir::Region r_;
};

/// A buffer (GM tensor or on-chip allocation). `t(i, rows(a, 64), all)` slices it;
/// `t[slot]` selects one slot of a leading multi-buffer dimension.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(ir::Buffer b) : b_(std::move(b)) {}
  const ir::Buffer& ir() const { return b_; }
  const std::vector<int64_t>& shape() const { return b_->shape; }

  template <class... I>
  Tile operator()(FirstIndex first, I&&... rest) const {
    return slice_of({std::move(first.idx), Index(std::forward<I>(rest))...}, first.loc);
  }
  Tile operator[](FirstIndex slot) const { return slice_of({std::move(slot.idx)}, slot.loc); }
  operator Tile() const { return Tile(ir::full_region(b_)); }  // NOLINT: whole buffer
  Tile slice_of(const std::vector<Index>& idx, SrcLoc loc = SrcLoc::current()) const;

 private:
  ir::Buffer b_;
};

/// A scalar operand: an immediate, an integer expression, or one UB element read by the
/// scalar unit (`at(m, r)`).
struct Scalar {
  Scalar(double v) : v(v) {}                    // NOLINT
  Scalar(int v) : v(static_cast<double>(v)) {}  // NOLINT
  Scalar(Ex e) : v(e.ir()) {}                   // NOLINT
  std::variant<double, ir::Expr, ir::Region> v;
  ir::ScalarOperand ir() const { return {v}; }
};
/// One element of a UB buffer as a scalar operand: `tile::sub(acc(r, all), acc(r, all), at(m, r))`.
Scalar at(const Tensor& t, std::vector<Index> idx, SrcLoc loc = SrcLoc::current());

/// One element of an integer tensor read by the scalar unit, as an integer expression
/// usable in slice starts, loop bounds and conditions (data-dependent addressing):
/// `copy(kv(load(block_table, {b, idx / 128}), idx % 128, all), row)`. The tensor must be
/// an i32 GM input or a UB buffer filled from one (docs/ir.md "Load").
Ex load(const Tensor& t, std::vector<Ex> idx, SrcLoc loc = SrcLoc::current());
/// `name = value`: the scalar unit evaluates `value` (its element reads) once, here, into a
/// register the rest of the enclosing block reads (ir::LetStmt). Without it, every use of
/// an expression with loads reads the elements again.
Ex let_(const std::string& name, Ex value, SrcLoc loc = SrcLoc::current());
/// `var = value` for a variable let_ returned: an assignment to its register (T.alloc_var's
/// store), visible to every later read of it, also after the block it is made in.
void assign(const Ex& var, Ex value, SrcLoc loc = SrcLoc::current());

/// Second operand of a binary tile op: a tile or a scalar.
struct Operand {
  Operand(Tile t) : v(std::move(t)) {}        // NOLINT
  Operand(const Tensor& t) : v(Tile(t)) {}    // NOLINT
  Operand(double s) : v(Scalar(s)) {}         // NOLINT
  Operand(int s) : v(Scalar(s)) {}            // NOLINT
  Operand(Ex e) : v(Scalar(std::move(e))) {}  // NOLINT
  Operand(Scalar s) : v(std::move(s)) {}      // NOLINT
  std::variant<Tile, Scalar> v;
};

struct LaunchIds {
  Ex cid;
  Ex vid;
};

struct PipelineOpts {
  int num_stages = 2;
  int cross_interval = 1;
};

/// Builds one kernel. While it is alive it is the target of the free DSL functions below
/// (one builder per thread at a time).
class KernelBuilder {
 public:
  KernelBuilder(std::string name, int64_t block_num, SrcLoc loc = SrcLoc::current());
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  Tensor input(const std::string& name, std::vector<int64_t> shape, DType dtype,
               SrcLoc loc = SrcLoc::current());
  Tensor output(const std::string& name, std::vector<int64_t> shape, DType dtype,
                SrcLoc loc = SrcLoc::current());
  /// GM scratch allocated by the runtime (Cube <-> Vector exchange), never passed by the host.
  Tensor workspace(const std::string& name, std::vector<int64_t> shape, DType dtype,
                   SrcLoc loc = SrcLoc::current());
  /// `T.Kernel(block_num) as (cid, vid)`.
  LaunchIds launch() const;
  /// Closes the kernel and returns its IR. Throws BuildError if a block is still open.
  ir::Program finish(SrcLoc loc = SrcLoc::current());

  // ---- the imperative builder under the sugar (explicit locations) ----
  Ex begin_for(const std::string& var, Ex begin, Ex end, int64_t step, ir::ForKind kind,
               PipelineOpts opts, ir::Loc loc);
  void end_for(ir::Loc loc);
  void begin_scope(ir::CoreKind kind, ir::Loc loc);
  void end_scope(ir::Loc loc);
  void begin_if(Ex cond, ir::Loc loc);
  void begin_else(ir::Loc loc);
  void end_if(ir::Loc loc);
  /// A group of statements that passes treat as one: a block of a Pipelined loop's body in
  /// a hand-synced scope (passes/hand_pipeline.h). Emitted as a SeqStmt of its statements.
  void begin_block(ir::Loc loc);
  void end_block(ir::Loc loc);
  void emit(ir::Stmt s);
  void add_knob(ir::Knob k) { prog_.knobs.push_back(std::move(k)); }
  Tensor alloc(const std::string& name, ir::Scope scope, std::vector<int64_t> shape, DType dtype,
               ir::Loc loc);

  static KernelBuilder& current(SrcLoc loc = SrcLoc::current());
  /// Places an on-chip buffer at a byte offset of its scope memory (kept by memory
  /// planning; the verifier checks alignment and bounds).
  void pin(const ir::Buffer& b, int64_t byte_offset) { prog_.addresses[b->id] = byte_offset; }

 private:
  struct Frame;
  Tensor param(const std::string& name, std::vector<int64_t> shape, DType dtype,
               ir::TensorRole role, ir::Loc loc);
  void close(int kind, ir::Loc loc);
  ir::Program prog_;
  std::vector<Frame>* frames_;
  KernelBuilder* prev_;
  int loop_depth_ = 0;
};

// ---- scopes and loops ----
void scope_c(const std::function<void()>& body, SrcLoc loc = SrcLoc::current());
void scope_v(const std::function<void()>& body, SrcLoc loc = SrcLoc::current());
void serial(Ex n, const std::function<void(Ex)>& body, SrcLoc loc = SrcLoc::current());
void serial(Ex begin, Ex end, const std::function<void(Ex)>& body, SrcLoc loc = SrcLoc::current());
void serial(Ex begin, Ex end, int64_t step, const std::function<void(Ex)>& body,
            SrcLoc loc = SrcLoc::current());
void parallel(Ex n, const std::function<void(Ex)>& body, SrcLoc loc = SrcLoc::current());
void pipelined(Ex n, PipelineOpts opts, const std::function<void(Ex)>& body,
               SrcLoc loc = SrcLoc::current());
void pipelined(Ex begin, Ex end, PipelineOpts opts, const std::function<void(Ex)>& body,
               SrcLoc loc = SrcLoc::current());
/// Declares a tuning knob shaping the loop that follows (metadata for the advisor/tuner).
void knob(const std::string& param, const std::string& role, int64_t value, int64_t min,
          int64_t max, int64_t trip_count, std::vector<std::string> versioned = {},
          SrcLoc loc = SrcLoc::current());
void if_(Ex cond, const std::function<void()>& then_body, SrcLoc loc = SrcLoc::current());
void if_else(Ex cond, const std::function<void()>& then_body,
             const std::function<void()>& else_body, SrcLoc loc = SrcLoc::current());

// ---- memory ----
/// `pin_address(buf, 0)`: the author's placement of an on-chip buffer.
void pin_address(const Tensor& t, int64_t byte_offset, SrcLoc loc = SrcLoc::current());
Tensor alloc_L1(const std::string& name, std::vector<int64_t> shape, DType dtype,
                SrcLoc loc = SrcLoc::current());
Tensor alloc_L0A(const std::string& name, std::vector<int64_t> shape, DType dtype,
                 SrcLoc loc = SrcLoc::current());
Tensor alloc_L0B(const std::string& name, std::vector<int64_t> shape, DType dtype,
                 SrcLoc loc = SrcLoc::current());
Tensor alloc_L0C(const std::string& name, std::vector<int64_t> shape, DType dtype,
                 SrcLoc loc = SrcLoc::current());
Tensor alloc_ub(const std::string& name, std::vector<int64_t> shape, DType dtype,
                SrcLoc loc = SrcLoc::current());

struct CopyOpts {
  bool transpose = false;
  std::optional<double> pad_value;
  bool atomic_add = false;  // UB -> GM or L0C -> GM: dst += src (`T.tile.atomic_add`)
  bool relu = false;        // out of L0C: max(0, x) on the way (`enable_relu`)
};
/// `T.copy(src, dst)`: the pipe follows from the scopes (GM->L1/UB MTE2, L1->L0 MTE1,
/// L0C->GM/L1 FIX, UB->GM MTE3, UB->UB V).
void copy(Tile src, Tile dst, CopyOpts opts = {}, SrcLoc loc = SrcLoc::current());

struct GemmOpts {
  bool transpose_a = false;
  bool transpose_b = false;
  bool init = true;
};
/// One mmad: C (+)= op(A) x op(B), A in L0A, B in L0B, C in L0C.
void gemm(Tile a, Tile b, Tile c, GemmOpts opts = {}, SrcLoc loc = SrcLoc::current());
/// `T.mma(A, B, C, init)`: expert-level spelling of gemm without transposes.
void mma(Tile a, Tile b, Tile c, bool init, SrcLoc loc = SrcLoc::current());

// ---- reductions ----
void reduce_max(Tile src, Tile dst, int dim = -1, bool clear = true,
                SrcLoc loc = SrcLoc::current());
void reduce_min(Tile src, Tile dst, int dim = -1, bool clear = true,
                SrcLoc loc = SrcLoc::current());
void reduce_sum(Tile src, Tile dst, int dim = -1, bool clear = true,
                SrcLoc loc = SrcLoc::current());

// ---- synchronisation ----
void set_flag(Pipe src, Pipe dst, Ex event_id, SrcLoc loc = SrcLoc::current());
void wait_flag(Pipe src, Pipe dst, Ex event_id, SrcLoc loc = SrcLoc::current());
void pipe_barrier(Pipe pipe, SrcLoc loc = SrcLoc::current());
void set_cross_flag(Pipe pipe, Ex flag_id, int mode = 2, SrcLoc loc = SrcLoc::current());
void wait_cross_flag(Ex flag_id, SrcLoc loc = SrcLoc::current());

// ---- vector tile ops (pipe V, UB operands) ----
namespace tile {
void add(Tile dst, Tile a, Operand b, SrcLoc loc = SrcLoc::current());
void sub(Tile dst, Tile a, Operand b, SrcLoc loc = SrcLoc::current());
void mul(Tile dst, Tile a, Operand b, SrcLoc loc = SrcLoc::current());
void div(Tile dst, Tile a, Operand b, SrcLoc loc = SrcLoc::current());
void max(Tile dst, Tile a, Operand b, SrcLoc loc = SrcLoc::current());
void min(Tile dst, Tile a, Operand b, SrcLoc loc = SrcLoc::current());
void adds(Tile dst, Tile a, Scalar s, SrcLoc loc = SrcLoc::current());
void muls(Tile dst, Tile a, Scalar s, SrcLoc loc = SrcLoc::current());
void exp(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
void ln(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
void abs(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
void sqrt(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
void rsqrt(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
void reciprocal(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
void relu(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
/// Elementwise sine / cosine (float tiles).
void sin(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
void cos(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
/// dst = a ^ b elementwise; b a tile or a scalar (float tiles).
void pow(Tile dst, Tile a, Operand b, SrcLoc loc = SrcLoc::current());
/// dst = s * src + dst
void axpy(Tile dst, Tile src, Scalar s, SrcLoc loc = SrcLoc::current());
/// UB -> UB with a dtype change (f16 <-> f32 ...).
void cast(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
/// A float -> integer cast rounding by `round` (the plain cast rounds to nearest even); between
/// tiles of one float type, the values rounded to integral ones by `round`.
void cast(Tile dst, Tile src, ir::CastRound round, SrcLoc loc = SrcLoc::current());
void fill(Tile dst, Scalar value, SrcLoc loc = SrcLoc::current());
/// One UB element = value: the scalar unit's SetValue (`ub[i] = v`), on the S pipe; a pipe
/// that reads or writes the element after it needs an S -> pipe flag.
void store(Tile dst, Scalar value, SrcLoc loc = SrcLoc::current());
/// dst's bytes = src's, read as dst's dtype of the same width (ReinterpretCast: no
/// instruction; dst stands for a view of src, which the verifier checks it can).
void reinterpret(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
/// [R] or [R,1] -> [R,C] (one value per row); [C] or [1,C] -> [R,C] (one value per column).
void broadcast(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
/// dst = (a cmp b) ? 1 : 0, elementwise.
void compare(Tile dst, Tile a, Operand b, CmpMode mode, SrcLoc loc = SrcLoc::current());
/// dst = mask ? a : b, elementwise (mask nonzero = take a).
void select(Tile dst, Tile mask, Tile a, Operand b, SrcLoc loc = SrcLoc::current());
/// dst[i] = src at offsets[i]: u32 byte offsets from src's start (the hardware's Gather; a
/// partial element rounds down) or i32 element offsets.
void gather(Tile dst, Tile src, Tile offsets, SrcLoc loc = SrcLoc::current());
/// dst [C, R] = src [R, C] transposed.
void transpose(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
/// To the nearest integer, halves away from zero (float tiles).
void round(Tile dst, Tile src, SrcLoc loc = SrcLoc::current());
/// dst[i] = first + i (`T.tile.createvecindex`).
void arange(Tile dst, Scalar first, SrcLoc loc = SrcLoc::current());
/// (value, index) pairs of src's first `count` elements (the rest of each 32-element block
/// counts as -inf), sorted descending, ties by index; dst gets the leading pairs it holds.
void sort(Tile dst, Tile src, Scalar count, SrcLoc loc = SrcLoc::current());
/// Each 32-element block of `keys` sorted descending (ties by position), each key with its
/// u32 from `indices`, as 8-byte (key, index bits) pairs (vec_modes.h: Sort32).
void sort32(Tile dst, Tile keys, Tile indices, SrcLoc loc = SrcLoc::current());
/// Merges 2 or 3 descending (value, index) pair lists into dst (ties: the earlier list
/// first); a 4-way merge is a 3-way one and a 2-way one.
void merge_sort(Tile dst, std::vector<Tile> srcs, SrcLoc loc = SrcLoc::current());
/// src's elements where the built-in pattern (1..7: P0101 P1010 P0001 P0010 P0100 P1000
/// P1111) selects, packed into dst.
void gather_mask(Tile dst, Tile src, int pattern, SrcLoc loc = SrcLoc::current());
/// dst's 32-byte block r * rep_stride + j * blk_stride = the 32 bytes of src at byte offset
/// offsets[8 r + j] (u32), for r < repeats, j < 8.
void gatherb(Tile dst, Tile src, Tile offsets, int64_t repeats, int64_t blk_stride,
             int64_t rep_stride, SrcLoc loc = SrcLoc::current());
}  // namespace tile

}  // namespace tilepipe::lang

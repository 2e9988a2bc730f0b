// Tile IR: the program a kernel author builds with the DSL and the compiler transforms.
//
// Nodes are small immutable structs held by shared_ptr<const>. Expressions and statements
// are closed sets (std::variant): adding a node breaks every std::visit that does not
// handle it, so no visitor can silently miss a node. Every node carries the source location
// of the DSL call that made it, which is what diagnostics point at.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <variant>
#include <vector>

#include "tilepipe/error.h"

namespace tilepipe::ir {

// ---------------------------------------------------------------------------------------
// Basic vocabulary

/// Element types of A2/A3 (the fp8 family is not: A2/A3 have no fp8 arithmetic). Bool is one
/// byte holding 0 or 1 (C++'s and AscendC's bool).
enum class DType : uint8_t { F16, BF16, F32, I32, I8, U8, I16, U16, U32, I64, U64, Bool };
enum class Scope : uint8_t { GM, L1, L0A, L0B, L0C, UB };
/// Pipes of a core: S scalar, MTE1 L1->L0, MTE2 GM->L1/UB, MTE3 UB->GM, M cube, FIX L0C out,
/// V vector.
enum class Pipe : uint8_t { S, MTE1, MTE2, MTE3, M, FIX, V };
/// Which core kind runs a piece of code: C = AIC (Cube), V = AIV (Vector).
enum class CoreKind : uint8_t { C, V };

inline constexpr int kNumPipes = 7;

int dtype_bytes(DType t);
const char* to_string(DType t);
const char* to_string(Scope s);
const char* to_string(Pipe p);
const char* to_string(CoreKind k);
std::optional<Pipe> pipe_from_string(const std::string& s);
/// The dtype of a short name as to_string prints it ("f16", "i64", "bool", ...).
std::optional<DType> dtype_from_string(const std::string& s);
bool is_float(DType t);
/// i8, i16, i32, i64: two's complement; the other integer types (and bool) are unsigned.
bool is_signed_int(DType t);

/// Source location of the DSL call that created a node (error.h).
using Loc = tilepipe::Loc;

// ---------------------------------------------------------------------------------------
// Expressions: integer-valued, over constants, loop variables, cid and vid, and elements of
// integer tensors read by the scalar unit (data-dependent addressing).

struct ExprNode;
struct BufferNode;
using Buffer = std::shared_ptr<const BufferNode>;
using Expr = std::shared_ptr<const ExprNode>;

enum class BinOp : uint8_t { Add, Sub, Mul, Div, Mod, Min, Max, Lt, Le, Gt, Ge, Eq, Ne, And, Or };
const char* to_string(BinOp op);

/// A named integer variable. Identity is the id, not the name.
struct VarNode {
  int id;
  std::string name;
};
using Var = std::shared_ptr<const VarNode>;
Var make_var(const std::string& name);

struct IntImm {
  int64_t value;
};
struct VarRef {
  Var var;
};
/// Launch variables: the AI-core task id and the vector sub-core id.
struct CoreIdx {};
struct VecIdx {};
struct Binary {
  BinOp op;
  Expr a, b;
};
struct Select {
  Expr cond, then_value, else_value;
};
/// One element of a tensor, read by the scalar unit when the expression is evaluated:
/// `block_table[b, idx / 128]`. What gathers through an index / page table use. A float
/// element is converted toward zero (C's conversion: `(int32_t)x.GetValue(i)`).
/// The tensor is a GM kernel input (read-only; each read costs scalar_load_cycles) or a UB
/// buffer (a flag into S orders the read after the ops that fill it; timing mode runs those
/// ops too).
struct Load {
  Buffer buffer;
  std::vector<Expr> index;  // one per dimension
};

struct ExprNode {
  std::variant<IntImm, VarRef, CoreIdx, VecIdx, Binary, Select, Load> node;
  Loc loc;
};

Expr make_int(int64_t v, Loc loc = {});
Expr make_var_ref(Var v, Loc loc = {});
Expr make_cid(Loc loc = {});
Expr make_vid(Loc loc = {});
Expr make_binary(BinOp op, Expr a, Expr b, Loc loc = {});
Expr make_select(Expr c, Expr t, Expr f, Loc loc = {});
Expr make_load(Buffer b, std::vector<Expr> index, Loc loc = {});
/// Integer semantics of BinOp shared by folding and the simulator (floor division/modulo, as in
/// Python; x / 0 and x % 0 give 0 and are rejected by the verifier where they can be seen).
inline int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));  // INT64_MIN wraps
  int64_t q = a / b;
  return (a % b != 0) && ((a < 0) != (b < 0)) ? q - 1 : q;
}
inline int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
/// Add, Sub and Mul wrap (two's complement) instead of overflowing, which C++ leaves
/// undefined; constant folding refuses to fold where they would (binop_overflows).
inline int64_t eval_binop(BinOp op, int64_t a, int64_t b) {
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case BinOp::Add:
      return static_cast<int64_t>(ua + ub);
    case BinOp::Sub:
      return static_cast<int64_t>(ua - ub);
    case BinOp::Mul:
      return static_cast<int64_t>(ua * ub);
    case BinOp::Div:
      return floor_div(a, b);
    case BinOp::Mod:
      return floor_mod(a, b);
    case BinOp::Min:
      return a < b ? a : b;
    case BinOp::Max:
      return a > b ? a : b;
    case BinOp::Lt:
      return a < b;
    case BinOp::Le:
      return a <= b;
    case BinOp::Gt:
      return a > b;
    case BinOp::Ge:
      return a >= b;
    case BinOp::Eq:
      return a == b;
    case BinOp::Ne:
      return a != b;
    case BinOp::And:
      return (a != 0) && (b != 0);
    case BinOp::Or:
      return (a != 0) || (b != 0);
  }
  return 0;
}
/// Whether eval_binop(op, a, b) wraps: the exact result is outside int64.
inline bool binop_overflows(BinOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  switch (op) {
    case BinOp::Add:
      return __builtin_add_overflow(a, b, &r);
    case BinOp::Sub:
      return __builtin_sub_overflow(a, b, &r);
    case BinOp::Mul:
      return __builtin_mul_overflow(a, b, &r);
    case BinOp::Div:
      return b == -1 && a == INT64_MIN;
    default:
      return false;
  }
}
/// The constant value of an expression, if it folds without variables.
std::optional<int64_t> as_const(const Expr& e);

// ---------------------------------------------------------------------------------------
// Buffers and regions

enum class TensorRole : uint8_t { None, Input, Output, Workspace };

/// A named allocation: a GM tensor (kernel parameter or runtime workspace) or an on-chip
/// buffer of one core. Shapes are static.
struct BufferNode {
  int id;
  std::string name;
  Scope scope;
  DType dtype;
  std::vector<int64_t> shape;
  TensorRole role = TensorRole::None;
  Loc loc;
  /// Saturate at kMaxBufferBytes + 1 instead of overflowing, so a hostile shape reaches the
  /// verifier's `bad-shape` check as "too large" rather than as a wrapped (small) size.
  int64_t elements() const;
  int64_t bytes() const;
};
/// The largest buffer or slice, in bytes, any layer accepts (256 TiB: far above any
/// device's memory, and small enough that byte offsets and sums of a few such sizes cannot
/// overflow int64 anywhere downstream).
inline constexpr int64_t kMaxBufferBytes = int64_t{1} << 48;
/// The product of `dims` (times `scale`), saturated at kMaxBufferBytes + 1.
int64_t checked_extent_product(const std::vector<int64_t>& dims, int64_t scale = 1);
Buffer make_buffer(const std::string& name, Scope scope, DType dtype, std::vector<int64_t> shape,
                   TensorRole role, Loc loc);

/// A rectangular slice: per dimension a start (an expression) and a static extent.
struct Region {
  Buffer buffer;
  std::vector<Expr> start;
  std::vector<int64_t> extent;
  int64_t elements() const;
  /// Extents with leading 1s dropped (how tile ops see the slice): [1,64,1] -> [64,1].
  std::vector<int64_t> squeezed() const;
};
/// The whole buffer as a region.
Region full_region(const Buffer& b);

/// A scalar operand of a tile op: an immediate, an integer expression, or one element of a
/// UB buffer read by the scalar unit.
struct ScalarOperand {
  std::variant<double, Expr, Region> value;
};

// ---------------------------------------------------------------------------------------
// Statements

struct StmtNode;
using Stmt = std::shared_ptr<const StmtNode>;

enum class ForKind : uint8_t { Serial, Parallel, Pipelined };

struct SeqStmt {
  std::vector<Stmt> body;
};
struct ForStmt {
  Var var;
  Expr begin, end;
  int64_t step = 1;
  ForKind kind = ForKind::Serial;
  int num_stages = 0;      // Pipelined only
  int cross_interval = 1;  // Pipelined only
  Stmt body;
};
struct IfStmt {
  Expr cond;
  Stmt then_body;
  Stmt else_body;  // may be null
};
/// `var = value`: the scalar unit evaluates `value` once, here (each element read costs a
/// read), into a register that the statements after it in the enclosing sequence, and
/// everything nested in them, read as `var`. What the original's parser makes of
/// `x = buf[i]` in a kernel (a LetStmt); without it every use of the name would read the
/// element again. A leaf: passes move it as one statement.
struct LetStmt {
  Var var;
  Expr value;
};
/// Code for one core kind: Scope("C") runs on the AIC, Scope("V") on each AIV.
struct ScopeStmt {
  CoreKind kind;
  Stmt body;
};
struct AllocStmt {
  Buffer buffer;
};
struct CopyStmt {
  Region src, dst;
  bool transpose = false;
  std::optional<double> pad_value;
  /// UB -> GM (MTE3) or L0C -> GM (FIX) only: dst += src in dst's dtype, done by the DMA
  /// unit (SetAtomicAdd). Concurrent atomic adds to the same bytes are not a race.
  bool atomic_add = false;
  /// Out of L0C (FIX) only: max(0, x) on the way, as FixPipe's ReLU (`enable_relu`).
  bool relu = false;
};
/// C (+)= op(A) x op(B) with A in L0A, B in L0B, C in L0C (one mmad).
struct GemmStmt {
  Region a, b, c;
  bool transpose_a = false;
  bool transpose_b = false;
  bool init = true;  // true: C = A*B; false: C += A*B
};
/// C (+)= op(A) x op(B) with A in L1 or L0A, B in L1 or L0B, C in L0C: the original's
/// gemm_v0 (T.gemm), K staged through L0A / L0B by the gemm_l1 pass (passes/gemm_l1.h),
/// which no later layer sees. `init` is an integer expression: nonzero, C = A*B. `k_chunk`:
/// the author's K chunk (the original's kL0Size); 0: the pass chooses.
struct GemmL1Stmt {
  Region a, b, c;
  bool transpose_a = false;
  bool transpose_b = false;
  Expr init;
  int64_t k_chunk = 0;
};

enum class TileOpKind : uint8_t {
  // binary, second operand a tile or a scalar
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Min,
  // unary
  Exp,
  Ln,
  Abs,
  Sqrt,
  Rsqrt,
  Reciprocal,
  Relu,
  // fused: dst = s * src + dst
  Axpy,
  // data
  Cast,
  Fill,
  // an element store (`ub[i] = x`): the scalar unit's SetValue of one UB element, in
  // program order with the scalar unit's reads; a pipe reading it needs an S -> pipe flag
  Store,
  Broadcast,
  Compare,
  SelectOp,
  Gather,
  Transpose,  // dst [C, R] = src [R, C] transposed
  // integer bit operations (two's complement in the element's width)
  BitAnd,
  BitOr,
  BitXor,
  BitNot,
  ShiftLeft,   // by a scalar
  ShiftRight,  // by a scalar; arithmetic for signed types
  // transcendental library ops (expanded to several vector instructions on hardware)
  Sin,
  Cos,
  Pow,    // dst = a ^ b, elementwise; b a tile or a scalar
  Round,  // to the nearest integer, halves away from zero (float tiles)
  // index generation and sorting (the original's library ops)
  Arange,      // dst[i] = scalar + i (CreateVecIndex / ArithProgression with step 1)
  Sort,        // (value, index) pairs of src sorted descending; scalar = valid count
  MergeSort,   // 2 or 3 sorted (value, index) pair lists merged, descending
  Sort32,      // each 32-element block of src sorted descending with srcs[1]'s u32 indices
  GatherMask,  // src's elements where a pattern bit is set, packed into dst
  Gatherb,     // 32-byte blocks of src at the byte offsets in srcs[1] (u32) into dst
  // dst's bytes = src's, read as dst's dtype of the same width (the original's
  // ReinterpretCast: a view, no instruction; the verifier keeps the two a view would be)
  Reinterpret,
};
const char* to_string(TileOpKind k);
/// The pipe a tile op runs on: the scalar unit for an element store, else the vector unit.
inline Pipe tile_op_pipe(TileOpKind k) {
  return k == TileOpKind::Store ? Pipe::S : Pipe::V;
}
/// Built-in GatherMask patterns (AscendC numbering): whether pattern p keeps element i.
/// 1 P0101 even, 2 P1010 odd, 3..6 P0001..P1000 element p - 3 of every four, 7 P1111 all.
inline bool gather_mask_keeps(int64_t p, int64_t i) {
  return p == 7 || (p <= 2 ? i % 2 == p - 1 : i % 4 == p - 3);
}
enum class CmpMode : uint8_t { EQ, NE, GT, GE, LT, LE };
const char* to_string(CmpMode m);

/// A vector instruction on UB tiles. Operand use by kind:
///   binary: srcs = {a, b} or {a} + scalar;  unary: srcs = {a};  axpy: srcs = {x} + scalar
///   cast: srcs = {a};  fill: scalar;  store: scalar, dst one UB element;  broadcast: srcs = {a}
///   (row or column vector) compare: srcs = {a, b} or {a} + scalar, cmp; dst is a 0/1 mask tile
///   select: srcs = {mask, a, b} or {mask, a} + scalar
///   gather: srcs = {src, offsets}; u32 offsets: bytes from src's start (the hardware's
///           Gather, one instruction), i32 offsets: elements
///   transpose: srcs = {a}, a [R, C] -> dst [C, R]
///   bit_and / bit_or / bit_xor: as binary;  bit_not: srcs = {a};  shl / shr: {a} + scalar
///   sin / cos / round: srcs = {a};  pow: as binary
///   arange: scalar (the first value);  sort: srcs = {src} + scalar (the valid count)
///   merge_sort: srcs = 2 or 3 sorted pair lists (a 4-way merge is two of them)
///   gather_mask: srcs = {src}, attrs[0] the built-in pattern 1..7 (gather_mask_pattern)
///   gatherb: srcs = {src, u32 byte offsets}, attrs = {repeats, dst block stride,
///            dst repeat stride} (strides in 32-byte blocks)
struct TileOpStmt {
  TileOpKind op;
  Region dst;
  std::vector<Region> srcs;
  std::optional<ScalarOperand> scalar;
  CmpMode cmp = CmpMode::EQ;
  std::array<int64_t, 3> attrs{};  // static integer parameters (gather_mask, gatherb)
};

enum class ReduceKind : uint8_t { Max, Min, Sum };
const char* to_string(ReduceKind k);
/// Reduction of a UB tile along `dim` (-1 = last) into dst; clear=false merges into dst.
struct ReduceStmt {
  ReduceKind kind;
  Region src, dst;
  int dim = -1;
  bool clear = true;
};

struct SetFlagStmt {
  Pipe src, dst;
  Expr event_id;
};
struct WaitFlagStmt {
  Pipe src, dst;
  Expr event_id;
};
struct PipeBarrierStmt {
  Pipe pipe;
};
/// The SetCrossFlagStmt mode of T.sync_all (AscendC's SyncAll, which it builds from FFTS
/// flags of modes 0 and 2): a barrier of every core of the launch. Hardware's own mode 0
/// (every core of one kind) and mode 1 are not modelled.
inline constexpr int kSyncAllMode = 3;
/// Cross-core counting semaphore between an AIC and its AIVs (mode 2), or T.sync_all's set.
struct SetCrossFlagStmt {
  Pipe pipe;
  Expr flag_id;
  int mode = 2;
};
struct WaitCrossFlagStmt {
  Expr flag_id;
};

struct StmtNode {
  std::variant<SeqStmt, ForStmt, IfStmt, ScopeStmt, LetStmt, AllocStmt, CopyStmt, GemmStmt,
               GemmL1Stmt, TileOpStmt, ReduceStmt, SetFlagStmt, WaitFlagStmt, PipeBarrierStmt,
               SetCrossFlagStmt, WaitCrossFlagStmt>
      node;
  Loc loc;
};

template <class T>
Stmt make_stmt(T node, Loc loc) {
  return std::make_shared<const StmtNode>(StmtNode{std::move(node), std::move(loc)});
}

/// The event id of barrier_all's flags (the original's, in AscendC's range of 8).
inline constexpr int kBarrierEventId = 7;
/// PipeBarrier<PIPE_ALL> on one core, spelt as the original spells it: flags through a hub
/// pipe, on the Cube core MTE2 / MTE1 / FIX -> M then M -> each, on the Vector core MTE2 /
/// V / MTE3 -> S (the scalar unit waits for every pipe). Every earlier instruction of the
/// core finishes before any later one starts.
std::vector<Stmt> barrier_all(CoreKind core, const Loc& loc);

// ---------------------------------------------------------------------------------------
// Program

/// What a knob sets: the versions in flight of a pipeline, or the iterations between
/// cross-core signals.
inline constexpr const char* kKnobRoles[] = {"pipeline_stages", "sync_interval"};

/// A tuning knob the kernel declares: a kernel parameter and the loop it shapes. The
/// advisor and the tuner name knobs from this metadata, never from a kernel's name.
struct Knob {
  std::string param;  // kernel parameter, e.g. "num_stages"
  std::string role;   // one of kKnobRoles
  int64_t value = 0;  // value in effect for this build
  int64_t min = 0, max = 0;
  int64_t trip_count = 0;              // iterations of the loop it shapes
  std::vector<std::string> versioned;  // buffers with one version per stage
  Loc loc;                             // the loop
};

struct Program {
  std::string name;
  std::vector<Knob> knobs;         // metadata only: no effect on the program's meaning
  std::vector<Buffer> params;      // GM tensors passed by the host (inputs and outputs)
  std::vector<Buffer> workspaces;  // GM scratch allocated by the runtime
  int64_t block_num = 1;
  Stmt body;
  Loc loc;
  /// On-chip byte offsets by buffer id, within the core's scope memory: pinned by the
  /// author (lang::pin_address) or set by memory planning. Buffers without one are laid
  /// out sequentially after the highest placed byte.
  std::map<int, int64_t> addresses;
  /// Buffers the multi-buffering passes versioned, by id: their slot count (the leading
  /// dimension they added). Metadata for diagnostics (capacity hints), like knobs.
  std::map<int, int64_t> versions;
};

// ---------------------------------------------------------------------------------------
// Printing, equality, traversal

/// Stable text form. Variables print by name with a numeric suffix only when two distinct
/// variables share a name, so golden tests do not depend on global id counters.
std::string print(const Program& p);
std::string print(const Stmt& s);
std::string print(const Expr& e);
std::string print(const Region& r);

/// Structural equality up to renaming of loop variables (alpha-equivalence). Buffers compare
/// by name, scope, dtype and shape.
bool equal(const Program& a, const Program& b);
bool equal(const Stmt& a, const Stmt& b);
bool equal(const Expr& a, const Expr& b);

/// Read-only traversal: override the node kinds of interest; the defaults recurse.
class StmtVisitor {
 public:
  virtual ~StmtVisitor() = default;
  void visit(const Stmt& s);
  virtual void visit_seq(const SeqStmt& s, const StmtNode& n);
  virtual void visit_for(const ForStmt& s, const StmtNode& n);
  virtual void visit_if(const IfStmt& s, const StmtNode& n);
  virtual void visit_scope(const ScopeStmt& s, const StmtNode& n);
  virtual void visit_let(const LetStmt&, const StmtNode&) {}
  virtual void visit_alloc(const AllocStmt&, const StmtNode&) {}
  virtual void visit_copy(const CopyStmt&, const StmtNode&) {}
  virtual void visit_gemm(const GemmStmt&, const StmtNode&) {}
  virtual void visit_gemm_l1(const GemmL1Stmt&, const StmtNode&) {}
  virtual void visit_tile(const TileOpStmt&, const StmtNode&) {}
  virtual void visit_reduce(const ReduceStmt&, const StmtNode&) {}
  virtual void visit_set_flag(const SetFlagStmt&, const StmtNode&) {}
  virtual void visit_wait_flag(const WaitFlagStmt&, const StmtNode&) {}
  virtual void visit_barrier(const PipeBarrierStmt&, const StmtNode&) {}
  virtual void visit_set_cross(const SetCrossFlagStmt&, const StmtNode&) {}
  virtual void visit_wait_cross(const WaitCrossFlagStmt&, const StmtNode&) {}
};

/// Rewriting traversal: returns a new tree, sharing unchanged subtrees. Override a node
/// kind to replace it; the defaults rebuild a node only when a child changed.
class StmtMutator {
 public:
  virtual ~StmtMutator() = default;
  Stmt mutate(const Stmt& s);
  virtual Stmt mutate_seq(const SeqStmt& s, const Stmt& self);
  virtual Stmt mutate_for(const ForStmt& s, const Stmt& self);
  virtual Stmt mutate_if(const IfStmt& s, const Stmt& self);
  virtual Stmt mutate_scope(const ScopeStmt& s, const Stmt& self);
  /// Leaves (let, alloc, copy, gemm, tile ops, reduce, flags) are returned unchanged by
  /// default.
  virtual Stmt mutate_leaf(const Stmt& self) { return self; }
};

}  // namespace tilepipe::ir

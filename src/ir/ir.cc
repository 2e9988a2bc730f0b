// Node constructors and small helpers of the tile IR.
#include <atomic>
#include <filesystem>

#include "tilepipe/ir.h"

namespace tilepipe::ir {

int dtype_bytes(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16:
    case DType::I16:
    case DType::U16:
      return 2;
    case DType::F32:
    case DType::I32:
    case DType::U32:
      return 4;
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

bool is_float(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32;
}

bool is_signed_int(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}

const char* to_string(DType t) {
  switch (t) {
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::F32:
      return "f32";
    case DType::I32:
      return "i32";
    case DType::I8:
      return "i8";
    case DType::U8:
      return "u8";
    case DType::I16:
      return "i16";
    case DType::U16:
      return "u16";
    case DType::U32:
      return "u32";
    case DType::I64:
      return "i64";
    case DType::U64:
      return "u64";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

std::optional<DType> dtype_from_string(const std::string& s) {
  for (int i = 0; i <= static_cast<int>(DType::Bool); ++i)
    if (s == to_string(static_cast<DType>(i))) return static_cast<DType>(i);
  return std::nullopt;
}

const char* to_string(Scope s) {
  switch (s) {
    case Scope::GM:
      return "GM";
    case Scope::L1:
      return "L1";
    case Scope::L0A:
      return "L0A";
    case Scope::L0B:
      return "L0B";
    case Scope::L0C:
      return "L0C";
    case Scope::UB:
      return "UB";
  }
  return "?";
}

const char* to_string(Pipe p) {
  switch (p) {
    case Pipe::S:
      return "S";
    case Pipe::MTE1:
      return "MTE1";
    case Pipe::MTE2:
      return "MTE2";
    case Pipe::MTE3:
      return "MTE3";
    case Pipe::M:
      return "M";
    case Pipe::FIX:
      return "FIX";
    case Pipe::V:
      return "V";
  }
  return "?";
}

std::optional<Pipe> pipe_from_string(const std::string& s) {
  std::string u;
  for (char c : s) u += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (int i = 0; i < kNumPipes; ++i) {
    if (u == to_string(static_cast<Pipe>(i))) return static_cast<Pipe>(i);
  }
  return std::nullopt;
}

const char* to_string(CoreKind k) {
  return k == CoreKind::C ? "C" : "V";
}

const char* to_string(BinOp op) {
  switch (op) {
    case BinOp::Add:
      return "+";
    case BinOp::Sub:
      return "-";
    case BinOp::Mul:
      return "*";
    case BinOp::Div:
      return "/";
    case BinOp::Mod:
      return "%";
    case BinOp::Min:
      return "min";
    case BinOp::Max:
      return "max";
    case BinOp::Lt:
      return "<";
    case BinOp::Le:
      return "<=";
    case BinOp::Gt:
      return ">";
    case BinOp::Ge:
      return ">=";
    case BinOp::Eq:
      return "==";
    case BinOp::Ne:
      return "!=";
    case BinOp::And:
      return "&&";
    case BinOp::Or:
      return "||";
  }
  return "?";
}

const char* to_string(TileOpKind k) {
  switch (k) {
    case TileOpKind::Add:
      return "add";
    case TileOpKind::Sub:
      return "sub";
    case TileOpKind::Mul:
      return "mul";
    case TileOpKind::Div:
      return "div";
    case TileOpKind::Max:
      return "max";
    case TileOpKind::Min:
      return "min";
    case TileOpKind::Exp:
      return "exp";
    case TileOpKind::Ln:
      return "ln";
    case TileOpKind::Abs:
      return "abs";
    case TileOpKind::Sqrt:
      return "sqrt";
    case TileOpKind::Rsqrt:
      return "rsqrt";
    case TileOpKind::Reciprocal:
      return "reciprocal";
    case TileOpKind::Relu:
      return "relu";
    case TileOpKind::Sin:
      return "sin";
    case TileOpKind::Cos:
      return "cos";
    case TileOpKind::Pow:
      return "pow";
    case TileOpKind::Round:
      return "round";
    case TileOpKind::Arange:
      return "arange";
    case TileOpKind::Sort:
      return "sort";
    case TileOpKind::MergeSort:
      return "merge_sort";
    case TileOpKind::Sort32:
      return "sort32";
    case TileOpKind::GatherMask:
      return "gather_mask";
    case TileOpKind::Gatherb:
      return "gatherb";
    case TileOpKind::Reinterpret:
      return "reinterpret";
    case TileOpKind::Axpy:
      return "axpy";
    case TileOpKind::Cast:
      return "cast";
    case TileOpKind::Fill:
      return "fill";
    case TileOpKind::Store:
      return "store";
    case TileOpKind::Broadcast:
      return "broadcast";
    case TileOpKind::Compare:
      return "compare";
    case TileOpKind::SelectOp:
      return "select";
    case TileOpKind::Gather:
      return "gather";
    case TileOpKind::Transpose:
      return "transpose";
    case TileOpKind::BitAnd:
      return "bit_and";
    case TileOpKind::BitOr:
      return "bit_or";
    case TileOpKind::BitXor:
      return "bit_xor";
    case TileOpKind::BitNot:
      return "bit_not";
    case TileOpKind::ShiftLeft:
      return "shl";
    case TileOpKind::ShiftRight:
      return "shr";
  }
  return "?";
}

const char* to_string(CmpMode m) {
  switch (m) {
    case CmpMode::EQ:
      return "EQ";
    case CmpMode::NE:
      return "NE";
    case CmpMode::GT:
      return "GT";
    case CmpMode::GE:
      return "GE";
    case CmpMode::LT:
      return "LT";
    case CmpMode::LE:
      return "LE";
  }
  return "?";
}

const char* to_string(ReduceKind k) {
  switch (k) {
    case ReduceKind::Max:
      return "max";
    case ReduceKind::Min:
      return "min";
    case ReduceKind::Sum:
      return "sum";
  }
  return "?";
}

namespace {
std::atomic<int> next_id{1};
}

Var make_var(const std::string& name) {
  return std::make_shared<const VarNode>(VarNode{next_id++, name});
}

static Expr mk(decltype(ExprNode::node) n, Loc loc) {
  return std::make_shared<const ExprNode>(ExprNode{std::move(n), std::move(loc)});
}

Expr make_int(int64_t v, Loc loc) {
  return mk(IntImm{v}, std::move(loc));
}
Expr make_var_ref(Var v, Loc loc) {
  return mk(VarRef{std::move(v)}, std::move(loc));
}
Expr make_cid(Loc loc) {
  return mk(CoreIdx{}, std::move(loc));
}
Expr make_vid(Loc loc) {
  return mk(VecIdx{}, std::move(loc));
}
Expr make_select(Expr c, Expr t, Expr f, Loc loc) {
  return mk(Select{std::move(c), std::move(t), std::move(f)}, std::move(loc));
}

Expr make_load(Buffer b, std::vector<Expr> index, Loc loc) {
  return mk(Load{std::move(b), std::move(index)}, std::move(loc));
}

/// Integer semantics shared by constant folding and the simulator: division and modulo
/// round toward minus infinity (like Python, which the seed's kernels are written in).

Expr make_binary(BinOp op, Expr a, Expr b, Loc loc) {
  // Fold constants so slices like rows(vid * 64, 64) stay readable in printed IR.
  auto ca = as_const(a), cb = as_const(b);
  // No fold where the result would leave int64: the expression stays, and the verifier's
  // wide interval arithmetic reports what it reaches.
  if (ca && cb && !((op == BinOp::Div || op == BinOp::Mod) && *cb == 0) &&
      !binop_overflows(op, *ca, *cb)) {
    return make_int(eval_binop(op, *ca, *cb), std::move(loc));
  }
  return mk(Binary{op, std::move(a), std::move(b)}, std::move(loc));
}

std::optional<int64_t> as_const(const Expr& e) {
  if (!e) return std::nullopt;
  if (auto* i = std::get_if<IntImm>(&e->node)) return i->value;
  return std::nullopt;
}

int64_t checked_extent_product(const std::vector<int64_t>& dims, int64_t scale) {
  constexpr int64_t kSaturated = kMaxBufferBytes + 1;
  __int128 n = scale;
  for (auto d : dims) {
    n *= d;
    if (n > kSaturated || n < -kSaturated) return n > 0 ? kSaturated : -kSaturated;
  }
  return static_cast<int64_t>(n);
}

int64_t BufferNode::elements() const {
  return checked_extent_product(shape);
}

int64_t BufferNode::bytes() const {
  return checked_extent_product(shape, dtype_bytes(dtype));
}

Buffer make_buffer(const std::string& name, Scope scope, DType dtype, std::vector<int64_t> shape,
                   TensorRole role, Loc loc) {
  return std::make_shared<const BufferNode>(
      BufferNode{next_id++, name, scope, dtype, std::move(shape), role, std::move(loc)});
}

int64_t Region::elements() const {
  return checked_extent_product(extent);
}

std::vector<int64_t> Region::squeezed() const {
  size_t i = 0;
  while (i + 1 < extent.size() && extent[i] == 1) ++i;
  return {extent.begin() + static_cast<std::ptrdiff_t>(i), extent.end()};
}

Region full_region(const Buffer& b) {
  if (!b) return {};  // an unset Tensor: the verifier reports the empty operand
  Region r{b, {}, b->shape};
  for (size_t i = 0; i < b->shape.size(); ++i) r.start.push_back(make_int(0));
  return r;
}

// ---- traversal ------------------------------------------------------------------------

void StmtVisitor::visit(const Stmt& s) {
  if (!s) return;
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>)
          visit_seq(n, *s);
        else if constexpr (std::is_same_v<T, ForStmt>)
          visit_for(n, *s);
        else if constexpr (std::is_same_v<T, IfStmt>)
          visit_if(n, *s);
        else if constexpr (std::is_same_v<T, ScopeStmt>)
          visit_scope(n, *s);
        else if constexpr (std::is_same_v<T, LetStmt>)
          visit_let(n, *s);
        else if constexpr (std::is_same_v<T, AllocStmt>)
          visit_alloc(n, *s);
        else if constexpr (std::is_same_v<T, CopyStmt>)
          visit_copy(n, *s);
        else if constexpr (std::is_same_v<T, GemmStmt>)
          visit_gemm(n, *s);
        else if constexpr (std::is_same_v<T, GemmL1Stmt>)
          visit_gemm_l1(n, *s);
        else if constexpr (std::is_same_v<T, TileOpStmt>)
          visit_tile(n, *s);
        else if constexpr (std::is_same_v<T, ReduceStmt>)
          visit_reduce(n, *s);
        else if constexpr (std::is_same_v<T, SetFlagStmt>)
          visit_set_flag(n, *s);
        else if constexpr (std::is_same_v<T, WaitFlagStmt>)
          visit_wait_flag(n, *s);
        else if constexpr (std::is_same_v<T, PipeBarrierStmt>)
          visit_barrier(n, *s);
        else if constexpr (std::is_same_v<T, SetCrossFlagStmt>)
          visit_set_cross(n, *s);
        else if constexpr (std::is_same_v<T, WaitCrossFlagStmt>)
          visit_wait_cross(n, *s);
        else
          static_assert(sizeof(T) == 0, "StmtVisitor: unhandled statement node");
      },
      s->node);
}

void StmtVisitor::visit_seq(const SeqStmt& s, const StmtNode&) {
  for (const auto& c : s.body) visit(c);
}
void StmtVisitor::visit_for(const ForStmt& s, const StmtNode&) {
  visit(s.body);
}
void StmtVisitor::visit_if(const IfStmt& s, const StmtNode&) {
  visit(s.then_body);
  visit(s.else_body);
}
void StmtVisitor::visit_scope(const ScopeStmt& s, const StmtNode&) {
  visit(s.body);
}

std::vector<Stmt> barrier_all(CoreKind core, const Loc& loc) {
  std::vector<Stmt> out;
  auto flag = [&](Pipe a, Pipe b) {
    out.push_back(make_stmt(SetFlagStmt{a, b, make_int(kBarrierEventId, loc)}, loc));
    out.push_back(make_stmt(WaitFlagStmt{a, b, make_int(kBarrierEventId, loc)}, loc));
  };
  if (core == CoreKind::C) {
    for (Pipe p : {Pipe::MTE2, Pipe::MTE1, Pipe::FIX}) flag(p, Pipe::M);
    for (Pipe p : {Pipe::MTE2, Pipe::MTE1, Pipe::FIX}) flag(Pipe::M, p);
  } else {
    for (Pipe p : {Pipe::MTE2, Pipe::V, Pipe::MTE3}) flag(p, Pipe::S);
  }
  return out;
}

Stmt StmtMutator::mutate(const Stmt& s) {
  if (!s) return s;
  return std::visit(
      [&](const auto& n) -> Stmt {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>)
          return mutate_seq(n, s);
        else if constexpr (std::is_same_v<T, ForStmt>)
          return mutate_for(n, s);
        else if constexpr (std::is_same_v<T, IfStmt>)
          return mutate_if(n, s);
        else if constexpr (std::is_same_v<T, ScopeStmt>)
          return mutate_scope(n, s);
        else
          return mutate_leaf(s);
      },
      s->node);
}

Stmt StmtMutator::mutate_seq(const SeqStmt& s, const Stmt& self) {
  SeqStmt out;
  bool changed = false;
  for (const auto& c : s.body) {
    Stmt m = mutate(c);
    changed |= (m != c);
    if (m)
      out.body.push_back(std::move(m));
    else
      changed = true;
  }
  return changed ? make_stmt(std::move(out), self->loc) : self;
}

Stmt StmtMutator::mutate_for(const ForStmt& s, const Stmt& self) {
  Stmt b = mutate(s.body);
  if (b == s.body) return self;
  ForStmt f = s;
  f.body = std::move(b);
  return make_stmt(std::move(f), self->loc);
}

Stmt StmtMutator::mutate_if(const IfStmt& s, const Stmt& self) {
  Stmt t = mutate(s.then_body);
  Stmt e = mutate(s.else_body);
  if (t == s.then_body && e == s.else_body) return self;
  return make_stmt(IfStmt{s.cond, std::move(t), std::move(e)}, self->loc);
}

Stmt StmtMutator::mutate_scope(const ScopeStmt& s, const Stmt& self) {
  Stmt b = mutate(s.body);
  if (b == s.body) return self;
  return make_stmt(ScopeStmt{s.kind, std::move(b)}, self->loc);
}

}  // namespace tilepipe::ir

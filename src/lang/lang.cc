// Builders behind the DSL: each call appends one IR node to the innermost open block.
#include "tilepipe/lang.h"

#include <fmt/format.h>

#include <set>

#include "tilepipe/ir_vars.h"

namespace tilepipe::lang {
namespace {
thread_local KernelBuilder* g_current = nullptr;

/// A default-constructed Tensor has no buffer behind it; `what` names the operation.
void require_buffer(const ir::Buffer& b, const char* what, SrcLoc loc) {
  if (!b)
    throw BuildError{ir::Loc::from(loc),
                     fmt::format("{} a Tensor that holds no buffer: assign it from input/output/"
                                 "workspace or an alloc_* call first",
                                 what)};
}

enum FrameKind { kRoot, kFor, kScope, kIfThen, kIfElse, kBlock };
const char* frame_name(int k) {
  switch (k) {
    case kFor:
      return "loop";
    case kScope:
      return "scope";
    case kIfThen:
    case kIfElse:
      return "if";
    case kBlock:
      return "block";
    default:
      return "kernel";
  }
}
}  // namespace

struct KernelBuilder::Frame {
  int kind;
  ir::Loc loc;
  std::vector<ir::Stmt> body;
  // what the frame closes into
  ir::ForStmt for_stmt;
  ir::CoreKind scope_kind = ir::CoreKind::C;
  ir::Expr cond;
  std::vector<ir::Stmt> then_body;
};

// ---- expressions ----

#define TP_BINOP(OP, KIND)                                       \
  Ex operator OP(const Ex& a, const Ex& b) {                     \
    return Ex(ir::make_binary(ir::BinOp::KIND, a.ir(), b.ir())); \
  }
TP_BINOP(+, Add)
TP_BINOP(-, Sub)
TP_BINOP(*, Mul)
TP_BINOP(/, Div)
TP_BINOP(%, Mod)
TP_BINOP(<, Lt)
TP_BINOP(<=, Le)
TP_BINOP(>, Gt)
TP_BINOP(>=, Ge)
TP_BINOP(==, Eq)
TP_BINOP(!=, Ne)
TP_BINOP(&&, And)
TP_BINOP(||, Or)
#undef TP_BINOP
Ex min(const Ex& a, const Ex& b) {
  return Ex(ir::make_binary(ir::BinOp::Min, a.ir(), b.ir()));
}
Ex max(const Ex& a, const Ex& b) {
  return Ex(ir::make_binary(ir::BinOp::Max, a.ir(), b.ir()));
}
Ex select(const Ex& c, const Ex& a, const Ex& b) {
  return Ex(ir::make_select(c.ir(), a.ir(), b.ir()));
}

// ---- slicing ----

Tile Tensor::slice_of(const std::vector<Index>& idx, SrcLoc loc) const {
  require_buffer(b_, "slice of", loc);
  const auto& shape = b_->shape;
  if (idx.size() > shape.size()) {
    throw BuildError{
        ir::Loc::from(loc),
        fmt::format("slice of '{}' has {} indices, but the buffer has rank {} "
                    "(shape [{}]); pass at most {} indices",
                    b_->name, idx.size(), shape.size(), fmt::join(shape, ", "), shape.size())};
  }
  ir::Region r{b_, {}, {}};
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d >= idx.size()) {  // trailing dimensions not named are taken whole
      r.start.push_back(ir::make_int(0));
      r.extent.push_back(shape[d]);
      continue;
    }
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, Ex>) {
            r.start.push_back(v.ir());
            r.extent.push_back(1);
          } else if constexpr (std::is_same_v<T, Range>) {
            r.start.push_back(v.start.ir());
            r.extent.push_back(v.extent);
          } else {
            r.start.push_back(ir::make_int(0));
            r.extent.push_back(shape[d]);
          }
        },
        idx[d].v);
  }
  return Tile(std::move(r));
}

Scalar at(const Tensor& t, std::vector<Index> idx, SrcLoc loc) {
  Tile e = t.slice_of(idx, loc);
  Scalar s(0.0);
  s.v = e.ir();
  return s;
}

Ex let_(const std::string& name, Ex value, SrcLoc loc) {
  ir::Var v = ir::make_var(name);
  KernelBuilder::current(loc).emit(ir::make_stmt(ir::LetStmt{v, value.ir()}, ir::Loc::from(loc)));
  return Ex(ir::make_var_ref(v, ir::Loc::from(loc)));
}

void assign(const Ex& var, Ex value, SrcLoc loc) {
  auto* v = std::get_if<ir::VarRef>(&var.ir()->node);
  if (!v)
    throw BuildError{ir::Loc::from(loc),
                     fmt::format("assign to '{}', which is not a variable: assign to what let_ "
                                 "returned",
                                 ir::print(var.ir()))};
  KernelBuilder::current(loc).emit(
      ir::make_stmt(ir::LetStmt{v->var, value.ir()}, ir::Loc::from(loc)));
}

Ex load(const Tensor& t, std::vector<Ex> idx, SrcLoc loc) {
  require_buffer(t.ir(), "load from", loc);
  if (idx.size() != t.shape().size()) {
    throw BuildError{
        ir::Loc::from(loc),
        fmt::format("load of '{}' has {} indices, but the buffer has rank {} "
                    "(shape [{}]); a load reads one element: index every dimension",
                    t.ir()->name, idx.size(), t.shape().size(), fmt::join(t.shape(), ", "))};
  }
  std::vector<ir::Expr> index;
  for (const auto& i : idx) index.push_back(i.ir());
  return Ex(ir::make_load(t.ir(), std::move(index), ir::Loc::from(loc)));
}

// ---- kernel builder ----

KernelBuilder::KernelBuilder(std::string name, int64_t block_num, SrcLoc loc)
    : frames_(new std::vector<Frame>()), prev_(g_current) {
  prog_.name = std::move(name);
  prog_.block_num = block_num;
  prog_.loc = ir::Loc::from(loc);
  frames_->push_back(Frame{kRoot, prog_.loc, {}, {}, ir::CoreKind::C, nullptr, {}});
  g_current = this;
}

KernelBuilder::~KernelBuilder() {
  g_current = prev_;
  delete frames_;
}

KernelBuilder& KernelBuilder::current(SrcLoc loc) {
  if (!g_current) {
    throw BuildError{ir::Loc::from(loc),
                     "DSL call outside a kernel: create a KernelBuilder before building ops"};
  }
  return *g_current;
}

Tensor KernelBuilder::param(const std::string& name, std::vector<int64_t> shape, DType dtype,
                            ir::TensorRole role, ir::Loc loc) {
  auto b = ir::make_buffer(name, ir::Scope::GM, dtype, std::move(shape), role, std::move(loc));
  (role == ir::TensorRole::Workspace ? prog_.workspaces : prog_.params).push_back(b);
  return Tensor(b);
}

Tensor KernelBuilder::input(const std::string& name, std::vector<int64_t> shape, DType dtype,
                            SrcLoc loc) {
  return param(name, std::move(shape), dtype, ir::TensorRole::Input, ir::Loc::from(loc));
}
Tensor KernelBuilder::output(const std::string& name, std::vector<int64_t> shape, DType dtype,
                             SrcLoc loc) {
  return param(name, std::move(shape), dtype, ir::TensorRole::Output, ir::Loc::from(loc));
}
Tensor KernelBuilder::workspace(const std::string& name, std::vector<int64_t> shape, DType dtype,
                                SrcLoc loc) {
  return param(name, std::move(shape), dtype, ir::TensorRole::Workspace, ir::Loc::from(loc));
}

LaunchIds KernelBuilder::launch() const {
  return {Ex(ir::make_cid()), Ex(ir::make_vid())};
}

void KernelBuilder::emit(ir::Stmt s) {
  frames_->back().body.push_back(std::move(s));
}

static ir::Stmt seq_of(std::vector<ir::Stmt> body, const ir::Loc& loc) {
  if (body.size() == 1) return body.front();
  return ir::make_stmt(ir::SeqStmt{std::move(body)}, loc);
}

ir::Program KernelBuilder::finish(SrcLoc loc) {
  if (frames_->size() != 1) {
    const Frame& open = frames_->back();
    throw BuildError{ir::Loc::from(loc),
                     fmt::format("kernel '{}' finished with a {} still open (opened at {}); "
                                 "close it with the matching end_ call",
                                 prog_.name, frame_name(open.kind), open.loc.str())};
  }
  prog_.body = seq_of(std::move(frames_->back().body), prog_.loc);
  frames_->back().body.clear();
  // A front end that lowers an unscoped body once per core kind binds names in both
  // passes; a core must not pay for a read only the other core uses.
  prog_.body = ir::drop_dead_lets(prog_.body);
  return prog_;
}

Ex KernelBuilder::begin_for(const std::string& var, Ex begin, Ex end, int64_t step,
                            ir::ForKind kind, PipelineOpts opts, ir::Loc loc) {
  Frame f{kFor, loc, {}, {}, ir::CoreKind::C, nullptr, {}};
  // Unnamed loops are named by depth (i, j, k, ...) so printed IR reads like the kernel.
  static const char* kNames[] = {"i", "j", "k", "l", "m", "n", "p", "q"};
  f.for_stmt.var = ir::make_var(!var.empty() ? var : kNames[loop_depth_ % 8]);
  f.for_stmt.begin = begin.ir();
  f.for_stmt.end = end.ir();
  f.for_stmt.step = step;
  f.for_stmt.kind = kind;
  if (kind == ir::ForKind::Pipelined) {
    f.for_stmt.num_stages = opts.num_stages;
    f.for_stmt.cross_interval = opts.cross_interval;
  }
  Ex v(ir::make_var_ref(f.for_stmt.var, loc));
  frames_->push_back(std::move(f));
  ++loop_depth_;
  return v;
}

void KernelBuilder::close(int kind, ir::Loc loc) {
  Frame& f = frames_->back();
  bool ok = f.kind == kind || (kind == kIfThen && f.kind == kIfElse);
  if (!ok || frames_->size() == 1) {
    throw BuildError{loc, fmt::format("end of {} found, but the innermost open block is a {} "
                                      "(opened at {}); close blocks in reverse order",
                                      frame_name(kind), frame_name(f.kind), f.loc.str())};
  }
}

void KernelBuilder::end_for(ir::Loc loc) {
  close(kFor, loc);
  Frame f = std::move(frames_->back());
  frames_->pop_back();
  --loop_depth_;
  f.for_stmt.body = seq_of(std::move(f.body), f.loc);
  emit(ir::make_stmt(std::move(f.for_stmt), f.loc));
}

void KernelBuilder::begin_scope(ir::CoreKind kind, ir::Loc loc) {
  Frame f{kScope, loc, {}, {}, kind, nullptr, {}};
  frames_->push_back(std::move(f));
}

void KernelBuilder::end_scope(ir::Loc loc) {
  close(kScope, loc);
  Frame f = std::move(frames_->back());
  frames_->pop_back();
  emit(ir::make_stmt(ir::ScopeStmt{f.scope_kind, seq_of(std::move(f.body), f.loc)}, f.loc));
}

void KernelBuilder::begin_block(ir::Loc loc) {
  frames_->push_back(Frame{kBlock, loc, {}, {}, ir::CoreKind::C, nullptr, {}});
}

void KernelBuilder::end_block(ir::Loc loc) {
  close(kBlock, loc);
  Frame f = std::move(frames_->back());
  frames_->pop_back();
  if (!f.body.empty()) emit(ir::make_stmt(ir::SeqStmt{std::move(f.body)}, f.loc));
}

void KernelBuilder::begin_if(Ex cond, ir::Loc loc) {
  Frame f{kIfThen, loc, {}, {}, ir::CoreKind::C, cond.ir(), {}};
  frames_->push_back(std::move(f));
}

void KernelBuilder::begin_else(ir::Loc loc) {
  Frame& f = frames_->back();
  if (f.kind != kIfThen) {
    throw BuildError{loc, fmt::format("else without an open if (innermost block: {} at {})",
                                      frame_name(f.kind), f.loc.str())};
  }
  f.then_body = std::move(f.body);
  f.body.clear();
  f.kind = kIfElse;
}

void KernelBuilder::end_if(ir::Loc loc) {
  close(kIfThen, loc);
  Frame f = std::move(frames_->back());
  frames_->pop_back();
  ir::IfStmt s;
  s.cond = f.cond;
  if (f.kind == kIfElse) {
    s.then_body = seq_of(std::move(f.then_body), f.loc);
    s.else_body = seq_of(std::move(f.body), f.loc);
  } else {
    s.then_body = seq_of(std::move(f.body), f.loc);
  }
  emit(ir::make_stmt(std::move(s), f.loc));
}

Tensor KernelBuilder::alloc(const std::string& name, ir::Scope scope, std::vector<int64_t> shape,
                            DType dtype, ir::Loc loc) {
  auto b = ir::make_buffer(name, scope, dtype, std::move(shape), ir::TensorRole::None, loc);
  emit(ir::make_stmt(ir::AllocStmt{b}, loc));
  return Tensor(b);
}

void pin_address(const Tensor& t, int64_t byte_offset, SrcLoc loc) {
  require_buffer(t.ir(), "pin_address of", loc);
  KernelBuilder::current(loc).pin(t.ir(), byte_offset);
}

// ---- sugar ----

static ir::Loc L(const SrcLoc& l) {
  return ir::Loc::from(l);
}

static void scope(ir::CoreKind kind, const std::function<void()>& body, SrcLoc loc) {
  auto& k = KernelBuilder::current(loc);
  k.begin_scope(kind, L(loc));
  body();
  k.end_scope(L(loc));
}
void scope_c(const std::function<void()>& body, SrcLoc loc) {
  scope(ir::CoreKind::C, body, loc);
}
void scope_v(const std::function<void()>& body, SrcLoc loc) {
  scope(ir::CoreKind::V, body, loc);
}

static void loop(Ex b, Ex e, int64_t step, ir::ForKind kind, PipelineOpts opts,
                 const std::function<void(Ex)>& body, SrcLoc loc) {
  auto& k = KernelBuilder::current(loc);
  Ex v = k.begin_for("", std::move(b), std::move(e), step, kind, opts, L(loc));
  body(v);
  k.end_for(L(loc));
}

void serial(Ex n, const std::function<void(Ex)>& body, SrcLoc loc) {
  loop(0, std::move(n), 1, ir::ForKind::Serial, {}, body, loc);
}
void serial(Ex begin, Ex end, const std::function<void(Ex)>& body, SrcLoc loc) {
  loop(std::move(begin), std::move(end), 1, ir::ForKind::Serial, {}, body, loc);
}
void serial(Ex begin, Ex end, int64_t step, const std::function<void(Ex)>& body, SrcLoc loc) {
  loop(std::move(begin), std::move(end), step, ir::ForKind::Serial, {}, body, loc);
}
void parallel(Ex n, const std::function<void(Ex)>& body, SrcLoc loc) {
  loop(0, std::move(n), 1, ir::ForKind::Parallel, {}, body, loc);
}
void pipelined(Ex n, PipelineOpts opts, const std::function<void(Ex)>& body, SrcLoc loc) {
  loop(0, std::move(n), 1, ir::ForKind::Pipelined, opts, body, loc);
}

void pipelined(Ex begin, Ex end, PipelineOpts opts, const std::function<void(Ex)>& body,
               SrcLoc loc) {
  loop(std::move(begin), std::move(end), 1, ir::ForKind::Pipelined, opts, body, loc);
}

void knob(const std::string& param, const std::string& role, int64_t value, int64_t min,
          int64_t max, int64_t trip_count, std::vector<std::string> versioned, SrcLoc loc) {
  KernelBuilder::current(loc).add_knob(
      ir::Knob{param, role, value, min, max, trip_count, std::move(versioned), ir::Loc::from(loc)});
}

void if_(Ex cond, const std::function<void()>& then_body, SrcLoc loc) {
  auto& k = KernelBuilder::current(loc);
  k.begin_if(std::move(cond), L(loc));
  then_body();
  k.end_if(L(loc));
}
void if_else(Ex cond, const std::function<void()>& then_body,
             const std::function<void()>& else_body, SrcLoc loc) {
  auto& k = KernelBuilder::current(loc);
  k.begin_if(std::move(cond), L(loc));
  then_body();
  k.begin_else(L(loc));
  else_body();
  k.end_if(L(loc));
}

#define TP_ALLOC(FN, SCOPE)                                                                   \
  Tensor FN(const std::string& name, std::vector<int64_t> shape, DType dtype, SrcLoc loc) {   \
    return KernelBuilder::current(loc).alloc(name, ir::Scope::SCOPE, std::move(shape), dtype, \
                                             L(loc));                                         \
  }
TP_ALLOC(alloc_L1, L1)
TP_ALLOC(alloc_L0A, L0A)
TP_ALLOC(alloc_L0B, L0B)
TP_ALLOC(alloc_L0C, L0C)
TP_ALLOC(alloc_ub, UB)
#undef TP_ALLOC

template <class T>
static void emit(T node, SrcLoc loc) {
  KernelBuilder::current(loc).emit(ir::make_stmt(std::move(node), L(loc)));
}

void copy(Tile src, Tile dst, CopyOpts opts, SrcLoc loc) {
  emit(ir::CopyStmt{src.ir(), dst.ir(), opts.transpose, opts.pad_value, opts.atomic_add, opts.relu},
       loc);
}

void gemm(Tile a, Tile b, Tile c, GemmOpts o, SrcLoc loc) {
  emit(ir::GemmStmt{a.ir(), b.ir(), c.ir(), o.transpose_a, o.transpose_b, o.init}, loc);
}
void mma(Tile a, Tile b, Tile c, bool init, SrcLoc loc) {
  gemm(std::move(a), std::move(b), std::move(c), GemmOpts{false, false, init}, loc);
}

static void reduce(ir::ReduceKind k, Tile src, Tile dst, int dim, bool clear, SrcLoc loc) {
  emit(ir::ReduceStmt{k, src.ir(), dst.ir(), dim, clear}, loc);
}
void reduce_max(Tile src, Tile dst, int dim, bool clear, SrcLoc loc) {
  reduce(ir::ReduceKind::Max, std::move(src), std::move(dst), dim, clear, loc);
}
void reduce_min(Tile src, Tile dst, int dim, bool clear, SrcLoc loc) {
  reduce(ir::ReduceKind::Min, std::move(src), std::move(dst), dim, clear, loc);
}
void reduce_sum(Tile src, Tile dst, int dim, bool clear, SrcLoc loc) {
  reduce(ir::ReduceKind::Sum, std::move(src), std::move(dst), dim, clear, loc);
}

void set_flag(Pipe src, Pipe dst, Ex id, SrcLoc loc) {
  emit(ir::SetFlagStmt{src, dst, id.ir()}, loc);
}
void wait_flag(Pipe src, Pipe dst, Ex id, SrcLoc loc) {
  emit(ir::WaitFlagStmt{src, dst, id.ir()}, loc);
}
void pipe_barrier(Pipe pipe, SrcLoc loc) {
  emit(ir::PipeBarrierStmt{pipe}, loc);
}
void set_cross_flag(Pipe pipe, Ex id, int mode, SrcLoc loc) {
  emit(ir::SetCrossFlagStmt{pipe, id.ir(), mode}, loc);
}
void wait_cross_flag(Ex id, SrcLoc loc) {
  emit(ir::WaitCrossFlagStmt{id.ir()}, loc);
}

namespace tile {
namespace {
void op(ir::TileOpKind k, Tile dst, std::vector<Tile> srcs, std::optional<Operand> b, SrcLoc loc,
        CmpMode cmp = CmpMode::EQ, std::array<int64_t, 3> attrs = {}) {
  ir::TileOpStmt s;
  s.op = k;
  s.dst = dst.ir();
  s.cmp = cmp;
  s.attrs = attrs;
  for (auto& t : srcs) s.srcs.push_back(t.ir());
  if (b) {
    if (auto* t = std::get_if<Tile>(&b->v))
      s.srcs.push_back(t->ir());
    else
      s.scalar = std::get<Scalar>(b->v).ir();
  }
  emit(std::move(s), loc);
}
}  // namespace

#define TP_BIN(FN, KIND)                             \
  void FN(Tile dst, Tile a, Operand b, SrcLoc loc) { \
    op(ir::TileOpKind::KIND, dst, {a}, b, loc);      \
  }
TP_BIN(add, Add)
TP_BIN(sub, Sub)
TP_BIN(mul, Mul)
TP_BIN(div, Div)
TP_BIN(max, Max)
TP_BIN(min, Min)
#undef TP_BIN
void adds(Tile dst, Tile a, Scalar s, SrcLoc loc) {
  op(ir::TileOpKind::Add, dst, {a}, s, loc);
}
void muls(Tile dst, Tile a, Scalar s, SrcLoc loc) {
  op(ir::TileOpKind::Mul, dst, {a}, s, loc);
}

#define TP_UN(FN, KIND)                            \
  void FN(Tile dst, Tile src, SrcLoc loc) {        \
    op(ir::TileOpKind::KIND, dst, {src}, {}, loc); \
  }
TP_UN(exp, Exp)
TP_UN(ln, Ln)
TP_UN(abs, Abs)
TP_UN(sqrt, Sqrt)
TP_UN(rsqrt, Rsqrt)
TP_UN(reciprocal, Reciprocal)
TP_UN(relu, Relu)
TP_UN(sin, Sin)
TP_UN(cos, Cos)
TP_UN(cast, Cast)
TP_UN(broadcast, Broadcast)
TP_UN(reinterpret, Reinterpret)
#undef TP_UN

void cast(Tile dst, Tile src, ir::CastRound round, SrcLoc loc) {
  const ir::DType d = dst.ir().buffer ? dst.ir().buffer->dtype : ir::DType::F32;
  const bool integral =
      src.ir().buffer && ir::is_float(d) && src.ir().buffer->dtype == d;  // f32 -> f32
  op(ir::TileOpKind::Cast, dst, {src}, {}, loc, CmpMode::EQ,
     {static_cast<int64_t>(round), integral ? ir::kCastIntegral : 0, 0});
}

void pow(Tile dst, Tile a, Operand b, SrcLoc loc) {
  op(ir::TileOpKind::Pow, dst, {a}, b, loc);
}

void axpy(Tile dst, Tile src, Scalar s, SrcLoc loc) {
  op(ir::TileOpKind::Axpy, dst, {src}, s, loc);
}
void fill(Tile dst, Scalar v, SrcLoc loc) {
  op(ir::TileOpKind::Fill, dst, {}, v, loc);
}
void store(Tile dst, Scalar v, SrcLoc loc) {
  op(ir::TileOpKind::Store, dst, {}, v, loc);
}
void compare(Tile dst, Tile a, Operand b, CmpMode mode, SrcLoc loc) {
  op(ir::TileOpKind::Compare, dst, {a}, b, loc, mode);
}
void select(Tile dst, Tile mask, Tile a, Operand b, SrcLoc loc) {
  op(ir::TileOpKind::SelectOp, dst, {mask, a}, b, loc);
}
void gather(Tile dst, Tile src, Tile offsets, SrcLoc loc) {
  op(ir::TileOpKind::Gather, dst, {src, offsets}, {}, loc);
}
void transpose(Tile dst, Tile src, SrcLoc loc) {
  op(ir::TileOpKind::Transpose, dst, {src}, {}, loc);
}
void round(Tile dst, Tile src, SrcLoc loc) {
  op(ir::TileOpKind::Round, dst, {src}, {}, loc);
}
void arange(Tile dst, Scalar first, SrcLoc loc) {
  op(ir::TileOpKind::Arange, dst, {}, first, loc);
}
void sort(Tile dst, Tile src, Scalar count, SrcLoc loc) {
  op(ir::TileOpKind::Sort, dst, {src}, count, loc);
}
void sort32(Tile dst, Tile keys, Tile indices, SrcLoc loc) {
  op(ir::TileOpKind::Sort32, dst, {keys, indices}, {}, loc);
}
void merge_sort(Tile dst, std::vector<Tile> srcs, SrcLoc loc) {
  op(ir::TileOpKind::MergeSort, dst, std::move(srcs), {}, loc);
}
void gather_mask(Tile dst, Tile src, int pattern, SrcLoc loc) {
  op(ir::TileOpKind::GatherMask, dst, {src}, {}, loc, CmpMode::EQ, {pattern, 0, 0});
}
void gatherb(Tile dst, Tile src, Tile offsets, int64_t repeats, int64_t blk_stride,
             int64_t rep_stride, SrcLoc loc) {
  op(ir::TileOpKind::Gatherb, dst, {src, offsets}, {}, loc, CmpMode::EQ,
     {repeats, blk_stride, rep_stride});
}
}  // namespace tile

}  // namespace tilepipe::lang

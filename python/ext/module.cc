// The pybind11 extension behind the Python front end (python/tilelang): tile IR is built
// through lang::KernelBuilder's imperative builder (explicit source locations: the user's
// Python file:line), then verified, transformed, lowered and simulated by the same library
// the C++ kernels use. Python owns the language (ast walk, closures, shapes); this module
// owns nothing but the calls into the C++ layers.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ext.h"
#include "tilepipe/advisor.h"
#include "tilepipe/chip.h"
#include "tilepipe/html.h"
#include "tilepipe/ir.h"
#include "tilepipe/ir_range.h"
#include "tilepipe/lang.h"
#include "tilepipe/lower.h"
#include "tilepipe/passes.h"
#include "tilepipe/prof.h"
#include "tilepipe/sim.h"
#include "tilepipe/vec_modes.h"
#include "tilepipe/verify.h"

namespace py = pybind11;
using namespace tilepipe;
using tilepipe::ext::bind_driver;
using tilepipe::ext::dtype_of;
using tilepipe::ext::guarded;

ir::DType tilepipe::ext::dtype_of(const std::string& s) {
  if (auto d = ir::dtype_from_string(s)) return *d;
  throw py::value_error("unknown dtype " + s);
}

namespace {

ir::Loc make_loc(const py::object& loc) {
  if (loc.is_none()) return {};
  auto t = loc.cast<py::tuple>();
  ir::Loc l;
  l.file = t[0].cast<std::string>();
  l.line = t[1].cast<int>();
  if (t.size() > 2) l.column = t[2].cast<int>();
  return l;
}

ir::Pipe pipe_of(const std::string& s) {
  auto p = ir::pipe_from_string(s);
  if (!p) throw std::invalid_argument("unknown pipe " + s);
  return *p;
}

// ---- expressions ----

struct PyExpr {
  ir::Expr e;
};

ir::Expr to_expr(const py::handle& h) {
  if (py::isinstance<PyExpr>(h)) return h.cast<PyExpr&>().e;
  if (py::isinstance<py::bool_>(h)) return ir::make_int(h.cast<bool>() ? 1 : 0);
  if (py::isinstance<py::int_>(h)) return ir::make_int(h.cast<int64_t>());
  if (py::hasattr(h, "__index__"))  // numpy integers, bound symbolic dims
    return ir::make_int(h.attr("__index__")().cast<int64_t>());
  throw py::type_error(fmt::format("expected an integer expression, found {}",
                                   py::str(py::type::of(h)).cast<std::string>()));
}

PyExpr bin(ir::BinOp op, const py::handle& a, const py::handle& b) {
  ir::Expr x = to_expr(a), y = to_expr(b);
  auto cx = ir::as_const(x), cy = ir::as_const(y);
  if (cx && cy) return {ir::make_int(ir::eval_binop(op, *cx, *cy))};
  return {ir::fold(op, x, y)};
}

/// Does the expression read a tensor element (a scalar load)?
bool has_load(const ir::Expr& e) {
  return std::visit(
      [&](const auto& n) -> bool {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, ir::Load>) return true;
        if constexpr (std::is_same_v<T, ir::Binary>) return has_load(n.a) || has_load(n.b);
        if constexpr (std::is_same_v<T, ir::Select>)
          return has_load(n.cond) || has_load(n.then_value) || has_load(n.else_value);
        return false;
      },
      e->node);
}

/// b - a when it is a constant (slice extents `x : x + 64`).
std::optional<int64_t> const_diff(const py::handle& a, const py::handle& b) {
  return ir::const_diff(to_expr(a), to_expr(b));
}

/// Interval of an expression given intervals of loop variables (by id), cid in
/// [0, block_num) and vid in [0, 1]. nullopt when it reads memory or is unbounded.
using Intervals = std::map<int, std::pair<int64_t, int64_t>>;
std::optional<std::pair<int64_t, int64_t>> bounds(const ir::Expr& e, const Intervals& vars,
                                                  int64_t block_num) {
  ir::VarRanges r = {{ir::kCidVar, ir::Range::of(0, block_num - 1)},
                     {ir::kVidVar, ir::Range::of(0, 1)}};
  for (const auto& [id, v] : vars) r[id] = ir::Range::of(v.first, v.second);
  const ir::Range x = ir::eval_range(e, r);
  if (!x.known) return std::nullopt;
  return std::pair{x.lo, x.hi};
}

// ---- regions and operands ----

struct PyBuffer {
  ir::Buffer b;
};

/// (buffer, [start exprs], [extents]) -> ir::Region
ir::Region to_region(const py::handle& h) {
  auto t = h.cast<py::tuple>();
  ir::Region r;
  r.buffer = t[0].cast<PyBuffer&>().b;
  for (auto s : t[1].cast<py::list>()) r.start.push_back(to_expr(s));
  for (auto x : t[2].cast<py::list>()) r.extent.push_back(x.cast<int64_t>());
  return r;
}

ir::ScalarOperand to_scalar(const py::handle& h) {
  if (py::isinstance<py::tuple>(h)) return {to_region(h)};
  if (py::isinstance<PyExpr>(h)) return {h.cast<PyExpr&>().e};
  if (py::isinstance<py::float_>(h)) return {h.cast<double>()};
  if (py::isinstance<py::int_>(h)) return {static_cast<double>(h.cast<int64_t>())};
  throw py::type_error("expected a scalar operand (number, integer expression or element)");
}

ir::TileOpKind tile_kind(const std::string& s) {
  static const std::map<std::string, ir::TileOpKind> m = {
      {"add", ir::TileOpKind::Add},
      {"sub", ir::TileOpKind::Sub},
      {"mul", ir::TileOpKind::Mul},
      {"div", ir::TileOpKind::Div},
      {"max", ir::TileOpKind::Max},
      {"min", ir::TileOpKind::Min},
      {"exp", ir::TileOpKind::Exp},
      {"ln", ir::TileOpKind::Ln},
      {"abs", ir::TileOpKind::Abs},
      {"sqrt", ir::TileOpKind::Sqrt},
      {"rsqrt", ir::TileOpKind::Rsqrt},
      {"reciprocal", ir::TileOpKind::Reciprocal},
      {"relu", ir::TileOpKind::Relu},
      {"sin", ir::TileOpKind::Sin},
      {"cos", ir::TileOpKind::Cos},
      {"pow", ir::TileOpKind::Pow},
      {"axpy", ir::TileOpKind::Axpy},
      {"cast", ir::TileOpKind::Cast},
      {"fill", ir::TileOpKind::Fill},
      {"store", ir::TileOpKind::Store},
      {"broadcast", ir::TileOpKind::Broadcast},
      {"compare", ir::TileOpKind::Compare},
      {"select", ir::TileOpKind::SelectOp},
      {"gather", ir::TileOpKind::Gather},
      {"transpose", ir::TileOpKind::Transpose},
      {"bit_and", ir::TileOpKind::BitAnd},
      {"bit_or", ir::TileOpKind::BitOr},
      {"bit_xor", ir::TileOpKind::BitXor},
      {"bit_not", ir::TileOpKind::BitNot},
      {"shl", ir::TileOpKind::ShiftLeft},
      {"shr", ir::TileOpKind::ShiftRight},
      {"round", ir::TileOpKind::Round},
      {"arange", ir::TileOpKind::Arange},
      {"sort", ir::TileOpKind::Sort},
      {"merge_sort", ir::TileOpKind::MergeSort},
      {"sort32", ir::TileOpKind::Sort32},
      {"gather_mask", ir::TileOpKind::GatherMask},
      {"gatherb", ir::TileOpKind::Gatherb},
      {"reinterpret", ir::TileOpKind::Reinterpret}};
  auto it = m.find(s);
  if (it == m.end()) throw std::invalid_argument("unknown tile op " + s);
  return it->second;
}

ir::CmpMode cmp_of(const std::string& s) {
  static const std::map<std::string, ir::CmpMode> m = {
      {"EQ", ir::CmpMode::EQ}, {"NE", ir::CmpMode::NE}, {"GT", ir::CmpMode::GT},
      {"GE", ir::CmpMode::GE}, {"LT", ir::CmpMode::LT}, {"LE", ir::CmpMode::LE}};
  auto it = m.find(s);
  if (it == m.end()) throw std::invalid_argument("unknown compare mode " + s);
  return it->second;
}

// ---- the builder ----

class Builder {
 public:
  Builder(const std::string& name, int64_t block_num, const py::object& loc)
      : kb_(std::make_unique<lang::KernelBuilder>(name, block_num)) {
    loc_ = make_loc(loc);
  }
  PyBuffer param(const std::string& name, std::vector<int64_t> shape, const std::string& dtype,
                 const std::string& role, const py::object& loc) {
    return guarded([&] {
      // KernelBuilder records the C++ call site; the Python location is set on the buffer
      // node through a fresh buffer with the same identity fields.
      lang::Tensor t = role == "output"      ? kb_->output(name, shape, dtype_of(dtype))
                       : role == "workspace" ? kb_->workspace(name, shape, dtype_of(dtype))
                                             : kb_->input(name, shape, dtype_of(dtype));
      auto* node = const_cast<ir::BufferNode*>(t.ir().get());
      node->loc = make_loc(loc);  // the node is not shared yet: only this builder holds it
      return PyBuffer{t.ir()};
    });
  }
  PyBuffer alloc(const std::string& name, const std::string& scope, std::vector<int64_t> shape,
                 const std::string& dtype, const py::object& loc) {
    static const std::map<std::string, ir::Scope> scopes = {{"L1", ir::Scope::L1},
                                                            {"L0A", ir::Scope::L0A},
                                                            {"L0B", ir::Scope::L0B},
                                                            {"L0C", ir::Scope::L0C},
                                                            {"UB", ir::Scope::UB}};
    return guarded([&] {
      return PyBuffer{
          kb_->alloc(name, scopes.at(scope), shape, dtype_of(dtype), make_loc(loc)).ir()};
    });
  }
  PyExpr begin_for(const std::string& var, const py::object& b, const py::object& e, int64_t step,
                   const std::string& kind, int stages, int cross, const py::object& loc) {
    ir::ForKind k = kind == "parallel"    ? ir::ForKind::Parallel
                    : kind == "pipelined" ? ir::ForKind::Pipelined
                                          : ir::ForKind::Serial;
    return guarded([&] {
      lang::Ex v = kb_->begin_for(var, lang::Ex(to_expr(b)), lang::Ex(to_expr(e)), step, k,
                                  lang::PipelineOpts{stages, cross}, make_loc(loc));
      return PyExpr{v.ir()};
    });
  }
  void end_for(const py::object& loc) {
    guarded([&] { kb_->end_for(make_loc(loc)); });
  }
  void begin_scope(const std::string& kind, const py::object& loc) {
    guarded(
        [&] { kb_->begin_scope(kind == "C" ? ir::CoreKind::C : ir::CoreKind::V, make_loc(loc)); });
  }
  void end_scope(const py::object& loc) {
    guarded([&] { kb_->end_scope(make_loc(loc)); });
  }
  void begin_if(const py::object& c, const py::object& loc) {
    guarded([&] { kb_->begin_if(lang::Ex(to_expr(c)), make_loc(loc)); });
  }
  /// `name = value`, evaluated once here (ir::LetStmt); returns the variable.
  PyExpr let(const std::string& name, const py::object& value, const py::object& loc) {
    return guarded([&] {
      ir::Var v = ir::make_var(name);
      ir::Loc l = make_loc(loc);
      kb_->emit(ir::make_stmt(ir::LetStmt{v, to_expr(value)}, l));
      return PyExpr{ir::make_var_ref(v, l)};
    });
  }
  /// `var = value` for a variable let() returned: an assignment to its register.
  void assign(const PyExpr& var, const py::object& value, const py::object& loc) {
    guarded([&] {
      auto* v = std::get_if<ir::VarRef>(&var.e->node);
      if (!v) throw std::invalid_argument("assign: not a variable");
      kb_->emit(ir::make_stmt(ir::LetStmt{v->var, to_expr(value)}, make_loc(loc)));
    });
  }
  void begin_else(const py::object& loc) {
    guarded([&] { kb_->begin_else(make_loc(loc)); });
  }
  void begin_block(const py::object& loc) {
    guarded([&] { kb_->begin_block(make_loc(loc)); });
  }
  void end_block(const py::object& loc) {
    guarded([&] { kb_->end_block(make_loc(loc)); });
  }
  void end_if(const py::object& loc) {
    guarded([&] { kb_->end_if(make_loc(loc)); });
  }
  void copy(const py::object& src, const py::object& dst, bool transpose, std::optional<double> pad,
            const py::object& loc, bool atomic_add, bool relu) {
    emit(ir::CopyStmt{to_region(src), to_region(dst), transpose, pad, atomic_add, relu}, loc);
  }
  void gemm(const py::object& a, const py::object& b, const py::object& c, bool ta, bool tb,
            bool init, const py::object& loc) {
    emit(ir::GemmStmt{to_region(a), to_region(b), to_region(c), ta, tb, init}, loc);
  }
  /// init: a bool or an integer expression (nonzero: initialise C); k_chunk: 0 or kL0Size.
  void gemm_l1(const py::object& a, const py::object& b, const py::object& c, bool ta, bool tb,
               const py::object& init, int64_t k_chunk, const py::object& loc) {
    emit(ir::GemmL1Stmt{to_region(a), to_region(b), to_region(c), ta, tb, to_expr(init), k_chunk},
         loc);
  }
  void tile_op(const std::string& kind, const py::object& dst, const py::list& srcs,
               const py::object& scalar, const std::string& cmp, const py::object& loc,
               std::array<int64_t, 3> attrs) {
    ir::TileOpStmt s;
    s.op = tile_kind(kind);
    s.attrs = attrs;
    s.dst = to_region(dst);
    for (auto r : srcs) s.srcs.push_back(to_region(r));
    if (!scalar.is_none()) s.scalar = to_scalar(scalar);
    s.cmp = cmp_of(cmp);
    emit(std::move(s), loc);
  }
  void reduce(const std::string& kind, const py::object& src, const py::object& dst, int dim,
              bool clear, const py::object& loc) {
    ir::ReduceKind k = kind == "max"   ? ir::ReduceKind::Max
                       : kind == "min" ? ir::ReduceKind::Min
                                       : ir::ReduceKind::Sum;
    emit(ir::ReduceStmt{k, to_region(src), to_region(dst), dim, clear}, loc);
  }
  void set_flag(const std::string& s, const std::string& d, const py::object& id,
                const py::object& loc) {
    emit(ir::SetFlagStmt{pipe_of(s), pipe_of(d), to_expr(id)}, loc);
  }
  void wait_flag(const std::string& s, const std::string& d, const py::object& id,
                 const py::object& loc) {
    emit(ir::WaitFlagStmt{pipe_of(s), pipe_of(d), to_expr(id)}, loc);
  }
  void pipe_barrier(const std::string& p, const py::object& loc) {
    emit(ir::PipeBarrierStmt{pipe_of(p)}, loc);
  }
  void barrier_all(const std::string& core, const py::object& loc) {
    if (!kb_) throw std::runtime_error("builder already finished");
    for (auto& st : ir::barrier_all(core == "C" ? ir::CoreKind::C : ir::CoreKind::V, make_loc(loc)))
      kb_->emit(std::move(st));
  }
  void set_cross_flag(const std::string& p, const py::object& id, int mode, const py::object& loc) {
    emit(ir::SetCrossFlagStmt{pipe_of(p), to_expr(id), mode}, loc);
  }
  void wait_cross_flag(const py::object& id, const py::object& loc) {
    emit(ir::WaitCrossFlagStmt{to_expr(id)}, loc);
  }
  void pin(const PyBuffer& b, int64_t offset) { kb_->pin(b.b, offset); }
  ir::Program finish() {
    return guarded([&] {
      ir::Program p = kb_->finish();
      p.loc = loc_;
      kb_.reset();
      drop_unused(p);
      return p;
    });
  }

  /// The original's compiler allocates a buffer where it is accessed (TVM's
  /// PlanAndUpdateBufferAllocationLocation), so a buffer nothing accesses takes no bytes:
  /// rms_norm's float32 path declares the bf16 cast tiles and never uses them, and with
  /// them its sequential layout would pass even the physical UB.
  static void drop_unused(ir::Program& p) {
    struct Drop : ir::StmtMutator {
      std::set<int> used;
      const ir::Program* p = nullptr;
      ir::Stmt mutate_leaf(const ir::Stmt& s) override {
        auto* a = std::get_if<ir::AllocStmt>(&s->node);
        if (a && a->buffer->scope != ir::Scope::GM && !used.count(a->buffer->id) &&
            !p->addresses.count(a->buffer->id))
          return nullptr;
        return s;
      }
    } drop;
    drop.used = accessed_buffers(p);
    drop.p = &p;
    if (!p.body) return;
    ir::Stmt body = drop.mutate(p.body);
    p.body = body ? body : ir::make_stmt(ir::SeqStmt{}, p.loc);
  }

 private:
  template <class T>
  void emit(T node, const py::object& loc) {
    if (!kb_) throw std::runtime_error("builder already finished");
    kb_->emit(ir::make_stmt(std::move(node), make_loc(loc)));
  }
  std::unique_ptr<lang::KernelBuilder> kb_;
  ir::Loc loc_;
};

}  // namespace

PYBIND11_MODULE(_tilepipe, m) {
  m.doc() = "tilepipe's C++ IR, passes and simulator for the tilelang Python front end";
  m.attr("MAX_BUFFER_BYTES") = ir::kMaxBufferBytes;
  m.attr("BARRIER_EVENT_ID") = ir::kBarrierEventId;
  m.attr("CAST_INTEGRAL") = ir::kCastIntegral;
  m.def("gather_mask_keeps", &ir::gather_mask_keeps,
        "whether built-in gather_mask pattern p (1..7) keeps source element i");
  // The simulator's own lookup: $TILEPIPE_CONFIG_DIR, an installed prefix's configs, else
  // the source tree's (the Python side asks it rather than guessing from its own path).
  m.def("config_dir", [] { return config_dir(); });
  // The passes layer's option table: the names pass configs may set ("tilepipe.<name>").
  std::vector<std::string> options;
  for (const auto& info : passes::option_table()) options.push_back(info.name);
  m.attr("PASS_OPTIONS") = options;
  m.attr("CHECK_KINDS") =
      std::vector<std::string>(sim::kCheckKinds.begin(), sim::kCheckKinds.end());

  py::class_<PyExpr>(m, "Expr")
      .def("__add__", [](py::object a, py::object b) { return bin(ir::BinOp::Add, a, b); })
      .def("__radd__", [](py::object a, py::object b) { return bin(ir::BinOp::Add, b, a); })
      .def("__sub__", [](py::object a, py::object b) { return bin(ir::BinOp::Sub, a, b); })
      .def("__rsub__", [](py::object a, py::object b) { return bin(ir::BinOp::Sub, b, a); })
      .def("__mul__", [](py::object a, py::object b) { return bin(ir::BinOp::Mul, a, b); })
      .def("__rmul__", [](py::object a, py::object b) { return bin(ir::BinOp::Mul, b, a); })
      .def("__floordiv__", [](py::object a, py::object b) { return bin(ir::BinOp::Div, a, b); })
      .def("__rfloordiv__", [](py::object a, py::object b) { return bin(ir::BinOp::Div, b, a); })
      .def("__mod__", [](py::object a, py::object b) { return bin(ir::BinOp::Mod, a, b); })
      .def("__rmod__", [](py::object a, py::object b) { return bin(ir::BinOp::Mod, b, a); })
      .def("__neg__", [](py::object a) { return bin(ir::BinOp::Sub, py::int_(0), a); })
      .def("__pos__", [](py::object a) { return a.cast<PyExpr>(); })
      .def("__lt__", [](py::object a, py::object b) { return bin(ir::BinOp::Lt, a, b); })
      .def("__le__", [](py::object a, py::object b) { return bin(ir::BinOp::Le, a, b); })
      .def("__gt__", [](py::object a, py::object b) { return bin(ir::BinOp::Gt, a, b); })
      .def("__ge__", [](py::object a, py::object b) { return bin(ir::BinOp::Ge, a, b); })
      .def("__eq__", [](py::object a, py::object b) { return bin(ir::BinOp::Eq, a, b); })
      .def("__ne__", [](py::object a, py::object b) { return bin(ir::BinOp::Ne, a, b); })
      .def("__hash__", [](const PyExpr& e) { return reinterpret_cast<intptr_t>(e.e.get()); })
      .def("logical_and", [](py::object a, py::object b) { return bin(ir::BinOp::And, a, b); })
      .def("logical_or", [](py::object a, py::object b) { return bin(ir::BinOp::Or, a, b); })
      .def("const_value",
           [](const PyExpr& e) -> std::optional<int64_t> { return ir::as_const(e.e); })
      .def("has_load", [](const PyExpr& e) { return has_load(e.e); })
      .def("var_id",
           [](const PyExpr& e) -> std::optional<int> {
             if (auto* v = std::get_if<ir::VarRef>(&e.e->node)) return v->var->id;
             return std::nullopt;
           })
      .def("__repr__", [](const PyExpr& e) { return ir::print(e.e); });
  m.def("const", [](int64_t v) { return PyExpr{ir::make_int(v)}; });
  m.def("cid", [] { return PyExpr{ir::make_cid()}; });
  m.def("vid", [] { return PyExpr{ir::make_vid()}; });
  m.def("min", [](py::object a, py::object b) { return bin(ir::BinOp::Min, a, b); });
  m.def("max", [](py::object a, py::object b) { return bin(ir::BinOp::Max, a, b); });
  m.def("select", [](py::object c, py::object a, py::object b) {
    ir::Expr ce = to_expr(c), ae = to_expr(a), be = to_expr(b);
    if (auto k = ir::as_const(ce)) return PyExpr{*k ? ae : be};
    return PyExpr{ir::make_select(ce, ae, be)};
  });
  m.def("load", [](const PyBuffer& b, const py::list& idx, const py::object& loc) {
    std::vector<ir::Expr> index;
    for (auto i : idx) index.push_back(to_expr(i));
    return PyExpr{ir::make_load(b.b, std::move(index), make_loc(loc))};
  });
  m.def("const_diff", [](py::object a, py::object b) { return const_diff(a, b); });
  m.def("bounds", [](py::object e, const std::map<int, std::pair<int64_t, int64_t>>& vars,
                     int64_t block_num) { return bounds(to_expr(e), vars, block_num); });
  m.def("detached_buffer",
        [](const std::string& name, const std::string& scope, std::vector<int64_t> shape,
           const std::string& dtype, const py::object& loc) {
          // A buffer no program allocates: what the other core's pass of the front end's C/V
          // split sees for this core's buffers (never emitted; docs/python.md).
          static const std::map<std::string, ir::Scope> scopes = {
              {"GM", ir::Scope::GM},   {"L1", ir::Scope::L1},   {"L0A", ir::Scope::L0A},
              {"L0B", ir::Scope::L0B}, {"L0C", ir::Scope::L0C}, {"UB", ir::Scope::UB}};
          return PyBuffer{ir::make_buffer(name, scopes.at(scope), dtype_of(dtype), std::move(shape),
                                          ir::TensorRole::None, make_loc(loc))};
        });
  // The host's reference of a float16 / bfloat16 matrix product (tilepipe run-py): the
  // simulated Cube's own arithmetic, as torch_npu's matmul runs on the Cube (sim.h).
  m.def("cube_matmul", [](const py::array_t<float, py::array::c_style | py::array::forcecast>& a,
                          const py::array_t<float, py::array::c_style | py::array::forcecast>& b,
                          const std::string& dtype) {
    if (a.ndim() != 3 || b.ndim() != 3 || a.shape(0) != b.shape(0) || a.shape(2) != b.shape(1))
      throw std::invalid_argument(fmt::format(
          "cube_matmul: operands [batch, M, K] and [batch, K, N] expected, got {}-d and {}-d",
          a.ndim(), b.ndim()));
    const int64_t batch = a.shape(0), m = a.shape(1), k = a.shape(2), n = b.shape(2);
    py::array_t<float> c({batch, m, n});
    const int64_t kf = sim::cube_k_fractal(dtype_of(dtype));
    {
      // Rows of C on every hardware thread: each element is its own chain over K (sim.h), so
      // the split changes nothing in the result.
      py::gil_scoped_release release;
      const int64_t threads = std::max<int64_t>(
          1, std::min<int64_t>(std::thread::hardware_concurrency(), batch * m / 64));
      const int64_t per = (m + threads - 1) / threads;  // rows of one batch per work item
      const int64_t parts = (m + per - 1) / per, items = batch * parts;
      std::atomic<int64_t> next = 0;
      auto work = [&] {
        for (int64_t w; (w = next.fetch_add(1)) < items;) {
          const int64_t i = w / parts, r0 = (w % parts) * per, rows = std::min(per, m - r0);
          sim::cube_matmul(rows, n, k, kf, a.data() + i * m * k + r0 * k, b.data() + i * k * n,
                           c.mutable_data() + i * m * n + r0 * n, false);
        }
      };
      std::vector<std::thread> pool;
      for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work);
      work();
      for (auto& t : pool) t.join();
    }
    return c;
  });
  m.def("set_error_types", &tilepipe::ext::set_error_types, py::arg("user"), py::arg("check"));

  py::class_<PyBuffer>(m, "Buffer")
      .def_property_readonly("name", [](const PyBuffer& b) { return b.b->name; })
      .def_property_readonly("shape", [](const PyBuffer& b) { return b.b->shape; })
      .def_property_readonly("scope", [](const PyBuffer& b) { return ir::to_string(b.b->scope); })
      .def_property_readonly("dtype", [](const PyBuffer& b) { return ir::to_string(b.b->dtype); })
      .def_property_readonly("id", [](const PyBuffer& b) { return b.b->id; });

  py::class_<Builder>(m, "Builder")
      .def(py::init<const std::string&, int64_t, const py::object&>())
      .def("param", &Builder::param)
      .def("alloc", &Builder::alloc)
      .def("begin_for", &Builder::begin_for)
      .def("end_for", &Builder::end_for)
      .def("begin_scope", &Builder::begin_scope)
      .def("end_scope", &Builder::end_scope)
      .def("begin_if", &Builder::begin_if)
      .def("let", &Builder::let)
      .def("assign", &Builder::assign)
      .def("begin_else", &Builder::begin_else)
      .def("end_if", &Builder::end_if)
      .def("begin_block", &Builder::begin_block)
      .def("end_block", &Builder::end_block)
      .def("copy", &Builder::copy, py::arg("src"), py::arg("dst"), py::arg("transpose"),
           py::arg("pad"), py::arg("loc"), py::arg("atomic_add") = false, py::arg("relu") = false)
      .def("gemm", &Builder::gemm)
      .def("gemm_l1", &Builder::gemm_l1)
      .def("tile_op", &Builder::tile_op, py::arg("kind"), py::arg("dst"), py::arg("srcs"),
           py::arg("scalar"), py::arg("cmp"), py::arg("loc"),
           py::arg("attrs") = std::array<int64_t, 3>{})
      .def("reduce", &Builder::reduce)
      .def("set_flag", &Builder::set_flag)
      .def("wait_flag", &Builder::wait_flag)
      .def("pipe_barrier", &Builder::pipe_barrier)
      .def("barrier_all", &Builder::barrier_all)
      .def("set_cross_flag", &Builder::set_cross_flag)
      .def("wait_cross_flag", &Builder::wait_cross_flag)
      .def("pin", &Builder::pin)
      .def("finish", &Builder::finish);

  py::class_<ir::Program>(m, "Program")
      .def_property_readonly("name", [](const ir::Program& p) { return p.name; })
      .def("print", [](const ir::Program& p) { return ir::print(p); })
      .def("verify",
           [](const ir::Program& p, const std::string& chip) {
             auto c = load_chip_config(chip);
             std::vector<std::string> out;
             for (const auto& d : verify(p, c, passes::verify_options({}))) out.push_back(d.str());
             return out;
           })
      .def("written_gm",
           [](const ir::Program& p) {
             struct W : ir::StmtVisitor {
               std::vector<std::string> names;
               void visit_copy(const ir::CopyStmt& c, const ir::StmtNode&) override {
                 if (c.dst.buffer->scope == ir::Scope::GM) names.push_back(c.dst.buffer->name);
               }
             } w;
             w.visit(p.body);
             return w.names;
           })
      .def("params",
           [](const ir::Program& p) {
             std::vector<PyBuffer> out;
             for (const auto& b : p.params) out.push_back(PyBuffer{b});
             return out;
           })
      .def("workspaces", [](const ir::Program& p) {
        std::vector<PyBuffer> out;
        for (const auto& b : p.workspaces) out.push_back(PyBuffer{b});
        return out;
      });

  bind_driver(m);
}

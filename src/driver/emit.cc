// `tilepipe emit`: the program after the passes (scoped, synchronised, multi-buffered, memory
// placed) printed as a TileLang-Ascend expert-mode Python file that the original toolchain
// compiles for an NPU, and that tilepipe's front end runs back to the same cycles. Every
// construct is spelt with the original's public API only; one without a spelling is a
// UserError of kind "emit" at its source line, so no file that would not compile is written.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "tilepipe/driver.h"
#include "tilepipe/passes.h"
#include "tilepipe/vec_modes.h"

namespace tilepipe::driver {
namespace {

using namespace ir;

[[noreturn]] void refuse(const Loc& loc, const std::string& message, const std::string& hint) {
  throw UserError(Diagnostic{loc, "emit", message, {}, hint});
}

const char* py_dtype(DType t) {
  switch (t) {
    case DType::F16:
      return "float16";
    case DType::BF16:
      return "bfloat16";
    case DType::F32:
      return "float32";
    case DType::I32:
      return "int32";
    case DType::I8:
      return "int8";
    case DType::U8:
      return "uint8";
    case DType::I16:
      return "int16";
    case DType::U16:
      return "uint16";
    case DType::U32:
      return "uint32";
    case DType::I64:
      return "int64";
    case DType::U64:
      return "uint64";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

const char* alloc_call(Scope s) {
  switch (s) {
    case Scope::L1:
      return "T.alloc_L1";
    case Scope::L0A:
      return "T.alloc_L0A";
    case Scope::L0B:
      return "T.alloc_L0B";
    case Scope::L0C:
      return "T.alloc_L0C";
    case Scope::UB:
      return "T.alloc_ub";
    case Scope::GM:
      break;
  }
  return nullptr;
}

/// The T.tile name of an elementwise op, or nullptr for ops spelt differently (or not at
/// all). Scalar forms use the same names, as the original's examples do
/// (`T.tile.add(x, x, 1.0)`).
const char* tile_name(TileOpKind k) {
  switch (k) {
    case TileOpKind::BitAnd:
      return "bitwise_and";
    case TileOpKind::BitOr:
      return "bitwise_or";
    case TileOpKind::BitXor:
      return "bitwise_xor";
    case TileOpKind::BitNot:
      return "bitwise_not";
    case TileOpKind::ShiftLeft:
      return "bitwise_lshift";
    case TileOpKind::ShiftRight:
      return "bitwise_rshift";
    // spelt with their own argument forms (Emitter::library_op), or not at all
    case TileOpKind::Cast:
    case TileOpKind::Compare:
    case TileOpKind::SelectOp:
    case TileOpKind::Gather:
    case TileOpKind::Round:
    case TileOpKind::Arange:
    case TileOpKind::Sort:
    case TileOpKind::MergeSort:
    case TileOpKind::GatherMask:
    case TileOpKind::Gatherb:
    case TileOpKind::Reinterpret:
      return nullptr;
    default:
      return to_string(k);  // the IR printer's names are the original's for the rest
  }
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// Python keywords, and the names the emitted file itself binds.
const std::set<std::string>& reserved_names() {
  static const std::set<std::string> r = {
      "False",  "None",     "True",    "and",      "as",       "assert",       "async",
      "await",  "break",    "class",   "continue", "def",      "del",          "elif",
      "else",   "except",   "finally", "for",      "from",     "global",       "if",
      "import", "in",       "is",      "lambda",   "nonlocal", "not",          "or",
      "pass",   "raise",    "return",  "try",      "while",    "with",         "yield",
      "T",      "tilelang", "cid",     "vid",      "main",     "pass_configs", "float"};
  return r;
}

/// The source's leaf statements by kind and line: a leaf of the compiled program with no
/// such twin was inserted by a pass (auto_sync's flags, cv_split's hand-offs).
std::multiset<std::string> leaf_keys(const Stmt& body) {
  struct Keys : StmtVisitor {
    std::multiset<std::string> keys;
    void add(const StmtNode& n) {
      keys.insert(fmt::format("{}:{}:{}", n.node.index(), n.loc.file, n.loc.line));
    }
    void visit_copy(const CopyStmt&, const StmtNode& n) override { add(n); }
    void visit_set_flag(const SetFlagStmt&, const StmtNode& n) override { add(n); }
    void visit_wait_flag(const WaitFlagStmt&, const StmtNode& n) override { add(n); }
    void visit_barrier(const PipeBarrierStmt&, const StmtNode& n) override { add(n); }
    void visit_set_cross(const SetCrossFlagStmt&, const StmtNode& n) override { add(n); }
    void visit_wait_cross(const WaitCrossFlagStmt&, const StmtNode& n) override { add(n); }
  } k;
  k.visit(body);
  return k.keys;
}

bool has_scope(const Stmt& body) {
  struct Find : StmtVisitor {
    bool found = false;
    void visit_scope(const ScopeStmt&, const StmtNode&) override { found = true; }
  } f;
  f.visit(body);
  return f.found;
}

/// Shortest decimal that reads back as the same double (the scalars must round-trip).
std::string py_double(double v) {
  if (std::isnan(v)) return "float(\"nan\")";
  if (std::isinf(v)) return v > 0 ? "T.infinity(\"float32\")" : "-T.infinity(\"float32\")";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

/// n when r is the first n elements of its buffer in row-major order (all starts 0, inner
/// dimensions whole, outer ones 1), else -1: the original's library calls (sort, topk,
/// createvecindex) take whole buffers and a count.
int64_t flat_prefix(const Region& r) {
  const auto& shape = r.buffer->shape;
  for (const auto& s : r.start)
    if (as_const(s) != 0) return -1;
  size_t k = 0;  // the first dimension not of extent 1
  while (k < shape.size() && r.extent[k] == 1) ++k;
  for (size_t d = k + 1; d < shape.size(); ++d)
    if (r.extent[d] != shape[d]) return -1;
  return r.elements();
}

/// The -inf fills the front end writes before a library sort (its in-place padding of the
/// source's last 32-element block past the valid count): the emitted `T.tile.sort` /
/// `T.tile.topk` pads again, so they are not written out.
std::set<const StmtNode*> sort_padding(const Stmt& body) {
  struct V : StmtVisitor {
    std::set<const StmtNode*> out;
    void visit_seq(const SeqStmt& s, const StmtNode& n) override {
      for (size_t k = 0; k < s.body.size(); ++k) {
        const auto* sort = std::get_if<TileOpStmt>(&s.body[k]->node);
        if (!sort || sort->op != TileOpKind::Sort) continue;
        for (size_t j = k; j-- > 0;) {
          const auto* f = std::get_if<TileOpStmt>(&s.body[j]->node);
          const double* v = f && f->scalar ? std::get_if<double>(&f->scalar->value) : nullptr;
          if (!f || f->op != TileOpKind::Fill || !v || !std::isinf(*v) || *v > 0 ||
              f->dst.buffer != sort->srcs[0].buffer || s.body[j]->loc != s.body[k]->loc)
            break;
          out.insert(s.body[j].get());
        }
      }
      StmtVisitor::visit_seq(s, n);
    }
  } v;
  v.visit(body);
  return v.out;
}

/// L0A / L0B buffers that every gemm reads transposed and that only plain L1 -> L0 copies
/// write, each as its transposed twin (same id, last two dimensions swapped). The original
/// spells such an operand as a transposing load (`T.copy(l1, l0b, transpose=True)`) and a
/// plain `T.mma`; the data path and its cost are the same.
std::map<int, Buffer> transposed_operands(const Stmt& body) {
  struct Uses : StmtVisitor {
    std::map<int, Buffer> buf;
    std::set<int> transposed, plain;
    void visit_gemm(const GemmStmt& g, const StmtNode&) override {
      use(g.a, g.transpose_a);
      use(g.b, g.transpose_b);
    }
    void use(const Region& r, bool t) {
      buf[r.buffer->id] = r.buffer;
      (t ? transposed : plain).insert(r.buffer->id);
    }
    void visit_copy(const CopyStmt& c, const StmtNode&) override {
      const Scope d = c.dst.buffer->scope;
      if ((d == Scope::L0A || d == Scope::L0B) &&
          (c.transpose || c.pad_value || c.atomic_add || c.src.buffer->scope != Scope::L1 ||
           c.dst.buffer->shape.size() < 2))
        plain.insert(c.dst.buffer->id);  // written otherwise: keep its layout
    }
  } u;
  u.visit(body);
  std::map<int, Buffer> out;
  for (int id : u.transposed) {
    if (u.plain.count(id)) continue;
    BufferNode t = *u.buf.at(id);
    std::swap(t.shape[t.shape.size() - 1], t.shape[t.shape.size() - 2]);
    out[id] = std::make_shared<const BufferNode>(std::move(t));
  }
  return out;
}

class Emitter {
 public:
  Emitter(const Compiled& c, const EmitSource& src) : c_(c), src_(src) {
    source_leaves_ = leaf_keys(c.source.body);
    source_scoped_ = has_scope(c.source.body);
    transposed_ = transposed_operands(c.program.body);
    sort_padding_ = sort_padding(c.program.body);
    assigned_ = passes::let_assignments(c.program.body).vars;
  }

  std::string file() {
    const Program& p = c_.program;
    for (const auto& b : p.params) bind_buffer(b);
    for (const auto& b : p.workspaces) bind_buffer(b);
    header();
    line("@tilelang.jit({})", jit_args());
    line("def {}({}):", py_name(src_.factory), factory_params());
    ++indent_;
    factory_guard();
    line("@T.prim_func");
    line("def main(");
    ++indent_;
    for (const auto& b : p.params)
      line("{}: T.Tensor({}, \"{}\"),", names_.at(b->id), shape(b->shape), py_dtype(b->dtype));
    for (const auto& b : p.workspaces)
      line("{}: T.Tensor({}, \"{}\"),", names_.at(b->id), shape(b->shape), py_dtype(b->dtype));
    --indent_;
    line("):");
    ++indent_;
    line("with T.Kernel({}, is_npu=True) as (cid, vid):", p.block_num);
    ++indent_;
    stmt(p.body);
    indent_ -= 2;
    line("");
    line("return main");
    return out_.str();
  }

 private:
  template <class... A>
  void line(fmt::format_string<A...> f, A&&... a) {
    std::string s = fmt::format(f, std::forward<A>(a)...);
    out_ << (s.empty() ? "" : std::string(indent_ * 4, ' ')) << s << '\n';
  }

  void header() {
    line("# Emitted by `tilepipe emit` from {}: the program after tilepipe's passes", src_.label);
    line("# ({}), as a TileLang-Ascend expert-mode kernel.", passes_text());
    line("# Every on-chip buffer is pinned where the simulation placed it; the pass configs");
    line("# below keep the original compiler from synchronising, splitting or placing again.");
    if (int n = getvalue_barriers(); n > 0) {
      // Not the program's own time: the original adds these barriers whatever the configs.
      line("# Note: {} tile call{} here take{} a buffer element as the scalar; the original's code",
           n, n == 1 ? "" : "s", n == 1 ? "s" : "");
      line(
          "# generator puts PipeBarrier<PIPE_ALL> before each one's GetValue, so this kernel runs");
      line("# slower there than tilepipe's simulation of it (as this file run by tilepipe shows).");
    }
    line("import tilelang");
    line("from tilelang import language as T");
    line("");
    line("pass_configs = {{");
    for (const char* key : {"TL_ASCEND_AUTO_SYNC", "TL_ASCEND_MEMORY_PLANNING",
                            "TL_ASCEND_AUTO_CV_COMBINE", "TL_ASCEND_AUTO_CV_SYNC"})
      line("    tilelang.PassConfigKey.{}: False,", key);
    line("}}");
    line("");
    line("");
  }

  /// The tile ops the original's code generator puts behind a full barrier of its own.
  int getvalue_barriers() const {
    struct Count : StmtVisitor {
      int n = 0;
      void visit_tile(const TileOpStmt&, const StmtNode& s) override {
        n += passes::scalar_element_barrier(s);
      }
    } count;
    count.visit(c_.program.body);
    return count.n;
  }

  std::string passes_text() const {
    std::vector<std::string> on;
    for (const auto& info : passes::pass_table())
      if (c_.pass_options.*info.flag) on.push_back(info.name);
    return on.empty() ? "none ran" : "ran: " + fmt::format("{}", fmt::join(on, ", "));
  }

  std::string jit_args() const {
    const Program& p = c_.program;
    std::vector<std::string> outs, ws;
    for (size_t i = 0; i < p.params.size(); ++i)
      if (p.params[i]->role == TensorRole::Output) outs.push_back(std::to_string(i));
    for (size_t i = 0; i < p.workspaces.size(); ++i)
      ws.push_back(std::to_string(p.params.size() + i));
    std::string args;
    if (!outs.empty()) args += fmt::format("out_idx=[{}], ", fmt::join(outs, ", "));
    if (!ws.empty()) args += fmt::format("workspace_idx=[{}], ", fmt::join(ws, ", "));
    return args + "pass_configs=pass_configs";
  }

  std::string factory_params() const {
    std::vector<std::string> ps;
    for (const auto& [name, v] : src_.params)
      ps.push_back(fmt::format("{}={}", param_name(name), v));
    return fmt::format("{}", fmt::join(ps, ", "));
  }

  /// A kernel parameter as a Python argument: one spelt like a name the file binds (sfa's
  /// `T`, the token count, against the language module `T`) gets a trailing underscore.
  static std::string param_name(const std::string& name) {
    const std::string s = py_name(name);
    return reserved_names().count(s) ? s + "_" : s;
  }

  /// The body is the program for these values only (shapes and trip counts are constants
  /// after the passes): other values are refused, not silently ignored.
  void factory_guard() {
    if (!src_.params.empty()) {
      std::vector<std::string> names, values, pairs;
      for (const auto& [name, v] : src_.params) {
        names.push_back(param_name(name));
        values.push_back(std::to_string(v));
        pairs.push_back(fmt::format("{}={}", name, v));
      }
      const bool one = names.size() == 1;
      line("assert ({}{}) == ({}{}), \"emitted for {}: run tilepipe emit again for other values\"",
           fmt::join(names, ", "), one ? "," : "", fmt::join(values, ", "), one ? "," : "",
           fmt::join(pairs, ", "));
      line("");
    }
  }

  static std::string shape(const std::vector<int64_t>& s) {
    return fmt::format("[{}]", fmt::join(s, ", "));
  }

  static std::string py_name(const std::string& s) {
    std::string out;
    for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "k_" + out;
    return out;
  }

  /// A fresh identifier from `want`: kept when it is free (buffer names must survive the
  /// round trip), else suffixed _2, _3, ... as the front end names a repeated allocation.
  std::string fresh(const std::string& want) {
    std::string base = is_identifier(want) ? want : py_name(want);
    std::string name = base;
    for (int k = 2; used_.count(name) || reserved_names().count(name); ++k)
      name = fmt::format("{}_{}", base, k);
    used_.insert(name);
    return name;
  }

  void bind_buffer(const Buffer& b) { names_[b->id] = fresh(b->name); }

  const std::string& buffer(const Buffer& b, const Loc& loc) {
    auto it = names_.find(b->id);
    if (it == names_.end())
      refuse(loc, fmt::format("buffer '{}' is used before its allocation", b->name),
             "this is a bug in the pass that produced the program; report it");
    return it->second;
  }

  // ---- expressions: Python precedence, parentheses only where needed ----

  static int prec(BinOp op) {
    switch (op) {
      case BinOp::Or:
        return 1;
      case BinOp::And:
        return 2;
      case BinOp::Lt:
      case BinOp::Le:
      case BinOp::Gt:
      case BinOp::Ge:
      case BinOp::Eq:
      case BinOp::Ne:
        return 4;
      case BinOp::Add:
      case BinOp::Sub:
        return 5;
      case BinOp::Mul:
      case BinOp::Div:
      case BinOp::Mod:
        return 6;
      case BinOp::Min:
      case BinOp::Max:
        return 9;  // calls
    }
    return 0;
  }

  static const char* py_op(BinOp op) {
    switch (op) {
      case BinOp::Add:
        return "+";
      case BinOp::Sub:
        return "-";
      case BinOp::Mul:
        return "*";
      case BinOp::Div:
        return "//";
      case BinOp::Mod:
        return "%";
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
        return "and";
      case BinOp::Or:
        return "or";
      case BinOp::Min:
        return "T.min";
      case BinOp::Max:
        return "T.max";
    }
    return "?";
  }

  /// `e` as Python, parenthesised if its precedence is below `min_prec`.
  std::string expr(const Expr& e, int min_prec = 0) {
    auto [text, p] = std::visit(
        [&](const auto& n) -> std::pair<std::string, int> {
          using N = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<N, IntImm>)
            return {std::to_string(n.value), n.value < 0 ? 7 : 10};
          else if constexpr (std::is_same_v<N, VarRef>)
            return {var(n.var), 10};
          else if constexpr (std::is_same_v<N, CoreIdx>)
            return {"cid", 10};
          else if constexpr (std::is_same_v<N, VecIdx>)
            return {"vid", 10};
          else if constexpr (std::is_same_v<N, Binary>)
            return binary(n);
          else if constexpr (std::is_same_v<N, Select>)
            return {fmt::format("T.if_then_else({}, {}, {})", expr(n.cond), expr(n.then_value),
                                expr(n.else_value)),
                    10};
          else {
            std::vector<std::string> idx;
            for (const auto& i : n.index) idx.push_back(expr(i));
            return {fmt::format("{}[{}]", buffer(n.buffer, e->loc), fmt::join(idx, ", ")), 10};
          }
        },
        e->node);
    return p < min_prec ? "(" + text + ")" : text;
  }

  std::pair<std::string, int> binary(const Binary& n) {
    const int p = prec(n.op);
    if (n.op == BinOp::Min || n.op == BinOp::Max)
      return {fmt::format("{}({}, {})", py_op(n.op), expr(n.a), expr(n.b)), p};
    // Comparisons do not chain as intended, and -, //, % are not associative: the right
    // operand of the same precedence keeps its parentheses.
    const bool cmp = p == 4;
    return {fmt::format("{} {} {}", expr(n.a, cmp ? p + 1 : p), py_op(n.op), expr(n.b, p + 1)), p};
  }

  std::string var(const Var& v) {
    auto it = vars_.find(v->id);
    if (it != vars_.end()) return it->second;
    return vars_[v->id] = fresh(v->name);
  }

  /// Whole buffer: its name; else an index per dimension: `:` for a whole dimension, a
  /// point for extent 1 (unless every dimension is one: all points would read as a tile
  /// origin), else `start:start + extent`.
  std::string region(const Region& r, const Loc& loc) {
    const std::string& name = buffer(r.buffer, loc);
    bool whole = r.extent == r.buffer->shape;
    for (const auto& s : r.start) whole = whole && as_const(s) == 0;
    if (whole) return name;
    bool all_points = true;
    for (auto e : r.extent) all_points = all_points && e == 1;
    std::vector<std::string> idx;
    for (size_t d = 0; d < r.start.size(); ++d) {
      auto c = as_const(r.start[d]);
      if (c == 0 && r.extent[d] == r.buffer->shape[d])
        idx.push_back(":");
      else if (r.extent[d] == 1 && !all_points)
        idx.push_back(expr(r.start[d]));
      else if (c)
        idx.push_back(fmt::format("{}:{}", *c, *c + r.extent[d]));
      else
        idx.push_back(
            fmt::format("{}:{} + {}", expr(r.start[d], 6), expr(r.start[d], 6), r.extent[d]));
    }
    return fmt::format("{}[{}]", name, fmt::join(idx, ", "));
  }

  /// One UB element read by the scalar unit, as the original writes it: `buf[i, j]` (a
  /// whole-buffer name or a 1-element slice would read as a tile).
  std::string element(const Region& r, const Loc& loc) {
    std::vector<std::string> idx;
    for (const auto& st : r.start) idx.push_back(expr(st));
    return fmt::format("{}[{}]", buffer(r.buffer, loc), fmt::join(idx, ", "));
  }

  std::string scalar(const ScalarOperand& s, const Loc& loc) {
    return std::visit(
        [&](const auto& v) -> std::string {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, double>)
            return py_double(v);
          else if constexpr (std::is_same_v<V, Expr>)
            return expr(v);
          else
            return element(v, loc);
        },
        s.value);
  }

  /// A compare's destination or a select's mask the original can hold: a u8 / i8 tile with
  /// a bit per lane, or with a byte per lane (tilepipe's 0/1 bytes; the original writes the
  /// bits into its first lanes / 8 bytes, and its select reads them there: the same result
  /// as long as only selects read the mask).
  static bool mask_operand(const TileOpStmt& n) {
    const Region& mask = n.op == TileOpKind::Compare ? n.dst : n.srcs.front();
    const Region& lanes = n.op == TileOpKind::Compare ? n.srcs.front() : n.dst;
    const DType d = mask.buffer->dtype;
    return packed_mask(d, mask.elements(), lanes.elements()) ||
           ((d == DType::U8 || d == DType::I8 || d == DType::Bool) &&
            mask.elements() == lanes.elements());
  }

  /// The library ops the original spells with arguments of their own; false for the rest.
  bool library_op(const TileOpStmt& n, const StmtNode& s, const std::vector<std::string>& args) {
    switch (n.op) {
      case TileOpKind::Gather:
        if (n.srcs[1].buffer->dtype != DType::U32) return false;  // i32: front-end internal
        line("T.tile.gather({}, 0)", fmt::join(args, ", "));
        return true;
      case TileOpKind::Round:
        line("T.tile.round({}, {})", fmt::join(args, ", "), n.dst.elements());
        return true;
      case TileOpKind::Reinterpret: {  // whole buffers, the type by its AscendC name
        static const std::map<DType, const char*> kCType = {
            {DType::F32, "float"},    {DType::F16, "half"},     {DType::BF16, "bfloat16_t"},
            {DType::I32, "int32_t"},  {DType::U32, "uint32_t"}, {DType::I16, "int16_t"},
            {DType::U16, "uint16_t"}, {DType::I8, "int8_t"},    {DType::U8, "uint8_t"},
            {DType::I64, "int64_t"},  {DType::U64, "uint64_t"}, {DType::Bool, "bool"}};
        const auto c = kCType.find(n.dst.buffer->dtype);
        if (c == kCType.end() || flat_prefix(n.dst) != n.dst.buffer->elements() ||
            flat_prefix(n.srcs[0]) != n.srcs[0].buffer->elements())
          return false;
        line("T.reinterpretcast({}, {}, \"{}\")", buffer(n.dst.buffer, s.loc),
             buffer(n.srcs[0].buffer, s.loc), c->second);
        return true;
      }
      case TileOpKind::MergeSort:
        line("T.tile.merge_sort({})", fmt::join(args, ", "));
        return true;
      case TileOpKind::GatherMask: {  // a built-in pattern, by its AscendC number
        static constexpr const char* kPatterns[] = {"P0101", "P1010", "P0001", "P0010",
                                                    "P0100", "P1000", "P1111"};
        if (n.attrs[0] < 1 || n.attrs[0] > 7) return false;
        line("T.tile.gather_mask({}, \"{}\")", fmt::join(args, ", "), kPatterns[n.attrs[0] - 1]);
        return true;
      }
      case TileOpKind::Gatherb:  // repeats, then the block and repeat strides of dst
        line("T.tile.gatherb({}, {}, {}, {})", fmt::join(args, ", "), n.attrs[0], n.attrs[1],
             n.attrs[2]);
        return true;
      case TileOpKind::Arange: {
        const int64_t count = flat_prefix(n.dst);
        if (count < 0) return false;
        const std::string first = scalar(*n.scalar, s.loc);
        if (count == n.dst.buffer->elements())
          line("T.tile.createvecindex({}, {})", buffer(n.dst.buffer, s.loc), first);
        else
          line("T.tile.arith_progression({}, {}, 1, {})", buffer(n.dst.buffer, s.loc), first,
               count);
        return true;
      }
      case TileOpKind::Sort: {
        // The library's Sort / TopK take whole buffers: dst gets min(2 len, its size) elements
        // (sort) or min(2 K rounded up to 32 bytes, its size) (topk).
        const int64_t len = n.srcs[0].elements(), got = flat_prefix(n.dst),
                      room = n.dst.buffer->elements();
        const auto* count = std::get_if<double>(&n.scalar->value);
        if (got < 0 || !count || len != n.srcs[0].buffer->elements() ||
            flat_prefix(n.srcs[0]) != len)
          return false;
        const std::string dst = buffer(n.dst.buffer, s.loc), src = buffer(n.srcs[0].buffer, s.loc);
        if (got == std::min(2 * len, room)) {
          line("T.tile.sort({}, {}, {})", dst, src, static_cast<int64_t>(*count));
          return true;
        }
        const int64_t per_block = 32 / dtype_bytes(n.srcs[0].buffer->dtype), k = (got + 1) / 2;
        if (std::min((2 * k + per_block - 1) / per_block * per_block, room) != got) return false;
        line("T.tile.topk({}, {}, {}, {})", dst, src, k, static_cast<int64_t>(*count));
        return true;
      }
      default:
        return false;
    }
  }

  /// A scalar operand in the tile's dtype: an integer expression on a float tile is cast, as
  /// the original's examples write `T.float32(bound - i)`.
  std::string typed_scalar(const ScalarOperand& s, DType tile, const Loc& loc) {
    const std::string v = scalar(s, loc);
    if (is_float(tile) && std::holds_alternative<Expr>(s.value))
      return fmt::format("T.{}({})", py_dtype(tile), v);
    return v;
  }

  // ---- statements ----

  void stmt(const Stmt& s) {
    if (s) std::visit([&](const auto& n) { emit(n, *s); }, s->node);
  }

  /// A trailing comment for a leaf a pass inserted (no leaf of its kind at its line in the
  /// program as built).
  std::string note(const StmtNode& n, const char* pass) {
    auto it = source_leaves_.find(fmt::format("{}:{}:{}", n.node.index(), n.loc.file, n.loc.line));
    if (it != source_leaves_.end()) {
      source_leaves_.erase(it);
      return "";
    }
    return fmt::format("  # {}", pass);
  }

  void emit(const SeqStmt& n, const StmtNode&) {
    // Each run of allocations is followed by the addresses the simulation used.
    std::vector<Buffer> run;
    for (const auto& c : n.body) {
      if (auto* a = std::get_if<AllocStmt>(&c->node)) {
        stmt(c);
        run.push_back(a->buffer);
        continue;
      }
      pin(run);
      stmt(c);
    }
    pin(run);
  }

  void pin(std::vector<Buffer>& run) {
    std::vector<std::string> items;
    for (const auto& b : run)
      if (auto it = c_.lowered.addresses.find(b->id); it != c_.lowered.addresses.end())
        items.push_back(fmt::format("{}: {}", names_.at(b->id), it->second));
    if (!items.empty()) line("T.annotate_address({{{}}})", fmt::join(items, ", "));
    run.clear();
  }

  void emit(const ForStmt& n, const StmtNode& s) {
    std::string range;
    const bool from0 = as_const(n.begin) == 0 && n.step == 1;
    std::string bounds = from0 ? expr(n.end) : fmt::format("{}, {}", expr(n.begin), expr(n.end));
    if (n.step != 1) bounds += fmt::format(", {}", n.step);
    if (n.kind == ForKind::Serial)
      range = fmt::format("T.serial({})", bounds);
    else if (n.kind == ForKind::Pipelined)
      range = fmt::format(
          "T.Pipelined({}, num_stages={}{})", bounds, n.num_stages,
          n.cross_interval != 1 ? fmt::format(", cross_interval={}", n.cross_interval) : "");
    else
      refuse(s.loc, "a Parallel loop is left after the passes: expert mode has no spelling for it",
             "let the vectorize pass turn it into tile ops (do not pass --no-pass vectorize), "
             "or write the row loop with T.serial");
    line("for {} in {}:", var(n.var), range);
    body(n.body);
  }

  void body(const Stmt& b) {
    ++indent_;
    const auto* seq = b ? std::get_if<SeqStmt>(&b->node) : nullptr;
    if (!b || (seq && seq->body.empty()))
      line("pass");
    else
      stmt(b);
    --indent_;
  }

  void emit(const IfStmt& n, const StmtNode&) {
    line("if {}:", expr(n.cond));
    body(n.then_body);
    if (n.else_body) {
      line("else:");
      body(n.else_body);
    }
  }

  /// The original's parser makes a LetStmt of a name binding: the binding back. A variable
  /// assigned again is a register, declared where it is first bound (T.alloc_var).
  void emit(const LetStmt& n, const StmtNode&) {
    if (assigned_.count(n.var->id) && declared_.insert(n.var->id).second)
      line("{} = T.alloc_var(\"int32\", init={})", var(n.var), expr(n.value));
    else
      line("{} = {}", var(n.var), expr(n.value));
  }

  void emit(const ScopeStmt& n, const StmtNode&) {
    line("with T.Scope(\"{}\"):{}", to_string(n.kind),
         source_scoped_ ? "" : "  # cv_split: this core's half of the program");
    body(n.body);
  }

  void emit(const AllocStmt& n, const StmtNode& s) {
    const Buffer& b = n.buffer;
    const char* call = alloc_call(b->scope);
    if (!call)
      refuse(s.loc, fmt::format("an allocation of '{}' in GM inside the kernel", b->name),
             "declare GM scratch as a workspace of the kernel (a T.Tensor parameter in "
             "workspace_idx)");
    bind_buffer(b);
    std::string versions;
    if (auto v = c_.program.versions.find(b->id); v != c_.program.versions.end())
      versions =
          fmt::format("  # {} versions (multi-buffered by the passes): slot = iteration % {}",
                      v->second, v->second);
    auto t = transposed_.find(b->id);
    line("{} = {}({}, \"{}\"){}{}", names_.at(b->id), call,
         shape(t != transposed_.end() ? t->second->shape : b->shape), py_dtype(b->dtype), versions,
         t != transposed_.end() && versions.empty() ? "  # held transposed: a transposing load"
                                                    : "");
  }

  void emit(const CopyStmt& n, const StmtNode& s) {
    if (n.atomic_add) {
      // The original's spelling of a copy with atomic add (dst += src by the DMA unit).
      if (n.transpose || n.pad_value || n.relu)
        refuse(s.loc,
               "an atomic-add copy with transpose, pad_value or relu: T.tile.atomic_add takes "
               "none",
               "write the atomic add as its own T.tile.atomic_add(dst, src)");
      line("T.tile.atomic_add({}, {}){}", region(n.dst, s.loc), region(n.src, s.loc),
           note(s, "inserted by the passes"));
      return;
    }
    std::string extra;
    const bool into_twin = transposed_.count(n.dst.buffer->id) > 0;
    if (n.transpose || into_twin) extra += ", transpose=True";
    if (n.pad_value) extra += ", pad_value=" + py_double(*n.pad_value);
    if (n.relu) extra += ", enable_relu=True";
    line("T.copy({}, {}{}){}", region(n.src, s.loc), region(twin(n.dst), s.loc), extra,
         note(s, "inserted by the passes"));
  }

  void emit(const GemmStmt& n, const StmtNode& s) {
    for (auto [r, t, side] : {std::tuple{&n.a, n.transpose_a, "A"}, {&n.b, n.transpose_b, "B"}})
      if (t && !transposed_.count(r->buffer->id))
        refuse(s.loc,
               fmt::format("gemm with {} transposed on L0 operand '{}', which is also read "
                           "untransposed or written other than by an L1 -> L0 copy: T.mma "
                           "takes no transpose flags",
                           side, r->buffer->name),
               "give the transposed operand its own L0 buffer, loaded with "
               "copy(l1, l0, transpose=True)");
    line("T.mma({}, {}, {}, init={})", region(twin(n.a), s.loc), region(twin(n.b), s.loc),
         region(n.c, s.loc), n.init ? "True" : "False");
  }

  void emit(const GemmL1Stmt&, const StmtNode& s) {
    throw std::logic_error(s.loc.str() +
                           ": gemm_l1 reached the emitter (the gemm_l1 pass "
                           "expands it)");
  }

  /// r on the transposed twin of its buffer (last two dimensions swapped), or r itself.
  Region twin(const Region& r) const {
    auto t = transposed_.find(r.buffer->id);
    if (t == transposed_.end()) return r;
    Region out = r;
    out.buffer = t->second;
    const size_t n = out.extent.size();
    std::swap(out.extent[n - 1], out.extent[n - 2]);
    std::swap(out.start[n - 1], out.start[n - 2]);
    return out;
  }

  void emit(const TileOpStmt& n, const StmtNode& s) {
    if (n.op == TileOpKind::Store && n.scalar) {  // the scalar unit's SetValue
      line("{} = {}", element(n.dst, s.loc), typed_scalar(*n.scalar, n.dst.buffer->dtype, s.loc));
      return;
    }
    std::vector<std::string> args = {region(n.dst, s.loc)};
    for (const auto& r : n.srcs) args.push_back(region(r, s.loc));
    if (n.op == TileOpKind::Cast) {
      // Narrowing rounds to nearest even, as tilepipe's store does; widening is exact.
      const bool narrow = dtype_bytes(n.dst.buffer->dtype) < dtype_bytes(n.srcs[0].buffer->dtype) ||
                          (is_float(n.srcs[0].buffer->dtype) && !is_float(n.dst.buffer->dtype));
      static constexpr const char* kModes[] = {"CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND",
                                               "CAST_TRUNC"};
      const bool rounds = n.attrs[0] > 0 || n.attrs[1] == kCastIntegral;
      const char* mode = rounds && valid_cast_round(n.attrs[0])
                             ? kModes[n.attrs[0]]
                             : (narrow ? "CAST_RINT" : "CAST_NONE");
      line("T.tile.cast({}, \"{}\", {})", fmt::join(args, ", "), mode, n.dst.elements());
      return;
    }
    if (sort_padding_.count(&s)) return;
    if (library_op(n, s, args)) return;
    if ((n.op == TileOpKind::Compare || n.op == TileOpKind::SelectOp) && mask_operand(n)) {
      if (n.scalar) args.push_back(typed_scalar(*n.scalar, n.srcs.front().buffer->dtype, s.loc));
      if (n.op == TileOpKind::Compare) {
        line("T.tile.compare({}, \"{}\")", fmt::join(args, ", "), to_string(n.cmp));
      } else {
        // tilepipe's select reads the mask along the whole tile, as the original's tensor
        // modes do (VSEL_CMPMASK_SPR would reuse the first repeat's bits).
        line("T.tile.select({}, \"{}\")", fmt::join(args, ", "),
             n.scalar ? "VSEL_TENSOR_SCALAR_MODE" : "VSEL_TENSOR_TENSOR_MODE");
      }
      return;
    }
    const char* name = tile_name(n.op);
    if (!name)
      refuse(s.loc,
             fmt::format("tile.{} has no expert-mode spelling with tilepipe's semantics",
                         to_string(n.op)),
             n.op == TileOpKind::Gather
                 ? "the original's T.tile.gather takes uint32 byte offsets; this one has int32 "
                   "element offsets: give it uint32 byte offsets"
             : n.op == TileOpKind::Compare || n.op == TileOpKind::SelectOp
                 ? "the original's compare / select take a bit mask (one bit per lane, a "
                   "u8 tile of lanes / 8 elements): use one instead of a 0/1 element per lane"
                 : "its T.tile call (counts, patterns, scratch buffers) is not spelt yet: "
                   "keep this kernel in developer mode");
    if (n.scalar) args.push_back(scalar(*n.scalar, s.loc));
    line("T.tile.{}({})", name, fmt::join(args, ", "));
  }

  void emit(const ReduceStmt& n, const StmtNode& s) {
    line("T.reduce_{}({}, {}, dim={}{})", to_string(n.kind), region(n.src, s.loc),
         region(n.dst, s.loc), n.dim, n.clear ? "" : ", clear=False");
  }

  void emit(const SetFlagStmt& n, const StmtNode& s) {
    line("T.set_flag(\"{}\", \"{}\", {}){}", to_string(n.src), to_string(n.dst), expr(n.event_id),
         note(s, "auto_sync"));
  }

  void emit(const WaitFlagStmt& n, const StmtNode& s) {
    line("T.wait_flag(\"{}\", \"{}\", {}){}", to_string(n.src), to_string(n.dst), expr(n.event_id),
         note(s, "auto_sync"));
  }

  void emit(const PipeBarrierStmt& n, const StmtNode& s) {
    line("T.pipe_barrier(\"{}\"){}", to_string(n.pipe), note(s, "auto_sync"));
  }

  void emit(const SetCrossFlagStmt& n, const StmtNode& s) {
    line("T.set_cross_flag(\"{}\", {}{}){}", to_string(n.pipe), expr(n.flag_id),
         n.mode == 2 ? "" : fmt::format(", {}", n.mode), note(s, "cv_split"));
  }

  void emit(const WaitCrossFlagStmt& n, const StmtNode& s) {
    line("T.wait_cross_flag({}){}", expr(n.flag_id), note(s, "cv_split"));
  }

  const Compiled& c_;
  std::map<int, Buffer> transposed_;        // transposed_operands()
  std::set<const StmtNode*> sort_padding_;  // sort_padding()
  const EmitSource& src_;
  std::multiset<std::string> source_leaves_;
  bool source_scoped_ = false;
  std::ostringstream out_;
  int indent_ = 0;
  std::set<std::string> used_;
  std::map<int, std::string> names_;  // buffer id -> identifier
  std::map<int, std::string> vars_;   // variable id -> identifier
  std::set<int> assigned_;            // let variables bound more than once: registers
  std::set<int> declared_;            // those already declared with T.alloc_var
};

}  // namespace

std::string emit_expert(const Compiled& c, const EmitSource& src) {
  return Emitter(c, src).file();
}

std::string emit_expert(const KernelSource& k, const CompileRequest& req, const ChipConfig& chip) {
  Compiled c = compile(k, req, chip);
  EmitSource src;
  // A Python source's name is its spec, "dir/file.py[:NAME] [args]": the factory is NAME,
  // else the file's stem.
  std::string name = k.name.substr(0, k.name.find(' '));
  if (auto colon = name.rfind(':'); colon != std::string::npos)
    name = name.substr(colon + 1);
  else if (name.size() > 3 && name.ends_with(".py"))
    name = name.substr(0, name.size() - 3).substr(name.find_last_of('/') + 1);
  src.factory = name;
  src.params = req.params;
  src.label = label(k, c.variant);
  return emit_expert(c, src);
}

}  // namespace tilepipe::driver

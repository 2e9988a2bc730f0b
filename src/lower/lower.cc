// IR -> per-core-kind instruction programs (see include/tilepipe/lower.h).
#include "tilepipe/lower.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>
#include <vector>

#include "tilepipe/vec_modes.h"
#include "tilepipe/verify.h"

namespace tilepipe::lower {

using namespace ir;

const char* to_string(Opcode op) {
  switch (op) {
    case Opcode::Copy:
      return "copy";
    case Opcode::Mmad:
      return "mmad";
    case Opcode::Vec:
      return "vec";
    case Opcode::Reduce:
      return "reduce";
    case Opcode::SetFlag:
      return "set_flag";
    case Opcode::WaitFlag:
      return "wait_flag";
    case Opcode::Barrier:
      return "pipe_barrier";
    case Opcode::SetCross:
      return "set_cross_flag";
    case Opcode::WaitCross:
      return "wait_cross_flag";
  }
  return "?";
}

int64_t CExpr::run(const std::vector<Op>& program, const int64_t* slots,
                   const ScalarMem* mem) const {
  int64_t st[72];  // lowering caps the stack depth at 64, so it never overflows
  int sp = 0;
  for (const Op& o : program) {
    switch (o.kind) {
      case Load: {
        // The indices are the top `rank` values (pushed by the lowering right before).
        sp -= load_rank(o);
        st[sp] = mem->load(load_site(o), st + sp);
        ++sp;
        break;
      }
      case Const:
        st[sp++] = o.value;
        break;
      case Slot:
        st[sp++] = slots[o.value];
        break;
      case Leaf:
        st[sp++] = leaves[static_cast<size_t>(o.value)].eval(slots);
        break;
      case Bin:
        --sp;
        if (st[sp] == 0 && (o.bin == BinOp::Div || o.bin == BinOp::Mod)) [[unlikely]]
          throw DivisionByZero{};
        st[sp - 1] = eval_binop(o.bin, st[sp - 1], st[sp]);
        break;
      case Sel:
        sp -= 2;
        st[sp - 1] = st[sp - 1] ? st[sp] : st[sp + 1];
        break;
    }
  }
  return sp ? st[0] : 0;
}

/// The posts of `a` as uniform steps (Affine::steps): their count, or -1 if one post has
/// another shape.
static int steps(CExpr::Affine& a) {
  int n = 0;
  for (int i = 0; i < a.nposts; ++i) {
    const CExpr::Post& p = a.posts[static_cast<size_t>(i)];
    CExpr::Step s;
    bool linear = true;  // folds into the step before it
    if (p.pow2 && p.op == BinOp::Mod) {
      s.mask = p.value - 1;
      linear = false;
    } else if (p.pow2 && p.op == BinOp::Div) {
      s.shift = std::countr_zero(static_cast<uint64_t>(p.value));
      linear = false;
    } else if (p.op == BinOp::Add) {
      s.add = p.value;
    } else if (p.op == BinOp::Sub) {
      s.mul = p.reversed ? -1 : 1;
      s.add = p.reversed ? p.value : -p.value;
    } else if (p.op == BinOp::Mul) {
      s.mul = p.value;
    } else {
      return -1;
    }
    if (linear && n > 0) {
      CExpr::Step& last = a.steps[static_cast<size_t>(n - 1)];
      // (x * m + c) * s.mul + s.add, in the ring of 64-bit integers like the steps.
      const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
      last.mul = static_cast<int64_t>(u(last.mul) * u(s.mul));
      last.add = static_cast<int64_t>(u(last.add) * u(s.mul) + u(s.add));
    } else {
      a.steps[static_cast<size_t>(n++)] = s;
    }
  }
  return n;
}

void CExpr::finalize() {
  // Symbolic run of the postfix program as a tree: each node's value is a linear form
  // (constant + slot -> coefficient) followed by operations with constants, or unknown.
  struct Val {
    bool ok = false;
    int64_t c = 0;
    std::map<int, int64_t> t;
    std::vector<Post> posts;
    bool is_const() const { return ok && t.empty() && posts.empty(); }
  };
  std::vector<Val> val(ops.size());
  std::vector<std::vector<size_t>> kids(ops.size());
  std::vector<size_t> st;
  auto take = [&](size_t i, size_t n) {
    kids[i].assign(st.end() - static_cast<std::ptrdiff_t>(n), st.end());
    st.resize(st.size() - n);
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    Val& v = val[i];
    switch (o.kind) {
      case Const:
        v = {true, o.value, {}, {}};
        break;
      case Slot:
        v = {true, 0, {{static_cast<int>(o.value), 1}}, {}};
        break;
      case Load:
        take(i, static_cast<size_t>(load_rank(o)));
        break;
      case Sel:
        take(i, 3);
        break;
      case Leaf:
        return;  // finalize runs once, on a program the lowering built
      case Bin: {
        take(i, 2);
        Val a = val[kids[i][0]], b = val[kids[i][1]];
        const bool linear = a.ok && b.ok && a.posts.empty() && b.posts.empty();
        if (b.is_const() && b.c == 0 && (o.bin == BinOp::Div || o.bin == BinOp::Mod)) {
          a = {};  // divides by zero: the stack form evaluates it, and reports it
        } else if (a.is_const() && b.is_const()) {
          a.c = ir::eval_binop(o.bin, a.c, b.c);
        } else if (linear && (o.bin == BinOp::Add || o.bin == BinOp::Sub)) {
          const int64_t sign = o.bin == BinOp::Add ? 1 : -1;
          a.c += sign * b.c;
          for (auto [k, x] : b.t) a.t[k] += sign * x;
        } else if (linear && o.bin == BinOp::Mul && (a.t.empty() || b.t.empty())) {
          if (a.t.empty()) std::swap(a, b);
          a.c *= b.c;
          for (auto& kv : a.t) kv.second *= b.c;
        } else if (a.ok && b.is_const()) {
          a.posts.push_back({o.bin, false, b.c});
        } else if (a.is_const() && b.ok) {
          b.posts.push_back({o.bin, true, a.c});
          a = std::move(b);
        } else {
          a = {};
        }
        v = std::move(a);
        break;
      }
    }
    st.push_back(i);
  }
  form = Form::Stack;
  folded.clear();
  leaves.clear();
  if (st.size() != 1) return;
  auto affine = [&](Val& v, Affine& out) {
    std::erase_if(v.t, [](const auto& kv) { return kv.second == 0; });
    if (v.t.size() > out.term_slot.size() || v.posts.size() > out.posts.size()) return false;
    out.c0 = v.c;
    out.nterms = 0;
    for (auto [k, coef] : v.t) {
      out.term_slot[static_cast<size_t>(out.nterms)] = k;
      out.term_coef[static_cast<size_t>(out.nterms++)] = coef;
    }
    out.nposts = static_cast<int>(v.posts.size());
    std::copy(v.posts.begin(), v.posts.end(), out.posts.begin());
    for (int i = 0; i < out.nposts; ++i) {
      Post& p = out.posts[static_cast<size_t>(i)];
      p.pow2 = !p.reversed && p.value > 0 && std::has_single_bit(static_cast<uint64_t>(p.value));
    }
    out.nsteps = steps(out);
    return true;
  };
  if (val[st[0]].ok && affine(val[st[0]], aff)) {
    form = Form::Affine;
    return;
  }
  // Otherwise each maximal affine subtree becomes one Leaf of the folded program.
  auto emit = [&](auto& self, size_t i) -> void {
    Affine leaf;
    if (ops[i].kind == Const || ops[i].kind == Slot) {
      folded.push_back(ops[i]);
      return;
    }
    if (val[i].ok && affine(val[i], leaf)) {
      folded.push_back({Leaf, BinOp::Add, static_cast<int64_t>(leaves.size())});
      leaves.push_back(leaf);
      return;
    }
    for (size_t k : kids[i]) self(self, k);
    folded.push_back(ops[i]);
  };
  emit(emit, st[0]);
}

namespace {

class Lowerer {
 public:
  Lowerer(const Program& p, const ChipConfig& chip) : p_(p), chip_(chip) {}

  LoweredProgram run() {
    LoweredProgram out;
    out.name = p_.name;
    out.block_num = p_.block_num;
    out.knobs = p_.knobs;
    for (const auto& b : p_.params) add_gm(out, b, false);
    for (const auto& b : p_.workspaces) add_gm(out, b, true);
    // Unplaced buffers go after the highest placed byte of their scope.
    placed_end_.fill(0);
    for (const auto& [id, off] : p_.addresses) placed_ids_[id] = off;
    struct Ends : StmtVisitor {
      std::map<int, int64_t>* ids;
      std::array<int64_t, 6>* end;
      void visit_alloc(const AllocStmt& a, const StmtNode&) override {
        auto it = ids->find(a.buffer->id);
        if (it != ids->end()) {
          auto& e = (*end)[static_cast<int>(a.buffer->scope)];
          e = std::max(e, it->second + a.buffer->bytes());
        }
      }
    } ends;
    ends.ids = &placed_ids_;
    ends.end = &placed_end_;
    ends.visit(p_.body);
    for (CoreProgram* cp : {&out.aic, &out.aiv}) {
      cur_ = cp;
      slots_.clear();
      cp->num_slots = 2;
      cp->body = block(p_.body, false);
    }
    mark_materialised(out);
    out.addresses = addr_;
    return out;
  }

 private:
  void add_gm(LoweredProgram& out, const Buffer& b, bool ws) {
    gm_index_[b->id] = static_cast<int>(out.gm.size());
    out.gm.push_back(GmTensor{b, ws});
  }

  [[noreturn]] void fail(const Loc& loc, std::string msg, std::string hint) {
    throw UserError(Diagnostic{loc, "lowering", std::move(msg), {}, std::move(hint)});
  }

  CExpr compile(const Expr& e) {
    CExpr c;
    emit(e, c);
    // The evaluator's stack holds 72 values: bound the depth the postfix reaches.
    int depth = 0, max_depth = 0;
    for (const auto& o : c.ops) {
      depth += o.kind == CExpr::Const || o.kind == CExpr::Slot ? 1
               : o.kind == CExpr::Bin                          ? -1
               : o.kind == CExpr::Sel                          ? -2
                                                               : 1 - CExpr::load_rank(o);
      max_depth = std::max(max_depth, depth);
    }
    if (max_depth > 64) fail(e->loc, "index expression too deep", "simplify the expression");
    c.finalize();
    return c;
  }

  void emit(const Expr& e, CExpr& c) {
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, IntImm>) {
            c.ops.push_back({CExpr::Const, BinOp::Add, n.value});
          } else if constexpr (std::is_same_v<T, VarRef>) {
            auto it = slots_.find(n.var->id);
            if (it == slots_.end())
              fail(e->loc,
                   fmt::format("variable '{}' used outside its loop or binding", n.var->name),
                   "use loop variables only inside the loop body");
            c.ops.push_back({CExpr::Slot, BinOp::Add, it->second});
          } else if constexpr (std::is_same_v<T, CoreIdx>) {
            c.ops.push_back({CExpr::Slot, BinOp::Add, kSlotCid});
          } else if constexpr (std::is_same_v<T, VecIdx>) {
            c.ops.push_back({CExpr::Slot, BinOp::Add, kSlotVid});
          } else if constexpr (std::is_same_v<T, Binary>) {
            emit(n.a, c);
            emit(n.b, c);
            c.ops.push_back({CExpr::Bin, n.op, 0});
          } else if constexpr (std::is_same_v<T, Select>) {
            emit(n.cond, c);
            emit(n.then_value, c);
            emit(n.else_value, c);
            c.ops.push_back({CExpr::Sel, BinOp::Add, 0});
          } else if constexpr (std::is_same_v<T, Load>) {
            for (const auto& i : n.index) emit(i, c);
            int64_t site = load_site(n, e->loc);
            c.ops.push_back(CExpr::load_op(static_cast<int>(n.index.size()), site));
            c.has_load = true;
          } else {
            static_assert(sizeof(T) == 0, "Lowerer: unhandled expression node");
          }
        },
        e->node);
  }

  /// The layout of a loaded tensor, once per load expression; marks what timing mode must
  /// keep values for.
  int64_t load_site(const Load& n, const Loc& loc) {
    Region r{n.buffer, {}, std::vector<int64_t>(n.index.size(), 1)};
    for (size_t d = 0; d < n.index.size(); ++d) r.start.push_back(make_int(0));
    cur_->loads.push_back(
        LoadSite{access(r, loc), base(Opcode::Copy, Pipe::S, loc, "load " + n.buffer->name)});
    loaded_.insert(n.buffer->id);
    return static_cast<int64_t>(cur_->loads.size()) - 1;
  }

  /// Timing mode runs no data ops, but scalar loads need real values. What a load reads is
  /// kept: the ops writing a loaded buffer run in timing mode too, and so, transitively, do
  /// the ops writing what those read (their operands and a scalar read from UB), down to
  /// GM tensors, whose host values are kept. Usually that is one GM -> UB copy of an input
  /// (an SFA block table); a flag or index computed on chip (a fill from a block-index
  /// expression, an index tile shifted by a tile op) brings the ops that compute it. Only
  /// values change: the ops' times are the same whether they run or not.
  void mark_materialised(LoweredProgram& out) {
    std::set<int> need = loaded_;
    for (bool grew = true; grew;) {
      grew = false;
      for (CoreProgram* cp : {&out.aic, &out.aiv})
        for (auto& t : cp->instrs) {
          if (t.materialise || t.num_acc == 0 || !t.acc[0].buffer) continue;
          if (t.op != Opcode::Copy && t.op != Opcode::Mmad && t.op != Opcode::Vec &&
              t.op != Opcode::Reduce)
            continue;
          if (!need.count(t.acc[0].buffer->id)) continue;
          t.materialise = true;
          grew = true;
          for (int i = 1; i < t.num_acc; ++i)
            if (t.acc[static_cast<size_t>(i)].buffer)
              need.insert(t.acc[static_cast<size_t>(i)].buffer->id);
          if (t.scalar_kind == OpTemplate::ScalarKind::UbRead && t.scalar_read.buffer)
            need.insert(t.scalar_read.buffer->id);
        }
    }
    for (auto& g : out.gm)
      if (need.count(g.buffer->id)) g.scalar_read = true;
  }

  AccessTemplate access(const Region& r, const Loc& loc) {
    const auto& b = *r.buffer;
    if (b.shape.size() > static_cast<size_t>(kMaxDims))
      fail(loc,
           fmt::format("buffer '{}' has rank {}; at most {} is supported", b.name, b.shape.size(),
                       kMaxDims),
           "merge dimensions of the buffer");
    AccessTemplate a;
    a.scope = b.scope;
    a.dtype = b.dtype;
    a.buffer = r.buffer.get();
    a.dims = static_cast<int>(b.shape.size());
    if (b.scope == Scope::GM) {
      a.gm_index = gm_index_.at(b.id);
    } else {
      auto it = addr_.find(b.id);
      if (it == addr_.end())
        fail(loc, fmt::format("buffer '{}' used before its allocation", b.name),
             "allocate the buffer before the first op that uses it");
      a.base_bytes = it->second;
    }
    a.memory = b.scope == Scope::GM ? a.gm_index : 1000 + static_cast<int>(b.scope);
    int64_t stride = 1;
    a.start.resize(static_cast<size_t>(a.dims));
    for (int d = a.dims - 1; d >= 0; --d) {
      a.dim_extent[d] = r.extent[d];
      a.dim[d] = b.shape[d];
      a.dim_stride[d] = stride;
      a.start[d] = compile(r.start[d]);
      stride *= b.shape[d];
      a.num_elements *= a.dim_extent[d];
      a.span += (a.dim_extent[d] - 1) * a.dim_stride[d];
    }
    a.elem_bytes = ir::dtype_bytes(a.dtype);
    for (int d = 0; d < a.dims; ++d) {
      const CExpr& st = a.start[d];
      const int64_t v = st.is_const() ? st.ops[0].value : -1;
      if (st.is_const() && v >= 0 && v + a.dim_extent[d] <= a.dim[d])
        a.const_off += v * a.dim_stride[d];
      else
        a.var_dim[static_cast<size_t>(a.nvar++)] = static_cast<int8_t>(d);
    }
    walk(a, r, loc);
    return a;
  }

  /// The walk of an access: its buffer dimensions, with adjacent ones merged while there
  /// are more than kMaxRank. Dimensions d, d+1 merge where the pair is one strided
  /// dimension: either has extent 1, or d+1 is taken whole (stride[d] = extent[d+1] *
  /// stride[d+1]); the elements keep their row-major order. Outer pairs merge first, so the
  /// innermost dimensions (rows, the broadcast direction) stay as written, as they would in
  /// the same region of the buffer reshaped to rank kMaxRank.
  void walk(AccessTemplate& a, const Region& r, const Loc& loc) {
    std::vector<int64_t> e(a.dim_extent.begin(), a.dim_extent.begin() + a.dims),
        s(a.dim_stride.begin(), a.dim_stride.begin() + a.dims);
    while (e.size() > static_cast<size_t>(kMaxRank)) {
      size_t d = 0;
      while (d + 1 < e.size() && !(e[d] == 1 || e[d + 1] == 1 || s[d] == e[d + 1] * s[d + 1])) ++d;
      if (d + 1 == e.size())
        fail(loc,
             fmt::format("the region {} of '{}' (extents [{}]) needs {} strided dimensions; "
                         "at most {} are supported",
                         print(r), r.buffer->name, fmt::join(e, ", "), e.size(), kMaxRank),
             "give one more dimension extent 1 (e.g. a loop over an outer dimension), or take "
             "an inner dimension whole so that it merges with its neighbour");
      if (e[d] == 1) {
        e[d] = e[d + 1];
        s[d] = s[d + 1];
      } else if (e[d + 1] != 1) {
        e[d] *= e[d + 1];
        s[d] = s[d + 1];
      }
      e.erase(e.begin() + static_cast<std::ptrdiff_t>(d) + 1);
      s.erase(s.begin() + static_cast<std::ptrdiff_t>(d) + 1);
    }
    a.rank = static_cast<int>(e.size());
    std::copy(e.begin(), e.end(), a.extent.begin());
    std::copy(s.begin(), s.end(), a.stride.begin());
  }

  static std::pair<int64_t, int64_t> matrix(const Region& r) { return ir::tile_matrix(r); }

  int add(OpTemplate t) {
    cur_->instrs.push_back(std::move(t));
    return static_cast<int>(cur_->instrs.size()) - 1;
  }

  Item instr_item(OpTemplate t) {
    Item it;
    it.kind = Item::Instr;
    it.loc = t.loc;
    it.instr = add(std::move(t));
    return it;
  }

  OpTemplate base(Opcode op, Pipe pipe, const Loc& loc, std::string name) {
    OpTemplate t;
    t.op = op;
    t.pipe = pipe;
    t.loc = loc;
    t.name = std::move(name);
    return t;
  }

  void alloc(const AllocStmt& a) {
    const auto& b = *a.buffer;
    CoreKind owner = b.scope == Scope::UB ? CoreKind::V : CoreKind::C;
    if (owner != cur_->kind) return;
    if (addr_.count(b.id)) return;
    int64_t align = b.scope == Scope::UB ? chip_.ub_align : chip_.l1_align;
    auto& used = cur_->scope_bytes[static_cast<int>(b.scope)];
    if (auto it = p_.addresses.find(b.id); it != p_.addresses.end()) {
      addr_[b.id] = it->second;  // pinned or planned (the verifier checked the bounds)
      used = std::max(used, it->second + b.bytes());
      return;
    }
    used = std::max(used, placed_end_[static_cast<int>(b.scope)]);
    used = (used + align - 1) / align * align;
    addr_[b.id] = used;
    used += b.bytes();
  }

  Block block(const Stmt& s, bool in_scope) {
    Block out;
    lower_into(s, in_scope, out);
    return out;
  }

  /// Lowers a block; the let bindings made in it end with it.
  void lower_into(const Stmt& s, bool in_scope, Block& out) {
    const size_t mark = lets_.size();
    lower_stmt(s, in_scope, out);
    for (; lets_.size() > mark; lets_.pop_back()) slots_.erase(lets_.back());
  }

  void lower_stmt(const Stmt& s, bool in_scope, Block& out) {
    if (!s) return;
    std::visit([&](const auto& n) { lower_node(n, *s, in_scope, out); }, s->node);
  }

  void lower_node(const SeqStmt& n, const StmtNode&, bool in_scope, Block& out) {
    for (const auto& c : n.body) lower_stmt(c, in_scope, out);
  }

  /// Evaluated on every core kind that reaches it (the scalar units of both read it). A
  /// variable bound already is assigned: the same register (T.alloc_var's stores).
  void lower_node(const LetStmt& n, const StmtNode& s, bool, Block& out) {
    Item it;
    it.kind = Item::Let;
    it.loc = s.loc;
    it.begin = compile(n.value);
    if (auto bound = slots_.find(n.var->id); bound != slots_.end()) {
      it.slot = bound->second;
    } else {
      it.slot = cur_->num_slots++;
      slots_[n.var->id] = it.slot;
      lets_.push_back(n.var->id);
    }
    cur_->lets = true;
    out.items.push_back(std::move(it));
  }

  void lower_node(const ForStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    Item it;
    it.kind = Item::Loop;
    it.loc = s.loc;
    it.slot = cur_->num_slots++;
    slots_[n.var->id] = it.slot;
    it.begin = compile(n.begin);
    it.end = compile(n.end);
    it.step = n.step;
    it.body = std::make_shared<Block>(block(n.body, in_scope));
    slots_.erase(n.var->id);
    if (!it.body->items.empty()) out.items.push_back(std::move(it));
  }

  void lower_node(const IfStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    Item it;
    it.kind = Item::If;
    it.loc = s.loc;
    it.cond = compile(n.cond);
    it.body = std::make_shared<Block>(block(n.then_body, in_scope));
    it.else_body = std::make_shared<Block>(block(n.else_body, in_scope));
    if (!it.body->items.empty() || !it.else_body->items.empty()) out.items.push_back(std::move(it));
  }

  void lower_node(const ScopeStmt& n, const StmtNode&, bool, Block& out) {
    if (n.kind != cur_->kind) {
      // Allocations of the other core kind inside its scope still need no address here.
      return;
    }
    lower_into(n.body, true, out);
  }

  void lower_node(const AllocStmt& n, const StmtNode&, bool, Block&) { alloc(n); }

  void lower_node(const CopyStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    if (!in_scope) return;
    Pipe pipe = *copy_pipe(n.src.buffer->scope, n.dst.buffer->scope);  // verified
    OpTemplate t = base(Opcode::Copy, pipe, s.loc,
                        fmt::format("copy {}->{}", ir::to_string(n.src.buffer->scope),
                                    ir::to_string(n.dst.buffer->scope)));
    t.num_acc = 2;
    t.acc[0] = access(n.dst, s.loc);
    t.acc[1] = access(n.src, s.loc);
    t.transpose = n.transpose;
    t.atomic_add = n.atomic_add;
    if (n.atomic_add) t.name += " atomic_add";
    t.relu = n.relu;
    if (n.relu) t.name += " relu";
    std::tie(t.m, t.n) = matrix(n.src);
    out.items.push_back(instr_item(std::move(t)));
  }

  void lower_node(const GemmStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    if (!in_scope) return;
    OpTemplate t = base(Opcode::Mmad, Pipe::M, s.loc, "mmad");
    t.num_acc = 3;
    t.acc[0] = access(n.c, s.loc);
    t.acc[1] = access(n.a, s.loc);
    t.acc[2] = access(n.b, s.loc);
    t.transpose_a = n.transpose_a;
    t.transpose_b = n.transpose_b;
    t.init = n.init;
    auto [cm, cn] = matrix(n.c);
    auto [ar, ac] = matrix(n.a);
    t.m = cm;
    t.n = cn;
    t.k = n.transpose_a ? ar : ac;
    out.items.push_back(instr_item(std::move(t)));
  }

  void lower_node(const GemmL1Stmt&, const StmtNode& s, bool, Block&) {
    throw std::logic_error(s.loc.str() +
                           ": gemm_l1 reached the lowering (the verifier accepts "
                           "it only for the gemm_l1 pass, which expands it)");
  }

  void lower_node(const TileOpStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    if (!in_scope) return;
    OpTemplate t = base(Opcode::Vec, ir::tile_op_pipe(n.op), s.loc,
                        std::string("tile.") + ir::to_string(n.op));
    t.tile_op = n.op;
    t.cmp = n.cmp;
    t.attrs = n.attrs;
    t.acc[0] = access(n.dst, s.loc);
    t.num_acc = 1;
    for (const auto& r : n.srcs) t.acc[t.num_acc++] = access(r, s.loc);
    if (n.scalar) {
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, double>) {
              t.scalar_kind = OpTemplate::ScalarKind::Imm;
              t.scalar_imm = v;
            } else if constexpr (std::is_same_v<T, Expr>) {
              t.scalar_kind = OpTemplate::ScalarKind::Expr;
              t.scalar_expr = compile(v);
            } else {
              t.scalar_kind = OpTemplate::ScalarKind::UbRead;
              t.scalar_read = access(v, s.loc);
            }
          },
          n.scalar->value);
    }
    std::tie(t.m, t.n) = matrix(n.dst);
    out.items.push_back(instr_item(std::move(t)));
  }

  void lower_node(const ReduceStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    if (!in_scope) return;
    OpTemplate t =
        base(Opcode::Reduce, Pipe::V, s.loc, std::string("reduce_") + ir::to_string(n.kind));
    t.reduce = n.kind;
    t.num_acc = 2;
    t.acc[0] = access(n.dst, s.loc);
    t.acc[1] = access(n.src, s.loc);
    t.reduce_clear = n.clear;
    std::tie(t.m, t.n) = matrix(n.src);
    t.reduce_dim = (n.dim == 0 && n.src.squeezed().size() > 1) ? 0 : 1;
    out.items.push_back(instr_item(std::move(t)));
  }

  void flag(Opcode op, Pipe on, Pipe src, Pipe dst, const Expr& id, const StmtNode& s,
            bool in_scope, Block& out, int cross_mode = 2) {
    if (!in_scope) return;
    OpTemplate t = base(op, on, s.loc, to_string(op));
    t.flag_src = src;
    t.flag_dst = dst;
    t.flag_id = compile(id);
    t.cross_mode = cross_mode;
    out.items.push_back(instr_item(std::move(t)));
  }

  void lower_node(const SetFlagStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    flag(Opcode::SetFlag, n.src, n.src, n.dst, n.event_id, s, in_scope, out);
  }
  void lower_node(const WaitFlagStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    flag(Opcode::WaitFlag, n.dst, n.src, n.dst, n.event_id, s, in_scope, out);
  }
  void lower_node(const PipeBarrierStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    flag(Opcode::Barrier, n.pipe, n.pipe, n.pipe, make_int(0), s, in_scope, out);
  }
  void lower_node(const SetCrossFlagStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    flag(Opcode::SetCross, n.pipe, n.pipe, n.pipe, n.flag_id, s, in_scope, out, n.mode);
  }
  void lower_node(const WaitCrossFlagStmt& n, const StmtNode& s, bool in_scope, Block& out) {
    flag(Opcode::WaitCross, Pipe::S, Pipe::S, Pipe::S, n.flag_id, s, in_scope, out);
  }

  const Program& p_;
  const ChipConfig& chip_;
  CoreProgram* cur_ = nullptr;
  std::map<int, int> slots_;
  std::vector<int> lets_;  // let variables bound in the blocks being lowered, innermost last
  std::map<int, int> gm_index_;
  std::map<int, int64_t> addr_;
  std::map<int, int64_t> placed_ids_;
  std::array<int64_t, 6> placed_end_{};
  std::set<int> loaded_;  // buffer ids read by scalar loads
};

}  // namespace

LoweredProgram lower(const Program& p, const ChipConfig& chip) {
  return Lowerer(p, chip).run();
}

}  // namespace tilepipe::lower

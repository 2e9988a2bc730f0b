// Stable text form of the tile IR (what golden tests compare and --print-after shows).
#include <fmt/format.h>

#include <map>
#include <sstream>

#include "tilepipe/ir.h"
#include "tilepipe/vec_modes.h"

namespace tilepipe::ir {
namespace {

std::string fmt_double(double v) {
  std::string s = fmt::format("{:.6g}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

class Printer {
 public:
  std::string expr(const Expr& e) {
    if (!e) return "<null>";
    return std::visit(
        [&](const auto& n) -> std::string {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, IntImm>)
            return std::to_string(n.value);
          else if constexpr (std::is_same_v<T, VarRef>)
            return var(n.var);
          else if constexpr (std::is_same_v<T, CoreIdx>)
            return "cid";
          else if constexpr (std::is_same_v<T, VecIdx>)
            return "vid";
          else if constexpr (std::is_same_v<T, Binary>) {
            if (n.op == BinOp::Min || n.op == BinOp::Max)
              return fmt::format("{}({}, {})", to_string(n.op), expr(n.a), expr(n.b));
            return fmt::format("({} {} {})", expr(n.a), to_string(n.op), expr(n.b));
          } else if constexpr (std::is_same_v<T, Select>)
            return fmt::format("select({}, {}, {})", expr(n.cond), expr(n.then_value),
                               expr(n.else_value));
          else if constexpr (std::is_same_v<T, Load>) {
            std::vector<std::string> idx;
            for (const auto& i : n.index) idx.push_back(expr(i));
            return fmt::format("load({}[{}])", n.buffer ? n.buffer->name : "<null>",
                               fmt::join(idx, ", "));
          } else
            static_assert(sizeof(T) == 0, "Printer: unhandled expression node");
        },
        e->node);
  }

  std::string var(const Var& v) {
    auto it = var_names_.find(v->id);
    if (it != var_names_.end()) return it->second;
    int& count = name_uses_[v->name];
    std::string name = count == 0 ? v->name : fmt::format("{}.{}", v->name, count);
    ++count;
    var_names_[v->id] = name;
    return name;
  }

  std::string region(const Region& r) {
    if (!r.buffer) return "<null>";
    bool full = r.extent == r.buffer->shape;
    for (const auto& s : r.start) full = full && as_const(s) == 0;
    if (full) return r.buffer->name;
    std::string out = r.buffer->name + "[";
    for (size_t i = 0; i < r.start.size(); ++i) {
      if (i) out += ", ";
      out += fmt::format("{}:+{}", expr(r.start[i]), r.extent[i]);
    }
    return out + "]";
  }

  std::string scalar(const ScalarOperand& s) {
    return std::visit(
        [&](const auto& v) -> std::string {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, double>)
            return fmt_double(v);
          else if constexpr (std::is_same_v<T, Expr>)
            return expr(v);
          else
            return region(v);
        },
        s.value);
  }

  static std::string shape(const std::vector<int64_t>& s) {
    return fmt::format("[{}]", fmt::join(s, ", "));
  }

  std::string buffer_decl(const Buffer& b) {
    const char* role = b->role == TensorRole::Input       ? " in"
                       : b->role == TensorRole::Output    ? " out"
                       : b->role == TensorRole::Workspace ? " workspace"
                                                          : "";
    std::string at;
    if (addresses_)
      if (auto it = addresses_->find(b->id); it != addresses_->end())
        at = fmt::format(" @{}", it->second);
    return fmt::format("{}: {} {}{}{}{}", b->name, to_string(b->scope), to_string(b->dtype),
                       shape(b->shape), role, at);
  }

  void line(const std::string& s) { out_ << std::string(indent_ * 2, ' ') << s << '\n'; }

  void block(const std::string& head, const Stmt& body) {
    line(head + " {");
    ++indent_;
    stmt(body);
    --indent_;
    line("}");
  }

  void stmt(const Stmt& s) {
    if (!s) return;
    std::visit([&](const auto& n) { print_node(n); }, s->node);
  }

  void print_node(const SeqStmt& n) {
    for (const auto& c : n.body) stmt(c);
  }
  void print_node(const ForStmt& n) {
    std::string kind = n.kind == ForKind::Serial     ? "serial"
                       : n.kind == ForKind::Parallel ? "parallel"
                                                     : "pipelined";
    std::string range = fmt::format("{}({}, {}", kind, expr(n.begin), expr(n.end));
    if (n.step != 1) range += fmt::format(", step={}", n.step);
    if (n.kind == ForKind::Pipelined)
      range += fmt::format(", num_stages={}, cross_interval={}", n.num_stages, n.cross_interval);
    block(fmt::format("for {} in {})", var(n.var), range), n.body);
  }
  void print_node(const IfStmt& n) {
    block(fmt::format("if {}", expr(n.cond)), n.then_body);
    if (n.else_body) block("else", n.else_body);
  }
  void print_node(const ScopeStmt& n) { block(fmt::format("scope {}", to_string(n.kind)), n.body); }
  void print_node(const LetStmt& n) { line(fmt::format("let {} = {}", var(n.var), expr(n.value))); }
  void print_node(const AllocStmt& n) { line("alloc " + buffer_decl(n.buffer)); }
  void print_node(const CopyStmt& n) {
    std::string extra;
    if (n.transpose) extra += " transpose";
    if (n.pad_value) extra += " pad=" + fmt_double(*n.pad_value);
    if (n.atomic_add) extra += " atomic_add";
    if (n.relu) extra += " relu";
    line(fmt::format("copy {} -> {}{}", region(n.src), region(n.dst), extra));
  }
  void print_node(const GemmStmt& n) {
    line(fmt::format("gemm {}{} x {}{} -> {}{}", region(n.a), n.transpose_a ? "^T" : "",
                     region(n.b), n.transpose_b ? "^T" : "", region(n.c),
                     n.init ? " init" : " acc"));
  }
  void print_node(const GemmL1Stmt& n) {
    auto c = as_const(n.init);
    std::string init = !c ? " init=" + expr(n.init) : *c ? " init" : " acc";
    if (n.k_chunk) init += fmt::format(" k_chunk={}", n.k_chunk);
    line(fmt::format("gemm_l1 {}{} x {}{} -> {}{}", region(n.a), n.transpose_a ? "^T" : "",
                     region(n.b), n.transpose_b ? "^T" : "", region(n.c), init));
  }
  void print_node(const TileOpStmt& n) {
    std::string args = region(n.dst);
    for (const auto& s : n.srcs) args += ", " + region(s);
    if (n.scalar) args += ", " + scalar(*n.scalar);
    std::string op = to_string(n.op);
    if (n.op == TileOpKind::Compare) op += std::string(".") + to_string(n.cmp);
    if (n.op == TileOpKind::GatherMask && n.srcs.size() == 1)
      args += fmt::format(", pattern={}", n.attrs[0]);
    if (n.op == TileOpKind::Broadcast && n.attrs[0] != 0)
      args += n.attrs[0] == static_cast<int64_t>(BroadcastDir::Column) ? ", column" : ", row";
    if (n.op == TileOpKind::Cast && (n.attrs[0] != 0 || n.attrs[1] == kCastIntegral) &&
        valid_cast_round(n.attrs[0]))
      args += fmt::format(", round={}{}", to_string(static_cast<CastRound>(n.attrs[0])),
                          n.attrs[1] == kCastIntegral ? ", integral" : "");
    if (n.op == TileOpKind::Gatherb)
      args += fmt::format(", repeat={}, dst_blk_stride={}, dst_rep_stride={}", n.attrs[0],
                          n.attrs[1], n.attrs[2]);
    line(fmt::format("tile.{} {}", op, args));
  }
  void print_node(const ReduceStmt& n) {
    line(fmt::format("reduce_{} {} -> {} dim={}{}", to_string(n.kind), region(n.src), region(n.dst),
                     n.dim, n.clear ? "" : " merge"));
  }
  void print_node(const SetFlagStmt& n) {
    line(fmt::format("set_flag {}->{} #{}", to_string(n.src), to_string(n.dst), expr(n.event_id)));
  }
  void print_node(const WaitFlagStmt& n) {
    line(fmt::format("wait_flag {}->{} #{}", to_string(n.src), to_string(n.dst), expr(n.event_id)));
  }
  void print_node(const PipeBarrierStmt& n) {
    line(fmt::format("pipe_barrier {}", to_string(n.pipe)));
  }
  void print_node(const SetCrossFlagStmt& n) {
    line(fmt::format("set_cross_flag {} #{} mode={}", to_string(n.pipe), expr(n.flag_id), n.mode));
  }
  void print_node(const WaitCrossFlagStmt& n) {
    line(fmt::format("wait_cross_flag #{}", expr(n.flag_id)));
  }

  std::string program(const Program& p) {
    addresses_ = &p.addresses;
    std::vector<std::string> params;
    for (const auto& b : p.params) params.push_back(buffer_decl(b));
    line(
        fmt::format("kernel {}({}) block_num={} {{", p.name, fmt::join(params, ", "), p.block_num));
    ++indent_;
    for (const auto& w : p.workspaces) line("workspace " + buffer_decl(w));
    stmt(p.body);
    --indent_;
    line("}");
    return out_.str();
  }

  std::string take() { return out_.str(); }

 private:
  std::ostringstream out_;
  int indent_ = 0;
  std::map<int, std::string> var_names_;
  std::map<std::string, int> name_uses_;
  const std::map<int, int64_t>* addresses_ = nullptr;
};

}  // namespace

std::string print(const Program& p) {
  return Printer().program(p);
}
std::string print(const Stmt& s) {
  Printer pr;
  pr.stmt(s);
  return pr.take();
}
std::string print(const Expr& e) {
  return Printer().expr(e);
}
std::string print(const Region& r) {
  return Printer().region(r);
}

}  // namespace tilepipe::ir

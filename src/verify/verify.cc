// The verifier's entry points and diagnostics, and the layer's shared facts (which core owns
// a memory, which pipe a copy runs on). Program checks: scopes, copy directions, shapes,
// dtypes, slice bounds, capacities, alignment, flags, by subject in the verify_*.cc files
// (verify_internal.h). Collects every problem rather than stopping at the first.
#include "tilepipe/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>

#include "tilepipe/ir_vars.h"
#include "verify/verify_internal.h"

namespace tilepipe {

using namespace ir;

std::string Diagnostic::str() const {
  // Without a source location (a whole-run budget) the kind says which error it is.
  const char* level = severity == Severity::Warning ? "warning" : "error";
  std::string out = loc.file.empty() ? fmt::format("{}: {} ({})", level, message, kind)
                                     : fmt::format("{}:{}:{}: {}: {}", loc.file, loc.line,
                                                   loc.column, level, message);
  for (const auto& n : notes) out += "\n  " + n;
  if (!hint.empty()) out += "\n  hint: " + hint;
  return out;
}

static std::string join_diags(const std::vector<Diagnostic>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += '\n';
    s += d[i].str();
  }
  return s;
}

UserError::UserError(std::vector<Diagnostic> diags, ErrorKind kind)
    : Error(kind, join_diags(diags)), diags_(std::move(diags)) {}

ErrorKind run_error_kind(const std::vector<Diagnostic>& diags) {
  auto any_of = [&](const auto& kinds) {
    return std::any_of(diags.begin(), diags.end(), [&](const Diagnostic& d) {
      return std::find(kinds.begin(), kinds.end(), d.kind) != kinds.end();
    });
  };
  if (any_of(kCheckKinds)) return ErrorKind::CheckFinding;
  if (any_of(kBudgetKinds)) return ErrorKind::Budget;
  if (any_of(std::array{kInterruptedKind})) return ErrorKind::Interrupted;
  return ErrorKind::User;
}

static std::vector<Diagnostic> of_severity(const std::vector<Diagnostic>& d, Severity s) {
  std::vector<Diagnostic> out;
  std::copy_if(d.begin(), d.end(), std::back_inserter(out),
               [&](const Diagnostic& x) { return x.severity == s; });
  return out;
}

std::vector<Diagnostic> VerifyResult::errors() const {
  return of_severity(diagnostics, Severity::Error);
}

std::vector<Diagnostic> VerifyResult::warnings() const {
  return of_severity(diagnostics, Severity::Warning);
}

std::vector<Diagnostic> as_errors(std::vector<Diagnostic> d) {
  for (auto& x : d) x.severity = Severity::Error;
  return d;
}

bool werror_from_env() {
  const char* v = std::getenv("TILEPIPE_WERROR");
  return v && *v && std::string(v) != "0";
}

std::array<std::pair<Scope, const ScopeCapacity*>, 5> on_chip_capacities(const ChipConfig& chip) {
  return {{{Scope::L1, &chip.l1},
           {Scope::L0A, &chip.l0a},
           {Scope::L0B, &chip.l0b},
           {Scope::L0C, &chip.l0c},
           {Scope::UB, &chip.ub}}};
}

CoreKind owner(Scope s) {
  return s == Scope::UB ? CoreKind::V : CoreKind::C;
}

std::optional<Pipe> copy_pipe(Scope from, Scope to) {
  if (from == Scope::GM && (to == Scope::L1 || to == Scope::UB)) return Pipe::MTE2;
  if (from == Scope::L1 && (to == Scope::L0A || to == Scope::L0B)) return Pipe::MTE1;
  if (from == Scope::L0C && (to == Scope::GM || to == Scope::L1)) return Pipe::FIX;
  if (from == Scope::UB && to == Scope::GM) return Pipe::MTE3;
  if (from == Scope::UB && to == Scope::UB) return Pipe::V;
  return std::nullopt;
}

std::optional<CoreKind> leaf_core(const Stmt& s) {
  if (auto* a = std::get_if<AllocStmt>(&s->node)) return owner(a->buffer->scope);
  if (auto* l = std::get_if<LetStmt>(&s->node)) {  // the scalar unit reading a UB element
    bool ub = false;
    walk_expr(l->value, [&](const ExprNode& n) {
      auto* ld = std::get_if<Load>(&n.node);
      ub = ub || (ld && ld->buffer && ld->buffer->scope == Scope::UB);
    });
    return ub ? std::optional<CoreKind>(CoreKind::V) : std::nullopt;
  }
  // Intra-core flags and barriers: the Cube's when a pipe is (MTE1, M, FIX only there).
  auto by_pipes = [](std::initializer_list<Pipe> ps) {
    bool cube = std::any_of(ps.begin(), ps.end(), [](Pipe p) {
      return p == Pipe::MTE1 || p == Pipe::M || p == Pipe::FIX;
    });
    return cube ? CoreKind::C : CoreKind::V;
  };
  if (auto* f = std::get_if<SetFlagStmt>(&s->node)) return by_pipes({f->src, f->dst});
  if (auto* f = std::get_if<WaitFlagStmt>(&s->node)) return by_pipes({f->src, f->dst});
  if (auto* b = std::get_if<PipeBarrierStmt>(&s->node)) return by_pipes({b->pipe});
  if (std::holds_alternative<GemmStmt>(s->node) || std::holds_alternative<GemmL1Stmt>(s->node))
    return CoreKind::C;
  if (std::holds_alternative<TileOpStmt>(s->node) || std::holds_alternative<ReduceStmt>(s->node))
    return CoreKind::V;
  if (auto* c = std::get_if<CopyStmt>(&s->node)) {
    if (c->src.buffer->scope != Scope::GM) return owner(c->src.buffer->scope);
    if (c->dst.buffer->scope != Scope::GM) return owner(c->dst.buffer->scope);
  }
  return std::nullopt;
}

void verify_detail::loaded_buffers(const Expr& e, std::set<int>& ids) {
  walk_expr(e, [&](const ExprNode& n) {
    if (auto* l = std::get_if<Load>(&n.node); l && l->buffer) ids.insert(l->buffer->id);
  });
}

namespace {

/// Collects every buffer a statement tree reads or writes (accessed_buffers).
class AccessedBuffers : public StmtVisitor {
 public:
  std::set<int> ids;

  void expr(const Expr& e) { verify_detail::loaded_buffers(e, ids); }
  void region(const Region& r) {
    if (r.buffer) ids.insert(r.buffer->id);
    for (const auto& e : r.start) expr(e);
  }
  void visit_for(const ForStmt& s, const StmtNode& n) override {
    expr(s.begin);
    expr(s.end);
    StmtVisitor::visit_for(s, n);
  }
  void visit_if(const IfStmt& s, const StmtNode& n) override {
    expr(s.cond);
    StmtVisitor::visit_if(s, n);
  }
  void visit_copy(const CopyStmt& s, const StmtNode&) override {
    region(s.src);
    region(s.dst);
  }
  void visit_gemm(const GemmStmt& s, const StmtNode&) override {
    region(s.a);
    region(s.b);
    region(s.c);
  }
  void visit_gemm_l1(const GemmL1Stmt& s, const StmtNode&) override {
    region(s.a);
    region(s.b);
    region(s.c);
    expr(s.init);
  }
  void visit_tile(const TileOpStmt& s, const StmtNode&) override {
    region(s.dst);
    for (const auto& r : s.srcs) region(r);
    if (s.scalar) {
      if (auto* e = std::get_if<Expr>(&s.scalar->value)) expr(*e);
      if (auto* r = std::get_if<Region>(&s.scalar->value)) region(*r);
    }
  }
  void visit_reduce(const ReduceStmt& s, const StmtNode&) override {
    region(s.src);
    region(s.dst);
  }
  void visit_set_flag(const SetFlagStmt& s, const StmtNode&) override { expr(s.event_id); }
  void visit_wait_flag(const WaitFlagStmt& s, const StmtNode&) override { expr(s.event_id); }
  void visit_set_cross(const SetCrossFlagStmt& s, const StmtNode&) override { expr(s.flag_id); }
  void visit_wait_cross(const WaitCrossFlagStmt& s, const StmtNode&) override { expr(s.flag_id); }
  void visit_let(const LetStmt& s, const StmtNode&) override { expr(s.value); }
};

}  // namespace

std::set<int> accessed_buffers(const Program& p) {
  AccessedBuffers v;
  v.visit(p.body);
  return std::move(v.ids);
}

bool crosses_cores(Scope from, Scope to) {
  return (from == Scope::L0C && to == Scope::UB) || (from == Scope::UB && to == Scope::L1);
}

namespace verify_detail {

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

std::vector<Diagnostic> Verifier::run() {
  if (p_.block_num < 1) {
    error(p_.loc, "bad-launch", fmt::format("block_num must be >= 1, found {}", p_.block_num),
          "launch at least one block; expert kernels launch the physical core count (" +
              std::to_string(chip_.ai_cores) + ")");
  }
  for (const auto& b : p_.params) declare_gm(b);
  for (const auto& b : p_.workspaces) declare_gm(b);
  check_gm_capacity();
  stmt(p_.body);
  check_load_sources();
  check_reinterpret();
  if (opts_.capacity) check_capacity();
  return std::move(diags_);
}

void Verifier::error(const Loc& loc, const std::string& kind, std::string msg, std::string hint,
                     std::vector<std::string> notes) {
  if (errors_++ >= 50) return;
  diags_.push_back(Diagnostic{loc, kind, std::move(msg), std::move(notes), std::move(hint)});
}

void Verifier::warn(const Loc& loc, const std::string& kind, std::string msg, std::string hint) {
  if (warnings_++ >= 20) return;
  Diagnostic d{loc, kind, std::move(msg), {}, std::move(hint)};
  d.severity = Severity::Warning;
  diags_.push_back(std::move(d));
}

}  // namespace verify_detail

VerifyResult verify_all(const Program& p, const ChipConfig& chip, VerifyOptions opts) {
  return VerifyResult{verify_detail::Verifier(p, chip, opts).run()};
}

std::vector<Diagnostic> verify(const Program& p, const ChipConfig& chip, VerifyOptions opts) {
  return verify_all(p, chip, opts).errors();
}

void verify_or_throw(const Program& p, const ChipConfig& chip, VerifyOptions opts) {
  auto d = verify(p, chip, opts);
  if (!d.empty()) throw UserError(std::move(d));
}

}  // namespace tilepipe

// The verifier's walk: each statement in its scope (automatic-mode leaves on the core that
// owns their operands), loops, branches, scopes, allocations.
#include <fmt/format.h>

#include <map>
#include <set>

#include "verify/verify_internal.h"

namespace tilepipe::verify_detail {

bool Verifier::in_scope(const Loc& loc, const char* what) {
  if (!scope_) {
    error(loc, "outside-scope",
          fmt::format("{} outside a scope: expert-mode code runs on a Cube or Vector core", what),
          "wrap it in scope_c(...) (Cube) or scope_v(...) (Vector)");
    return false;
  }
  return true;
}

bool Verifier::operand_on_core(const Region& r, const Loc& loc, const char* what) {
  Scope s = r.buffer->scope;
  if (s == Scope::GM || owner(s) == *scope_) return true;
  error(loc, "scope-rule",
        fmt::format("{} operand '{}' lives in {} (a {} core buffer) but the op is in scope {}",
                    what, r.buffer->name, to_string(s), owner(s) == CoreKind::C ? "Cube" : "Vector",
                    to_string(*scope_)),
        owner(s) == CoreKind::C
            ? "move the op into scope_c, or exchange data through a GM workspace"
            : "move the op into scope_v, or exchange data through a GM workspace");
  return false;
}

/// TileLang-Ascend's strict C/V verifier (#1606, #1753): without AUTO_CV_COMBINE, work on a
/// core's own memories (vector ops, gemms, copies with a UB / L1 / L0 end) outside a scope
/// is an error of the newest original. Older releases compiled it, and tilepipe splits it
/// as they did: a warning, at the first such statement of the program.
void Verifier::outer_scope(const Stmt& s) {
  if (opts_.cv_combine || outer_warned_) return;
  const auto* c = std::get_if<CopyStmt>(&s->node);
  const bool work = std::holds_alternative<GemmStmt>(s->node) ||
                    std::holds_alternative<TileOpStmt>(s->node) ||
                    std::holds_alternative<ReduceStmt>(s->node) ||
                    (c && (c->src.buffer->scope != Scope::GM || c->dst.buffer->scope != Scope::GM));
  if (!work) return;
  outer_warned_ = true;
  warn(s->loc, "outer-scope",
       "work on a core's memories outside T.Scope in a kernel without "
       "TL_ASCEND_AUTO_CV_COMBINE: TileLang-Ascend's strict C/V check (#1753) rejects it; "
       "older releases, and tilepipe, split it into Cube and Vector code",
       "turn on tilelang.PassConfigKey.TL_ASCEND_AUTO_CV_COMBINE in the kernel's pass_configs, "
       "or put the Cube work in T.Scope(\"C\") and the Vector work in T.Scope(\"V\")");
}

void Verifier::stmt(const Stmt& s) {
  if (!s) return;
  // Unscoped (automatic) code: a leaf runs on the core that owns its on-chip operands,
  // and is checked as if it were in that core's scope.
  std::optional<CoreKind> inferred;
  if (opts_.unscoped && !scope_) {
    outer_scope(s);
    if (auto* c = std::get_if<CopyStmt>(&s->node); c && crossing(*c)) {
      check_crossing(*c, *s);
      record_write(s);
      return;
    }
    inferred = leaf_core(s);
    scope_ = inferred;
  }
  std::visit([&](const auto& n) { check(n, *s); }, s->node);
  if (inferred) scope_.reset();
  record_write(s);
}

namespace {

/// The core kinds of the unscoped leaves of `s` (`leaves`) and of the scopes in it
/// (`scopes`).
void leaf_kinds(const Stmt& s, std::set<CoreKind>& leaves, std::set<CoreKind>& scopes) {
  if (!s) return;
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, SeqStmt>) {
          for (const auto& c : n.body) leaf_kinds(c, leaves, scopes);
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          leaf_kinds(n.body, leaves, scopes);
        } else if constexpr (std::is_same_v<T, ScopeStmt>) {
          scopes.insert(n.kind);
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          leaf_kinds(n.then_body, leaves, scopes);
          leaf_kinds(n.else_body, leaves, scopes);
        } else if constexpr (std::is_same_v<T, CopyStmt>) {
          if (Verifier::crossing(n)) {  // cv_split puts one copy on each core
            leaves.insert(CoreKind::C);
            leaves.insert(CoreKind::V);
          } else if (auto k = leaf_core(s)) {
            leaves.insert(*k);
          }
        } else if constexpr (!std::is_same_v<T, AllocStmt>) {
          if (auto k = leaf_core(s)) leaves.insert(*k);
        }
      },
      s->node);
}

/// The one core kind the leaves of these bodies run on (allocations aside), or none when
/// they hold both or neither. Scopes count only without unscoped leaves: in unscoped code
/// a scope is one core's own spelling of something (a barrier's), not the body's core.
std::optional<CoreKind> body_core(std::initializer_list<const Stmt*> bodies) {
  std::set<CoreKind> leaves, scopes;
  for (const Stmt* b : bodies) leaf_kinds(*b, leaves, scopes);
  const auto& kinds = leaves.empty() ? scopes : leaves;
  if (kinds.size() != 1) return std::nullopt;
  return *kinds.begin();
}

}  // namespace

/// Unscoped code: a loop's or branch's header runs on the core its body runs on (cv_split
/// places the whole statement there), so its element reads are checked on that core.
std::optional<CoreKind> Verifier::header_scope(std::initializer_list<const Stmt*> bodies) {
  std::optional<CoreKind> saved = scope_;
  if (opts_.unscoped && !scope_) scope_ = body_core(bodies);
  return saved;
}

void Verifier::check(const SeqStmt& n, const StmtNode&) {
  // A let's variable is visible to the rest of the sequence.
  std::vector<int> lets;
  for (const auto& c : n.body) {
    auto* l = std::get_if<LetStmt>(&c->node);
    if (l && !vars_.count(l->var->id)) lets.push_back(l->var->id);
    stmt(c);
  }
  for (int id : lets) vars_.erase(id);
}

void Verifier::check(const LetStmt& n, const StmtNode&) {
  // Like a loop bound, a value that depends on variables is correlated with them.
  std::map<int, int> uses;
  Interval v = range(n.value, uses);
  v.exact = v.exact && uses.empty();
  // A variable bound already is assigned (the same register): past a store under a
  // branch or loop it may hold any value it was given, so it has no useful range.
  if (vars_.count(n.var->id)) v = {INT64_MIN / 4, INT64_MAX / 4, false};
  vars_[n.var->id] = v;
  if (loop_dependent(n.value)) loop_derived_.insert(n.var->id);
}

void Verifier::check(const ForStmt& n, const StmtNode& s) {
  if (n.step < 1) {
    error(s.loc, "bad-loop", fmt::format("loop step must be >= 1, found {}", n.step),
          "iterate upward with a positive step");
  }
  if (n.kind == ForKind::Pipelined && (n.num_stages < 0 || n.cross_interval < 1)) {
    error(s.loc, "bad-loop",
          fmt::format("Pipelined needs num_stages >= 0 and cross_interval >= 1, found "
                      "num_stages={}, cross_interval={}",
                      n.num_stages, n.cross_interval),
          "num_stages=0 turns pipelining off; cross_interval=1 syncs every iteration");
  }
  if (n.kind == ForKind::Parallel && !opts_.parallel) {
    error(s.loc, "unsupported",
          "Parallel loops need the vectorize pass, which is off; the loop would silently run "
          "serially",
          "write the loop with serial(...) and explicit tile ops / hand multi-buffering");
  } else if (n.kind == ForKind::Pipelined && !scope_ && !opts_.unscoped) {
    error(s.loc, "unsupported",
          "Pipelined loops outside a scope need the Cube/Vector split (pass option "
          "cv_split), which is off; the loop would silently run serially",
          "switch cv_split on, put the loop inside scope_c / scope_v (intra-core "
          "multi-buffering), or write the Cube/Vector pipeline by hand");
  } else if (n.kind == ForKind::Pipelined && scope_ && n.cross_interval > 1) {
    error(s.loc, "bad-loop",
          fmt::format("cross_interval={} has no effect on a Pipelined loop inside scope {}: it "
                      "spaces Cube/Vector signals, and this loop runs on one core",
                      n.cross_interval, to_string(*scope_)),
          "drop cross_interval (intra-core pipelining overlaps the pipes of one core)");
  }
  // A loop variable's range is exact only for constant bounds: bounds that depend on cid
  // or outer loops correlate it with them, and interval arithmetic would overshoot.
  std::map<int, int> bound_uses;
  std::optional<CoreKind> outer_scope = header_scope({&n.body});
  Interval b = range(n.begin, bound_uses), e = range(n.end, bound_uses);
  scope_ = outer_scope;
  Interval v{b.lo, std::max(b.lo, e.hi - 1), b.exact && e.exact && bound_uses.empty()};
  // From a constant begin the variable only takes begin + multiples of step.
  if (b.lo == b.hi && n.step > 1) v.hi = b.lo + (v.hi - b.lo) / n.step * n.step;
  vars_[n.var->id] = v;
  // A Parallel loop's statements take its place in the enclosing block (the vectorize
  // pass), so what it allocates is the enclosing block's: a front end's temporary made
  // inside it is reused where the same source statement comes again.
  const bool lane = n.kind == ForKind::Parallel;
  if (lane) lanes_.insert(n.var->id);
  if (!lane) visible_.emplace_back();
  loop_derived_.insert(n.var->id);
  stmt(n.body);
  loop_derived_.erase(n.var->id);
  if (!lane) visible_.pop_back();
  vars_.erase(n.var->id);
  lanes_.erase(n.var->id);
}

void Verifier::check(const IfStmt& n, const StmtNode& s) {
  check_branch_sync(n, s);
  // Under the branches, values of the condition's variables are no longer all reachable
  // (a guarded tail `if (i < 3)` never runs i = 3): their ranges become inexact.
  std::map<int, int> cond_uses;
  std::optional<CoreKind> outer_scope = header_scope({&n.then_body, &n.else_body});
  range(n.cond, cond_uses);
  scope_ = outer_scope;
  std::set<int> outer = guarded_;
  for (const auto& [id, count] : cond_uses) guarded_.insert(id);
  visible_.emplace_back();
  stmt(n.then_body);
  visible_.pop_back();
  visible_.emplace_back();
  stmt(n.else_body);
  visible_.pop_back();
  guarded_ = std::move(outer);
}

void Verifier::check(const ScopeStmt& n, const StmtNode& s) {
  if (scope_) {
    error(s.loc, "scope-rule",
          fmt::format("scope {} nested inside scope {}", to_string(n.kind), to_string(*scope_)),
          "close the outer scope first: scopes do not nest");
    return;
  }
  scope_ = n.kind;
  visible_.emplace_back();
  stmt(n.body);
  visible_.pop_back();
  scope_.reset();
}

void Verifier::check(const AllocStmt& n, const StmtNode& s) {
  const auto& b = *n.buffer;
  if (b.scope == Scope::GM) {
    error(s.loc, "scope-rule", fmt::format("'{}' allocated in GM inside the kernel", b.name),
          "declare GM tensors with input/output/workspace on the KernelBuilder");
    return;
  }
  if (scope_ && owner(b.scope) != *scope_) {
    error(s.loc, "scope-rule",
          fmt::format("{} buffer '{}' allocated in scope {}; {} belongs to the {} core",
                      to_string(b.scope), b.name, to_string(*scope_), to_string(b.scope),
                      owner(b.scope) == CoreKind::C ? "Cube" : "Vector"),
          "allocate it at kernel level or inside the matching scope");
  }
  if (b.scope == Scope::L0C && b.dtype != DType::F32 && b.dtype != DType::I32) {
    error(s.loc, "dtype-mismatch",
          fmt::format("L0C buffer '{}' is {}; the cube accumulates in f32 (or i32 for int8)",
                      b.name, to_string(b.dtype)),
          "allocate L0C as f32 and cast on the FIX copy out");
  }
  if (!check_shape(n.buffer)) return;
  visible_.back().insert(b.id);
  int64_t align = b.scope == Scope::UB ? chip_.ub_align : chip_.l1_align;
  int64_t bytes = (b.bytes() + align - 1) / align * align;
  allocs_[b.scope].push_back(Alloc{n.buffer, bytes});
}

}  // namespace tilepipe::verify_detail

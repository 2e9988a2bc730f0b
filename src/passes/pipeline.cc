// The automatic-mode pipeline: every pass in order. Each is `Program -> Program`, in its own
// file under src/passes/ (docs/passes.md says what each assumes and guarantees).
#include <fmt/format.h>

#include <iostream>

#include "passes/auto_sync.h"
#include "passes/copy_cast.h"
#include "passes/cross_drains.h"
#include "passes/cv_split.h"
#include "passes/event_ids.h"
#include "passes/fuse_axpy.h"
#include "passes/gemm_l1.h"
#include "passes/hand_pipeline.h"
#include "passes/l1_residency.h"
#include "passes/multibuffer.h"
#include "passes/original_split.h"
#include "passes/plan_memory.h"
#include "passes/vectorize.h"
#include "tilepipe/passes.h"
#include "tilepipe/verify.h"

namespace tilepipe::passes {

const std::vector<PassInfo>& pass_table() {
  static const std::vector<PassInfo> table = {
      {"gemm_l1",
       "gemms on L1 operands (gemm_v0) -> K chunks: L1 -> L0A / L0B copies and mmads, the "
       "original library's flags where the author syncs",
       &PassOptions::gemm_l1, &gemm_l1},
      {"vectorize",
       "nests of Parallel loops over element code -> tile ops over all their lanes (operands "
       "of fewer lanes broadcast)",
       &PassOptions::vectorize, &vectorize},
      {"copy_cast",
       "GM <-> UB copies that change dtype -> a copy and a vector cast through a UB temporary",
       &PassOptions::copy_cast, &copy_cast},
      {"original_split",
       "unscoped code into Cube and Vector scopes as the original's compiler splits it: the "
       "author's GM tensors handed over per iteration of the block holding them",
       &PassOptions::original_split, &original_split},
      {"hand_pipeline",
       "Pipelined loops in hand-synced scopes: the original's software pipeline (GM -> UB "
       "copies of later iterations ahead, their buffers versioned)",
       &PassOptions::hand_pipeline, &hand_pipeline},
      {"cross_drains",
       "cross-core flags set more often than waited on: waits appended at the end of the "
       "waiting core's last scope",
       &PassOptions::cross_drains, &cross_drains},
      {"event_ids", "intra-core event ids past the chip's count renamed into it, per pipe pair",
       &PassOptions::event_ids, &event_ids},
      {"cv_split",
       "unscoped code into Cube and Vector scopes: GM workspaces, cross-core flags, "
       "cross-core pipelines of mixed Pipelined loops",
       &PassOptions::cv_split, &cv_split},
      {"l1_residency",
       "loop-invariant GM -> L1 loads hoisted out of the loops that reuse them (large reuse)",
       &PassOptions::l1_residency, &l1_residency},
      {"fuse_axpy",
       "per-row muls + adds loops -> broadcast + axpy; mul into a dead f32 temporary, then "
       "add / sub into a tile -> one axpy",
       &PassOptions::fuse, &fuse_axpy},
      {"multibuffer",
       "Pipelined loops on one core: num_stages versions of the buffers crossing pipes",
       &PassOptions::multibuffer, &multibuffer},
      {"plan_memory",
       "liveness-based placement of on-chip buffers (automatic core kinds); capacity "
       "diagnostics",
       &PassOptions::memory_planning, &plan_memory},
      {"auto_sync",
       "intra-core set/wait flags from read/write dependences, in scopes without hand flags",
       &PassOptions::auto_sync, &auto_sync},
  };
  return table;
}

const std::vector<OptionInfo>& option_table() {
  static const std::vector<OptionInfo> table = {
      {"cross_drains", &PassOptions::cross_drains},
      {"event_ids", &PassOptions::event_ids},
      {"hand_pipeline", &PassOptions::hand_pipeline},
      {"original_split", &PassOptions::original_split},
      {"vectorize", &PassOptions::vectorize},
      {"gemm_l1", &PassOptions::gemm_l1},
      {"copy_cast", &PassOptions::copy_cast},
      {"cv_split", &PassOptions::cv_split},
      {"stage_buffers", nullptr, &PassOptions::stage_buffers},
      {"l1_residency", &PassOptions::l1_residency},
      {"fuse", &PassOptions::fuse},
      {"multibuffer", &PassOptions::multibuffer},
      {"memory_planning", &PassOptions::memory_planning},
      {"reserved_tail", &PassOptions::reserved_tail},
      {"auto_sync", &PassOptions::auto_sync},
      {"original_sync", &PassOptions::original_sync},
      {"cv_combine", &PassOptions::cv_combine},
      {"max_rotation", nullptr, &PassOptions::max_rotation},
  };
  return table;
}

namespace {
Diagnostic option_error(std::string message, std::string hint) {
  Diagnostic d;
  d.loc.file = "command line";
  d.kind = "pass-option";
  d.message = std::move(message);
  d.hint = std::move(hint);
  return d;
}
}  // namespace

void switch_pass(PassOptions& o, const std::string& pass, bool on) {
  std::vector<std::string> names;
  for (const auto& info : pass_table()) {
    if (info.name == pass) {
      o.*info.flag = on;
      return;
    }
    names.push_back(info.name);
  }
  throw UserError(option_error(fmt::format("--{}pass {}: no such pass", on ? "" : "no-", pass),
                               fmt::format("passes, in order: {}", fmt::join(names, ", "))));
}

void set_option(PassOptions& o, const std::string& name, int64_t value) {
  std::vector<std::string> names;
  for (const auto& info : option_table()) {
    names.push_back(info.name);
    if (info.name != name) continue;
    if (info.flag) {
      if (value != 0 && value != 1)
        throw UserError(option_error(fmt::format("pass option {}={}: a switch", name, value),
                                     "give it 0 / 1 (False / True)"));
      o.*info.flag = value != 0;
    } else {
      if (value < INT32_MIN || value > INT32_MAX)
        throw UserError(option_error(fmt::format("pass option {}={} is out of range", name, value),
                                     "see docs/passes.md for its range"));
      o.*info.number = static_cast<int>(value);
    }
    return;
  }
  throw UserError(option_error(fmt::format("pass option {}: no such option", name),
                               fmt::format("options: {}", fmt::join(names, ", "))));
}

void validate(const PassOptions& o, const PrintOptions& print) {
  std::vector<Diagnostic> d;
  if (o.max_rotation < 1 || o.max_rotation > 8)
    d.push_back(option_error(fmt::format("max_rotation={} is out of range [1, 8]", o.max_rotation),
                             "1 keeps one id per ring flag (no multi-buffer overlap), 2 double "
                             "buffers"));
  if (o.stage_buffers < 1 || o.stage_buffers > 4)
    d.push_back(
        option_error(fmt::format("stage_buffers={} is out of range [1, 4]", o.stage_buffers),
                     "2 double-buffers each stage of a cross-core pipeline, 1 turns that off"));
  if (!o.cv_split && o.stage_buffers != 2)
    d.push_back(option_error("stage_buffers has no effect with cv_split off",
                             "switch cv_split on, or drop stage_buffers"));
  std::vector<std::string> names;
  for (const auto& p : pass_table()) names.push_back(p.name);
  for (const auto& a : print.after) {
    if (std::find(names.begin(), names.end(), a) == names.end())
      d.push_back(option_error(fmt::format("--print-after {}: no such pass", a),
                               fmt::format("passes, in order: {}", fmt::join(names, ", "))));
    for (const auto& p : pass_table())
      if (p.name == a && !(o.*p.flag))
        d.push_back(option_error(fmt::format("--print-after {}: the pass is switched off", a),
                                 "switch the pass on, or print after another pass"));
  }
  if (!d.empty()) throw UserError(std::move(d));
}

VerifyOptions verify_options(const PassOptions& o) {
  VerifyOptions v;
  v.capacity = !o.memory_planning;
  v.unscoped = o.cv_split || o.original_split;
  v.parallel = o.vectorize;
  v.cast_copies = o.copy_cast;
  v.gemm_l1 = o.gemm_l1;
  v.reserved_tail = o.reserved_tail;
  v.event_id_range = !o.event_ids;
  v.cv_combine = o.cv_combine;
  return v;
}

ir::Program run_passes(const ir::Program& p, const ChipConfig& chip, const PassOptions& o,
                       const PrintOptions& print) {
  validate(o, print);
  std::ostream& out = print.out ? *print.out : std::cerr;
  ir::Program cur = p;
  VerifyOptions vo = verify_options(o);
  for (const auto& pass : pass_table()) {
    if (!(o.*pass.flag)) continue;
    ir::Program next = pass.run(cur, chip, o);
    if (pass.name == "plan_memory") vo.capacity = true;
    if (pass.name == "gemm_l1") vo.gemm_l1 = false;
    if (pass.name == "event_ids") vo.event_id_range = true;
    auto diags = verify(next, chip, vo);
    // vectorize's output is the author's element code seen as tiles: what the verifier
    // finds there (a widened tile off the UB alignment, a broadcast of no row or column
    // shape) is the author's error, at the author's statement
    if (!diags.empty() && pass.name == "vectorize") throw UserError(std::move(diags));
    if (!diags.empty())
      throw InternalError(fmt::format("pass {} produced a program the verifier rejects: {}",
                                      pass.name, diags.front().str()));
    if (print.after_all || print.after.count(pass.name)) {
      bool same = ir::equal(next, cur);
      out << fmt::format("// ---- IR after {}{} ----\n", pass.name, same ? " (unchanged)" : "");
      if (!same) out << ir::print(next);
    }
    cur = std::move(next);
  }
  // A Pipelined loop no pass handled would silently run serially.
  struct Left : ir::StmtVisitor {
    const ir::StmtNode* at = nullptr;
    void visit_for(const ir::ForStmt& f, const ir::StmtNode& n) override {
      if (f.kind == ir::ForKind::Pipelined && !at) at = &n;
      ir::StmtVisitor::visit_for(f, n);
    }
  } left;
  left.visit(cur.body);
  if (left.at)
    throw UserError(Diagnostic{left.at->loc,
                               "pipelined",
                               "this Pipelined loop was not pipelined (the multibuffer pass is "
                               "off) and would silently run serially",
                               {},
                               "switch multibuffer on, or write the loop with serial(...)"});
  return cur;
}

}  // namespace tilepipe::passes

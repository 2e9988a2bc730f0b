// The Cube/Vector split's internals, shared by its files (cv_split.h declares the pass).
//   cv_split.cc           the pass: the checks of unscoped code, then the three steps
//   cv_split_analysis.cc  what runs where: core kinds of subtrees, what unscoped code may not
//                         hold, the author's GM hand-offs, which UB buffers split by rows
//   cv_split_rows.cc      step 1: the UB rows split between the vector cores
//   cv_split_plan.cc      step 2: crossings, hand-offs and pipelines planned (workspaces,
//                         flag ids, stages, versions)
//   cv_split_emit.cc      step 3: one scope per core kind emitted from the plan
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "passes/dependence.h"
#include "tilepipe/chip.h"
#include "tilepipe/ir.h"
#include "tilepipe/passes.h"

namespace tilepipe::passes::cv_split_detail {

using namespace ir;

// ---- analysis (cv_split_analysis.cc) ----

/// Throws the pass's error (UserError, kind "cv-split").
[[noreturn]] void fail(const Loc& loc, std::string msg, std::string hint);

/// An L0C -> UB or UB -> L1 copy: no hardware path, it goes through a GM workspace.
bool is_crossing(const Stmt& s);

/// The core kinds with work in a subtree (a crossing counts for both).
std::set<CoreKind> kinds_in(const Stmt& s);

/// What check_unscoped found: whether there is unscoped work, and the first use of vid.
struct Unscoped {
  bool any = false;
  const StmtNode* vid = nullptr;
};

/// Rejects what unscoped code cannot hold: scopes mixed with unscoped work, hand flags.
/// `any` is false when the program is already scoped (expert mode).
Unscoped check_unscoped(const Program& p);

/// The leaves of a subtree (through sequences, loops, branches and scopes), in order.
void for_leaves(const Stmt& s, const std::function<void(const Stmt&)>& f);

/// The other core kind.
CoreKind other(CoreKind k);

/// A GM tensor the author hands from one core kind to the other (the original's
/// AUTO_CV_SYNC form: explicit workspaces, vid slicing written by the author).
struct Handoff {
  Buffer buf;
  CoreKind producer = CoreKind::C;
};

/// The GM tensors written by one core kind's statements and read by the other's, by
/// buffer id. `conflict`: the first write of a tensor both kinds write and one reads.
std::map<int, Handoff> find_handoffs(const Stmt& body, const StmtNode** conflict);

/// The UB buffers to split: those exchanged with the Cube or stored to GM, and every buffer
/// that shares
/// rows with one in a vector op (same leading extent, used whole; a broadcast of a
/// [1, C] / [C] column vector does not share rows). The rest (index vectors, masks, page
/// tables) is replicated: each vector core holds and computes all of it.
std::set<int> split_buffers(const Stmt& body);

/// Does the subtree access buffer `id`, and from which core kinds?
std::set<CoreKind> touching(const Stmt& s, int id);

/// How many leaves of the subtree access buffer `id`.
size_t count_leaves(const Stmt& s, int id);

/// The pipe of the last access of buffer `id` of the given kind in the subtree.
Pipe last_pipe(const Stmt& s, int id, AccessKind kind, Pipe fallback);

// ---- step 1 (cv_split_rows.cc) ----

/// `p` with the UB buffers of split_buffers split by rows between `nv` vector cores: their
/// allocations, operands and row loops, and the GM side of their GM <-> UB copies. A pinned
/// UB buffer keeps its offset in each vector core's UB.
Program split_rows(const Program& p, int nv);

// ---- steps 2 and 3 (cv_split_plan.cc, cv_split_emit.cc) ----

/// One L0C -> UB or UB -> L1 copy routed through a GM workspace, or an author's GM
/// hand-off (Handoff) with its flags.
struct Crossing {
  CoreKind producer = CoreKind::C;
  Buffer ws;  // [block_num, slots, cube tile...]; a hand-off: its tensor, or [slots, ...]
  int ready = 0, free = 0;
  Pipe out_pipe = Pipe::FIX;  // the producer's copy to GM
  Pipe in_pipe = Pipe::MTE2;  // the consumer's read of GM
  bool made = true;           // ws is the split's own workspace (not the author's tensor)
  int tensor = -1;            // a hand-off: the author's tensor id
};

struct Stage {
  CoreKind kind;
  Var i;
  std::vector<Stmt> body;
  std::vector<int> produces, consumes;  // crossings whose halves this stage holds
};
struct Pipeline {
  Var k;
  Expr batches, len;
  std::vector<Stage> stages;
  Loc loc;
};

/// One half of a crossing for its core, writing or reading workspace slot `slot`.
Stmt crossing_copy(const CopyStmt& c, const Crossing& x, CoreKind kind, Expr slot, int nv,
                   const Loc& loc);

/// Plans the crossings, hand-offs and pipelines of an unscoped program (step 2), then emits
/// its scope C and scope V (step 3).
class Splitter {
 public:
  Splitter(const Program& p, const ChipConfig& chip, const PassOptions& o, int nv,
           std::map<int, Handoff> handoffs = {})
      : p_(p), chip_(chip), o_(o), nv_(nv), handoffs_(std::move(handoffs)) {}

  Program run();

 private:
  // ---- step 2: planning (cv_split_plan.cc) ----
  void check_flags(const Loc& loc, const std::string& what) const;
  /// The crossing of an author's hand-off tensor; inside a pipeline (slots > 0) it moves to
  /// a workspace of `slots` versions of the tensor.
  int new_handoff(const Handoff& h, int64_t slots, const Loc& loc);
  /// An author's hand-off outside pipelines, once per iteration of the innermost block
  /// holding all its accesses: on each core a wait before the block's first statement
  /// touching the tensor and a set after its last (producer: wait free / set ready;
  /// consumer: wait ready / set free).
  void plan_handoff(const Handoff& h);
  /// The author's name of a hand-off crossing's tensor.
  const std::string& tensor_name(int crossing) const;
  int new_crossing(const Stmt& s, int64_t slots);
  /// Records the crossings outside pipelines and plans the mixed Pipelined loops.
  void plan(const Stmt& s, bool in_pipeline);
  void plan_pipeline(const ForStmt& f, const Stmt& self);
  /// Buffers whose value flows from one stage to a later one get ns versions (slot = the
  /// iteration's index in its batch); sharing a buffer that also carries a value across
  /// iterations would change the values once the stages run as separate loops.
  void version_stages(const Stmt& self, Pipeline& pl, int64_t ns);
  static const char* core_name(CoreKind k) { return k == CoreKind::C ? "Cube" : "Vector"; }

  // ---- step 3: emission (cv_split_emit.cc) ----
  Stmt emit(const Stmt& s, CoreKind k);
  /// A crossing outside pipelines: the producer waits for the slot, writes it and signals;
  /// the consumer waits, reads it and frees it.
  template <class T>
  Stmt emit_crossing(const T& n, const Crossing& x, const Stmt& s, CoreKind k);
  Stmt emit_pipeline(const Pipeline& pl, const Stmt& self, CoreKind k);

  const Program& p_;
  const ChipConfig& chip_;
  const PassOptions& o_;
  int nv_;
  int next_flag_ = 0;
  std::vector<Crossing> crossings_;
  std::map<const StmtNode*, int> cross_of_;
  std::map<const StmtNode*, Pipeline> pipelines_;
  std::map<const StmtNode*, std::vector<Stmt>> hoisted_;
  std::map<int, Buffer> version_of_;
  std::map<int, Handoff> handoffs_;  // the author's GM hand-offs, by tensor id
  std::map<int, int> handoff_of_;    // tensor id -> its crossing
  std::map<int, Buffer> slotted_;    // tensor id -> its slotted workspace (pipelines)
  // An author's hand-off outside pipelines: flags before / after a statement, per core.
  std::map<std::pair<const StmtNode*, CoreKind>, std::vector<Stmt>> before_, after_;
};

}  // namespace tilepipe::passes::cv_split_detail

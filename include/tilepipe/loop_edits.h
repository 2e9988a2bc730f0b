// Loop-level source edits the advisor proposes and verifies (docs/cli.md#advice): a serial
// loop that loads a new GM tile per iteration made Pipelined, and work that does not change
// in a loop moved before it. Both find their sites in the program as built (the author's
// loops and lines) and rewrite it there, so a what-if run compiles exactly the program the
// author gets by making the change by hand.
#pragma once

#include <string>
#include <vector>

#include "tilepipe/ir.h"

namespace tilepipe::passes {

/// A loop the advisor points at, and the statements of its body concerned.
struct LoopSite {
  const ir::StmtNode* loop = nullptr;      // in the program the site was found in
  std::vector<const ir::StmtNode*> stmts;  // the tile loads / the invariant statements
  std::string what;                        // for people: "copy at f.py:12, ..."
};

/// Serial loops, and Pipelined ones of one stage (in code without hand-written flags or
/// barriers: neither in the loop nor in its scope), whose body copies from GM into on-chip
/// memory at an address that moves with the loop variable: each iteration loads a new tile,
/// which a Pipelined loop would load while the previous one computes. In program order.
std::vector<LoopSite> serial_tile_loops(const ir::Program& p);

/// Per loop (serial or pipelined, without hand-written syncs in it or its scope, at least
/// one iteration), the statements of its body that compute the same thing in every
/// iteration: their operands use no variable the loop binds or changes, nothing else in the
/// loop writes what they read or write, nothing before them in the body reads what they
/// write, they write on-chip buffers allocated outside the loop, and they do not read what
/// they write. Moving them before the loop keeps every value the program computes. In
/// program order.
std::vector<LoopSite> loop_invariant_work(const ir::Program& p);

/// `p` with the loop of `site` (found in `p`) made Pipelined with `num_stages`.
ir::Program pipeline_loop(const ir::Program& p, const LoopSite& site, int num_stages);

/// `p` with the statements of `site` (found in `p`) moved, in order, to just before its loop.
ir::Program hoist(const ir::Program& p, const LoopSite& site);

}  // namespace tilepipe::passes

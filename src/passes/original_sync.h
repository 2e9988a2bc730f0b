// AUTO_SYNC as TileLang-Ascend places it: the full barriers its sync insertion adds on top
// of the dependence flags.
#pragma once

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"

#include <map>
#include <set>
#include <utility>
#include <vector>

namespace tilepipe::passes {

using PipePair = std::pair<ir::Pipe, ir::Pipe>;

/// The event ids the flags of a body use, per pipe pair: a rotating id (`k % 2 + base`)
/// takes every value of its range; `opaque` holds the pairs with an id whose range is not
/// known.
struct EventIdUse {
  std::map<PipePair, std::set<int64_t>> ids;
  std::set<PipePair> opaque;
  bool empty() const { return ids.empty() && opaque.empty(); }
  /// Whether one of ids [lo, lo + n) of the pair is in use.
  bool holds(PipePair pair, int64_t lo, int64_t n) const;
};
EventIdUse event_ids_used(const ir::Stmt& body);

/// The spellings of one full barrier, preferred first: (src, dst) pairs in emission order.
/// Every pipe hands a flag to the hub (S on the Vector core, M on the Cube core), then on
/// the Cube core, whose hub is a compute pipe, the hub hands one back to every pipe. When
/// auto_sync took every id of FIX->M (a deep Cube pipeline), FIX reaches M through MTE1.
std::vector<std::vector<PipePair>> barrier_spellings(ir::CoreKind core);

/// The full barriers (PipeBarrier<PIPE_ALL>) the original compiler's AUTO_SYNC
/// (src/transform/ascend_sync_insert.cc of TileLang-Ascend) inserts besides its flags, added
/// to `body`, a scope of kind `core` that auto_sync has just synchronised:
///  - before a statement whose addresses or scalars read a tensor element (`load(...)`:
///    the original binds such a read to a variable and places a full barrier before the
///    binding); a statement that reads the same elements as the statement just before it
///    in the same sequence shares that barrier (one binding, used twice);
///  - before every tile op whose AscendC call takes a scalar (add, sub, mul, div, max, min,
///    select, compare) given as a buffer element: the original's code generator prints its
///    own `PipeBarrier<PIPE_ALL>()` before that call's GetValue, one per call;
///  - before and after every `if` of the author's (the original brackets each branch);
///    the guards auto_sync itself wrapped around flags are not the author's.
/// A full barrier is spelt as the front end's barrier_all: every pipe of the core hands a
/// flag to a hub pipe (M on the Cube core, S on the Vector core) and back, on the highest
/// event id auto_sync left free for those pairs (UserError "auto-sync-ids" when none is).
ir::Stmt original_barriers(const ir::Stmt& body, ir::CoreKind core, const ChipConfig& chip,
                           const ir::Loc& scope_loc);

}  // namespace tilepipe::passes

// Where a program's control flow or addresses depend on the values of its GM tensors: the
// statements whose time changes with the data (gathers, top-k indices, sequence lengths
// read as trip counts, block tables). A static analysis of the IR, so a report can say that
// its time holds for the input values it ran on only.
#pragma once

#include <string>
#include <vector>

#include "tilepipe/ir.h"

namespace tilepipe::ir {

/// One statement whose timing depends on the values of a GM tensor the host passes.
struct DataUse {
  std::string tensor;  // the kernel parameter whose values flow there
  std::string use;     // "loop bound", "branch" or "address"
  Loc loc;             // the statement
};

/// Every (tensor, use, statement line) of `p`, sorted by file, line, tensor and use, each
/// once. A value depends on a tensor when it is read from it (ir::Load of the tensor, or of
/// an on-chip buffer or workspace its values reach through copies, tile ops, reductions and
/// gemms), or computed from such a value (a binding, LetStmt). Its uses: a loop's begin or
/// end, an if's condition, the start of a region a statement reads or writes, the index of
/// an element the scalar unit reads. Empty: the program's time does not depend on the
/// values of its inputs.
std::vector<DataUse> data_dependence(const Program& p);

}  // namespace tilepipe::ir

// The Cube/Vector split and the cross-core pipeline (cv_split.h). Three steps over the
// unscoped program: split UB rows between the vector cores (cv_split_rows.cc), plan the
// crossings and the pipelines (workspaces, flag ids, stages, versions; cv_split_plan.cc),
// then emit one scope per core kind (cv_split_emit.cc); cv_split_analysis.cc says what runs
// where (cv_split_internal.h).
#include "passes/cv_split.h"

#include <fmt/format.h>

#include "passes/cv_split_internal.h"

namespace tilepipe::passes {

using namespace ir;
using namespace cv_split_detail;

Program cv_split(const Program& p, const ChipConfig& chip, const PassOptions& o) {
  auto u = check_unscoped(p);
  if (!u.any) return p;
  const StmtNode* conflict = nullptr;
  auto handoffs = find_handoffs(p.body, &conflict);
  if (u.vid || !handoffs.empty()) {
    // The author's own split (the original's automatic form): vid gives each vector core
    // its rows, GM tensors carry the tiles between the cores; the split keeps both and
    // adds the flags.
    const StmtNode* crossing = nullptr;
    for_leaves(p.body, [&](const Stmt& s) {
      if (!crossing && is_crossing(s)) crossing = s.get();
    });
    if (crossing)
      fail(crossing->loc,
           fmt::format("Cube <-> Vector copy in a kernel that {}",
                       u.vid ? "uses vid (vid in unscoped code: the split gives each vector core "
                               "its rows for such copies)"
                             : "hands tiles between the cores through its own GM tensors"),
           "write the kernel in one form: copies between L0C / UB / L1 and whole tiles, or GM "
           "workspaces and vid slicing");
    if (conflict)
      fail(conflict->loc,
           "a GM tensor is written by both the Cube and the Vector code and read across them",
           "give each direction its own tensor");
    return Splitter(p, chip, o, chip.aiv_per_core, std::move(handoffs)).run();
  }
  const Program split = split_rows(p, chip.aiv_per_core);
  return Splitter(split, chip, o, chip.aiv_per_core).run();
}

}  // namespace tilepipe::passes

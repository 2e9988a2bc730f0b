// GM <-> UB copies that change dtype (copy_cast.h).
#include "passes/copy_cast.h"

#include <fmt/format.h>

#include <set>

#include "passes/dependence.h"
#include "passes/rewrite.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

/// A copy between GM and UB that changes dtype.
bool casting(const CopyStmt& c) {
  const Scope a = c.src.buffer->scope, b = c.dst.buffer->scope;
  return c.src.buffer->dtype != c.dst.buffer->dtype &&
         ((a == Scope::GM && b == Scope::UB) || (a == Scope::UB && b == Scope::GM));
}

class Pass : public ExpandInPlace {
 public:
  explicit Pass(const Program& p) : names_(buffer_names(p)) {}

 private:
  bool expand(const Stmt& s, std::vector<Stmt>& out) override {
    auto* copy = std::get_if<CopyStmt>(&s->node);
    if (!copy || !casting(*copy)) return false;
    split(*copy, s->loc, out);
    return true;
  }

  void split(const CopyStmt& c, const Loc& loc, std::vector<Stmt>& out) {
    const bool in = c.src.buffer->scope == Scope::GM;
    const Region& ub = in ? c.dst : c.src;
    const DType dt = in ? c.src.buffer->dtype : c.dst.buffer->dtype;
    std::string name;
    for (int k = 1; name.empty() || names_.count(name); ++k) name = fmt::format("cast_tmp{}", k);
    names_.insert(name);
    Buffer t = make_buffer(name, Scope::UB, dt, ub.extent, TensorRole::None, loc);
    out.push_back(make_stmt(AllocStmt{t}, loc));
    CopyStmt move = c;
    TileOpStmt cast;
    cast.op = TileOpKind::Cast;
    if (in) {
      move.dst = full_region(t);
      cast.dst = c.dst;
      cast.srcs = {full_region(t)};
      out.push_back(make_stmt(std::move(move), loc));
      order(Pipe::MTE2, Pipe::V, loc, out);
      out.push_back(make_stmt(std::move(cast), loc));
    } else {
      move.src = full_region(t);
      cast.dst = full_region(t);
      cast.srcs = {c.src};
      out.push_back(make_stmt(std::move(cast), loc));
      order(Pipe::V, Pipe::MTE3, loc, out);
      out.push_back(make_stmt(std::move(move), loc));
    }
  }

  /// In hand-synced code, the second statement waits for the first.
  void order(Pipe from, Pipe to, const Loc& loc, std::vector<Stmt>& out) const {
    if (!hand_) return;
    out.push_back(make_stmt(SetFlagStmt{from, to, make_int(kBarrierEventId, loc)}, loc));
    out.push_back(make_stmt(WaitFlagStmt{from, to, make_int(kBarrierEventId, loc)}, loc));
  }

  std::set<std::string> names_;
};

}  // namespace

Program copy_cast(const Program& p, const ChipConfig&, const PassOptions&) {
  Program out = p;
  out.body = Pass(p).mutate(p.body);
  return out;
}

}  // namespace tilepipe::passes

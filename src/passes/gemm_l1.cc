// Gemms on L1 operands, staged through L0A / L0B (gemm_l1.h).
#include "passes/gemm_l1.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>

#include "passes/dependence.h"
#include "passes/rewrite.h"
#include "tilepipe/ir_range.h"

namespace tilepipe::passes {

using namespace ir;

namespace {

/// The original's gemm_v0 library: K chunks of kL0Size elements (128 by default), two L0 slots.
constexpr int64_t kLibraryK = 128;

/// Intra-core flags or barriers on a Cube pipe (MTE1, M, FIX) outside scopes.
bool unscoped_cube_sync(const Stmt& body) {
  struct V : StmtVisitor {
    bool found = false;
    static bool cube(Pipe p) { return p == Pipe::MTE1 || p == Pipe::M || p == Pipe::FIX; }
    void visit_scope(const ScopeStmt&, const StmtNode&) override {}
    void visit_set_flag(const SetFlagStmt& f, const StmtNode&) override {
      found |= cube(f.src) || cube(f.dst);
    }
    void visit_wait_flag(const WaitFlagStmt& f, const StmtNode&) override {
      found |= cube(f.src) || cube(f.dst);
    }
    void visit_barrier(const PipeBarrierStmt& b, const StmtNode&) override {
      found |= cube(b.pipe);
    }
  } v;
  v.visit(body);
  return v.found;
}

/// r restricted to [start, start + ext) along dimension `dim` (0: rows, 1: columns) of its
/// last two.
Region sub(const Region& r, int dim, int64_t start, int64_t ext) {
  Region out = r;
  const size_t d = r.extent.size() - 2 + static_cast<size_t>(dim);
  if (start) out.start[d] = fold(BinOp::Add, r.start[d], make_int(start));
  out.extent[d] = ext;
  return out;
}

class Pass : public ExpandInPlace {
 public:
  Pass(const Program& p, const ChipConfig& chip, const PassOptions& o)
      : chip_(chip), o_(o), names_(buffer_names(p)) {
    hand_ = o.original_split && unscoped_cube_sync(p.body);
  }

 private:
  bool expand(const Stmt& s, std::vector<Stmt>& out) override {
    auto* g = std::get_if<GemmL1Stmt>(&s->node);
    if (g) expand(*g, s->loc, out);
    return g != nullptr;
  }

  struct Shape {
    int64_t m, k, n;
  };
  static Shape shape(const GemmL1Stmt& g) {
    const auto a = g.a.squeezed(), b = g.b.squeezed();
    return {g.transpose_a ? a[1] : a[0], g.transpose_a ? a[0] : a[1], g.transpose_b ? b[0] : b[1]};
  }

  /// An operand, its L0 memory and which of its last two dimensions is K.
  struct Side {
    const Region& r;
    Scope l0;
    int k_dim;
  };
  static std::array<Side, 2> sides(const GemmL1Stmt& g) {
    return {Side{g.a, Scope::L0A, g.transpose_a ? 0 : 1},
            Side{g.b, Scope::L0B, g.transpose_b ? 1 : 0}};
  }

  /// An MTE1 copy of `part` into `dst`; returns dst.
  static Region copy(const Region& part, const Region& dst, const Loc& loc,
                     std::vector<Stmt>& out) {
    out.push_back(make_stmt(CopyStmt{part, dst, false, std::nullopt}, loc));
    return dst;
  }

  void expand(const GemmL1Stmt& g, const Loc& loc, std::vector<Stmt>& out) {
    if (g.a.buffer->scope != Scope::L1 && g.b.buffer->scope != Scope::L1)
      mmad(g, g.a, g.b, g.init, loc, out);  // nothing to stage
    else if (hand_ || !o_.auto_sync)
      library(g, loc, out);
    else
      automatic(g, loc, out);
  }

  /// Where auto_sync places the flags: the author's K chunk when it divides K; else, from K,
  /// halve while the chunks stay whole fractals and a staging tile is over its budget (a
  /// quarter of the L0 memory).
  void automatic(const GemmL1Stmt& g, const Loc& loc, std::vector<Stmt>& out) {
    const auto [m, k, n] = shape(g);
    const int64_t eb = dtype_bytes(g.a.buffer->dtype);
    const int64_t kf = 32 / eb;  // a fractal's K: 16 half, 8 float, 32 int8 elements
    const int64_t budget_a = chip_.l0a.usable / 4, budget_b = chip_.l0b.usable / 4;
    const bool authors = g.k_chunk && k % g.k_chunk == 0;  // the author's kL0Size, as given
    int64_t kc = authors ? std::min(k, g.k_chunk) : k;
    while (!authors && kc % 2 == 0 && (kc / 2) % kf == 0 &&
           (m * kc * eb > budget_a || n * kc * eb > budget_b))
      kc /= 2;
    for (int64_t i = 0; i < k / kc; ++i) {
      Region ops[2];
      for (int j = 0; j < 2; ++j) {
        const Side side = sides(g)[j];
        const Region part = k == kc ? side.r : sub(side.r, side.k_dim, i * kc, kc);
        ops[j] = side.r.buffer->scope != Scope::L1
                     ? part
                     : copy(part,
                            full_region(
                                staging(side.l0, part.squeezed(), side.r.buffer->dtype, loc, out)),
                            loc, out);
      }
      mmad(g, ops[0], ops[1], i == 0 ? g.init : make_int(0), loc, out);
    }
  }

  /// Where the author syncs: the original's library with its own flags.
  void library(const GemmL1Stmt& g, const Loc& loc, std::vector<Stmt>& out) {
    const int64_t k = shape(g).k;
    const int64_t kl0 = g.k_chunk ? g.k_chunk : kLibraryK;
    const int64_t chunks = (k + kl0 - 1) / kl0;
    const int64_t slots = std::min<int64_t>(2, chunks);
    auto flag = [&](bool set, Pipe src, Pipe dst, int64_t id) {
      if (set)
        out.push_back(make_stmt(SetFlagStmt{src, dst, make_int(id)}, loc));
      else
        out.push_back(make_stmt(WaitFlagStmt{src, dst, make_int(id)}, loc));
    };
    auto pair = [&](Pipe src, Pipe dst) {
      flag(true, src, dst, 0);
      flag(false, src, dst, 0);
    };
    pair(Pipe::MTE2, Pipe::MTE1);
    pair(Pipe::FIX, Pipe::M);
    flag(true, Pipe::M, Pipe::MTE1, 0);
    flag(true, Pipe::M, Pipe::MTE1, 1);
    for (int64_t i = 0; i < chunks; ++i) {
      const int64_t pp = i & 1, k0 = i * kl0, kn = std::min(kl0, k - k0);
      flag(false, Pipe::M, Pipe::MTE1, pp);
      Region ops[2];
      for (int j = 0; j < 2; ++j) {
        const Side side = sides(g)[j];
        const Region part = sub(side.r, side.k_dim, k0, kn);
        if (side.r.buffer->scope != Scope::L1) {
          ops[j] = part;
          continue;
        }
        const std::vector<int64_t> tile = part.squeezed();
        std::vector<int64_t> slots_shape = {slots, tile[0], tile[1]};
        slots_shape[1 + side.k_dim] = std::min(k, kl0);
        const Buffer st = staging(side.l0, slots_shape, side.r.buffer->dtype, loc, out);
        ops[j] =
            copy(part, Region{st, {make_int(pp), make_int(0), make_int(0)}, {1, tile[0], tile[1]}},
                 loc, out);
      }
      flag(true, Pipe::MTE1, Pipe::M, pp);
      flag(false, Pipe::MTE1, Pipe::M, pp);
      out.push_back(make_stmt(PipeBarrierStmt{Pipe::M}, loc));
      mmad(g, ops[0], ops[1], i == 0 ? g.init : make_int(0), loc, out);
      flag(true, Pipe::M, Pipe::MTE1, pp);
    }
    flag(false, Pipe::M, Pipe::MTE1, 0);
    flag(false, Pipe::M, Pipe::MTE1, 1);
    pair(Pipe::MTE1, Pipe::MTE2);
    pair(Pipe::M, Pipe::FIX);
  }

  /// One mmad; a run-time init: an `if` choosing the initialising or the accumulating one.
  static void mmad(const GemmL1Stmt& g, const Region& a, const Region& b, const Expr& init,
                   const Loc& loc, std::vector<Stmt>& out) {
    auto gemm = [&](bool i) {
      return make_stmt(GemmStmt{a, b, g.c, g.transpose_a, g.transpose_b, i}, loc);
    };
    if (auto c = as_const(init)) {
      out.push_back(gemm(*c != 0));
      return;
    }
    out.push_back(make_stmt(IfStmt{init, gemm(true), gemm(false)}, loc));
  }

  /// The staging tile of one scope, shape and dtype for the gemms at `loc`: allocated (here)
  /// by the first of them.
  Buffer staging(Scope scope, const std::vector<int64_t>& shape, DType dt, const Loc& loc,
                 std::vector<Stmt>& out) {
    const auto key = std::tuple{scope, shape, dt, loc.file, loc.line, loc.column};
    auto it = staged_.find(key);
    if (it != staged_.end()) return it->second;
    const std::string base =
        fmt::format("gemm_{}_{}", scope == Scope::L0A ? "l0a" : "l0b", fmt::join(shape, "x"));
    std::string name = base;
    for (int k = 2; names_.count(name); ++k) name = fmt::format("{}_{}", base, k);
    names_.insert(name);
    Buffer b = make_buffer(name, scope, dt, shape, TensorRole::None, loc);
    out.push_back(make_stmt(AllocStmt{b}, loc));
    return staged_[key] = b;
  }

  const ChipConfig& chip_;
  const PassOptions& o_;
  std::set<std::string> names_;
  std::map<std::tuple<Scope, std::vector<int64_t>, DType, std::string, int, int>, Buffer> staged_;
};

}  // namespace

Program gemm_l1(const Program& p, const ChipConfig& chip, const PassOptions& o) {
  Program out = p;
  out.body = Pass(p, chip, o).mutate(p.body);
  return out;
}

}  // namespace tilepipe::passes

// Lowering: a verified tile program -> one compact instruction program per core kind.
//
// The lowered form is not an unrolled instruction list (an FA run issues tens of millions of
// instructions): it keeps loops and ifs as control flow that the simulated scalar unit
// walks, and each leaf is an instruction template whose operand addresses are compiled
// integer expressions over loop variables, cid and vid. The scalar unit instantiates a
// template into a concrete instruction (src/sim) when it issues it, exactly as the
// hardware's scalar unit computes addresses and dispatches to the pipes.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tilepipe/chip.h"
#include "tilepipe/ir.h"

namespace tilepipe::lower {

/// What evaluates the scalar loads of an expression (the simulated scalar unit: it
/// bounds-checks, charges the read and returns the element). `index` has one value per
/// dimension of load site `site` (CoreProgram::loads).
class ScalarMem {
 public:
  virtual ~ScalarMem() = default;
  virtual int64_t load(int site, const int64_t* index) const = 0;
};

/// Thrown by CExpr when an integer division or modulo divides by zero at run time; the
/// simulator reports it at the instruction or loop being evaluated (`division-by-zero`).
struct DivisionByZero {};

/// An integer expression compiled to postfix over a slot array (slot 0 = cid, 1 = vid,
/// then loop variables). A Load pops its site's rank indices and pushes the element.
struct CExpr {
  enum Kind : uint8_t { Const, Slot, Bin, Sel, Load, Leaf };
  struct Op {
    Kind kind;
    ir::BinOp bin;
    int64_t value;  // constant, slot index, load site or (Leaf) index into `leaves`
  };
  std::vector<Op> ops;  // the postfix program: the reference semantics
  bool has_load = false;

  /// A Load op packs its index count (high 32 bits) and load site (low 32 bits) in `value`.
  static Op load_op(int rank, int64_t site) {
    return {Load, ir::BinOp::Add, (static_cast<int64_t>(rank) << 32) | site};
  }
  static int load_rank(const Op& o) { return static_cast<int>(o.value >> 32); }
  static int load_site(const Op& o) { return static_cast<int>(o.value & 0xffffffff); }

  /// The common shape of index expressions, found once (finalize) so the scalar unit of the
  /// simulator does not interpret them: c0 + sum(coef * slot), then a short chain of
  /// operations with constants (ring-buffer slots `(k * ns + i) % nb`, bounds
  /// `min(ns, n - k * ns)`, tests `i % ci == 0`).
  struct Post {
    ir::BinOp op;
    bool reversed;  // constant OP value instead of value OP constant
    int64_t value;
    bool pow2 = false;  // value is a power of two: a modulo is a mask, a division a shift
  };
  /// Posts of the common shapes as one uniform step each, v = ((v >> shift) & mask) * mul +
  /// add: a modulo or floor division by a power of two, with the additions, subtractions
  /// and multiplications by constants that follow it folded in. No branch per post.
  struct Step {
    int shift = 0;
    int64_t mask = -1, mul = 1, add = 0;
  };
  struct Affine {
    int nterms = 0, nposts = 0;
    std::array<int, 3> term_slot{};
    std::array<int64_t, 3> term_coef{};
    int64_t c0 = 0;
    std::array<Post, 4> posts{};
    int nsteps = -1;  // the posts as `steps`, or -1 where one is of another kind
    std::array<Step, 4> steps{};
    int64_t eval(const int64_t* slots) const {
      int64_t v = c0;
      for (int i = 0; i < nterms; ++i)
        v += term_coef[static_cast<size_t>(i)] * slots[term_slot[static_cast<size_t>(i)]];
      if (nsteps >= 0) {
        for (int i = 0; i < nsteps; ++i) {
          const Step& s = steps[static_cast<size_t>(i)];
          // Unsigned: wraps where the posts' own arithmetic would.
          v = static_cast<int64_t>(static_cast<uint64_t>((v >> s.shift) & s.mask) *
                                       static_cast<uint64_t>(s.mul) +
                                   static_cast<uint64_t>(s.add));
        }
        return v;
      }
      for (int i = 0; i < nposts; ++i) {
        const Post& p = posts[static_cast<size_t>(i)];
        if (p.reversed) {
          if (v == 0 && (p.op == ir::BinOp::Div || p.op == ir::BinOp::Mod)) [[unlikely]]
            throw DivisionByZero{};
          v = ir::eval_binop(p.op, p.value, v);
        } else if (p.op == ir::BinOp::Mod)  // ring-buffer slots and tile indices, without a call
          v = p.pow2 ? v & (p.value - 1) : ir::floor_mod(v, p.value);
        else if (p.op == ir::BinOp::Div)  // an arithmetic shift floors, as floor_div does
          v = p.pow2 ? v >> std::countr_zero(static_cast<uint64_t>(p.value))
                     : ir::floor_div(v, p.value);
        else
          v = ir::eval_binop(p.op, v, p.value);
      }
      return v;
    }
  };
  /// Affine: the whole expression is `aff`. Stack: `folded` is the postfix program with each
  /// maximal affine part one Leaf (`min(a, b)` of two affine sides is three ops, not ten).
  enum class Form : uint8_t { Stack, Affine };
  Form form = Form::Stack;
  Affine aff;
  std::vector<Op> folded;
  std::vector<Affine> leaves;

  /// Sets `form`, `aff`, `folded` and `leaves` from `ops`.
  void finalize();
  /// `mem` is required when has_load.
  int64_t eval(const int64_t* slots, const ScalarMem* mem = nullptr) const {
    if (form == Form::Stack) return run(folded.empty() ? ops : folded, slots, mem);
    return aff.eval(slots);
  }
  /// The reference semantics: the postfix program `ops`, interpreted.
  int64_t eval_stack(const int64_t* slots, const ScalarMem* mem) const {
    return run(ops, slots, mem);
  }
  bool is_const() const { return ops.size() == 1 && ops[0].kind == Const; }

 private:
  int64_t run(const std::vector<Op>& program, const int64_t* slots, const ScalarMem* mem) const;
};

inline constexpr int kSlotCid = 0;
inline constexpr int kSlotVid = 1;
/// Strided dimensions of an access's walk: what the executor, the cost model and the race
/// detector iterate (their loops are unrolled for this many).
inline constexpr int kMaxRank = 4;
/// Dimensions of a buffer. A region of a buffer of more than kMaxRank dimensions is walked
/// as at most kMaxRank strided dimensions (adjacent ones merged where the region spans them
/// contiguously); its starts stay per buffer dimension, so bounds checks stay exact.
inline constexpr int kMaxDims = 8;

/// Where an operand lives: a GM tensor (by index into LoweredProgram::gm) or a per-core
/// on-chip scope.
struct AccessTemplate {
  // What the simulator reads per instruction comes first (one cache line with the walk's
  // extents): memory, byte range and element count.
  ir::Scope scope = ir::Scope::GM;
  int gm_index = -1;  // GM only
  ir::DType dtype = ir::DType::F32;
  int elem_bytes = 4;
  int memory = -1;           // one number per memory: gm_index in GM, 1000 + scope on chip
  int64_t base_bytes = 0;    // on-chip: allocation offset within the core's scope memory
  int64_t num_elements = 1;  // product of the extents
  int64_t span = 1;          // elements from the first touched to the last, inclusive
  // The walk: the region as `rank` strided dimensions, outermost first, in the buffer's
  // row-major order. For a buffer of rank <= kMaxRank these are the buffer's dimensions.
  int rank = 0;
  // The buffer dimensions whose start the simulator evaluates per instruction, in order;
  // the others start at an in-bounds constant, folded into const_off (elements).
  int nvar = 0;
  std::array<int8_t, kMaxDims> var_dim{};
  int64_t const_off = 0;
  std::array<int64_t, kMaxRank> extent{};  // static extents, trailing dims first-class
  std::array<int64_t, kMaxRank> stride{};  // element strides of the underlying buffer
  // The buffer's own dimensions (`dims` of them): starts, bounds checks, scalar loads.
  int dims = 0;
  std::array<int64_t, kMaxDims> dim{};         // buffer dimension sizes
  std::array<int64_t, kMaxDims> dim_extent{};  // the region's extent in each
  std::array<int64_t, kMaxDims> dim_stride{};  // element strides
  // One per dimension, on the heap: read per instruction only where a start is not an
  // affine StartCode (src/sim), while kMaxDims of them in place would double the size of
  // every OpTemplate (five accesses) that the issue loop walks.
  std::vector<CExpr> start;
  const ir::BufferNode* buffer = nullptr;  // for diagnostics
  int64_t elements() const { return num_elements; }
};

enum class Opcode : uint8_t {
  Copy,       // any pipe; direction from the scopes
  Mmad,       // M
  Vec,        // V: tile op
  Reduce,     // V
  SetFlag,    // intra-core, on the source pipe
  WaitFlag,   // intra-core, on the destination pipe
  Barrier,    // pipe_barrier
  SetCross,   // cross-core, on a pipe
  WaitCross,  // cross-core, blocks the core's issue
};
const char* to_string(Opcode op);
/// A synchronisation op (flags, barriers, cross-core flags): it moves no data.
inline bool is_sync(Opcode op) {
  return op == Opcode::SetFlag || op == Opcode::WaitFlag || op == Opcode::Barrier ||
         op == Opcode::SetCross || op == Opcode::WaitCross;
}

/// One instruction template. Operand 0 is the destination where there is one.
struct OpTemplate {
  // What the simulator's issue loop reads for every instruction comes first (one cache
  // line): the operation, its pipe, its operand count and the flag fields.
  Opcode op;
  ir::Pipe pipe;
  ir::Pipe flag_src = ir::Pipe::S, flag_dst = ir::Pipe::S;
  int num_acc = 0;
  /// Mutation testing (`tilepipe check --drop-sync`, kernels/mutate.h): a dropped set or
  /// barrier is not issued; a dropped wait still consumes its set (flag counts stay
  /// balanced) but neither waits for it nor orders anything after it.
  bool dropped = false;
  enum class ScalarKind : uint8_t { None, Imm, Expr, UbRead } scalar_kind = ScalarKind::None;
  // Computes (transitively) what a scalar load reads: runs in timing mode too
  bool materialise = false;
  std::array<AccessTemplate, 4> acc;
  // Vec / Reduce
  ir::TileOpKind tile_op = ir::TileOpKind::Add;
  ir::CmpMode cmp = ir::CmpMode::EQ;
  ir::ReduceKind reduce = ir::ReduceKind::Sum;
  int reduce_dim = -1;  // normalised: 1 = along columns (per row), 0 = along rows
  bool reduce_clear = true;
  std::array<int64_t, 3> attrs{};  // TileOpStmt::attrs
  double scalar_imm = 0;
  CExpr scalar_expr;
  AccessTemplate scalar_read;  // UbRead
  // Copy / Mmad
  bool transpose = false;
  bool atomic_add = false;  // Copy into GM: dst += src
  bool relu = false;        // Copy out of L0C: max(0, x) (FixPipe)
  bool transpose_a = false, transpose_b = false, init = true;
  int64_t m = 0, n = 0, k = 0;  // Mmad dims, Copy/Vec matrix view [m rows, n cols]
  CExpr flag_id;                // flags
  // SetCross: 2 = the AIC and the AIVs of its AI core; ir::kSyncAllMode = every core of the
  // launch, all waiting for all (T.sync_all; docs/simulator.md "Flags")
  int cross_mode = 2;
  ir::Loc loc;
  std::string name;  // e.g. "copy GM->L1", "tile.exp" (trace event names)
};

/// Control flow around instruction templates, walked by the simulated scalar unit.
struct Block;
struct Item {
  enum Kind : uint8_t { Instr, Loop, If, Let } kind = Instr;
  int instr = -1;  // index into CoreProgram::instrs
  // Loop (Let: `begin` evaluated once into `slot`; no body)
  int slot = -1;
  CExpr begin, end;
  int64_t step = 1;
  // If
  CExpr cond;
  std::shared_ptr<Block> body, else_body;
  ir::Loc loc;
};
struct Block {
  std::vector<Item> items;
};

/// A scalar load of one tensor element: the tensor's layout (start unused, extents 1) and
/// a pseudo-instruction on S naming it in diagnostics and race reports.
struct LoadSite {
  AccessTemplate acc;
  OpTemplate op;
};

/// What one core kind (AIC or AIV) runs.
struct CoreProgram {
  ir::CoreKind kind;
  std::vector<OpTemplate> instrs;
  std::vector<LoadSite> loads;
  Block body;
  int num_slots = 2;
  bool lets = false;                     // has Let items (fast-forward replays loops without them)
  std::array<int64_t, 6> scope_bytes{};  // bytes allocated per ir::Scope on this core
  bool empty() const { return instrs.empty(); }
};

struct GmTensor {
  ir::Buffer buffer;
  bool workspace = false;
  bool scalar_read = false;  // read by scalar loads (directly or via UB): timing mode keeps values
};

struct LoweredProgram {
  std::string name;
  int64_t block_num = 1;
  std::vector<GmTensor> gm;
  std::vector<ir::Knob> knobs;  // the kernel's tuning knobs (ir::Program::knobs)
  CoreProgram aic{ir::CoreKind::C, {}, {}, {}, 2, {}};
  CoreProgram aiv{ir::CoreKind::V, {}, {}, {}, 2, {}};
  /// Byte offset of every on-chip buffer within its core's scope memory, by buffer id: the
  /// pinned / planned ones (ir::Program::addresses) and the sequential layout of the rest.
  /// What `tilepipe emit` pins, so the NPU lays memory out as it was simulated.
  std::map<int, int64_t> addresses;
};

/// Lowers a program the verifier accepted. Throws UserError for constructs the lowering
/// cannot express (and names the fix).
LoweredProgram lower(const ir::Program& p, const ChipConfig& chip);

}  // namespace tilepipe::lower

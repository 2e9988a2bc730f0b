// Cost of one instruction = fixed start-up latency + work / throughput (hardware.md "Costs").
// Reads only ChipConfig; contains no kernel- or shape-specific terms.
#include <algorithm>
#include <cmath>

#include "instr.h"
#include "tilepipe/vec_modes.h"

namespace tilepipe::sim {

using ir::Pipe;
using ir::TileOpKind;

static double vector_repeats(const Instr& in, const ChipConfig& c) {
  int64_t bytes = 0;
  for (int i = 0; i < in.t->num_acc; ++i) bytes = std::max(bytes, in.acc[i].bytes());
  // A repeat processes repeat_bytes; a masked (partial) repeat costs a full one.
  return std::ceil(static_cast<double>(bytes) / c.vector_repeat_bytes);
}

static Cost vec_cost(const Instr& in, const ChipConfig& c) {
  double rep = vector_repeats(in, c);
  double elems_per_repeat =
      static_cast<double>(c.vector_repeat_bytes) / ir::dtype_bytes(in.acc[0].t->dtype);
  switch (in.t->tile_op) {
    case TileOpKind::Reinterpret:  // ReinterpretCast names the same bytes: no instruction
      return {0, 0};
    case TileOpKind::Cast: {  // one dependent Cast per step of the hardware's chain
      const auto steps =
          static_cast<double>(ir::cast_path(in.acc[1].t->dtype, in.acc[0].t->dtype).size());
      return {steps * rep * c.vector_simple_cycles_per_repeat, steps * c.vector_startup};
    }
    case TileOpKind::Add:
    case TileOpKind::Sub:
      return {rep * c.vector_simple_cycles_per_repeat, c.vector_startup_add};
    case TileOpKind::Mul:
    case TileOpKind::Axpy:
      return {rep * c.vector_simple_cycles_per_repeat, c.vector_startup_mul};
    case TileOpKind::Exp:
    case TileOpKind::Ln:
    case TileOpKind::Sqrt:
    case TileOpKind::Div: {
      double cpr = std::max(1.0, elems_per_repeat / c.vector_transcendental_elems_per_cycle);
      double start = in.t->tile_op == TileOpKind::Exp || in.t->tile_op == TileOpKind::Ln
                         ? c.vector_startup_exp
                         : c.vector_startup_div;
      return {rep * cpr, start};
    }
    case TileOpKind::Rsqrt:
    case TileOpKind::Reciprocal:
      return {rep * c.vector_simple_cycles_per_repeat, c.vector_startup_recip};
    // Library ops expanded into a sequence of vector instructions (range reduction and a
    // polynomial for sin / cos; exp(b ln a) with sign fix-ups for pow).
    case TileOpKind::Sin:
    case TileOpKind::Cos:
      return {rep * c.vector_sin_cos_ops * c.vector_simple_cycles_per_repeat, c.vector_startup_exp};
    case TileOpKind::Pow: {
      double cpr = std::max(1.0, elems_per_repeat / c.vector_transcendental_elems_per_cycle);
      return {rep * (2 * cpr + c.vector_pow_extra_ops * c.vector_simple_cycles_per_repeat),
              c.vector_startup_exp};
    }
    case TileOpKind::Sort: {
      // The library's Sort: Sort32 per 32-element block, then 4-way MrgSort passes over
      // every pair until one list is left, around simple passes counted in repeats of the
      // source: the index progression (1) and the copy of the pairs into dst (2); f16 keys
      // are sorted as f32, which doubles those and adds a cast in (2) and out (4): 12.
      const double len = static_cast<double>(in.acc[1].t->elements()), blocks = len / 32;
      double passes = 0;  // ceil(log4(blocks)), counted exactly
      for (double b = blocks; b > 1; b = std::ceil(b / 4)) ++passes;
      const double src_rep =
          std::ceil(static_cast<double>(in.acc[1].bytes()) / c.vector_repeat_bytes);
      const double extra = in.acc[1].t->dtype == ir::DType::F16 ? 12 : 3;
      return {blocks * c.vector_sort32_cycles_per_block +
                  passes * len / c.vector_mrgsort_elems_per_cycle +
                  extra * src_rep * c.vector_simple_cycles_per_repeat,
              c.vector_startup};
    }
    case TileOpKind::Sort32:  // one Sort32 repeat per 32-key block
      return {static_cast<double>(in.acc[1].t->elements()) / 32 * c.vector_sort32_cycles_per_block,
              c.vector_startup};
    case TileOpKind::MergeSort: {  // one MrgSort over every input pair
      double pairs = 0;
      for (int i = 1; i < in.t->num_acc; ++i)
        pairs += static_cast<double>(in.acc[static_cast<size_t>(i)].t->elements()) / 2;
      return {pairs / c.vector_mrgsort_elems_per_cycle, c.vector_startup};
    }
    case TileOpKind::Gatherb:  // one instruction of attrs[0] repeats (8 blocks each)
      return {static_cast<double>(in.t->attrs[0]) * c.vector_simple_cycles_per_repeat,
              c.vector_startup};
    default:
      return {rep * c.vector_simple_cycles_per_repeat, c.vector_startup};
  }
}

/// A reduction is lowered the cheaper of two ways (hardware.md anchor: a long float sum
/// costs 242 cycles as repeated whole-repeat reduces, 172 as a binary tree): repeated
/// reduces over every repeat, or a binary tree of elementwise max/add halving the rows
/// (each level a dependent op) down to one repeat per row, then one reduce per row.
/// Column reductions (dim 0) are elementwise trees over the rows.
static Cost reduce_cost(const Instr& in, const ChipConfig& c) {
  const auto& t = *in.t;
  const double rb = c.vector_repeat_bytes, eb = ir::dtype_bytes(in.acc[1].t->dtype);
  const double start =
      t.reduce == ir::ReduceKind::Sum ? c.vector_startup_reduce : c.vector_startup_reduce_max;
  const double level_start =
      t.reduce == ir::ReduceKind::Sum ? c.vector_startup_add : c.vector_startup;
  double rows = static_cast<double>(t.m), cols = static_cast<double>(t.n);
  if (t.reduce_dim == 0) std::swap(rows, cols);  // reduce along the rows of the transpose
  Cost tree{0, 0};
  double width = cols * eb;  // bytes per reduced line
  while (width > rb) {
    width = std::ceil(width / 2 / eb) * eb;
    tree.occupancy += std::ceil(rows * width / rb) * c.vector_simple_cycles_per_repeat;
    tree.latency += level_start;
  }
  if (t.reduce_dim == 0) {
    tree.occupancy += std::ceil(rows * width / rb) * c.vector_simple_cycles_per_repeat;
    tree.latency += start;
    return tree;
  }
  tree.occupancy += rows * c.vector_reduce_cycles_per_repeat;
  tree.latency += start;
  Cost flat{vector_repeats(in, c) * c.vector_reduce_cycles_per_repeat, start};
  return tree.occupancy + tree.latency < flat.occupancy + flat.latency ? tree : flat;
}

Cost instr_cost(const Instr& in, const ChipConfig& c) {
  const lower::OpTemplate& t = *in.t;
  // An element store is the scalar unit's: its time is charged at issue (issue_facts).
  if (t.pipe == Pipe::S) return {0, 0};
  switch (t.op) {
    case lower::Opcode::Copy: {
      double bytes = static_cast<double>(in.acc[1].bytes());
      switch (t.pipe) {
        case Pipe::MTE2:
          return {bytes / c.mte2_bw_l2, c.mte2_latency};
        case Pipe::MTE3:
          return {bytes / c.mte3_bw, c.mte3_latency};
        case Pipe::MTE1:
          return {bytes / (in.acc[0].t->scope == ir::Scope::L0A ? c.mte1_bw_l0a : c.mte1_bw_l0b),
                  c.mte1_latency};
        case Pipe::FIX:
          return {static_cast<double>(in.acc[0].bytes()) / c.fix_bw, c.fix_latency};
        default: {  // UB -> UB on V
          double rep = vector_repeats(in, c);
          return {rep * c.vector_simple_cycles_per_repeat, c.vector_startup};
        }
      }
    }
    case lower::Opcode::Mmad: {
      double fractals = std::ceil(t.m / 16.0) * std::ceil(t.n / 16.0) * std::ceil(t.k / 16.0);
      double rate = c.cube_fractals_per_cycle;
      ir::DType a = in.acc[1].t->dtype;
      if (a == ir::DType::I8) rate *= c.cube_int8_rate;
      if (a == ir::DType::F32) rate *= c.cube_fp32_rate;
      // Each instruction occupies the Cube for its fractals and a fixed part (the vendor's
      // Mmad formula, cube.instr_cycles): small mmads pay it per instruction, not per FLOP.
      return {fractals / rate + c.cube_instr_cycles, c.cube_head};
    }
    case lower::Opcode::Vec:
      return vec_cost(in, c);
    case lower::Opcode::Reduce:
      return reduce_cost(in, c);
    default:
      return {0, 0};  // flags and barriers: timing handled by the engine
  }
}

}  // namespace tilepipe::sim

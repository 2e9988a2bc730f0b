// Concrete instructions: an OpTemplate with its addresses resolved by the scalar unit.
// Shared by the engine (scheduling), the cost model (timing) and the executor (values).
#pragma once

#include <array>
#include <cstdint>

#include "tilepipe/chip.h"
#include "tilepipe/lower.h"

namespace tilepipe::sim {

/// A resolved operand: element offset into its memory plus the template's static shape.
struct Access {
  const lower::AccessTemplate* t = nullptr;
  uint8_t* mem = nullptr;  // functional mode: the buffer's first byte
  int64_t offset = 0;      // element offset of the first element within the buffer
  int64_t bytes() const { return t->elements() * ir::dtype_bytes(t->dtype); }
  int64_t span_elems() const;  // elements from the first to the last touched, inclusive
  /// Byte range [lo, hi) touched within the memory (GM tensor or core scope), for hazards
  /// and races.
  int64_t byte_lo() const { return t->base_bytes + offset * ir::dtype_bytes(t->dtype); }
  int64_t byte_hi() const {
    return t->base_bytes + (offset + span_elems()) * ir::dtype_bytes(t->dtype);
  }
};

struct Instr {
  const lower::OpTemplate* t = nullptr;
  std::array<Access, 4> acc{};
  Access scalar_read{};
  double scalar = 0;
  int64_t flag_id = 0;
  double issue = 0;  // cycle the scalar unit dispatched it
};

/// Occupancy (cycles the pipe is busy) and latency (extra cycles until the result is
/// visible) of one instruction. Parameters come from the chip config only.
struct Cost {
  double occupancy = 0;
  double latency = 0;
};
Cost instr_cost(const Instr& in, const ChipConfig& chip);

/// Applies the instruction's effect on memory (functional mode).
void execute(const Instr& in);

}  // namespace tilepipe::sim

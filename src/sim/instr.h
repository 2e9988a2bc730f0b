// Concrete instructions: an OpTemplate with its addresses resolved by the scalar unit.
// Shared by the engine (scheduling), the cost model (timing) and the executor (values).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "tilepipe/chip.h"
#include "tilepipe/lower.h"

namespace tilepipe::sim {

/// A resolved operand: element offset into its memory plus the template's static shape.
struct Access {
  const lower::AccessTemplate* t = nullptr;
  uint8_t* mem = nullptr;  // where values are kept: the buffer's first byte, set for execute
  int64_t offset = 0;      // element offset of the first element within the buffer
  int64_t bytes() const { return t->num_elements * t->elem_bytes; }
  int64_t span_elems() const { return t->span; }  // first to last touched, inclusive
  /// Byte range [lo, hi) touched within the memory (GM tensor or core scope), for hazards
  /// and races.
  int64_t byte_lo() const { return t->base_bytes + offset * t->elem_bytes; }
  int64_t byte_hi() const { return t->base_bytes + (offset + t->span) * t->elem_bytes; }
};

/// Calls f(byte_lo, byte_len, row) for each span of the access, in order. A span is one
/// innermost run of `row` bytes, or with Merge the consecutive runs that follow each other
/// in memory (whole rows of a tile): one call where there would be many.
template <bool Merge, class F>
void for_each_span(const Access& a, F&& f) {
  const auto& t = *a.t;
  const int64_t eb = t.elem_bytes;
  const int64_t row = t.rank ? t.extent[t.rank - 1] * t.stride[t.rank - 1] * eb : eb;
  int64_t run = row;
  int inner = std::max(0, t.rank - 1);  // dims [inner, rank) make one span
  // A dim joins the span where it continues it in memory, or has extent 1 (no offset).
  while (Merge && inner > 0 && (t.extent[inner - 1] == 1 || t.stride[inner - 1] * eb == run))
    run *= t.extent[--inner];
  if (inner == 0) {  // one span, as is every contiguous tile: no loops
    f(a.byte_lo(), run, row);
    return;
  }
  int64_t outer[3] = {1, 1, 1}, os[3] = {0, 0, 0};
  for (int d = 0; d < inner; ++d) {
    outer[3 - inner + d] = t.extent[d];
    os[3 - inner + d] = t.stride[d] * eb;
  }
  const int64_t base = a.byte_lo();
  for (int64_t i0 = 0; i0 < outer[0]; ++i0)
    for (int64_t i1 = 0; i1 < outer[1]; ++i1)
      for (int64_t i2 = 0; i2 < outer[2]; ++i2)
        f(base + i0 * os[0] + i1 * os[1] + i2 * os[2], run, row);
}

/// Calls f(byte_lo, byte_len) for each contiguous innermost run of the access, in order.
template <class F>
void for_each_run(const Access& a, F&& f) {
  for_each_span<false>(a, [&](int64_t lo, int64_t len, int64_t) { f(lo, len); });
}

struct Instr {  // two cache lines: one sits in a pipe queue per instruction in flight
  const lower::OpTemplate* t = nullptr;
  std::array<Access, 4> acc{};
  double scalar = 0;
  double issue = 0;      // cycle the scalar unit dispatched it
  int32_t flag_id = 0;   // checked against the chip's id range at issue
  int32_t s_clock = -1;  // race detection: snapshot of the scalar unit's clock at dispatch
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

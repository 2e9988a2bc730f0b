// The simulator of one A2/A3 die: 24 AIC + 48 AIV cores running a lowered program.
//
// Model (docs/simulator.md): per core a scalar unit walks the control flow and issues each
// instruction, paying an issue cost, into the in-order queue of its pipe. An instruction
// starts at max(issue time, pipe ready, flag it waits on, result of the previous write it
// reads on the same pipe) and ends after its cost from the chip config. Flags carry
// completion times between pipes (set fires when all earlier work of its pipe is done) and
// between cores (cross-core counting semaphores with a latency). Cores are cooperative
// tasks advanced in global time order; a core blocked on a flag yields. If every core is
// blocked, the run stops with a deadlock report naming each wait.
//
// Functional mode also moves and computes real values (fp16/bf16 storage with RNE, fp32
// accumulation in the cube); timing mode skips the values and is faster. Both produce the
// same cycle counts.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilepipe/chip.h"
#include "tilepipe/lower.h"

namespace tilepipe::sim {

enum class Mode { Timing, Functional };

/// GM tensor contents exchanged with the host, as logical row-major values.
using HostData = std::map<std::string, std::vector<double>>;

struct SimOptions {
  Mode mode = Mode::Functional;
  double max_cycles = 1e13;  // budget: a run past it stops with an error
};

struct PipeStats {
  double busy_cycles = 0;  // sum of occupancy
  int64_t instructions = 0;
};

struct CoreStats {
  std::string name;  // "core3.AIC", "core3.AIV0"
  int ai_core = 0;
  ir::CoreKind kind = ir::CoreKind::C;
  int vid = 0;
  double end_cycle = 0;
  std::array<PipeStats, ir::kNumPipes> pipes{};
};

struct SimResult {
  double cycles = 0;
  int64_t instructions = 0;
  std::vector<CoreStats> cores;  // 24 AIC then 48 AIV (only cores with work)
};

/// Runs `prog`. In functional mode `io` supplies every input tensor (missing = zeros) and
/// receives every GM tensor after the run. Throws UserError for run-time errors in the
/// program (out-of-range slice, flag misuse, deadlock, cycle budget).
SimResult simulate(const lower::LoweredProgram& prog, const ChipConfig& chip, HostData* io,
                   const SimOptions& opts = {});

}  // namespace tilepipe::sim

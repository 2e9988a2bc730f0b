// Chip description: one Ascend A2/A3 die as data. Every timing and capacity number the
// verifier, lowering and simulator use comes from here; nothing is hard-coded elsewhere.
// Loaded from configs/<name>.json, where each value carries its source and confidence.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilepipe/error.h"

namespace tilepipe {

/// A rejected config file: names the file, the key, what was expected and what was found.
class ConfigError : public InputError {
 public:
  explicit ConfigError(std::string message) : InputError("config", std::move(message)) {}
};

/// Capacity of one on-chip scope per core, in bytes.
struct ScopeCapacity {
  int64_t physical = 0;  // what the silicon has
  int64_t usable = 0;    // what kernels may allocate (the verifier checks this one)
};

struct ChipConfig {
  std::string name;  // "a2", "a3"

  // Die.
  int ai_cores = 24;            // each = 1 AIC (Cube) + 2 AIV (Vector)
  int aiv_per_core = 2;         // Vector cores per AI core
  double clock_mhz = 1850.0;    // cube clock = vector clock
  double launch_us = 0.0;       // fixed cost per kernel launch: the first blocks start after it
  double block_start_us = 0.0;  // a core starts its next block this long after the last ended

  // Per-core memories.
  ScopeCapacity l1, l0a, l0b, l0c, ub;
  int ub_align = 32;  // bytes; every UB operand
  int l1_align = 32;
  // Banks: hardware facts no cost reads yet (simulator.md "No bank conflicts").
  int l1_banks = 16;
  int ub_banks = 48;
  int ub_bank_groups = 16;  // a vector repeat costs max accesses to one group cycles

  // Synchronisation.
  int event_ids = 8;                // intra-core flag ids per (src, dst) pipe pair
  int cross_flag_ids = 16;          // cross-core flag ids per AI core
  int cross_flag_max = 15;          // 4-bit counter
  double cross_flag_latency = 300;  // cycles from set to visible on the peer core
  double flag_latency = 2;          // cycles from source pipe drain to flag visible

  // Scalar issue.
  double issue_cycles = 2;          // per issued instruction
  double scalar_op_cycles = 1;      // per scalar loop / address op
  double vector_mask_ops = 4;       // scalar mask writes around each vector compute op (count form)
  double scalar_load_cycles = 200;  // a scalar read of a GM element that misses the DCache
  int64_t scalar_dcache_bytes = 16384;  // the scalar unit's data cache, per AIC / AIV core
  int scalar_dcache_line = 64;          // bytes filled per miss
  int scalar_dcache_ways = 4;
  double scalar_dcache_hit_cycles = 1;  // a scalar read of a GM element that hits
  int pipe_queue_depth = 32;  // instructions a pipe holds before the scalar unit stalls on it

  // Cube (M pipe).
  double cube_head = 60;               // pipeline head per mmad
  double cube_instr_cycles = 21;       // Cube occupancy per mmad instruction besides its fractals
  double cube_fractals_per_cycle = 1;  // 16x16x16 fp16 fractals per cycle
  double cube_int8_rate = 2;           // int8 throughput relative to fp16/bf16
  double cube_fp32_rate = 0.25;        // fp32 throughput relative to fp16/bf16

  // Vector (V pipe): a repeat = vector_repeat_bytes.
  int vector_repeat_bytes = 256;
  int vector_max_repeats = 255;  // not read yet (simulator.md "No instruction splitting")
  double vector_startup = 10;    // default startup latency
  double vector_startup_add = 6;
  double vector_startup_mul = 7;
  double vector_startup_exp = 12;
  double vector_startup_div = 13;
  double vector_startup_reduce = 20;     // row sum
  double vector_startup_reduce_max = 8;  // row max
  double vector_startup_recip = 5;       // rsqrt, reciprocal
  double vector_simple_cycles_per_repeat = 1;
  double vector_transcendental_elems_per_cycle = 32;  // exp, ln, sqrt, div
  double vector_reduce_cycles_per_repeat = 7;
  double vector_sin_cos_ops = 20;   // vector instructions per repeat of sin / cos
  double vector_pow_extra_ops = 8;  // simple instructions per repeat of pow beyond exp, ln
  double vector_sort32_cycles_per_block = 32;  // Sort32: one 32-element block
  double vector_mrgsort_elems_per_cycle = 1;   // MrgSort output pairs per cycle

  // Data movement.
  double mte2_latency = 1400;    // first-byte latency GM -> L1/UB when HBM serves the data
  double mte2_latency_l2 = 300;  // first-byte latency when every byte hits in L2
  double mte2_bw_l2 = 100;       // bytes/cycle/core on an L2 hit
  double mte2_bw_hbm = 32;       // bytes/cycle/core from HBM
  double mte3_latency = 300;     // UB -> GM
  double mte3_bw = 64;           // bytes/cycle/core
  double mte1_latency = 30;
  double mte1_bw_l0a = 256;  // bytes/cycle
  double mte1_bw_l0b = 128;
  double fix_latency = 50;
  double fix_bw = 128;  // output bytes/cycle
  double hbm_bw = 850;  // bytes/cycle shared by the die
  double l2_bw = 2650;  // bytes/cycle aggregate L2 read
  int64_t l2_bytes = 192ll << 20;
  // 1: the kernel's inputs are resident in the L2 at the start (in argument order, each that
  // still fits whole), as after the warm-up calls of a benchmark; 0: the L2 starts empty.
  int l2_warm_inputs = 0;
  int64_t hbm_bytes = 64ll << 30;
  int dma_full_bw_align = 512;  // GM address alignment for full DMA efficiency
  double dma_misaligned_factor = 0.7;
  double dma_min_burst_bytes = 336;     // a contiguous GM run costs at least this many bytes
  double dma_nd2nz_efficiency = 0.937;  // GM -> L1 (ND -> NZ on the way) vs a plain copy

  /// Source and confidence of each key as written in the file ("key" -> "source [H]").
  std::map<std::string, std::string> sources;

  double us_per_cycle() const { return 1.0 / clock_mhz; }
  double launch_cycles() const { return launch_us * clock_mhz; }
  double block_start_cycles() const { return block_start_us * clock_mhz; }
};

/// Parses a chip config from JSON text; `origin` names the file in errors.
/// Throws ConfigError naming the key on a missing, mistyped, out-of-range or inconsistent value.
ChipConfig parse_chip_config(const std::string& json_text, const std::string& origin);

/// One numeric key of the chip config file, as the loader reads it.
struct ChipKey {
  std::string key;   // dotted path: "dma.mte2_latency", "memory.ub.banks"
  std::string unit;  // the unit the file must state
  bool integer = false;
  double lo = 0, hi = 0;  // the loader's range: lo < v (lo_open) or lo <= v, and v <= hi
  bool lo_open = true;
};

/// Every numeric key of a chip config, in file order.
std::vector<ChipKey> chip_config_keys();

/// Loads a chip by name ("a2", "a3") from the configs directory, or by path if `name_or_path`
/// ends in ".json". Throws ConfigError.
ChipConfig load_chip_config(const std::string& name_or_path);

/// The configs directory (chip configs by name, advice_rules.json): $TILEPIPE_CONFIG_DIR if
/// set; else <prefix>/share/tilepipe/configs of the install this library (or the running
/// binary) belongs to; else the source tree's configs/ (a build tree). Implemented in sim.
std::string config_dir();

/// The chip names load_chip_config accepts (the chip configs in config_dir()), sorted.
std::vector<std::string> chip_names();

/// The file `load_chip_config(name_or_path)` reads (the path itself, or the named config in
/// the configs directory); no check that it exists.
std::string chip_config_path(const std::string& name_or_path);

}  // namespace tilepipe

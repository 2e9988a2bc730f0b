// Sync mutation testing: the synchronisation ops of a lowered program (intra-core
// set_flag / wait_flag, pipe_barrier, cross-core set / wait), dropping some of them, and
// classifying what a functional check with race detection then finds (docs/cli.md,
// `tilepipe check --list-syncs / --drop-sync / --find-redundant`).
//
// Dropping means (lower::OpTemplate::dropped): a set or barrier is not issued; a wait still
// consumes its set, in the same FIFO order, so the flag counts stay balanced, but it neither
// waits nor orders anything after it. A dropped wait is therefore the same as deleting that
// set/wait hand-off; a dropped set usually leaves its wait blocked (a deadlock).
#pragma once

#include <string>
#include <vector>

#include "tilepipe/driver.h"

namespace tilepipe::driver {

struct SyncOp {
  int index = 0;  // position in list_syncs (AIC program order, then AIV)
  ir::CoreKind core = ir::CoreKind::C;
  int instr = -1;  // index into the core program's instrs
  lower::Opcode op = lower::Opcode::SetFlag;
  std::string kind;      // set_flag, wait_flag, pipe_barrier, set_cross_flag, wait_cross_flag
  std::string pipes;     // "MTE2->V" (flags), "V" (barrier), "FIX" (cross set), "S" (cross wait)
  std::string event_id;  // "3", or the id expression, e.g. "1 + loop@174 % 2"
  std::string source;    // DSL file:line
};

/// Every sync op of `p`, in a stable order: the AIC program's templates in program order,
/// then the AIV program's.
std::vector<SyncOp> list_syncs(const lower::LoweredProgram& p);

/// Compiles the kernel (passes included; no run) and lists its syncs.
std::vector<SyncOp> kernel_syncs(const KernelSource& k, const RunRequest& req,
                                 const ChipConfig& chip);

enum class DropOutcome {
  Redundant,  // no race, no deadlock, no error, outputs bit-identical to the unmutated run
  Race,       // the race detector reported an unordered conflicting access
  Deadlock,   // a wait blocked forever
  FlagError,  // another flag-protocol error (unmatched-flag, flag-double-set, cross-flag)
  Mismatch,   // no error reported, but the outputs differ: a hole in the race detector
  Error,      // any other run-time error (e.g. a slice out of range)
};
const char* to_string(DropOutcome o);

struct DropResult {
  std::vector<int> dropped;  // sync indices
  DropOutcome outcome = DropOutcome::Redundant;
  std::vector<Diagnostic> diagnostics;  // race / deadlock / error reports
  std::string mismatch;                 // Mismatch: first differing element
  double cycles = -1;                   // the mutated run, when it completed
  double saved_cycles = 0;              // baseline cycles - cycles (completed runs)
};

/// The unmutated functional check: throws SimFailure / UserError like run_kernel, and
/// ParamError when its result is wrong (a kernel must pass before syncs can be dropped).
RunReport baseline_check(const KernelSource& k, RunRequest req, const ChipConfig& chip);

/// Drops `which` (indices into `syncs`; ParamError when out of range) and runs the
/// functional check with race detection; compares outputs with `baseline` bit for bit.
DropResult drop_and_check(const KernelSource& k, RunRequest req, const ChipConfig& chip,
                          const std::vector<SyncOp>& syncs, const std::vector<int>& which,
                          const RunReport& baseline);

struct RedundantReport {
  std::vector<DropResult> single;  // one per sync, in index order
  /// Redundant syncs that can all go together (greedy, largest saving first), checked by
  /// one run dropping them all.
  DropResult combined;
};

/// Drops each sync on its own, then greedily combines the redundant ones.
RedundantReport find_redundant(const KernelSource& k, const RunRequest& req, const ChipConfig& chip,
                               const std::vector<SyncOp>& syncs, const RunReport& baseline);

}  // namespace tilepipe::driver

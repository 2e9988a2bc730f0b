// Flags: intra-core set_flag / wait_flag pipe pairs and ids, pipe barriers, cross-core flags.
#include <fmt/format.h>

#include <set>

#include "verify/verify_internal.h"

namespace tilepipe {

using namespace ir;

// The pairs of hardware.md "Synchronisation", and MTE2 <-> FIX: AscendC's HardEvent lists
// MTE2_FIX / FIX_MTE2 for A2 / A3 (SetFlag/WaitFlag (ISASI), CANN 8.x), and the original's
// examples order a FixPipe store to GM before an MTE2 load of it with them (opt_gdn).
bool legal_flag_pair(CoreKind k, Pipe s, Pipe d) {
  using P = Pipe;
  static const std::set<std::pair<P, P>> aic = {
      // hardware.md's AIC list without its MTE3 pairs: this model's AIC has no MTE3 pipe.
      {P::M, P::MTE1},    {P::M, P::MTE2},   {P::M, P::FIX},    {P::MTE1, P::M},
      {P::MTE1, P::MTE2}, {P::MTE1, P::FIX}, {P::MTE2, P::M},   {P::MTE2, P::MTE1},
      {P::FIX, P::M},     {P::FIX, P::MTE1}, {P::MTE2, P::FIX}, {P::FIX, P::MTE2}};
  static const std::set<std::pair<P, P>> aiv = {
      {P::S, P::V},    {P::V, P::S},    {P::S, P::MTE2},    {P::MTE2, P::S},
      {P::S, P::MTE3}, {P::MTE3, P::S}, {P::V, P::MTE2},    {P::MTE2, P::V},
      {P::V, P::MTE3}, {P::MTE3, P::V}, {P::MTE2, P::MTE3}, {P::MTE3, P::MTE2}};
  return (k == CoreKind::C ? aic : aiv).count({s, d}) > 0;
}

namespace verify_detail {

bool pipe_on(CoreKind k, Pipe p) {
  if (p == Pipe::S || p == Pipe::MTE2) return true;
  if (k == CoreKind::C) return p == Pipe::MTE1 || p == Pipe::M || p == Pipe::FIX;
  return p == Pipe::V || p == Pipe::MTE3;
}

void Verifier::event_id(const Expr& id, int limit, const Loc& loc, const char* what) {
  Interval iv = range(id);
  if (iv.lo < 0 || iv.hi >= limit) {
    error(loc, "flag-id",
          fmt::format("{} id {} may be {}; ids are 0..{}", what, print(id),
                      iv.lo < 0 ? iv.lo : iv.hi, limit - 1),
          "reuse ids of finished handshakes, or merge buffers that are released together");
  }
}

void Verifier::flag(Pipe src, Pipe dst, const Expr& id, const Loc& loc, const char* what) {
  if (!in_scope(loc, what)) return;
  if (!legal_flag_pair(*scope_, src, dst)) {
    error(loc, "flag-pipes",
          fmt::format("{} {}->{} is not a legal pipe pair on the {} core", what, to_string(src),
                      to_string(dst), *scope_ == CoreKind::C ? "Cube" : "Vector"),
          *scope_ == CoreKind::C
              ? "Cube pairs: M<->MTE1, M<->FIX, MTE1<->MTE2, MTE2<->FIX, MTE2->M, M->MTE2, "
                "FIX->MTE1, MTE1->FIX"
              : "Vector pairs: any two of S, V, MTE2, MTE3");
  }
  if (opts_.event_id_range) event_id(id, chip_.event_ids, loc, what);
}

void Verifier::check(const SetFlagStmt& n, const StmtNode& s) {
  flag(n.src, n.dst, n.event_id, s.loc, "set_flag");
}

void Verifier::check(const WaitFlagStmt& n, const StmtNode& s) {
  flag(n.src, n.dst, n.event_id, s.loc, "wait_flag");
}

void Verifier::check(const PipeBarrierStmt& n, const StmtNode& s) {
  if (!in_scope(s.loc, "pipe_barrier")) return;
  if (n.pipe == Pipe::S || !pipe_on(*scope_, n.pipe)) {
    error(s.loc, "flag-pipes",
          fmt::format("pipe_barrier({}) in scope {}: that pipe has no barrier on this core",
                      to_string(n.pipe), to_string(*scope_)),
          *scope_ == CoreKind::C ? "Cube barriers: MTE1, MTE2, M, FIX"
                                 : "Vector barriers: MTE2, V, MTE3");
  }
}

void Verifier::check(const SetCrossFlagStmt& n, const StmtNode& s) {
  if (!scope_) {
    error(s.loc, "cross-flag",
          "set_cross_flag outside a scope: cross-core flags go between a C and a V scope",
          "put it in scope_c (signals the AIVs) or scope_v (signals the AIC)");
    return;
  }
  if (!pipe_on(*scope_, n.pipe)) {
    error(s.loc, "cross-flag",
          fmt::format("set_cross_flag on pipe {}, which the {} core does not have",
                      to_string(n.pipe), *scope_ == CoreKind::C ? "Cube" : "Vector"),
          "set it on the pipe that wrote the data (FIX/MTE2 on Cube, MTE3/MTE2/V on Vector)");
  }
  if (n.mode != 2 && n.mode != kSyncAllMode) {
    error(s.loc, "cross-flag",
          fmt::format("set_cross_flag mode {} is not modelled; mode 2 (AIC <-> both AIVs of "
                      "one AI core) is, and T.sync_all's barrier of every core (mode {})",
                      n.mode, kSyncAllMode),
          "use mode 2, or T.sync_all() for a barrier across all cores");
  }
  event_id(n.flag_id, chip_.cross_flag_ids, s.loc, "set_cross_flag");
}

void Verifier::check(const WaitCrossFlagStmt& n, const StmtNode& s) {
  if (!scope_) {
    error(s.loc, "cross-flag",
          "wait_cross_flag outside a scope: cross-core flags go between a C and a V scope",
          "put it in scope_c or scope_v");
    return;
  }
  event_id(n.flag_id, chip_.cross_flag_ids, s.loc, "wait_cross_flag");
}

}  // namespace verify_detail

}  // namespace tilepipe

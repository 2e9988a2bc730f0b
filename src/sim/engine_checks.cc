// The engine's run-time errors and end-of-run checks (class Engine, engine.h): bounds,
// flag ids, the cycle and wall-clock budgets and the cancel flag; deadlocks and unmatched
// flags at a block's or the kernel's end; the physical invariants of every timed run.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <string>

#include "engine.h"

namespace tilepipe::sim {

void Engine::fail(const ir::Loc& loc, const std::string& kind, std::string msg, std::string hint) {
  throw UserError(Diagnostic{loc, kind, std::move(msg), {}, std::move(hint)});
}

std::string Engine::where(const Core& c) const {
  std::string s = c.stats.name;
  if (c.prog->num_slots > 2 || p_.block_num > 0) s += fmt::format(" (cid={})", c.slots[0]);
  return s;
}

void Engine::loop_values(const Core& c, std::vector<int64_t>& out) const {
  out.clear();
  out.push_back(c.slots[0]);
  for (const auto& f : c.stack)
    if (f.loop) {
      out.push_back(f.loop->loc.line);
      out.push_back(c.slots[static_cast<size_t>(f.loop->slot)]);
    }
}

std::string Engine::loop_state(const Core& c) const {
  std::vector<int64_t> v;
  loop_values(c, v);
  return loop_state_text(c.stats.name, v);
}

void Engine::slice_out_of_bounds(const Core& c, const lower::AccessTemplate& a,
                                 const lower::OpTemplate& t, int d, int64_t s) {
  fail(t.loc, "slice-bounds",
       fmt::format("{}: slice of '{}' dimension {} covers [{}, {}) but the dimension has {} "
                   "elements (at {})",
                   t.name, a.buffer->name, d, s, s + a.dim_extent[d], a.dim[d], loop_state(c)),
       "clamp the start or the loop bounds so every tile stays inside the buffer");
}

void Engine::bad_flag_id(const Core& c, const lower::OpTemplate& t, int64_t id) {
  fail(t.loc, "flag-id",
       fmt::format("{} id evaluates to {} (at {}); ids are 0..{}", t.name, id, loop_state(c),
                   flag_ids(t) - 1),
       "keep event ids inside the per-pipe-pair range");
}

void Engine::division_by_zero(const Core& c, const ir::Loc& loc) {
  fail(loc, "division-by-zero",
       fmt::format("an integer division or modulo by zero in an index, bound or condition (at {})",
                   loop_state(c)),
       "the divisor is 0 for these values of cid, vid and the loop variables: guard it (e.g. "
       "T.max(d, 1)) or correct the expression");
}

void Engine::interrupted(double t) {
  fail({}, "interrupted", fmt::format("simulation interrupted (Ctrl-C) at cycle {:.0f}", t), "");
}

/// The run's limits outside simulated time: the cancel flag, the wall-clock budget.
void Engine::check_limits(std::chrono::steady_clock::time_point started, double t) {
  if (cancelled()) interrupted(t);
  if (opts_.max_wall_s <= 0) return;
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (wall > opts_.max_wall_s)
    fail({}, "wall-budget",
         fmt::format("the simulation ran {:.1f} s of wall-clock time, past its budget of {:g} "
                     "s, at cycle {:.0f}",
                     wall, opts_.max_wall_s, t),
         "raise the budget (--max-wall-s), run a smaller shape, or use --mode timing");
}

void Engine::over_budget(const Core& c, const lower::OpTemplate& t, double end) {
  fail(t.loc, "cycle-budget",
       fmt::format("{}: {} would end at cycle {:.0f}, past the cycle budget of {:.0f}",
                   c.stats.name, t.name, end, opts_.max_cycles),
       "raise the budget (--max-cycles) or check for a loop that does not end");
}

/// Physical invariants of every timed run (docs/simulator.md, "Invariants"). The
/// tolerance absorbs floating-point summation only.
void Engine::check_invariants(const SimResult& r) const {
  const double span = r.cycles * (1 + 1e-9) + 1e-6;
  auto broken = [&](const std::string& what) {
    throw InvariantError(fmt::format(
        "simulator invariant violated: {} (run of {:.0f} cycles{})", what, r.cycles,
        r.fast_forward.jumps ? fmt::format(", {} fast-forward jump(s)", r.fast_forward.jumps)
                             : ""));
  };
  for (const CoreStats& c : r.cores) {
    for (int p = 0; p < kPipes; ++p) {
      const PipeStats& st = c.pipes[static_cast<size_t>(p)];
      const char* pipe = ir::to_string(static_cast<Pipe>(p));
      // Roofline: no pipe does more work than the run has cycles.
      if (st.busy_cycles > span)
        broken(fmt::format("roofline: {} {} busy {:.0f} cycles > the run's span", c.name, pipe,
                           st.busy_cycles));
      if (static_cast<Pipe>(p) != Pipe::S &&
          st.busy_cycles + st.wait_flag_cycles + st.wait_dep_cycles > span)
        broken(
            fmt::format("pipe time: {} {} busy + wait-flag + wait-dep = {:.0f} + {:.0f} + "
                        "{:.0f} cycles > the run's span",
                        c.name, pipe, st.busy_cycles, st.wait_flag_cycles, st.wait_dep_cycles));
    }
  }
  // The die's shared memory system: HBM and L2 bytes at most at their peak rates.
  if (r.gm_bytes_hbm / chip_.hbm_bw > span)
    broken(fmt::format("roofline: HBM moved {:.0f} bytes, more than {:.0f} B/cycle allows",
                       r.gm_bytes_hbm, chip_.hbm_bw));
  if (r.gm_bytes_l2 / chip_.l2_bw > span)
    broken(fmt::format("roofline: L2 served {:.0f} bytes, more than {:.0f} B/cycle allows",
                       r.gm_bytes_l2, chip_.l2_bw));
}

std::string Engine::flag_state(const LastSet& s) const {
  if (s.time < 0) return "never set";
  return fmt::format("last set at cycle {:.0f} ({})", s.time, s.loc->str());
}

/// A T.sync_all (cross-core flag `id`) some cores never reached: they ended, or wait elsewhere.
void Engine::unfinished_sync_all(int id) {
  const ir::Loc* at = nullptr;
  std::vector<std::string> missing;
  for (const auto& c : cores_) {
    const bool here =
        c.has_pending && c.pending.t->op == Opcode::WaitCross && c.pending.flag_id == id;
    if (here && !at) at = &c.pending.t->loc;
    if (!here) missing.push_back(c.stats.name);
  }
  const size_t shown = std::min<size_t>(missing.size(), 4);
  throw UserError(Diagnostic{
      at ? *at : ir::Loc{},
      "deadlock",
      fmt::format(
          "deadlock: T.sync_all (cross-core flag #{}) waits for every core of the launch, "
          "and {} of {} arrived; never: {}{}",
          id, sync_all_[static_cast<size_t>(id)].arrived, cores_.size(),
          fmt::join(missing.begin(), missing.begin() + static_cast<ptrdiff_t>(shown), ", "),
          missing.size() > shown ? fmt::format(" and {} more", missing.size() - shown) : ""),
      {},
      "call T.sync_all on every path of every core kind of the kernel (the Cube code too, "
      "where the kernel has any)"});
}

void Engine::check_finished() {
  std::vector<Diagnostic> diags;
  for (size_t id = 0; id < sync_all_.size(); ++id)
    if (sync_all_[id].arrived > 0) unfinished_sync_all(static_cast<int>(id));
  for (const auto& c : cores_) {
    if (c.has_pending) {
      const auto& t = *c.pending.t;
      std::string what;
      if (t.op == Opcode::WaitCross) {
        const CrossFlags& x = cross_[static_cast<size_t>(c.ai_core)];
        size_t id = static_cast<size_t>(c.pending.flag_id);
        const LastSet& ls =
            c.kind == CoreKind::V ? x.c2v[static_cast<size_t>(c.vid)][id].last : x.v2c[0][id].last;
        what = fmt::format("wait_cross_flag #{} forever; {}", c.pending.flag_id, flag_state(ls));
      } else {
        what = fmt::format(
            "scalar waits {}->S #{} forever; {}", ir::to_string(t.flag_src), c.pending.flag_id,
            flag_state(c.flags[flag_key(t.flag_src, t.flag_dst, c.pending.flag_id)].last));
      }
      diags.push_back({t.loc,
                       "deadlock",
                       fmt::format("deadlock: {}: {} ({})", where(c), what, loop_state(c)),
                       {},
                       {}});
    }
    for (int p = 0; p < kPipes; ++p) {
      const auto& q = c.pipes[static_cast<size_t>(p)].queue;
      if (q.empty()) continue;
      const Instr& h = q.front();
      const auto& t = *h.t;
      diags.push_back(
          {t.loc,
           "deadlock",
           fmt::format("deadlock: {}: {} waits {}->{} #{} forever; {}; {} more instruction(s) "
                       "queued behind it",
                       c.stats.name, ir::to_string(static_cast<Pipe>(p)), ir::to_string(t.flag_src),
                       ir::to_string(t.flag_dst), h.flag_id,
                       flag_state(c.flags[flag_key(t.flag_src, t.flag_dst, h.flag_id)].last),
                       q.size() - 1),
           {},
           {}});
    }
  }
  if (!diags.empty()) {
    diags.front().hint =
        "every wait needs a matching set that is issued before or independently of it; "
        "check the set on the path that did not run";
    throw UserError(std::move(diags));
  }
  // A set that no wait consumed leaves the flag up for the next kernel: report it.
  for (const auto& c : cores_) unmatched_flags(c, "the kernel ends", diags);
  for (size_t ai = 0; ai < cross_.size(); ++ai) unmatched_cross(ai, "the kernel ends", diags);
  if (!diags.empty()) fail_flags(std::move(diags));
}

bool Engine::race_found() {
  if (race_->has_deferred()) {  // write-write pairs wait for the values of their writes
    values_exec_->drain_all();
    race_->resolve_writes();
  }
  return race_->found();
}

void Engine::fail_flags(std::vector<Diagnostic> diags) {
  diags = merge_across_cores(std::move(diags));
  if (race_ && race_found())
    for (auto& d : race_->take_reports()) diags.push_back(std::move(d));
  throw UserError(std::move(diags));
}

namespace {

bool same_allocation(const lower::AccessTemplate& a, const lower::AccessTemplate& b) {
  return a.memory == b.memory && (a.scope == ir::Scope::GM || a.base_bytes == b.base_bytes);
}

}  // namespace

/// Where the wait a set never met belongs: before the instruction the set guards — the
/// first after it in program order (wrapping around, as a loop's next iteration does) on
/// the flag's destination pipe that reads what the source pipe last wrote before the set.
std::string Engine::unmatched_hint(const Core& c, const lower::OpTemplate& set, size_t id) const {
  const auto& ins = c.prog->instrs;
  const auto at = static_cast<size_t>(&set - ins.data());
  const lower::AccessTemplate* wrote = nullptr;
  for (size_t i = at; i-- > 0 && !wrote;)
    if (ins[i].pipe == set.flag_src && ins[i].num_acc > 0 && !lower::is_sync(ins[i].op))
      wrote = &ins[i].acc[0];
  const lower::OpTemplate* consumer = nullptr;
  for (size_t n = 1; n < ins.size() && !consumer; ++n) {
    const auto& t = ins[(at + n) % ins.size()];
    if (t.pipe != set.flag_dst || lower::is_sync(t.op)) continue;
    for (int k = 1; k < t.num_acc && !consumer; ++k)
      if (!wrote || same_allocation(t.acc[static_cast<size_t>(k)], *wrote)) consumer = &t;
  }
  const std::string flag =
      fmt::format("{}, {}, {}", ir::to_string(set.flag_src), ir::to_string(set.flag_dst), id);
  if (!consumer)
    return fmt::format(
        "no {} instruction reads what the set guards: drop the set, or drain it with "
        "wait_flag({}) where its consumer is done",
        ir::to_string(set.flag_dst), flag);
  return fmt::format(
      "the set guards {} at {} (the first {} instruction after it that reads what {} wrote): "
      "put wait_flag({}) right before it; if the set is a credit primed for a loop's "
      "next iteration, wait it once after the loop",
      consumer->name, consumer->loc.str(), ir::to_string(set.flag_dst), ir::to_string(set.flag_src),
      flag);
}

/// Core c's flags that are still set at `when` ("the kernel ends", or the end of a block:
/// flags do not carry over to the next one).
void Engine::unmatched_flags(const Core& c, const std::string& when,
                             std::vector<Diagnostic>& diags) const {
  for (size_t k = 0; k < c.flags.size(); ++k) {
    const auto& q = c.flags[k].sets;
    if (q.empty()) continue;
    const auto& r = q.front();
    size_t id = k % static_cast<size_t>(chip_.event_ids);
    size_t pair = k / static_cast<size_t>(chip_.event_ids);
    diags.push_back(
        {r.op->loc,
         "unmatched-flag",
         fmt::format("{}: flag {}->{} #{} is still set when {} ({} set(s) never "
                     "waited on)",
                     c.stats.name, ir::to_string(static_cast<Pipe>(pair / kPipes)),
                     ir::to_string(static_cast<Pipe>(pair % kPipes)), id, when, q.size()),
         {},
         unmatched_hint(c, *r.op, id)});
  }
}

/// AI core ai's cross-core sets that no wait consumed by `when`.
void Engine::unmatched_cross(size_t ai, const std::string& when,
                             std::vector<Diagnostic>& diags) const {
  if (p_.aiv.empty() || p_.aic.empty()) return;
  for (size_t v = 0; v < 2; ++v) {
    for (size_t id = 0; id < cross_[ai].c2v[v].size(); ++id) {
      for (bool c2v : {true, false}) {
        const auto& q = (c2v ? cross_[ai].c2v[v] : cross_[ai].v2c[v])[id].sets;
        if (q.empty()) continue;
        diags.push_back({q.front().op->loc,
                         "unmatched-flag",
                         fmt::format("core{}: cross-core flag #{} ({} AIV{}) has {} set(s) "
                                     "never waited on when {}",
                                     ai, id, c2v ? "AIC ->" : "AIC <-", v, q.size(), when),
                         {},
                         "make the number of set_cross_flag and wait_cross_flag calls equal "
                         "on every path; for credits primed before a loop and never taken "
                         "back (the original's kernels), `--pass cross_drains` (on in the "
                         "Python front end) waits them at the end"});
      }
    }
  }
}

/// One diagnostic per source site and message: the same unmatched flag on 48 cores is
/// one bug, reported once with the number of cores.
std::vector<Diagnostic> Engine::merge_across_cores(std::vector<Diagnostic> diags) {
  std::vector<Diagnostic> out;
  std::map<std::string, std::pair<size_t, int>> seen;  // key -> (index in out, cores)
  for (auto& d : diags) {
    auto colon = d.message.find(": ");
    std::string rest = colon == std::string::npos ? d.message : d.message.substr(colon);
    std::string key = d.loc.str() + rest;
    auto it = seen.find(key);
    if (it == seen.end()) {
      seen[key] = {out.size(), 1};
      out.push_back(std::move(d));
    } else {
      ++it->second.second;
    }
  }
  for (auto& [key, v] : seen) {
    if (v.second < 2) continue;
    auto& m = out[v.first].message;
    auto colon = m.find(": ");
    m.insert(colon, fmt::format(" and {} more core(s)", v.second - 1));
  }
  return out;
}

}  // namespace tilepipe::sim

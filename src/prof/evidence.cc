// Evidence for the advisor: cycle accounts, roofline, transfers, footprints and program
// patterns (barriers in loops, unfused mul + add, per-row scalar loops), kernel-agnostic.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "tilepipe/prof.h"
#include "tilepipe/verify.h"

namespace tilepipe::prof {
namespace {

using ir::Pipe;
using lower::Opcode;

constexpr Pipe kOrder[] = {Pipe::M,    Pipe::V,   Pipe::MTE1, Pipe::MTE2,
                           Pipe::MTE3, Pipe::FIX, Pipe::S};

bool has_pipe(ir::CoreKind k, Pipe p) {
  if (p == Pipe::S || p == Pipe::MTE2) return true;
  if (k == ir::CoreKind::C) return p == Pipe::M || p == Pipe::MTE1 || p == Pipe::FIX;
  return p == Pipe::V || p == Pipe::MTE3;
}

double r2(double v) {
  return std::round(v * 100) / 100;
}

void add(sim::CycleAccount& a, const sim::CycleAccount& b, double w) {
  a.busy += b.busy * w;
  a.flag += b.flag * w;
  a.slot += b.slot * w;
  a.dep += b.dep * w;
  a.barrier += b.barrier * w;
  a.cross += b.cross * w;
  a.issue += b.issue * w;
  a.head += b.head * w;
  a.tail += b.tail * w;
}

/// Walks a core program's control flow once (statically), calling `f` for each instruction
/// with its innermost enclosing loop (or null).
void walk(const lower::CoreProgram& cp, const lower::Block& b, const lower::Item* loop,
          const std::function<void(const lower::OpTemplate&, const lower::Item*, size_t)>& f) {
  for (size_t i = 0; i < b.items.size(); ++i) {
    const auto& it = b.items[i];
    if (it.kind == lower::Item::Instr) {
      f(cp.instrs[static_cast<size_t>(it.instr)], loop, i);
    } else if (it.kind == lower::Item::Loop) {
      walk(cp, *it.body, &it, f);
    } else {
      if (it.body) walk(cp, *it.body, loop, f);
      if (it.else_body) walk(cp, *it.else_body, loop, f);
    }
  }
}

bool same_tile(const lower::AccessTemplate& a, const lower::AccessTemplate& b) {
  return a.buffer == b.buffer && a.base_bytes == b.base_bytes && a.extent == b.extent;
}

/// mul / muls followed (ignoring flags) by add / sub reading the mul's result, in one block.
void find_unfused(const lower::CoreProgram& cp, const lower::Block& b, const lower::Item* loop,
                  std::vector<Evidence::Site>& out, std::set<std::string>& seen) {
  const lower::OpTemplate* prev = nullptr;
  for (const auto& it : b.items) {
    if (it.kind != lower::Item::Instr) {
      prev = nullptr;
      if (it.body) find_unfused(cp, *it.body, it.kind == lower::Item::Loop ? &it : loop, out, seen);
      if (it.else_body) find_unfused(cp, *it.else_body, loop, out, seen);
      continue;
    }
    const auto& t = cp.instrs[static_cast<size_t>(it.instr)];
    if (t.op == Opcode::SetFlag || t.op == Opcode::WaitFlag) continue;
    if (prev && t.op == Opcode::Vec &&
        (t.tile_op == ir::TileOpKind::Add || t.tile_op == ir::TileOpKind::Sub)) {
      bool reads = false;
      for (int i = 1; i < t.num_acc; ++i) reads = reads || same_tile(t.acc[i], prev->acc[0]);
      if (reads && seen.insert(prev->loc.str()).second)
        out.push_back({prev->loc.str(),
                       fmt::format("{} then {} at {}", prev->name, t.name, t.loc.str()),
                       loop ? loop->loc.str() : "",
                       0,
                       {}});
    }
    // Only a mul by a scalar fuses with the add into axpy (dst += src * scalar).
    prev = (t.op == Opcode::Vec && t.tile_op == ir::TileOpKind::Mul &&
            t.scalar_kind != lower::OpTemplate::ScalarKind::None)
               ? &t
               : nullptr;
  }
}

}  // namespace

Evidence gather_evidence(const sim::SimResult& r, const lower::LoweredProgram& prog,
                         const ChipConfig& chip, const Recorder& rec) {
  Evidence e;
  e.span = r.cycles;
  e.block_num = prog.block_num;
  e.ai_cores = chip.ai_cores;
  e.knobs = prog.knobs;
  e.c2v = r.c2v;
  e.v2c = r.v2c;
  // Cycle accounts per core kind and pipe; the roofline is the busiest single pipe.
  for (auto kind : {ir::CoreKind::C, ir::CoreKind::V}) {
    for (Pipe p : kOrder) {
      if (!has_pipe(kind, p)) continue;
      Evidence::Account a;
      a.kind = kind == ir::CoreKind::C ? "AIC" : "AIV";
      a.pipe = ir::to_string(p);
      for (const auto& c : r.cores)
        if (c.kind == kind) ++a.cores;
      if (a.cores == 0) continue;
      for (const auto& c : r.cores) {
        if (c.kind != kind) continue;
        const auto& st = c.pipes[static_cast<size_t>(p)];
        add(a.mean, st.account, 1.0 / a.cores);
        a.max_busy = std::max(a.max_busy, st.busy_cycles);
      }
      if (a.max_busy > e.lb_cycles) {
        e.lb_cycles = a.max_busy;
        e.lb_pipe = a.kind + "." + a.pipe;
      }
      e.accounts.push_back(a);
    }
  }
  for (const auto& c : r.cores)
    for (const auto& st : c.pipes) {
      e.gm_transfers += st.transfers;
      e.reloaded_bytes += st.reloaded_bytes;
    }
  for (const auto& c : r.cores) e.mte2_read_bytes += c.pipes[static_cast<size_t>(Pipe::MTE2)].bytes;
  e.gm_bytes = r.gm_bytes_hbm + r.gm_bytes_l2;
  e.bytes_per_transfer = e.gm_transfers ? e.gm_bytes / static_cast<double>(e.gm_transfers) : 0;
  if (r.cycles > 0) {
    e.hbm_bw_pct = 100 * r.gm_bytes_hbm / (r.cycles * chip.hbm_bw);
    e.l2_bw_pct = 100 * r.gm_bytes_l2 / (r.cycles * chip.l2_bw);
  }
  // Load balance: the work of each AI core (the instructions its cores executed, on every
  // pipe), max over mean. Work, not busy time: busy time also grows with the bandwidth a
  // core shares with the others, and equal blocks are not unbalanced.
  std::map<int, double> per_ai;
  for (const auto& c : r.cores)
    for (const auto& st : c.pipes) per_ai[c.ai_core] += static_cast<double>(st.instructions);
  double mx = 0, sum = 0;
  for (auto& [ai, b] : per_ai) {
    mx = std::max(mx, b);
    sum += b;
  }
  if (sum > 0) e.core_imbalance = mx / (sum / static_cast<double>(per_ai.size()));

  // Footprint per scope: the allocations the lowering placed, and the largest of them.
  const auto caps = on_chip_capacities(chip);
  for (auto [scope, cap] : caps) {
    const auto& cp = scope == ir::Scope::UB ? prog.aiv : prog.aic;
    Evidence::Scope s{
        ir::to_string(scope), cp.scope_bytes[static_cast<size_t>(scope)], cap->usable, "", "", 0};
    std::set<const ir::BufferNode*> seen;
    for (const auto& t : cp.instrs)
      for (int i = 0; i < t.num_acc; ++i) {
        const auto* b = t.acc[static_cast<size_t>(i)].buffer;
        if (!b || b->scope != scope || !seen.insert(b).second) continue;
        if (b->bytes() > s.largest_bytes ||
            (b->bytes() == s.largest_bytes && b->name < s.largest)) {
          s.largest_bytes = b->bytes();
          s.largest = b->name;
          s.largest_where = b->loc.str();
        }
      }
    e.scopes.push_back(s);
  }

  // Per-line instruction mix, with the innermost loop of each line.
  std::map<std::string, std::string> loop_of;
  std::map<std::string, int64_t> static_count;
  for (const auto* cp : {&prog.aic, &prog.aiv}) {
    walk(*cp, cp->body, nullptr, [&](const lower::OpTemplate& t, const lower::Item* loop, size_t) {
      loop_of[t.loc.str()] = loop ? loop->loc.str() : "";
    });
  }
  for (const auto& l : rec.lines()) {
    if (l.pipe == "S" || e.lines.size() >= 12) continue;
    std::string where = fmt::format("{}:{}", l.file, l.line);
    e.lines.push_back({where, l.op, l.pipe, loop_of[where], l.instructions, l.busy_cycles,
                       l.instructions ? l.elements / static_cast<double>(l.instructions) : 0});
  }

  // Program patterns.
  std::map<std::string, int64_t> executed;
  for (const auto& l : rec.lines())
    executed[fmt::format("{}:{}", l.file, l.line)] += l.instructions;
  std::set<std::string> seen_barrier, seen_loop;
  for (const auto* cp : {&prog.aic, &prog.aiv}) {
    walk(*cp, cp->body, nullptr, [&](const lower::OpTemplate& t, const lower::Item* loop, size_t) {
      if (t.op == Opcode::Barrier && loop &&
          seen_barrier.insert(t.loc.str() + ir::to_string(t.pipe)).second)
        e.barriers_in_loops.push_back({t.loc.str(),
                                       fmt::format("pipe_barrier({})", ir::to_string(t.pipe)),
                                       loop->loc.str(),
                                       0,
                                       {}});
      // A vector op whose scalar operand is read from UB by the scalar unit, in a loop:
      // the per-row pattern that broadcast + one tile op replaces.
      if (loop && t.pipe == Pipe::V && t.scalar_kind == lower::OpTemplate::ScalarKind::UbRead &&
          seen_loop.insert(loop->loc.str()).second)
        e.scalar_loops.push_back(
            {loop->loc.str(),
             fmt::format("{} with a scalar UB operand at {}", t.name, t.loc.str()),
             loop->loc.str(),
             executed[t.loc.str()],
             {}});
      if (loop && t.pipe == Pipe::V)
        for (auto& sl : e.scalar_loops)
          if (sl.loop == loop->loc.str() &&
              std::find(sl.ops.begin(), sl.ops.end(), t.loc.str()) == sl.ops.end())
            sl.ops.push_back(t.loc.str());
    });
    std::set<std::string> seen;
    find_unfused(*cp, cp->body, nullptr, e.unfused, seen);
  }
  for (auto& u : e.unfused) u.executed = executed[u.where];
  for (const auto& l : rec.lines()) {
    if (l.pipe != "V") continue;
    e.v_instructions += l.instructions;
    if (l.instructions && l.elements / static_cast<double>(l.instructions) < 512)
      e.v_small_instructions += l.instructions;
  }
  return e;
}

nlohmann::ordered_json to_json(const Evidence& e) {
  using json = nlohmann::ordered_json;
  auto pct = [&](double v) { return e.span > 0 ? r2(100 * v / e.span) : 0.0; };
  json acc = json::array();
  for (const auto& a : e.accounts)
    acc.push_back({{"kind", a.kind},
                   {"pipe", a.pipe},
                   {"cores", a.cores},
                   {"busy_pct", pct(a.mean.busy)},
                   {"flag_pct", pct(a.mean.flag)},
                   {"slot_pct", pct(a.mean.slot)},
                   {"dep_pct", pct(a.mean.dep)},
                   {"barrier_pct", pct(a.mean.barrier)},
                   {"cross_pct", pct(a.mean.cross)},
                   {"issue_pct", pct(a.mean.issue)},
                   {"head_pct", pct(a.mean.head)},
                   {"tail_pct", pct(a.mean.tail)},
                   {"roofline_cycles", r2(a.max_busy)}});
  auto cross = [](const sim::CrossStats& c) {
    return json{{"sets", c.sets},
                {"waits", c.waits},
                {"wait_cycles", r2(c.wait_cycles)},
                {"max_in_flight", c.max_pending},
                {"mean_in_flight", r2(c.mean_pending)}};
  };
  json scopes = json::object();
  for (const auto& s : e.scopes)
    scopes[s.scope] = {{"used_bytes", s.used},
                       {"capacity_bytes", s.capacity},
                       {"largest", s.largest},
                       {"largest_where", s.largest_where},
                       {"largest_bytes", s.largest_bytes}};
  json lines = json::array();
  for (const auto& l : e.lines)
    lines.push_back({{"where", l.where},
                     {"op", l.op},
                     {"pipe", l.pipe},
                     {"loop", l.loop},
                     {"instructions", l.instructions},
                     {"busy_cycles", r2(l.busy_cycles)},
                     {"mean_elements", r2(l.mean_elements)}});
  auto sites = [](const std::vector<Evidence::Site>& v) {
    json a = json::array();
    for (const auto& s : v)
      a.push_back({{"where", s.where},
                   {"what", s.what},
                   {"loop", s.loop},
                   {"executed", s.executed},
                   {"ops", s.ops}});
    return a;
  };
  json knobs = json::array();
  for (const auto& k : e.knobs)
    knobs.push_back({{"param", k.param},
                     {"role", k.role},
                     {"value", k.value},
                     {"min", k.min},
                     {"max", k.max},
                     {"trip_count", k.trip_count},
                     {"versioned", k.versioned},
                     {"where", k.loc.str()}});
  return {{"span_cycles", e.span},
          {"accounts", acc},
          {"roofline", {{"pipe", e.lb_pipe}, {"lower_bound_cycles", r2(e.lb_cycles)}}},
          {"cross", {{"c2v", cross(e.c2v)}, {"v2c", cross(e.v2c)}}},
          {"transfers",
           {{"gm_transfers", e.gm_transfers},
            {"bytes_per_transfer", r2(e.bytes_per_transfer)},
            {"mte2_read_bytes", e.mte2_read_bytes},
            {"reloaded_bytes", e.reloaded_bytes},
            {"hbm_bw_pct", r2(e.hbm_bw_pct)},
            {"l2_bw_pct", r2(e.l2_bw_pct)}}},
          {"scopes", scopes},
          {"lines", lines},
          {"barriers_in_loops", sites(e.barriers_in_loops)},
          {"unfused_mul_add", sites(e.unfused)},
          {"scalar_loops", sites(e.scalar_loops)},
          {"serial_tile_loops", sites(e.serial_tile_loops)},
          {"invariant_work", sites(e.invariant_work)},
          {"core_imbalance", r2(e.core_imbalance)},
          {"vector_instructions", e.v_instructions},
          {"small_vector_instructions", e.v_small_instructions},
          {"block_num", e.block_num},
          {"knobs", knobs}};
}

std::map<std::string, double> metrics(const Summary& s, const Evidence& e) {
  std::map<std::string, double> m;
  double span = e.span > 0 ? e.span : 1;
  double best = 0;
  for (const auto& p : s.pipes) {
    m[p.pipe + ".busy_pct"] = p.busy_pct;
    best = std::max(best, p.busy_pct);
  }
  m["bound.busy_pct"] = best;
  for (const auto& a : e.accounts) {
    std::string k = a.kind + "." + a.pipe + ".";
    m[k + "busy_pct"] = 100 * a.mean.busy / span;
    m[k + "cross_pct"] = 100 * a.mean.cross / span;
    m[k + "flag_pct"] = 100 * a.mean.flag / span;
    m[k + "slot_pct"] = 100 * a.mean.slot / span;
    m[k + "barrier_pct"] = 100 * a.mean.barrier / span;
    m[k + "issue_pct"] = 100 * a.mean.issue / span;
    m[k + "idle_pct"] = 100 * (a.mean.head + a.mean.tail) / span;
    m[k + "roof_pct"] = 100 * a.max_busy / span;
  }
  m["roofline.pct_of_span"] = 100 * e.lb_cycles / span;
  m["cube_vector_ratio"] = s.cube_vector_ratio;
  m["cross.sets"] = static_cast<double>(e.c2v.sets + e.v2c.sets);
  m["cross.wait_pct"] = 0;
  int aiv = 0, aic = 0;
  for (const auto& a : e.accounts)
    if (a.pipe == "S") (a.kind == "AIC" ? aic : aiv) = a.cores;
  if (aic) m["cross.aic_wait_pct"] = 100 * e.v2c.wait_cycles / aic / span;
  if (aiv) m["cross.aiv_wait_pct"] = 100 * e.c2v.wait_cycles / aiv / span;
  m["cross.wait_pct"] = std::max(m["cross.aic_wait_pct"], m["cross.aiv_wait_pct"]);
  m["cross.sets_per_kcycle"] =
      1000.0 * static_cast<double>(e.c2v.sets + e.v2c.sets) / std::max(1, aic + aiv) / span;
  m["cross.max_in_flight"] = static_cast<double>(e.c2v.max_pending);
  m["gm.hbm_bw_pct"] = e.hbm_bw_pct;
  m["gm.l2_bw_pct"] = e.l2_bw_pct;
  m["gm.bytes_per_transfer"] = e.bytes_per_transfer;
  m["gm.reload_pct"] = e.mte2_read_bytes > 0 ? 100 * e.reloaded_bytes / e.mte2_read_bytes : 0;
  double over = 0;
  for (const auto& sc : e.scopes)
    over = std::max(over, 100.0 * static_cast<double>(sc.used) / static_cast<double>(sc.capacity));
  m["mem.max_used_pct"] = over;
  m["barriers_in_loops"] = static_cast<double>(e.barriers_in_loops.size());
  double bar = 0;
  for (const auto& a : e.accounts) bar = std::max(bar, 100 * a.mean.barrier / span);
  m["barrier.max_pct"] = bar;
  int64_t unf = 0;
  for (const auto& u : e.unfused) unf += u.executed;
  m["unfused.count"] = static_cast<double>(e.unfused.size());
  m["unfused.executed"] = static_cast<double>(unf);
  m["scalar_loops"] = static_cast<double>(e.scalar_loops.size());
  m["serial_tile_loops"] = static_cast<double>(e.serial_tile_loops.size());
  m["invariant_work"] = static_cast<double>(e.invariant_work.size());
  m["V.small_instr_pct"] = e.v_instructions > 0
                               ? 100.0 * static_cast<double>(e.v_small_instructions) /
                                     static_cast<double>(e.v_instructions)
                               : 0;
  m["tasks.block_num"] = static_cast<double>(e.block_num);
  m["tasks.mod_cores"] = e.ai_cores > 0 ? static_cast<double>(e.block_num % e.ai_cores) : 0;
  // More blocks than cores, not a multiple of them: the last round leaves cores idle.
  m["tasks.uneven_rounds"] =
      e.ai_cores > 0 && e.block_num > e.ai_cores && e.block_num % e.ai_cores != 0 ? 1 : 0;
  m["core_imbalance"] = e.core_imbalance;
  for (const auto& k : e.knobs) m["knob." + k.role] = static_cast<double>(k.value);
  return m;
}

bool is_metric_name(const std::string& name) {
  // Every name metrics() can produce: it run on evidence with every pipe of both core kinds
  // and every knob role.
  static const std::set<std::string> names = [] {
    Summary s;
    Evidence e;
    for (int p = 0; p < ir::kNumPipes; ++p) {
      std::string pipe = ir::to_string(static_cast<ir::Pipe>(p));
      s.pipes.push_back({pipe});
      for (const char* kind : {"AIC", "AIV"}) e.accounts.push_back({kind, pipe, 1, {}, 0});
    }
    for (const char* role : ir::kKnobRoles) e.knobs.push_back({"", role, 0, 0, 0, 0, {}, {}});
    std::set<std::string> out;
    for (const auto& [n, v] : metrics(s, e)) out.insert(n);
    return out;
  }();
  return names.count(name) > 0;
}

}  // namespace tilepipe::prof

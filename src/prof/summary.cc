// Run summary: busy % per pipe, bound and verdict, idle reasons, buffer use; CSV exports.
#include <fmt/format.h>

#include <algorithm>

#include "tilepipe/prof.h"
#include "tilepipe/verify.h"

namespace tilepipe::prof {
namespace {

using ir::Pipe;

/// Pipes that exist on a core kind (AIC: S MTE1 MTE2 M FIX; AIV: S MTE2 V MTE3).
bool has_pipe(ir::CoreKind k, Pipe p) {
  if (p == Pipe::S || p == Pipe::MTE2) return true;
  if (k == ir::CoreKind::C) return p == Pipe::M || p == Pipe::MTE1 || p == Pipe::FIX;
  return p == Pipe::V || p == Pipe::MTE3;
}

constexpr Pipe kOrder[] = {Pipe::M,    Pipe::V,   Pipe::MTE1, Pipe::MTE2,
                           Pipe::MTE3, Pipe::FIX, Pipe::S};

double round2(double v) {
  return std::round(v * 100) / 100;
}

}  // namespace

Summary summarize(const sim::SimResult& r, const lower::LoweredProgram& prog,
                  const ChipConfig& chip) {
  Summary s;
  s.cycles = r.cycles;
  s.time_us = r.cycles * chip.us_per_cycle();
  s.launch_cycles = std::min(chip.launch_cycles(), r.cycles);
  double best = -1;
  for (Pipe p : kOrder) {
    PipeSummary ps;
    ps.pipe = ir::to_string(p);
    double busy = 0, wf = 0, wd = 0;
    int n = 0;
    for (const auto& c : r.cores) {
      if (!has_pipe(c.kind, p)) continue;
      const auto& st = c.pipes[static_cast<size_t>(p)];
      busy += st.busy_cycles;
      wf += st.wait_flag_cycles;
      wd += st.wait_dep_cycles;
      ps.instructions += st.instructions;
      ++n;
    }
    double denom = n * r.cycles;
    if (denom > 0) {
      ps.busy_pct = round2(100 * busy / denom);
      ps.wait_flag_pct = round2(100 * wf / denom);
      ps.wait_dep_pct = round2(100 * wd / denom);
    }
    if (ps.busy_pct > best) {
      best = ps.busy_pct;
      s.bound = ps.pipe;
    }
    s.pipes.push_back(ps);
  }
  // msprof-style verdict: a saturated compute pipe is compute-bound, a saturated data
  // pipe memory-bound, a saturated scalar unit issue-bound; nothing saturated means the
  // pipes wait on each other (latency / pipeline / sync bound).
  if (best >= 80) {
    s.verdict = (s.bound == "M" || s.bound == "V") ? "compute"
                : s.bound == "S"                   ? "issue"
                                                   : "memory";
  } else {
    s.verdict = "latency-pipeline";
  }
  double m_busy = 0, v_busy = 0;
  for (const auto& c : r.cores) {
    m_busy += c.pipes[static_cast<size_t>(Pipe::M)].busy_cycles;
    v_busy += c.pipes[static_cast<size_t>(Pipe::V)].busy_cycles;
  }
  s.cube_vector_ratio = v_busy > 0 ? round2(m_busy / v_busy) : 0;
  s.hbm_bytes = r.gm_bytes_hbm;
  s.l2_bytes = r.gm_bytes_l2;
  s.gm_bw_bytes_per_cycle = r.cycles > 0 ? round2((r.gm_bytes_hbm + r.gm_bytes_l2) / r.cycles) : 0;
  s.scalar_gm_reads = r.scalar_gm_loads.reads;
  s.scalar_gm_misses = r.scalar_gm_loads.misses;
  for (const auto& w : r.waits) {
    if (s.top_waits.size() >= 8 || w.cycles <= 0) break;
    s.top_waits.push_back({w.op->loc.str(), w.op->name, w.cycles, w.count});
  }
  const auto caps = on_chip_capacities(chip);
  for (auto [scope, cap] : caps) {
    const auto& cp = scope == ir::Scope::UB ? prog.aiv : prog.aic;
    s.buffers.push_back(
        {ir::to_string(scope), cp.scope_bytes[static_cast<size_t>(scope)], cap->usable});
  }
  return s;
}

nlohmann::ordered_json to_json(const Summary& s) {
  nlohmann::ordered_json pipes = nlohmann::ordered_json::object();
  for (const auto& p : s.pipes)
    pipes[p.pipe] = {{"busy_pct", p.busy_pct},
                     {"wait_flag_pct", p.wait_flag_pct},
                     {"wait_dep_pct", p.wait_dep_pct},
                     {"instructions", p.instructions}};
  nlohmann::ordered_json waits = nlohmann::ordered_json::array();
  for (const auto& w : s.top_waits)
    waits.push_back(
        {{"where", w.where}, {"op", w.op}, {"cycles", round2(w.cycles)}, {"count", w.count}});
  nlohmann::ordered_json bufs = nlohmann::ordered_json::object();
  for (const auto& b : s.buffers)
    bufs[b.scope] = {{"used_bytes", b.used},
                     {"capacity_bytes", b.capacity},
                     {"used_pct", round2(100.0 * static_cast<double>(b.used) /
                                         static_cast<double>(b.capacity))}};
  // msprof's Task Duration is the kernel on the device, without the launch the host pays.
  const double us_per_cycle = s.cycles > 0 ? s.time_us / s.cycles : 0;
  return {{"kernel_cycles", s.cycles - s.launch_cycles},
          {"kernel_us", (s.cycles - s.launch_cycles) * us_per_cycle},
          {"launch_cycles", s.launch_cycles},
          {"launch_us", s.launch_cycles * us_per_cycle},
          {"pipes", pipes},
          {"bound", s.bound},
          {"verdict", s.verdict},
          {"cube_vector_ratio", s.cube_vector_ratio},
          {"gm",
           {{"hbm_bytes", s.hbm_bytes},
            {"l2_bytes", s.l2_bytes},
            {"bytes_per_cycle", s.gm_bw_bytes_per_cycle},
            {"scalar_reads", s.scalar_gm_reads},
            {"scalar_read_misses", s.scalar_gm_misses}}},
          {"waits", waits},
          {"buffers", bufs}};
}

std::string one_line(const std::string& text) {
  std::string first = text, hint;
  if (auto h = text.find("\n  hint: "); h != std::string::npos) hint = "; " + text.substr(h + 3);
  if (auto nl = first.find('\n'); nl != std::string::npos) first.resize(nl);
  if (auto nl = hint.find('\n'); nl != std::string::npos) hint.resize(nl);
  return first + hint;
}

std::string to_text(const Summary& s) {
  const double launch_us = s.cycles > 0 ? s.time_us * s.launch_cycles / s.cycles : 0;
  std::string o =
      fmt::format("{:.0f} cycles ({:.2f} us: kernel {:.2f} us + launch {:.2f} us), bound {} ({})\n",
                  s.cycles, s.time_us, s.time_us - launch_us, launch_us, s.bound, s.verdict);
  o += "  pipe    busy%  wait-flag%  wait-dep%  instructions\n";
  for (const auto& p : s.pipes)
    o += fmt::format("  {:<6} {:>6.2f} {:>11.2f} {:>10.2f} {:>13}\n", p.pipe, p.busy_pct,
                     p.wait_flag_pct, p.wait_dep_pct, p.instructions);
  if (!s.top_waits.empty()) {
    o += "  waiting most at:\n";
    for (const auto& w : s.top_waits)
      o += fmt::format("    {:<24} {:<16} {:>12.0f} cycles over {} waits\n", w.where, w.op,
                       w.cycles, w.count);
  }
  if (s.scalar_gm_reads > 0)
    o += fmt::format("  scalar GM reads: {} ({} missed the scalar data cache)\n", s.scalar_gm_reads,
                     s.scalar_gm_misses);
  o += "  on-chip use per core:";
  for (const auto& b : s.buffers)
    if (b.used)
      o += fmt::format(" {} {:.1f}/{:.1f} KiB", b.scope, b.used / 1024.0, b.capacity / 1024.0);
  o += "\n";
  return o;
}

std::string pipe_utilization_csv(const sim::SimResult& r, const ChipConfig& chip) {
  // msprof column names where a counterpart exists: mac = cube (M), vec = V, fixpipe = FIX.
  const std::pair<Pipe, const char*> cols[] = {
      {Pipe::M, "mac"},     {Pipe::V, "vec"},     {Pipe::S, "scalar"},   {Pipe::MTE1, "mte1"},
      {Pipe::MTE2, "mte2"}, {Pipe::MTE3, "mte3"}, {Pipe::FIX, "fixpipe"}};
  std::string o = "core,kind,block_id,sub_block_id,total_cycles,total_time(us)";
  for (auto [p, n] : cols) o += fmt::format(",{0}_time(us),{0}_ratio", n);
  o += "\n";
  double us = chip.us_per_cycle();
  for (const auto& c : r.cores) {
    o += fmt::format("{},{},{},{},{:.0f},{:.3f}", c.name, c.kind == ir::CoreKind::C ? "aic" : "aiv",
                     c.ai_core, c.vid, c.end_cycle, c.end_cycle * us);
    for (auto [p, n] : cols) {
      (void)n;
      double b = has_pipe(c.kind, p) ? c.pipes[static_cast<size_t>(p)].busy_cycles : 0;
      o += fmt::format(",{:.3f},{:.4f}", b * us, c.end_cycle > 0 ? b / c.end_cycle : 0);
    }
    o += "\n";
  }
  return o;
}

std::string code_exe_csv(const Recorder& rec, const ChipConfig& chip) {
  std::string o = "file,line,op,instructions,busy_cycles,busy_time(us),duration_cycles\n";
  for (const auto& l : rec.lines())
    o += fmt::format("{},{},{},{},{:.0f},{:.3f},{:.0f}\n", l.file, l.line, l.op, l.instructions,
                     l.busy_cycles, l.busy_cycles * chip.us_per_cycle(), l.duration_cycles);
  return o;
}

}  // namespace tilepipe::prof

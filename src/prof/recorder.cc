#include <fmt/format.h>

#include <algorithm>

#include "tilepipe/prof.h"

namespace tilepipe::prof {

void Timeline::add(int core, ir::Pipe pipe, double start, double cycles) {
  if (cycles <= 0) return;
  if (busy.size() <= static_cast<size_t>(core)) busy.resize(static_cast<size_t>(core) + 1);
  while (start + cycles > bin_cycles * kMaxBins) {  // outgrown: merge pairs of bins
    for (auto& bins : busy) {
      for (size_t i = 0; i < bins.size(); ++i) {
        auto& dst = bins[i / 2];
        if (i % 2 == 0) {
          dst = bins[i];
        } else {
          for (size_t p = 0; p < dst.size(); ++p) dst[p] += bins[i][p];
        }
      }
      bins.resize((bins.size() + 1) / 2);
    }
    bin_cycles *= 2;
  }
  auto& bins = busy[static_cast<size_t>(core)];
  double t = start, end = start + cycles;
  while (t < end) {
    size_t b = static_cast<size_t>(t / bin_cycles);
    if (bins.size() <= b) bins.resize(b + 1, std::array<float, ir::kNumPipes>{});
    double stop = std::min(end, static_cast<double>(b + 1) * bin_cycles);
    bins[b][static_cast<size_t>(pipe)] += static_cast<float>(stop - t);
    t = stop;
  }
}

void Recorder::on_instr(const sim::InstrEvent& e) {
  auto& l = by_op_[e.op];
  if (l.instructions == 0) {
    l.file = e.op->loc.file;
    l.line = e.op->loc.line;
    l.op = e.op->name;
    l.pipe = ir::to_string(e.pipe);
  }
  int src = e.op->num_acc > 1 ? 1 : 0;
  l.bytes += static_cast<double>(e.bytes);
  l.elements +=
      static_cast<double>(e.bytes) / ir::dtype_bytes(e.op->acc[static_cast<size_t>(src)].dtype);
  timeline_.add(e.core, e.pipe, e.start, e.occupancy);
  ++l.instructions;
  l.busy_cycles += e.occupancy;
  l.duration_cycles += e.end - e.start;
  if (keep_ && !overflow_) {
    if (++kept_ > kMaxKeptEvents) {
      overflow_ = true;
      events_.clear();
      releases_.clear();
    } else {
      if (events_.size() <= static_cast<size_t>(e.core))
        events_.resize(static_cast<size_t>(e.core) + 1);
      events_[static_cast<size_t>(e.core)].push_back(
          {e.start, static_cast<float>(e.occupancy),
           static_cast<float>(e.end - e.start - e.occupancy), static_cast<float>(e.start - e.issue),
           e.pipe, e.op});
    }
  }
  if (trace_) trace_->instr(e);
}

void Recorder::on_flag(const sim::FlagEvent& e) {
  // Only a wait that held something up can explain a stall.
  if (keep_ && !overflow_ && e.wait_time > e.wait_issue) {
    if (releases_.size() <= static_cast<size_t>(e.wait_core))
      releases_.resize(static_cast<size_t>(e.wait_core) + 1);
    releases_[static_cast<size_t>(e.wait_core)].push_back({e.wait_time, e.set_pipe, e.cross});
  }
  if (trace_) trace_->flag(e);
}

LineAttribution Recorder::attribute_lines(const sim::SimResult& r, double launch_cycles) const {
  LineAttribution a;
  a.cycles = r.cycles;
  if (!keep_) {
    a.unavailable = "the run was not recorded for per-line attribution";
    return a;
  }
  if (overflow_) {
    a.unavailable = fmt::format(
        "the run executed more than {} instructions, more than per-line attribution keeps; "
        "profile a smaller size",
        kMaxKeptEvents);
    return a;
  }
  size_t crit = 0;
  for (size_t c = 1; c < r.cores.size(); ++c)
    if (r.cores[c].end_cycle > r.cores[crit].end_cycle) crit = c;
  if (crit >= events_.size() || events_[crit].empty()) {
    a.unavailable = "no instruction ran on the critical core";
    return a;
  }
  a.core = r.cores[crit].name;
  a.launch_cycles = std::min(launch_cycles, r.cycles);
  std::vector<Kept> ev = events_[crit];
  std::stable_sort(ev.begin(), ev.end(),
                   [](const Kept& x, const Kept& y) { return x.start < y.start; });
  std::vector<Release> rel = releases_.size() > crit ? releases_[crit] : std::vector<Release>{};
  std::stable_sort(rel.begin(), rel.end(),
                   [](const Release& x, const Release& y) { return x.time < y.time; });

  std::map<std::pair<std::string, int>, LineCost> by_line;
  std::map<std::pair<std::string, int>, std::map<std::string, double>> op_cycles;
  auto cost = [&](const Kept& k) -> LineCost& {
    auto& l = by_line[{k.op->loc.file, k.op->loc.line}];
    l.file = k.op->loc.file;
    l.line = k.op->loc.line;
    return l;
  };
  auto charge_op = [&](const Kept& k, double cycles) {
    op_cycles[{k.op->loc.file, k.op->loc.line}][k.op->name + "\n" + ir::to_string(k.pipe)] +=
        cycles;
  };
  auto busy = [&](const Kept& k, double cycles) {
    cost(k).busy_cycles += cycles;
    charge_op(k, cycles);
  };
  auto stall_of = [&](const Kept& k, const std::string& why, double cycles) {
    LineCost& l = cost(k);
    l.stall_cycles += cycles;
    l.waits_on[why] += cycles;
    charge_op(k, cycles);
  };
  // The idle stretch [from, k.start) before k: what released k is the last wait that ended
  // in it (a flag from another pipe, or a cross-core flag), else k's own pipe (an earlier
  // result it needed, or a full queue) when it was issued before it started, else the
  // scalar unit, which issued it late.
  auto stall = [&](const Kept& k, double from, double to) {
    if (to <= from) return;
    std::string why = k.queued > 0 ? ir::to_string(k.pipe) : "S";
    auto it = std::upper_bound(rel.begin(), rel.end(), to,
                               [](double t, const Release& x) { return t < x.time; });
    if (it != rel.begin() && std::prev(it)->time > from) {
      const Release& x = *std::prev(it);
      why = std::string(x.cross ? "cross-core " : "") + ir::to_string(x.set_pipe);
    }
    stall_of(k, why, to - from);
  };
  // Sweep the core's time: `running` holds the instructions occupying a pipe at `t`.
  std::vector<const Kept*> running;
  double t = a.launch_cycles;
  auto advance = [&](double to) {  // [t, to) with `running` fixed
    if (to <= t || running.empty()) return;
    const double share = (to - t) / static_cast<double>(running.size());
    for (const Kept* k : running) busy(*k, share);
    t = to;
  };
  auto finish_running = [&](double until) {
    for (;;) {
      const Kept* first = nullptr;
      for (const Kept* k : running)
        if (!first || k->start + k->occupancy < first->start + first->occupancy) first = k;
      if (!first || first->start + first->occupancy > until) return;
      advance(first->start + first->occupancy);
      running.erase(std::find(running.begin(), running.end(), first));
    }
  };
  const Kept* last = &ev.front();
  for (const Kept& k : ev) {
    ++cost(k).instructions;
    finish_running(k.start);
    if (running.empty()) {
      stall(k, t, k.start);
      t = std::max(t, k.start);
    } else {
      advance(k.start);
    }
    if (k.occupancy > 0) running.push_back(&k);
    if (k.start + k.occupancy + k.latency > last->start + last->occupancy + last->latency)
      last = &k;
  }
  finish_running(a.cycles);
  advance(a.cycles);
  // After the last occupancy: the last result's latency (and the core's end) belong to the
  // instruction that finishes last.
  if (a.cycles > t) stall_of(*last, ir::to_string(last->pipe), a.cycles - t);
  for (auto& [key, l] : by_line) {
    l.cycles = l.busy_cycles + l.stall_cycles;
    const auto& ops = op_cycles[key];
    auto top = std::max_element(ops.begin(), ops.end(),
                                [](const auto& x, const auto& y) { return x.second < y.second; });
    if (top != ops.end()) {
      auto nl = top->first.find('\n');
      l.op = top->first.substr(0, nl);
      l.pipe = top->first.substr(nl + 1);
    }
    a.lines.push_back(l);
  }
  std::stable_sort(a.lines.begin(), a.lines.end(),
                   [](const LineCost& x, const LineCost& y) { return x.cycles > y.cycles; });
  return a;
}

std::string to_text(const LineAttribution& a, size_t max) {
  if (!a.unavailable.empty()) return "per-line cycles: none (" + a.unavailable + ")\n";
  std::string o = fmt::format(
      "per-line cycles on the critical core {} ({:.0f} cycles = {:.0f} launch + the lines):\n",
      a.core, a.cycles, a.launch_cycles);
  o += fmt::format("  {:<28} {:>12} {:>6} {:>12} {:>12}  {:<16} {}\n", "line", "cycles", "%",
                   "busy", "stall", "op", "waits on");
  for (size_t i = 0; i < a.lines.size() && i < max; ++i) {
    const LineCost& l = a.lines[i];
    std::string waits;
    for (const auto& [why, c] : l.waits_on)
      if (c >= 0.5) waits += fmt::format("{}{} {:.0f}", waits.empty() ? "" : ", ", why, c);
    o += fmt::format("  {:<28} {:>12.0f} {:>6.1f} {:>12.0f} {:>12.0f}  {:<16} {}\n",
                     fmt::format("{}:{}", l.file, l.line), l.cycles,
                     a.cycles > 0 ? 100 * l.cycles / a.cycles : 0, l.busy_cycles, l.stall_cycles,
                     l.op, waits);
  }
  if (a.lines.size() > max) o += fmt::format("  ... {} more line(s)\n", a.lines.size() - max);
  return o;
}

std::vector<LineStats> Recorder::lines() const {
  // Merge ops that share a source line and op name (e.g. the two branches of an if).
  std::map<std::tuple<std::string, int, std::string>, LineStats> merged;
  for (const auto& [op, l] : by_op_) {
    auto& m = merged[{l.file, l.line, l.op}];
    m.file = l.file;
    m.line = l.line;
    m.op = l.op;
    m.pipe = l.pipe;
    m.elements += l.elements;
    m.bytes += l.bytes;
    m.instructions += l.instructions;
    m.busy_cycles += l.busy_cycles;
    m.duration_cycles += l.duration_cycles;
  }
  std::vector<LineStats> out;
  for (auto& [k, l] : merged) out.push_back(l);
  std::stable_sort(out.begin(), out.end(), [](const LineStats& a, const LineStats& b) {
    return a.busy_cycles > b.busy_cycles;
  });
  return out;
}

}  // namespace tilepipe::prof

#include <algorithm>

#include "tilepipe/prof.h"

namespace tilepipe::prof {

bool Recorder::keep(double start, double end) {
  if (!opts_.keep_events || end < opts_.window_begin || start >= opts_.window_end) return false;
  if (instrs_.size() + flags_.size() >= opts_.max_events) {
    truncated_ = true;
    return false;
  }
  return true;
}

void Recorder::on_instr(const sim::InstrEvent& e) {
  auto& l = by_op_[e.op];
  if (l.instructions == 0) {
    l.file = e.op->loc.file;
    l.line = e.op->loc.line;
    l.op = e.op->name;
  }
  ++l.instructions;
  l.busy_cycles += e.occupancy;
  l.duration_cycles += e.end - e.start;
  if (keep(e.start, e.end)) instrs_.push_back(e);
}

void Recorder::on_flag(const sim::FlagEvent& e) {
  if (keep(e.set_time, e.wait_time)) flags_.push_back(e);
}

std::vector<LineStats> Recorder::lines() const {
  // Merge ops that share a source line and op name (e.g. the two branches of an if).
  std::map<std::tuple<std::string, int, std::string>, LineStats> merged;
  for (const auto& [op, l] : by_op_) {
    auto& m = merged[{l.file, l.line, l.op}];
    m.file = l.file;
    m.line = l.line;
    m.op = l.op;
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

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
  if (trace_) trace_->instr(e);
}

void Recorder::on_flag(const sim::FlagEvent& e) {
  if (trace_) trace_->flag(e);
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

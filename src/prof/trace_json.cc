// Chrome trace JSON encoding (docs/cli.md#trace-file), streamed through zlib (gzip'd or
// plain). Written by hand (not through a JSON library) because traces reach hundreds of
// millions of events. Compact on purpose: no indentation, timestamps in integer nanoseconds
// printed as microseconds with at most three decimals (Perfetto's own resolution), only
// non-zero args, track names once at the end.
#include <fmt/format.h>

#include <cmath>

#include "trace_format.h"

namespace tilepipe::prof::trace {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

/// `v` with at most two decimals and no trailing zeros ("12", "12.5").
std::string num(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

/// Nanoseconds as microseconds, with at most three decimals and no trailing zeros.
std::string us_text(int64_t ns) {
  if (ns % 1000 == 0) return std::to_string(ns / 1000);
  std::string s = fmt::format("{}.{:03d}", ns / 1000, ns % 1000);
  while (s.back() == '0') s.pop_back();
  return s;
}

class JsonEncoder : public Encoder {
 public:
  JsonEncoder(const std::string& path, bool gzip) : file_(path, gzip) {
    buf_ = "{\"traceEvents\":[";
  }

  void track(int, const std::string&, int, const std::string&) override {}  // names at the end

  void slice(const Slice& s) override { emit(x_event(s)); }

  void flag(const Slice* set, const Slice* wait, bool cross) override {
    const char* cat = cross ? "cross_flag" : "flag";
    const bool flow = set && wait;
    if (flow) ++flows_;
    if (set) {
      emit(x_event(*set));
      if (flow)
        emit(fmt::format(R"({{"ph":"s","pid":{},"tid":{},"ts":{},"id":{},"name":"{}","cat":"{}"}})",
                         set->core, set->tid, us_text(set->ts), flows_, cat, cat));
    }
    if (wait) {
      emit(x_event(*wait));
      if (flow)
        emit(fmt::format(
            R"({{"ph":"f","bp":"e","pid":{},"tid":{},"ts":{},"id":{},"name":"{}","cat":"{}"}})",
            wait->core, wait->tid, us_text(wait->end), flows_, cat, cat));
    }
  }

  void finish(const RunFacts& f) override {
    for (const auto& c : f.cores) {
      emit(fmt::format(R"({{"ph":"M","pid":{},"name":"process_name","args":{{"name":"{}"}}}})",
                       c.index, c.name));
      emit(fmt::format(
          R"({{"ph":"M","pid":{},"name":"process_sort_index","args":{{"sort_index":{}}}}})",
          c.index, c.index));
      for (const auto& t : c.threads)
        emit(fmt::format(
            R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":"{}"}}}})",
            c.index, t.tid, t.name));
      for (const auto& k : c.counters)
        emit(fmt::format(R"({{"ph":"C","pid":{},"ts":{},"name":"{}","args":{{"bytes":{}}}}})",
                         c.index, us_text(f.counter_ts), k.name, k.bytes));
    }
    std::string cores =
        f.ai_cores.empty() ? "\"all\"" : fmt::format("[{}]", fmt::join(f.ai_cores, ","));
    buf_ += fmt::format(
        "],\n\"displayTimeUnit\":\"ns\",\"otherData\":{{\"tool\":\"tilepipe\",\"kernel\":\"{}\","
        "\"chip\":\"{}\",\"clock_mhz\":{},\"cycles\":{},\"window_cycles\":[{},{}],"
        "\"ai_cores\":{}}}}}\n",
        esc(f.kernel), esc(f.chip), num(f.clock_mhz), num(f.cycles), num(f.window_begin),
        num(f.window_end), cores);
    file_.write(buf_);
    buf_.clear();
    file_.commit();
  }

  int64_t events() const override { return events_; }

 private:
  std::string x_event(const Slice& s) {
    std::string args = fmt::format(R"("line":"{}")", esc(s.op->loc.str()));
    if (s.bytes) args += fmt::format(R"(,"bytes":{})", s.bytes);
    if (s.flops > 0) args += fmt::format(R"(,"flops":{:.0f})", s.flops);
    if (s.waited >= 0) args += fmt::format(R"(,"waited_cycles":{})", num(s.waited));
    return fmt::format(
        R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":"{}","args":{{{}}}}})", s.core,
        s.tid, us_text(s.ts), us_text(s.end - s.ts), esc(s.op->name), args);
  }

  void emit(const std::string& event) {
    if (events_++ > 0) buf_ += ",\n";
    buf_ += event;
    if (buf_.size() < (1 << 20)) return;
    file_.write(buf_);
    buf_.clear();
  }

  TraceFile file_;
  std::string buf_;
  int64_t events_ = 0, flows_ = 0;
};

}  // namespace

std::unique_ptr<Encoder> json_encoder(const std::string& path, bool gzip) {
  return std::make_unique<JsonEncoder>(path, gzip);
}

}  // namespace tilepipe::prof::trace

// What the trace writer (trace.cc) hands to a trace encoding: slices in whole nanoseconds on
// tracks it has laid out, flag hand-offs, and at the end the run's facts. Two encodings
// share it: Chrome trace JSON (trace_json.cc) and Perfetto's protobuf (perfetto.cc). Both
// write through a TraceFile: a temporary beside the path, renamed when complete.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tilepipe/lower.h"

namespace tilepipe::prof::trace {

/// A pipe's threads: sub-tracks 0, 1, ... for its instructions (as many as are in flight at
/// once) and a thread for its flag sets and waits, lane kFlagLane.
constexpr int kFlagLane = -1;
/// Their ids within the core: sub-track L < 15 of pipe P is P x 16 + L and its flags thread
/// P x 16 + 15; sub-tracks from 15 on continue in further blocks of 7 x 16 ids.
inline int tid_of(ir::Pipe p, int lane) {
  const int pipe = static_cast<int>(p);
  if (lane == kFlagLane) return pipe * 16 + 15;
  return lane / 15 * ir::kNumPipes * 16 + pipe * 16 + lane % 15;
}

/// One slice, both ends rounded to whole nanoseconds (the ends, not the duration, so that
/// nesting on a track survives the rounding).
struct Slice {
  int core = 0;  // simulated core: the process (pid)
  int tid = 0;   // tid_of(pipe, lane): the thread within the core
  int64_t ts = 0, end = 0;
  const lower::OpTemplate* op = nullptr;  // name and source line
  int64_t bytes = 0;                      // an arg when not zero
  double flops = 0;                       // an arg when > 0 (a whole number)
  double waited = -1;                     // waits: cycles waited, rounded to 2 decimals; else < 0
};

/// What the end of a trace records: the names of the tracks used, buffer counters, facts.
struct RunFacts {
  struct Thread {
    int tid = 0;
    std::string name;
  };
  struct Counter {
    std::string name;  // "UB bytes allocated"
    int64_t bytes = 0;
  };
  struct Core {
    int index = 0;
    std::string name;
    std::vector<Thread> threads;    // by tid
    std::vector<Counter> counters;  // by scope
  };
  std::vector<Core> cores;  // the cores with events, by index
  int64_t counter_ts = 0;   // ns: counters are set once, shown from the window's start
  std::string kernel, chip;
  double clock_mhz = 0, cycles = 0;
  double window_begin = 0, window_end = 0;  // cycles (the end is the run's when unbounded)
  std::vector<int> ai_cores;                // recorded AI cores; empty = all
};

/// The file being written: a temporary of this process beside `path`, through zlib (gzip
/// level 6 without a time stamp, or plain), renamed to `path` by commit(); removed if the
/// writer is destroyed first, so an interrupted run never leaves a truncated trace.
class TraceFile {
 public:
  TraceFile(const std::string& path, bool gzip);  // throws std::runtime_error naming path
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  void write(std::string_view data);
  void commit();

 private:
  [[noreturn]] void fail(const std::string& why);
  std::string path_, target_, tmp_;  // target_: path_ with its symlink resolved
  int temp_slot_ = -1;               // register_temp's slot: removed on a signal
  void* gz_ = nullptr;               // gzFile
};

/// One encoding of a trace. The writer calls track() before the first slice of a track,
/// slice() for instructions, flag() for each hand-off, then finish() once.
class Encoder {
 public:
  virtual ~Encoder() = default;
  /// A track is used for the first time: thread `tid` ("MTE2 #1") of core `core` ("core3.AIV0").
  virtual void track(int core, const std::string& core_name, int tid, const std::string& name) = 0;
  virtual void slice(const Slice& s) = 0;
  /// A set and the wait that consumed it; either is null when the selection leaves it out.
  /// When both are there a flow joins them (`cross`: the flag went between cores).
  virtual void flag(const Slice* set, const Slice* wait, bool cross) = 0;
  /// Writes what remains and commits the file.
  virtual void finish(const RunFacts& facts) = 0;
  /// Events written: JSON trace events, or protobuf TracePackets (bundles not counted).
  virtual int64_t events() const = 0;
};

std::unique_ptr<Encoder> json_encoder(const std::string& path, bool gzip);
std::unique_ptr<Encoder> perfetto_encoder(const std::string& path);

}  // namespace tilepipe::prof::trace

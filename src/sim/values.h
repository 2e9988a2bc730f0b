// The functional engine's value work on threads: the engine (one thread) decides the order
// of every instruction, as in a sequential run; the executor applies the instructions'
// values on worker threads, one AI core's instructions in that order on one worker. The
// result is the sequential run's, whatever the thread count:
// - the three cores of an AI core share local memories with no one and their GM workspace
//   only through the cross-core flags, so their order within the AI core is all they need;
// - instructions of different AI cores touching the same GM bytes (one writes) keep the
//   engine's order: a page table of the GM tensors some instruction writes makes the later
//   one wait for the earlier one's AI core to have applied it;
// - the engine's own reads of values (a UB scalar, the outputs) wait for the AI core first.
// A group whose values the engine keeps reading back (a scalar read of UB after most few
// instructions: index-driven gathers) is applied on the engine thread from then on: each
// read would otherwise cost two thread hand-offs, more than the instructions in between.
// Once the run's cancel flag is up (SimOptions::cancel) the instructions are skipped, not
// applied, so the engine is not held back by the values; it then reads `skipped()` after
// each drain and stops instead of using the values.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "instr.h"

namespace tilepipe::sim {

/// The bytes an access touches, run by run (a strided access's rows, not the bytes between
/// them, which other AI cores may be writing on their workers meanwhile).
std::vector<uint8_t> access_bytes(const Access& a);

class ValueExecutor {
 public:
  /// `groups` AI cores (at most 64) on `threads` workers (0: execute on the calling thread
  /// at submit). `written_bytes[i]`: the size of GM tensor i where some instruction writes
  /// it, else 0 (only those are ordered). `cancel`: SimOptions::cancel, or null.
  ValueExecutor(int groups, int threads, const std::vector<int64_t>& written_bytes,
                const std::atomic<bool>* cancel = nullptr);
  ~ValueExecutor();
  ValueExecutor(const ValueExecutor&) = delete;
  ValueExecutor& operator=(const ValueExecutor&) = delete;

  /// Applies `in` (operand memories resolved) after every earlier instruction it depends on.
  /// Returns its sequence number in the group (0: applied already, on the calling thread).
  /// With `changed`: a copy whose bytes (access_bytes) are compared before and after;
  /// `*changed` is set when they differ (the race detector's same-value write check).
  uint64_t submit(int group, const Instr& in, std::atomic<bool>* changed = nullptr);
  /// Returns once the group's instructions up to sequence number `seq` have been applied.
  void wait_for(int group, uint64_t seq);
  /// wait_for, for the engine's own read of a value: counts the reads that depend on a
  /// newer instruction than the previous read did, and turns a group that does so often
  /// (kInlineReads per kInlineWindow instructions) to inline application.
  void wait_for_read(int group, uint64_t seq);
  /// Instructions submitted for the group so far (the sequence number of the last).
  uint64_t submitted(int group) const { return groups_[static_cast<size_t>(group)].submitted; }
  /// Returns once every instruction submitted for the group has been applied.
  void drain(int group);
  void drain_all();
  /// Some instruction was skipped (the cancel flag was up): the values are not the run's.
  /// Complete for the instructions of a group once `drain` of it has returned.
  bool skipped() const { return skipped_.load(std::memory_order_acquire); }

 private:
  struct Job {
    int group;
    Instr in;
    std::atomic<bool>* changed;
  };
  struct Worker {
    std::mutex m;
    std::condition_variable more;  // jobs were queued or the executor stops
    std::deque<Job> jobs;
    bool stop = false;
    std::thread thread;
  };
  struct Group {
    Worker* worker = nullptr;        // null: applied on the engine thread at submit
    uint64_t submitted = 0;          // engine thread only
    uint64_t read_seq = 0;           // engine thread only: the last read's dependency
    uint64_t window_start = 0;       // engine thread only: `submitted` when counting began
    uint64_t fresh_reads = 0;        // engine thread only: reads of newer values since
    std::atomic<uint64_t> done = 0;  // applied, in submission order
  };
  /// Last GM access of a page of a written tensor (kPage bytes).
  struct Page {
    int writer = -1;         // AI core of the last write
    uint64_t write_seq = 0;  // its `submitted` count after that write
    uint64_t readers = 0;    // AI cores that read since, a bit each (groups <= 64)
  };
  static constexpr int64_t kPage = 1024;
  // Instructions an AI core may have submitted and not yet applied: bounds the queues'
  // memory where the engine runs ahead of the values.
  static constexpr uint64_t kBehind = 1024;
  static constexpr uint64_t kInlineWindow = 1024;
  static constexpr uint64_t kInlineReads = 32;

  /// Applies `in`, or skips it once the cancel flag is up.
  void apply(const Instr& in, std::atomic<bool>* changed);
  void run(Worker& w);
  void order_gm(int group, const Access& a, bool write, uint64_t seq);

  std::vector<Group> groups_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::vector<Page>> pages_;  // per GM tensor; empty where never written
  const std::atomic<bool>* cancel_;
  std::atomic<bool> skipped_ = false;
};

}  // namespace tilepipe::sim

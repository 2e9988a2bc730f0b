// Perfetto's native protobuf trace encoding (docs/cli.md#trace-file): a `Trace` message,
// i.e. a stream of TracePacket fields, written by hand (protowire.h) and streamed.
//
// What makes it small (the field numbers are Perfetto's, from trace_packet.proto and
// track_event.proto; tests/perfetto_subset.proto declares the subset written here):
// - TrackEvents on packet sequences (trusted_packet_sequence_id): each sequence writes the
//   slices of one track, so its TracePacketDefaults name the track once and its events carry
//   no track; every event packet sets SEQ_NEEDS_INCREMENTAL_STATE, the first packet of a
//   sequence SEQ_INCREMENTAL_STATE_CLEARED;
// - interning: event names, debug annotation names and the `line` strings are InternedData
//   of the sequence, declared with the first packet that uses them; the iids are the same on
//   every sequence, so identical events encode to identical bytes;
// - incremental timestamps: each sequence has its own clock (id 64, sequence-scoped,
//   is_incremental, declared by a ClockSnapshot equal to BOOTTIME at 0), so a packet's
//   timestamp is the nanoseconds since the sequence's previous packet. A slice reported
//   earlier than its track's last event goes to another sequence of the same track whose
//   clock is not past its start (up to kMaxSequences per track), else takes an absolute
//   BOOTTIME timestamp;
// - slices are TYPE_SLICE_BEGIN + TYPE_SLICE_END pairs (args on the begin, the name on
//   both), zero-length ones TYPE_INSTANT; a flow is flow_ids on the set and
//   terminating_flow_ids on the wait's end, its id reused per (set track, wait track) once
//   the flow that held it has ended, so that ids repeat;
// - zlib-compressed bundles (TracePacket.compressed_packets): the packets of one simulated
//   core go through a deflate stream of their own (~0.3 MB of state each), closed into a
//   bundle every kBundleBytes, so the repeats of a core's loops are near each other.
// trace_processor orders events by timestamp, ties in file order: a core's packets keep the
// order they were reported in, and a flow that ends at the nanosecond it starts, across
// cores, has its start written out first. Determinism: nothing depends on the clock or on
// addresses; ids are assigned in event order, bundles written in core order.
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include "protowire.h"
#include "trace_format.h"

namespace tilepipe::prof::trace {
namespace {

using protowire::Writer;

// Field numbers (Perfetto's protos).
namespace f {
constexpr uint32_t kTracePacket = 1;  // Trace.packet
// TracePacket
constexpr uint32_t kClockSnapshot = 6, kTimestamp = 8, kSequenceId = 10, kTrackEvent = 11,
                   kInternedData = 12, kSequenceFlags = 13, kCompressedPackets = 50,
                   kTimestampClockId = 58, kDefaults = 59, kTrackDescriptor = 60,
                   kFirstPacketOnSequence = 87;
// ClockSnapshot / ClockSnapshot.Clock
constexpr uint32_t kClocks = 1, kClockId = 1, kClockTimestamp = 2, kClockIsIncremental = 3;
// TracePacketDefaults / TrackEventDefaults
constexpr uint32_t kDefaultsClockId = 58, kTrackEventDefaults = 11, kDefaultTrackUuid = 11;
// TrackEvent
constexpr uint32_t kDebugAnnotations = 4, kType = 9, kNameIid = 10, kTrackUuid = 11, kName = 23,
                   kCounterValue = 30, kFlowIds = 47, kTerminatingFlowIds = 48;
// DebugAnnotation
constexpr uint32_t kAnnNameIid = 1, kAnnIntValue = 4, kAnnDoubleValue = 5, kAnnStringValue = 6,
                   kAnnName = 10, kAnnArrayValues = 12, kAnnStringValueIid = 17;
// InternedData and its entries (EventName, DebugAnnotationName, InternedString)
constexpr uint32_t kEventNames = 2, kAnnotationNames = 3, kAnnotationStrings = 29, kIid = 1,
                   kInternedName = 2;
// TrackDescriptor, ProcessDescriptor, ThreadDescriptor, CounterDescriptor
constexpr uint32_t kUuid = 1, kTrackName = 2, kProcess = 3, kThread = 4, kParentUuid = 5,
                   kCounter = 8, kSiblingOrderRank = 12, kProcessOrdering = 19;
constexpr uint32_t kPid = 1, kTid = 2, kProcessName = 6, kThreadName = 5, kCounterUnit = 3;
}  // namespace f

enum : uint64_t { kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounterEvent = 4 };
enum : uint64_t { kIncrementalStateCleared = 1, kNeedsIncrementalState = 2 };
constexpr uint64_t kBoottime = 6, kSequenceClock = 64;
constexpr uint64_t kProcessOrderingExplicit = 1, kUnitBytes = 3;

// Debug annotation names, interned with these iids on every sequence.
enum Arg : uint64_t { kLine = 1, kBytes, kFlops, kWaited, kNumArgs };
constexpr std::array<const char*, kNumArgs> kArgNames = {"", "line", "bytes", "flops",
                                                         "waited_cycles"};

constexpr int kMaxSequences = 16;            // per track
constexpr size_t kBundleBytes = 4u << 20;    // raw packets per compressed bundle
constexpr size_t kDeflateInput = 64u << 10;  // raw bytes handed to deflate at a time
constexpr int kLevel = 9;  // 9 % smaller than the default 6, for ~30 % more time writing

// Track uuids: 0 is the root, 1 the run's own track; a core's process track and its threads
// and counters follow from the core index.
constexpr uint64_t kRunTrack = 1;
uint64_t process_uuid(int core) {
  return (static_cast<uint64_t>(core) + 1) << 32;
}
uint64_t thread_uuid(int core, int tid) {
  return process_uuid(core) + 1 + static_cast<uint64_t>(tid);
}
uint64_t counter_uuid(int core, size_t i) {
  return process_uuid(core) + (uint64_t{1} << 31) + i;
}

/// One packet sequence: its id, its clock and what it has interned.
struct Sequence {
  uint32_t id = 0;
  int64_t clock = 0;  // ns of its last timestamp
  std::vector<bool> names, lines;
  uint32_t args = 0;  // bit per Arg
};

/// The packets of one core (or of the run itself) on their way to compressed bundles.
class Bundler {
 public:
  Bundler() = default;
  Bundler(const Bundler&) = delete;
  Bundler& operator=(const Bundler&) = delete;
  ~Bundler() {
    if (open_) deflateEnd(&z_);
  }
  std::string& raw() { return raw_; }
  /// Nothing handed to deflate yet: what was added can still join another bundle.
  bool pending_only() const { return in_bundle_ == 0; }
  /// Compresses what was added; true when the bundle is full and should be written.
  bool add() {
    if (raw_.size() >= kDeflateInput) deflate_raw(Z_NO_FLUSH);
    return in_bundle_ + raw_.size() >= kBundleBytes;
  }
  /// The bundle's compressed bytes (empty if nothing was added); starts the next one.
  std::string close() {
    if (raw_.empty() && in_bundle_ == 0) return {};
    deflate_raw(Z_FINISH);
    deflateReset(&z_);
    in_bundle_ = 0;
    return std::exchange(packed_, {});
  }

 private:
  void deflate_raw(int flush) {
    if (!open_) {
      if (deflateInit2(&z_, kLevel, Z_DEFLATED, 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("zlib: deflateInit2 failed");
      open_ = true;
    }
    z_.next_in = reinterpret_cast<Bytef*>(raw_.data());
    z_.avail_in = static_cast<uInt>(raw_.size());
    int rc = Z_OK;
    do {
      const size_t at = packed_.size();
      packed_.resize(at + std::max<size_t>(raw_.size() / 4, 1 << 12));
      z_.next_out = reinterpret_cast<Bytef*>(packed_.data() + at);
      z_.avail_out = static_cast<uInt>(packed_.size() - at);
      rc = deflate(&z_, flush);
      packed_.resize(packed_.size() - z_.avail_out);
    } while (z_.avail_in > 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    in_bundle_ += raw_.size();
    raw_.clear();
  }

  z_stream z_{};
  bool open_ = false;
  std::string raw_, packed_;
  size_t in_bundle_ = 0;
};

class PerfettoEncoder : public Encoder {
 public:
  explicit PerfettoEncoder(const std::string& path) : file_(path, false) {
    // The root track asks for processes in the order of their rank (the core index).
    std::string head;
    Writer w(head);
    const size_t packet = w.begin(f::kTracePacket);
    const size_t td = w.begin(f::kTrackDescriptor);
    w.varint(f::kUuid, 0);
    w.varint(f::kProcessOrdering, kProcessOrderingExplicit);
    w.end(td);
    w.end(packet);
    ++packets_;
    file_.write(head);
  }

  void track(int core, const std::string& core_name, int tid, const std::string& name) override {
    auto& c = core_state(core);
    c.name = core_name;
    if (c.tracks.size() <= static_cast<size_t>(tid)) c.tracks.resize(static_cast<size_t>(tid) + 1);
    c.tracks[static_cast<size_t>(tid)].name = name;
  }

  void slice(const Slice& s) override { write_slice(s, 0, 0); }

  void flag(const Slice* set, const Slice* wait, bool cross) override {
    uint64_t id = 0;
    if (set && wait) id = flow_id(*set, *wait);
    if (set) {
      write_slice(*set, id, 0);
      // Flows are matched in time order, ties in file order: a flow ending at the very
      // nanosecond it starts, on another core, needs its start written out first.
      if (id && cross && set->ts == wait->end) flush(core_state(set->core));
    }
    if (wait) write_slice(*wait, 0, id);
  }

  void finish(const RunFacts& facts) override {
    // The last bundle gathers the cores' last packets while they are small (all of a small
    // run's: one deflate stream, not one per core), then the run's own packets: buffer
    // counters and the run's facts.
    Bundler run;
    for (auto& c : cores_) {
      if (!c) continue;
      if (c->bundle.pending_only()) {
        run.raw() += c->bundle.raw();
        c->bundle.raw().clear();
      } else {
        flush(*c);
      }
    }
    Writer w(run.raw());
    auto packet = [&](auto&& body) {
      const size_t p = w.begin(f::kTracePacket);
      body();
      w.end(p);
      ++packets_;
    };
    const uint32_t seq = ++sequences_;
    packet([&] {
      w.varint(f::kSequenceId, seq);
      w.boolean(f::kFirstPacketOnSequence, true);
      w.varint(f::kSequenceFlags, kIncrementalStateCleared);
      const size_t td = w.begin(f::kTrackDescriptor);
      w.varint(f::kUuid, kRunTrack);
      w.bytes(f::kTrackName, "tilepipe");
      w.end(td);
    });
    for (const auto& c : facts.cores)
      for (size_t i = 0; i < c.counters.size(); ++i) {
        packet([&] {
          const size_t td = w.begin(f::kTrackDescriptor);
          w.varint(f::kUuid, counter_uuid(c.index, i));
          w.varint(f::kParentUuid, process_uuid(c.index));
          w.bytes(f::kTrackName, c.counters[i].name);
          const size_t cd = w.begin(f::kCounter);
          w.varint(f::kCounterUnit, kUnitBytes);
          w.end(cd);
          w.end(td);
        });
        packet([&] {
          w.varint(f::kTimestamp, static_cast<uint64_t>(facts.counter_ts));
          const size_t te = w.begin(f::kTrackEvent);
          w.varint(f::kType, kCounterEvent);
          w.varint(f::kTrackUuid, counter_uuid(c.index, i));
          w.int64(f::kCounterValue, c.counters[i].bytes);
          w.end(te);
          w.varint(f::kSequenceId, seq);
        });
      }
    packet([&] {
      w.varint(f::kTimestamp, static_cast<uint64_t>(facts.counter_ts));
      w.varint(f::kSequenceId, seq);
      const size_t te = w.begin(f::kTrackEvent);
      w.varint(f::kType, kInstant);
      w.varint(f::kTrackUuid, kRunTrack);
      w.bytes(f::kName, "run");
      auto arg = [&](const char* name, auto&& value) {
        const size_t a = w.begin(f::kDebugAnnotations);
        w.bytes(f::kAnnName, name);
        value();
        w.end(a);
      };
      arg("tool", [&] { w.bytes(f::kAnnStringValue, "tilepipe"); });
      arg("kernel", [&] { w.bytes(f::kAnnStringValue, facts.kernel); });
      arg("chip", [&] { w.bytes(f::kAnnStringValue, facts.chip); });
      arg("clock_mhz", [&] { w.float64(f::kAnnDoubleValue, facts.clock_mhz); });
      arg("cycles", [&] { w.float64(f::kAnnDoubleValue, facts.cycles); });
      arg("window_cycles", [&] {
        for (double v : {facts.window_begin, facts.window_end}) {
          const size_t e = w.begin(f::kAnnArrayValues);
          w.float64(f::kAnnDoubleValue, v);
          w.end(e);
        }
      });
      arg("ai_cores", [&] {
        if (facts.ai_cores.empty()) w.bytes(f::kAnnStringValue, "all");
        for (int ai : facts.ai_cores) {
          const size_t e = w.begin(f::kAnnArrayValues);
          w.int64(f::kAnnIntValue, ai);
          w.end(e);
        }
      });
      w.end(te);
    });
    run.add();
    write_bundle(run.close());
    file_.commit();
  }

  int64_t events() const override { return packets_; }

 private:
  struct Track {
    std::string name;  // empty until announced
    bool described = false;
    std::vector<Sequence> seqs;
  };
  struct Core {
    int index = 0;
    std::string name;
    bool described = false;
    std::vector<Track> tracks;  // by tid (a track's sequences stay put when it moves)
    Bundler bundle;
  };
  struct OpIids {
    uint64_t name = 0, line = 0;
  };
  struct Channel {
    uint64_t index = 0;
    std::vector<int64_t> busy_until;  // per slot: the end of the last flow that held it
  };

  Core& core_state(int core) {
    if (cores_.size() <= static_cast<size_t>(core)) cores_.resize(static_cast<size_t>(core) + 1);
    auto& c = cores_[static_cast<size_t>(core)];
    if (!c) {
      c = std::make_unique<Core>();
      c->index = core;
    }
    return *c;
  }

  /// A flow id that no flow overlapping [set.ts, wait.end] holds: per pair of tracks, the
  /// first slot whose last flow ended strictly before this one starts.
  uint64_t flow_id(const Slice& set, const Slice& wait) {
    auto track_key = [](const Slice& s) {  // cores and thread ids are far below 2^16
      return (static_cast<uint64_t>(s.core) << 16) | static_cast<uint64_t>(s.tid);
    };
    const uint64_t key = (track_key(set) << 32) | track_key(wait);
    auto [it, fresh] = channels_.try_emplace(key);
    if (fresh) it->second.index = channels_.size();
    auto& slots = it->second.busy_until;
    size_t slot = 0;
    while (slot < slots.size() && slots[slot] >= set.ts) ++slot;
    if (slot == slots.size()) slots.push_back(0);
    slots[slot] = std::max(slots[slot], wait.end);
    return (it->second.index << 20) + slot + 1;
  }

  OpIids iids(const lower::OpTemplate* op) {
    auto [it, fresh] = ops_.try_emplace(op);
    if (fresh) {
      auto intern = [](std::unordered_map<std::string, uint64_t>& table,
                       std::vector<std::string>& by_iid, const std::string& s) {
        auto [t, added] = table.try_emplace(s, table.size() + 1);
        if (added) by_iid.push_back(s);
        return t->second;
      };
      it->second = {intern(names_, name_strings_, op->name),
                    intern(lines_, line_strings_, op->loc.str())};
    }
    return it->second;
  }

  /// The sequence of track `t` to write a slice starting at `ts` on: the one whose clock is
  /// latest but not past `ts`; a new one while the track has fewer than kMaxSequences; null
  /// if none can take it (the slice then takes absolute timestamps on the first).
  Sequence* sequence(Core& c, int tid, int64_t ts) {
    auto& t = c.tracks[static_cast<size_t>(tid)];
    Sequence* best = nullptr;
    for (auto& s : t.seqs)
      if (s.clock <= ts && (!best || s.clock > best->clock)) best = &s;
    if (best || t.seqs.size() >= kMaxSequences) return best;
    t.seqs.reserve(kMaxSequences);  // no reallocation: callers hold pointers
    auto& s = t.seqs.emplace_back();
    s.id = ++sequences_;
    Writer w(c.bundle.raw());
    const size_t p = w.begin(f::kTracePacket);
    w.varint(f::kSequenceId, s.id);
    w.boolean(f::kFirstPacketOnSequence, true);
    w.varint(f::kSequenceFlags, kIncrementalStateCleared);
    const size_t d = w.begin(f::kDefaults);
    w.varint(f::kDefaultsClockId, kSequenceClock);
    const size_t ted = w.begin(f::kTrackEventDefaults);
    w.varint(f::kDefaultTrackUuid, thread_uuid(c.index, tid));
    w.end(ted);
    w.end(d);
    const size_t cs = w.begin(f::kClockSnapshot);
    for (uint64_t id : {kBoottime, kSequenceClock}) {
      const size_t clk = w.begin(f::kClocks);
      w.varint(f::kClockId, id);
      w.varint(f::kClockTimestamp, 0);
      if (id == kSequenceClock) w.boolean(f::kClockIsIncremental, true);
      w.end(clk);
    }
    w.end(cs);
    w.end(p);
    ++packets_;
    return &s;
  }

  /// The process and thread descriptors of a track, before its first event (at `ts`).
  void describe(Core& c, int tid, int64_t ts) {
    auto& t = c.tracks[static_cast<size_t>(tid)];
    if (t.described) return;
    Writer w(c.bundle.raw());
    if (!c.described) {
      c.described = true;
      const size_t p = w.begin(f::kTracePacket);
      w.varint(f::kTimestamp, static_cast<uint64_t>(ts));
      const size_t td = w.begin(f::kTrackDescriptor);
      w.varint(f::kUuid, process_uuid(c.index));
      const size_t pd = w.begin(f::kProcess);
      w.varint(f::kPid, static_cast<uint64_t>(c.index));
      w.bytes(f::kProcessName, c.name);
      w.end(pd);
      w.varint(f::kSiblingOrderRank, static_cast<uint64_t>(c.index));
      w.end(td);
      w.end(p);
      ++packets_;
    }
    t.described = true;
    const size_t p = w.begin(f::kTracePacket);
    w.varint(f::kTimestamp, static_cast<uint64_t>(ts));
    const size_t td = w.begin(f::kTrackDescriptor);
    w.varint(f::kUuid, thread_uuid(c.index, tid));
    w.varint(f::kParentUuid, process_uuid(c.index));
    const size_t th = w.begin(f::kThread);
    w.varint(f::kPid, static_cast<uint64_t>(c.index));
    w.varint(f::kTid, static_cast<uint64_t>(tid));
    w.bytes(f::kThreadName, t.name);
    w.end(th);
    w.end(td);
    w.end(p);
    ++packets_;
  }

  /// A slice: its begin (or instant) and end packets. `flow_out` / `flow_in`: a flow id
  /// starting at the slice / ending at its end (0: none).
  void write_slice(const Slice& s, uint64_t flow_out, uint64_t flow_in) {
    Core& c = core_state(s.core);
    describe(c, s.tid, s.ts);
    Sequence* seq = sequence(c, s.tid, s.ts);
    const bool absolute = !seq;
    if (absolute) seq = &c.tracks[static_cast<size_t>(s.tid)].seqs.front();
    const OpIids ids = iids(s.op);
    Writer w(c.bundle.raw());
    auto timestamp = [&](int64_t ts) {
      if (absolute) {
        w.varint(f::kTimestampClockId, kBoottime);
        w.varint(f::kTimestamp, static_cast<uint64_t>(ts));
      } else {
        w.varint(f::kTimestamp, static_cast<uint64_t>(ts - seq->clock));
        seq->clock = ts;
      }
    };
    const bool instant = s.end == s.ts;
    size_t p = w.begin(f::kTracePacket);
    timestamp(s.ts);
    size_t te = w.begin(f::kTrackEvent);
    w.varint(f::kType, instant ? kInstant : kSliceBegin);
    w.varint(f::kNameIid, ids.name);
    auto arg = [&](Arg a, auto&& value) {
      const size_t d = w.begin(f::kDebugAnnotations);
      w.varint(f::kAnnNameIid, a);
      value();
      w.end(d);
    };
    uint32_t args = 1u << kLine;
    arg(kLine, [&] { w.varint(f::kAnnStringValueIid, ids.line); });
    if (s.bytes) {
      args |= 1u << kBytes;
      arg(kBytes, [&] { w.int64(f::kAnnIntValue, s.bytes); });
    }
    if (s.flops > 0) {
      args |= 1u << kFlops;
      arg(kFlops, [&] { w.int64(f::kAnnIntValue, std::llround(s.flops)); });
    }
    if (s.waited >= 0) {
      args |= 1u << kWaited;
      arg(kWaited, [&] {
        // Whole numbers as integers, as the JSON trace prints them.
        if (s.waited == std::floor(s.waited) && s.waited < 9e15)
          w.int64(f::kAnnIntValue, static_cast<int64_t>(s.waited));
        else
          w.float64(f::kAnnDoubleValue, s.waited);
      });
    }
    if (flow_out) w.fixed64(f::kFlowIds, flow_out);
    if (flow_in && instant) w.fixed64(f::kTerminatingFlowIds, flow_in);
    w.end(te);
    w.varint(f::kSequenceId, seq->id);
    w.varint(f::kSequenceFlags, kNeedsIncrementalState);
    intern(w, *seq, ids, args);
    w.end(p);
    ++packets_;
    if (!instant) {
      p = w.begin(f::kTracePacket);
      timestamp(s.end);
      te = w.begin(f::kTrackEvent);
      w.varint(f::kType, kSliceEnd);
      // The name again: trace_processor ends the innermost open slice of that name, so a
      // slice reported late that ends where another one begins still ends itself.
      w.varint(f::kNameIid, ids.name);
      if (flow_in) w.fixed64(f::kTerminatingFlowIds, flow_in);
      w.end(te);
      w.varint(f::kSequenceId, seq->id);
      w.varint(f::kSequenceFlags, kNeedsIncrementalState);
      w.end(p);
      ++packets_;
    }
    if (c.bundle.add()) write_bundle(c.bundle.close());
  }

  /// InternedData for what this packet uses that its sequence has not declared yet.
  void intern(Writer& w, Sequence& seq, OpIids ids, uint32_t args) {
    const bool name = ids.name >= seq.names.size() || !seq.names[ids.name];
    const bool line = ids.line >= seq.lines.size() || !seq.lines[ids.line];
    const uint32_t new_args = args & ~seq.args;
    if (!name && !line && !new_args) return;
    const size_t in = w.begin(f::kInternedData);
    auto entry = [&](uint32_t field, uint64_t iid, const std::string& s) {
      const size_t e = w.begin(field);
      w.varint(f::kIid, iid);
      w.bytes(f::kInternedName, s);
      w.end(e);
    };
    if (name) {
      if (seq.names.size() <= ids.name) seq.names.resize(ids.name + 1);
      seq.names[ids.name] = true;
      entry(f::kEventNames, ids.name, name_strings_[ids.name - 1]);
    }
    for (uint64_t a = 1; a < kNumArgs; ++a)
      if (new_args & (1u << a)) entry(f::kAnnotationNames, a, kArgNames[a]);
    seq.args |= new_args;
    if (line) {
      if (seq.lines.size() <= ids.line) seq.lines.resize(ids.line + 1);
      seq.lines[ids.line] = true;
      entry(f::kAnnotationStrings, ids.line, line_strings_[ids.line - 1]);
    }
    w.end(in);
  }

  void flush(Core& c) { write_bundle(c.bundle.close()); }

  void write_bundle(const std::string& packed) {
    if (packed.empty()) return;
    // TracePacket { compressed_packets: packed }, its length known up front.
    std::string field;
    Writer w(field);
    w.tag(f::kCompressedPackets, protowire::kLengthDelimited);
    protowire::put_varint(field, packed.size());
    std::string head;
    Writer(head).tag(f::kTracePacket, protowire::kLengthDelimited);
    protowire::put_varint(head, field.size() + packed.size());
    head += field;
    file_.write(head);
    file_.write(packed);
  }

  TraceFile file_;
  std::vector<std::unique_ptr<Core>> cores_;
  std::unordered_map<const lower::OpTemplate*, OpIids> ops_;
  std::unordered_map<std::string, uint64_t> names_, lines_;
  std::vector<std::string> name_strings_, line_strings_;  // by iid - 1
  std::unordered_map<uint64_t, Channel> channels_;
  uint32_t sequences_ = 0;
  int64_t packets_ = 0;
};

}  // namespace

std::unique_ptr<Encoder> perfetto_encoder(const std::string& path) {
  return std::make_unique<PerfettoEncoder>(path);
}

}  // namespace tilepipe::prof::trace

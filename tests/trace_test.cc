// The Chrome trace a run writes loads in trace_processor-compatible form: read back
// (through zlib, plain or gzip'd), it is one JSON object whose events follow the Chrome
// trace event schema that Perfetto's JSON importer reads (phases X, s/f, M, C with their
// fields), every track is named, slices on a track nest, every flow has one start and one
// end, even with ~30 copies in flight on one pipe; --trace-window and --trace-cores keep only
// what they select; the same run gives a byte-identical file. The Perfetto protobuf trace
// (.pftrace) is chosen by name and deterministic here; its content is compared with the
// JSON trace's by python/tests/test_perfetto_trace.py.
#include <gtest/gtest.h>
#include <zlib.h>

#include <map>
#include <set>

#include "cli_util.h"

namespace tilepipe {
namespace {

using namespace clitest;

/// The file's text, decompressed if it is gzip'd (zlib reads plain files as they are).
std::string read_trace(const fs::path& p) {
  gzFile f = gzopen(p.c_str(), "rb");
  EXPECT_NE(f, nullptr) << p;
  if (!f) return "";
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return text;
}

bool is_gzip(const fs::path& p) {
  std::string head = read_text(p).substr(0, 2);
  return head == "\x1f\x8b";
}

struct Checked {
  size_t slices = 0, flows = 0;
  std::set<int> pids;
  double first_us = 1e300, last_us = -1;  // slice starts / ends
};

/// Checks the schema, names, nesting and flows; returns what it saw.
Checked check_trace(const json& t) {
  Checked c;
  EXPECT_TRUE(t.contains("otherData") && t["otherData"].contains("cycles"));
  const auto& evs = t.at("traceEvents");
  EXPECT_TRUE(evs.is_array());
  std::set<std::pair<int, int>> named;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;
  std::map<int64_t, std::pair<int, int>> flows;  // id -> (starts, ends)
  for (const auto& e : evs) {
    const std::string ph = e.at("ph");
    EXPECT_TRUE(e.at("name").is_string()) << e;
    EXPECT_TRUE(e.at("pid").is_number_integer()) << e;
    if (ph == "M") {
      if (e["name"] == "thread_name") named.insert({e["pid"].get<int>(), e.at("tid").get<int>()});
      EXPECT_TRUE(e.at("args").contains(e["name"] == "process_sort_index" ? "sort_index" : "name"))
          << e;
      continue;
    }
    EXPECT_TRUE(e.at("ts").is_number()) << e;
    EXPECT_GE(e["ts"].get<double>(), 0) << e;
    if (ph == "C") {
      EXPECT_TRUE(e.at("args").is_object()) << e;
      continue;
    }
    EXPECT_TRUE(e.at("tid").is_number_integer()) << e;
    if (ph == "X") {
      double ts = e["ts"], dur = e.at("dur");
      EXPECT_GE(dur, 0) << e;
      tracks[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({ts, ts + dur});
      c.pids.insert(e["pid"].get<int>());
      c.first_us = std::min(c.first_us, ts);
      c.last_us = std::max(c.last_us, ts + dur);
      ++c.slices;
    } else if (ph == "s" || ph == "f") {
      auto& f = flows[e.at("id").get<int64_t>()];
      (ph == "s" ? f.first : f.second) += 1;
      if (ph == "f") {
        EXPECT_EQ(e.at("bp"), "e") << e;
      }
    } else {
      ADD_FAILURE() << "unexpected phase: " << e;
    }
  }
  for (auto& [track, slices] : tracks) {
    EXPECT_TRUE(named.count(track))
        << "track " << track.first << "/" << track.second << " has no thread_name";
    // Sorted as viewers sort (start, then longer first); each slice must end by the end of
    // every slice it starts inside (1 ns slack for the printed precision).
    std::sort(slices.begin(), slices.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> open;
    for (const auto& [b, e] : slices) {
      while (!open.empty() && open.back() <= b + 1e-3) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(e, open.back() + 1e-3) << "slices overlap on track " << track.first << "/"
                                         << track.second << " at " << b << " us";
      }
      open.push_back(e);
    }
  }
  for (const auto& [id, f] : flows) {
    EXPECT_EQ(f, std::make_pair(1, 1)) << "flow " << id;
    ++c.flows;
  }
  return c;
}

const std::string kRun = "run fa --variant expert --mode timing --param S=512 --param H=2";

TEST(Trace, GzipAndPlainHoldTheSameEventsInChromeTraceSchema) {
  const fs::path gz = scratch().file("t.json.gz"), plain = scratch().file("t.json");
  ASSERT_EQ(cli(kRun + " --trace '" + gz.string() + "'").code, 0);
  ASSERT_EQ(cli(kRun + " --trace '" + plain.string() + "'").code, 0);
  EXPECT_TRUE(is_gzip(gz));
  EXPECT_FALSE(is_gzip(plain));
  std::string text = read_trace(gz);
  EXPECT_EQ(text, read_text(plain));
  EXPECT_LT(fs::file_size(gz) * 5, fs::file_size(plain)) << "gzip should shrink it";
  Checked c = check_trace(json::parse(text));
  EXPECT_GT(c.slices, 1000u);
  EXPECT_GT(c.flows, 100u);
  EXPECT_EQ(c.pids.size(), 24u * 3u);  // every AI core's AIC and two AIVs
  // msprof track names.
  for (const char* name : {"\"CUBE\"", "\"VECTOR\"", "\"MTE2\"", "\"FIXP\"", "\"SCALAR\""})
    EXPECT_NE(text.find(name), std::string::npos) << name;
  // Deterministic: the same run gives a byte-identical compressed file.
  const fs::path again = scratch().file("t2.json.gz");
  ASSERT_EQ(cli(kRun + " --trace '" + again.string() + "'").code, 0);
  EXPECT_EQ(read_text(gz), read_text(again));
}

TEST(Trace, WindowAndCoresKeepOnlyWhatTheySelect) {
  const fs::path f = scratch().file("w.json.gz");
  CliResult r =
      cli(kRun + " --trace '" + f.string() + "' --trace-window 9us:13us --trace-cores 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json out = json::parse(r.out);
  json t = json::parse(read_trace(f));
  Checked c = check_trace(t);
  EXPECT_GT(c.slices, 10u);
  EXPECT_EQ(out.at("trace_events").get<size_t>(), t["traceEvents"].size());
  // Only AI core 1: its AIC and AIVs.
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"].get<std::string>().rfind("core1.", 0), 0u) << e;
    }
  // Every slice overlaps [9, 13) us (the run takes 16.6 us, the first 5 the launch).
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "X") {
      EXPECT_GE(e["ts"].get<double>() + e["dur"].get<double>(), 9 - 1e-3) << e;
      EXPECT_LT(e["ts"].get<double>(), 13) << e;
    }
  EXPECT_LT(c.first_us, 9.5);
  EXPECT_GT(c.last_us, 12.5);
}

TEST(Trace, ManyInFlightCopiesSpillOntoAsManySubTracksAndStillNest) {
  // SFA's automatic variant keeps ~30 small gathers in flight on MTE2: each gets a sub-track
  // (past the 15 of the first block of thread ids), none overlaps another on one track.
  const fs::path f = scratch().file("sfa.json");
  ASSERT_EQ(cli("run sfa --variant auto --mode timing --trace '" + f.string() + "'").code, 0);
  json t = json::parse(read_trace(f));
  Checked c = check_trace(t);
  EXPECT_GT(c.slices, 10000u);
  std::set<std::string> mte2;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 1 &&
        e["args"]["name"].get<std::string>().rfind("MTE2 #", 0) == 0)
      mte2.insert(e["args"]["name"].get<std::string>());
  EXPECT_GT(mte2.size(), 15u);
  EXPECT_TRUE(mte2.count("MTE2 #15"));
}

// The protobuf encoding's content is checked against the JSON trace of the same run by
// python/tests/test_perfetto_trace.py (decoded through protoc); here: it is chosen by the file
// name, deterministic, and much smaller than the gzip'd JSON.
TEST(Trace, PftraceIsADeterministicPerfettoProtobufSmallerThanGzipJson) {
  const fs::path pf = scratch().file("t.pftrace"), again = scratch().file("t2.perfetto-trace"),
                 gz = scratch().file("t3.json.gz");
  CliResult r = cli(kRun + " --trace '" + pf.string() + "' --json");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(cli(kRun + " --trace '" + again.string() + "'").code, 0);
  ASSERT_EQ(cli(kRun + " --trace '" + gz.string() + "'").code, 0);
  const std::string bytes = read_text(pf);
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(bytes[0], '\x0a');  // Trace.packet (field 1, length-delimited)
  EXPECT_FALSE(is_gzip(pf));    // compressed inside (compressed_packets), not around
  EXPECT_EQ(bytes, read_text(again));
  EXPECT_LT(fs::file_size(pf), fs::file_size(gz));  // even this small (much smaller when long)
  EXPECT_GT(json::parse(r.out).at("trace_events").get<int64_t>(), 5000);
}

TEST(Trace, SelectionFlagsAreCheckedBeforeTheRun) {
  expect_bad_input("run gemm --trace-window 0:100", {"--trace-window", "add --trace FILE"});
  expect_bad_input("run gemm --trace t.json --trace-window 5us:2us",
                   {"--trace-window '5us:2us'", "START < END"});
  expect_bad_input("run gemm --trace t.json --trace-window 1:2ms", {"'us' suffix"});
  expect_bad_input("run gemm --trace t.json --trace-cores 3-1", {"--trace-cores '3-1'", "[0, 23]"});
  expect_bad_input("run gemm --trace t.json --trace-cores 24", {"e.g. --trace-cores 0,5-7"});
  expect_bad_input("run gemm --trace t.pftrace.gz",
                   {"--trace 't.pftrace.gz'", "compressed inside already", "drop the '.gz'"});
}

}  // namespace
}  // namespace tilepipe

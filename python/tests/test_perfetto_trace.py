"""The Perfetto protobuf trace (`--trace FILE.pftrace`) read back independently of the writer.

The file is decoded with protoc's Python code for tests/perfetto_subset.proto (our own
declaration of the part of Perfetto's schema we write, with Perfetto's field numbers) and
interpreted the way trace_processor does: compressed_packets bundles inflated, interning
and TracePacketDefaults per sequence (reset by SEQ_INCREMENTAL_STATE_CLEARED), timestamps
of sequence-scoped incremental clocks accumulated and mapped to BOOTTIME through their
ClockSnapshot, events ordered by timestamp (ties in file order), slices made of
BEGIN/END pairs on a per-track stack, flows matched by id (flow_ids starts or steps,
terminating_flow_ids ends). The result must be exactly the content of the JSON trace of
the same run: the same slices (track, name, start, end, args), flows, track names,
counters and run facts.
"""

import collections
import gzip
import importlib
import json
import os
import subprocess
import sys
import zlib

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "tilepipe")
RUN = ["run", "fa", "--variant", "expert", "--mode", "timing", "--param", "S=512",
       "--param", "H=2"]

BOOTTIME = 6


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    """The Python module protoc makes of tests/perfetto_subset.proto."""
    out = tmp_path_factory.mktemp("proto")
    try:
        subprocess.run(["protoc", f"--python_out={out}", f"-I{ROOT}/tests",
                        f"{ROOT}/tests/perfetto_subset.proto"], check=True)
    except FileNotFoundError:
        pytest.fail("protoc is missing: scripts/setup.sh installs protobuf-compiler")
    sys.path.insert(0, str(out))
    try:
        return importlib.import_module("perfetto_subset_pb2")
    finally:
        sys.path.remove(str(out))


def run_traced(path, *extra, run=RUN):
    r = subprocess.run([CLI, *run, "--trace", str(path), "--json", *extra],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# ---- the protobuf side ----------------------------------------------------------------------

def unknown_fields(msg):
    """Field numbers the subset does not declare, anywhere in `msg`."""
    found = [f[0] for f in msg.UnknownFields()]
    for desc, value in msg.ListFields():
        if desc.message_type is None:
            continue
        for m in (value if desc.label == desc.LABEL_REPEATED else [value]):
            found += unknown_fields(m)
    return found


def packets(pb, data, stats):
    """Every TracePacket of a Trace, bundles inflated in place (in file order)."""
    trace = pb.Trace()
    trace.ParseFromString(data)
    for p in trace.packet:
        if p.HasField("compressed_packets"):
            stats["bundles"] += 1
            yield from packets(pb, zlib.decompress(p.compressed_packets, 32 + 15), stats)
        else:
            yield p


class Sequence:
    def __init__(self):
        self.cleared = False
        self.clear()

    def clear(self):
        self.names, self.arg_names, self.strings = {}, {}, {}
        self.defaults = None
        self.clocks = {}  # clock id -> its snapshot and value


def decode_pftrace(pb, path):
    """The trace as trace_processor would import it: slices, flows, tracks, counters, facts."""
    with open(path, "rb") as fh:
        data = fh.read()
    stats = collections.Counter()
    seqs = collections.defaultdict(Sequence)
    threads, processes, counter_tracks, named = {}, {}, {}, {}
    events = []  # (ts, order, packet's track event, its track, its sequence's interning)
    for order, p in enumerate(packets(pb, data, stats)):
        stats["packets"] += 1
        assert not unknown_fields(p), f"fields outside the subset: {unknown_fields(p)}"
        seq = seqs[p.trusted_packet_sequence_id]
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            seq.clear()
            seq.cleared = True
        if p.HasField("trace_packet_defaults"):
            seq.defaults = p.trace_packet_defaults
        for n in p.interned_data.event_names:
            seq.names[n.iid] = n.name
        for n in p.interned_data.debug_annotation_names:
            seq.arg_names[n.iid] = n.name
        for s in p.interned_data.debug_annotation_string_values:
            seq.strings[s.iid] = s.str.decode()
        if p.HasField("clock_snapshot"):
            assert p.trusted_packet_sequence_id, "sequence-scoped clocks need a sequence"
            boot = {c.clock_id: c.timestamp for c in p.clock_snapshot.clocks}[BOOTTIME]
            for c in p.clock_snapshot.clocks:
                seq.clocks[c.clock_id] = {"snap": c.timestamp, "boot": boot, "value": c.timestamp,
                                          "incremental": c.is_incremental}
            stats["clock_snapshots"] += 1
            continue
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.HasField("thread"):
                threads[d.uuid] = (d.thread.pid, d.thread.tid)
                named[(d.thread.pid, d.thread.tid)] = d.thread.thread_name
            elif d.HasField("process"):
                processes[d.process.pid] = d.process.process_name
            elif d.HasField("counter"):
                counter_tracks[d.uuid] = d.name
            continue
        if not p.HasField("track_event"):
            continue
        e = p.track_event
        if e.HasField("name_iid") or e.type in (1, 2):
            # Interned or incremental: the sequence must say it needs, and has, the state.
            assert p.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE, p
            assert seq.cleared, "incremental state used before SEQ_INCREMENTAL_STATE_CLEARED"
        clock = p.timestamp_clock_id or (seq.defaults.timestamp_clock_id if seq.defaults else 0)
        if clock in (0, BOOTTIME):
            ts = p.timestamp
        else:
            c = seq.clocks[clock]
            assert c["incremental"] and 64 <= clock < 128, "sequence-scoped incremental clocks"
            c["value"] += p.timestamp  # a delta since the sequence's previous timestamp
            ts = c["value"] - c["snap"] + c["boot"]
            stats["incremental"] += 1
        track = e.track_uuid if e.HasField("track_uuid") else \
            seq.defaults.track_event_defaults.track_uuid
        events.append((ts, order, e, track, seq))

    # trace_processor sorts by timestamp, ties in file order, then builds slices per track
    # with a stack (its SliceTracker): slices that ended are popped when an event comes at or
    # after their end; an END closes the innermost open slice of its name. What it would
    # truncate or drop (a slice ending inside an open one's child, a partial overlap) fails.
    events.sort(key=lambda x: (x[0], x[1]))
    slices, flows, counters, facts = [], [], [], {}
    stacks = collections.defaultdict(list)
    active = {}  # flow id -> slice

    def close_stack(stack, ts, dur):  # dur None: a BEGIN or an END (open-ended)
        open_above = False
        for s in reversed(list(stack)):
            if s["end"] is None:
                open_above = True
                continue
            if open_above:
                assert ts <= s["end"], f"{s} would end its open children early at {ts}"
                continue
            if s["end"] < ts or (s["end"] == ts and not (s["end"] == s["start"] and dur == 0)):
                assert stack[-1] is s
                stack.pop()
                continue
            assert dur is None or not (ts < s["end"] < ts + dur), f"overlaps {s} at {ts}"

    def args_of(e, seq):
        out = {}
        for a in e.debug_annotations:
            name = seq.arg_names[a.name_iid] if a.HasField("name_iid") else a.name
            kind = a.WhichOneof("value")
            if kind == "string_value_iid":
                out[name] = seq.strings[a.string_value_iid]
            elif kind is not None:
                out[name] = getattr(a, kind)
            else:
                out[name] = [getattr(v, v.WhichOneof("value")) for v in a.array_values]
        return out

    def flows_at(e, s):
        for fid in e.flow_ids:
            if fid in active:
                flows.append((active[fid], s))
            active[fid] = s
        for fid in e.terminating_flow_ids:
            if fid in active:
                flows.append((active.pop(fid), s))

    for ts, _, e, track, seq in events:
        if e.type == e.TYPE_COUNTER:
            counters.append((counter_tracks[track], ts, e.counter_value))
            continue
        name = seq.names[e.name_iid] if e.HasField("name_iid") else (e.name or None)
        if track not in threads:  # the run's own track
            assert e.type == e.TYPE_INSTANT and name == "run"
            facts = args_of(e, seq)
            continue
        stack = stacks[track]
        close_stack(stack, ts, None if e.type != e.TYPE_INSTANT else 0)
        if e.type == e.TYPE_SLICE_END:
            match = [s for s in stack if s["end"] is None and name in (None, s["name"])]
            assert match, f"END without an open slice on {threads[track]} at {ts}"
            s = match[-1]
            s["end"] = ts
            if stack[-1] is s:
                stack.pop()
            s["args"].update(args_of(e, seq))
            flows_at(e, s)
            continue
        s = {"track": threads[track], "name": name, "start": ts,
             "end": ts if e.type == e.TYPE_INSTANT else None, "args": args_of(e, seq)}
        slices.append(s)
        stack.append(s)
        flows_at(e, s)
    assert all(s["end"] is not None for s in slices), "slices left open"
    assert not active, "flows left open"
    return {"slices": slices, "flows": flows, "threads": named, "processes": processes,
            "counters": counters, "facts": facts, "stats": stats}


# ---- the JSON side ----------------------------------------------------------------------------

def decode_json(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as fh:
        t = json.load(fh)
    slices, flows, threads, processes, counters = [], [], {}, {}, []
    starts, last = {}, None
    for e in t["traceEvents"]:
        ph = e["ph"]
        if ph == "X":
            ts = round(e["ts"] * 1000)
            last = {"track": (e["pid"], e["tid"]), "name": e["name"], "start": ts,
                    "end": ts + round(e["dur"] * 1000), "args": e["args"]}
            slices.append(last)
        elif ph == "s":  # binds to the enclosing slice: the set written just before it
            starts[e["id"]] = last
        elif ph == "f":  # "bp":"e": the enclosing slice, the wait written just before it
            flows.append((starts.pop(e["id"]), last))
        elif ph == "M" and e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif ph == "M" and e["name"] == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif ph == "C":
            (key, value), = e["args"].items()
            counters.append((e["name"], round(e["ts"] * 1000), value))
    return {"slices": slices, "flows": flows, "threads": threads, "processes": processes,
            "counters": counters, "facts": t["otherData"]}


def key(s):
    return (s["track"], s["name"], s["start"], s["end"], tuple(sorted(s["args"].items())))


def check_same(pftrace, js):
    assert pftrace["processes"] == js["processes"]
    assert pftrace["threads"] == js["threads"]
    assert collections.Counter(map(key, pftrace["slices"])) == \
        collections.Counter(map(key, js["slices"]))
    assert collections.Counter((key(a), key(b)) for a, b in pftrace["flows"]) == \
        collections.Counter((key(a), key(b)) for a, b in js["flows"])
    assert sorted(pftrace["counters"]) == sorted(js["counters"])
    # The JSON prints cycles with two decimals; the protobuf keeps the double.
    facts, expected = pftrace["facts"], js["facts"]
    assert facts.keys() == expected.keys()
    for k, v in expected.items():
        if k in ("cycles", "window_cycles"):
            assert facts[k] == pytest.approx(v, abs=0.005), k
        else:
            assert facts[k] == v, k


def test_pftrace_holds_exactly_the_json_traces_slices_flows_and_facts(pb, tmp_path):
    out_pb = run_traced(tmp_path / "t.pftrace")
    out_js = run_traced(tmp_path / "t.json")
    pf = decode_pftrace(pb, tmp_path / "t.pftrace")
    js = decode_json(tmp_path / "t.json")
    assert len(js["slices"]) > 4000 and len(js["flows"]) > 1000
    check_same(pf, js)
    st = pf["stats"]
    assert out_pb["trace_events"] == st["packets"]
    assert out_js["trace_events"] == sum(1 for _ in json.load(open(tmp_path / "t.json"))["traceEvents"])
    # What keeps it small is really used: bundles, sequence clocks, interned names.
    assert st["bundles"] >= 1 and st["incremental"] > 4000
    assert os.path.getsize(tmp_path / "t.pftrace") * 5 < os.path.getsize(tmp_path / "t.json")
    # msprof names of the pipes' tracks.
    names = set(pf["threads"].values())
    assert {"CUBE", "VECTOR", "MTE2", "FIXP", "SCALAR", "MTE2 flags"} <= names


def test_pftrace_window_and_cores_select_as_the_json_trace(pb, tmp_path):
    sel = ["--trace-window", "4us:8us", "--trace-cores", "1,3"]
    run_traced(tmp_path / "w.perfetto-trace", *sel)
    run_traced(tmp_path / "w.json.gz", *sel)
    pf = decode_pftrace(pb, tmp_path / "w.perfetto-trace")
    js = decode_json(tmp_path / "w.json.gz")
    assert len(js["slices"]) > 100
    check_same(pf, js)
    assert set(pf["processes"].values()) == {"core1.AIC", "core1.AIV0", "core1.AIV1",
                                             "core3.AIC", "core3.AIV0", "core3.AIV1"}


# Other kernels lay their pipes, flags and scalar waits out differently (reported in other
# orders): each one's protobuf trace must still decode to its JSON trace.
@pytest.mark.parametrize("kernel", [
    "gemm", "gemm --variant naive", "softmax", "elementwise --param buffers=1",
    "elementwise --param buffers=3", "fa --variant baseline --param S=512 --param H=2",
    "fa --variant auto --param S=512 --param H=2", "sfa", "sfa --variant auto"])
def test_pftrace_of_other_kernels_holds_the_json_traces_content(pb, tmp_path, kernel):
    run = ["run", *kernel.split(), "--mode", "timing"]
    run_traced(tmp_path / "k.pftrace", run=run)
    run_traced(tmp_path / "k.json", run=run)
    js = decode_json(tmp_path / "k.json")
    assert js["slices"] and js["flows"]
    check_same(decode_pftrace(pb, tmp_path / "k.pftrace"), js)

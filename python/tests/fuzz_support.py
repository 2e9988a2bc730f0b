"""Shared machinery of the fuzzers (test_fuzz_*.py, docs/fuzzing.md).

Every case runs the real `tilepipe` binary (or `tilepipe run-py`) in a subprocess, in a
fresh temporary directory, and is judged by one oracle (`Outcome.violations`):
no signal, no hang, exit 0 or 2 (3 where `check` allows it), a clear one-line error,
with `--json` exactly one JSON object on stdout, the invariants of every timed result, and
no file outside the requested output paths touched.

Every violation fails the test with a reproducer. The defects of issue 26 are fixed: no
matcher excuses them any more, so a regression fails CI. `settle(known=...)` remains for a
defect found later that cannot be fixed at once (narrow predicate, xfail for it only).
"""

import hashlib
import json
import math
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

import pytest
from hypothesis.control import currently_in_test_context
from hypothesis import HealthCheck, Phase, event, example, given, settings, strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))
TILEPIPE = os.path.join(BUILD, "tilepipe")
CONFIGS = os.path.join(ROOT, "configs")

# "ci" (default): a fixed, derandomized sample that keeps the whole fuzz set under a minute
# on 2 cores; no shrinking (a hang would be replayed many times). "long": random inputs,
# many examples, shrinking on: `TILEPIPE_FUZZ_PROFILE=long` (docs/fuzzing.md).
PROFILE = os.environ.get("TILEPIPE_FUZZ_PROFILE", "ci")
_COMMON = dict(deadline=None, database=None, print_blob=False,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
settings.register_profile("ci", derandomize=True, phases=[Phase.explicit, Phase.generate],
                          **_COMMON)
settings.register_profile("long", derandomize=False, **_COMMON)
settings.load_profile(PROFILE)
LONG = PROFILE == "long"
# A hang detector, not a performance limit: every case is sized to take well under a second.
HANG_S = float(os.environ.get("TILEPIPE_FUZZ_TIMEOUT", 60 if LONG else 10))
# Runaway memory (issue 26 item 9) must show as a failure, not swap the machine.
MEM_LIMIT = 3 << 30


def examples(ci, long=None):
    """Settings for one fuzzer: `ci` examples in CI, `long` (default 50 x) in the long run."""
    return settings(max_examples=(long or 50 * ci) if LONG else ci)


def pick(draw, good, bad, p_bad=0.2):
    """A value from `good`, or with probability p_bad a hostile one from `bad`: hostile
    values everywhere at once would stop nearly every case at the first check."""
    # The hostile branch is the high end: hypothesis starts from the simplest draw (0).
    if bad and draw(st.integers(0, 99)) >= 100 - p_bad * 100:
        return draw(st.sampled_from(bad))
    return draw(st.sampled_from(good))


def need_binary():
    if not os.access(TILEPIPE, os.X_OK):
        pytest.skip(f"{TILEPIPE} not built (scripts/build.sh release)")


def load_catalogue():
    """`tilepipe list --json`: the real kernels, variants and parameter ranges."""
    need_binary()
    r = subprocess.run([TILEPIPE, "list", "--json"], capture_output=True, text=True,
                       timeout=HANG_S, check=True)
    return {k["name"]: k for k in json.loads(r.stdout)["kernels"]}


# --- the sandbox and its snapshot -------------------------------------------------------

def _entry(path):
    st = os.lstat(path)
    kind = stat.S_IFMT(st.st_mode)
    e = {"kind": kind, "mode": stat.S_IMODE(st.st_mode), "mtime": st.st_mtime_ns,
         "ino": st.st_ino}
    if stat.S_ISREG(kind):
        with open(path, "rb") as f:
            e["sha"] = hashlib.sha1(f.read()).hexdigest()
    elif stat.S_ISLNK(kind):
        e["target"] = os.readlink(path)
    return e


def kind_name(e):
    if e is None:
        return "absent"
    return {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink",
            stat.S_IFCHR: "char device", stat.S_IFIFO: "fifo"}.get(e["kind"], "other")


class Sandbox:
    """A fresh directory per case; `snapshot` records every entry under it (not following
    symlinks) plus the repository's configs, which no run may change."""

    def __init__(self):
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix="tpfuzz-"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for d, _, _ in os.walk(self.dir):  # read-only directories made by a case
            os.chmod(d, 0o755)
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def write(self, name, text, mode=None):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        if mode is not None:
            os.chmod(p, mode)
        return p

    def snapshot(self):
        snap = {}
        for d, dirs, files in os.walk(self.dir):
            for n in dirs + files:
                p = os.path.join(d, n)
                snap[p] = _entry(p)
        for n in os.listdir(CONFIGS):
            p = os.path.join(CONFIGS, n)
            snap[p] = _entry(p)
        return snap


# --- running a case and judging it ------------------------------------------------------

class Violation:
    """One broken rule. `kind`: hang, signal, exit, message, json, invariant, negative,
    touched, accepted, wrong."""

    def __init__(self, kind, detail, path=None, before=None, after=None):
        self.kind, self.detail = kind, detail
        self.path, self.before, self.after = path, before, after

    def __repr__(self):
        return f"{self.kind}: {self.detail}"


RAW_ERROR = re.compile(r"Traceback \(most recent|what\(\)|terminate called|"
                       r"incompatible function arguments|"
                       r"\[json\.exception|Segmentation|Aborted|AddressSanitizer")
PIPE_ROW = re.compile(r"^\s*(M|V|MTE1|MTE2|MTE3|FIX|S)\s+(-?[\d.]+)\s+(-?[\d.]+)\s+"
                      r"(-?[\d.]+)\s+\d+\s*$", re.M)
PLACEHOLDER = re.compile(r"\{[a-z_]+\}")  # an advice text template not filled in
NEG_TIME = re.compile(r"(?<![\w.])-\d+(\.\d+)?\s*(us|ms|cycles)\b|speedup 0\.000x")


def _strict_json(text):
    """Exactly one JSON object; NaN / Infinity are not JSON."""
    def bad_constant(c):
        raise ValueError(f"non-finite number {c}")
    obj = json.loads(text, parse_constant=bad_constant)
    if not isinstance(obj, dict):
        raise ValueError(f"a {type(obj).__name__}, not an object")
    return obj


def timed_invariants(doc, where="$"):
    """Violations of the invariants of a timed result, anywhere in a JSON document."""
    out = []
    if isinstance(doc, dict):
        if "busy_pct" in doc and "wait_flag_pct" in doc:
            b, f, d = doc["busy_pct"], doc["wait_flag_pct"], doc.get("wait_dep_pct", 0)
            if min(b, f, d) < 0 or b + f + d > 100.05:
                out.append(Violation("invariant", f"{where}: busy {b} + wait {f} + {d} "
                                     "is not within [0, 100] %"))
        if "tail_pct" in doc and "busy_pct" in doc:  # evidence accounts sum to the span
            s = sum(v for k, v in doc.items() if k.endswith("_pct"))
            if abs(s - 100) > 0.5 and s != 0:
                out.append(Violation("invariant", f"{where}: accounts sum to {s:.2f} %"))
        cyc = doc.get("cycles")
        roof = doc.get("evidence", {}).get("roofline", {}) if isinstance(
            doc.get("evidence"), dict) else {}
        if isinstance(cyc, (int, float)) and roof.get("lower_bound_cycles", 0) > cyc * 1.0001:
            out.append(Violation("invariant", f"{where}: {cyc} cycles under the roofline "
                                 f"{roof['lower_bound_cycles']}"))
        for k, v in doc.items():
            if (k in ("cycles", "time_us", "best_time_us", "sim_wall_s", "lb_us")
                    and isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0):
                out.append(Violation("negative", f"{where}.{k} = {v}"))
            out += timed_invariants(v, f"{where}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += timed_invariants(v, f"{where}[{i}]")
    elif isinstance(doc, float) and not math.isfinite(doc):
        out.append(Violation("invariant", f"{where} = {doc}"))
    return out


class Outcome:
    def __init__(self, argv, cwd, rc, stdout, stderr, hung):
        self.argv, self.cwd, self.rc = argv, cwd, rc
        self.stdout, self.stderr, self.hung = stdout, stderr, hung
        self.violations, self.doc = [], None

    def repro(self):
        return f"(cd {self.cwd} && {shlex.join(self.argv)})"


def _limits():
    import resource
    os.setsid()  # its own process group: a hang is killed with all its children
    resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(argv, box, outputs=(), inputs=(), codes=(0, 2), env=None, timeout=None,
        check_files=True, prefix_outputs=()):
    """Runs argv (argv[0] = the binary) in box.dir and judges it.

    outputs: paths the case asked to be written (allowed to change on exit 0, if they were
    absent or regular files); prefix_outputs: directories whose contents may change (a
    tune cache); inputs: files that must stay as they were whatever happens."""
    before = box.snapshot() if check_files else None
    e = dict(os.environ, XDG_CACHE_HOME=box.path(".cache"), TILEPIPE_PROGRESS_DELAY="1000")
    e.update(env or {})
    p = subprocess.Popen(argv, cwd=box.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=e, preexec_fn=_limits)
    hung = False
    try:
        out, err = p.communicate(timeout=timeout or HANG_S)
    except subprocess.TimeoutExpired:
        hung = True
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
    o = Outcome(argv, box.dir, p.returncode, out.decode(errors="replace"),
                err.decode(errors="replace"), hung)
    o.violations = judge(o, codes)
    if check_files:
        o.violations += file_changes(before, box.snapshot(), o.rc, outputs, inputs,
                                     prefix_outputs)
    return o


def judge(o, codes):
    v = []
    if o.hung:
        return [Violation("hang", f"no exit within {HANG_S:.0f} s")]
    if o.rc < 0:
        v.append(Violation("signal", f"killed by {signal.Signals(-o.rc).name}"))
    elif o.rc not in codes:
        v.append(Violation("exit", f"exit {o.rc}, expected one of {codes}: "
                           f"{o.stderr.strip()[-400:]}"))
    if RAW_ERROR.search(o.stderr):
        v.append(Violation("message", "a raw exception / crash report on stderr: "
                           + RAW_ERROR.search(o.stderr).group(0)))
    if o.rc == 2 and not o.stderr.strip():
        v.append(Violation("message", "exit 2 with an empty stderr"))
    if "--json" in o.argv and "run-py" not in o.argv:
        # docs/cli.md: exactly one JSON object on stdout, successes and errors alike; an
        # error's is {"error": MESSAGE, "exit_code": N}.
        try:
            o.doc = _strict_json(o.stdout)
        except ValueError as ex:
            v.append(Violation("json", f"stdout is not exactly one JSON object ({ex}): "
                               f"{o.stdout[:200]!r}"))
        if o.doc is not None and o.rc not in (0, 3) and not (
                isinstance(o.doc.get("error"), str) and o.doc.get("exit_code") == o.rc):
            v.append(Violation("json", f"exit {o.rc} with --json but stdout is not "
                               f'{{"error", "exit_code": {o.rc}}}: {o.stdout[:200]!r}'))
    if o.doc is not None:
        v += timed_invariants(o.doc)
    for m in PIPE_ROW.finditer(o.stderr):  # the text summary table of a timed run
        b, f, d = float(m.group(2)), float(m.group(3)), float(m.group(4))
        if min(b, f, d) < 0 or b + f + d > 100.05:
            v.append(Violation("invariant", f"pipe {m.group(1)}: busy {b} + wait {f} + {d} "
                               "> 100 % in the text summary"))
    if o.rc == 0 and PLACEHOLDER.search(o.stdout + o.stderr):
        v.append(Violation("message", "an unfilled template placeholder in the output: "
                           + PLACEHOLDER.search(o.stdout + o.stderr).group(0)))
    if o.rc == 0 and NEG_TIME.search(o.stdout + o.stderr):
        v.append(Violation("negative", "a negative time printed as a success: "
                           + NEG_TIME.search(o.stdout + o.stderr).group(0)))
    return v


def file_changes(before, after, rc, outputs, inputs, prefix_outputs):
    allowed = {os.path.realpath(p) for p in outputs}
    lexical = {os.path.abspath(p) for p in outputs}
    inputs = {os.path.realpath(p) for p in inputs}
    v = []
    for p in sorted(set(before) | set(after)):
        b, a = before.get(p), after.get(p)
        if b == a or (b and a and stat.S_ISDIR(b["kind"]) and b["kind"] == a["kind"]
                      and b["mode"] == a["mode"]):
            continue  # a directory's mtime changes when a file in it is written
        if any(p == d or p.startswith(d.rstrip("/") + "/") for d in prefix_outputs):
            continue
        ok = (rc == 0 and (p in allowed or p in lexical) and p not in inputs
              and kind_name(b) in ("absent", "file") and kind_name(a) == "file")
        if not ok:
            what = ("an input file" if p in inputs else
                    "a requested output" if p in allowed or p in lexical else "a file nobody asked for")
            v.append(Violation("touched", f"{what} changed: {p} ({kind_name(b)} -> "
                               f"{kind_name(a)}, exit {rc})", path=p, before=b, after=a))
    return v


def settle(o, known=(), context="", log=None):
    """Fails with every unexplained violation. When each one is a known open defect: records
    it in `log` (a fuzz_test keeps exploring, then xfails) or, without a log, xfails.

    known: (predicate(violation) -> bool, reason) pairs, one per defect of issue 26."""
    if currently_in_test_context():
        event(f"exit {o.rc}")  # shown by --hypothesis-show-statistics
    if os.environ.get("TILEPIPE_FUZZ_VERBOSE") == "2":
        first = (o.stderr.strip().splitlines() or [""])[-1][:150]
        print(f"\nexit {o.rc}: {shlex.join(o.argv[1:])[:200]} | {first}", file=sys.stderr)
    if not o.violations:
        return
    unexplained, reasons = [], []
    for viol in o.violations:
        r = next((reason for pred, reason in known if pred(viol)), None)
        (reasons.append(r) if r else unexplained.append(viol))
    tail = (f"\nreproduce: {o.repro()}\n{context}\nexit {o.rc}\nstdout: {o.stdout[:600]}"
            f"\nstderr: {o.stderr[-1200:]}")
    if unexplained:
        pytest.fail("\n".join(map(repr, unexplained)) + tail, pytrace=False)
    if log is not None:
        log.append((sorted(set(reasons)), f"{o.repro()}: {o.violations}"))
        if os.environ.get("TILEPIPE_FUZZ_VERBOSE"):
            print(f"\nknown defect: {log[-1][1]}", file=sys.stderr)
        return
    pytest.xfail("; ".join(sorted(set(reasons))))


def fuzz_test(strategy, ci, long=None, explicit=()):
    """Makes `body(case, log)` a pytest test over `strategy` (examples(ci, long)). Known
    defects hit on the way are logged, not fatal, so one open defect does not hide the rest
    of the sample; the test xfails at the end if any was hit."""
    def deco(body):
        def test():
            need_binary()
            log = []

            def prop(case):
                body(case, log)
            for e in explicit:  # cases every run includes: one per known input class
                prop = example(e)(prop)
            prop = examples(ci, long)(given(strategy)(prop))

            prop()
            if log:
                reasons = sorted({r for rs, _ in log for r in rs})
                pytest.xfail(f"{len(log)} case(s) hit open defects: " + "; ".join(reasons)
                             + "\nfirst: " + log[0][1])
        test.__name__, test.__doc__ = body.__name__, body.__doc__
        return test
    return deco


# --- open defects (xfail only for these) ------------------------------------------------

def is_kind(*kinds):
    return lambda v: v.kind in kinds


# Defects a fuzzer finds that cannot be fixed at once: (predicate, reason) pairs passed to
# `settle` so CI stays green until they are fixed. Empty: every defect of issue 26, and the
# ones the fuzzers found on the way ('{what}' unfilled in profile's advice, profile ignoring
# --trace / --csv-dir, unknown severities / whatifs / knob roles accepted), is fixed.
NEW_DEFECTS = []

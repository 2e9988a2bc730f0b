"""Fuzzer of the command line: argument vectors built from the real verbs, flags and kernels
(`tilepipe list --json`) with hostile values and hostile output paths (issue 26)."""

import os
import shutil
import signal
import stat
import subprocess
import time

import pytest
from hypothesis import event, strategies as st

import fuzz_support as fz

CATALOGUE = None


def catalogue():
    global CATALOGUE
    if CATALOGUE is None:
        CATALOGUE = fz.load_catalogue()
    return CATALOGUE


# Small shapes per kernel so a case takes milliseconds; hostile values are drawn on top.
SMALL = {"gemm": {"M": 64, "N": 64, "K": 64}, "softmax": {"R": 16, "C": 64},
         "elementwise": {"N": 4096, "tile": 256}, "fa": {"S": 256, "H": 1},
         "sfa": {"KV_S": 256, "topk": 64, "H": 16}}
JUNK = ["", "abc", "1e3", "0x10", "-0", " 16", "16 ", "99999999999999999999", "-1",
        "9223372036854775808", "nan", "1.5", "=", "M=1"]
NUMBERS = ["1", "0", "-1", "1e5", "1e300", "1e-300", "nan", "inf", "-inf", "", "x",
           "18446744073709551616", "1e6"]
WINDOWS = ["0:100", "100us:150us", "1e12:1e13", "5:1", "x", "0:0", ":", "-1:5", "0:1e300"]
CORES = ["0", "0,5-7", "99", "3-1", "", "0-23", "-1"]
# Kinds of path given for an output flag; each is made inside the sandbox by `make_path`.
PATH_KINDS = ["new", "existing", "missing_dir", "directory", "char_device", "fifo",
              "symlink", "dangling_symlink", "readonly_file", "readonly_dir", "input_config",
              "proc", "same_as_other"]


def make_path(box, kind, name, taken):
    """A path of the given kind; `taken` holds the outputs chosen so far."""
    p = box.path("o", name)
    os.makedirs(box.path("o"), exist_ok=True)
    if name == "csv" and kind in ("new", "existing"):  # --csv-dir wants a directory
        os.makedirs(p)
        if kind == "existing":
            box.write("o/csv/code_exe.csv", "old contents\n")
    elif kind == "existing":
        box.write(os.path.join("o", name), "old contents\n")
    elif kind == "missing_dir":
        p = box.path("nodir", name)
    elif kind == "directory":
        os.makedirs(p)
    elif kind == "char_device":  # a private /dev/null: never point a run at the real one
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "symlink":
        box.write("o/target.txt", "link target\n")
        os.symlink("target.txt", p)
    elif kind == "dangling_symlink":
        os.symlink("nowhere/x", p)
    elif kind == "readonly_file":
        box.write(os.path.join("o", name), "read-only\n", mode=0o444)
    elif kind == "readonly_dir":
        os.makedirs(box.path("ro"), exist_ok=True)
        p = box.path("ro", name)
        os.chmod(box.path("ro"), 0o555)
    elif kind == "input_config":
        p = box.path("chip.json")
    elif kind == "proc":
        p = "/proc/version"
    elif kind == "same_as_other" and taken:
        p = taken[0]
    return p


@st.composite
def vectors(draw):
    """One argument vector plus what the oracle needs to know about it."""
    cat = catalogue()
    verb = fz.pick(draw, ["run", "run", "profile", "check", "tune", "ladder"],
                   ["list", "run-py", "bogus"], 0.1)
    case = {"verb": verb, "out_flags": []}
    if verb in ("list", "bogus"):
        return [verb] + draw(st.sampled_from([[], ["--json"], ["--bogus"]])), case
    if verb == "run-py":  # a script path that is not a script
        return [verb, draw(st.sampled_from(["o", "/dev/null", "missing.py", "chip.json"]))], case
    names = list(cat) if verb != "ladder" else ["gemm", "fa", "sfa", "softmax"]
    kernel = fz.pick(draw, names, ["nope", ""], 0.05)
    argv = [verb, kernel]
    case["kernel"] = kernel
    params = dict(SMALL.get(kernel, {}))
    spec = {p["name"]: p for p in cat.get(kernel, {}).get("params", [])}
    extreme = False
    for _ in range(draw(st.integers(0, 2))):
        name = fz.pick(draw, sorted(spec), ["Q", ""], 0.1) if spec else "M"
        p = spec.get(name, {"min": 0, "max": 1, "default": 0})
        choice = fz.pick(draw, ["default", "min", "max"], ["below", "above", "junk"], 0.3)
        if choice == "max" and not extreme:  # one huge value per case keeps cases fast
            extreme, value = True, p["max"]
        elif choice in ("min", "default", "max"):
            value = p["min"] if choice != "default" else p["default"]
        elif choice == "below":
            value = p["min"] - 1
        elif choice == "above":
            value = p["max"] + 1
        else:
            value = draw(st.sampled_from(JUNK))
        params[name] = value
    for k, v in params.items():
        argv += ["--param", f"{k}={v}"]
    if draw(st.booleans()):
        argv += ["--variant", fz.pick(draw, cat.get(kernel, {}).get("variants", ["x"]),
                                      ["bogus", ""], 0.1)]
    if draw(st.integers(0, 3)) == 0:
        argv += ["--chip", fz.pick(draw, ["a3", "a2", "chip.json"],
                                   ["zz", "advice_rules", "o", "rules.json", "missing.json"])]
    if verb in ("run", "check", "profile"):
        if verb != "check":
            argv += ["--mode", fz.pick(draw, ["timing", "timing", "functional"], ["fast"], 0.05)]
        if extreme and "functional" in argv:  # real values of a huge shape: slow, not hostile
            argv[argv.index("functional")] = "timing"
        # Small budgets end huge shapes quickly and exercise the cycle-budget error path.
        argv += ["--max-cycles", fz.pick(draw, ["1e7"], NUMBERS, 0.3)]
        if draw(st.integers(0, 3)) == 0:
            argv += ["--seed", draw(st.sampled_from(NUMBERS))]
        flags = ["--trace", "--csv-dir"] + (["--html", "--rules"] if verb == "profile" else [])
        for flag in draw(st.lists(st.sampled_from(flags), max_size=3, unique=True)):
            kind = fz.pick(draw, PATH_KINDS[:4], PATH_KINDS[4:], 0.5)
            if flag == "--rules":
                argv += [flag, fz.pick(draw, ["rules.json"], ["chip.json", "o", "missing.json",
                                                              "/dev/null"], 0.5)]
                continue
            case["out_flags"].append((flag, kind))
            name = {"--trace": draw(st.sampled_from(["t.json", "t.json.gz", "t.pftrace",
                                                     "t.pftrace.gz"])),
                    "--csv-dir": "csv", "--html": "r.html"}[flag]
            argv += [flag, name if kind in ("new",) and flag != "--csv-dir" else
                     ("KIND", kind, name)]
        if "--trace" in argv and draw(st.booleans()):
            argv += ["--trace-window", fz.pick(draw, WINDOWS[:3], WINDOWS[3:], 0.3)]
        if "--trace" in argv and draw(st.integers(0, 3)) == 0:
            argv += ["--trace-cores", fz.pick(draw, CORES[:2], CORES[2:], 0.3)]
        if verb == "profile" and draw(st.booleans()):
            argv.append("--no-verify")
        if verb == "check" and draw(st.integers(0, 3)) == 0:
            argv += ["--drop-sync", draw(st.sampled_from(["0", "-1", "100000", "x"]))]
    elif verb == "tune":
        names = sorted(spec) or ["M"]
        for _ in range(draw(st.integers(0, 2))):
            n = draw(st.sampled_from(names + ["Q"]))
            argv += ["--space", n + "=" + draw(st.sampled_from(
                ["32,64", "1,2", "", "x", "0", "16,16", "32,,64", str(spec.get(n, {}).get(
                    "max", 1) + 1)]))]
        argv += draw(st.sampled_from([["--strategy", "grid"], ["--strategy", "coord"],
                                      ["--strategy", "bogus"], []]))
        argv += draw(st.sampled_from([["--max-evals", "1"], ["--max-evals", "0"], []]))
        argv += draw(st.sampled_from([["--no-cache"], ["--cache-dir", "cache"],
                                      ["--cache-dir", "chip.json"]]))
        argv += ["-j", draw(st.sampled_from(["1", "2", "0", "999"]))]
        if draw(st.booleans()):
            case["out_flags"].append(("--html", fz.pick(draw, PATH_KINDS[:4], PATH_KINDS[4:], 0.5)))
            argv += ["--html", ("KIND", case["out_flags"][-1][1], "r.html")]
    elif verb == "ladder":
        argv += ["-j", draw(st.sampled_from(["1", "2", "0"]))]
        if draw(st.booleans()):
            case["out_flags"].append(("--html", fz.pick(draw, PATH_KINDS[:4], PATH_KINDS[4:], 0.5)))
            argv += ["--html", ("KIND", case["out_flags"][-1][1], "r.html")]
        if draw(st.booleans()):
            argv.append("--advise")
    if draw(st.booleans()):
        argv.append("--json")
    return argv, case


def materialise(box, argv):
    """Creates the sandbox files a vector refers to; returns (argv, outputs)."""
    shutil.copy(os.path.join(fz.CONFIGS, "a3.json"), box.path("chip.json"))
    shutil.copy(os.path.join(fz.CONFIGS, "advice_rules.json"), box.path("rules.json"))
    os.makedirs(box.path("o"), exist_ok=True)
    out, outputs, flag = [], [], None
    for a in argv:
        if isinstance(a, tuple):
            p = make_path(box, a[1], a[2] if a[1] != "same_as_other" else a[2],
                          [o for o in outputs if o])
            outputs.append(p)
            a = p
        elif flag in ("--trace", "--csv-dir", "--html"):
            outputs.append(box.path(a))
        out.append(a)
        flag = a if isinstance(a, str) and a.startswith("--") else None
    return out, outputs


def expand_outputs(argv, cwd):
    """The files each output flag writes (a CSV directory writes two), relative paths taken
    from `cwd` (the sandbox the case runs in)."""
    files = []
    for i, a in enumerate(argv[:-1]):
        if a == "--csv-dir":
            d = os.path.join(cwd, argv[i + 1])
            files += [os.path.join(d, "pipe_utilization.csv"), os.path.join(d, "code_exe.csv")]
        elif a in ("--trace", "--html"):
            files.append(os.path.join(cwd, argv[i + 1]))
    return files


def extra_checks(o, argv, outputs):
    v = []
    codes_ok = o.rc == 0
    real = [os.path.realpath(p) for p in outputs]
    if codes_ok and len(set(real)) < len(real):
        v.append(fz.Violation("accepted", "two outputs on one path accepted (one is lost)"))
    if o.rc == 2 and "no such file" in o.stderr.lower():
        paths = [a for a in argv[2:] if isinstance(a, str) and (a.startswith("/") or "." in a)]
        named = [p for p in paths if os.path.exists(os.path.join(o.cwd, p))
                 and (p in o.stderr or os.path.basename(p) in o.stderr)]
        if named:
            v.append(fz.Violation("message", f"no such file for {named[0]}, which exists"))
    if o.rc == 0:  # an accepted output flag must write its file
        for f in expand_outputs(argv, o.cwd):
            if not os.path.isfile(f):
                v.append(fz.Violation("accepted", f"{argv[1]}: exit 0 but the requested "
                                      f"output {f} was not written", path=f))
    if o.doc and o.doc.get("trace_events") == 0 and "window" not in o.stderr.lower():
        v.append(fz.Violation("accepted", "an empty trace written with no word on stderr"))
    return v


@fz.fuzz_test(vectors(), ci=100)
def test_cli_vectors(vec, log):
    """Any argument vector: exit 0 or 2 (3 from check), a clear error, valid --json, the
    invariants of the timed results, no file but the requested outputs written."""
    raw, case = vec
    event(f"verb {case['verb']}")
    with fz.Sandbox() as box:
        argv, outputs = materialise(box, [fz.TILEPIPE] + raw)
        codes = (0, 2, 3) if case["verb"] == "check" else (0, 2)
        inputs = [box.path(a) for a in argv if a in ("chip.json", "rules.json")]
        o = fz.run(argv, box, outputs=expand_outputs(argv, box.dir), inputs=inputs, codes=codes,
                   prefix_outputs=[box.path("cache"), box.path(".cache")])
        o.violations += extra_checks(o, argv, outputs)
        fz.settle(o, fz.NEW_DEFECTS, context=f"case: {case}", log=log)


# --- targeted properties the random vectors reach too rarely ----------------------------

# (verb args, output flag): a run that fails at run time (--max-cycles 1) with a bad output
# path must be refused for the path, before any work (docs/cli.md: outputs checked first).
LATE_CHECK = [
    (["run", "gemm", "--mode", "timing"], "--trace"),
    (["run", "gemm", "--mode", "timing"], "--csv-dir"),
    (["profile", "gemm"], "--html"),
    (["profile", "gemm"], "--csv-dir"),
]


@pytest.mark.parametrize("vec,flag", LATE_CHECK, ids=lambda x: x if isinstance(x, str) else x[0])
@pytest.mark.parametrize("kind", ["missing_dir", "directory", "readonly_dir"])
def test_outputs_checked_before_the_run(vec, flag, kind):
    fz.need_binary()
    with fz.Sandbox() as box:
        path = make_path(box, kind, "out.html" if flag != "--csv-dir" else "csv", [])
        if kind == "directory" and flag == "--csv-dir":
            pytest.skip("a directory is what --csv-dir asks for")
        if kind == "readonly_dir" and os.geteuid() == 0:
            pytest.skip("root writes into a read-only directory")
        argv = [fz.TILEPIPE] + vec + ["--param", "M=64", "N=64", "K=64", "--max-cycles", "1",
                                      flag, path]
        o = fz.run(argv, box)
        fz.settle(o, context="")
        if o.rc == 2 and "cycle budget" in o.stderr:  # issue 26 item 5
            pytest.fail(f"{flag} {path} ({kind}) was not checked before the run:\n{o.stderr}"
                        f"\nreproduce: {o.repro()}")
        assert o.rc == 2, o.repro()


@pytest.mark.parametrize("argv,must_name", [
    (["bogus"], "bogus"),
    (["run", "gemm", "--chip", "zz"], "a3"),
])
def test_error_names_the_culprit(argv, must_name):
    """An unknown verb names it; an unknown chip offers chips (not the rules file)."""
    fz.need_binary()
    with fz.Sandbox() as box:
        o = fz.run([fz.TILEPIPE] + argv, box)
        fz.settle(o)
        assert o.rc == 2
        # issue 26 item 6: the culprit named, and no rules file offered as a chip
        assert must_name in o.stderr and "advice_rules" not in o.stderr, o.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_signal_leaves_no_temporary(sig):
    """A run interrupted while it writes its trace leaves no FILE.tmp.PID.N behind."""
    fz.need_binary()
    with fz.Sandbox() as box:
        # Long enough to be caught writing: the signal is sent once the temporary exists.
        argv = [fz.TILEPIPE, "run", "fa", "--param", "S=8192", "H=2", "--mode", "timing",
                "--trace", box.path("t.json")]
        p = subprocess.Popen(argv, cwd=box.dir, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, preexec_fn=os.setsid)
        deadline = time.monotonic() + fz.HANG_S
        while p.poll() is None and time.monotonic() < deadline:
            if any(".tmp." in n for n in os.listdir(box.dir)):
                break
            time.sleep(0.005)
        if p.poll() is not None:
            pytest.skip("the run ended before its temporary file was seen")
        p.send_signal(sig)
        try:
            p.wait(timeout=fz.HANG_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            pytest.fail(f"no exit within {fz.HANG_S} s of {sig.name}")
        left = [n for n in os.listdir(box.dir) if ".tmp." in n]
        assert not left, f"issue 26 item 8: {sig.name} left {left}"
        assert not os.path.exists(box.path("t.json")), "an interrupted run left a trace"

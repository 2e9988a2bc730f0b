"""Hostile probe of the tilepipe command line (issue 46): every verb on C++ kernels and on
Python files, with hostile variants of the input, and each outcome classified.

    TILEPIPE_BUILD_DIR=$PWD/build /usr/bin/python3 python/tools/hostile_probe.py [-k SUBSTR] [-v]

Each case runs `build/tilepipe ...` in a fresh temporary directory with a hang timeout. An
outcome is one of:
  good       what the case expects: exit 0 with a checked result, or a clear error (exit 2
             or 3, a one-line message, no traceback)
  crash      killed by a signal, or a raw exception / crash report on stderr
  internal   exit 1 (tilepipe's own fault) on input that is the user's
  hang       no exit within the timeout
  wrong-0    exit 0 where the case must fail (the command checked nothing, or accepted
             an absurd value)
  clobbered  an input (the kernel's file, a module it imports, a config, the anchors, the
             cache) or an old output changed, or a temporary left behind
The cases are fixed and run in order: the same tree gives the same table. Exit status: the
number of bad outcomes (0 when every case is good), capped at 100.
"""

import argparse
import collections
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))
TILEPIPE = os.path.join(BUILD, "tilepipe")
CONFIGS = os.environ.get("TILEPIPE_CONFIG_DIR", os.path.join(ROOT, "configs"))
TIMEOUT = float(os.environ.get("TILEPIPE_PROBE_TIMEOUT", 60))

RAW = re.compile(r"Traceback \(most recent|what\(\)|terminate called|incompatible function "
                 r"arguments|\[json\.exception|Segmentation|Aborted|AddressSanitizer|"
                 # an exception of the user's code passed on without the line that raised it
                 r"^tilepipe: \S+: [A-Z]\w*(Error|Exception): ", re.M)

# ---- the Python kernel files -------------------------------------------------------------

# A small kernel: `vadd` a @tilelang.jit factory, run by the script's main on numpy arrays.
# {imp}: statements at import; {body}: statements inside the kernel body (run while the
# kernel is traced); {idx}: the row index expression of the output copy.
KERNEL = '''
import os, sys, signal, threading
import numpy as np
import tilelang
import tilelang.language as T
import helper
{imp}

@tilelang.jit(out_idx=[-1])
def vadd(M=16, N=64, block_N=64):
    n_num = N // block_N

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(n_num, is_npu=True) as (cid, vid):
            h = M // 2
            a = T.alloc_ub((h, block_N), "float32")
            b = T.alloc_ub((h, block_N), "float32")
{body}
            with T.Scope("V"):
                T.copy(A[vid * h, cid * block_N], a)
                T.copy(B[vid * h, cid * block_N], b)
                T.barrier_all()
                T.tile.add(a, a, b)
                T.barrier_all()
                T.copy(a, C[{idx}, cid * block_N])

    return main


if __name__ == "__main__":
    k = vadd()
    x = np.ones((16, 64), dtype="float32")
    c = k(x, x)
    print("sum", float(np.asarray(c).sum()))
'''
HELPER = "SCALE = 1\n"
BODY_INDENT = " " * 12


def kernel_text(imp="", body="", idx="vid * h"):
    body = "\n".join(BODY_INDENT + ln for ln in body.splitlines()) if body else ""
    return KERNEL.format(imp=imp, body=body, idx=idx)


# Hostile statements, each placed at import (module level) or in the kernel body, with what
# the command must do: "error" (the command cannot have checked the kernel) or "any" (the
# statement is harmless to the command: it must still end with a checked result or a clear
# error).
HOSTILE_STMTS = {
    "sys.exit(0)": ("sys.exit(0)", "error"),
    "os._exit(0)": ("os._exit(0)", "error"),
    "posix._exit(0)": ("import posix\nposix._exit(0)", "error"),
    "SystemExit": ("raise SystemExit", "error"),
    "SystemExit(5)": ("raise SystemExit(5)", "error"),
    "KeyboardInterrupt": ("raise KeyboardInterrupt", "fail"),
    "recursion": ("def _r(n):\n    return _r(n + 1)\n_r(0)", "error"),
    "thread os._exit": ("_t = threading.Thread(target=lambda: os._exit(0))\n_t.start()\n"
                        "_t.join()", "error"),
    "fork": ("_p = os.fork()\nif _p == 0:\n    os._exit(0)\nos.waitpid(_p, 0)", "any"),
    "ignore SIGINT": ("signal.signal(signal.SIGINT, signal.SIG_IGN)", "any"),
    "numpy ValueError": ("np.zeros((2, 2)).reshape(3)", "error"),
    "huge alloc": ("_h = T.alloc_ub((1 << 40, 1 << 40), 'float32')", "error"),
    "close stdout": ("os.close(1)", "any"),
}


# ---- the sandbox -------------------------------------------------------------------------

class Box:
    def __init__(self):
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix="tphostile-"))
        self.write("kern.py", kernel_text())
        self.write("helper.py", HELPER)
        shutil.copy(os.path.join(CONFIGS, "a3.json"), self.path("chip.json"))
        self.write("old.json", '{"old": "output"}\n')

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def write(self, name, text, mode=None):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        if mode is not None:
            os.chmod(p, mode)
        return p

    def snapshot(self):
        out = {}
        for d, dirs, files in os.walk(self.dir):
            for n in dirs + files:
                p = os.path.join(d, n)
                st = os.lstat(p)
                e = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
                if stat.S_ISREG(st.st_mode):
                    with open(p, "rb") as f:
                        e += (hashlib.sha1(f.read()).hexdigest(),)
                elif stat.S_ISLNK(st.st_mode):
                    e += (os.readlink(p),)
                out[os.path.relpath(p, self.dir)] = e
        return out

    def close(self):
        for d, _, _ in os.walk(self.dir):
            os.chmod(d, 0o755)
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- cases -------------------------------------------------------------------------------

class Case:
    """argv (without the binary), what it must do (`expect`: "ok", "error" (2 or 3), "fail"
    (any non-zero, e.g. a signal's), "any" (0 or 2 or 3)), files it must not change
    (`keep`, relative to the sandbox; the kernel, its helper, the chip config and old.json
    always), `setup(box)`, and `signal` = (SIG, after_seconds or a stderr marker)."""

    def __init__(self, cls, argv, expect="error", setup=None, keep=(), sig=None,
                 env=None, may_write=()):
        self.cls, self.argv, self.expect = cls, argv, expect
        self.setup, self.keep, self.sig, self.env = setup, keep, sig, env or {}
        self.may_write = may_write

    @property
    def name(self):
        return f"{self.cls}: tilepipe {' '.join(self.argv)}"


def write_kernel(**kw):
    return lambda box: box.write("kern.py", kernel_text(**kw))


def write(name, text):
    return lambda box: box.write(name, text)


def both(*fns):
    def f(box):
        for fn in fns:
            fn(box)
    return f


def anchors(measured=100.0, kernel="gemm", extra=""):
    return ('{"sources": {"s": {"citation": "c", "protocol": {"l2": "cold", "launch": '
            '"excluded", "timer": "t", "evidence": "e"}}}, "anchors": [{"name": "a", "set": '
            f'"calibration", "kernel": "{kernel}", "params": {{"M": 64, "N": 64, "K": 64}}, '
            f'"measured_us": {measured}, "source": "s"{extra}}}]}}\n')


def cases():
    out = []
    py, fac = "kern.py", "kern.py:vadd"
    # 1. User code that ends the process or unwinds on its own, at import and in the body.
    for where in ("imp", "body"):
        for name, (stmt, expect) in HOSTILE_STMTS.items():
            if where == "imp" and name == "huge alloc":
                continue
            setup = write_kernel(**{where: stmt})
            for verb in ("check", "profile", "run"):
                out.append(Case(f"user code {name} at {where}", [verb, fac], expect, setup))
            out.append(Case(f"user code {name} at {where}", ["check", py], expect, setup))
            out.append(Case(f"user code {name} at {where}",
                            ["tune", fac, "--space", "block_N=32,64", "--no-cache"], expect,
                            setup))
    # 2. Run-time arithmetic faults in an index.
    for idx in ("vid * h // (cid - cid)", "vid * h % (cid * 0)", "(vid * h) // cid"):
        for verb in ("run", "check"):
            out.append(Case("run-time division by zero", [verb, fac], "error",
                            write_kernel(idx=idx)))
    # 3. Outputs naming inputs.
    outs = {"run": ["--trace", "--csv-dir"], "profile": ["--html", "--trace"],
            "emit": ["-o"], "tune": ["--html"]}
    for verb, flags in outs.items():
        for flag in flags:
            if flag == "--csv-dir":
                continue
            for target in ("kern.py", "helper.py", "chip.json"):
                argv = [verb, fac, flag, target, "--chip", "chip.json"]
                if verb == "tune":
                    argv += ["--space", "block_N=32,64", "--no-cache"]
                out.append(Case("output names an input", argv, "error"))
    for verb, flag in (("run", "--trace"), ("profile", "--html"), ("emit", "-o")):
        out.append(Case("output names an input", [verb, "gemm", flag, "chip.json", "--chip",
                                                  "chip.json"], "error"))
    out.append(Case("output names an input", ["calibrate", "--measurements", "anch.json",
                                              "--fit", "die.launch_us", "-o", "anch.json"],
                    "error", write("anch.json", anchors()), keep=["anch.json"]))
    out.append(Case("output names an input", ["tune", "gemm", "--space", "M=64,128",
                                              "--cache-dir", "cache", "--html", "cache/x"],
                    "any", lambda b: os.makedirs(b.path("cache"))))
    out.append(Case("output names an input", ["run", fac, "--trace", "link.json"], "error",
                    lambda b: os.symlink("kern.py", b.path("link.json"))))
    out.append(Case("output names an input", ["run", fac, "--trace", "./sub/../helper.py"],
                    "error", lambda b: os.makedirs(b.path("sub"))))
    # 4. Outputs in bad places.
    for flag, verb in (("--trace", "run"), ("--html", "profile"), ("-o", "emit")):
        for target, setup in (("nodir/x.json", None),
                              *([] if os.geteuid() == 0 else
                                [("ro/x.json", lambda b: os.makedirs(b.path("ro"), 0o555))]),
                              ("/proc/version", None), (".", None)):
            out.append(Case("output in a bad place", [verb, "gemm", flag, target], "error",
                            setup))
    # 5. Signals at several phases with an old output present.
    for sig in (signal.SIGINT, signal.SIGTERM):
        for phase, after in (("compile", 0.3), ("run", 1.5), ("trace", 3.0)):
            out.append(Case(f"{signal.Signals(sig).name} during {phase}",
                            ["run", "gemm", "--param", "M=2048", "N=2048", "K=2048",
                             "--mode", "timing", "--exact", "--trace", "old.json"], "fail",
                            sig=(sig, after)))
            out.append(Case(f"{signal.Signals(sig).name} during {phase} (py)",
                            ["run", "kern.py:vadd", "--param", "M=4096", "N=8192",
                             "block_N=64", "--mode", "timing", "--exact", "--trace",
                             "old.json"], "fail", sig=(sig, after + 2)))
        out.append(Case(f"{signal.Signals(sig).name} after the script ignores SIGINT",
                        ["run", "kern.py:vadd", "--param", "M=4096", "N=8192", "block_N=64",
                         "--mode", "timing", "--exact", "--trace", "old.json"], "fail",
                        write_kernel(imp="signal.signal(signal.SIGINT, signal.SIG_IGN)"),
                        sig=(sig, 4.0)))
    # 6. Numeric flags.
    for v in ("nan", "inf", "-inf", "1e308", "-1", "0", "1e-320", "18446744073709551616"):
        out.append(Case("numeric flag", ["run", "gemm", "--max-cycles", v], "any"))
        out.append(Case("numeric flag", ["run", "gemm", "--max-wall-s", v], "any"))
        out.append(Case("numeric flag", ["differential", "gemm", "--tolerance-pct", v], "any"))
        out.append(Case("numeric flag", ["run", "gemm", "--seed", v], "any"))
        out.append(Case("numeric measurement", ["calibrate", "--measurements", "m.csv",
                                                "--fit", "die.launch_us", "--no-loo"],
                        "error" if v != "1e-320" else "any",
                        write("m.csv", f"name,kernel,params,measured_us\na,gemm,M=64 N=64 "
                                       f"K=64,{v}\n")))
        out.append(Case("numeric measurement", ["fidelity", "--anchors", "a.json"], "error",
                        write("a.json", anchors(v if v not in ("nan", "inf", "-inf") else
                                                f'"{v}"'))))
    for key, v in (("clock_mhz", "1e308"), ("clock_mhz", "0"), ("clock_mhz", "-5"),
                   ("clock_mhz", "1e-300"), ("die.launch_us", "1e308"),
                   ("die.launch_us", "-1")):
        def chip(box, key=key, v=v):
            d = json.load(open(os.path.join(CONFIGS, "a3.json")))
            node, parts = d, key.split(".")
            for p in parts[:-1]:
                node = node[p]
            if parts[-1] not in node:
                return
            node[parts[-1]] = float(v)
            box.write("bad.json", json.dumps(d))
        out.append(Case("chip config value", ["run", "gemm", "--chip", "bad.json"], "error",
                        chip))
    out.append(Case("calibrate fit range", ["calibrate", "--measurements", "m.csv", "--fit",
                                            "die.launch_us=1e308:inf", "--no-loo"], "error",
                    write("m.csv", "name,kernel,params,measured_us\na,gemm,M=64 N=64 K=64,10\n")))
    # 7. Malformed JSON inputs.
    for what, text in (("empty", ""), ("whitespace", "  \n"), ("array", "[]"),
                       ("number", "3"), ("null", "null"), ("bad", "{"),
                       ("dup key", anchors().replace('"set": "calibration"',
                                                     '"set": "calibration", "set": "validation"')),
                       ("dup top key", '{"anchors": [], "anchors": []}'),
                       ("no anchors", '{"anchors": []}')):
        out.append(Case(f"anchors file {what}", ["fidelity", "--anchors", "a.json"], "error",
                        write("a.json", text)))
        out.append(Case(f"anchors file {what}", ["calibrate", "--measurements", "a.json",
                                                 "--fit", "die.launch_us"], "error",
                        write("a.json", text)))
    for what, text in (("empty", ""), ("array", "[]"), ("bad", "{"),
                       ("dup key", None)):
        def chipfile(box, text=text):
            if text is None:
                raw = open(os.path.join(CONFIGS, "a3.json")).read()
                text = raw.replace("{", '{"name": "dup", ', 1)
            box.write("bad.json", text)
        out.append(Case(f"chip file {what}", ["run", "gemm", "--chip", "bad.json"], "error",
                        chipfile))
        out.append(Case(f"chip file {what}", ["check", fac, "--chip", "bad.json"], "error",
                        chipfile))
    out.append(Case("diff report", ["diff", "old.json", "old.json"], "error"))
    out.append(Case("diff report", ["diff", "e.json", "e.json"], "error", write("e.json", "")))
    # 8. Huge shapes, dtype mismatches.
    for p in ("M=9223372036854775807", "M=4611686018427387904", "N=-64", "M=0",
              "block_N=0", "block_N=3"):
        out.append(Case("shape", ["run", fac, "--param", p], "error"))
    out.append(Case("dtype mismatch", ["run", fac], "error",
                    write_kernel(body="_c = T.alloc_ub((8, 64), 'float16')\n"
                                 "T.copy(A[0, 0], _c)")))
    out.append(Case("no such spec", ["run", "kern.py:nope"], "error"))
    out.append(Case("no such spec", ["run", "missing.py"], "error"))
    # 9. Caches that cannot be written degrade.
    out.append(Case("unwritable cache", ["tune", "gemm", "--param", "N=64", "K=64", "--space",
                                         "M=64,128", "--cache-dir", "rocache"], "ok",
                    lambda b: os.makedirs(b.path("rocache"), 0o555)))
    out.append(Case("unwritable cache", ["tune", "gemm", "--param", "N=64", "K=64", "--space",
                                         "M=64,128", "--cache-dir", "filecache"], "ok",
                    write("filecache", "x")))
    out.append(Case("unwritable cache", ["tune", fac, "--space", "block_N=32,64",
                                         "--cache-dir", "rocache"], "ok",
                    lambda b: os.makedirs(b.path("rocache"), 0o555)))
    # 10. Tune of a factory whose candidates leave outputs unwritten (block_N=32 covers
    # half of C with n_num = N // 64 blocks).
    out.append(Case("tune unwritten outputs", ["tune", fac, "--space", "block_N=32,64",
                                               "--no-cache", "--json"], "any",
                    lambda b: b.write("kern.py", kernel_text().replace(
                        "n_num = N // block_N", "n_num = N // 64"))))
    return out


# ---- running and judging ------------------------------------------------------------------

def run_case(case, verbose=False):
    box = Box()
    try:
        if case.setup:
            case.setup(box)
        before = box.snapshot()
        env = dict(os.environ, XDG_CACHE_HOME=box.path(".cache"),
                   TILEPIPE_PROGRESS_DELAY="1000", TILEPIPE_TORCH="shim", **case.env)
        argv = [TILEPIPE] + case.argv
        t0 = time.monotonic()
        p = subprocess.Popen(argv, cwd=box.dir, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             start_new_session=True)
        hung = False
        if case.sig:
            sig, after = case.sig
            try:
                p.wait(timeout=after)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, sig)
        try:
            out, err = p.communicate(timeout=TIMEOUT if not case.sig else 20)
        except subprocess.TimeoutExpired:
            hung = True
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        wall = time.monotonic() - t0
        out, err = out.decode(errors="replace"), err.decode(errors="replace")
        after = box.snapshot()
        rc = p.returncode
        verdict, why = judge(case, box, rc, out, err, hung, before, after)
        if verbose:
            print(f"  rc={rc} {wall:.1f}s {err.strip()[-300:]!r}", file=sys.stderr)
        return verdict, why, rc, err
    finally:
        box.close()


def judge(case, box, rc, out, err, hung, before, after):
    if hung:
        return "hang", f"no exit in {TIMEOUT:.0f} s"
    keep = {"kern.py", "helper.py", "chip.json", "old.json"} | set(case.keep)
    for k in sorted(keep):
        if before.get(k) != after.get(k):
            return "clobbered", f"{k} changed (exit {rc})"
    leftovers = [k for k in after if ".tmp." in k and k not in before]
    if leftovers:
        return "clobbered", f"temporary left behind: {leftovers[0]}"
    if rc is not None and rc < 0 and case.expect != "fail":
        return "crash", f"killed by {signal.Signals(-rc).name}"
    m = RAW.search(err)
    if m:
        return "crash", f"raw error on stderr: {m.group(0)}"
    if rc == 1:
        return "internal", err.strip().splitlines()[-1][:200] if err.strip() else "exit 1"
    if case.expect == "fail":
        return ("good", "") if rc != 0 else ("wrong-0", "exit 0 after an interrupt")
    if case.expect == "ok":
        return ("good", "") if rc == 0 else ("bad-error", f"exit {rc}: {err.strip()[-200:]}")
    if case.expect == "error" and rc == 0:
        return "wrong-0", "exit 0: " + (err.strip()[-200:] or out.strip()[-200:])
    if rc in (2, 3) and not err.strip():
        return "bad-error", "exit 2/3 with nothing on stderr"
    if rc not in (0, 2, 3, None) and rc >= 0:
        return "bad-error", f"exit {rc}"
    return "good", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    ap.add_argument("-v", action="store_true", help="print every case's stderr tail")
    ap.add_argument("--json", help="write the outcomes to this file")
    args = ap.parse_args()
    if not os.access(TILEPIPE, os.X_OK):
        sys.exit(f"{TILEPIPE} is not built (scripts/build.sh release)")
    per_class = collections.defaultdict(collections.Counter)
    bad, rows = 0, []
    selected = [c for c in cases() if args.k in c.name]
    for i, c in enumerate(selected):
        verdict, why, rc, err = run_case(c, args.v)
        per_class[c.cls.split(" at ")[0] if c.cls.startswith("user code") else c.cls][verdict] += 1
        rows.append({"case": c.name, "verdict": verdict, "exit": rc, "why": why})
        mark = "ok " if verdict == "good" else "BAD"
        print(f"[{i + 1}/{len(selected)}] {mark} {verdict:9} {c.name}"
              + (f"  -- {why}" if why else ""), flush=True)
        bad += verdict != "good"
    print("\nper class (good / bad outcomes):")
    for cls in sorted(per_class):
        n = per_class[cls]
        bads = ", ".join(f"{k} {v}" for k, v in sorted(n.items()) if k != "good")
        print(f"  {cls:45} {n['good']:3} good  {bads}")
    print(f"\n{bad} bad outcome(s) in {len(selected)} cases")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return min(bad, 100)


if __name__ == "__main__":
    sys.exit(main())

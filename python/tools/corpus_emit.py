"""The emit check of the corpus (issue 29): every kernel an example script of TileLang-Ascend
compiles and runs, emitted as an expert-mode file (`tilepipe emit`), loaded back through the
front end and run again on the same inputs; tabulated (docs/cli.md, "tilepipe emit").

  /usr/bin/python3 python/tools/corpus_emit.py                  # the passing examples
  /usr/bin/python3 python/tools/corpus_emit.py --only gemm/     # examples whose path has it
  /usr/bin/python3 python/tools/corpus_emit.py --out /tmp/e --keep   # keep the emitted files

The scripts are those the corpus report lists as passed (--report, default
corpus_report.json next to the corpus baseline), or with --only every example whose path
contains the string. Each script runs unchanged (`python3 -m tilepipe FILE.py` with no
arguments) in its own process, in a writable copy of the corpus, under a timeout (300 s), at
most 2 at a time. A hook on the front end's kernel calls (tilelang._jit._call_hooks, as
profiler.do_bench and `tilepipe VERB FILE.py` use) records each distinct compiled kernel with
the inputs of its first call, as the simulator takes them. After the script ends, each one is

  emitted      _ext.emit, as kernel.emit(path) and `tilepipe emit` do
  checked      every dotted T.* / tilelang.* name of the file is in the original's API list
               (python/tests/data/tilelang_api.txt)
  loaded       the file imported and its factory called (no arguments: its defaults)
  compared     original and emitted program run on the same inputs: cycles (timing mode) and
               every output (functional mode, bit for bit)

and classified:
  ok           same cycles, same outputs, only API names
  refused      emit said no: the construct and the source line it names (a clear refusal)
  mismatch     cycles or outputs differ
  error        the emitted file uses a name outside the API list, or does not load / compile
               / run
A script that launches no kernel (a module of kernels, a golden helper) has no rows."""

import argparse
import concurrent.futures as cf
import json
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus_run as cr  # noqa: E402
from api_check import names_outside  # noqa: E402

ROOT = cr.ROOT
DEFAULT_REPORT = "corpus_report.json"  # what corpus_run.py writes (its --out, default ".")
MAX_KERNELS = 8  # distinct kernels checked per script (a sweep of shapes adds nothing)
STATUSES = ("ok", "refused", "mismatch", "error")
# The header note of a file whose tile calls the original bars with GetValue (src/driver/emit.cc).
GETVALUE_NOTE = "PipeBarrier<PIPE_ALL> before each one's GetValue"


# ---- the worker: one script, in its own process ----


def py_name(s):
    out = re.sub(r"[^A-Za-z0-9]", "_", s)
    return "k_" + out if not out or out[0].isdigit() else out


def capture(path, argv):
    """Runs the script as `python3 -m tilepipe` does; (launches, script error or "").
    A launch is (Compiled, inputs by name), first call of each distinct compiled kernel."""
    import runpy

    from tilepipe import runner
    from tilelang import _jit

    runner.use_host_torch()
    launches, seen = [], set()

    def hook(launch):
        c, host = launch
        if id(c) in seen or len(launches) >= MAX_KERNELS:
            return
        seen.add(id(c))
        launches.append((c, {k: v.copy() for k, v in host.items()}))

    _jit._call_hooks.append(hook)
    old = (list(sys.argv), os.getcwd(), list(sys.path))
    sys.argv = [path] + list(argv)
    sys.path.insert(0, os.path.dirname(path))
    error = ""
    try:
        os.chdir(os.path.dirname(path))
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        if e.code not in (0, None):
            error = f"exit {e.code}"
    except BaseException as e:  # noqa: BLE001 - the script's own failure, recorded
        error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    finally:
        _jit._call_hooks.remove(hook)
        sys.argv, sys.path[:] = old[0], old[2]
        os.chdir(old[1])
    return launches, error


def check_kernel(c, host, out_path):
    """{status, reason, where, cycles, ...} of one launch's round trip through emit."""
    import importlib.util

    import numpy as np

    from tilelang._core import _ext

    jit = c.ext
    row = {"kernel": jit.name, "factory_args": dict(jit.factory_args)}
    label = f"{jit.name}({', '.join(f'{k}={v}' for k, v in jit.factory_args.items())})"
    try:
        text = _ext.emit(c.compiled, jit.name, jit.factory_args, label)
    except Exception as e:  # noqa: BLE001 - emit's refusal: a located diagnostic
        msg = str(e).strip().splitlines()[0]
        m = re.match(r"(\S+?):(\d+)(?::\d+)?: (?:error: )?(?:emit: )?(.*)", msg)
        where = f"{os.path.basename(m.group(1))}:{m.group(2)}" if m else ""
        reason = m.group(3) if m else msg
        row.update(status="refused", reason=reason[:300], where=where,
                   construct=construct(reason))
        return row
    with open(out_path, "w") as f:
        f.write(text)
    row["file"] = out_path
    outside = names_outside(text)
    if outside:
        row.update(status="error", reason="names outside the API list: " + ", ".join(outside),
                   where="", construct="API name " + outside[0])
        return row
    outputs = [n for n, r in c.info.roles.items() if r == "output"]
    try:
        spec = importlib.util.spec_from_file_location(f"emitted_{jit.name}", out_path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        again = getattr(mod, py_name(jit.name))()
        c2 = again._current()
        ins2 = {n for n, r in c2.info.roles.items() if r in ("input", "output")}
        if set(host) - ins2:
            raise RuntimeError(f"the emitted kernel has no parameter {sorted(set(host) - ins2)}")
        out2 = [n for n, r in c2.info.roles.items() if r == "output"]
        if sorted(out2) != sorted(outputs):
            raise RuntimeError(f"outputs {sorted(out2)} != the original's {sorted(outputs)}")
    except Exception as e:  # noqa: BLE001 - the emitted file does not load or compile
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        loc = re.search(re.escape(os.path.basename(out_path)) + r":(\d+)", str(e))
        row.update(status="error", reason=f"{type(e).__name__}: {msg}"[:300],
                   where=f"emitted:{loc.group(1)}" if loc else "",
                   construct="load: " + type(e).__name__)
        return row
    try:
        t0 = _ext.run(c.compiled, host, "timing")
        t1 = _ext.run(c2.compiled, host, "timing")
        f0 = _ext.run(c.compiled, host, "functional", outputs=outputs)
        f1 = _ext.run(c2.compiled, host, "functional", outputs=outputs)
    except Exception as e:  # noqa: BLE001
        row.update(status="error", reason=f"run: {type(e).__name__}: {str(e)[:250]}", where="",
                   construct="run: " + type(e).__name__)
        return row
    row["cycles"], row["cycles_emitted"] = t0.cycles, t1.cycles
    bad = []
    # A file that notes the original's GetValue barriers (tile calls with a buffer-element
    # scalar) runs slower, as the original compiles it: slower is right, faster is not.
    noted = GETVALUE_NOTE in text
    if t0.cycles != t1.cycles and not (noted and t1.cycles > t0.cycles):
        bad.append(f"cycles {t0.cycles:.0f} -> {t1.cycles:.0f}")
    for n in outputs:
        a, b = np.asarray(f0.outputs[n]), np.asarray(f1.outputs[n])
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=True):
            diff = int(np.sum(~np.isclose(a, b, equal_nan=True))) if a.shape == b.shape else -1
            bad.append(f"output {n} differs ({diff} of {a.size} elements)")
    if bad:
        row.update(status="mismatch", reason="; ".join(bad)[:300], where="",
                   construct="cycles" if bad[0].startswith("cycles") else "outputs")
    else:
        row.update(status="ok", reason="", where="", construct="")
    return row


def construct(reason):
    """The construct a refusal names, for grouping (`tile.compare`, `Parallel loop`, ...)."""
    m = re.search(r"\b(tile\.\w+|gemm with \w+ transposed|Parallel loop|allocation of '\w+' in GM)",
                  reason)
    return m.group(1) if m else reason[:60]


def worker(path, out_dir, argv):
    sys.setrecursionlimit(10000)
    with open(os.devnull, "w") as quiet, _redirect(quiet):
        launches, error = capture(path, argv)
    rows = []
    stem = os.path.splitext(os.path.basename(path))[0]
    for i, (c, host) in enumerate(launches):
        out_path = os.path.join(out_dir, f"{stem}__{i}_{py_name(c.ext.name)}.py")
        t = time.monotonic()
        try:
            with open(os.devnull, "w") as quiet, _redirect(quiet):
                row = check_kernel(c, host, out_path)
        except Exception as e:  # noqa: BLE001 - never lose the other kernels' rows
            row = {"kernel": c.ext.name, "status": "error", "reason": repr(e)[:300], "where": "",
                   "construct": type(e).__name__}
        row["seconds"] = round(time.monotonic() - t, 1)
        rows.append(row)
    print(json.dumps({"rows": rows, "script_error": error}))


class _redirect:
    """The script's prints (and the emitted kernels') away from the JSON on stdout."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        self.saved = sys.stdout
        sys.stdout = self.f

    def __exit__(self, *a):
        sys.stdout = self.saved


# ---- the driver: all scripts ----


def run_script(relpath, root, out_dir, timeout):
    path = os.path.join(root, relpath)
    d = os.path.join(out_dir, os.path.dirname(relpath))
    os.makedirs(d, exist_ok=True)
    rc, out, err, secs, _ = cr.run([sys.executable, os.path.abspath(__file__), "--worker", path,
                                 "--emit-dir", d], os.path.dirname(path), timeout)
    res = {"script": relpath, "seconds": round(secs, 1), "rows": [], "script_error": ""}
    if rc is None:
        res["script_error"] = f"timeout ({timeout:.0f} s)"
        return res
    last = [ln for ln in out.splitlines() if ln.startswith("{")]
    if rc != 0 or not last:
        tail = [ln for ln in err.splitlines() if ln.strip()][-1:]
        res["script_error"] = f"worker exit {rc}: {tail[0] if tail else ''}"[:300]
        return res
    res.update(json.loads(last[-1]))
    for r in res["rows"]:
        r["script"] = relpath
        if r.get("file"):
            r["file"] = os.path.relpath(r["file"], out_dir)
    return res


def summarize(rows):
    s = {k: 0 for k in STATUSES}
    for r in rows:
        s[r["status"]] = s.get(r["status"], 0) + 1
    s["kernels"] = len(rows)
    return s


def by_construct(rows, status):
    out = {}
    for r in rows:
        if r["status"] == status:
            out[r.get("construct") or "?"] = out.get(r.get("construct") or "?", 0) + 1
    return dict(sorted(out.items(), key=lambda x: -x[1]))


def summary_line(report):
    s = report["summary"]
    parts = [f"{s['scripts']} scripts ({s['with_kernels']} launch kernels), {s['kernels']} "
             f"kernels: **{s['ok']} round-trip OK**"]
    ref = by_construct(report["rows"], "refused")
    parts.append(f"{s['refused']} refused" + (" (" + ", ".join(f"{k}: {v}" for k, v in ref.items())
                                              + ")" if ref else ""))
    parts.append(f"{s['mismatch']} mismatch")
    err = by_construct(report["rows"], "error")
    parts.append(f"{s['error']} emitted-file error" + (
        " (" + ", ".join(f"{k}: {v}" for k, v in err.items()) + ")" if err else ""))
    return ", ".join(parts) + "."


def markdown(report):
    lines = [f"# Corpus emit check ({report['when']}, tilepipe {report['commit']})", "",
             summary_line(report), "",
             "| script | kernel | status | cycles | construct | reason | where |",
             "|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        lines.append(f"| {r['script']} | {r['kernel']} | {r['status']} | {r.get('cycles', '')} | "
                     f"{cr.md(r.get('construct', ''))} | {cr.md(r.get('reason', ''))} | "
                     f"{r.get('where', '')} |")
    quiet = [s for s in report["scripts"] if not s["rows"]]
    if quiet:
        lines += ["", "Scripts with no kernel checked:", "", "| script | s | why |", "|---|---|---|"]
        for s in quiet:
            lines.append(f"| {s['script']} | {s['seconds']} | "
                         f"{cr.md(s['script_error'] or 'launched no kernel')} |")
    return "\n".join(lines) + "\n"


def passed_scripts(report_path):
    with open(report_path) as f:
        rep = json.load(f)
    return sorted(e["script"] for e in rep.get("examples", []) if e["status"] == "passed")


def check(scripts, out_dir, timeout=300.0, jobs=2, root=None, log=print):
    """Runs the check over `scripts` (paths relative to the corpus); the report dict."""
    report = {"when": time.strftime("%Y-%m-%d %H:%M"), "commit": cr.commit(), "scripts": [],
              "rows": []}
    with tempfile.TemporaryDirectory(prefix="tilepipe-emit-") as work:
        if root is None:
            root = os.path.join(work, "examples")
            cr.writable_copy(cr.EXAMPLES, root)
        with cf.ThreadPoolExecutor(max(1, min(jobs, cr.MAX_JOBS))) as pool:
            futs = {pool.submit(run_script, s, root, out_dir, timeout): s for s in scripts}
            for fut in cf.as_completed(futs):
                res = fut.result()
                report["scripts"].append(res)
                st = summarize(res["rows"])
                log(f"{res['seconds']:6.1f}s {res['script']}: {st['kernels']} kernels, "
                    f"{st['ok']} ok {st['refused']} refused {st['mismatch']} mismatch "
                    f"{st['error']} error {res['script_error'][:80]}")
                for r in res["rows"]:
                    if r["status"] != "ok":
                        log(f"    {r['kernel']}: {r['status']} {r.get('where', '')} "
                            f"{r.get('reason', '')[:150]}")
    report["scripts"].sort(key=lambda s: s["script"])
    report["rows"] = [r for s in report["scripts"] for r in s["rows"]]
    report["summary"] = dict(summarize(report["rows"]), scripts=len(report["scripts"]),
                             with_kernels=sum(1 for s in report["scripts"] if s["rows"]),
                             refused_by=by_construct(report["rows"], "refused"),
                             error_by=by_construct(report["rows"], "error"))
    return report


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".", help="directory of corpus_emit.md / .json")
    ap.add_argument("--report", default=DEFAULT_REPORT,
                    help="corpus report (corpus_run.py) whose passed examples are checked")
    ap.add_argument("--only", action="append", help="examples whose path contains this")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per script")
    ap.add_argument("--keep", action="store_true", help="keep the emitted files in OUT/emitted")
    ap.add_argument("-j", "--jobs", type=int, default=cr.MAX_JOBS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--emit-dir", help=argparse.SUPPRESS)
    a, rest = ap.parse_known_args(argv)
    if a.worker:
        worker(a.worker, a.emit_dir, rest)
        return 0
    if a.only:
        scripts = cr.example_scripts(cr.EXAMPLES, a.only)
    elif not os.path.isfile(a.report):
        print(f"corpus_emit: no corpus report at {a.report}: run python/tools/corpus_run.py "
              "first (it writes corpus_report.json), or give --report FILE or --only SUBSTRING",
              file=sys.stderr)
        return 2
    else:
        scripts = passed_scripts(a.report)
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tilepipe-emitted-") as tmp:
        emitted = os.path.join(a.out, "emitted") if a.keep else tmp
        report = check(scripts, emitted, a.timeout, a.jobs)
    with open(os.path.join(a.out, "corpus_emit.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(a.out, "corpus_emit.md"), "w") as f:
        f.write(markdown(report))
    print(summary_line(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

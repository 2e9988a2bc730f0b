"""The corpus report: every example script of TileLang-Ascend and its language test suite,
run unchanged through tilepipe's runner, classified and tabulated (docs/python.md).

  /usr/bin/python3 python/tools/corpus_run.py                 # all, writes corpus_report.{md,json}
  /usr/bin/python3 python/tools/corpus_run.py --only gemm/    # examples whose path contains it
  /usr/bin/python3 python/tools/corpus_run.py --no-language --out /tmp/r
  /usr/bin/python3 python/tools/corpus_run.py --no-language -j 1 --timeout 900   # the speed
      benchmark: each example alone, its whole time; the slowest ten with time and memory

Each example runs as `python3 -m tilepipe FILE.py` with no arguments (its own defaults), in
its own directory, under a timeout (60 s), at most 2 at a time. The corpus is copied to a
temporary directory first: some scripts write next to themselves (logs, copied sources), and
the corpus in shared/ stays untouched. Each row has the script's wall time and peak
resident memory (the child's rusage); the report ends with the slowest ten and whether each
is within the budget of 60 s and 4 GB (issue 48). The language suite runs one
pytest process per test file under the runner (so `import torch` is the runner's host torch).

Classification of an example (by exit status and output; the scripts check themselves):
  passed       exit 0 and no failure message printed
  unsupported  a clear error: TilelangError / TilepipeError (a located diagnostic),
               NotImplementedError, ImportError, or a "needs N devices" stop; with the reason
               and the file:line of the error
  failed       a wrong result (AssertionError, or exit 0 with a mismatch message printed) or
               a crash (killed by a signal, or any other uncaught exception); a script
               killed by SIGKILL (out of memory beside another) is run again alone
  timeout      still running after the timeout; with other scripts running beside it, it is
               run again alone (the cores were shared) and reported as that run
A language case is passed / unsupported / failed by the same rules applied to its pytest
outcome (skipped cases are listed apart)."""

import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "tilelang-ascend")
EXAMPLES = os.environ.get("TILELANG_CORPUS", os.path.join(SHARED, "examples"))
LANGUAGE = os.path.join(os.path.dirname(EXAMPLES), "testing", "python", "language")
BUILD = os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))
MAX_JOBS = 2  # the machine is shared: never more

# Exceptions that are a clear "this is not modelled" stop, not a wrong answer or a crash.
UNSUPPORTED = ("TilelangError", "TilepipeError", "UnsupportedName", "NotImplementedError",
               "ImportError", "ModuleNotFoundError", "DeviceCountError")
WRONG = ("AssertionError",)
# Printed by scripts that check their result without raising.
FAIL_TEXT = re.compile(r"mismatch|not match|\bfail(ed|ure)?\b|\bwrong\b|incorrect|not close"
                       r"|\bnot pass|\[FAILED\]|\bFAIL\b", re.I)
STATISTIC = re.compile(r"mismatch(es|ed)?( number| count)?\s*[:=]\s*\d", re.I)
VERDICT_PASS = re.compile(r"\btest(s)? passed\b", re.I)
PASS_TEXT = re.compile(r"pass|match|success|\bok\b|correct|all close|✓|verified|\bsame\b", re.I)
EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b[^:]*|"
                      r"[A-Za-z_][\w.]*\.[A-Z]\w*)(?::\s?(.*))?$")
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')
LOC_IN_MSG = re.compile(r"^(\S+?\.py):(\d+)(?::\d+)?: error: (.*)")


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python"), BUILD])
    e["TILEPIPE_BUILD_DIR"] = BUILD
    e["PYTHONDONTWRITEBYTECODE"] = "1"  # the corpus tree is read-only (shared/)
    e.pop("TILEPIPE_PROFILE", None)
    return e


def run(cmd, cwd, timeout):
    """(returncode or None on timeout, stdout, stderr, seconds, rusage); the whole process
    group is killed on timeout. The child is reaped with os.wait4, whose rusage gives its peak
    memory (the largest of the child and the processes it waited for) and CPU time."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+", errors="replace") as fo, \
            tempfile.TemporaryFile("w+", errors="replace") as fe:
        p = subprocess.Popen(cmd, cwd=cwd, env=env(), stdout=fo, stderr=fe,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        rc = None
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() - t0 > timeout:
                os.killpg(p.pid, signal.SIGKILL)
                _, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.05)
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait
        secs = time.monotonic() - t0
        fo.seek(0)
        fe.seek(0)
        return rc, fo.read(), fe.read(), secs, usage


def rel(path, base):
    try:
        r = os.path.relpath(os.path.abspath(path), base)
    except ValueError:
        return path
    return path if r.startswith("..") else r


def last_exception(text):
    """(type, message, [(file, line)] frames) of the last traceback in `text`, or None."""
    lines = text.splitlines()
    start = max((i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent")),
                default=None)
    if start is None:
        return None
    frames = []
    for i in range(start + 1, len(lines)):
        ln = lines[i]
        m = FRAME.match(ln)
        if m:
            frames.append((m.group(1), int(m.group(2))))
            continue
        if ln.startswith(" ") or not ln.strip() or ln.startswith("During handling") \
                or ln.startswith("The above exception"):
            continue
        m = EXC_LINE.match(ln)
        if m:
            msg = (m.group(2) or "").strip()
            # the message's continuation lines (hints, tables) up to the end
            more = [x for x in lines[i + 1:] if x.strip()][:3]
            return m.group(1).strip(), msg, frames, more
    return None


def locate(exc, frames, script, base):
    """file:line of an error: the location a located message carries, else the innermost
    frame in the user's own files (not tilepipe's, not the standard library)."""
    m = LOC_IN_MSG.match(exc)
    if m:
        f = m.group(1)
        if not os.path.isabs(f) and script:  # relative to the script's directory (its cwd)
            f = os.path.join(os.path.dirname(script), f)
        return f"{rel(f, base)}:{m.group(2)}", m.group(3)
    own = [f for f in frames if not f[0].startswith("<") and "/python/tilelang/" not in f[0]
           and "/python/tilepipe/" not in f[0] and "/usr/lib/" not in f[0]]
    pick = own[-1] if own else (frames[-1] if frames else None)
    return (f"{rel(pick[0], base)}:{pick[1]}" if pick else ""), exc


def classify(rc, out, err, base, script=None):
    """{status, kind, reason, where} for one run."""
    if rc is None:
        return {"status": "timeout", "kind": "", "reason": "", "where": ""}
    if rc == 3:  # the runner's status for a check finding (race, flag, deadlock): a wrong run
        found = [LOC_IN_MSG.match(ln) for ln in err.splitlines()]
        m = next((x for x in found if x), None)
        summary = next((ln for ln in err.splitlines() if "the script caught" in ln), "")
        return {"status": "failed", "kind": "check finding",
                "reason": (m.group(3) if m else summary)[:300],
                "where": f"{m.group(1)}:{m.group(2)}" if m else ""}
    if rc == 2:  # the runner's exit status for a user error: `file:line:col: error: ...`
        for ln in err.splitlines():
            m = LOC_IN_MSG.match(ln)
            if m:
                f = m.group(1)
                if not os.path.isabs(f) and script:
                    f = os.path.join(os.path.dirname(script), f)
                kind = "DeviceCountError" if re.search(r"needs \d+ devices", ln) else \
                    "TilelangError"
                return {"status": "unsupported", "kind": kind, "reason": m.group(3)[:300],
                        "where": f"{rel(f, base)}:{m.group(2)}"}
    tb = last_exception(err) or last_exception(out)
    if rc == 0 and tb is None:
        logged = [ln for ln in err.splitlines()  # the logging module's lines on stderr
                  if re.match(r"(INFO|WARNING|ERROR|CRITICAL):", ln)]
        lines = out.splitlines()
        # A count the script reports on its way to its own verdict ("mismatch number: 324,
        # accuracy: 0.9997" then "Test passed!", the lightning indexer's 99 % criterion) is
        # not a failure message: the verdict after it decides.
        verdict = max((i for i, ln in enumerate(lines) if VERDICT_PASS.search(ln)), default=-1)
        bad = [ln for i, ln in enumerate(lines + logged) if FAIL_TEXT.search(ln)
               and not re.search(r"\b0 fail|fail(ed)?: 0\b|no fail", ln, re.I)
               and not (i < verdict and STATISTIC.search(ln))]
        if bad:
            return {"status": "failed", "kind": "wrong result", "reason": bad[0].strip()[:200],
                    "where": ""}
        if re.search(r"\[SKIP\]", out):
            return {"status": "unsupported", "kind": "skipped by the script",
                    "reason": next(ln for ln in out.splitlines() if "[SKIP]" in ln)[:200],
                    "where": ""}
        if PASS_TEXT.search(out) or PASS_TEXT.search(err):  # some log their check
            return {"status": "passed", "kind": "", "reason": "", "where": ""}
        return {"status": "passed", "kind": "no check", "reason": "exit 0, no check message "
                "printed (a module of kernels, or a script that checks nothing)", "where": ""}
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals.__members__.values() else -rc
        return {"status": "failed", "kind": "crash", "reason": f"killed by signal {name}",
                "where": ""}
    if tb is None:
        tail = [ln for ln in (err or out).splitlines() if ln.strip()][-1:]
        return {"status": "failed", "kind": f"exit {rc}", "reason": (tail[0] if tail else "")[:300],
                "where": ""}
    etype, msg, frames, more = tb
    short = etype.rsplit(".", 1)[-1]
    where, reason = locate(msg, frames, script, base)
    if not reason and more:
        reason = more[0].strip()
    if short in UNSUPPORTED or re.search(r"needs \d+ devices", msg):
        status, kind = "unsupported", short
    elif short in WRONG:
        status, kind = "failed", "wrong result"
        reason = reason or "assertion failed"
        detail = [x.strip() for x in more if x.strip()]
        if detail and len(reason) < 40:
            reason = (reason + " " + " ".join(detail[:2])).strip()
    else:
        status, kind = "failed", short
    return {"status": status, "kind": kind, "reason": reason[:300], "where": where}


# ---- examples ----


def example_scripts(root, only=None):
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                r = os.path.relpath(os.path.join(d, f), root)
                if not only or any(o in r for o in only):
                    out.append(r)
    return sorted(out)


def run_example(relpath, timeout, root=EXAMPLES):
    path = os.path.join(root, relpath)
    rc, out, err, secs, usage = run([sys.executable, "-m", "tilepipe", path],
                                    os.path.dirname(path), timeout)
    r = classify(rc, out, err, root, path)
    # Wall time is the budget's measure; CPU time (user + system) says how much of it was
    # the script's own work on a machine shared with other jobs.
    r.update({"script": relpath, "seconds": round(secs, 1),
              "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
              "peak_mb": round(usage.ru_maxrss / 1024), "exit": rc})
    return r


# ---- language suite ----

DRIVER = """import sys, pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def language_files(root):
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.relpath(os.path.join(d, f), root) for f in files
                if f.startswith("test_") and f.endswith(".py")]
    return sorted(out)


def run_language_file(relpath, timeout, root=LANGUAGE):
    """One pytest process over one test file under the runner; a row per case."""
    with tempfile.TemporaryDirectory(prefix="tilepipe-lang-") as tmp:
        driver = os.path.join(tmp, "pytest_driver.py")
        with open(driver, "w") as f:
            f.write(DRIVER)
        xml = os.path.join(tmp, "junit.xml")
        path = os.path.join(root, relpath)
        rc, out, err, secs, _ = run(
            [sys.executable, "-m", "tilepipe", driver, path, "-q", "-p", "no:cacheprovider",
             "--rootdir", tmp, "--junitxml", xml, "-o", "junit_family=xunit1"],
            os.path.dirname(path), timeout)
        cases = parse_junit(xml, relpath, root) if os.path.exists(xml) else []
    if not cases:  # collection failed, timed out or crashed before writing the report
        r = classify(rc, out, err, root) if rc != 5 else {"status": "failed", "kind": "",
                                                           "reason": "no tests collected",
                                                           "where": ""}
        if r["status"] == "passed":
            r = {"status": "failed", "kind": "no report", "reason": (out + err)[-300:],
                 "where": ""}
        r.update({"case": relpath, "seconds": round(secs, 1)})
        return relpath, secs, [r]
    return relpath, secs, cases


def parse_junit(xml, relpath, root):
    cases = []
    for tc in ET.parse(xml).getroot().iter("testcase"):
        name = f"{relpath}::{tc.get('name')}"
        secs = float(tc.get("time") or 0)
        bad = tc.find("failure")
        if bad is None:
            bad = tc.find("error")
        skip = tc.find("skipped")
        if bad is not None:
            text = bad.text or ""
            r = classify_pytest(text, bad.get("message") or "", root)
        elif skip is not None:
            r = {"status": "skipped", "kind": "", "reason": (skip.get("message") or "")[:200],
                 "where": ""}
        else:
            r = {"status": "passed", "kind": "", "reason": "", "where": ""}
        r.update({"case": name, "seconds": round(secs, 2)})
        cases.append(r)
    return cases


def classify_pytest(text, message, root):
    """A pytest failure's long report: its `E   Type: message` line and the frames."""
    etype, msg = "", message
    for ln in text.splitlines():
        if ln.startswith("E   "):
            m = EXC_LINE.match(ln[4:].strip())
            if m and not etype:
                etype, msg = m.group(1), (m.group(2) or "")
    frames = []
    for ln in text.splitlines():
        m = re.match(r"^(\S+\.py):(\d+): (\w+)", ln)
        if m:
            frames.append((m.group(1), int(m.group(2))))
    short = etype.rsplit(".", 1)[-1] if etype else "AssertionError"
    where, reason = locate(msg, frames, None, root)
    if short in UNSUPPORTED or re.search(r"needs \d+ devices", msg):
        status, kind = "unsupported", short
    elif short in WRONG:
        status, kind = "failed", "wrong result"
    else:
        status, kind = "failed", short
    return {"status": status, "kind": kind, "reason": reason.strip()[:300], "where": where}


# ---- report ----

STATUSES = ("passed", "unsupported", "failed", "timeout")


def summarize(rows, key="status"):
    s = {k: 0 for k in STATUSES}
    for r in rows:
        s[r[key]] = s.get(r[key], 0) + 1
    s["total"] = len(rows)
    return s


def markdown(report):
    ex, lang = report.get("examples", []), report.get("language", [])
    lines = [f"# Corpus report ({report['when']}, tilepipe {report['commit']})", ""]
    if ex:
        s = summarize(ex)
        nocheck = sum(1 for r in ex if r["status"] == "passed" and r["kind"] == "no check")
        lines += ["## Examples", "",
                  f"{s['total']} scripts at their own defaults, timeout {report['timeout']} s: "
                  f"**{s['passed']} passed** ({nocheck} of them print no check: modules of "
                  f"kernels), {s['unsupported']} unsupported, "
                  f"{s['failed']} failed, {s['timeout']} timeout "
                  f"({sum(r['seconds'] for r in ex):.0f} s in all).", "",
                  "| script | status | s | peak MB | kind | reason | where |",
                  "|---|---|---|---|---|---|---|"]
        for r in ex:
            lines.append(f"| {r['script']} | {r['status']} | {r['seconds']} | "
                         f"{r.get('peak_mb', '')} | {r['kind']} | {md(r['reason'])} | "
                         f"{r['where']} |")
        lines.append("")
        if report.get("slowest"):
            lines += slowest_table(report["slowest"]) + [""]
    if lang:
        s = summarize(lang)
        files = report.get("language_files", {})
        lines += ["## Language suite (testing/python/language)", "",
                  f"{s['total']} cases: **{s['passed']} passed**, {s['unsupported']} unsupported, "
                  f"{s['failed']} failed, {s['timeout']} timeout, {s.get('skipped', 0)} skipped "
                  f"({sum(files.values()):.0f} s in all).", "",
                  "| file | cases | passed | unsupported | failed | timeout |",
                  "|---|---|---|---|---|---|"]
        for f in sorted(files):
            fs = summarize([r for r in lang if r["case"].split("::")[0] == f])
            lines.append(f"| {f} | {fs['total']} | {fs['passed']} | {fs['unsupported']} | "
                         f"{fs['failed']} | {fs['timeout']} |")
        lines += ["", "Cases not passed, grouped by reason:", "",
                  "| status | kind | reason | where | cases |", "|---|---|---|---|---|"]
        groups = {}
        for r in lang:
            if r["status"] == "passed":
                continue
            k = (r["status"], r["kind"], re.sub(r"\d+", "N", r["reason"])[:120], r["where"])
            groups.setdefault(k, []).append(r["case"])
        for (st, kind, reason, where), cs in sorted(groups.items(), key=lambda x: -len(x[1])):
            lines.append(f"| {st} | {kind} | {md(reason)} | {where} | {len(cs)} |")
        lines.append("")
    return "\n".join(lines)


# The budget an example at its own defaults is held to (issue 48): on the 2-core machine.
BUDGET_S = 60.0
BUDGET_MB = 4096


def slowest(examples, n):
    """The n slowest examples: script, seconds, peak memory and whether each is in budget (a
    timeout is over it: its time is the timeout's)."""
    rows = sorted(examples, key=lambda r: (-r["seconds"], r["script"]))[:max(0, n)]
    return [{"script": r["script"], "status": r["status"], "seconds": r["seconds"],
             "cpu_s": r.get("cpu_s", 0), "peak_mb": r.get("peak_mb", 0),
             "within_60s": r["status"] != "timeout" and r["seconds"] <= BUDGET_S,
             "within_4gb": r.get("peak_mb", 0) <= BUDGET_MB} for r in rows]


def slowest_table(rows):
    out = [f"Slowest {len(rows)} examples (budget {BUDGET_S:.0f} s and {BUDGET_MB // 1024} GB):",
           "", "| script | status | wall s | CPU s | peak MB | <= 60 s | <= 4 GB |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['script']} | {r['status']} | {r['seconds']} | {r['cpu_s']} | "
                   f"{r['peak_mb']} | "
                   f"{'yes' if r['within_60s'] else 'NO'} | {'yes' if r['within_4gb'] else 'NO'} |")
    return out


def md(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        return "?"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=".", help="directory of corpus_report.md / .json")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per example script")
    ap.add_argument("--language-timeout", type=float, default=900.0,
                    help="seconds per language test file")
    ap.add_argument("--slowest", type=int, default=10,
                    help="the slowest N examples, with time, peak memory and the budget")
    ap.add_argument("-j", "--jobs", type=int, default=MAX_JOBS)
    ap.add_argument("--only", action="append", help="examples whose path contains this")
    ap.add_argument("--no-examples", action="store_true")
    ap.add_argument("--no-language", action="store_true")
    a = ap.parse_args(argv)
    jobs = max(1, min(a.jobs, MAX_JOBS))
    with tempfile.TemporaryDirectory(prefix="tilepipe-corpus-") as work:
        ex_root = os.path.join(work, "examples")
        lang_root = os.path.join(work, "testing", "python", "language")
        if not a.no_examples:
            writable_copy(EXAMPLES, ex_root)
        if not a.no_language and not a.only and os.path.isdir(LANGUAGE):
            writable_copy(LANGUAGE, lang_root)
        return run_all(a, jobs, ex_root, lang_root)


def writable_copy(src, dst):
    """A copy of the tree src at dst that its scripts may write into (shared/ is read-only)."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for d, _, files in os.walk(dst):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)


def run_all(a, jobs, ex_root, lang_root):
    report = {"when": time.strftime("%Y-%m-%d %H:%M"), "commit": commit(),
              "timeout": a.timeout, "examples": [], "language": [], "language_files": {}}
    with cf.ThreadPoolExecutor(jobs) as pool:
        futs = {}
        if not a.no_language and not a.only and os.path.isdir(lang_root):
            # the long ones first, so they overlap the examples
            for f in sorted(language_files(lang_root), key=lambda f: "elementwise" not in f):
                futs[pool.submit(run_language_file, f, a.language_timeout, lang_root)] = ("lang", f)
        if not a.no_examples:
            for s in example_scripts(ex_root, a.only):
                futs[pool.submit(run_example, s, a.timeout, ex_root)] = ("ex", s)
        for fut in cf.as_completed(futs):
            kind, name = futs[fut]
            if kind == "ex":
                r = fut.result()
                report["examples"].append(r)
                print(f"{r['status']:11} {r['seconds']:6.1f}s {r['peak_mb']:6d} MB {name}  "
                      f"{r['kind']} {r['reason'][:90]}",
                      flush=True)
            else:
                f, secs, cases = fut.result()
                report["language"] += cases
                report["language_files"][f] = round(secs, 1)
                s = summarize(cases)
                print(f"language    {secs:6.1f}s {f}: {s['passed']}/{s['total']} passed", flush=True)
    # A script the kernel killed beside another (two 19 GB host references do not fit in
    # 24 GB), or that ran out of time sharing the cores, is run again alone: its own memory
    # and time are what the report is about.
    beside = jobs > 1 and len(report["examples"]) > 1
    for i, r in enumerate(report["examples"]):
        killed = r["status"] == "failed" and "SIGKILL" in r["reason"]
        if killed or (beside and r["status"] == "timeout"):
            again = run_example(r["script"], a.timeout, ex_root)
            again["reason"] = again["reason"] or (
                f"run alone ({'killed' if killed else 'timed out'} beside another script)")
            report["examples"][i] = again
            print(f"{again['status']:11} {again['seconds']:6.1f}s {again['peak_mb']:6d} MB "
                  f"{r['script']}  (alone)",
                  flush=True)
    report["examples"].sort(key=lambda r: r["script"])
    report["language"].sort(key=lambda r: r["case"])
    report["summary"] = {"examples": dict(summarize(report["examples"]), no_check=sum(
        1 for r in report["examples"] if r["status"] == "passed" and r["kind"] == "no check")),
                         "language": summarize(report["language"])}
    report["slowest"] = slowest(report["examples"], a.slowest)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "corpus_report.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(a.out, "corpus_report.md"), "w") as f:
        f.write(markdown(report))
    print(json.dumps(report["summary"]))
    if report["slowest"]:
        print("\n".join(slowest_table(report["slowest"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

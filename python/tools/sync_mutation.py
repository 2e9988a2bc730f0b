"""Sync mutation over the original's hand-synchronised examples (issue 46: a green run is a
right run): each example whose source places its own flags (`T.set_flag`, `T.wait_flag`,
`T.pipe_barrier`, cross-core flags) is checked with `tilepipe check FILE.py
--find-redundant`, which drops each sync op of its kernel on its own and runs the functional
check with the race detector. Every drop must be caught (race, deadlock, flag error) or be
redundant (no finding and bit-identical outputs); a drop that changes the outputs with no
finding is a hole in the checker ("mismatch"), the failure this tool looks for.

  /usr/bin/python3 python/tools/sync_mutation.py                # every hand-synced example
  /usr/bin/python3 python/tools/sync_mutation.py --only gemm/   # paths containing it
  /usr/bin/python3 python/tools/sync_mutation.py --out /tmp/m   # sync_mutation.{md,json}

Exit 1 when any drop is a mismatch, else 0. Examples the front end does not run, or whose
unmutated check fails, are listed as skipped with the reason (they have their own report:
corpus_run.py)."""

import argparse
import concurrent.futures as cf
import json
import os
import re
import sys
import tempfile

import corpus_run as cr

HAND_SYNC = re.compile(r"\bT\.(set_flag|wait_flag|pipe_barrier|set_cross_flag|wait_cross_flag)\(")
OUTCOMES = ("race", "deadlock", "flag-error", "redundant", "mismatch", "error")


def hand_synced(root, only=None):
    """The example scripts (relative paths) that place flags of their own."""
    out = []
    for rel in cr.example_scripts(root, [only] if only else None):
        with open(os.path.join(root, rel), errors="replace") as f:
            if HAND_SYNC.search(f.read()):
                out.append(rel)
    return out


def check_script(rel, root, timeout):
    path = os.path.join(root, rel)
    tp = os.path.join(cr.BUILD, "tilepipe")
    rc, out, err, secs, _ = cr.run([tp, "check", path, "--find-redundant", "--json"],
                                   os.path.dirname(path), timeout)
    row = {"script": rel, "seconds": round(secs, 1)}
    if rc is None:
        return dict(row, status="skipped", reason=f"timeout after {timeout} s")
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        last = (err.strip().splitlines() or [f"exit {rc}"])[-1]
        return dict(row, status="skipped", reason=last[:300])
    if "counts" not in doc:  # the unmutated check failed: its findings, not a mutation's
        errs = doc.get("errors") or [{}]
        what = errs[0].get("kind") or doc.get("mismatch") or f"exit {rc}"
        return dict(row, status="skipped", reason=f"the unmutated check fails: {what} at "
                                                  f"{errs[0].get('where', '?')}")
    counts = {k: doc["counts"].get(k, 0) for k in OUTCOMES}
    holes = [s for s in doc["syncs"] if s.get("outcome") == "mismatch"]
    return dict(row, status="hole" if holes else "ok", kernel=doc.get("kernel"),
                syncs=len(doc["syncs"]), counts=counts,
                holes=[{k: s.get(k) for k in ("index", "kind", "pipes", "event_id", "source",
                                              "mismatch")} for s in holes])


def markdown(rows):
    lines = ["# Sync mutation of the hand-synced examples", "",
             "| script | status | syncs | " + " | ".join(OUTCOMES) + " | s |",
             "|---|---|---|" + "---|" * len(OUTCOMES) + "---|"]
    for r in rows:
        c = r.get("counts", {})
        lines.append(f"| {r['script']} | {r['status']} | {r.get('syncs', '')} | "
                     + " | ".join(str(c.get(k, "")) for k in OUTCOMES)
                     + f" | {r['seconds']} |")
    skipped = [r for r in rows if r["status"] == "skipped"]
    if skipped:
        lines += ["", "Skipped:", ""] + [f"- {r['script']}: {r['reason']}" for r in skipped]
    for r in rows:
        for h in r.get("holes", []):
            lines.append(f"- HOLE {r['script']}: dropping {h['kind']} {h['pipes']} "
                         f"#{h['event_id']} at {h['source']}: {h['mismatch']}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="examples whose path contains this")
    ap.add_argument("--out", default=".", help="directory for sync_mutation.{md,json}")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per example")
    ap.add_argument("-j", type=int, default=1, help=f"examples at once (at most {cr.MAX_JOBS})")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tilepipe-mut-") as tmp:
        root = os.path.join(tmp, "examples")
        cr.writable_copy(cr.EXAMPLES, root)
        scripts = hand_synced(root, a.only)
        with cf.ThreadPoolExecutor(max(1, min(a.j, cr.MAX_JOBS))) as pool:
            rows = list(pool.map(lambda s: check_script(s, root, a.timeout), scripts))
    for r in rows:
        print(f"{r['status']:8} {r['seconds']:7.1f}s  {r['script']}  {r.get('counts', r.get('reason'))}",
              file=sys.stderr)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "sync_mutation.json"), "w") as f:
        json.dump({"rows": rows}, f, indent=1)
    with open(os.path.join(a.out, "sync_mutation.md"), "w") as f:
        f.write(markdown(rows))
    return 1 if any(r["status"] == "hole" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

"""What the checks on by default cost, and whether they report anything on the visible
examples tree: each example script run unchanged under `tilepipe run-py` twice, back to
back — race detector off (TILEPIPE_NO_CHECK=1), then on (the default) — so both runs of a
script see the same machine load. Prints a row per script and the totals; writes JSON.

  /usr/bin/python3 python/tools/checks_cost.py [--only SUBSTR ...] [--timeout 300] [--out DIR]

A script whose status differs between the two runs is listed under "changed": with the
checks on it failed where it passed without them — a race, flag error or deadlock the
detector found (a real one is documented in docs/python.md with its evidence) or a false
report (a bug to fix). The cost figure is the sum of wall times on / off over the scripts
that passed both ways.

Measured (loaded 2-core machine): cumsum_kda's vector local cumsum at [2, 16, 256, 32] x2.8-3.8
before the detector's paged shadow and numeric sites, x1.4-1.6 after; the detector alone
on C++ kernels: tilepipe_bench BM_RaceDetector (docs/simulator.md#race-detection)."""

import argparse
import json
import os
import sys

import corpus_run as cr


def run_pair(script, timeout, root):
    rows = {}
    for mode in ("off", "on"):
        if mode == "off":
            os.environ["TILEPIPE_NO_CHECK"] = "1"
        else:
            os.environ.pop("TILEPIPE_NO_CHECK", None)
        rows[mode] = cr.run_example(script, timeout, root)
    os.environ.pop("TILEPIPE_NO_CHECK", None)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="examples whose path contains this")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per script run")
    ap.add_argument("--out", default=os.path.join(cr.ROOT, "out"))
    a = ap.parse_args(argv)
    root = cr.EXAMPLES
    rows, changed = [], []
    on_s = off_s = 0.0
    for s in cr.example_scripts(root, a.only):
        pair = run_pair(s, a.timeout, root)
        off, on = pair["off"], pair["on"]
        both = off["status"] == on["status"] == "passed"
        if both:
            on_s += on["seconds"]
            off_s += off["seconds"]
        if off["status"] != on["status"]:
            changed.append({"script": s, "off": off["status"], "on": on["status"],
                            "kind": on["kind"], "reason": on["reason"], "where": on["where"]})
        ratio = on["seconds"] / off["seconds"] if off["seconds"] > 0 else 0.0
        rows.append({"script": s, "off": off, "on": on, "ratio": round(ratio, 3)})
        print(f"{off['status']:11} {on['status']:11} {off['seconds']:7.1f}s {on['seconds']:7.1f}s "
              f"x{ratio:5.2f}  {s}", flush=True)
    total = on_s / off_s if off_s > 0 else 0.0
    summary = {"scripts": len(rows), "passed_both": sum(
        1 for r in rows if r["off"]["status"] == r["on"]["status"] == "passed"),
        "seconds_off": round(off_s, 1), "seconds_on": round(on_s, 1),
        "cost_pct": round(100 * (total - 1), 1) if off_s > 0 else None, "changed": changed}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "checks_cost.json"), "w") as f:
        json.dump({"summary": summary, "rows": rows}, f, indent=1)
    print(json.dumps(summary, indent=1))
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())

"""`tilepipe fidelity` and `tilepipe calibrate` through the binary (which hands them to
python3 -m tilepipe.cli, so the corpus's Python files are anchors too): a cheap subset of the
published table, and a two-parameter calibration on a CSV of cheap anchors."""

import json
import os
import subprocess

import pytest

from conftest import CORPUS, ROOT

BUILD = os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))
TILEPIPE = os.path.join(BUILD, "tilepipe")
SFA = os.path.join(CORPUS, "sparse_flash_attention", "bench_sfa", "bench_sfa.py")


def run(*args, cwd=None, env=None):
    r = subprocess.run([TILEPIPE, *args], capture_output=True, text=True, timeout=600, cwd=cwd,
                       env=env)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(autouse=True)
def binary():
    if not os.access(TILEPIPE, os.X_OK):
        pytest.skip(f"{TILEPIPE} not built")


def test_the_table_runs_a_cheap_subset_with_its_errors():
    if not os.path.exists(SFA):
        pytest.skip("corpus missing")
    j = json.loads(run("fidelity", "--only", "copy", "--only", "sfa-file.pa", "--json",
                       "-j", "2").stdout)
    names = [a["name"] for a in j["anchors"]]
    assert names == ["copy.blocks", "copy.rows128", "copy.nd2nz_l1", "sfa-file.pa"]
    for a in j["anchors"]:
        assert a["status"] == "ok", a
        assert a["error_pct"] == pytest.approx(
            100 * (a["simulated_us"] - a["measured_us"]) / a["measured_us"])
        assert a["source"] and a["citation"] and a["wall_s"] >= 0
        assert a["set"] in ("calibration", "validation")
        # One protocol per source, and the launch compared only when the timer covers it.
        p = a["protocol"]
        assert p["l2"] in ("cold", "warm") and p["launch"] in ("included", "excluded")
        assert p["timer"] and p["evidence"]
        assert a["simulated_us"] == pytest.approx(
            a["kernel_us"] + (a["launch_us"] if p["launch"] == "included" else 0))
    assert j["anchors"][3]["protocol"]["l2"] == "warm"  # bench_sfa makes its KV on the device
    # The copy anchors hold within 10 % (tests/dma_anchor_test.cc); the SFA file runs at
    # bench_sfa.py's first shape through the driver's Python-file source.
    assert all(abs(a["error_pct"]) < 10 for a in j["anchors"][:3])
    assert j["anchors"][3]["kernel"].endswith("bench_sfa.py --file sparse_flash_attn_pa")
    # A Python file's tilepipe lowering is timed beside the original-compatible one (pa
    # places its flags by hand: the same program, the same time); C++ kernels have none.
    assert j["anchors"][3]["other_variants"] == [
        {"variant": "tilepipe", "simulated_us": j["anchors"][3]["simulated_us"]}]
    assert all("other_variants" not in a for a in j["anchors"][:3])
    s = j["summary"]["all"]
    assert s["anchors"] == 4
    assert j["summary"]["calibration"]["anchors"] + j["summary"]["validation"]["anchors"] == 4
    # Every parameter of every chip, with the kind of evidence for its value.
    params = j["parameters"]
    assert {p["chip"] for p in params} == {"a2", "a3"}
    kinds = ("cited:", "microbenchmark:", "fit:", "assumed from ", "estimate:")
    for p in params:
        assert set(p) >= {"name", "value", "chip", "source"}, p
        assert p["source"].startswith(kinds), p
    by = {(p["chip"], p["name"]): p["source"] for p in params}
    assert by[("a3", "issue.scalar_dcache_hit_cycles")].startswith("fit: sfa-file.")
    assert by[("a2", "issue.scalar_dcache_hit_cycles")].startswith("assumed from a3")
    assert s["max_abs_error_pct"] == pytest.approx(max(abs(a["error_pct"]) for a in j["anchors"]))
    # Text: one row per anchor and the mean / max line.
    text = run("fidelity", "--only", "copy.blocks").stdout
    assert "copy.blocks" in text and "mean |error|" in text and "wall time" in text
    assert "validation set" in text and "gm-read-anchor" in text and "fit: copy.blocks" in text


def test_without_the_corpus_python_anchors_are_skipped_with_a_note(tmp_path):
    env = dict(os.environ, TILELANG_CORPUS=str(tmp_path))
    j = json.loads(run("fidelity", "--only", "sfa-file.pa", "--only", "copy.blocks", "--json",
                       env=env).stdout)
    status = {a["name"]: a["status"] for a in j["anchors"]}
    assert status == {"copy.blocks": "ok", "sfa-file.pa": "skipped"}
    assert "TILELANG_CORPUS" in j["anchors"][1]["note"]
    assert j["skipped"] == 1


def test_calibrate_fits_two_parameters_on_cheap_anchors_within_their_ranges(tmp_path):
    rows = ["name,kernel,variant,params,measured_us,source",
            "small,gm_read,blocks,N=1024,9.6,synthetic",
            "large,gm_read,blocks,N=8192,99.0,synthetic",
            "rows,gm_read,rows128,N=1024,9.9,synthetic"]
    if os.path.exists(SFA):
        rows.append(f'sfa,"{SFA} --file sparse_flash_attn_pa",,,127,issue 27')
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    r = run("calibrate", "--measurements", "m.csv", "--fit", "die.hbm_bw,dma.mte2_latency",
            "-o", "my_chip.json", "--max-evals", "15", "-j", "2", "--json", cwd=tmp_path)
    j = json.loads(r.stdout)
    ranges = json.load(open(os.path.join(ROOT, "configs", "fit_ranges.json")))["ranges"]
    for p in j["params"]:
        lo, hi = ranges[p["key"]]["lo"], ranges[p["key"]]["hi"]
        assert lo <= p["after"] <= hi, p
    assert j["rms_log_error_after"] <= j["rms_log_error_before"]
    table = j["measurements_table"]
    assert len(table) == len(rows) - 1
    for m in table:
        assert "loo_error_pct" in m, m  # every measurement has its leave-one-out error
    assert "leave-one-out" in r.stderr
    # Families: gm_read and (with the corpus) the bench's file: one refit without each.
    fams = [f["family"] for f in j["leave_one_family_out"]]
    assert fams == (["gm_read", "bench_sfa"] if os.path.exists(SFA) else [])
    assert "leave-one-family-out" in r.stderr
    # The written config loads, carries the fitted values and their provenance.
    chip = json.load(open(tmp_path / "my_chip.json"))
    assert chip["name"] == "my_chip"
    assert chip["die"]["hbm_bw"]["value"] == j["params"][0]["after"]
    assert chip["die"]["hbm_bw"]["source"].startswith("Calibrated by `tilepipe calibrate` on m.csv")
    assert chip["calibration"]["fit"][0]["key"] == "die.hbm_bw"
    out = json.loads(run("run", "gm_read", "--mode", "timing", "--chip", "./my_chip.json",
                         "--json", cwd=tmp_path).stdout)
    assert out["chip"] == "my_chip"

"""Per-line cycles of Python kernels (docs/cli.md#per-line-cycles): `tilepipe profile FILE.py
--json` gives each cycle of the kernel on its critical core to one of the user's own .py
lines, through every pass (the original split, cv_split, multibuffering, auto sync)."""

import json
import os
import subprocess

import pytest

from conftest import CORPUS, ROOT

BUILD = os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))
TILEPIPE = os.path.join(BUILD, "tilepipe")

CASES = [
    # (file under the corpus, extra arguments)
    ("gemm/example_gemm.py", []),
    ("gemm/example_gemm.py", ["--variant", "tilepipe"]),
    ("flash_attention/flash_attn_bhsd.py", []),
    ("flash_attention/fa_opt/flash_attn_bhsd_auto_pipeline_h16_d128.py",
     ["--variant", "tilepipe", "--param", "B=1", "--param", "S=1024", "--param", "H=2",
      "--param", "q_heads=2", "--param", "kv_heads=2"]),
]


@pytest.mark.parametrize("path,args", CASES, ids=[f"{c[0]} {' '.join(c[1][:2])}" for c in CASES])
def test_a_python_kernels_cycles_go_to_its_own_lines(path, args):
    if not os.access(TILEPIPE, os.X_OK):
        pytest.skip(f"{TILEPIPE} not built")
    f = os.path.join(CORPUS, path)
    if not os.path.exists(f):
        pytest.skip("corpus missing")
    r = subprocess.run([TILEPIPE, "profile", f, *args, "--no-verify", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    meta = j["line_attribution"]
    own = os.path.basename(f)
    kernel = meta["kernel_cycles"]
    mine = sum(l["cycles"] for l in j["lines"] if l["file"] == own and l["line"] > 0)
    assert mine >= 0.95 * kernel, (meta, j["lines"][:5])
    assert meta["files"][own] >= 95
    # Every cycle is somewhere: the launch plus the lines are the kernel's cycles.
    total = meta["launch_cycles"] + sum(l["cycles"] for l in j["lines"])
    assert total == pytest.approx(j["cycles"], rel=1e-9)
    assert j["kernel_us"] + j["launch_us"] == pytest.approx(j["time_us"], rel=1e-12)
    # The lines are the script's: each names a line that exists in the file.
    with open(f) as src:
        n = len(src.readlines())
    assert all(1 <= l["line"] <= n for l in j["lines"])

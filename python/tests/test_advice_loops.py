"""The advisor's loop rules on a Python kernel (issue 48: a column-sum's row loop left
`T.serial`): `tilepipe profile` names the loop's own .py line first, and the gain it shows is
the gain of the kernel with that loop made `T.Pipelined(num_stages=2)` by hand."""

import json
import os
import subprocess
import textwrap

import pytest

from conftest import ROOT

BUILD = os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))
TILEPIPE = os.path.join(BUILD, "tilepipe")

COLSUM = textwrap.dedent('''
    import tilelang
    from tilelang import language as T

    pass_configs = {
        tilelang.PassConfigKey.TL_ASCEND_AUTO_CV_COMBINE: True,
        tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True,
        tilelang.PassConfigKey.TL_ASCEND_MEMORY_PLANNING: True,
    }


    @tilelang.jit(out_idx=[1], pass_configs=pass_configs)
    def colsum(M=1024, N=4096, rows=16, block_N=512):
        dtype = "float"

        @T.prim_func
        def main(A: T.Tensor([M, N], dtype), Out: T.Tensor([rows, N], dtype)):
            with T.Kernel(N // block_N, is_npu=True) as (cid, vid):
                a = T.alloc_ub((rows, block_N), dtype)
                acc = T.alloc_ub((rows, block_N), dtype)
                T.tile.fill(acc, 0.0)
                for k in LOOP:
                    T.copy(A[k * rows, cid * block_N], a)
                    T.tile.add(acc, acc, a)
                T.copy(acc, Out[0, cid * block_N])

        return main
''')


def tilepipe_json(*args):
    r = subprocess.run([TILEPIPE, *args, "--json"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_serial_row_loop_is_advised_pipelined_with_the_hand_fixs_gain(tmp_path):
    if not os.access(TILEPIPE, os.X_OK):
        pytest.skip(f"{TILEPIPE} not built")
    written = tmp_path / "colsum.py"
    written.write_text(COLSUM.replace("LOOP", "T.serial(M // rows)"))
    fixed = tmp_path / "colsum_fixed.py"
    fixed.write_text(COLSUM.replace("LOOP", "T.Pipelined(M // rows, num_stages=2)"))
    loop_line = COLSUM.splitlines().index(
        next(ln for ln in COLSUM.splitlines() if "for k in LOOP" in ln)) + 1
    prof = tilepipe_json("profile", f"{written}:colsum")
    first = prof["advice"][0]
    assert first["id"] == "pipeline_serial_loop", prof["advice"]
    assert first["where"] == {"file": "colsum.py", "line": loop_line}
    assert "T.Pipelined(..., num_stages=2)" in first["suggest"]["text"]
    hand = tilepipe_json("run", f"{fixed}:colsum", "--mode", "timing")["cycles"]
    assert hand < prof["cycles"]
    assert first["verified_gain_pct"] == round(100 * (prof["cycles"] - hand) / prof["cycles"], 2)

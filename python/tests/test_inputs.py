"""Real inputs (issue 46 items 4 and 5): what depends on input values is said in every
report, `--inputs FILE.npz` gives a kernel its arrays on every verb, host arrays of another
shape, layout or writability are handled, and `--variant` is what profile / check / tune
report for a Python file."""

import json
import os
import subprocess
import textwrap

import numpy as np
import pytest

from conftest import ROOT

TILEPIPE = os.path.join(os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build")),
                        "tilepipe")

# Each AIV core doubles `lens[cid]` rows of A: the trip count is read from GM.
RAGGED = textwrap.dedent('''
    import tilelang
    import tilelang.language as T


    @tilelang.jit(out_idx=[-1])
    def ragged(R=16, N=64):
        @T.prim_func
        def main(A: T.Tensor((R, N), "float32"), lens: T.Tensor((2,), "int32"),
                 B: T.Tensor((R, N), "float32")):
            with T.Kernel(2, is_npu=True) as (cid, vid):
                x = T.alloc_ub((N,), "float32")
                with T.Scope("V"):
                    if vid == 0:
                        n = lens[cid]
                        for r in T.serial(n):  # MARK-bound
                            T.copy(A[cid * (R // 2) + r, :], x)
                            T.tile.muls(x, x, 2.0)
                            T.copy(x, B[cid * (R // 2) + r, :])

        return main
''')

# The same shape of work with no value read by the scalar unit.
PLAIN = RAGGED.replace("n = lens[cid]", "n = R // 2")


def tp(*args, ok=True):
    r = subprocess.run([TILEPIPE, *map(str, args)], capture_output=True, text=True, timeout=600)
    if ok:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


def tp_json(*args):
    return json.loads(tp(*args, "--json").stdout)


@pytest.fixture()
def ragged(tmp_path):
    if not os.access(TILEPIPE, os.X_OK):
        pytest.skip("needs the tilepipe binary")
    path = tmp_path / "ragged.py"
    path.write_text(RAGGED)
    line = next(i for i, s in enumerate(RAGGED.splitlines(), 1) if "MARK-bound" in s)
    return f"{path}:ragged", line


def test_a_trip_count_read_from_gm_is_reported_as_data_dependent_on_every_verb(ragged, tmp_path):
    spec, line = ragged
    for verb in (["run", "--mode", "timing"], ["run"], ["check"], ["profile", "--no-verify"]):
        j = tp_json(*verb, spec)
        dd = j["data_dependent"]
        assert dd["depends"], verb
        assert {"tensor": "lens", "use": "loop bound", "where": f"ragged.py:{line}"} in dd["uses"]
        assert j["inputs"] == {"source": "seeded", "seed": 1}, verb
        assert "made up" in dd["note"] and "--inputs" in dd["note"]
    r = tp("profile", spec, "--no-verify", "--html", tmp_path / "r.html")
    assert "data-dependent: the time depends on the values of lens (loop bound" in r.stderr
    assert "Data-dependent:" in (tmp_path / "r.html").read_text()
    t = tp_json("tune", spec, "--space", "N=64,128", "--no-cache")
    assert t["data_dependent"]["depends"] and t["inputs"]["source"] == "seeded"


def test_a_kernel_without_value_reads_is_not_data_dependent(tmp_path):
    if not os.access(TILEPIPE, os.X_OK):
        pytest.skip("needs the tilepipe binary")
    path = tmp_path / "plain.py"
    path.write_text(PLAIN)
    j = tp_json("profile", f"{path}:ragged", "--no-verify")
    assert j["data_dependent"] == {"depends": False, "uses": [], "note": ""}


def test_given_inputs_decide_the_time_and_the_values(ragged, tmp_path):
    spec, _ = ragged
    a = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    few, many = tmp_path / "few.npz", tmp_path / "many.npz"
    np.savez(few, A=a, lens=np.array([1, 2], np.int32))
    np.savez_compressed(many, A=a, lens=np.array([8, 8], np.int32))
    short = tp_json("run", spec, "--mode", "timing", "--inputs", few)
    full = tp_json("run", spec, "--mode", "timing", "--inputs", many)
    assert short["inputs"] == {"source": "file", "file": str(few)}
    assert "ran on the arrays of" in short["data_dependent"]["note"]
    assert short["cycles"] < full["cycles"]
    # profile, check and tune take them too, and report the same run
    assert tp_json("profile", spec, "--no-verify", "--inputs", few)["cycles"] == short["cycles"]
    assert tp_json("check", spec, "--inputs", few)["ok"]
    t = tp_json("tune", spec, "--space", "N=64", "--no-cache", "--inputs", few)
    assert t["inputs"]["source"] == "file"


def test_given_arrays_reach_a_builtin_kernel_and_its_reference(tmp_path):
    if not os.access(TILEPIPE, os.X_OK):
        pytest.skip("needs the tilepipe binary")
    rng = np.random.default_rng(3)
    A = rng.standard_normal((64, 128)).astype(np.float16)
    B = np.asfortranarray(rng.standard_normal((128, 64)).astype(np.float16))  # Fortran order
    f = tmp_path / "ab.npz"
    np.savez(f, A=A, B=B)
    params = ["--param", "M=64", "--param", "N=64", "--param", "K=128"]
    j = tp_json("run", "gemm", *params, "--inputs", f)
    assert j["correct"] and j["inputs"]["source"] == "file"
    # the reference is computed from the given arrays: a wrong B would not match it
    zeros = tmp_path / "z.npz"
    np.savez(zeros, A=np.zeros_like(A), B=B)
    assert tp_json("run", "gemm", *params, "--inputs", zeros)["correct"]


@pytest.mark.parametrize("verb,arrays,expect", [
    (["run"], {"A": np.zeros((16, 64), np.float32)},
     "no array 'lens' for the input lens of"),
    (["profile", "--no-verify"], {"A": np.zeros((16, 64), np.float32),
                                  "lens": np.zeros(2, np.int32), "bogus": np.zeros(3)},
     "array 'bogus' is no parameter of"),
    (["check"], {"A": np.zeros((64, 16), np.float32), "lens": np.zeros(2, np.int32)},
     "array 'A' has shape [64, 16]; .* declares float32 [16, 64]"),
    (["run", "--mode", "timing"], {"A": np.zeros((16, 64), np.float64),
                                   "lens": np.zeros(2, np.int32)},
     "array 'A' has dtype float64; .* declares float32 [16, 64]"),
])
def test_every_mismatch_of_the_given_arrays_is_a_clear_error(ragged, tmp_path, verb, arrays,
                                                             expect):
    import re

    spec, _ = ragged
    f = tmp_path / "bad.npz"
    np.savez(f, **arrays)
    r = tp(*verb, spec, "--inputs", f, ok=False)
    assert r.returncode == 2, (verb, r.stderr)
    assert f"--inputs '{f}'" in r.stderr, r.stderr
    assert re.search(expect.replace("[", r"\[").replace("]", r"\]"), r.stderr), r.stderr


def test_an_unreadable_or_foreign_inputs_file_is_a_clear_error(tmp_path):
    if not os.access(TILEPIPE, os.X_OK):
        pytest.skip("needs the tilepipe binary")
    spec = "gemm"
    tail = tp("run", spec, "--inputs", tmp_path / "missing.npz", ok=False)
    assert tail.returncode == 2 and "cannot be read" in tail.stderr
    (tmp_path / "text.npz").write_text("not a zip")
    junk = tp("run", spec, "--inputs", tmp_path / "text.npz", ok=False)
    assert junk.returncode == 2 and "not a .npz (zip) archive" in junk.stderr


def test_builtin_kernels_that_gather_say_so():
    if not os.access(TILEPIPE, os.X_OK):
        pytest.skip("needs the tilepipe binary")
    j = tp_json("run", "sfa", "--variant", "pa", "--mode", "timing", "--param", "H=16",
                "--param", "KV_S=1024", "--param", "topk=200")
    assert j["data_dependent"]["depends"]
    assert {u["use"] for u in j["data_dependent"]["uses"]} >= {"address"}
    assert not tp_json("run", "gemm", "--mode", "timing")["data_dependent"]["depends"]


# ---- host arrays (the Python API) ----

def test_a_non_contiguous_input_reads_its_own_elements():
    from kernels import double

    base = np.arange(4 * 128, dtype=np.float32).reshape(4, 128)
    view = base[::2, ::2]  # rows 0 and 2, every other column: [2, 64], not contiguous
    assert not view.flags.c_contiguous
    np.testing.assert_array_equal(double(64)(view), 2 * view)
    tview = np.ascontiguousarray(base[:2, :64].T).T  # Fortran-ordered [2, 64]
    np.testing.assert_array_equal(double(64)(tview), 2 * tview)


def test_a_read_only_output_array_is_an_error_naming_it():
    from kernels import double
    from tilelang import TilelangError

    out = np.zeros((2, 64), np.float32)
    out.flags.writeable = False
    with pytest.raises(TilelangError, match="output 'B' is read-only"):
        double(64)(np.ones((2, 64), np.float32), out)


# ---- variants ----

# A Cube scope under the original's automatic sync: the original lowering keeps its full
# barriers, tilepipe's places flags; the program as built is the same for both.
SYNCED = textwrap.dedent('''
    import argparse

    import numpy as np
    import tilelang
    import tilelang.language as T

    parser = argparse.ArgumentParser()
    parser.add_argument("--k", type=int, default=512)
    args = parser.parse_args()


    @tilelang.jit(out_idx=[-1], pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True})
    def mm(M, N, K, bm=64, bn=64, bk=64):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                 C: T.Tensor((M, N), "float16")):
            with T.Kernel((M // bm) * (N // bn), is_npu=True) as (cid, _):
                bx, by = cid // (N // bn), cid % (N // bn)
                a = T.alloc_L1((bm, bk), "float16")
                b = T.alloc_L1((bk, bn), "float16")
                c = T.alloc_L0C((bm, bn), "float")
                with T.Scope("C"):
                    for k in T.serial(K // bk):
                        T.copy(A[bx * bm, k * bk], a)
                        T.copy(B[k * bk, by * bn], b)
                        T.gemm_v0(a, b, c, init=(k == 0))
                    T.copy(c, C[bx * bm, by * bn])

        return main


    A = np.ones((128, args.k), np.float16)
    B = np.ones((args.k, 128), np.float16)
    mm(128, 128, args.k)(A, B)
''')


def test_profile_check_and_tune_report_the_variant_asked_for(tmp_path):
    if not os.access(TILEPIPE, os.X_OK):
        pytest.skip("needs the tilepipe binary")
    path = tmp_path / "synced.py"
    path.write_text(SYNCED)
    run = {v: tp_json("run", path, "--mode", "timing", "--variant", v)["cycles"]
           for v in ("original", "tilepipe")}
    assert run["original"] != run["tilepipe"], run  # the kernel tells the variants apart
    for v in ("original", "tilepipe"):
        p = tp_json("profile", path, "--no-verify", "--variant", v)
        assert p["variant"] == v and p["cycles"] == run[v]
        assert {x["variant"]: x["cycles"] for x in p["variants"]} == run
        r = tp("profile", path, "--no-verify", "--variant", v, "--html", tmp_path / "p.html")
        assert f"[{v}]" in r.stdout and f"[{v}]" in (tmp_path / "p.html").read_text()
        c = tp_json("check", path, "--variant", v)
        assert c["variant"] == v and c["cycles"] == run[v]
        t = tp_json("tune", path, "--variant", v, "--space", "k=512", "--no-cache")
        assert t["variant"] == v and t["best_time_us"] == pytest.approx(p["time_us"])

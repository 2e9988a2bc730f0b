"""The hardware's own hazards at the user's .py line (docs/errors.md, "Warnings" and
`dma-row-pitch`): tilelang.HazardWarning for a hazard the simulation does not show,
TILEPIPE_WERROR=1 turning it into an error, and errors for copies that corrupt data."""

import inspect
import json
import os
import subprocess
import warnings

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import HazardWarning, TilepipeError

from conftest import ROOT

BUILD = os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))

RNG = np.random.default_rng(3)


def line_of(fn, text):
    """The file line of the first source line of `fn` that contains `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, s in enumerate(lines) if text in s)


@tilelang.jit(out_idx=[1])
def keepdim_kernel(M):
    @T.prim_func
    def main(A: T.Tensor((M, 1), "float32"), B: T.Tensor((M, 1), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((M, 1), "float32")
            with T.Scope("V"):
                T.copy(A, a)  # compact 4-byte rows
                T.barrier_all()
                T.tile.add(a, a, a)
                T.barrier_all()
                T.copy(a, B)

    return main


def test_compact_narrow_rows_warn_at_the_copy_and_still_run():
    a = RNG.standard_normal((16, 1)).astype(np.float32)
    rows = r"4-byte rows of UB buffer 'a'.*\[dma-compact-rows\]"
    with pytest.warns(HazardWarning, match=rows) as rec:
        got = keepdim_kernel(16)(a)
    np.testing.assert_array_equal(got, 2 * a)
    hazards = [w for w in rec if issubclass(w.category, HazardWarning)]
    assert [w.lineno for w in hazards][:1] == [line_of(keepdim_kernel, "compact 4-byte rows")]
    assert all(w.filename == "test_hazards.py" for w in hazards)
    assert issubclass(HazardWarning, UserWarning)


def test_tilepipe_werror_makes_the_warning_an_error(monkeypatch):
    monkeypatch.setenv("TILEPIPE_WERROR", "1")
    tilelang.disable_cache()
    try:
        with pytest.raises(TilepipeError) as e:
            keepdim_kernel(32)(np.zeros((32, 1), np.float32))
    finally:
        tilelang.enable_cache()
    assert e.value.kinds[0] == "dma-compact-rows"
    assert e.value.loc == ("test_hazards.py", line_of(keepdim_kernel, "compact 4-byte rows"))


@tilelang.jit(out_idx=[1])
def column_kernel(M, N, width):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, 8), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((M, width), "float32")
            with T.Scope("V"):
                T.copy(A[0:M, 2:3], a[0:M, 0:1])  # a column of A
                T.barrier_all()
                T.copy(a[0:M, 0:1], B[0:M, 0:1])

    return main


def test_a_strided_copy_of_narrow_rows_is_an_error_with_the_padding_fix():
    with pytest.raises(TilepipeError, match=r"4 bytes apart") as e:
        column_kernel(16, 8, 1)(np.zeros((16, 8), np.float32))
    assert e.value.kinds[0] == "dma-row-pitch"
    assert e.value.loc == ("test_hazards.py", line_of(column_kernel, "a column of A"))
    assert "[16, 8]" in e.value.hint


def test_rows_padded_to_32_bytes_run_without_a_warning():
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HazardWarning)
        got = column_kernel(16, 8, 8)(a)
    np.testing.assert_array_equal(got[:, 0], a[:, 2])


@tilelang.jit(out_idx=[1])
def branch_flag_kernel(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A[vid, :], a)
                T.set_flag("mte2", "v", 0)
                T.wait_flag("mte2", "v", 0)
                T.tile.add(a, a, a)
                if vid == 0:  # the set on one path only
                    T.set_flag("v", "mte3", 0)
                T.wait_flag("v", "mte3", 0)
                T.copy(a, B[vid, :])

    return main


def test_a_flag_set_on_one_path_of_an_if_warns_at_the_if():
    # The simulation runs both paths (one per vector core): the other path hangs.
    with pytest.warns(HazardWarning, match=r"V->MTE3 #0.*\[branch-flags\]") as rec:
        with pytest.raises(TilepipeError, match="deadlock"):
            branch_flag_kernel(64)(np.zeros((2, 64), np.float32))
    hazards = [w for w in rec if issubclass(w.category, HazardWarning)]
    assert hazards[0].lineno == line_of(branch_flag_kernel, "the set on one path only")



KEEPDIM_FILE = """
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def keepdim_kernel(M=16):
    @T.prim_func
    def main(A: T.Tensor((M, 1), "float32"), B: T.Tensor((M, 1), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((M, 1), "float32")
            with T.Scope("V"):
                T.copy(A, a)
                T.barrier_all()
                T.tile.add(a, a, a)
                T.barrier_all()
                T.copy(a, B)

    return main
"""


def test_a_cli_verb_on_a_python_file_reports_each_warning_once(tmp_path):
    """`tilepipe run FILE.py:K` prints the verifier's warnings itself (stderr, and `warnings`
    in the JSON): the front end's HazardWarning of the same finding is not printed again,
    and running the verb's module (`python3 -m tilepipe.cli`) draws no runpy warning."""
    (tmp_path / "k.py").write_text(KEEPDIM_FILE)
    r = subprocess.run([os.path.join(BUILD, "tilepipe"), "run", "k.py:keepdim_kernel", "--json"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("warning: copy A -> a moves several 4-byte rows") == 1, r.stderr
    assert "HazardWarning" not in r.stderr and "RuntimeWarning" not in r.stderr, r.stderr
    kinds = [w["kind"] for w in json.loads(r.stdout)["warnings"]]
    assert kinds.count("dma-compact-rows") == 2  # the copy in and the copy out


def outer_kernel(combine):
    """Vector work written outside T.Scope, with AUTO_CV_COMBINE on or not."""
    configs = {tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True}
    if combine:
        configs[tilelang.PassConfigKey.TL_ASCEND_AUTO_CV_COMBINE] = True

    @tilelang.jit(out_idx=[1], pass_configs=configs)
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((N,), "float32")
                T.copy(A[vid, :], a)  # outside T.Scope
                T.tile.add(a, a, a)
                T.copy(a, B[vid, :])

        return main

    return k


def test_work_outside_a_scope_without_cv_combine_warns_as_the_strict_original_rejects_it():
    # TileLang-Ascend #1753: without AUTO_CV_COMBINE the newest original rejects work on a
    # core's memories outside T.Scope; tilepipe splits it as older releases did, and warns.
    a = RNG.standard_normal((2, 64)).astype(np.float32)
    k = outer_kernel(False)
    with pytest.warns(HazardWarning, match=r"outside T.Scope.*\[outer-scope\]") as rec:
        got = k(64)(a)
    np.testing.assert_allclose(got, 2 * a)
    hazards = [w for w in rec if issubclass(w.category, HazardWarning)]
    assert len(hazards) == 1  # once, at the first statement
    assert hazards[0].lineno == line_of(k, "outside T.Scope")


def test_the_same_work_with_cv_combine_or_in_a_scope_has_no_warning():
    a = RNG.standard_normal((2, 64)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HazardWarning)
        np.testing.assert_allclose(outer_kernel(True)(64)(a), 2 * a)
        np.testing.assert_allclose(scoped_kernel(64)(a), 2 * a)


@tilelang.jit(out_idx=[1], pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True})
def scoped_kernel(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A[vid, :], a)
                T.tile.add(a, a, a)
                T.copy(a, B[vid, :])

    return main

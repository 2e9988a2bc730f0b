"""The Python surface users hit (issue 25 item 5): arguments checked against the signature,
tracebacks that start at the user's line, and set_chip validated and part of the cache key."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError

from conftest import ROOT
from kernels import double

HERE = os.path.basename(__file__)


def lineno(marker):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "lineno(" not in line)



@pytest.mark.parametrize("bad", ["float16", "int64", "float64", "int32"])
def test_an_input_of_another_dtype_is_an_error_at_the_call(bad):
    a = np.ones((2, 64), dtype=bad)
    with pytest.raises(TilelangError) as e:
        double(64)(a)  # MARK-call
    assert f"argument 'A' has dtype {bad}; the kernel declares float32" in str(e.value)
    assert e.value.loc == (HERE, lineno("# MARK-call"))


def test_an_output_array_of_another_dtype_is_an_error_not_a_truncation():
    a = np.ones((2, 64), np.float32)
    out = np.zeros((2, 64), np.int8)
    with pytest.raises(TilelangError, match="output 'B' has dtype int8; the kernel declares "
                       "float32"):
        double(64)(a, out)
    assert not out.any()


def test_torch_tensors_are_checked_too_and_numpy_f32_feeds_bf16():
    torch = pytest.importorskip("torch")
    with pytest.raises(TilelangError, match="has dtype float16; the kernel declares float32"):
        double(64)(torch.ones(2, 64, dtype=torch.float16))
    a = np.full((2, 64), 1.00390625, np.float32)  # not a bf16 value: rounds to 1.0
    np.testing.assert_array_equal(double(64, "bfloat16")(a), np.full((2, 64), 2.0, np.float32))


def test_set_chip_validates_and_recompiles():
    from tilelang import _jit

    with pytest.raises(TilelangError) as e:
        tilelang.set_chip("a9")
    assert "unknown chip 'a9': expected one of a2, a3" in str(e.value)
    k = double(64)
    a = np.ones((2, 64), np.float32)
    k(a)
    assert k.last_run[0].compiled.chip == "a3"
    try:
        tilelang.set_chip("A2")
        k(a)
        assert k.last_run[0].compiled.chip == "a2"
    finally:
        tilelang.set_chip("a3")
    assert _jit.CHIP == "a3"


def test_set_max_cycles_bounds_every_run_and_is_validated():
    from tilelang import TilepipeError, _jit

    for bad in (0, -5, float("inf"), "1e9", True):
        with pytest.raises(TilelangError, match="expected a positive number of cycles"):
            tilelang.set_max_cycles(bad)
    k = double(64)
    a = np.ones((2, 64), np.float32)
    k(a)
    need = k.cycles(a)
    try:
        tilelang.set_max_cycles(need / 2)
        with pytest.raises(TilepipeError, match="passed the cycle budget of"):
            k(a)
        with pytest.raises(TilepipeError, match="set_max_cycles"):
            k.profile(a)
        tilelang.set_max_cycles(need * 2)
        assert k.cycles(a) == need
    finally:
        tilelang.set_max_cycles(1e13)
    assert _jit.MAX_CYCLES[0] == 1e13


def run_py(tmp_path, code):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(code))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python"), env.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))])
    return subprocess.run([sys.executable, "-m", "tilepipe", str(path)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


KERNEL = """
    import numpy as np
    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[-1])
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((N,), "float32")
                with T.Scope("V"):
                    T.copy(A[vid, :], x)
                    T.tile.no_such_op(x)
                    T.copy(x, B[vid, :])

        return main

    def build():
        return k(64)

    build()
"""


def test_a_user_error_under_the_runner_starts_at_the_users_lines_and_exits_2(tmp_path):
    r = run_py(tmp_path, KERNEL)
    assert r.returncode == 2
    err = r.stderr
    assert "runner.py" not in err and "runpy" not in err and "/tilelang/" not in err
    assert 'File "' in err and ", line 22, in <module>" in err and ", line 20, in build" in err
    assert "script.py:14:17: error: T.tile.no_such_op" in err


def test_other_exceptions_keep_their_type_without_the_runners_frames(tmp_path):
    r = run_py(tmp_path, "x = 1\nassert x == 2, 'mismatch'\n")
    assert r.returncode == 1
    assert "AssertionError: mismatch" in r.stderr and "runner.py" not in r.stderr


def test_an_api_misuse_without_a_kernel_line_is_located_at_the_users_call(tmp_path):
    r = run_py(tmp_path, """
        import tilelang
        import tilelang.language as T

        @tilelang.jit(out_idx=[-1])
        def k():
            M = T.symbolic("M")

            @T.prim_func
            def main(A: T.Tensor((M, 64), "float32"), B: T.Tensor((M, 64), "float32")):
                with T.Kernel(1, is_npu=True) as (cid, vid):
                    x = T.alloc_ub((1, 64), "float32")
                    with T.Scope("V"):
                        T.copy(A[vid, 0], x)
                        T.copy(x, B[vid, 0])

            return main

        kernel = k()
        print(kernel.get_kernel_source())  # before any call: the source, not yet lowered
        kernel.profile()
    """)
    assert r.returncode == 2
    assert "# kernel k: symbolic dims (M) are bound per call" in r.stdout
    assert "def main(A: T.Tensor((M, 64)" in r.stdout
    assert "script.py:21: error: profile() of a kernel with symbolic dims" in r.stderr


def test_an_argument_with_the_same_elements_in_another_shape_is_the_kernels_view():
    a = np.arange(128, dtype=np.float32).reshape(2, 64, 1)
    np.testing.assert_array_equal(double(64)(a), a.reshape(2, 64) * 2)
    # fewer elements than declared: what the kernel reads past them is NaN, never data
    with pytest.warns(UserWarning, match="past the tensor's end it reads NaN"):
        got = double(64)(np.ones((2, 32), np.float32))
    np.testing.assert_array_equal(got[0], 2.0)
    assert np.isnan(got[1]).all()


def test_a_leading_dim_beyond_the_chips_memory_is_sized_by_the_callers_tensor():
    """`T.Tensor((MAX_TOKENS, 64), ...)` with MAX_TOKENS far past HBM (split_qkv_rmsnorm_mrope's
    1e8 rows of 68 heads): a bound on the rows, the true count a scalar parameter; the
    caller's smaller tensor sizes it, and an access past its rows is a located error."""
    MAX = 10**12

    @tilelang.jit
    def rows_of():
        @T.prim_func
        def main(A: T.Tensor((MAX, 64), "float32"), B: T.Tensor((MAX, 64), "float32"),
                 n: T.int32):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((1, 64), "float32")
                with T.Scope("V"):
                    for i in T.serial(n):
                        T.copy(A[i, 0], x)
                        T.tile.mul(x, x, 2.0)
                        T.copy(x, B[i, 0])

        return main

    k = rows_of()
    a = np.arange(5 * 64, dtype=np.float32).reshape(5, 64)
    b = np.zeros((5, 64), np.float32)
    k(a, b, 5)
    np.testing.assert_array_equal(b, a * 2)
    with pytest.raises(TilelangError, match=r"of 'A' dimension 0 reads \[5, 6\) at the "
                       "extreme, but the dimension has 5 elements"):
        k(a, b, 6)


def test_a_multiple_divided_by_a_divisor_stays_a_visible_multiple():
    """`vid * C // 2` is folded to `vid * (C // 2)`: the alignment proof of the broadcast's
    operand (gdn_chunk_o's g_ub[vid * C // VEC_NUM]) used to fail on the division."""

    @tilelang.jit(out_idx=[-1])
    def k(C):
        @T.prim_func
        def main(G: T.Tensor((C,), "float32"), B: T.Tensor((C, 8), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                g = T.alloc_ub((C,), "float32")
                b = T.alloc_ub((C // 2, 8), "float32")
                with T.Scope("V"):
                    T.copy(G[0], g)
                    T.tile.broadcast(b, g[vid * C // 2:vid * C // 2 + C // 2])
                    T.copy(b, B[vid * C // 2, 0])

        return main

    g = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(k(32)(g), np.repeat(g[:, None], 8, 1))
    assert T.Select(True, 1, 2) == 1


@tilelang.jit
def double_rows(N, cap):
    """A[:n] = 2 in place, for a tensor declared with `cap` rows (a static upper bound)."""

    @T.prim_func
    def main(A: T.Tensor((cap, N), "float32"), n: T.int32):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                if vid == 0:
                    for r in T.serial(n):
                        T.tile.fill(x, 2.0)
                        T.copy(x, A[r, :])

    return main


def test_a_larger_tensor_is_viewed_in_the_declared_shape_as_on_the_npu():
    # The original's wrapper checks dtypes, not static shapes (swi_glu_grad.py passes dY of
    # twice its declared size): the kernel sees the first elements of the memory.
    from tilelang import TensorViewWarning

    a = np.arange(256, dtype=np.float32).reshape(2, 128)
    with pytest.warns(TensorViewWarning, match=r"argument 'A' has shape \(2, 128\); the kernel "
                      r"declares \(2, 64\)"):
        got = double(64)(a)
    np.testing.assert_array_equal(got, 2 * a.reshape(-1)[:128].reshape(2, 64))
    # a larger output array, transposed: its first elements (in order) are written, in place
    out = np.zeros((128, 2), np.float32).T  # [2, 128]; flattening it would be a copy
    with pytest.warns(TensorViewWarning):
        double(64)(a[:, :64].copy(), out)
    np.testing.assert_array_equal(out.reshape(-1)[:128], 2 * a[:, :64].reshape(-1))
    assert not out.reshape(-1)[128:].any()


def test_the_same_elements_in_another_arrangement_warn_with_both_shapes():
    # an nn.Linear weight [N, K] where the kernel declares [K, N]: other values than meant
    import warnings

    from tilelang import TensorViewWarning

    a = np.arange(128, dtype=np.float32).reshape(64, 2)
    with pytest.warns(TensorViewWarning, match=r"has shape \(64, 2\); the kernel declares "
                      r"\(2, 64\).*another arrangement"):
        double(64)(a)
    with warnings.catch_warnings():  # only dimensions of 1 differ: the same tensor, silent
        warnings.simplefilter("error")
        double(64)(np.ones((2, 1, 64), np.float32))


def test_a_smaller_tensor_runs_when_the_kernel_stays_inside_it():
    # xllm_kernels/rope.py declares a static upper bound and passes the rows it has.
    a = np.zeros((3, 64), np.float32)
    want = np.full((3, 64), 2.0, np.float32)
    with pytest.warns(UserWarning):
        double_rows(64, 8)(a, 3)
    np.testing.assert_array_equal(a, want)
    a[...] = 0
    with pytest.raises(TilelangError, match="the kernel wrote element 192 of 'A', whose tensor "
                       "has 192 elements"):
        double_rows(64, 8)(a, 4)
    assert not a.any()  # nothing written back


def test_a_smaller_integer_tensor_is_an_error():
    @tilelang.jit(out_idx=[1])
    def copy_i32(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), "int32"), B: T.Tensor((2, N), "int32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((N,), "int32")
                with T.Scope("V"):
                    T.copy(A[vid, :], x)
                    T.copy(x, B[vid, :])

        return main

    with pytest.raises(TilelangError, match=r"argument 'A' has shape \(1, 64\) \(64 elements\); "
                       r"the kernel declares \(2, 64\)"):
        copy_i32(64)(np.ones((1, 64), np.int32))

"""The original's whole public surface (issue 45 item 1): every name resolves, each
unsupported one is `not supported: NAME (why)` at the line that uses it, the generated table
of docs/python.md is current, every pass-config key is accepted, every `with` and
assignment form works or is an error at its line, and the JITKernel call conventions
(out_idx / workspace_idx, outputs and workspaces passed or allocated) are the original's."""

import os
import subprocess
import sys

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError, _core

from conftest import ROOT, kernel_from_body

HERE = os.path.basename(__file__)
DATA = os.path.join(ROOT, "python", "tests", "data", "tilelang_surface.txt")
TOOLS = os.path.join(ROOT, "python", "tools")


def surface():
    with open(DATA) as f:
        return [ln.split("\t")[0] for ln in f if ln.strip() and not ln.startswith("#")]


def lookup(name):
    head, _, rest = name.partition(".")
    obj = {"T": T, "tilelang": tilelang, "PassConfigKey": tilelang.PassConfigKey}[head]
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


def lineno(marker):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "lineno(" not in line)


# ---- the names ----


def test_each_name_resolves():
    names = surface()
    assert len(names) > 400  # the whole surface, not a sample
    for name in names:
        lookup(name)  # raises for a name neither implemented nor in tilelang/_surface.py
    assert hasattr(T, "ptx_mma") and hasattr(T.tile, "init_sort_buf")
    assert not hasattr(T, "cpoy")  # a typo is no name


UNSUPPORTED = [n for n in surface() if not n.startswith("PassConfigKey.")
               and isinstance(lookup(n), _core.Unsupported)]


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_every_unsupported_name_is_an_error_at_its_line(name):
    """Called inside a kernel, each stub stops at its own line with its reason."""
    stub = lookup(name)
    with pytest.raises(TilelangError) as e:
        stub(1, 2)  # MARK-stub
    assert f"not supported: {name} " in str(e.value) or "needs several devices" in str(e.value)
    assert e.value.loc == (HERE, lineno("# MARK-stub"))


def test_a_stub_in_a_kernel_and_as_a_dtype_names_the_user_line():
    @tilelang.jit
    def f(kind):
        @T.prim_func
        def main(A: T.Tensor((8,), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                with T.Scope("V"):
                    if kind == "call":
                        T.tvm_warp_shuffle(A, 0)  # MARK-call
                    else:
                        T.alloc_ub((8,), T.float8_e4m3)  # MARK-dtype

        return main

    with pytest.raises(TilelangError, match=r"not supported: T.tvm_warp_shuffle \(a GPU") as e:
        f("call")
    assert e.value.loc == (HERE, lineno("# MARK-call"))
    with pytest.raises(TilelangError, match=r"not supported: T.float8_e4m3 \(a dtype") as e:
        f("dtype")
    assert e.value.loc == (HERE, lineno("# MARK-dtype"))
    with pytest.raises(TilelangError, match="not supported: T.float16x4 .*vector-lane"):
        T.float16x4("x")
    with pytest.raises(TilelangError, match="T.cpoy is not a name of TileLang-Ascend"):
        T.cpoy


def test_imports_of_unsupported_names_work_until_used():
    from tilelang.language import ptx_mma  # noqa: F401
    from tilelang import lower

    with pytest.raises(TilelangError, match="not supported: tilelang.lower"):
        lower(None)


def test_the_docs_table_is_generated_from_the_code():
    r = subprocess.run([sys.executable, os.path.join(TOOLS, "surface_table.py"), "--check"],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr


# ---- names made to work here ----


@tilelang.jit(out_idx=[-1])
def misc_names(N):
    @T.prim_func
    def main(A: T.Tensor((4, N), "float32"), B: T.Tensor((4, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, N), "float32")
            with T.Scope("V"):
                T.init_flag({"MTE3": {"MTE2": [0]}})
                for i, j in T.grid(1, 2):  # each vector core its own two rows
                    row = T.clamp(T.Max(vid * 2 + i * 2 + j, T.Min(0, cid)) + T.abs(cid - cid),
                                  0, 3)
                    T.wait_flag("MTE3", "MTE2", 0)
                    T.copy(A[T.npu_use_swizzle(row, 1, 1, 1, 1, 1), 0], a)
                    T.barrier_all()
                    T.tile.muls(a, a, T.Cast("float32", 2))
                    T.print(a)
                    T.barrier_all()
                    T.copy(a, B[row, 0])
                    T.set_flag("MTE3", "MTE2", 0)
                for k in T.parallel(1):
                    T.printf("k=%d", k)
                T.clear_flag({"MTE3": {"MTE2": [0]}})

    return main


def test_tvm_script_forms_of_the_surface():
    """T.grid, T.parallel, T.Cast / T.Min / T.Max, T.abs, T.clamp, T.init_flag / clear_flag,
    T.npu_use_swizzle and T.print, each with the original's meaning."""
    a = np.arange(4 * 64, dtype=np.float32).reshape(4, 64)
    np.testing.assert_array_equal(misc_names(64)(a), a * 2)
    assert T.bool == "bool" and T.abs(-3) == 3


# ---- pass configs ----


def test_every_pass_config_key_is_accepted():
    from tilelang import _jit

    keys = [n.split(".", 1)[1] for n in surface() if n.startswith("PassConfigKey.")]
    assert {"TL_ASCEND_TAIL_MASK", "TL_ASCEND_VECTOR_MASK_REUSE", "TL_ASCEND_AUTO_SYNC_VS",
            "TL_ASCEND_EXCEPTION_DUMP"} <= set(keys)
    configs = {getattr(tilelang.PassConfigKey, k): True for k in keys}
    key = tilelang.PassConfigKey.TL_ASCEND_TAIL_MASK  # the enum member's name and value
    assert (key.name, key.value, key) == ("TL_ASCEND_TAIL_MASK",) + ("tl.ascend_tail_mask",) * 2
    configs.update({"tl.ascend_tail_mask": False})  # the string form of a key too
    opts = _jit.pass_options(configs, {})
    assert opts["auto_sync"] and opts["memory_planning"] and opts["cv_split"]
    # Every option the configs set is one of the passes layer's (its option table).
    assert set(opts) and not set(opts) - set(_core._ext.PASS_OPTIONS), opts


@tilelang.jit(out_idx=[-1], pass_configs={
    tilelang.PassConfigKey.TL_ASCEND_TAIL_MASK: True,
    tilelang.PassConfigKey.TL_ASCEND_VECTOR_MASK_REUSE: False,
    tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC_VS: True,
    tilelang.PassConfigKey.TL_ASCEND_EXCEPTION_DUMP: True,
    tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True,
})
def tail_add(M, N, block_M, block_N):
    """Tail tiles copied with pad_value under TL_ASCEND_TAIL_MASK (the newer configs); each
    vector core takes half the block's rows."""
    m_num, n_num = T.ceildiv(M, block_M), T.ceildiv(N, block_N)
    half = block_M // 2

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, vid):
            bx, by = cid // n_num, cid % n_num
            a = T.alloc_ub((half, block_N), "float32")
            b = T.alloc_ub((half, block_N), "float32")
            with T.Scope("V"):
                row = bx * block_M + vid * half
                T.copy(A[row, by * block_N], a, pad_value=0.0)
                T.copy(B[row, by * block_N], b, pad_value=0.0)
                T.tile.add(a, a, b)
                T.copy(a, C[row, by * block_N])

    return main


def test_the_newer_pass_configs_run_a_tail_kernel():
    a = np.random.default_rng(0).standard_normal((44, 72)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((44, 72)).astype(np.float32)
    np.testing.assert_allclose(tail_add(44, 72, 16, 64)(a, b), a + b, rtol=1e-6)


def test_unknown_pass_config_keys_are_errors_at_the_line():
    with pytest.raises(TilelangError) as e:
        tilelang.PassConfigKey.TL_ASCEND_NO_SUCH_KEY  # MARK-key
    assert "PassConfigKey.TL_ASCEND_NO_SUCH_KEY is not a pass config" in str(e.value)
    assert e.value.loc == (HERE, lineno("# MARK-key"))
    with pytest.raises(TilelangError, match="unknown pass config 'tl.ascend_no_such'") as e:
        configs = {"tl.ascend_no_such": True}
        tilelang.compile(misc_names(64).prim, out_idx=[-1], pass_configs=configs)  # MARK-string
    assert e.value.loc == (HERE, lineno("# MARK-string"))


# ---- with and assignment forms ----


WITH_FORMS = {
    "kernel_and_scope_in_one_with": """
        with T.Kernel(1, is_npu=True) as (cid, vid), T.Scope("V"):
            a = T.alloc_ub((1, N), "float32")
            T.copy(A[vid, 0], a)
            T.barrier_all()
            T.tile.muls(a, a, 2.0)
            T.barrier_all()
            T.copy(a, B[vid, 0])
        """,
    "nested_with_and_list_target": """
        with T.Kernel(1, is_npu=True) as [cid, vid]:
            with T.Scope("V"):
                a = T.alloc_ub((1, N), "float32")
                T.copy(A[vid, 0], a)
                T.barrier_all()
                T.tile.muls(a, a, 2.0)
                T.barrier_all()
                T.copy(a, B[vid, 0])
        """,
    "assignment_forms": """
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                a = T.alloc_ub((1, N), "float32")
                x = y = 2.0
                (p, *rest) = (vid, 1, 2)
                q: T.int32 = p
                q += 0
                if (r := len(rest)) == 2:
                    T.copy(A[q, 0], a)
                T.barrier_all()
                T.tile.muls(a, a, x * y / 2.0)
                T.barrier_all()
                T.copy(a, B[q, 0])
        """,
}


@pytest.mark.parametrize("form", sorted(WITH_FORMS))
def test_with_and_assignment_forms_run(tmp_path, form):
    _, k = kernel_from_body(tmp_path, WITH_FORMS[form], f"with_{form}")
    a = np.arange(128, dtype=np.float32).reshape(2, 64)
    np.testing.assert_array_equal(k()(a), a * 2)


# ---- kernel-call conventions ----


@tilelang.jit(out_idx=[2], workspace_idx=[3])
def with_workspace(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32"),
             C: T.Tensor((2, N), "float32"), W: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, N), "float32")
            b = T.alloc_ub((1, N), "float32")
            with T.Scope("V"):
                T.copy(A[vid, 0], a)
                T.copy(B[vid, 0], b)
                T.barrier_all()
                T.tile.add(a, a, b)
                T.barrier_all()
                T.copy(a, W[vid, 0])
                T.barrier_all()
                T.copy(W[vid, 0], b)
                T.barrier_all()
                T.copy(b, C[vid, 0])

    return main


def test_calls_with_outputs_and_workspaces_passed_or_allocated():
    a = np.arange(128, dtype=np.float32).reshape(2, 64)
    b = np.ones((2, 64), np.float32)
    k = with_workspace(64)
    np.testing.assert_array_equal(k(a, b), a + b)  # inputs only
    c = np.zeros((2, 64), np.float32)
    assert k(a, b, c) is c  # the output passed: written and returned
    np.testing.assert_array_equal(c, a + b)
    c2, w = np.zeros((2, 64), np.float32), np.full((2, 64), 7, np.float32)
    assert k(a, b, c2, w) is c2  # every parameter: the workspace passed is not used
    np.testing.assert_array_equal(c2, a + b)
    assert (w == 7).all()
    with pytest.raises(TilelangError, match="takes 2 arrays .*; 5 given") as e:
        k(a, b, c, w, w)  # MARK-count
    assert e.value.loc == (HERE, lineno("# MARK-count"))
    assert "pass 2 or 3 or 4 arrays" in e.value.hint


@pytest.mark.parametrize("out_idx, workspace_idx, want", [
    (2, None, "ok"), ([-2], [-1], "ok"), ((2,), [3], "ok"), (None, None, "ok"),
    ("2", None, "out_idx='2': expected None"), ([2.0], None, "expected None"),
    (True, None, "expected None"), ([4], None, "out_idx 4 is out of range for the 4"),
    ([2], [2], r"both an output \(out_idx\) and a workspace"),
])
def test_out_idx_and_workspace_idx_forms(out_idx, workspace_idx, want):
    prim = with_workspace(64).prim
    if want == "ok":
        k = tilelang.compile(prim, out_idx=out_idx, workspace_idx=workspace_idx)
        assert len(k.out_idx) == (0 if out_idx is None else 1)
        return
    with pytest.raises(TilelangError, match=want) as e:
        tilelang.compile(prim, out_idx=out_idx, workspace_idx=workspace_idx)  # MARK-idx
    assert e.value.loc == (HERE, lineno("# MARK-idx"))


def test_package_utilities_of_the_original(tmp_path):
    """tilelang's cache switches and directory (in memory here), cdiv / next_power_of_2 and
    the Profiler of a kernel."""
    old = tilelang.get_cache_dir()
    try:
        tilelang.set_cache_dir(tmp_path)
        assert tilelang.get_cache_dir() == str(tmp_path)
        tilelang.disable_cache()
        assert not tilelang.is_cache_enabled()
    finally:
        tilelang.enable_cache()
        tilelang.set_cache_dir(old)
    assert tilelang.is_cache_enabled() and not any(tmp_path.iterdir())
    assert tilelang.cdiv(65, 64) == 2 and tilelang.next_power_of_2(65) == 128
    k = with_workspace(64)
    assert isinstance(k, tilelang.JITKernel)
    assert isinstance(k.get_profiler(), tilelang.Profiler) and k.get_profiler().do_bench() > 0


@tilelang.jit(out_idx=[-1])
def experiments(N, count):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, N), "float32")
            b = T.alloc_ub((1, N), "float32")
            with T.Scope("V"):
                T.copy(A[vid, 0], a)
                T.barrier_all()
                T.tile.abs_experiment(b, a, count)  # MARK-experiment
                T.tile.sub_experiment(b, b, a, count)
                T.tile.mins_experiment(b, b, 1.0, count)
                T.barrier_all()
                T.copy(b, B[vid, 0])

    return main


def test_counted_experiment_ops_over_whole_tiles():
    """abs / sub / mins_experiment with a count of the whole tile are the ops; another count
    (a prefix, which tilepipe does not model) is an error at the line."""
    a = np.linspace(-3, 3, 128, dtype=np.float32).reshape(2, 64)
    np.testing.assert_array_equal(experiments(64, 64)(a), np.minimum(np.abs(a) - a, 1.0))
    with pytest.raises(TilelangError, match="abs_experiment count 32 differs") as e:
        experiments(64, 32)
    assert e.value.loc == (HERE, lineno("# MARK-experiment"))

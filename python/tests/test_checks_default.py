"""A green run is a right run (issue 46 item 1): every kernel call runs the race, flag and
deadlock checks unless the user opted out; a finding raises tilelang.KernelCheckError, and
`tilepipe run-py` exits 3 before the script's success line, also when the script caught
the error and went on."""

import numpy as np
import pytest

import fuzz_support as fz
import tilelang

# Automatic sync off and no flags of the author's: the vector op reads `x` while MTE2 may
# still be writing it (and MTE3 reads what V writes), a race on the NPU.
RACY = '''
import sys
import numpy as np
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1], pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: False})
def no_sync(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.tile.exp(x, x)
                T.copy(x, B[vid, :])

    return main


a = np.random.default_rng(0).standard_normal((2, 64)).astype("float32")
{body}
'''

PLAIN = '''
b = no_sync(64)(a)
np.testing.assert_allclose(b, np.exp(a), rtol=1e-5)
print("Kernel Output Match!")
'''

CAUGHT = '''
for case in range(2):
    try:
        no_sync(64)(a)
        print("case", case, "passed")
    except Exception as e:  # a benchmark loop that records a failed case and goes on
        print("case", case, "failed:", type(e).__name__)
{tail}
'''


def run_py(body, *flags, env=None):
    fz.need_binary()
    with fz.Sandbox() as box:
        script = box.write("racy.py", RACY.replace("{body}", body))
        return fz.run([fz.TILEPIPE, "run-py", *flags, script], box, inputs=[script],
                      codes=(0, 2, 3), env=env)


def no_sync_kernel(tmp_path, n=64):
    """RACY's kernel, loaded from a file of its own (the front end reads the kernel's source)."""
    import runpy

    path = tmp_path / "racy_kernel.py"
    path.write_text(RACY.replace("{body}", ""))
    return runpy.run_path(str(path))["no_sync"](n)


def test_a_racy_kernel_call_raises_a_check_error_naming_both_lines(monkeypatch, tmp_path):
    monkeypatch.delenv("TILEPIPE_NO_CHECK", raising=False)
    a = np.ones((2, 64), "float32")
    with pytest.raises(tilelang.KernelCheckError) as e:
        no_sync_kernel(tmp_path)(a)
    assert isinstance(e.value, tilelang.TilepipeError)
    assert "race" in e.value.kinds
    race = next(d for d in e.value.diagnostics if d["kind"] == "race")
    assert "racy_kernel.py" in race["file"]
    # the report names the other access's line too
    assert str(e.value).count("racy_kernel.py:") >= 2, str(e.value)


def test_the_opt_out_skips_the_race_detector(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEPIPE_NO_CHECK", "1")
    a = np.ones((2, 64), "float32")
    no_sync_kernel(tmp_path)(a)  # races are not looked for: the call returns


def test_run_py_exits_3_before_the_success_line():
    o = run_py(PLAIN)
    assert o.rc == 3, o.stderr
    assert "Kernel Output Match!" not in o.stdout
    assert "data race" in o.stderr and "racy.py:" in o.stderr
    assert "/tilelang/" not in o.stderr  # the user's frames only


def test_run_py_no_check_is_the_explicit_opt_out():
    o = run_py(PLAIN, "--no-check")
    assert o.rc == 0, o.stderr
    assert "Kernel Output Match!" in o.stdout


@pytest.mark.parametrize("tail", ["", "sys.exit(0)", "import os; os._exit(0)"])
def test_errors_the_script_caught_still_end_the_run_non_zero(tail):
    o = run_py(CAUGHT.format(tail=tail))
    assert o.rc == 3, (o.rc, o.stderr)
    assert o.stdout.count("failed: KernelCheckError") == 2
    assert "the script caught 2 error(s) tilepipe raised" in o.stderr
    assert "2 from the race / flag / deadlock checks" in o.stderr


def test_a_correct_kernel_passes_with_the_checks_on():
    o = run_py('''
@tilelang.jit(out_idx=[1])
def synced(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.tile.exp(x, x)
                T.copy(x, B[vid, :])

    return main


np.testing.assert_allclose(synced(64)(a), np.exp(a), rtol=1e-5)
print("Kernel Output Match!")
''')
    assert o.rc == 0, o.stderr
    assert "Kernel Output Match!" in o.stdout


@pytest.mark.parametrize("flags, rc", [((), 3), (("--no-check",), 0)])
def test_tilepipe_run_of_a_racy_kernel_exits_3_unless_opted_out(flags, rc):
    fz.need_binary()
    with fz.Sandbox() as box:
        script = box.write("racy.py", RACY.replace("{body}", ""))
        o = fz.run([fz.TILEPIPE, "run", f"{script}:no_sync", "--param", "N=64", *flags, "--json"],
                   box, inputs=[script], codes=(0, 3))
    assert o.rc == rc, o.stderr
    assert not o.violations, o.violations
    if rc == 3:
        assert o.doc["ok"] is False and o.doc["errors"][0]["kind"] == "race"
    else:
        assert o.doc["races_checked"] is False


def test_gemm_v0_brings_its_library_flags_when_automatic_sync_is_off():
    # The original's gemm_v0 is a library with flags of its own: a Cube scope of copies and
    # gemm_v0 with automatic sync off and no flag of the author's (opt_gdn's pattern) is
    # race-free, so the checks find nothing.
    import tilelang.language as T

    @tilelang.jit(out_idx=[2], pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: False})
    def mm(M, N, K):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                 C: T.Tensor((M, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_L1((M, K), "float16")
                b = T.alloc_L1((K, N), "float16")
                c = T.alloc_L0C((M, N), "float32")
                with T.Scope("C"):
                    T.copy(A, a)
                    T.copy(B, b)
                    T.gemm_v0(a, b, c, init=True)
                    T.copy(c, C)

        return main

    rng = np.random.default_rng(1)
    a = rng.standard_normal((32, 256)).astype(np.float16)
    b = rng.standard_normal((256, 32)).astype(np.float16)
    np.testing.assert_allclose(mm(32, 32, 256)(a, b), a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-2, atol=1e-2)


def barrier_kernel(auto_sync):
    """An automatic kernel with the author's T.barrier_all() before a loop of copy, exp,
    copy: the original's AUTO_SYNC adds its flags around the barrier."""
    import tilelang.language as T

    @tilelang.jit(out_idx=[1], pass_configs={
        tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: auto_sync,
        tilelang.PassConfigKey.TL_ASCEND_AUTO_CV_COMBINE: True})
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((N,), "float32")
                T.tile.fill(x, 0.0)
                T.barrier_all()
                for i in T.serial(2):
                    T.copy(A[vid, :], x)
                    T.tile.exp(x, x)
                    T.copy(x, B[vid, :])

        return main

    return k(64)


def test_the_authors_barrier_all_keeps_automatic_sync_on(monkeypatch):
    # The barrier made the scope hand-synced, so auto_sync placed no flag: MTE2 -> V -> MTE3
    # unordered inside the loop (the SFA pipeline examples' false reports).
    monkeypatch.delenv("TILEPIPE_NO_CHECK", raising=False)
    a = np.random.default_rng(0).standard_normal((2, 64)).astype("float32")
    np.testing.assert_allclose(barrier_kernel(True)(a), np.exp(a), rtol=1e-5)


def test_the_same_barrier_kernel_without_automatic_sync_is_still_a_race(monkeypatch):
    monkeypatch.delenv("TILEPIPE_NO_CHECK", raising=False)
    a = np.ones((2, 64), "float32")
    with pytest.raises(tilelang.KernelCheckError) as e:
        barrier_kernel(False)(a)
    assert "race" in e.value.kinds


def element_store_kernel(s_flag, auto_sync=False, barrier=False):
    """`x[3] = 7` between a copy in and a copy out: the original's SetValue, the scalar
    unit's store. With the author's flags (`s_flag`: an S -> MTE3 flag before the copy out,
    which reads the element; `barrier`: a T.barrier_all() there) or automatic sync."""
    import tilelang.language as T

    @tilelang.jit(out_idx=[1], pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: auto_sync})
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), "int32"), B: T.Tensor((2, N), "int32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((N,), "int32")
                with T.Scope("V"):
                    T.copy(A[vid, :], x)
                    if not auto_sync:
                        T.set_flag("mte2", "s", 0)
                        T.wait_flag("mte2", "s", 0)
                    x[3] = 7
                    if s_flag:
                        T.set_flag("s", "mte3", 0)
                        T.wait_flag("s", "mte3", 0)
                    if barrier:
                        T.barrier_all()  # PipeBarrier<PIPE_ALL> orders the store too
                    T.copy(x, B[vid, :])

        return main

    return k(64)


def stored(a):
    want = a.copy()
    want[:, 3] = 7
    return want


def test_an_element_store_is_the_scalar_units_and_needs_an_s_flag_before_a_dma(monkeypatch):
    # setvalue_example's shape: the store, then the DMA reading the element, with no S -> MTE3
    # flag. The store ran on V before, so the race was reported on the wrong pipe and a
    # right S -> MTE3 flag did not order it.
    monkeypatch.delenv("TILEPIPE_NO_CHECK", raising=False)
    a = np.arange(128, dtype=np.int32).reshape(2, 64)
    with pytest.raises(tilelang.KernelCheckError) as e:
        element_store_kernel(False)(a)
    race = next(d for d in e.value.diagnostics if d["kind"] == "race")
    assert "S writes" in race["message"], race["message"]
    np.testing.assert_array_equal(element_store_kernel(True)(a), stored(a))
    np.testing.assert_array_equal(element_store_kernel(False, barrier=True)(a), stored(a))


def test_automatic_sync_places_the_flags_of_an_element_store(monkeypatch):
    monkeypatch.delenv("TILEPIPE_NO_CHECK", raising=False)
    a = np.arange(128, dtype=np.int32).reshape(2, 64)
    np.testing.assert_array_equal(element_store_kernel(False, auto_sync=True)(a), stored(a))

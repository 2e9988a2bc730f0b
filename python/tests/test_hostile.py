"""Regression tests of issue 26 on the Python side (the C++ CLI ones: tests/hostile_test.cc).

Each runs a small TileLang script through `tilepipe run-py` in a subprocess (a crash is a
failed test, not the end of the session) and fails on the tree before the fixes (04e0982).
"""

import textwrap

import fuzz_support as fz

# A kernel with one extra UB buffer `big` of shape BIG, copied into when USED.
SCRIPT = '''
import sys
import numpy as np
import tilelang
import tilelang.language as T

M, N, dtype = 16, 64, "float32"
BIG, USED, ARG = {big!r}, {used!r}, {arg!r}


@tilelang.jit(out_idx=[-1])
def k():
    h = M // 2

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((h, N), dtype)
            if BIG:
                big = T.alloc_ub(BIG, dtype)
            with T.Scope("V"):
                T.copy(A[vid * h:(vid + 1) * h, :], a)
                if USED:
                    T.copy(a[0:2, 0:16], big[0:2, 0:16])
                T.copy(a, C[vid * h:(vid + 1) * h, :])
    return main


try:
    kern = k()
    x = np.ones((M, N), dtype=dtype)
    if ARG == "object":  # what a list of mixed Python values becomes
        x = x.astype(object)
        x[0, 0] = object()
    c = kern(x)
except tilelang.TilelangError as e:
    print(str(e).splitlines()[0], file=sys.stderr)
    sys.exit(2)
print("ok", float(np.asarray(c).sum()))
'''


def run_script(big=None, used=False, arg="float32"):
    fz.need_binary()
    with fz.Sandbox() as box:
        script = box.write("kern.py", SCRIPT.format(big=big, used=used, arg=arg))
        o = fz.run([fz.TILEPIPE, "run-py", script], box, inputs=[script])
    assert not o.violations, f"{o.violations}\nreproduce: {o.repro()}\nstderr: {o.stderr}"
    return o


def test_the_script_itself_runs():
    """The harness is sound: without a hostile input the kernel runs and copies A to C."""
    o = run_script()
    assert o.rc == 0 and "ok 1024.0" in o.stdout, o.stderr


def test_used_ub_buffer_whose_bytes_overflow_int64_is_bad_shape_not_a_crash():
    # Issue 26 #1: T.alloc_ub((1 << 32, 1 << 32)) + a copy into it segfaulted in sim::execute.
    o = run_script(big=(1 << 32, 1 << 32), used=True)
    assert o.rc == 2 and "bad-shape" in o.stderr, o.stderr
    assert "2^48" in o.stderr or "256 TiB" in o.stderr, "the message names the limit"


def test_unused_ub_buffer_whose_bytes_overflow_int64_is_refused_not_zero_bytes():
    # Issue 26 #1: unused, the same buffer wrapped to 0 bytes and the kernel ran.
    o = run_script(big=(1 << 32, 1 << 32), used=False)
    assert o.rc == 2 and "bad-shape" in o.stderr, o.stderr


def test_buffer_extent_past_int64_is_bad_shape_not_a_binding_type_error():
    # Issue 26 #1: an extent past int64 reached pybind as a raw "incompatible function
    # arguments" TypeError.
    o = run_script(big=(10 ** 20, 64), used=False)
    assert o.rc == 2 and "bad-shape" in o.stderr, o.stderr


def test_object_dtype_numpy_argument_is_a_tilelang_error():
    # Issue 26 #6: an object-dtype argument raised numpy's raw TypeError (exit 1, traceback).
    o = run_script(arg="object")
    assert o.rc == 2, o.stderr
    assert "dtype object" in o.stderr and "numeric" in o.stderr, textwrap.shorten(o.stderr, 400)

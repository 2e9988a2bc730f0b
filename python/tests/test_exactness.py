"""Constructs that used to compute a wrong number without a word (issue 25): float element
arithmetic on UB values, guards that are false for every iteration, bool arithmetic. Each
is now modelled exactly or refused at its line."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError, TilepipeError

from conftest import ROOT

HERE = os.path.basename(__file__)
RNG = np.random.default_rng(25)


def lineno(marker):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "lineno(" not in line)


@tilelang.jit(out_idx=[-1])
def scalar_cumsum(N):
    @T.prim_func
    def main(G: T.Tensor((2, N), "float32"), S: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            g = T.alloc_ub((1, N), "float32")
            s = T.alloc_ub((1, N), "float32")
            with T.Scope("V"):
                T.copy(G[vid, :], g[0, :])
                T.tile.fill(s, 0.0)
                for i in range(N):  # the corpus's cumsum loop (cumsum_gdn/example_cumsum.py)
                    if i > 0:
                        s[0, i] = s[0, i - 1]
                    s[0, i] = s[0, i] + g[0, i]
                T.copy(s[0, :], S[vid, :])

    return main


def test_float_element_arithmetic_is_float_arithmetic():
    g = RNG.standard_normal((2, 32)).astype(np.float32)
    ref = np.zeros_like(g)
    for r in range(2):
        acc = np.float32(0)
        for i in range(32):
            acc = np.float32(acc + g[r, i])
            ref[r, i] = acc
    np.testing.assert_array_equal(scalar_cumsum(32)(g), ref)


@tilelang.jit(out_idx=[-1])
def element_expression(N):
    @T.prim_func
    def main(X: T.Tensor((2, N), "float32"), G: T.Tensor((2, N), "float32"),
             Y: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((1, N), "float32")
            g = T.alloc_ub((1, N), "float32")
            y = T.alloc_ub((1, N), "float32")
            with T.Scope("V"):
                T.copy(X[vid, :], x[0, :])
                T.copy(G[vid, :], g[0, :])
                for i in T.serial(N - 1):
                    x[0, i + 1] = (x[0, i] - 2.0 * g[0, i + 1]) / 3.0 + (-g[0, i]) + i
                T.copy(x[0, :], y[0, :])
                T.tile.muls(y, y, g[0, 0] * 0.5 - 1.0)  # a float expression as a tile scalar
                T.copy(y[0, :], Y[vid, :])

    return main


def test_float_element_expressions_round_like_the_scalar_unit():
    x = RNG.standard_normal((2, 16)).astype(np.float32)
    g = RNG.standard_normal((2, 16)).astype(np.float32)
    f = np.float32
    ref = x.copy()
    for r in range(2):
        for i in range(15):
            t = f(f(ref[r, i] - f(f(2.0) * g[r, i + 1])) / f(3.0))
            ref[r, i + 1] = f(f(t + f(-g[r, i])) + f(i))
        ref[r] = ref[r] * f(f(g[r, 0] * f(0.5)) - f(1.0))
    np.testing.assert_array_equal(element_expression(16)(x, g), ref)


@tilelang.jit(out_idx=[-1])
def element_branches(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), H: T.Tensor((2, N), "float16"),
             B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, N), "float32")
            h = T.alloc_ub((1, N), "float16")
            b = T.alloc_ub((1, N), "float32")
            with T.Scope("V"):
                T.copy(A[vid, :], a[0, :])
                T.copy(H[vid, :], h[0, :])
                T.tile.fill(b, 0.0)
                for i in T.serial(N):
                    if a[0, i] * 2.0 > 0.5:  # an expression against a number
                        b[0, i] = a[0, i]
                    elif h[0, i] >= a[0, i]:  # float16 against float32 (widened exactly)
                        b[0, i] = 7.0
                    else:
                        b[0, i] = T.if_then_else(i % 2 == 0, a[0, i] - 1.0, A[vid, 0])
                T.copy(b[0, :], B[vid, :])

    return main


def test_a_float_element_condition_is_a_vector_compare_read_back():
    """`if a[i] * 2 > 0.5:` (fused_sigmoid_gating_delta_rule's softplus threshold): a
    one-element compare whose 0 / 1 the scalar unit reads; T.if_then_else between float
    elements (one of them in GM, chunk_gated_delta_rule's g_last) is an IR if. Race-free."""
    a = RNG.standard_normal((2, 64)).astype(np.float32)
    h = RNG.standard_normal((2, 64)).astype(np.float16)
    h[:, ::5] = a[:, ::5].astype(np.float16)  # equal after rounding: >= at the boundary
    f = np.float32
    ref = np.zeros_like(a)
    for r in range(2):
        for i in range(64):
            if f(a[r, i] * f(2.0)) > f(0.5):
                ref[r, i] = a[r, i]
            elif f(h[r, i]) >= a[r, i]:
                ref[r, i] = 7.0
            else:
                ref[r, i] = f(a[r, i] - f(1.0)) if i % 2 == 0 else a[r, 0]
    np.testing.assert_array_equal(element_branches(64).check(a, h), ref)


def test_a_float_element_bound_to_a_name_is_read_at_its_statement():
    """`v = buf[0]` reads the value then (the original's GetValue into a scalar): a later
    store into buf[0] leaves v as it was (it used to alias the element)."""

    @tilelang.jit(out_idx=[-1])
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((1, N), "float32")
                with T.Scope("V"):
                    T.copy(A[vid, :], a[0, :])
                    v = a[0, 0]
                    w = a[0, 1] * 3.0
                    a[0, 0] = 5.0
                    a[0, 1] = 6.0
                    T.tile.adds(a, a, v + w)
                    T.copy(a[0, :], B[vid, :])

        return main

    a = RNG.standard_normal((2, 32)).astype(np.float32)
    f = np.float32
    ref = a.copy()
    ref[:, 0], ref[:, 1] = 5.0, 6.0
    ref = ref + (a[:, :1] + f(3.0) * a[:, 1:2]).astype(np.float32)
    np.testing.assert_array_equal(k(32).check(a), ref)


def test_float_element_reads_in_hand_synced_code_are_ordered_for_the_scalar_unit():
    """With the author's flags auto_sync places none: the V ops standing for the scalar
    unit's compare and GetValue are followed by a V -> S flag pair, so the scalar reads of
    their results are race-free (the author's flags cannot know of those V ops)."""

    @tilelang.jit(out_idx=[-1])
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((1, N), "float32")
                b = T.alloc_ub((1, N), "float32")
                with T.Scope("V"):
                    T.copy(A[vid, :], a[0, :])
                    T.set_flag("mte2", "v", 0)
                    T.wait_flag("mte2", "v", 0)
                    T.tile.fill(b, 0.0)
                    for i in T.serial(N):
                        if a[0, i] > 0.5:
                            b[0, i] = 1.0
                    v = a[0, 0]
                    T.tile.adds(b, b, v)
                    T.set_flag("v", "mte3", 0)
                    T.wait_flag("v", "mte3", 0)
                    T.copy(b[0, :], B[vid, :])

        return main

    a = RNG.standard_normal((2, 32)).astype(np.float32)
    ref = (a > np.float32(0.5)).astype(np.float32) + a[:, :1]
    np.testing.assert_array_equal(k(32).check(a), ref)


def test_a_float_element_as_an_index_is_refused_at_its_line():
    @tilelang.jit
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((1, N), "float32")
                with T.Scope("V"):
                    T.copy(A[vid, :], a[0, :])
                    T.copy(A[vid, a[0, 0]:a[0, 0] + 8], a[0, 0:8])  # MARK-findex
                    T.copy(a[0, :], B[vid, :])

        return main

    with pytest.raises(TilelangError) as e:
        k(32)
    assert "read as an integer value" in str(e.value)
    assert e.value.loc == (HERE, lineno("# MARK-findex"))


def test_a_guard_false_on_every_iteration_is_no_code():
    """`if si < s_num - 1:` around a prefetch in a loop of one trip (group_norm's serial
    kernel): its out-of-range slice is never read, as after the original's simplifier."""

    @tilelang.jit(out_idx=[-1])
    def k(N, s_num):
        @T.prim_func
        def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((2, N), "float32")
                with T.Scope("V"):
                    T.copy(A[vid, 0:N], a[0, :])
                    for si in T.serial(s_num):
                        if si < s_num - 1:
                            T.copy(A[vid, (si + 1) * N:(si + 2) * N], a[1, :])
                    T.copy(a[0, :], B[vid, :])

        return main

    a = RNG.standard_normal((2, 64)).astype(np.float32)
    np.testing.assert_array_equal(k(64, 1)(a), a)


@pytest.mark.parametrize("form", ["reduce", "parallel", "tile"])
def test_arithmetic_on_bool_buffers_is_refused(form):
    @tilelang.jit(out_idx=[-1])
    def k(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), "bool"), B: T.Tensor((M, N), "bool"),
                 C: T.Tensor((M, N), "bool")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                h = M // 2
                a = T.alloc_ub((h, N), "bool")
                b = T.alloc_ub((h, N), "bool")
                with T.Scope("V"):
                    T.copy(A[vid * h, 0], a)
                    T.copy(B[vid * h, 0], b)
                    if form == "reduce":
                        r = T.alloc_ub((h,), "bool")
                        T.reduce_sum(a, r, dim=-1)
                    elif form == "parallel":
                        for i, j in T.Parallel(h, N):
                            a[i, j] = a[i, j] - b[i, j]
                    else:
                        T.tile.add(a, a, b)
                    T.copy(a, C[vid * h, 0])

        return main

    with pytest.raises(TilelangError, match="on the bool buffer 'a': bool values have no "
                       "arithmetic"):
        k(16, 64)


def test_logical_ops_on_bool_buffers_stay_exact():
    @tilelang.jit(out_idx=[-1])
    def k(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), "bool"), B: T.Tensor((M, N), "bool"),
                 C: T.Tensor((M, N), "bool")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                h = M // 2
                a = T.alloc_ub((h, N), "bool")
                b = T.alloc_ub((h, N), "bool")
                with T.Scope("V"):
                    T.copy(A[vid * h, 0], a)
                    T.copy(B[vid * h, 0], b)
                    T.tile.max(a, a, b)  # or
                    T.copy(a, C[vid * h, 0])

        return main

    a, b = RNG.random((16, 64)) > 0.5, RNG.random((16, 64)) > 0.5
    np.testing.assert_array_equal(k(16, 64)(a, b), (a | b).astype(np.uint8))


def test_a_comparison_inside_t_parallel_is_a_zero_or_one_value():
    # a bool per lane used as a number: a compare mask cast to the element dtype (it was
    # refused until the lanes had masks)
    @tilelang.jit(out_idx=[-1])
    def k(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                h = M // 2
                a = T.alloc_ub((h, N), "float32")
                with T.Scope("V"):
                    T.copy(A[vid * h, 0], a)
                    for i, j in T.Parallel(h, N):
                        a[i, j] = (a[i, j] > 0.0) * a[i, j] + (not j < 3)
                    T.copy(a, C[vid * h, 0])

        return main

    a = RNG.standard_normal((16, 64)).astype(np.float32)
    want = np.maximum(a, 0) + (np.arange(64) >= 3)[None, :]
    np.testing.assert_array_equal(k(16, 64)(a), want.astype(np.float32))


def test_host_goldens_round_like_the_npu(tmp_path):
    """Under the runner: bf16 group_norm accumulates in float32 and f32 exp is correctly
    rounded (gdn_wy_fast's and group_norm's references), f16 matmul runs on the CPU."""
    pytest.importorskip("torch")
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent("""
        import torch
        import torch.nn.functional as F
        torch.manual_seed(0)
        x = torch.randn(2, 64, 32, 32, dtype=torch.bfloat16)
        y = F.group_norm(x, 8)
        assert torch.equal(y, F.group_norm(x.float(), 8).bfloat16())
        t = torch.randn(1 << 16) * 4
        assert torch.equal(torch.exp(t), torch.exp(t.double()).float())
        h = torch.randn(8, 8).half()
        assert (h @ h).dtype == torch.float16
        print("OK")
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(ROOT, "python"), os.environ.get("TILEPIPE_BUILD_DIR",
                                                      os.path.join(ROOT, "build"))]))
    r = subprocess.run([sys.executable, "-m", "tilepipe", str(script)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "OK", r.stderr


@pytest.mark.parametrize("rows,cols", [(16, 16), (16, 32), (32, 16)])
def test_parallel_row_slice_indexed_by_the_row_variable_broadcasts_along_columns(rows, cols):
    """`m[j, k] = o[j, k] * o[i, j]` (gdn_solve_tril): o[i, j] varies with the row j. The
    [1, C] slice of row i used to be broadcast down the rows: a transposed factor."""

    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((32, 32), "float32"), B: T.Tensor((rows, cols), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                o = T.alloc_ub((32, 32), "float32")
                m = T.alloc_ub((rows, cols), "float32")
                with T.Scope("V"):
                    if vid == 0:
                        T.copy(A, o)
                        for i in range(2, 3):
                            for j, kk in T.Parallel(rows, cols):
                                m[j, kk] = o[j, kk] * o[i, j]
                        T.copy(m, B)

        return main

    a = RNG.standard_normal((32, 32)).astype(np.float32)
    np.testing.assert_allclose(k()(a), a[:rows, :cols] * a[2, :rows][:, None], rtol=1e-6)


@tilelang.jit(out_idx=[-1])
def hand_pipelined(N, trips):
    @T.prim_func
    def main(A: T.Tensor((2, trips * N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, N), "float32")
            s = T.alloc_ub((1, N), "float32")
            with T.Scope("V"):
                T.tile.fill(s, 0.0)
                for i in T.Pipelined(trips, num_stages=2):  # MARK-handpipe
                    off = i * N
                    T.copy(A[vid, off:off + N], a[0, :])
                    T.barrier_all()
                    T.tile.add(s, s, a)
                T.set_flag("v", "mte3", 0)
                T.wait_flag("v", "mte3", 0)
                T.copy(s[0, :], B[vid, :])

    return main


def test_a_one_trip_pipelined_loop_with_hand_flags_is_the_program_order():
    """group_norm's cpipeline kernel (s_num == 1): the original's pipeline of one iteration
    is its GM copies (prologue), then the rest (epilogue): the program order."""
    a = RNG.standard_normal((2, 64)).astype(np.float32)
    np.testing.assert_array_equal(hand_pipelined(64, 1).check(a), a)


def test_a_pipelined_ub_copy_with_hand_flags_runs_the_original_schedule():
    """The original moves the GM -> UB copy of iteration i + 1 ahead of the add of
    iteration i, over two versions of `a`, its flags moving with their statements. With two
    iterations no version is reused: exact and race-free. With four, the author's barrier
    does not order the add of i - 1 before the copy into its version, and the race check
    says so at the lines (as on the NPU, where it is a race too)."""
    a = RNG.standard_normal((2, 128)).astype(np.float32)
    np.testing.assert_array_equal(hand_pipelined(64, 2).check(a), a[:, :64] + a[:, 64:])
    k = hand_pipelined(64, 4)
    ir = k.get_ir()
    assert "alloc a_v: UB f32[2, 1, 64]" in ir
    loop = ir[ir.index("for i_pipe"):]
    assert loop.index("copy A[") < loop.index("tile.add s, s, a_v")
    with pytest.raises(TilepipeError) as e:
        k.check(RNG.standard_normal((2, 256)).astype(np.float32))
    assert "data race on 'a_v'" in str(e.value)


@tilelang.jit(out_idx=[-1])
def hand_pipelined_l1(M, N, K, bk):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((M, bk), "float16")
            b_l1 = T.alloc_L1((bk, N), "float16")
            c_l0 = T.alloc_L0C((M, N), "float32")
            with T.Scope("C"):
                for k in T.Pipelined(K // bk, num_stages=3):
                    T.barrier_all()
                    T.copy(A[0, k * bk], a_l1)
                    T.copy(B[k * bk, 0], b_l1)
                    if k == 0:
                        T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                    else:
                        T.gemm_v0(a_l1, b_l1, c_l0)
                    T.barrier_all()
                T.copy(c_l0, C[0, 0])

    return main


def test_a_pipelined_l1_loop_with_hand_flags_is_the_program_order():
    """gemm_v0_pipeline.py: the original's planner matches GM copies into its "shared" (UB)
    scope only, not L1's "shared.l1"; with no copy stage every block is in one stage and
    the pipelined schedule is the program order. Race-free, exact."""
    a = RNG.standard_normal((32, 256)).astype(np.float16)
    b = RNG.standard_normal((256, 64)).astype(np.float16)
    out = hand_pipelined_l1(32, 64, 256, 64).check(a, b)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3,
                               atol=1e-3)


def test_a_pipelined_loop_with_a_nested_gm_copy_is_refused_at_its_line():
    @tilelang.jit
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2, 4 * N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((1, N), "float32")
                s = T.alloc_ub((1, N), "float32")
                with T.Scope("V"):
                    T.tile.fill(s, 0.0)
                    for i in T.Pipelined(4, num_stages=2):  # MARK-nested
                        if i > 0:
                            T.copy(A[vid, i * N:i * N + N], a[0, :])
                        T.barrier_all()
                        T.tile.add(s, s, a)
                    T.copy(s[0, :], B[vid, :])

        return main

    with pytest.raises(TilelangError) as e:
        k(64)
    assert "GM copy nested in the statement" in str(e.value)
    assert e.value.loc == (HERE, lineno("# MARK-nested"))


def test_a_versioned_buffer_used_after_the_pipelined_loop_is_refused_at_the_loop():
    """The original versions only buffers allocated in the loop (used nowhere else); one
    used after it keeps a single version there, which the pipeline would overwrite."""

    @tilelang.jit
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2, 4 * N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((1, N), "float32")
                s = T.alloc_ub((1, N), "float32")
                with T.Scope("V"):
                    T.tile.fill(s, 0.0)
                    for i in T.Pipelined(4, num_stages=2):  # MARK-outside
                        T.copy(A[vid, i * N:i * N + N], a[0, :])
                        T.barrier_all()
                        T.tile.add(s, s, a)
                    T.tile.add(s, s, a)
                    T.copy(s[0, :], B[vid, :])

        return main

    with pytest.raises(TilelangError) as e:
        k(64)
    assert "used outside the loop" in str(e.value)
    assert e.value.loc == (HERE, lineno("# MARK-outside"))

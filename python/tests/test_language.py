"""The tilelang language on tilepipe: each construct checked against numpy, and must-fail
cases checked for their located messages."""

import json
import os

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError, TilepipeError

# Unscoped kernels name the original's AUTO_CV_COMBINE form (its strict C/V check, #1753).
CV_COMBINE = {tilelang.PassConfigKey.TL_ASCEND_AUTO_CV_COMBINE: True}

import kernels

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ---- kernels, loops, scopes ----


def test_vadd_matches_numpy():
    k = kernels.vadd(64, 128, 32, 64)
    a, b = rand(64, 128), rand(64, 128)
    np.testing.assert_allclose(k(a, b), a + b, rtol=1e-6)


def test_gemm_v0_with_runtime_init_matches_numpy():
    k = kernels.matmul(64, 64, 128, 32, 32, 32)
    a, b = rand(64, 128, dtype=np.float16), rand(128, 64, dtype=np.float16)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(k(a, b).astype(np.float32), ref, rtol=1e-2, atol=1e-2)


def test_gemm_v0_is_one_gemm_l1_statement_that_the_gemm_l1_pass_stages():
    k = kernels.matmul(64, 64, 128, 32, 32, 32)
    k(rand(64, 128, dtype=np.float16), rand(128, 64, dtype=np.float16))
    before, after = k.get_ir(after_passes=False), k.get_ir()
    assert "gemm_l1 a_l1 x b_l1 -> c_l0 init=(k == 0)" in before, before
    assert "gemm_l0a" not in before, before
    # the scope has the author's barriers: the library's protocol, one L0 slot for one chunk
    assert "gemm_l1" not in after and "copy a_l1 -> gemm_l0a_1x32x32" in after, after


def test_gemm_v0_with_different_k_extents_is_a_located_error():
    @tilelang.jit(out_idx=[-1])
    def f():
        @T.prim_func
        def main(A: T.Tensor((32, 64), "float16"), B: T.Tensor((32, 32), "float16"),
                 C: T.Tensor((32, 32), "float")):
            with T.Kernel(1, is_npu=True) as (cid, _):
                a_l1 = T.alloc_L1((32, 64), "float16")
                b_l1 = T.alloc_L1((32, 32), "float16")
                c_l0 = T.alloc_L0C((32, 32), "float")
                with T.Scope("C"):
                    T.copy(A, a_l1)
                    T.copy(B, b_l1)
                    T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                    T.copy(c_l0, C)

        return main

    with pytest.raises(TilepipeError) as e:
        f()(rand(32, 64, dtype=np.float16), rand(32, 32, dtype=np.float16))
    assert "gemm_l1 [32x64] x [32x32] -> [32x32]" in str(e.value)
    assert "shape-mismatch" in e.value.kinds
    line = test_gemm_v0_with_different_k_extents_is_a_located_error.__code__.co_firstlineno + 13
    assert f"test_language.py:{line}" in str(e.value)


def test_jit_caches_by_arguments():
    assert kernels.vadd(64, 128, 32, 64) is kernels.vadd(64, 128, 32, 64)
    assert kernels.vadd(64, 128, 32, 64) is not kernels.vadd(64, 128, 32, 32)


@pytest.mark.parametrize("op,ref", [
    ("exp", np.exp), ("abs", np.abs), ("relu", lambda x: np.maximum(x, 0)),
    ("sqrt", lambda x: np.sqrt(np.abs(x))), ("reciprocal", lambda x: 1 / x),
])
def test_unary_tile_ops(op, ref):
    k = kernels.unary(32, 64, op)
    x = rand(32, 64)
    if op == "sqrt":
        x = np.abs(x)
    np.testing.assert_allclose(k(x), ref(x), rtol=2e-3, atol=1e-5)


@tilelang.jit(out_idx=[2])
def binops(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
             C: T.Tensor((6, M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            h = M // 2
            a = T.alloc_ub((h, N), "float32")
            b = T.alloc_ub((h, N), "float32")
            o = T.alloc_ub((6, h, N), "float32")
            with T.Scope("V"):
                T.copy(A[vid * h, 0], a)
                T.copy(B[vid * h, 0], b)
                T.tile.sub(o[0, :, :], a, b)
                T.tile.mul(o[1, :, :], a, 2.5)
                T.tile.max(o[2, :, :], a, b)
                T.tile.min(o[3, :, :], a, b)
                T.tile.fill(o[4, :, :], 1.0)
                T.tile.axpy(o[4, :, :], a, 3.0)  # o4 = 3 a + 1
                T.tile.adds(o[5, :, :], b, -1.0)
                for i in T.serial(6):
                    T.copy(o[i, :, :], C[i, vid * h:vid * h + h, :])

    return main


def test_binary_scalar_fill_axpy():
    a, b = rand(16, 32), rand(16, 32)
    out = binops(16, 32)(a, b)
    for got, want in zip(out, [a - b, a * 2.5, np.maximum(a, b), np.minimum(a, b), 3 * a + 1,
                               b - 1]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@tilelang.jit(out_idx=[1, 2, 3])
def reductions(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), Mx: T.Tensor((M, 1), "float32"),
             Sm: T.Tensor((M, 1), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            h = M // 2
            a = T.alloc_ub((h, N), "float32")
            mx = T.alloc_ub((h, 1), "float32")
            sm = T.alloc_ub((h, 1), "float32")
            full = T.alloc_ub((h, N), "float32")
            with T.Scope("V"):
                T.copy(A[vid * h, 0], a)
                T.reduce_max(a, mx, dim=-1)
                T.reduce_sum(a, sm, dim=-1)
                T.tile.broadcast(full, mx)
                T.tile.sub(full, a, full)  # a - rowmax
                T.copy(mx, Mx[vid * h, 0])
                T.copy(sm, Sm[vid * h, 0])
                T.copy(full, Y[vid * h, 0])

    return main


def test_reductions_and_broadcast():
    a = rand(16, 64)
    mx, sm, y = reductions(16, 64)(a)
    np.testing.assert_allclose(mx[:, 0], a.max(1), rtol=1e-6)
    np.testing.assert_allclose(sm[:, 0], a.sum(1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y, a - a.max(1, keepdims=True), rtol=1e-6)


@tilelang.jit(out_idx=[1])
def masked(N, bound):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            y = T.alloc_ub((N,), "float32")
            m = T.alloc_ub((N // 8,), "uint8")
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.tile.compare(m, x, bound, "LE")
                T.tile.select(y, m, x, -1.0, "VSEL_TENSOR_SCALAR_MODE")
                T.copy(y, B[vid, :])

    return main


def test_compare_select_bitmask():
    a = rand(2, 64)
    np.testing.assert_array_equal(masked(64, 0.25)(a), np.where(a <= 0.25, a, -1.0))


@tilelang.jit(out_idx=[1])
def band(N, lo, hi):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            m1 = T.alloc_ub((N // 8,), "uint8")
            m2 = T.alloc_ub((N // 8,), "uint8")
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.tile.compare(m1, x, lo, "GE")
                T.tile.compare(m2, x, hi, "LT")
                T.tile.bitwise_and(m1, m1, m2)
                T.tile.select(x, m1, x, 0.0, "VSEL_TENSOR_SCALAR_MODE")
                T.copy(x, B[vid, :])

    return main


def test_mask_bitwise_and():
    a = rand(2, 64)
    np.testing.assert_array_equal(band(64, -0.5, 0.5)(a), np.where((a >= -0.5) & (a < 0.5), a, 0))


# tilepipe's lowering: the original's makes `a[i, j] - r[i]` one call per row
# (test_parallel_rows.py), without the broadcast this is about
@tilelang.jit(out_idx=[2], pass_configs={"tilepipe.lowering": "tilepipe"})
def parallel_elementwise(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), R: T.Tensor((M,), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            h = M // 2
            a = T.alloc_ub((h, N), "float32")
            r = T.alloc_ub((h,), "float32")
            c = T.alloc_ub((h, N), "float32")
            with T.Scope("V"):
                T.copy(A[vid * h, 0], a)
                T.copy(R[vid * h:vid * h + h], r)
                for i, j in T.Parallel(h, N):
                    c[i, j] = T.exp(a[i, j] - r[i]) * 2.0 + 1.0
                for i, j in T.Parallel(h, N):
                    c[i, j] += a[i, j]
                T.copy(c, C[vid * h, 0])

    return main


def test_parallel_element_assignments_become_tile_ops():
    a, r = rand(16, 64), rand(16)
    k = parallel_elementwise(16, 64)
    # atol: `+ a` can cancel most of a value of up to ~30, leaving f32 rounding of the larger
    # terms (a few 1e-6 absolute) on a small result
    np.testing.assert_allclose(k(a, r), np.exp(a - r[:, None]) * 2 + 1 + a, rtol=1e-5, atol=1e-4)
    # the front end emits element code in a nest of parallel loops; the vectorize pass makes
    # it tile ops over the whole nest, broadcasting the row vector r[i]
    assert "for j in parallel(0, 64)" in k.get_ir(after_passes=False)
    after = k.get_ir()
    assert "in parallel(" not in after
    assert "tile.broadcast par_bc1, r, column\n" in after, after


# ---- Python-level constructs ----


@T.macro
def scale_into(dst, src, s):
    T.tile.mul(dst, src, s)


@tilelang.jit(out_idx=[1])
def constructs(M, N, twice):
    tiles = M // 8

    def rows(t):  # a plain helper: runs as Python, returns a pair
        return t * 8, (t + 1) * 8

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            x = T.alloc_ub((8, N), "float32")
            with T.Scope("V"):
                for t in range(tiles // 4):  # range = serial loop
                    tile = cid * (tiles // 2) + vid * (tiles // 4) + t  # let-bound
                    lo, hi = rows(tile)  # tuple target
                    T.copy(A[lo:hi, :], x)
                    if twice:  # static if on a Python value
                        scale_into(x, x, 2.0)
                    if tile % 2 == 1:  # run-time if
                        T.tile.adds(x, x, 100.0)
                    else:
                        T.tile.adds(x, x, -100.0)
                    T.copy(x, B[lo:hi, :])

    return main


def test_macro_helpers_static_and_runtime_if():
    a = rand(64, 32)
    ref = a * 2
    ref = ref + np.where((np.arange(64) // 8 % 2 == 1)[:, None], 100.0, -100.0)
    np.testing.assert_allclose(constructs(64, 32, True)(a), ref, rtol=1e-6)
    ref1 = a + np.where((np.arange(64) // 8 % 2 == 1)[:, None], 100.0, -100.0)
    np.testing.assert_allclose(constructs(64, 32, False)(a), ref1, rtol=1e-6)


@tilelang.jit(out_idx=[1])
def symbolic_rows(N):
    M = T.symbolic("M")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((1, N), "float32")
            with T.Scope("V"):
                for r in T.serial(T.ceildiv(M, 2)):
                    T.copy(A[r * 2 + vid, 0], x)
                    T.tile.muls(x, x, -1.0)
                    T.copy(x, B[r * 2 + vid, 0])

    return main


def test_symbolic_dims_bind_from_arguments():
    k = symbolic_rows(32)
    for m in (4, 10):
        a = rand(m, 32)
        np.testing.assert_allclose(k(a), -a)
    assert "f32[10, 32]" in k.get_kernel_source(rand(10, 32))


@tilelang.jit(out_idx=[1])
def tail_tiles(M, N, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), is_npu=True) as (cid, vid):
            h = bm // 2
            x = T.alloc_ub((h, bn), "float32")
            with T.Scope("V"):
                for j in T.serial(T.ceildiv(N, bn)):
                    T.copy(A[cid * bm + vid * h: cid * bm + vid * h + h, j * bn:(j + 1) * bn], x,
                           pad_value=0.0)
                    T.tile.exp(x, x)
                    T.copy(x, B[cid * bm + vid * h: cid * bm + vid * h + h, j * bn:(j + 1) * bn])

    return main


def test_partial_tiles_clamp_like_the_original():
    a = rand(34, 70)
    np.testing.assert_allclose(tail_tiles(34, 70, 16, 32)(a), np.exp(a), rtol=1e-5)


# ---- flags, pipelines, automatic split ----


@tilelang.jit(out_idx=[1])
def hand_flags(N, tiles):
    @T.prim_func
    def main(A: T.Tensor((tiles * 2, N), "float32"), B: T.Tensor((tiles * 2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((2, N), "float32")
            with T.Scope("V"):
                T.set_flag("MTE3", "MTE2", 0)  # both slots start free
                T.set_flag("MTE3", "MTE2", 1)
                for t in T.serial(tiles):
                    s = t % 2
                    T.wait_flag("MTE3", "MTE2", s)
                    T.copy(A[t * 2 + vid, :], x[s, :])
                    T.set_flag("MTE2", "V", s)
                    T.wait_flag("MTE2", "V", s)
                    T.tile.muls(x[s, :], x[s, :], 3.0)
                    T.set_flag("V", "MTE3", s)
                    T.wait_flag("V", "MTE3", s)
                    T.copy(x[s, :], B[t * 2 + vid, :])
                    T.set_flag("MTE3", "MTE2", s)
                T.wait_flag("MTE3", "MTE2", 0)
                T.wait_flag("MTE3", "MTE2", 1)

    return main


def test_hand_written_flags_run_race_free():
    k = hand_flags(64, 6)
    a = rand(12, 64)
    np.testing.assert_allclose(k.check(a), 3 * a, rtol=1e-6)


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


def test_auto_sync_off_leaves_a_race_the_checker_reports():
    with pytest.raises(TilepipeError) as e:
        no_sync(64).check(rand(2, 64))
    assert "race" in str(e.value).lower() or "race" in e.value.kinds


def test_auto_sync_on_makes_the_same_kernel_correct():
    k = kernels.unary(2, 64, "exp")
    a = rand(2, 64)
    np.testing.assert_allclose(k.check(a), np.exp(a), rtol=1e-5)


@tilelang.jit(out_idx=[1], pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True})
def nine_rows_in_flight(N):
    # Nine copies into distinct buffers before their multiplies: nine MTE2 -> V flags live
    # at once, one more than the chip's event ids.
    @T.prim_func
    def main(A: T.Tensor((2, 9, N), "float32"), B: T.Tensor((2, 9, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a0 = T.alloc_ub((1, N), "float32")
            a1 = T.alloc_ub((1, N), "float32")
            a2 = T.alloc_ub((1, N), "float32")
            a3 = T.alloc_ub((1, N), "float32")
            a4 = T.alloc_ub((1, N), "float32")
            a5 = T.alloc_ub((1, N), "float32")
            a6 = T.alloc_ub((1, N), "float32")
            a7 = T.alloc_ub((1, N), "float32")
            a8 = T.alloc_ub((1, N), "float32")
            with T.Scope("V"):
                T.copy(A[vid, 0:1, :], a0)
                T.copy(A[vid, 1:2, :], a1)
                T.copy(A[vid, 2:3, :], a2)
                T.copy(A[vid, 3:4, :], a3)
                T.copy(A[vid, 4:5, :], a4)
                T.copy(A[vid, 5:6, :], a5)
                T.copy(A[vid, 6:7, :], a6)
                T.copy(A[vid, 7:8, :], a7)
                T.copy(A[vid, 8:9, :], a8)
                T.tile.mul(a0, a0, 2.0)
                T.tile.mul(a1, a1, 2.0)
                T.tile.mul(a2, a2, 2.0)
                T.tile.mul(a3, a3, 2.0)
                T.tile.mul(a4, a4, 2.0)
                T.tile.mul(a5, a5, 2.0)
                T.tile.mul(a6, a6, 2.0)
                T.tile.mul(a7, a7, 2.0)
                T.tile.mul(a8, a8, 2.0)
                T.copy(a0, B[vid, 0:1, :])
                T.copy(a1, B[vid, 1:2, :])
                T.copy(a2, B[vid, 2:3, :])
                T.copy(a3, B[vid, 3:4, :])
                T.copy(a4, B[vid, 4:5, :])
                T.copy(a5, B[vid, 5:6, :])
                T.copy(a6, B[vid, 6:7, :])
                T.copy(a7, B[vid, 7:8, :])
                T.copy(a8, B[vid, 8:9, :])

    return main


def test_auto_sync_with_more_flags_in_flight_than_event_ids_runs_race_free():
    a = rand(2, 9, 64)
    np.testing.assert_allclose(nine_rows_in_flight(64).check(a), 2 * a, rtol=1e-6)


@tilelang.jit(out_idx=[1])
def pipelined_vec(N, tiles, stages):
    @T.prim_func
    def main(A: T.Tensor((tiles * 2, N), "float32"), B: T.Tensor((tiles * 2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                for t in T.Pipelined(tiles, num_stages=stages):
                    T.copy(A[t * 2 + vid, :], x)
                    T.tile.adds(x, x, 1.0)
                    T.copy(x, B[t * 2 + vid, :])

    return main


def test_pipelined_loop_is_correct_and_faster():
    a = rand(16, 256)
    k2, k1 = pipelined_vec(256, 8, 2), pipelined_vec(256, 8, 1)
    np.testing.assert_allclose(k2(a), a + 1, rtol=1e-6)
    assert k2.profile() < k1.profile()


@tilelang.jit(out_idx=[2], workspace_idx=[3, 4], pass_configs=CV_COMBINE)
def cube_then_vector(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32"), ws: T.Tensor((M, N), "float32"),
             ws2: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((M, K), "float16")
            b_l1 = T.alloc_L1((K, N), "float16")
            c_l0 = T.alloc_L0C((M, N), "float32")
            h = M // 2
            s = T.alloc_ub((h, N), "float32")
            for it in T.serial(2):  # unscoped: split into Cube and Vector code
                T.copy(A, a_l1)
                T.copy(B, b_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, ws)
                T.copy(ws[vid * h:vid * h + h, :], s)
                T.tile.mul(s, s, 1.5)
                T.copy(s, C[vid * h:vid * h + h, :])

    return main


def test_unscoped_cube_vector_kernel_split_with_handoffs():
    k = cube_then_vector(32, 32, 32)
    a, b = rand(32, 32, dtype=np.float16), rand(32, 32, dtype=np.float16)
    ref = (a.astype(np.float32) @ b.astype(np.float32)) * 1.5
    np.testing.assert_allclose(k.check(a, b), ref, rtol=1e-2, atol=1e-2)
    # The front end emits the body as written; the original_split pass splits it.
    assert "scope" not in k.get_ir(after_passes=False)
    src = k.get_ir()
    assert "scope C" in src and "scope V" in src and "wait_cross_flag" in src


def test_annotate_layout_is_accepted():
    from tilelang.intrinsics import make_zn_layout

    @tilelang.jit(out_idx=[1])
    def f(N):
        @T.prim_func
        def main(A: T.Tensor((16, N), "float16"), B: T.Tensor((16, N), "float16")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                l1 = T.alloc_L1((16, N), "float16")
                T.annotate_layout({l1: make_zn_layout(l1)})
                l0c = T.alloc_L0C((16, N), "float32")
                with T.Scope("C"):
                    T.copy(A, l1)
                    T.barrier_all()
                    T.copy(l1, B)

        return main

    a = rand(16, 32, dtype=np.float16)
    with pytest.raises(TilepipeError):  # L1 -> GM is not a data path: the verifier says so
        f(32)(a)


# ---- tools ----


def test_profile_trace_report_advice(tmp_path):
    k = kernels.matmul(128, 128, 128, 64, 64, 64)
    ms = k.profile()
    assert ms > 0
    assert tilelang.profiler.do_bench(k) == pytest.approx(ms)
    summary = k.summary()
    assert summary["cycles"] > 0 and summary["bound"]
    trace = k.trace(tmp_path / "t.json")
    data = json.load(open(trace))
    assert data["traceEvents"]
    pf = k.trace(tmp_path / "t.pftrace")  # Perfetto's protobuf: a Trace, packets first
    assert open(pf, "rb").read(1) == b"\x0a" and os.path.getsize(pf) < os.path.getsize(trace)
    html = k.report(tmp_path / "r.html")
    assert open(html).read().startswith("<!DOCTYPE html>")
    assert isinstance(k.advice(), str)
    src = k.get_kernel_source()
    assert src.startswith("kernel matmul(") and "gemm" in src


@tilelang.jit(out_idx=[-1])
def gated_copy(N, block):
    """Copies the first Gate[0] blocks of A: the work depends on a scalar read of GM."""

    @T.prim_func
    def main(Gate: T.Tensor((1,), "int32"), A: T.Tensor((N,), "float32"),
             B: T.Tensor((N,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            buf = T.alloc_ub((block,), "float32")
            with T.Scope("V"):
                for i in T.serial(N // block):
                    if i < Gate[0]:
                        T.copy(A[i * block], buf)
                        T.barrier_all()
                        T.copy(buf, B[i * block])
                        T.barrier_all()

    return main


def test_trace_replays_the_run_with_its_inputs(tmp_path):
    # The trace is written by re-simulating the recorded run; with the inputs left out,
    # Gate[0] read 0 and the trace showed an empty kernel (312 of 184 464 cycles for SFA pa).
    k = gated_copy(1024, 128)
    a = rand(1024)
    data = json.load(open(k.trace(tmp_path / "t.json", np.array([6], np.int32), a)))
    cycles = k.last_run[1].cycles
    assert data["otherData"]["cycles"] == pytest.approx(cycles, abs=0.01)
    assert cycles > k.cycles(np.array([0], np.int32), a)
    copies = [e for e in data["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("copy GM")]
    assert len(copies) == 2 * 6  # two vector cores, six blocks each


def test_array_like_inputs():
    class Wrapped:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None):
            return self.a

    k = kernels.vadd(64, 128, 32, 64)
    a, b = rand(64, 128), rand(64, 128)
    np.testing.assert_allclose(k(Wrapped(a), Wrapped(b)), a + b, rtol=1e-6)


def test_in_place_outputs_without_out_idx():
    @tilelang.jit
    def inplace(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((N,), "float32")
                with T.Scope("V"):
                    T.copy(A[vid, :], x)
                    T.tile.adds(x, x, 5.0)
                    T.copy(x, B[vid, :])

        return main

    a, b = rand(2, 64), np.zeros((2, 64), np.float32)
    assert inplace(64)(a, b) is None
    np.testing.assert_allclose(b, a + 5)


# ---- must-fail: located messages ----

HERE = os.path.basename(__file__)


def lineno(marker):
    for i, line in enumerate(open(__file__), 1):
        if marker in line and "lineno(" not in line:
            return i
    raise AssertionError(marker)


def expect(fn, *fragments, line_marker=None):
    with pytest.raises(TilelangError) as e:
        fn()
    text = str(e.value)
    for f in fragments:
        assert f in text, text
    if line_marker:
        assert f"{HERE}:{lineno(line_marker)}" in text, text
    return text


@tilelang.jit(out_idx=[1])
def build_time_while(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N // 2,), "float32")
            with T.Scope("V"):
                T.copy(A[vid * N // 2], x)
                step = 1
                while step < 8:  # doubles x three times, skipping step 2
                    step *= 2
                    if step == 2:
                        continue
                    T.tile.add(x, x, x)
                for k in [1, 2, 3]:
                    if k == 2:
                        break
                    T.tile.adds(x, x, 1.0)
                T.copy(x, B[vid * N // 2])

    return main


def test_while_with_a_build_time_condition_runs_at_build_time():
    a = rand(64)
    np.testing.assert_allclose(build_time_while(64)(a), a * 4 + 1, rtol=1e-6)


def test_while_on_a_run_time_value_is_rejected_at_its_line():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(2, is_npu=True) as (cid, vid):
                while cid < 3:  # MARK-while
                    pass

        return main

    expect(f, "while loop whose condition is only known at run time", "hint",
           line_marker="# MARK-while")


def test_break_in_a_device_loop_is_rejected_at_its_line():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                for i in T.serial(4):
                    break  # MARK-break

        return main

    expect(f, "break in a loop that runs on the device", line_marker="# MARK-break")


def test_element_store_is_rejected():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_L1((16, 16), "float16")
                with T.Scope("C"):
                    x[0, 0] = 1.0  # MARK-store

        return main

    expect(f, "no scalar stores", line_marker="# MARK-store")


@tilelang.jit(out_idx=[1])
def element_stores(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            y = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.tile.fill(y, 0.0)
                for i in T.serial(N // 8):
                    y[i * 8] = x[(N // 8 - 1 - i) * 8]  # one-element copy (32-byte aligned)
                y[N - 8] = 7.0  # one-element fill
                T.copy(y, B[vid, :])

    return main


def test_element_stores_of_ub_buffers():
    a = rand(2, 64)
    ref = np.zeros_like(a)
    ref[:, 0::8] = a[:, 0::8][:, ::-1]
    ref[:, 56] = 7.0
    np.testing.assert_array_equal(element_stores(64)(a), ref)


@tilelang.jit(out_idx=[-1], pass_configs=CV_COMBINE)
def alloc_vars(N, block_N):
    """The original's alloc_var test kernel (its checks, with results this time)."""
    @T.prim_func
    def main(A: T.Tensor((N,), "int32")):
        with T.Kernel(N // block_N, is_npu=True) as (cid, vid):
            a_ub = T.alloc_shared(block_N // 2, "int32")
            flag = T.alloc_var("bool", init=False)
            a = T.alloc_var("int32", init=1)
            b = T.alloc_var("int32", init=a)
            c = T.alloc_var("int32", cid * 10)  # run-time value
            T.tile.fill(a_ub, 0.0)
            a_ub[0] = b
            flag = True
            if flag:
                a = 2
                a_ub[1] = a
            else:
                a_ub[1] = a
            flag = False
            if flag:
                a_ub[2] = a
            else:
                a += 1
                a_ub[2] = a
            c += vid
            a_ub[3] = c
            for i in T.serial(2):
                d = T.alloc_var("int32", init=i)  # declared in the loop: per iteration
                d = d + 4
                a_ub[4 + i] = d
            T.copy(a_ub, A[cid * block_N + vid * block_N // 2])

    return main


def test_alloc_var_values_follow_the_stores():
    out = alloc_vars(32, 16)()
    ref = np.zeros(32, dtype=np.int64)
    for cid in range(2):
        for vid in range(2):
            base = cid * 16 + vid * 8
            ref[base:base + 6] = [1, 2, 3, cid * 10 + vid, 4, 5]
    np.testing.assert_array_equal(out, ref)


def test_alloc_var_stored_under_a_run_time_branch_outside_a_scope_or_a_float_is_an_error():
    """A store under a run-time branch makes an int variable a scalar register inside a
    scope (tests/test_let.py runs one); outside any scope, and for a float, it is an error."""
    @tilelang.jit
    def f(dtype, init, stored):
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(2, is_npu=True) as (cid, vid):
                T.alloc_L1((16, 16), "float16")  # Cube work: the kernel is split
                v = T.alloc_var(dtype, init=init)
                if cid > 0:
                    v = stored  # MARK-var
                T.printf(v)

        return main

    expect(lambda: f("int32", 0, 1), "T.alloc_var 'v' assigned under a run-time loop or if: "
           "outside T.Scope in a kernel with Cube work", "hint", line_marker="# MARK-var")
    expect(lambda: f("float32", 0.5, 1.5),
           "T.alloc_var 'v' assigned under a run-time loop or if: a float32 variable", "hint",
           line_marker="# MARK-var")


def test_alloc_var_bad_arguments():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                v = T.alloc_var("int32", 1, init=2)  # MARK-var2

        return main

    expect(f, "initial value is given twice", line_marker="# MARK-var2")


def test_non_constant_slice_extent():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((64, 8), "float32")):
            with T.Kernel(4, is_npu=True) as (cid, vid):
                x = T.alloc_ub((16, 8), "float32")
                with T.Scope("V"):
                    T.copy(A[cid * 16:cid * 32, :], x)  # MARK-extent

        return main

    # a run-time length (cid * 16: up to 48 rows) that can exceed the 16 rows of x
    expect(f, "more than the 16 elements of 'x'", "start + EXTENT",
           line_marker="# MARK-extent")


def test_ub_overflow_names_the_buffers():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                big = T.alloc_ub((256, 256), "float32")  # MARK-big
                with T.Scope("V"):
                    T.tile.fill(big, 0.0)

        return main

    text = expect(f, "UB overflow", "big")
    assert f"{HERE}:{lineno('# MARK-big')}" in text


def test_two_dimensional_grid_is_rejected():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(2, 2, is_npu=True) as (bx, by):  # MARK-grid
                pass

        return main

    expect(f, "grid", "flatten", line_marker="# MARK-grid")


def test_unknown_pass_config():
    @tilelang.jit(pass_configs={"tl.ascend.bogus": True})
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                pass

        return main

    expect(f, "unknown pass config")


def test_wrong_argument_count_and_shape():
    k = kernels.vadd(64, 128, 32, 64)
    expect(lambda: k(rand(64, 128)), "takes 2 arrays")
    # a smaller tensor than declared: a warning, and NaN where the kernel reads past it
    with pytest.warns(UserWarning, match=r"has shape \(64, 64\); the kernel declares"):
        out = k(rand(64, 64), rand(64, 64))
    assert np.isnan(out[32:]).all() and not np.isnan(out[:32]).any()


def test_undefined_name_is_located():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((8,), "float32")
                with T.Scope("V"):
                    T.tile.fill(x, nowhere)  # noqa: F821  MARK-undef

        return main

    expect(f, "'nowhere' is not defined", line_marker="MARK-undef")


def test_vector_op_in_cube_scope_is_a_verifier_error_at_its_line():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((8,), "float32")
                with T.Scope("C"):
                    T.tile.fill(x, 0.0)  # MARK-scope

        return main

    with pytest.raises(TilepipeError) as e:
        f()
    assert e.value.loc == (HERE, lineno("# MARK-scope"))


@pytest.mark.parametrize("op,args,ref", [
    ("sigmoid", (), lambda x: 1 / (1 + np.exp(-x))),
    ("leaky_relu", (0.1,), lambda x: np.where(x >= 0, x, 0.1 * x)),
    ("leaky_relu", (2.0,), lambda x: np.where(x >= 0, x, 2.0 * x)),
    ("clamp", (-0.5, 0.5, 64), lambda x: np.clip(x, -0.5, 0.5)),
    ("silu", (), lambda x: x / (1 + np.exp(-x))),
])
@pytest.mark.parametrize("in_place", [False, True])
def test_composed_tile_ops(op, args, ref, in_place):
    if in_place and op != "leaky_relu":
        pytest.skip("in place: leaky_relu's temporary")

    @tilelang.jit(out_idx=[1])
    def f(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((N,), "float32")
                y = T.alloc_ub((N,), "float32")
                with T.Scope("V"):
                    T.copy(A[vid, :], x)
                    if in_place:
                        getattr(T.tile, op)(x, x, *args)
                        T.copy(x, y)
                    else:
                        getattr(T.tile, op)(y, x, *args)
                    T.copy(y, B[vid, :])

        return main

    a = rand(2, 64)
    np.testing.assert_allclose(f(64)(a), ref(a), rtol=1e-4, atol=1e-6)


def test_unsupported_tile_op_is_named_at_its_line():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((8,), "float32")
                with T.Scope("V"):
                    T.tile.init_sort_buf(x, 8, 0)  # MARK-unsupported

        return main

    expect(f, "not supported: T.tile.init_sort_buf (no model in tilepipe", line_marker="# MARK-unsupported")


# ---- memory layout: the reserved tail, hand-synced reuse ----


@tilelang.jit(out_idx=[-1])
def three_full_ub(M, N):
    """Three [M/2, N] f32 UB buffers per vector core; at 128 x 256 they fill the physical
    UB (196608 B), 256 B past the usable size."""
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        T.func_attr({"enable_auto_sync": False})
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((M // 2, N), "float32")
            b = T.alloc_ub((M // 2, N), "float32")
            c = T.alloc_ub((M // 2, N), "float32")  # MARK-third-ub
            with T.Scope("V"):
                T.copy(A[vid * M // 2, 0], a)
                T.copy(B[vid * M // 2, 0], b)
                T.barrier_all()
                T.tile.sub(c, a, b)
                T.barrier_all()
                T.copy(c, C[vid * M // 2, 0])

    return main


def test_authors_layout_may_fill_the_physical_ub():
    k = three_full_ub(128, 256)
    a, b = rand(128, 256), rand(128, 256)
    np.testing.assert_allclose(k(a, b), a - b, rtol=1e-6)


def test_reserved_tail_off_is_the_capacity_error_at_the_allocation():
    strict = tilelang.jit(out_idx=[-1], pass_configs={"tilepipe.reserved_tail": False})(
        three_full_ub.__wrapped__)
    with pytest.raises(TilepipeError) as e:
        strict(128, 256)(rand(128, 256), rand(128, 256))
    text = str(e.value)
    assert "UB overflow on AIV" in text and "196608 bytes > 196352" in text, text
    assert f"{HERE}:{lineno('# MARK-third-ub')}" in text, text


def test_past_the_physical_ub_is_an_error_even_with_the_reserved_tail():
    with pytest.raises(TilepipeError) as e:
        three_full_ub(130, 256)(rand(130, 256), rand(130, 256))
    assert "UB overflow on AIV" in str(e.value) and "the physical size" in str(e.value)


# ---- T.Parallel: Python functions in the body, GM operands ----


@tilelang.jit(out_idx=[-1])
def parallel_calls(M, N, op_func, gm_out=False):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((M // 2, N), "float32")
            c = T.alloc_ub((M // 2, N), "float32")
            with T.Scope("V"):
                T.copy(A[vid * M // 2, 0], a)
                if gm_out:
                    # a GM source and a GM destination: staged through UB by the front end
                    for i, j in T.Parallel(M // 2, N):
                        C[vid * M // 2 + i, j] = op_func(a[i, j], B[vid * M // 2 + i, j])
                else:
                    for i, j in T.Parallel(M // 2, N):
                        c[i, j] = op_func(a[i, j], a[i, j])
                    T.copy(c, C[vid * M // 2, 0])

    return main


def _scaled_sum(x, y):
    return T.exp(x) * 0.5 + y


@pytest.mark.parametrize("op_func,ref", [
    (lambda x, y: x * y + 1.0, lambda a, b: a * a + 1.0),
    (_scaled_sum, lambda a, b: np.exp(a) * 0.5 + a),
])
def test_parallel_inlines_python_functions(op_func, ref):
    a, b = rand(16, 64), rand(16, 64)
    np.testing.assert_allclose(parallel_calls(16, 64, op_func)(a, b), ref(a, b), rtol=2e-3,
                               atol=1e-5)


def test_parallel_reads_and_writes_gm_through_ub():
    a, b = rand(16, 64), rand(16, 64)
    out = parallel_calls(16, 64, lambda x, y: x - y, gm_out=True)(a, b)
    np.testing.assert_allclose(out, a - b, rtol=1e-6)


def test_parallel_call_of_a_multi_statement_function_is_rejected():
    def two_steps(x, y):
        z = x + y
        return z

    with pytest.raises(TilelangError) as e:
        parallel_calls(16, 64, two_steps)(rand(16, 64), rand(16, 64))
    assert "which is not one expression" in str(e.value)


# ---- the original's API spellings ----


@tilelang.jit(out_idx=[-1])
def row_max(M, N, style):
    @T.prim_func
    def main(A: T.Tensor[(M, N), "float32"], B: T.Tensor[(M, 8), "float32"]):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((M // 2, N), "float32")
            m = T.alloc_ub((M // 2, 8), "float32")
            with T.Scope("V"):
                T.copy(A[vid * M // 2, 0], a)
                T.tile.fill(m, 0.0)
                if style == "keyword":
                    T.reduce_max(a, m[:, 0:1], dim=-1, clear=True)
                elif style == "positional":
                    T.reduce_max(a, m[:, 0:1], 1, True)  # axis 1 of 2 is the last
                else:  # real_shape: only the first 4 columns count
                    T.reduce_max(a, m[:, 0:1], -1, [M // 2, 4], True)
                T.copy(m, B[vid * M // 2, 0])

    return main


@pytest.mark.parametrize("style", ["keyword", "positional", "real_shape"])
def test_reduce_calling_forms(style):
    a = rand(16, 64)
    cols = 4 if style == "real_shape" else 64
    np.testing.assert_allclose(row_max(16, 64, style)(a)[:, 0], a[:, :cols].max(axis=1))


def test_reduce_axis_out_of_range_is_a_value_error():
    with pytest.raises(ValueError) as e:
        T.reduce_sum(tilelang.tvm.tir.decl_buffer((4, 8), "float32"),
                     tilelang.tvm.tir.decl_buffer((8,), "float32"), dim=2)
    assert "reduce axis 2 out of range for a 2-D source" in str(e.value)


# ---- cross-core pipelines of unscoped T.Pipelined loops ----


@tilelang.jit(out_idx=[2, 3], workspace_idx=[4, 5], pass_configs=CV_COMBINE)
def cv_pipeline(N, stages, T_=16):
    """Per tile i, a round trip between the cores: Cube S = A_i @ B -> workspace W (stage
    C1); Vector P = exp(S) -> C and, as f16, -> workspace W2 (stage V); Cube P @ B -> D
    (stage C2), with A_i's L1 tile read again there (a_l1 crosses C1 -> C2)."""
    H = T_ // 2

    @T.prim_func
    def main(A: T.Tensor((N, T_, T_), "float16"), B: T.Tensor((T_, T_), "float16"),
             C: T.Tensor((N, T_, T_), "float32"), D: T.Tensor((N, T_, T_), "float32"),
             W: T.Tensor((N, T_, T_), "float32"), W2: T.Tensor((N, T_, T_), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((T_, T_), "float16")
            b_l1 = T.alloc_L1((T_, T_), "float16")
            p_l1 = T.alloc_L1((T_, T_), "float16")
            c_l0 = T.alloc_L0C((T_, T_), "float32")
            d_l0 = T.alloc_L0C((T_, T_), "float32")
            x = T.alloc_ub((H, T_), "float32")
            xh = T.alloc_ub((H, T_), "float16")
            T.copy(B, b_l1)
            for i in T.Pipelined(N, num_stages=stages):
                T.copy(A[i, :, :], a_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, W[i, :, :])
                T.copy(W[i, vid * H, 0], x)
                T.tile.exp(x, x)
                T.copy(x, C[i, vid * H, 0])
                T.copy(x, xh)
                T.copy(xh, W2[i, vid * H, 0])
                T.copy(W2[i, :, :], p_l1)
                T.gemm_v0(p_l1, b_l1, d_l0, init=True)
                T.gemm_v0(a_l1, b_l1, d_l0)
                T.copy(d_l0, D[i, :, :])

    return main


@pytest.mark.parametrize("n,stages", [(5, 2), (4, 2), (6, 3), (3, 1)])
def test_cross_core_pipeline_values(n, stages):
    a = (rand(n, 16, 16) * 0.3).astype(np.float16)
    b = (rand(16, 16) * 0.3).astype(np.float16)
    k = cv_pipeline(n, stages)
    c, d = k(a, b)
    s = a.astype(np.float32) @ b.astype(np.float32)
    p = np.exp(s)
    np.testing.assert_allclose(c, p, rtol=1e-2, atol=1e-2)
    ref = p.astype(np.float16).astype(np.float32) @ b.astype(np.float32) + s
    np.testing.assert_allclose(d, ref, rtol=2e-2, atol=2e-2)
    k.check(a, b)  # race detection on
    src = k.get_ir(True, a, b)  # the split is the original_split pass
    assert ("i_stage" in src) == (stages > 1), src  # batches of `stages` iterations
    if stages > 1:
        assert f"a_l1: L1 f16[{stages}, 16, 16]" in src  # a version per stage


def test_cross_core_pipeline_overlaps_the_cores():
    a = (rand(8, 128, 128) * 0.1).astype(np.float16)
    b = (rand(128, 128) * 0.1).astype(np.float16)
    serial = cv_pipeline(8, 1, 128).summary(a, b)["cycles"]
    piped = cv_pipeline(8, 2, 128).summary(a, b)["cycles"]
    assert piped < serial, (piped, serial)


@tilelang.jit(out_idx=[2], workspace_idx=[3], pass_configs=CV_COMBINE)
def cv_carried(N):
    """acc (UB) carries a sum across iterations and is used in two Vector stages: the loop
    cannot be cut into stages, so it runs serially on each core (same values)."""
    @T.prim_func
    def main(A: T.Tensor((N, 16, 16), "float16"), B: T.Tensor((16, 16), "float16"),
             C: T.Tensor((16, 16), "float32"), W: T.Tensor((N, 16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((16, 16), "float16")
            b_l1 = T.alloc_L1((16, 16), "float16")
            c_l0 = T.alloc_L0C((16, 16), "float32")
            x = T.alloc_ub((8, 16), "float32")
            acc = T.alloc_ub((8, 16), "float32")
            T.copy(B, b_l1)
            T.tile.fill(acc, 0.0)
            for i in T.Pipelined(N, num_stages=2):
                T.tile.adds(acc, acc, 1.0)
                T.copy(A[i, :, :], a_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, W[i, :, :])
                T.copy(W[i, vid * 8, 0], x)
                T.tile.add(acc, acc, x)
            T.copy(acc, C[vid * 8, 0])

    return main


def test_cross_core_pipeline_falls_back_when_a_value_is_carried():
    a = (rand(3, 16, 16) * 0.3).astype(np.float16)
    b = (rand(16, 16) * 0.3).astype(np.float16)
    k = cv_carried(3)
    ref = (a.astype(np.float32) @ b.astype(np.float32)).sum(axis=0) + 3
    np.testing.assert_allclose(k(a, b), ref, rtol=1e-2, atol=1e-2)
    assert "i_stage" not in k.get_ir(True, a, b)


@tilelang.jit(out_idx=[2])
def hand_gemm_v0(M, N, K):
    """gemm_v0 among the author's own flags: the library's protocol (K chunks of 128 in two
    L0 slots, its own MTE1 <-> M flags) keeps it race-free."""
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
                T.set_flag("mte2", "mte1", 1)
                T.wait_flag("mte2", "mte1", 1)
                T.gemm_v0(a, b, c, init=True)
                T.set_flag("m", "fix", 2)
                T.wait_flag("m", "fix", 2)
                T.copy(c, C)

    return main


def test_gemm_v0_in_hand_synced_code_follows_the_librarys_protocol():
    a = (rand(32, 320) * 0.2).astype(np.float16)
    b = (rand(320, 64) * 0.2).astype(np.float16)
    k = hand_gemm_v0(32, 64, 320)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(k(a, b), ref, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(k.check(a, b), ref, rtol=1e-2, atol=1e-2)  # race-free
    src = k.get_ir()  # after the gemm_l1 pass
    assert "L0A f16[2, 32, 128]" in src and "L0B f16[2, 128, 64]" in src, src  # 2 slots, K 128
    assert src.count("gemm ") == 3  # 128 + 128 + 64


@pytest.mark.parametrize("dtype,np_dtype", [("int16", np.int16), ("uint16", np.uint16),
                                            ("uint32", np.uint32)])
def test_sixteen_and_unsigned_thirty_two_bit_integers(dtype, np_dtype):
    @tilelang.jit(out_idx=[-1])
    def k(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype),
                 C: T.Tensor((M, N), dtype)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((M // 2, N), dtype)
                b = T.alloc_ub((M // 2, N), dtype)
                with T.Scope("V"):
                    T.copy(A[vid * M // 2, 0], a)
                    T.copy(B[vid * M // 2, 0], b)
                    T.barrier_all()
                    T.tile.add(a, a, b)
                    T.barrier_all()
                    T.copy(a, C[vid * M // 2, 0])

        return main

    a = RNG.integers(0, 1000, (16, 64)).astype(np_dtype)
    b = RNG.integers(0, 1000, (16, 64)).astype(np_dtype)
    np.testing.assert_array_equal(k(16, 64)(a, b), a + b)


@pytest.mark.parametrize("shape,dtype", [((16, 16), "float16"), ((32, 64), "float32"),
                                         ((64, 16), "int16")])
def test_tile_transpose(shape, dtype):
    M, N = shape

    @tilelang.jit(out_idx=[-1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((M, N), dtype)
                b = T.alloc_ub((N, M), dtype)
                with T.Scope("V"):
                    T.copy(A, a)
                    T.barrier_all()
                    T.tile.transpose(b, a)
                    T.barrier_all()
                    T.copy(b, B)

        return main

    a = RNG.integers(-100, 100, shape).astype(dtype)
    np.testing.assert_array_equal(k()(a), a.T)


def test_tile_transpose_shape_mismatch_is_an_error():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((16, 32), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((16, 32), "float32")
                b = T.alloc_ub((16, 32), "float32")
                with T.Scope("V"):
                    T.tile.transpose(b, a)  # MARK-transpose

        return main

    with pytest.raises(TilepipeError) as e:
        f()(rand(16, 32))
    assert "expected [R, C] -> [C, R]" in str(e.value)
    assert e.value.loc == (HERE, lineno("# MARK-transpose"))


@pytest.mark.parametrize("dtype,np_dtype", [("int16", np.int16), ("int32", np.int32),
                                            ("uint16", np.uint16)])
def test_bitwise_tile_ops(dtype, np_dtype):
    @tilelang.jit(out_idx=[-1])
    def k(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype),
                 C: T.Tensor((6, M, N), dtype)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((M // 2, N), dtype)
                b = T.alloc_ub((M // 2, N), dtype)
                c = T.alloc_ub((M // 2, N), dtype)
                with T.Scope("V"):
                    T.copy(A[vid * M // 2, 0], a)
                    T.copy(B[vid * M // 2, 0], b)
                    for op, i in (("bitwise_and", 0), ("bitwise_or", 1), ("bitwise_xor", 2)):
                        getattr(T.tile, op)(c, a, b)
                        T.copy(c, C[i, vid * M // 2, 0])
                    T.tile.bitwise_not(c, a)
                    T.copy(c, C[3, vid * M // 2, 0])
                    T.tile.bitwise_lshift(c, a, 3)
                    T.copy(c, C[4, vid * M // 2, 0])
                    T.tile.bitwise_rshift(c, a, 2)
                    T.copy(c, C[5, vid * M // 2, 0])

        return main

    lo = 0 if dtype.startswith("u") else -3000
    a = RNG.integers(lo, 3000, (16, 64)).astype(np_dtype)
    b = RNG.integers(lo, 3000, (16, 64)).astype(np_dtype)
    out = k(16, 64)(a, b)
    for got, ref in zip(out, [a & b, a | b, a ^ b, ~a, a << np_dtype(3), a >> np_dtype(2)]):
        np.testing.assert_array_equal(got, ref.astype(np_dtype))


def test_parallel_bitwise_expressions():
    @tilelang.jit(out_idx=[-1])
    def k(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), "int32"), B: T.Tensor((M, N), "int32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((M // 2, N), "int32")
                b = T.alloc_ub((M // 2, N), "int32")
                with T.Scope("V"):
                    T.copy(A[vid * M // 2, 0], a)
                    for i, j in T.Parallel(M // 2, N):
                        b[i, j] = ((a[i, j] << 2) ^ a[i, j]) & ~a[i, j]
                    T.copy(b, B[vid * M // 2, 0])

        return main

    a = RNG.integers(-1000, 1000, (16, 64)).astype(np.int32)
    np.testing.assert_array_equal(k(16, 64)(a), ((a << 2) ^ a) & ~a)


def test_bitwise_ops_on_float_tiles_are_an_error():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 64), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((64,), "float32")
                with T.Scope("V"):
                    T.tile.bitwise_lshift(a, a, 1)  # MARK-shl

        return main

    with pytest.raises(TilepipeError) as e:
        f()(rand(2, 64))
    assert "bit operations take integer tiles" in str(e.value)
    assert e.value.loc == (HERE, lineno("# MARK-shl"))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int16"])
def test_gather_by_byte_offsets(dtype):
    @tilelang.jit(out_idx=[-1])
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2, N), dtype), B: T.Tensor((2, N), "uint32"),
                 C: T.Tensor((2, N), dtype)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((N,), dtype)
                b = T.alloc_ub((N,), "uint32")
                c = T.alloc_ub((N,), dtype)
                with T.Scope("V"):
                    T.copy(A[vid, :], a)
                    T.copy(B[vid, :], b)
                    T.tile.gather(c, a, b, 0)
                    T.copy(c, C[vid, :])

        return main

    size = np.dtype(dtype).itemsize
    a = RNG.integers(-100, 100, (2, 64)).astype(dtype)
    perm = np.stack([RNG.permutation(64), RNG.permutation(64)])
    out = k(64)(a, (perm * size).astype(np.uint32))
    np.testing.assert_array_equal(out, np.take_along_axis(a, perm, axis=1))


def test_shared_buffers_of_a_kernel_without_cube_work_live_in_ub():
    @tilelang.jit(out_idx=[-1], pass_configs=CV_COMBINE)
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                s = T.alloc_shared((N // 2,), "float32")  # only copied: no Cube op to feed
                T.copy(A[vid * N // 2], s)
                T.copy(s, B[vid * N // 2])

        return main

    a = rand(64)
    np.testing.assert_array_equal(k(64)(a), a)


def test_parallel_column_vector_on_a_square_loop():
    """w[j] on a square T.Parallel loop broadcasts along the columns (its length also equals
    the row count)."""
    @tilelang.jit(out_idx=[-1])
    def k(N):
        @T.prim_func
        def main(A: T.Tensor((2 * N, 2 * N), "float32"), B: T.Tensor((2 * N,), "float32"),
                 C: T.Tensor((2 * N, 2 * N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((N, 2 * N), "float32")
                b = T.alloc_ub((2 * N,), "float32")
                c = T.alloc_ub((N, 2 * N), "float32")
                with T.Scope("V"):
                    T.copy(A[vid * N, 0], a)
                    T.copy(B[0], b)
                    T.tile.fill(c, 0.0)
                    for i, j in T.Parallel(N, N):
                        c[i, j] = a[i, j + N] * b[j + N]
                    T.copy(c, C[vid * N, 0])

        return main

    a, b = rand(32, 32), rand(32)
    ref = np.zeros((32, 32), np.float32)
    ref[:, :16] = a[:, 16:] * b[16:]
    np.testing.assert_allclose(k(16)(a, b), ref, rtol=1e-6)


@tilelang.jit(out_idx=[-1])
def relu_on_fix(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), "float")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("C"):
                a = T.alloc_L1((M, K), "float16")
                b = T.alloc_L1((N, K), "float16")
                c = T.alloc_L0C((M, N), "float")
                T.copy(A, a)
                T.copy(B, b)
                T.barrier_all()
                T.gemm_v0(a, b, c, transpose_B=True, init=True)
                T.barrier_all()
                T.copy(c, C, enable_relu=True)  # marker: relu-on-fix

    return main


def test_copy_with_enable_relu_clamps_on_the_way_out_of_l0c():
    """FixPipe's ReLU (`enable_relu=True`, the lightning indexer's scores): max(0, A B^T)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    want = np.maximum(a.astype(np.float32) @ b.astype(np.float32).T, 0)
    got = relu_on_fix(32, 32, 32)(a, b)
    assert (got >= 0).all() and (got == 0).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@tilelang.jit(out_idx=[1])
def shadowed_loop_var(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            h = M // 2
            rows = h // 4
            a = T.alloc_ub((rows, N), "float32")
            with T.Scope("V"):
                for i in T.serial(4):
                    T.copy(A[vid * h + i * rows, 0], a)
                    for i in T.serial(rows):  # shadows the outer i inside its body only
                        T.tile.mul(a[i, :], a[i, :], 2.0)
                    T.copy(a, C[vid * h + i * rows, 0])  # the outer i again

    return main


def test_inner_loop_variable_is_scoped_to_its_body():
    # As in the original's TVMScript parser (opt_gdn_chunk_h.py): after an inner loop
    # reusing a name, the name is the outer loop's variable again.
    x = rand(32, 64)
    np.testing.assert_allclose(shadowed_loop_var(32, 64)(x), 2 * x, rtol=1e-6)


@tilelang.jit(out_idx=[2], workspace_idx=[3], pass_configs=CV_COMBINE)
def fragment_cast_handoff(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16"), ws: T.Tensor((M, N), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_shared((M, K), "float16")  # placed by use, as the original does
            b_l1 = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float")
            h = M // 2
            s = T.alloc_shared((h, N), "float16")
            T.copy(A, a_l1)
            T.copy(B, b_l1)
            T.gemm_v0(a_l1, b_l1, acc, init=True)
            T.copy(acc, ws)  # FixPipe's f32 -> f16 on the way out of L0C
            T.copy(ws[vid * h, 0], s)
            for i, j in T.Parallel(h, N):
                s[i, j] = s[i, j] + s[i, j]
            T.copy(s, C[vid * h, 0])

    return main


def test_unscoped_split_keeps_inferred_cube_buffers_on_the_cube():
    # matmul_add_pipeline.py: the Vector pass of the split used to place `acc` in UB, so its
    # copy out looked like a UB -> GM copy with a cast ("changes dtype f32 -> f16").
    a, b = rand(32, 32, dtype=np.float16), rand(32, 32, dtype=np.float16)
    ref = 2 * (a.astype(np.float32) @ b.astype(np.float32))
    got = fragment_cast_handoff(32, 32, 32).check(a, b)
    np.testing.assert_allclose(got.astype(np.float32), ref, rtol=1e-2, atol=5e-2)


@tilelang.jit(out_idx=[1])
def remainder_rows(N, W):
    quads = N // 4

    @T.prim_func
    def main(A: T.Tensor((N, W), "float32"), B: T.Tensor((N, W), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            row = T.alloc_ub((N, W), "float32")
            with T.Scope("V"):
                T.copy(A, row)
                for q in T.serial(quads):
                    T.tile.adds(row[q * 4:q * 4 + 4, :], row[q * 4:q * 4 + 4, :], 1.0)
                for r in T.serial(N % 4):  # no iteration when N % 4 == 0
                    T.tile.adds(row[quads * 4 + r, :], row[quads * 4 + r, :], 1.0)
                T.copy(row, B)

    return main


def test_loop_without_iterations_is_dropped_with_its_body():
    # moe_token_unpermute.py: a remainder loop of 0 trips indexes one past the tile; the
    # original's simplifier drops it, and so does the front end (no out-of-range error).
    for n in (16, 18):
        x = rand(n, 64)
        np.testing.assert_allclose(remainder_rows(n, 64)(x), x + 1, rtol=1e-6)


@tilelang.jit(out_idx=[2])
def gemv_rows(N, K):
    @T.prim_func
    def main(x: T.Tensor((K,), "float16"), A: T.Tensor((N, K), "float16"),
             y: T.Tensor((N,), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((N, K), "float16")
            x_l1 = T.alloc_L1((16, K), "float16")  # one 16-row fractal; x fills row 0
            c_l0 = T.alloc_L0C((16, N), "float")
            with T.Scope("C"):
                T.copy(x[0], x_l1)
                T.copy(A[0, 0], a_l1)
                T.barrier_all()
                T.gemm_v0(x_l1, a_l1, c_l0, transpose_B=True, init=True)
                T.barrier_all()
                T.copy(c_l0, y[0])  # row 0 of L0C

    return main


def test_a_vector_origin_fills_the_first_row_of_a_tile():
    # gemv/example_gemv_c.py: `T.copy(x[k], x_L1)` of a rank-1 tensor into a [16, K] tile
    # moves K elements into its row 0 (the original's copy takes the trailing extents).
    x = rand(64, dtype=np.float16)
    a = rand(32, 64, dtype=np.float16)
    want = a.astype(np.float32) @ x.astype(np.float32)
    np.testing.assert_allclose(gemv_rows(32, 64)(x, a).astype(np.float32), want,
                               rtol=1e-2, atol=2e-2)


def test_float32_gemm_runs_at_the_cubes_fp32_rate():
    # AscendC's Mmad takes float operands (gemv_c's float32 case); exact float32 products,
    # at cube.fp32_rate of the half-precision fractal rate.
    a, b = rand(64, 128), rand(128, 64)
    k32 = kernels.matmul(64, 64, 128, 64, 64, 64, dtype="float32")
    np.testing.assert_allclose(k32(a, b), a @ b, rtol=1e-5, atol=1e-4)
    k16 = kernels.matmul(64, 64, 128, 64, 64, 64, dtype="float16")
    assert k32.profile() > k16.profile()


def test_int8_gemm_v0_cuts_k_into_whole_int8_fractals():
    # quant_matmul.py: a [128 x 64] x [64 x 256] int8 gemm_v0 used to be cut into K chunks of
    # 16 (the staging budget counted 4 bytes per int8 element); an int8 fractal is 32 deep.
    @tilelang.jit(out_idx=[2], pass_configs=CV_COMBINE)
    def mm_i8(M, N, K):
        @T.prim_func
        def main(A: T.Tensor((M, K), "int8"), B: T.Tensor((K, N), "int8"),
                 C: T.Tensor((M, N), "int32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a_l1 = T.alloc_L1((M, K), "int8")
                b_l1 = T.alloc_L1((K, N), "int8")
                c_l0 = T.alloc_L0C((M, N), "int32")
                T.copy(A, a_l1)  # automatic mode: the front end cuts K for L0
                T.copy(B, b_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, C)

        return main

    a = RNG.integers(-128, 128, (128, 64)).astype(np.int8)
    b = RNG.integers(-128, 128, (64, 256)).astype(np.int8)
    np.testing.assert_array_equal(mm_i8(128, 256, 64)(a, b),
                                  a.astype(np.int32) @ b.astype(np.int32))


@tilelang.jit(out_idx=[1])
def scale_vector(N):
    @T.prim_func
    def main(S: T.Tensor((3,), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            v = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                a0 = S[0]
                a1 = S[vid + 1]
                for i in T.serial(N // 2):
                    v[i] = a0  # elements 1, 2, ...: 4-byte offsets, no DMA can write there
                for i in T.serial(N // 2):
                    v[N // 2 + i] = a1
                T.copy(v, B[vid, :])

    return main


def test_gm_scalar_stored_into_any_ub_element():
    # hc_split_sinkhorn.py: `x_ub[i] = alpha` with `alpha = gm[k]` (GetValue / SetValue)
    s = np.array([1.5, -2.0, 3.25], np.float32)
    got = scale_vector(16)(s)
    np.testing.assert_array_equal(got[0], [1.5] * 8 + [-2.0] * 8)
    np.testing.assert_array_equal(got[1], [1.5] * 8 + [3.25] * 8)


@tilelang.jit(out_idx=[2], workspace_idx=[3], pass_configs=CV_COMBINE)
def vector_then_cube_loops(M, N, K):
    q = K // 4

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32"), ws: T.Tensor((K, N), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            b_ub = T.alloc_ub((q, N), "float16")
            a_l1 = T.alloc_L1((M, K), "float16")
            b_l1 = T.alloc_L1((q, N), "float16")
            c_l0 = T.alloc_L0C((M, N), "float32")
            for r in T.serial(2):  # the Vector side: 2 chunks per vector core
                T.copy(B[vid * 2 * q + r * q, 0], b_ub)
                T.tile.muls(b_ub, b_ub, 2.0)
                T.copy(b_ub, ws[vid * 2 * q + r * q, 0])
            T.copy(A, a_l1)
            for k in T.serial(4):  # the Cube side: 4 chunks, not the same iterations
                T.copy(ws[k * q, 0], b_l1)
                T.gemm_v0(a_l1[:, k * q:(k + 1) * q], b_l1, c_l0, init=(k == 0))
            T.copy(c_l0, C)

    return main


def test_unscoped_handoff_per_iteration_only_for_loops_of_the_same_trip_count():
    # dequant_gemm_w4a8.py: a Vector loop of 2 and a Cube loop of 4 iterations over one
    # workspace were handed over per iteration (a deadlock); now once around both loops.
    a, b = rand(32, 64, dtype=np.float16), rand(64, 32, dtype=np.float16)
    ref = a.astype(np.float32) @ (2 * b.astype(np.float32))
    np.testing.assert_allclose(vector_then_cube_loops(32, 32, 64).check(a, b), ref,
                               rtol=1e-2, atol=5e-2)


def test_a_shared_buffer_written_by_element_stores_is_ub():
    # dequant_gemm_w4a8.py: `output_ub` (T.alloc_shared, in a kernel with Cube work) is only
    # written element by element; the scalar unit stores into UB, so it is UB, not L1.
    @tilelang.jit(out_idx=[1, 2])
    def interleave(N):
        @T.prim_func
        def main(A: T.Tensor((16, N), "float16"), B: T.Tensor((2, 2 * N), "float16"),
                 C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a_ub = T.alloc_ub((N,), "float16")
                out = T.alloc_shared((2 * N,), "float16")
                a_l1 = T.alloc_L1((16, N), "float16")
                c_l0 = T.alloc_L0C((16, 16), "float32")
                with T.Scope("V"):
                    T.copy(A[vid, :], a_ub)
                    for j in T.serial(N):
                        out[2 * j] = a_ub[j]
                        out[2 * j + 1] = a_ub[j]
                    T.copy(out, B[vid, :])
                with T.Scope("C"):  # Cube work: shared buffers default to L1
                    T.copy(A, a_l1)
                    T.barrier_all()
                    T.gemm_v0(a_l1, a_l1, c_l0, transpose_B=True, init=True)
                    T.barrier_all()
                    T.copy(c_l0, C)

        return main

    a = rand(16, 16, dtype=np.float16)
    b, _ = interleave(16)(a)
    np.testing.assert_array_equal(b, np.repeat(a[:2], 2, axis=1))


@tilelang.jit(out_idx=[3])
def scaled_rows_masked(R, N):
    @T.prim_func
    def main(A: T.Tensor((2 * R, N), "float32"), W: T.Tensor((2 * R,), "float32"),
             L: T.Tensor((1,), "int32"), B: T.Tensor((2 * R, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            s = T.alloc_ub((R, N), "float32")
            w = T.alloc_ub((R,), "float32")
            m = T.alloc_ub((R, N // 8), "uint8")
            with T.Scope("V"):
                T.copy(A[vid * R, 0], s)
                T.copy(W[vid * R], w)
                T.tile.row_expand_mul(s, s, w)  # in place (HISA's weights)
                lim = L[0]
                T.tile.compare(m, s, T.float32(lim), "LT")  # a GM int as a float scalar
                T.tile.select(s, m, s, 0.0, "VSEL_TENSOR_SCALAR_MODE")
                T.copy(s, B[vid * R, 0])

    return main


def test_row_expand_mul_in_place_and_a_gm_integer_as_a_float_scalar():
    # HISA/block_sparse_mqa_attn_expert_test.py
    a, w = rand(16, 64), rand(16)
    want = a * w[:, None]
    want = np.where(want < 1.0, want, 0.0)
    got = scaled_rows_masked(8, 64)(a, w, np.array([1], np.int32))
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ---- T.If / T.Then / T.Else frames, several contexts in one `with` ----


@tilelang.jit(out_idx=[1])
def if_frames(M, N):
    rows = M // 8

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(4, is_npu=True) as (cid, vid):
            a = T.alloc_ub((rows, N), "float32")
            with T.Scope("V"):
                row = (cid * 2 + vid) * rows
                T.copy(A[row, 0], a)
                with T.If(cid > 1), T.Then():  # two contexts: nested, T.Then inside T.If
                    T.tile.mul(a, a, 2.0)
                with T.If(vid == 0):
                    with T.Then():
                        T.tile.add(a, a, 1.0)
                    with T.Else():
                        T.tile.add(a, a, -1.0)
                T.copy(a, C[row, 0])

    return main


def test_if_then_else_frames_and_two_contexts_in_one_with():
    x = rand(64, 32)
    want = x.copy().reshape(4, 2, 8, 32)
    want[2:] *= 2
    want[:, 0] += 1
    want[:, 1] -= 1
    np.testing.assert_allclose(if_frames(64, 32)(x), want.reshape(64, 32), rtol=1e-6)


def test_if_frame_with_other_statements_is_rejected():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((2, 8), "float32")):
            with T.Kernel(2, is_npu=True) as (cid, vid):
                with T.If(cid > 0):  # MARK-if
                    T.printf(cid)

        return main

    expect(f, "must be `with T.Then():`", line_marker="# MARK-if")


# ---- T.Persistent ----


@tilelang.jit(out_idx=[0])
def persistent_owner():
    @T.prim_func
    def main(C: T.Tensor((3, 4 * 8), "int32")):
        with T.Kernel(5, is_npu=True) as (cid, vid):
            u = T.alloc_ub((1, 8), "int32")
            with T.Scope("V"):
                # 12 tiles on 5 cores in groups of 2 columns: 3 waves, the last one partial
                for bx, by in T.Persistent([3, 4], 5, cid, 2):
                    T.tile.fill(u, cid + 1)
                    T.copy(u, C[bx, by * 8])

    return main


def test_persistent_visits_tiles_in_the_originals_order():
    # tile t = w * 5 + cid is (bx, by) = ((t // 2) % 3, (t // 6) * 2 + t % 2): columns in
    # groups of two, rows inside a group; each tile written once, by core t % 5
    want = np.array([[1, 2, 2, 3], [3, 4, 4, 5], [5, 1, 1, 2]], dtype=np.int32)
    np.testing.assert_array_equal(persistent_owner()(), np.repeat(want, 8, axis=1))


# ---- shifts by a run-time amount ----


@tilelang.jit(out_idx=[0])
def runtime_shifts():
    @T.prim_func
    def main(C: T.Tensor((6, 8), "int32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            u = T.alloc_ub((1, 8), "int32")
            with T.Scope("V"):
                for s in T.serial(vid * 3, vid * 3 + 3):  # s in 0..5 over both vector cores
                    T.tile.fill(u, (1 << (s + 1)) + (-100 >> s) + ((s + 3) << s))
                    T.copy(u, C[s, 0])

    return main


def test_shift_by_a_run_time_amount():
    s = np.arange(6)
    want = (1 << (s + 1)) + (-100 >> s) + ((s + 3) << s)  # >> floors, as Python's
    np.testing.assert_array_equal(runtime_shifts()(), np.repeat(want[:, None], 8, axis=1))


def test_shift_by_an_unbounded_amount_is_rejected():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((64, 8), "float32")):
            with T.Kernel(4, is_npu=True) as (cid, vid):
                x = T.alloc_ub((16, 8), "float32")
                with T.Scope("V"):
                    for i in T.serial(cid * 40):
                        T.copy(A[(1 << i) % 4 * 16, 0], x)  # MARK-shift

        return main

    expect(f, "a shift by a run-time amount whose range", line_marker="# MARK-shift")


@tilelang.jit(out_idx=[1])
def butterfly(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            d = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A[0], d)
                for k in T.serial(N // 2):
                    a = d[k]
                    b = d[k + N // 2] * 1.0
                    d[k] = a + b  # a and b keep the values read above
                    d[k + N // 2] = a - b
                    a += b  # rebinding keeps a value too: d[k] is not changed
                    d[k + N // 2] = d[k + N // 2] + a - d[k]
                T.copy(d, B[0])

    return main


def test_element_bound_to_a_name_keeps_its_value_after_a_store():
    # `a = d[k]` is a value (the original's LetStmt), not a reference to d[k]
    x = rand(16)
    lo, hi = x[:8], x[8:]
    np.testing.assert_allclose(butterfly(16)(x), np.concatenate([lo + hi, lo - hi]), rtol=1e-6)


def test_reinterpretcast_to_a_type_not_the_destinations_is_located():
    @tilelang.jit
    def f():
        @T.prim_func
        def main(A: T.Tensor((8, 8), "int32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((8, 8), "int32")
                m = T.alloc_ub((8, 8), "uint32")
                with T.Scope("V"):
                    T.copy(A[0, 0], a)
                    T.reinterpretcast(m, a, "float")  # MARK-reinterpret

        return main

    expect(f, "T.reinterpretcast(m, a, 'float'): 'm' is uint32, not float32",
           "allocate 'm' as float32", line_marker="# MARK-reinterpret")


@tilelang.jit(out_idx=[1])
def cast_prefix():
    @T.prim_func
    def main(A: T.Tensor((1, 64), "float32"), B: T.Tensor((1, 32), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, 64), "float32")
            b = T.alloc_ub((1, 32), "float16")
            with T.Scope("V"):
                T.copy(A[0, 0], a)
                T.tile.cast(b, a, "CAST_NONE", 16)  # the first 16 elements only
                T.tile.cast(b[0, 16:32], a[0, 48:64], "CAST_NONE")
                T.copy(b, B[0, 0])

    return main


def test_cast_count_converts_a_prefix_of_the_tiles():
    x = rand(1, 64)
    want = np.concatenate([x[:, :16], x[:, 48:]], axis=1).astype(np.float16)
    np.testing.assert_array_equal(cast_prefix()(x), want)


@tilelang.jit(out_idx=[1])
def ping_pong_ids(N, tiles):
    @T.prim_func
    def main(A: T.Tensor((2 * tiles, N), "float32"), B: T.Tensor((2 * tiles, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((2, N), "float32")
            with T.Scope("V"):
                T.set_flag("mte3", "mte2", 10)
                T.set_flag("mte3", "mte2", 11)
                for t in T.serial(tiles):
                    s = t % 2
                    T.wait_flag("mte3", "mte2", s + 10)  # run-time ids past 0..7
                    T.copy(A[t * 2 + vid, :], x[s, :])
                    T.set_flag("mte2", "v", 0)
                    T.wait_flag("mte2", "v", 0)
                    T.tile.adds(x[s, :], x[s, :], 1.0)
                    T.set_flag("v", "mte3", 0)
                    T.wait_flag("v", "mte3", 0)
                    T.copy(x[s, :], B[t * 2 + vid, :])
                    T.set_flag("mte3", "mte2", s + 10)
                T.wait_flag("mte3", "mte2", 10)
                T.wait_flag("mte3", "mte2", 11)

    return main


def test_run_time_event_ids_past_the_range_are_shifted_into_it():
    # moe_token_permute.py: `T.set_flag("mte2", "mte3", nxt + 10)` with nxt in {0, 1}: every
    # id of the pipe pair lies in [10, 11], so the pipeline's event_ids pass renames the pair
    # by one shift to [0, 1] (the kernel's source keeps the author's ids).
    k = ping_pong_ids(64, 4)
    a = rand(8, 64)
    np.testing.assert_allclose(k.check(a), a + 1, rtol=1e-6)
    assert "wait_flag MTE3->MTE2 #((t % 2) + 10)" in k.get_kernel_source()
    ir = k.get_ir()
    assert "wait_flag MTE3->MTE2 #(((t % 2) + 10) - 10)" in ir
    assert "set_flag MTE3->MTE2 #0" in ir and "#10" not in ir


def test_real_shape_results_fill_the_leading_elements_of_a_row_destination():
    # reduce/example_row_reduce_max_slice_buffer.py: the max of each of 4 rows of the
    # [4, 4] corner of a [4, 8] tile lands in out[0, 0:4] of a [1, 8] destination.
    @tilelang.jit(out_idx=[1])
    def corner_max():
        @T.prim_func
        def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((1, 8), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((4, 8), "float32")
                y = T.alloc_ub((1, 8), "float32")
                with T.Scope("V"):
                    if vid == 0:
                        T.tile.fill(y, 0.0)
                        T.copy(A, x)
                        T.reduce_max(x, y, dim=-1, real_shape=[4, 4])
                        T.copy(y, B)

        return main

    a = rand(4, 8)
    got = corner_max()(a)
    np.testing.assert_array_equal(got[0, :4], a[:, :4].max(axis=1))

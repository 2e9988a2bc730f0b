"""Language values the newer TileLang-Ascend scripts use, each checked against numpy: a
T.Parallel loop index used as a value (the causal mask: arange + compare + select over the
lanes), T.fill / T.clear, scalar kernel parameters in bounds, index math and conditions,
loop trip counts read from GM scalars, and T.copy between GM and UB of another dtype."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError

RNG = np.random.default_rng(4501)


# ---- a T.Parallel index as a value ----


@tilelang.jit(out_idx=[1])
def causal_kernel(M, N, row0, dtype="float32", mask=True):
    @T.prim_func
    def main(S: T.Tensor((M, N), dtype), O: T.Tensor((M, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                s = T.alloc_ub((M, N), dtype)
                T.copy(S, s)
                if mask:
                    for i, j in T.Parallel(M, N):
                        s[i, j] = T.if_then_else(j <= row0 + i, s[i, j], -T.infinity(dtype))
                T.copy(s, O)

    return main


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_causal_mask_keeps_the_lower_triangle_and_sets_minus_inf_above(dtype):
    s = RNG.standard_normal((16, 64)).astype(dtype)
    got = causal_kernel(16, 64, 5, dtype)(s)
    keep = np.arange(64)[None, :] <= 5 + np.arange(16)[:, None]
    np.testing.assert_array_equal(got, np.where(keep, s, -np.inf).astype(dtype))


@tilelang.jit(out_idx=[1])
def index_value_kernel(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), O: T.Tensor((2 * M, N), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                a = T.alloc_ub((M, N), "float32")
                o = T.alloc_ub((M, N), "float32")
                T.copy(A, a)
                for i, j in T.Parallel(M, N):
                    o[i, j] = a[i, j] * j + (i + cid * M) * 100
                T.copy(o, O[cid * M:(cid + 1) * M, 0:N])

    return main


def test_lane_indices_are_values_in_arithmetic_with_a_runtime_offset():
    a = RNG.standard_normal((8, 32)).astype(np.float32)
    got = index_value_kernel(8, 32)(a)
    i, j = np.meshgrid(np.arange(16), np.arange(32), indexing="ij")
    np.testing.assert_allclose(got, np.tile(a, (2, 1)) * (j % 32) + i * 100, rtol=1e-6)


@tilelang.jit(out_idx=[2])
def band_kernel(M, N, lo, hi):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
             O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                a = T.alloc_ub((M, N), "float32")
                b = T.alloc_ub((M, N), "float32")
                T.copy(A, a)
                T.copy(B, b)
                for i, j in T.Parallel(M, N):
                    a[i, j] = T.if_then_else(i - j >= lo and j - i < hi, a[i, j], b[i, j])
                for i, j in T.Parallel(M, N):
                    b[i, j] = T.if_then_else(a[i, j] > 0.5, 1.0, 0.0)
                T.tile.add(a, a, b)
                T.copy(a, O)

    return main


def test_band_condition_of_and_over_lanes_and_an_element_compare_select_per_element():
    a = RNG.random((8, 64)).astype(np.float32)
    b = RNG.random((8, 64)).astype(np.float32)
    got = band_kernel(8, 64, -3, 4)(a, b)
    i, j = np.meshgrid(np.arange(8), np.arange(64), indexing="ij")
    x = np.where((i - j >= -3) & (j - i < 4), a, b)
    np.testing.assert_array_equal(got, x + (x > 0.5))


@tilelang.jit(out_idx=[1])
def column_kernel(C):
    @T.prim_func
    def main(S: T.Tensor((C,), "float32"), O: T.Tensor((C, C), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                s = T.alloc_ub((C,), "float32")
                o = T.alloc_ub((C, C), "float32")
                T.copy(S, s)
                for i in T.serial(C):
                    for j in T.Parallel(C):
                        o[i, j] = T.if_then_else(j <= i, s[j] * 2.0, 0.0)
                T.copy(o, O)

    return main


def test_one_lane_nest_compares_its_index_with_a_serial_variable():
    s = RNG.standard_normal(16).astype(np.float32)
    got = column_kernel(16)(s)
    np.testing.assert_array_equal(got, np.tril(np.repeat(s[None, :] * 2, 16, axis=0)))


@tilelang.jit(out_idx=[2])
def tail_kernel(N):
    @T.prim_func
    def main(X: T.Tensor((N,), "float16"), n: T.Tensor((1,), "int32"),
             O: T.Tensor((N,), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                x = T.alloc_ub((N,), "float16")
                T.copy(X, x)
                for i in T.Parallel(N):
                    x[i] = T.if_then_else(i < n[0], x[i], 0.0)
                T.copy(x, O)

    return main


def test_a_lane_compared_with_a_gm_element_zeroes_the_tail():
    x = RNG.standard_normal(128).astype(np.float16)
    got = tail_kernel(128)(x, np.array([77], np.int32))
    np.testing.assert_array_equal(got, np.where(np.arange(128) < 77, x, 0).astype(np.float16))


def test_causal_mask_costs_vector_instructions_not_a_scalar_loop():
    # arange and broadcast per lane, an add, a compare, a select: a few vector instructions
    # over the 8192 lanes (the hardware's CreateVecIndex / Compare / Select), far fewer
    # cycles than the 8192 scalar stores of an element loop
    extra = causal_kernel(64, 128, 0).cycles() - causal_kernel(64, 128, 0, mask=False).cycles()
    assert 0 < extra < 64 * 128 / 4


# ---- T.fill / T.clear ----


@tilelang.jit(out_idx=[1])
def fill_kernel(R, C):
    @T.prim_func
    def main(A: T.Tensor((R, C), "float32"), O: T.Tensor((R, C), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                a = T.alloc_ub((R, C), "float32")
                acc = T.alloc_ub((R, C), "float32")
                T.clear(acc)
                T.copy(A, a)
                T.tile.add(acc, acc, a)
                T.fill(a[0:R // 2, :], 2.5)
                T.tile.add(acc, acc, a)
                T.copy(acc, O)

    return main


def test_clear_zeroes_and_fill_sets_a_region():
    a = RNG.standard_normal((8, 64)).astype(np.float32)
    got = fill_kernel(8, 64)(a)
    want = a + np.concatenate([np.full((4, 64), 2.5, np.float32), a[4:]])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_clear_of_an_l0c_accumulator_names_gemm_init():
    @T.prim_func
    def main(A: T.Tensor((16, 16), "float16"), O: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("C"):
                c = T.alloc_L0C((16, 16), "float32")
                T.clear(c)
                T.copy(c, O)

    with pytest.raises(TilelangError, match=r"(?s)T.fill / T.clear of L0C.*init=True"):
        tilelang.compile(main)


# ---- scalar kernel parameters and trip counts read from GM ----


@tilelang.jit(out_idx=[2])
def varlen_kernel(B, L, D, blk):
    @T.prim_func
    def main(X: T.Tensor((B, L, D), "float32"), seqlens: T.Tensor((B,), "int32"),
             O: T.Tensor((B, D), "float32"), max_seqlen: T.int32, scale: T.float32):
        with T.Kernel(B, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                acc = T.alloc_ub((1, D), "float32")
                t = T.alloc_ub((blk, D), "float32")
                r = T.alloc_ub((1, D), "float32")
                T.clear(acc)
                n = T.min(seqlens[cid], max_seqlen)
                for k in T.serial(T.ceildiv(n, blk)):
                    T.copy(X[cid, k * blk:(k + 1) * blk, :], t)
                    T.reduce_sum(t, r, dim=0)
                    T.tile.add(acc, acc, r)
                if n > max_seqlen // 2:
                    T.tile.mul(acc, acc, scale)
                T.copy(acc, O[cid:cid + 1, :])

    return main


def varlen_reference(x, seqlens, max_seqlen, scale, blk):
    out = []
    for b, s in enumerate(seqlens):
        n = min(int(s), max_seqlen)
        rows = min(-(-n // blk) * blk, x.shape[1])
        v = x[b, :rows].sum(0)
        out.append(v * scale if n > max_seqlen // 2 else v)
    return np.stack(out)


@pytest.mark.parametrize("max_seqlen", [40, 64])
def test_trip_count_from_gm_and_scalar_parameters_follow_the_input_values(max_seqlen):
    x = RNG.standard_normal((4, 64, 32)).astype(np.float32)
    seqlens = np.array([16, 48, 0, 64], np.int32)
    got = varlen_kernel(4, 64, 32, 16)(x, seqlens, max_seqlen, 0.5)
    np.testing.assert_allclose(got, varlen_reference(x, seqlens, max_seqlen, 0.5, 16),
                               rtol=1e-5, atol=1e-5)


def test_trip_count_from_gm_changes_the_simulated_time():
    k = varlen_kernel(4, 64, 32, 16)
    x = RNG.standard_normal((4, 64, 32)).astype(np.float32)
    short = k.cycles(x, np.full(4, 16, np.int32), 64, 1.0)
    long = k.cycles(x, np.full(4, 64, np.int32), 64, 1.0)
    assert long > short


@tilelang.jit(out_idx=[2])
def serial_gm_kernel(B, L, D):
    @T.prim_func
    def main(X: T.Tensor((B, L, D), "float32"), seqlens: T.Tensor((B,), "int32"),
             O: T.Tensor((B, D), "float32")):
        with T.Kernel(B, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                acc = T.alloc_ub((1, D), "float32")
                t = T.alloc_ub((1, D), "float32")
                T.clear(acc)
                for k in T.serial(seqlens[cid]):
                    T.copy(X[cid, k:k + 1, :], t)
                    T.tile.add(acc, acc, t)
                T.copy(acc, O[cid:cid + 1, :])

    return main


def test_serial_over_a_gm_element_runs_that_many_iterations():
    x = RNG.standard_normal((3, 16, 32)).astype(np.float32)
    seqlens = np.array([3, 0, 16], np.int32)
    got = serial_gm_kernel(3, 16, 32)(x, seqlens)
    want = np.stack([x[b, :s].sum(0) for b, s in enumerate(seqlens)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@tilelang.jit(out_idx=[2])
def bounded_kernel(B, L, D, blk):
    @T.prim_func
    def main(X: T.Tensor((B, L, D), "float32"), seqlens: T.Tensor((B,), "int32"),
             O: T.Tensor((B, D), "float32")):
        with T.Kernel(B, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                acc = T.alloc_ub((1, D), "float32")
                t = T.alloc_ub((blk, D), "float32")
                r = T.alloc_ub((1, D), "float32")
                T.clear(acc)
                end = T.if_then_else(seqlens[cid] < L, seqlens[cid], L)
                for k in T.serial(T.if_then_else(cid == 0, 1, T.ceildiv(end, blk))):
                    T.copy(X[cid, k * blk:(k + 1) * blk, :], t)
                    T.reduce_sum(t, r, dim=0)
                    T.tile.add(acc, acc, r)
                T.copy(acc, O[cid:cid + 1, :])

    return main


def test_if_then_else_in_a_loop_extent():
    x = RNG.standard_normal((3, 64, 32)).astype(np.float32)
    seqlens = np.array([64, 100, 17], np.int32)
    got = bounded_kernel(3, 64, 32, 16)(x, seqlens)
    trips = [1, 4, 2]
    want = np.stack([x[b, :16 * n].sum(0) for b, n in enumerate(trips)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- T.copy between GM and UB of another dtype ----


@tilelang.jit(out_idx=[1])
def copy_cast_kernel(R, C, hand, dtype="float16"):
    h = R // 2

    @T.prim_func
    def main(A: T.Tensor((R, C), dtype), O: T.Tensor((R, C), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                a = T.alloc_ub((h, C), "float32")
                T.copy(A[vid * h, 0], a)  # an f16 tensor into an f32 tile
                if hand:
                    T.set_flag("mte2", "v", 0)
                    T.wait_flag("mte2", "v", 0)
                T.tile.mul(a, a, 3.0)
                if hand:
                    T.set_flag("v", "mte3", 0)
                    T.wait_flag("v", "mte3", 0)
                T.copy(a, O[vid * h, 0])  # and back into an f16 tensor

    return main


@pytest.mark.parametrize("hand", [False, True])
def test_copy_between_gm_and_ub_of_another_dtype_casts(hand):
    a = RNG.standard_normal((16, 64)).astype(np.float16)
    got = copy_cast_kernel(16, 64, hand)(a)
    np.testing.assert_array_equal(got, (a.astype(np.float32) * 3).astype(np.float16))


def test_copy_cast_moves_the_tensor_dtype_bytes_and_adds_two_vector_casts():
    cast = copy_cast_kernel(64, 128, False).summary()
    plain = copy_cast_kernel(64, 128, False, "float32").summary()

    def gm_bytes(s):
        return s["gm"]["hbm_bytes"] + s["gm"]["l2_bytes"]

    assert gm_bytes(cast) * 2 == gm_bytes(plain)
    # per vector core: the cast in after the copy, the cast out before the copy
    assert cast["pipes"]["V"]["instructions"] == plain["pipes"]["V"]["instructions"] + 4

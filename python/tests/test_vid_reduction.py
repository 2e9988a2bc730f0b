"""Vid reduction (developer mode, `T.Kernel(n, threads=2) as cid`; docs/python.md): each
vector core holds half of every UB buffer's rows and moves its half of the GM rows; the
values match numpy and the vector work / UB footprint per core halves. threads=1 runs one
vector core per AI core."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError

RNG = np.random.default_rng(11)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@tilelang.jit(out_idx=[1])
def exp_rows(M, N, bm, threads):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm, threads=threads, is_npu=True) as cid:
            a = T.alloc_shared((bm, N), "float32")
            T.copy(A[cid * bm, 0], a)
            T.tile.exp(a, a)
            T.copy(a, C[cid * bm, 0])

    return main


def test_threads2_halves_the_ub_tile_and_each_core_moves_its_rows():
    a = rand(128, 256)
    k = exp_rows(128, 256, 64, 2)
    np.testing.assert_allclose(k(a), np.exp(a), rtol=1e-5)
    s = k.summary(a)
    # one vector core's tile: 32 of the 64 rows (both cores running the whole tile: 64)
    assert s["buffers"]["UB"]["used_bytes"] == 32 * 256 * 4
    # every element read once (not once per vector core)
    assert s["gm"]["hbm_bytes"] == 128 * 256 * 4


def test_threads1_runs_one_vector_core_per_ai_core():
    a = rand(128, 256)
    one, two = exp_rows(128, 256, 64, 1), exp_rows(128, 256, 64, 2)
    np.testing.assert_allclose(one(a), np.exp(a), rtol=1e-5)
    s1, s2 = one.summary(a), two.summary(a)
    assert s1["buffers"]["UB"]["used_bytes"] == 64 * 256 * 4  # the whole tile, unhalved
    # the same vector instructions split over half the cores: twice the rows per exp
    assert s1["pipes"]["V"]["instructions"] * 2 == s2["pipes"]["V"]["instructions"]
    assert s1["gm"]["hbm_bytes"] == s2["gm"]["hbm_bytes"]
    assert s1["cycles"] > s2["cycles"]


@tilelang.jit(out_idx=[1], workspace_idx=[2])
def slices(M, N, bm):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32"),
             ws: T.Tensor((M // bm, bm, N), "float32")):
        with T.Kernel(M // bm, threads=2, is_npu=True) as cid:
            a = T.alloc_shared((bm, N), "float32")
            o = T.alloc_shared((bm, N), "float32")
            T.copy(A[cid * bm:(cid + 1) * bm, :], a)  # a GM slice: its rows halved
            T.copy(a, ws[cid, 0:bm, :])  # a rank-3 tensor: the UB's rows meet dimension 1
            T.copy(ws[cid, 0:bm, :], o[0:bm, :])  # a UB slice from row 0: halved too
            T.tile.add(o, o, 1.0)
            T.copy(o, C[cid * bm, 0])

    return main


def test_gm_slices_and_lower_rank_ub_take_the_vector_core_rows():
    a = rand(64, 128)
    k = slices(64, 128, 32)
    np.testing.assert_allclose(k(a), a + 1.0, rtol=1e-6)
    assert k.summary(a)["buffers"]["UB"]["used_bytes"] == 16 * 128 * 4  # 16 of 32 rows


@tilelang.jit(out_idx=[2])
def row_scale(M, N, bm):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm, threads=2, is_npu=True) as cid:
            a = T.alloc_shared((bm, N), "float32")
            s = T.alloc_shared((bm,), "float32")
            c = T.alloc_shared((bm, N), "float32")
            m = T.alloc_shared((bm,), "float32")
            T.copy(A[cid * bm, 0], a)
            T.copy(S[cid * bm], s)  # 1-D: the offset is on its only dimension
            for i, j in T.Parallel(bm, N):  # i indexes the halved rows: bm / 2 of them
                c[i, j] = a[i, j] * s[i]
            for h in range(bm):  # a row loop: bm / 2 trips
                T.tile.add(c[h, :], c[h, :], s[h])
            T.reduce_max(c, m, dim=-1)  # each core reduces its rows
            for h in range(bm):
                T.tile.sub(c[h, :], c[h, :], m[h])
            T.copy(c, C[cid * bm, 0])

    return main


def test_parallel_range_loops_and_reductions_run_over_the_core_rows():
    a, s = rand(64, 64), rand(64)
    c = a * s[:, None] + s[:, None]
    ref = c - c.max(axis=1, keepdims=True)
    k = row_scale(64, 64, 32)
    np.testing.assert_allclose(k(a, s), ref, rtol=1e-5, atol=1e-6)
    # at most a, c, one broadcast temporary and s, m at 16 of their 32 rows
    assert k.summary(a, s)["buffers"]["UB"]["used_bytes"] <= (3 * 16 * 64 + 2 * 16) * 4


@tilelang.jit(out_idx=[2])
def gather_rows(B, SKV, D, BI):
    @T.prim_func
    def main(KV: T.Tensor((SKV, D), "float32"), IDX: T.Tensor((B, BI), "int32"),
             ws: T.Tensor((B, BI, D), "float32")):
        with T.Kernel(B, threads=2, is_npu=True) as cid:
            idx = T.alloc_shared((BI,), "int32")  # halved: each core gathers BI / 2 rows
            row = T.alloc_shared((D,), "float32")  # the skip set: filled by a gather
            T.copy(IDX[cid, 0:BI], idx)
            for i in range(BI):
                T.copy(KV[idx[i], :], row)
                T.copy(row, ws[cid, i, :])  # whole buffer in a halved loop: i + vid * BI / 2

    return main


def test_gather_skip_set_keeps_its_buffer_and_offsets_by_the_loop():
    kv = rand(64, 32)
    idx = RNG.permutation(64)[:32].reshape(2, 16).astype(np.int32)
    k = gather_rows(2, 64, 32, 16)
    np.testing.assert_allclose(k(kv, idx), kv[idx], rtol=0)
    # idx halved (8 x 4 bytes, one 32-byte block), row whole (32 x 4)
    assert k.summary(kv, idx)["buffers"]["UB"]["used_bytes"] == 32 + 32 * 4


def test_a_slice_from_another_row_is_refused_at_its_line():
    @tilelang.jit(out_idx=[1])
    def bad(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=2, is_npu=True) as cid:
                a = T.alloc_shared((M, N), "float32")
                T.copy(A[0, 0], a)
                T.tile.exp(a[M // 2:M, :], a[M // 2:M, :])
                T.copy(a, C[0, 0])

        return main

    with pytest.raises(TilelangError, match="starting at row 32 .* split between the two "
                       "vector cores") as e:
        bad(64, 64)(rand(64, 64))
    assert "test_vid_reduction.py" in str(e.value)


def test_threads_with_cid_vid_or_another_count_is_refused():
    @tilelang.jit(out_idx=[1])
    def both(threads, with_vid):
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=threads, is_npu=True) as (cid, vid):
                a = T.alloc_shared((32, 64), "float32")
                T.copy(A[vid * 32, 0], a)
                T.copy(a, C[vid * 32, 0])

        return main

    with pytest.raises(TilelangError, match="binds only `as cid`"):
        both(2, True)(rand(64, 64))
    with pytest.raises(TilelangError, match="1 or 2 vector cores"):
        both(4, True)(rand(64, 64))


@tilelang.jit(out_idx=[2])
def scaled_matmul(M, N, K, threads=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads, is_npu=True) as cid:
            a_l1 = T.alloc_shared((M, K), "float16")
            b_l1 = T.alloc_shared((K, N), "float16")
            c_l0 = T.alloc_fragment((M, N), "float32")
            c_ub = T.alloc_shared((M, N), "float32")
            m = T.alloc_shared((M,), "float32")
            T.copy(A[0, 0], a_l1)
            T.copy(B[0, 0], b_l1)
            T.gemm_v0(a_l1, b_l1, c_l0, init=True)
            T.copy(c_l0, c_ub)  # L0C -> UB: tilepipe's cv_split splits the rows
            T.reduce_max(c_ub, m, dim=-1)
            for h in range(M):  # m[h]: an element of the vector core's own row
                T.tile.sub(c_ub[h, :], c_ub[h, :], m[h])
            T.copy(c_ub, C[0, 0])

    return main


def test_a_row_loop_reads_its_own_row_of_a_split_buffer_as_a_scalar():
    a = rand(32, 64).astype(np.float16)
    b = rand(64, 64).astype(np.float16)
    c = a.astype(np.float32) @ b.astype(np.float32)
    k = scaled_matmul(32, 64, 64)
    np.testing.assert_allclose(k(a, b), c - c.max(axis=1, keepdims=True), rtol=1e-3, atol=1e-2)
    k.check(a, b)  # race-free
    assert k.summary(a, b)["buffers"]["UB"]["used_bytes"] <= (16 * 64 + 16) * 4 + 64


def test_a_vector_fragment_is_refused_under_threads2():
    @tilelang.jit(out_idx=[1])
    def frag(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(1, threads=2, is_npu=True) as cid:
                a = T.alloc_fragment((M, N), "float32")
                T.copy(A[0, 0], a)
                T.tile.exp(a, a)
                T.copy(a, C[0, 0])

        return main

    with pytest.raises(TilelangError, match="T.alloc_fragment 'a' used as a UB buffer"):
        frag(64, 64)(rand(64, 64))


@tilelang.jit(out_idx=[2])
def gm_indexed(M, N, bm):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), P: T.Tensor((M // bm,), "int32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm, threads=2, is_npu=True) as cid:
            a = T.alloc_shared((bm, N), "float32")
            # an element of a GM tensor as the index: not the skip set, `a` is halved
            T.copy(A[P[cid], 0], a)
            T.copy(a, C[cid * bm, 0])

    return main


def test_a_gm_element_index_does_not_put_the_tile_in_the_skip_set():
    a = rand(64, 32)
    p = np.array([32, 0], np.int32)
    k = gm_indexed(64, 32, 32)
    np.testing.assert_allclose(k(a, p), np.concatenate([a[32:], a[:32]]), rtol=0)
    assert k.summary(a, p)["buffers"]["UB"]["used_bytes"] == 16 * 32 * 4


@tilelang.jit(out_idx=[2])
def gather_by_loop(B, D, BI):
    @T.prim_func
    def main(KV: T.Tensor((BI, B * BI, D), "float32"), IDX: T.Tensor((B, BI), "int32"),
             ws: T.Tensor((B, BI, D), "float32")):
        with T.Kernel(B, threads=2, is_npu=True) as cid:
            idx = T.alloc_shared((BI,), "int32")
            row = T.alloc_shared((D,), "float32")
            T.copy(IDX[cid, 0:BI], idx)
            for i in range(BI):
                # the loop variable and a UB element index the gather: no offset on i, as
                # the original leaves a copy with a UB load in its GM index as written
                T.copy(KV[i, idx[i], :], row)
                T.copy(row, ws[cid, i, :])

    return main


def test_a_gather_keeps_its_loop_index_unshifted():
    kv = rand(8, 16, 8)
    idx = RNG.permutation(16).reshape(2, 8).astype(np.int32)
    out = gather_by_loop(2, 8, 8)(kv, idx)
    # each core runs i in [0, 4) over its own idx half (idx[i + vid * 4]), reads KV[i, ...]
    # and writes ws row i + vid * 4
    ref = np.stack([np.stack([kv[i % 4, idx[c, i], :] for i in range(8)]) for c in range(2)])
    np.testing.assert_allclose(out, ref, rtol=0)


def test_threads1_with_a_cube_to_vector_copy_runs_the_whole_tile_on_one_vector_core():
    a = rand(32, 64).astype(np.float16)
    b = rand(64, 64).astype(np.float16)
    c = a.astype(np.float32) @ b.astype(np.float32)
    k = scaled_matmul(32, 64, 64, threads=1)
    np.testing.assert_allclose(k(a, b), c - c.max(axis=1, keepdims=True), rtol=1e-3, atol=1e-2)
    k.check(a, b)
    assert k.summary(a, b)["buffers"]["UB"]["used_bytes"] >= 32 * 64 * 4  # all 32 rows

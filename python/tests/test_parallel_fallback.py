"""T.Parallel's serial fallback for an indirect index (`a[idx[i], j]`), a T.Parallel copy of
an L0C tile to GM without a UB temporary, and T.barrier_all in unscoped code, against
numpy, with their must-fail cases."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError

RNG = np.random.default_rng(2526)


@tilelang.jit(out_idx=[3])
def gather_rows(R, C, with_row=False):
    @T.prim_func
    def main(A: T.Tensor((R, C), "float32"), B: T.Tensor((R, C), "float32"),
             IDX: T.Tensor((R,), "int32"), D: T.Tensor((R, C), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            h = R // 2
            a = T.alloc_ub((h, C), "float32")
            b = T.alloc_ub((h, C), "float32")
            idx = T.alloc_ub((h,), "int32")
            d = T.alloc_ub((h, C), "float32")
            with T.Scope("V"):
                T.copy(A[vid * h, 0], a)
                T.copy(B[vid * h, 0], b)
                T.copy(IDX[vid * h], idx)
                T.barrier_all()
                if with_row:
                    for i, j in T.Parallel(h, C):
                        d[i, j] = a[idx[i], j] + b[i, j] * 2.0
                else:
                    for i, j in T.Parallel(h, C):
                        d[i, j] = a[idx[i], j] * b[i, j]
                T.barrier_all()
                T.copy(d, D[vid * h, 0])

    return main


@pytest.mark.parametrize("with_row", [False, True])
def test_an_indirect_row_index_runs_the_row_loop_serially(with_row):
    R, C = 16, 64
    a = RNG.standard_normal((R, C)).astype(np.float32)
    b = RNG.standard_normal((R, C)).astype(np.float32)
    idx = np.concatenate([RNG.permutation(R // 2), RNG.permutation(R // 2)]).astype(np.int32)
    got = gather_rows(R, C, with_row)(a, b, idx)
    rows = np.concatenate([idx[:R // 2], idx[R // 2:] + R // 2])
    want = a[rows] + b * 2 if with_row else a[rows] * b
    np.testing.assert_allclose(got, want, rtol=1e-6)


@tilelang.jit(out_idx=[1])
def indirect_column(N):
    @T.prim_func
    def main(IDX: T.Tensor((N,), "int32"), D: T.Tensor((N,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            idx = T.alloc_ub((N,), "int32")
            a = T.alloc_ub((N,), "float32")
            d = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(IDX, idx)
                for j in T.Parallel(N):
                    d[j] = a[idx[j]]
                T.copy(d, D)

    return main


def test_an_indirect_innermost_index_is_an_error_at_the_line():
    with pytest.raises(TilelangError, match="indirect index"):
        indirect_column(64)(np.zeros(64, np.int32))


@tilelang.jit(out_idx=[-1])
def gemm_parallel_store(M, N, K):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, _):
            a = T.alloc_L1((M, K), "float16")
            b = T.alloc_L1((K, N), "float16")
            c = T.alloc_L0C((M, N), "float32")
            with T.Scope("C"):
                T.copy(A, a)
                T.copy(B, b)
                T.barrier_all()
                T.gemm_v0(a, b, c, init=True)
                T.barrier_all()
                for i, j in T.Parallel(M, N):
                    C[i, j] = c[i, j]

    return main


def test_a_parallel_store_of_an_l0c_tile_is_one_converting_copy():
    a = (RNG.standard_normal((32, 64)) * 0.3).astype(np.float16)
    b = (RNG.standard_normal((64, 32)) * 0.3).astype(np.float16)
    got = gemm_parallel_store(32, 32, 64)(a, b)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2,
                               atol=1e-2)


def test_element_stores_into_l0c_are_the_originals_ub_only_setvalue_warned():
    """grouped_gemm_bwd's `C_L0[i, j] = 0` in scope C: SetValue reaches UB only, so L0C is
    left as it was (the gemm's init then writes it); a warning at the line, no tile.fill."""

    @tilelang.jit(out_idx=[-1])
    def zero_then_gemm(M, N, K):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                 C: T.Tensor((M, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, _):
                a = T.alloc_L1((M, K), "float16")
                b = T.alloc_L1((K, N), "float16")
                c = T.alloc_L0C((M, N), "float32")
                with T.Scope("C"):
                    for i, j in T.Parallel(M, N):
                        c[i, j] = 0
                    T.copy(A, a)
                    T.copy(B, b)
                    T.barrier_all()
                    T.gemm_v0(a, b, c, init=True)
                    T.barrier_all()
                    T.copy(c, C)

        return main

    a = (RNG.standard_normal((32, 64)) * 0.3).astype(np.float16)
    b = (RNG.standard_normal((64, 32)) * 0.3).astype(np.float16)
    with pytest.warns(UserWarning, match=r"element stores into L0C buffer 'c': the original "
                      r"emits the scalar unit's SetValue, which writes UB only"):
        k = zero_then_gemm(32, 32, 64)
        got = k(a, b)
    assert "fill" not in k.get_ir()
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5,
                               atol=1e-5)


@tilelang.jit(out_idx=[1])
def unscoped_barrier(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((M // 2, N), "float32")
            s = T.alloc_ub((M // 2,), "float32")
            T.copy(A[vid * M // 2, 0], a)
            T.reduce_sum(a, s, -1)
            T.barrier_all()
            T.copy(s, B[vid * M // 2])

    return main


def test_barrier_all_in_unscoped_code_is_each_cores_own(monkeypatch):
    # The author's barrier makes the code hand-synced (docs/passes.md): the copy -> reduce
    # hand-off has no flag, which the checks on every call report; the values are the
    # program order's.
    a = RNG.standard_normal((8, 64)).astype(np.float32)
    with pytest.raises(tilelang.KernelCheckError, match="data race on 'a'"):
        unscoped_barrier(8, 64)(a)
    monkeypatch.setenv("TILEPIPE_NO_CHECK", "1")
    np.testing.assert_allclose(unscoped_barrier(8, 64)(a), a.sum(axis=1), rtol=1e-5)


def test_a_branch_in_t_parallel_runs_serially():
    """`if a[j] > 0: c[j] = a[j] else: c[j] = 0.0` in T.Parallel (the language suite's
    test_parallel_if_else_serial_fallback): the original lowers a Parallel loop it cannot
    vectorize to a serial one; each element's condition is a float compare read back."""

    @tilelang.jit(out_idx=[-1])
    def relu(N, block):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
            with T.Kernel(N // block, is_npu=True) as (cid, vid):
                h = block // 2  # each vector core its half (the race check's rule)
                a = T.alloc_ub((h,), "float32")
                c = T.alloc_ub((h,), "float32")
                with T.Scope("V"):
                    T.copy(A[cid * block + vid * h], a)
                    for j in T.Parallel(h):
                        if a[j] > 0:
                            c[j] = a[j]
                        else:
                            c[j] = 0.0
                    T.copy(c, C[cid * block + vid * h])

        return main

    a = RNG.standard_normal(256).astype(np.float32)
    np.testing.assert_array_equal(relu(256, 64).check(a), np.maximum(a, 0))

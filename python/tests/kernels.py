"""tilepipe's own Python kernels for the tests (written for this suite)."""

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def vadd(M, N, block_M, block_N, dtype="float32"):
    m_num, n_num = M // block_M, N // block_N

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, vid):
            bx, by = cid // n_num, cid % n_num
            half = block_M // 2
            a = T.alloc_ub((half, block_N), dtype)
            b = T.alloc_ub((half, block_N), dtype)
            with T.Scope("V"):
                row = bx * block_M + vid * half
                T.copy(A[row, by * block_N], a)
                T.copy(B[row, by * block_N], b)
                T.barrier_all()
                T.tile.add(a, a, b)
                T.barrier_all()
                T.copy(a, C[row, by * block_N])

    return main


@tilelang.jit(out_idx=[-1])
def double(N, dtype="float32"):
    """B = 2 * A for a [2, N] tensor, one row per vector core."""

    @T.prim_func
    def main(A: T.Tensor((2, N), dtype), B: T.Tensor((2, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), dtype)
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.tile.muls(x, x, 2.0)
                T.copy(x, B[vid, :])

    return main


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, bm, bn, bk, dtype="float16", accum="float"):
    n_num = N // bn

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel((M // bm) * n_num, is_npu=True) as (cid, _):
            bx, by = cid // n_num, cid % n_num
            a_l1 = T.alloc_L1((bm, bk), dtype)
            b_l1 = T.alloc_L1((bk, bn), dtype)
            c_l0 = T.alloc_L0C((bm, bn), accum)
            with T.Scope("C"):
                for k in T.serial(T.ceildiv(K, bk)):
                    T.copy(A[bx * bm, k * bk], a_l1)
                    T.copy(B[k * bk, by * bn], b_l1)
                    T.barrier_all()
                    T.gemm_v0(a_l1, b_l1, c_l0, init=(k == 0))
                    T.barrier_all()
                T.copy(c_l0, C[bx * bm, by * bn])

    return main


@tilelang.jit(out_idx=[1])
def unary(M, N, op, dtype="float32"):
    """One T.tile op on a [M, N] tile per vector core (automatic mode: no flags)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            h = M // 2
            x = T.alloc_ub((h, N), dtype)
            y = T.alloc_ub((h, N), dtype)
            with T.Scope("V"):
                T.copy(A[vid * h:(vid + 1) * h, :], x)
                getattr(T.tile, op)(y, x)
                T.copy(y, B[vid * h:(vid + 1) * h, :])

    return main

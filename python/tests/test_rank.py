"""Tensors of more than four dimensions (the lightning indexer's QK_RES, GDN's S): the Cube
writes tiles of a rank-5 workspace, the Vector reads rows of it back, and a region that
needs more than four strided dimensions stops at its line."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilepipeError


@tilelang.jit(out_idx=[-1])
def rank5_scores(B, G, S1, S2, D, bn):
    """O[b, 0, s1, g, s2] = 2 * Q[b, s1, g * D : (g + 1) * D] . K[b, s2, :], through the
    rank-5 workspace R, as the lightning indexer's QK_RES."""

    @T.prim_func
    def main(Q: T.Tensor((B, S1, G * D), "float16"), K: T.Tensor((B, S2, D), "float16"),
             R: T.Tensor((B, 1, S1, G, S2), "float"), O: T.Tensor((B, 1, S1, G, S2), "float")):
        with T.Kernel(B, is_npu=True) as (cid, vid):
            with T.Scope("C"):
                q_l1 = T.alloc_L1((S1, D), "float16")
                k_l1 = T.alloc_L1((bn, D), "float16")
                c_l0 = T.alloc_L0C((S1, bn), "float")
                for g in T.serial(G):
                    for n in T.serial(S2 // bn):
                        T.barrier_all()
                        T.copy(Q[cid, 0:S1, g * D:(g + 1) * D], q_l1)
                        T.copy(K[cid, n * bn:(n + 1) * bn, 0:D], k_l1)
                        T.barrier_all()
                        T.gemm_v0(q_l1, k_l1, c_l0, transpose_B=True, init=True)
                        T.barrier_all()
                        T.copy(c_l0, R[cid, 0, 0:S1, g, n * bn:(n + 1) * bn])
                        T.barrier_all()
                T.set_cross_flag("FIX", 0)
            with T.Scope("V"):
                r_ub = T.alloc_ub((G, S2), "float")
                T.wait_cross_flag(0)
                for s in T.serial(S1 // 2):
                    s1 = vid * (S1 // 2) + s
                    T.barrier_all()
                    T.copy(R[cid, 0, s1, 0:G, 0:S2], r_ub)
                    T.barrier_all()
                    T.tile.muls(r_ub, r_ub, 2.0)
                    T.barrier_all()
                    T.copy(r_ub, O[cid, 0, s1, :, :])
                    T.barrier_all()

    return main


def test_rank5_workspace_between_cube_and_vector_matches_numpy():
    B, G, S1, S2, D, bn = 2, 2, 32, 64, 32, 32
    rng = np.random.default_rng(5)
    q = rng.standard_normal((B, S1, G * D)).astype(np.float16)
    k = rng.standard_normal((B, S2, D)).astype(np.float16)
    r = np.zeros((B, 1, S1, G, S2), np.float32)
    out = rank5_scores(B, G, S1, S2, D, bn)(q, k, r)
    qg = q.astype(np.float64).reshape(B, S1, G, D)
    ref = 2 * np.einsum("bsgd,btd->bsgt", qg, k.astype(np.float64))[:, None]
    np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)


@tilelang.jit(out_idx=[-1])
def five_strided(N):
    @T.prim_func
    def main(A: T.Tensor((N, N, N, N, N), "float32"), C: T.Tensor((2, 2, 2, 2, 8), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((2, 2, 2, 2, 8), "float32")
            with T.Scope("V"):
                T.copy(A[0:2, 0:2, 0:2, 0:2, 0:8], x)
                T.barrier_all()
                T.copy(x, C[0:2, 0:2, 0:2, 0:2, 0:8])

    return main


def test_region_needing_five_strided_dimensions_stops_at_its_line():
    with pytest.raises(TilepipeError) as e:
        five_strided(16)(np.zeros((16,) * 5, np.float32))
    text = str(e.value)
    assert "needs 5 strided dimensions" in text and "at most 4" in text, text
    assert "test_rank.py:" in text, text

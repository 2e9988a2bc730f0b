"""Blocks run as the hardware runs them: an RMSNorm whose only flags are the automatic ones
inside a block, launched with as many blocks as AI cores, a few more, and one per tile."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T

ROWS = 2  # rows per AIV and tile: a tile is 2 * ROWS rows of the matrix


@tilelang.jit(out_idx=[1])
def rms_norm(M, N, blocks):
    tiles = M // (2 * ROWS)
    per_block = (tiles + blocks - 1) // blocks

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            x = T.alloc_ub((ROWS, N), "float32")
            sq = T.alloc_ub((ROWS, N), "float32")
            s = T.alloc_ub((ROWS, 1), "float32")
            with T.Scope("V"):
                for t in T.serial(per_block):
                    tile = cid + t * blocks
                    if tile < tiles:
                        row = tile * 2 * ROWS + vid * ROWS
                        T.copy(A[row:row + ROWS, :], x)
                        for i, j in T.Parallel(ROWS, N):
                            sq[i, j] = x[i, j] * x[i, j]
                        T.reduce_sum(sq, s, dim=-1)
                        for i, j in T.Parallel(ROWS, 1):
                            s[i, j] = T.rsqrt(s[i, j] * (1.0 / N) + 1e-6)
                        for i, j in T.Parallel(ROWS, N):
                            x[i, j] = x[i, j] * s[i, 0]
                        T.copy(x, B[row:row + ROWS, :])

    return main


@pytest.mark.parametrize("blocks", [24, 32, 512])
def test_flag_free_kernel_checks_clean_at_any_grid(blocks):
    a = np.random.default_rng(1).standard_normal((2048, 256)).astype(np.float32)
    ref = a / np.sqrt((a * a).mean(1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(rms_norm(2048, 256, blocks).check(a), ref, rtol=1e-4, atol=1e-5)


def test_time_follows_the_work_per_core():
    us = {b: rms_norm(2048, 4096, b).profile() * 1000 for b in (24, 32, 512)}
    # 512 tiles: at 24 blocks the busiest core runs 22 tiles, at 32 two blocks of 16 tiles.
    assert us[32] / us[24] == pytest.approx(32 / 22, rel=0.05)
    # At 512 blocks the busiest core runs the same 22 tiles as 22 blocks: the same work plus
    # what each block boundary costs (the start, and a tile no longer overlapping the next
    # one's load), never less.
    assert us[24] < us[512] < us[24] * 1.5

"""T.sync_all, AscendC's SyncAll: every core of the launch waits for all, after its own
earlier work. A kernel whose blocks each read every block's partial sum through a GM
workspace: right values, race-free past the barrier, a race without it, and the located
errors (more blocks than AI cores, its flag id taken by a kernel's own cross-core flag)."""

import json
import os

import numpy as np
import pytest

import tilelang
import tilelang.language as T

RNG = np.random.default_rng(2731)


@T.macro
def write_partial(A, WS, a, s, cid):
    """WS[cid] = the sum of A's row cid (AIV 0's part)."""
    T.copy(A[cid, 0], a)
    T.tile.fill(s, 0.0)
    T.barrier_all()
    T.reduce_sum(a, s[0, 0:1], -1)
    T.barrier_all()
    T.copy(s, WS[cid, 0])


@T.macro
def sum_partials(WS, w, acc, blocks):
    """acc = the sum of every block's partial in WS."""
    T.copy(WS, w)
    T.barrier_all()
    T.tile.fill(acc, 0.0)
    for b in T.serial(blocks):
        T.tile.add(acc, acc, w[b, :])
    T.barrier_all()


def partial_sums(blocks, N=64, barrier=True, cube=True, own_flag=None, rounds=1,
                 reuse_barrier=True):
    """Block b sums its row of A into WS[b] (AIV 0); after the barrier each block adds
    every block's partial (all of them, so A.sum()). With rounds=2 each block then writes
    that total into WS[b] again (after a barrier ordering the reads before it, unless
    reuse_barrier is off) and, past another, sums WS into OUT[b] = blocks * A.sum()."""

    barriers = int(barrier) + (0 if rounds == 1 else 1 + int(reuse_barrier))

    @tilelang.jit(out_idx=[2])
    def kernel():
        @T.prim_func
        def main(A: T.Tensor((blocks, N), "float32"), WS: T.Tensor((blocks, 8), "float32"),
                 OUT: T.Tensor((blocks, 8), "float32")):
            with T.Kernel(blocks, is_npu=True) as (cid, vid):
                a = T.alloc_ub((1, N), "float32")
                s = T.alloc_ub((1, 8), "float32")
                w = T.alloc_ub((blocks, 8), "float32")
                acc = T.alloc_ub((1, 8), "float32")
                if cube:
                    with T.Scope("C"):  # the Cube core reaches every barrier the AIVs do
                        for _ in range(barriers):
                            T.sync_all()
                        if own_flag is not None:
                            T.set_cross_flag("FIX", own_flag)
                with T.Scope("V"):
                    if own_flag is not None:
                        T.wait_cross_flag(own_flag)
                    if vid == 0:
                        write_partial(A, WS, a, s, cid)
                    if barrier:
                        T.sync_all()
                    else:
                        T.barrier_all()
                    for r in range(rounds):  # round 2: each block's total into WS, summed
                        if r == 1:
                            if reuse_barrier:
                                T.sync_all()  # every block has read WS before it is rewritten
                            if vid == 0:
                                T.copy(acc, WS[cid, 0])
                            T.sync_all()
                        if vid == 0:
                            sum_partials(WS, w, acc, blocks)
                    if vid == 0:
                        T.copy(acc, OUT[cid, 0])

        return main

    return kernel()


def test_every_block_reads_every_blocks_partial_after_the_barrier():
    a = RNG.standard_normal((8, 64)).astype(np.float32)
    ws = np.zeros((8, 8), np.float32)
    k = partial_sums(8)
    out = k.check(a, ws)  # race detection on: the reads of other AI cores' rows are ordered
    np.testing.assert_allclose(out[:, 0], np.full(8, a.sum()), rtol=1e-4)
    # an AIV-only kernel: the barrier is the AIVs' alone
    out = partial_sums(8, cube=False).check(a, np.zeros((8, 8), np.float32))
    np.testing.assert_allclose(out[:, 0], np.full(8, a.sum()), rtol=1e-4)


@tilelang.jit(out_idx=[2])
def kernel_level_barrier(blocks, N=64):
    """xattention's spelling: T.sync_all() between two scopes, at kernel level, where the
    original's C/V separation puts it into both cores' code."""

    @T.prim_func
    def main(A: T.Tensor((blocks, N), "float32"), WS: T.Tensor((blocks, 8), "float32"),
             OUT: T.Tensor((blocks, 8), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, N), "float32")
            s = T.alloc_ub((1, 8), "float32")
            w = T.alloc_ub((blocks, 8), "float32")
            acc = T.alloc_ub((1, 8), "float32")
            l1 = T.alloc_L1((16, 16), "float32")
            with T.Scope("C"):
                T.copy(A[0:16, 0:16], l1)  # Cube code: the AIC is in the launch
            with T.Scope("V"):
                if vid == 0:
                    write_partial(A, WS, a, s, cid)
            T.sync_all()
            with T.Scope("V"):
                if vid == 0:
                    sum_partials(WS, w, acc, blocks)
                    T.copy(acc, OUT[cid, 0])

    return main


def test_at_kernel_level_every_core_reaches_it_in_its_own_code():
    a = RNG.standard_normal((16, 64)).astype(np.float32)
    k = kernel_level_barrier(16)
    out = k.check(a, np.zeros((16, 8), np.float32))
    np.testing.assert_allclose(out[:, 0], np.full(16, a.sum()), rtol=1e-4)
    text = k.get_ir(after_passes=False)
    assert text.count("set_cross_flag") == 2, text  # one in each core kind's scope


def test_without_the_barrier_the_reads_of_other_blocks_are_races():
    a = RNG.standard_normal((4, 64)).astype(np.float32)
    with pytest.raises(tilelang.TilepipeError, match="race"):
        partial_sums(4, barrier=False, cube=False).check(a, np.zeros((4, 8), np.float32))


def test_barriers_in_a_row_and_a_workspace_reused_across_them():
    a = RNG.standard_normal((6, 64)).astype(np.float32)
    out = partial_sums(6, rounds=2).check(a, np.zeros((6, 8), np.float32))
    np.testing.assert_allclose(out[:, 0], np.full(6, 6 * a.sum()), rtol=1e-4)
    # without the barrier between the reads of WS and its rewrite: a race across AI cores
    with pytest.raises(tilelang.TilepipeError, match="race"):
        partial_sums(6, rounds=2, reuse_barrier=False).check(a, np.zeros((6, 8), np.float32))


def test_the_barrier_costs_at_least_the_cross_core_flag_latency():
    """Each core waits for the last arrival, then sync.cross_flag_latency for its flag."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "configs", "a3.json")) as f:
        latency = json.load(f)["sync"]["cross_flag_latency"]["value"]
    a = RNG.standard_normal((4, 64)).astype(np.float32)
    with_b = partial_sums(4, cube=False).cycles(a, np.zeros((4, 8), np.float32))
    without = partial_sums(4, barrier=False, cube=False).cycles(a, np.zeros((4, 8), np.float32))
    assert with_b - without >= latency, (with_b, without, latency)


def test_more_blocks_than_ai_cores_is_an_error_at_the_barrier():
    a = RNG.standard_normal((32, 64)).astype(np.float32)
    with pytest.raises(tilelang.TilepipeError,
                       match=r"T.sync_all waits for every block at once, and 32 blocks do not "
                             r"fit on the 24 AI cores"):
        partial_sums(32)(a, np.zeros((32, 8), np.float32))


def test_its_flag_id_used_by_the_kernel_is_an_error():
    a = RNG.standard_normal((4, 64)).astype(np.float32)
    with pytest.raises(tilelang.TilepipeError, match=r"cross-core flag #15 is also T.sync_all's"):
        partial_sums(4, own_flag=15)(a, np.zeros((4, 8), np.float32))


def test_a_core_kind_that_never_reaches_it_is_a_deadlock_naming_the_cores():
    @tilelang.jit(out_idx=[1])
    def k():
        @T.prim_func
        def main(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(2, is_npu=True) as (cid, vid):
                l1 = T.alloc_L1((8,), "float32")
                u = T.alloc_ub((8,), "float32")
                with T.Scope("C"):
                    T.copy(A, l1)
                with T.Scope("V"):
                    T.sync_all()
                    T.copy(A, u)
                    T.barrier_all()
                    T.copy(u, B)

        return main

    with pytest.raises(tilelang.TilepipeError,
                       match=r"T.sync_all \(cross-core flag #15\) waits for every core of the "
                             r"launch, and 4 of 6 arrived; never: core0.AIC, core1.AIC"):
        k()(np.ones(8, np.float32))

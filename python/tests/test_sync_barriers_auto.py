"""The author's one-pipe barriers under TL_ASCEND_AUTO_SYNC (moe_token_unpermute's
`T.pipe_barrier("v")` / `T.pipe_barrier("mte3")`): a barrier orders one pipe with itself,
no pipe with another, so the scope stays automatic and auto_sync places the flags between
pipes around it (it counted as a hand flag: no flag at all, a V -> MTE3 race). Without
automatic sync the same kernel is still a race."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T


def kernel(auto):
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, 64), "float32")
            o = T.alloc_ub((1, 64), "float16")
            with T.Scope("V"):
                for i in T.serial(4):
                    T.copy(A[i, 0], a)
                    T.tile.mul(a, a, 2.0)
                    T.tile.cast(o, a, "CAST_RINT", 64)
                    T.pipe_barrier("v")
                    T.copy(o, B[i, 0])
                    T.pipe_barrier("mte3")

    return tilelang.compile(main, out_idx=[1],
                            pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: auto})


def test_one_pipe_barriers_keep_the_scope_automatic(monkeypatch):
    monkeypatch.delenv("TILEPIPE_NO_CHECK", raising=False)
    a = np.arange(256, dtype=np.float32).reshape(4, 64)
    k = kernel(True)
    np.testing.assert_array_equal(k(a), (2 * a).astype(np.float16))
    ir = k.get_ir()
    assert "wait_flag V->MTE3" in ir and ir.count("pipe_barrier") == 2, ir


def test_the_same_kernel_without_automatic_sync_is_still_a_race(monkeypatch):
    monkeypatch.delenv("TILEPIPE_NO_CHECK", raising=False)
    with pytest.raises(tilelang.KernelCheckError) as e:
        kernel(False)(np.ones((4, 64), np.float32))
    assert "race" in e.value.kinds


def scaled_rows(auto):
    """A row scaled by a UB element the vector unit computed (`p = probs[0, i]`, a float
    element the scalar unit reads), with the author's full barrier after the loads."""

    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), P: T.Tensor((1, 8), "float16"),
             B: T.Tensor((4, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            row = T.alloc_ub((1, 64), "float32")
            probs_h = T.alloc_ub((1, 16), "float16")
            probs = T.alloc_ub((1, 16), "float32")
            with T.Scope("V"):
                T.copy(P[0, 0:8], probs_h[0, 0:8])
                T.barrier_all()
                T.tile.cast(probs, probs_h, "CAST_NONE", 16)
                for i in T.serial(4):
                    T.copy(A[i, 0], row)
                    T.barrier_all()
                    p = probs[0, i]
                    T.tile.mul(row, row, p)
                    T.copy(row, B[i, 0])

    return tilelang.compile(main, out_idx=[2],
                            pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: auto})


def test_a_scope_with_barriers_and_element_reads_stays_automatic(monkeypatch):
    """The front end made such a scope hand-synced (its own V -> S flags for the element
    read), so auto_sync placed nothing: the V -> MTE3 hand-off of `row` raced."""
    monkeypatch.delenv("TILEPIPE_NO_CHECK", raising=False)
    a = np.arange(256, dtype=np.float32).reshape(4, 64)
    p = np.array([[1, 2, 3, 4, 5, 6, 7, 8]], np.float16)
    np.testing.assert_array_equal(scaled_rows(True)(a, p), a * p[0, :4, None])
    with pytest.raises(tilelang.KernelCheckError):
        scaled_rows(False)(a, p)

"""Hand-written cross-core flags (T.set_cross_flag / T.wait_cross_flag): the waits the
cross_drains pass appends for the sets a kernel leaves pending at its end (docs/passes.md)."""

import numpy as np

import pytest

import tilelang
import tilelang.language as T
from tilelang import TilepipeError


@tilelang.jit(out_idx=[-1])
def one_flag_per_vector_core(N):
    """The Cube sets flags 0 and 1 (both reach both AIVs); AIV v waits on flag v only, as
    HISA's paged indexer does (`wait_cross_flag(FLAG_BLK0 + by)`)."""

    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("C"):
                T.set_cross_flag("FIX", 0)
                T.set_cross_flag("FIX", 1)
            with T.Scope("V"):
                x = T.alloc_ub((1, N), "float32")
                T.wait_cross_flag(vid)
                T.copy(A[vid, 0:N], x)
                T.barrier_all()
                T.tile.muls(x, x, 2.0)
                T.barrier_all()
                T.copy(x, B[vid, 0:N])

    return main


def test_each_vector_core_drains_the_cross_flags_it_left_pending():
    """Each AIV leaves the other's flag pending: the wait appended at its end names its own
    (flag 1 on AIV 0, flag 0 on AIV 1); waits on both would deadlock the second."""
    k = one_flag_per_vector_core(64)
    a = np.arange(128, dtype=np.float32).reshape(2, 64)
    np.testing.assert_array_equal(k(a), a * 2)
    assert "wait_cross_flag #1" not in k.get_ir(after_passes=False)  # the front end adds none
    text = k.get_ir(after_passes=True)
    assert text.count("wait_cross_flag #1") == 1 and text.count("wait_cross_flag #0") == 1, text


def test_cross_drains_can_be_switched_off():
    """Without the pass the credits stay set: the simulator's unmatched-flag error."""
    off = tilelang.jit(out_idx=[-1], pass_configs={"tilepipe.cross_drains": False})(
        one_flag_per_vector_core.__wrapped__)
    with pytest.raises(TilepipeError) as e:
        off(64)(np.zeros((2, 64), dtype=np.float32))
    assert "never waited on" in str(e.value), str(e.value)
    assert "--pass cross_drains" in str(e.value), str(e.value)  # the hint names the fix

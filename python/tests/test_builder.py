"""One kernel build is one Builder (tilelang/_builder.py): created per lowering, passed to the
interpreter, current while the body runs, gone after; the process keeps only the symbolic
bindings in force and the build under way (docs/python.md)."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import _builder, _core, _jit


@tilelang.jit(out_idx=[-1])
def scaled(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                x = T.alloc_ub((n,), "float32")
                T.copy(A, x)
                T.tile.leaky_relu(x, x, 0.5)  # a temporary of the front end's (in place)
                T.copy(x, B)

    return main


def test_each_build_has_its_own_builder_and_nothing_of_it_outlives_the_build(monkeypatch):
    made = []

    class Recorded(_builder.Builder):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(_jit, "Builder", Recorded)
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    for n in (32, 64):
        out = scaled(n)(a[:n])
        np.testing.assert_allclose(out, np.where(a[:n] < 0, a[:n] * 0.5, a[:n]), rtol=1e-6)
    assert len(made) == 2 and made[0] is not made[1]
    for b, n in zip(made, (32, 64)):
        assert b.ir is not None and b.block_num == 1
        assert b.names == {"x", "leaky_relu_tmp"}  # the second build's names start afresh
        assert [k[:2] for k in b.hidden] == [("leaky_relu", (n,))]
    assert _core.ctx.build is None
    assert isinstance(_core.cur(), _builder.Idle)


def test_the_process_keeps_only_the_bindings_and_the_build_under_way():
    assert sorted(vars(_core.ctx)) == ["bindings", "build"]


def test_outside_a_build_the_idle_builder_refuses_writes():
    with pytest.raises(AttributeError, match="outside a kernel build"):
        _core.cur().scope = "V"
    with pytest.raises(tilelang.TilelangError, match="outside a kernel body"):
        T.alloc_ub((8,), "float32")


def test_building_restores_the_build_it_replaced():
    outer, inner = _builder.Builder(), _builder.Builder()
    with _core.building(outer):
        with _core.building(inner):
            assert _core.cur() is inner
        assert _core.cur() is outer
    assert _core.ctx.build is None

"""A two-variable T.Parallel that the original lowers one row at a time (issue 47: small
dependent vector ops): an element indexed by one variable or none beside an element of a
rank-2 buffer makes a serial loop over the outer variable with one vector call per row, the
outer element a scalar the scalar unit reads behind the code generator's full barrier; an
element indexed by both variables everywhere (or only broadcast vectors) stays one call
over the tile. tilepipe's own lowering keeps the broadcast and one call."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T

RNG = np.random.default_rng(4747)
R, C = 16, 32


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def configs(auto, lowering):
    cfg = {"tilepipe.lowering": lowering}
    if auto:
        cfg[tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC] = True
    return cfg


def nest(form, auto, lowering="original"):
    @tilelang.jit(out_idx=[-1], pass_configs=configs(auto, lowering))
    def kernel():
        @T.prim_func
        def main(A: T.Tensor((R, C), "float32"), B: T.Tensor((R, C), "float32"),
                 V: T.Tensor((R,), "float32"), D: T.Tensor((R, C), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((R, C), "float32")
                b = T.alloc_ub((R, C), "float32")
                v = T.alloc_ub((R,), "float32")
                d = T.alloc_ub((R, C), "float32")
                with T.Scope("V"):
                    T.copy(A, a)
                    T.copy(B, b)
                    T.copy(V, v)
                    if not auto:
                        T.barrier_all()
                    if form == "row":
                        for i, j in T.Parallel(R, C):
                            d[i, j] = a[i, j] * v[i]
                    elif form == "corner":  # an element indexed by no variable
                        for i, j in T.Parallel(R, C):
                            d[i, j] = a[i, j] - b[R - 1, C - 1]
                    elif form == "whole":
                        for i, j in T.Parallel(R, C):
                            d[i, j] = a[i, j] * b[i, j] + 1.0
                    else:  # "vector": broadcasts only, no rank-2 element read
                        for i, j in T.Parallel(R, C):
                            d[i, j] = v[i] * 2.0
                    if not auto:
                        T.barrier_all()
                    T.copy(d, D)

        return main

    return kernel()


def want(form, a, b, v):
    return {"row": a * v[:, None], "corner": a - b[R - 1, C - 1], "whole": a * b + 1.0,
            "vector": np.repeat(v[:, None] * 2.0, C, axis=1)}[form]


@pytest.mark.parametrize("auto", [False, True])
@pytest.mark.parametrize("form", ["row", "corner"])
def test_an_outer_element_beside_a_tile_makes_one_call_per_row(form, auto):
    a, b, v = rand(R, C), rand(R, C), rand(R)
    k = nest(form, auto)
    np.testing.assert_allclose(k.check(a, b, v), want(form, a, b, v), rtol=1e-6)  # race-free
    ir = k.get_ir()
    assert "for i in serial(0, 16) {" in ir, ir
    body = ir[ir.index("for i in serial(0, 16) {"):]
    body = body[:body.index("}")]
    # the row's call, after the code generator's full barrier (every pipe -> S, id 7)
    assert body.count("tile.") == 1 and "d[i:+1, 0:+32]" in body, body
    assert "set_flag V->S #7" in body and "set_flag MTE2->S #7" in body, body
    # tilepipe's own lowering: one call over the tile
    t = nest(form, auto, "tilepipe")
    np.testing.assert_allclose(t(a, b, v), want(form, a, b, v), rtol=1e-6)
    assert "serial(0, 16)" not in t.get_ir(), t.get_ir()
    # each row a dependent call behind a drain of the core: at least 10 cycles (a3, 1850
    # MHz) a row more than the two calls over the tile of the same nest without the element
    w = nest("whole", auto)
    assert (k.profile(a, b, v) - w.profile(a, b, v)) * 1.85e6 > 10 * R


@pytest.mark.parametrize("form", ["whole", "vector"])
def test_a_nest_of_whole_tiles_or_broadcast_vectors_stays_one_call(form):
    a, b, v = rand(R, C), rand(R, C), rand(R)
    k = nest(form, True)
    np.testing.assert_allclose(k(a, b, v), want(form, a, b, v), rtol=1e-6)
    assert "serial(0, 16)" not in k.get_ir(), k.get_ir()


@tilelang.jit(out_idx=[-1])
def element_scalar(op):
    """A T.tile op given a buffer element as its scalar, in code with the author's flags."""

    @T.prim_func
    def main(A: T.Tensor((C,), "float32"), V: T.Tensor((R,), "float32"),
             D: T.Tensor((C,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((C,), "float32")
            v = T.alloc_ub((R,), "float32")
            d = T.alloc_ub((C,), "float32")
            with T.Scope("V"):
                T.copy(A, a)
                T.copy(V, v)
                T.barrier_all()
                T.tile.add(d, a, 1.0)
                if op == "mul":
                    T.tile.mul(d, a, v[3])
                else:
                    T.tile.fill(d, v[3])
                T.barrier_all()
                T.copy(d, D)

    return main


@pytest.mark.parametrize("op", ["mul", "fill"])
def test_the_code_generators_barrier_before_an_element_scalar_is_placed_with_the_authors_flags(op):
    a, v = rand(C), rand(R)
    k = element_scalar(op)
    np.testing.assert_allclose(k(a, v), a * v[3] if op == "mul" else np.full(C, v[3]),
                               rtol=1e-6)
    ir = k.get_ir()
    between = ir[ir.index("tile.add d"):ir.index("tile.mul" if op == "mul" else "tile.fill")]
    # Muls reads its scalar behind PipeBarrier<PIPE_ALL> (codegen); Duplicate does not
    assert ("set_flag V->S #7" in between) == (op == "mul"), between


@tilelang.jit(out_idx=[-1])
def gm_row_element(R, C):
    @T.prim_func
    def main(A: T.Tensor((R, C), "float32"), G: T.Tensor((R,), "float32"),
             D: T.Tensor((R, C), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((R, C), "float32")
            d = T.alloc_ub((R, C), "float32")
            with T.Scope("V"):
                T.copy(A, a)
                for i, j in T.Parallel(R, C):
                    d[i, j] = a[i, j] * G[i]
                T.copy(d, D)

    return main


def test_a_gm_row_element_is_staged_and_broadcast_not_read_as_a_row_scalar():
    # the original reads G[i] per row with GetValue; tilepipe's vector ops take no GM
    # scalar, so the nest keeps the staged copy and one call (docs/python.md)
    a, g = rand(R, C), rand(R)
    k = gm_row_element(R, C)
    np.testing.assert_allclose(k(a, g), a * g[:, None], rtol=1e-6)
    assert "serial(0, 16)" not in k.get_ir(), k.get_ir()

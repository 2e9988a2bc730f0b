"""T.Parallel element assignments as element code in a nest of parallel loops, vectorised by
the C++ `vectorize` pass: the front end's temporaries reused where a macro repeats a
statement, TVM's vectorizer switch leaving the pass on, a widened tile's error reported
at the author's line, row vectors on square nests, lane offsets the vid reduction moves,
and the one-element nest's operand rules."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError

RNG = np.random.default_rng(3141)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@T.macro
def triple(d, a):
    for i, j in T.Parallel(16, 32):
        d[i, j] = a[i, j] * 2.0 + a[i, j]  # a compound expression: a front-end temporary


@tilelang.jit(out_idx=[-1])
def macro_twice(pass_configs=None):
    @T.prim_func
    def main(A: T.Tensor((16, 32), "float32"), D: T.Tensor((16, 32), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((16, 32), "float32")
            d = T.alloc_ub((16, 32), "float32")
            with T.Scope("V"):
                T.copy(A, a)
                triple(d, a)
                triple(d, d)
                T.copy(d, D)

    return main


def test_a_macro_repeating_a_parallel_statement_reuses_its_temporaries():
    a = rand(16, 32)
    k = macro_twice()
    np.testing.assert_allclose(k(a), 9 * a, rtol=1e-5)
    # one temporary for the statement, allocated once, though the statement runs twice
    assert k.get_ir().count("alloc par_tmp1:") == 1


@tilelang.jit(out_idx=[-1], pass_configs={"tl.disable_vectorize": True,
                                          "tir.disable_vectorize": True})
def scale_rows(R, C):
    @T.prim_func
    def main(A: T.Tensor((R, C), "float32"), S: T.Tensor((R,), "float32"),
             D: T.Tensor((R, C), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((R, C), "float32")
            s = T.alloc_ub((R,), "float32")
            with T.Scope("V"):
                T.copy(A, a)
                T.copy(S, s)
                for i, j in T.Parallel(R, C):
                    a[i, j] = a[i, j] * s[i]
                T.copy(a, D)

    return main


def test_tvm_vectorizer_switches_leave_parallel_lowering_on():
    a, s = rand(16, 32), rand(16)
    np.testing.assert_allclose(scale_rows(16, 32)(a, s), a * s[:, None], rtol=1e-6)


@tilelang.jit(out_idx=[-1])
def misaligned(C):
    @T.prim_func
    def main(A: T.Tensor((16, C), "float32"), D: T.Tensor((16, C), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            q = T.alloc_ub((16, C), "float32")
            with T.Scope("V"):
                T.copy(A, q)
                for i in T.Parallel(16):
                    q[i, 1] = q[i, 1] + 1.0
                T.copy(q, D)

    return main


def test_a_widened_tile_off_the_alignment_is_the_authors_error_at_the_line():
    with pytest.raises(TilelangError) as e:
        misaligned(8)
    text = str(e.value)
    assert "test_parallel_nests.py:" in text and "32-byte aligned" in text, text
    assert "bug in tilepipe" not in text


@tilelang.jit(out_idx=[-2, -1])
def square_vectors(N):
    @T.prim_func
    def main(V: T.Tensor((N,), "float32"), W: T.Tensor((N,), "float32"),
             D: T.Tensor((N, N), "float32"), E: T.Tensor((N, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            v = T.alloc_ub((N,), "float32")
            w = T.alloc_ub((N,), "float32")
            d = T.alloc_ub((N, N), "float32")
            e = T.alloc_ub((N, N), "float32")
            with T.Scope("V"):
                T.copy(V, v)
                T.copy(W, w)
                for i, j in T.Parallel(N, N):
                    d[i, j] = v[i]
                    e[i, j] = w[j]
                T.copy(d, D)
                T.copy(e, E)

    return main


def test_row_and_column_vectors_broadcast_the_right_way_on_a_square_nest():
    v, w = rand(16), rand(16)
    d, e = square_vectors(16)(v, w)
    np.testing.assert_array_equal(d, np.repeat(v[:, None], 16, axis=1))
    np.testing.assert_array_equal(e, np.repeat(w[None, :], 16, axis=0))  # was transposed


@tilelang.jit(out_idx=[-1])
def vid_rows_out(M, N, bm):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(M // bm, threads=2, is_npu=True) as cid:
            a = T.alloc_shared((bm, N), "float32")
            T.copy(A[cid * bm, 0], a)
            for i, j in T.Parallel(bm, N):
                C[cid * bm + i, j] = a[i, j]

    return main


def test_a_gm_element_store_takes_the_vector_core_rows_under_vid_reduction():
    a = rand(64, 32)
    np.testing.assert_array_equal(vid_rows_out(64, 32, 32)(a), a)


@tilelang.jit(out_idx=[-1])
def one_element(op):
    @T.prim_func
    def main(A: T.Tensor((32,), "int32"), D: T.Tensor((32,), "int32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((32,), "int32")
            d = T.alloc_ub((32,), "int32")
            with T.Scope("V"):
                T.copy(A, a)
                T.copy(A, d)
                if op == "add":
                    for i in T.Parallel(1):
                        d[i] = a[i + 8] + a[16]
                else:
                    for i in T.Parallel(1):
                        d[i] = a[i] & a[i + 8]
                T.copy(d, D)

    return main


def test_a_one_element_nest_keeps_the_tile_ops_operand_rules():
    a = RNG.integers(0, 100, 32).astype(np.int32)
    add, band = one_element("add"), one_element("and")
    assert add(a)[0] == a[8] + a[16] and band(a)[0] == a[0] & a[8]
    # T.tile's rules for one-element operands: the lane-free element is the add's tile
    # operand (no scalar read), the and's second tile its scalar (read by the scalar unit)
    assert "tile.add d[0:+1], a[8:+1], a[16:+1]" in add.get_ir(), add.get_ir()
    assert "MTE2->S" not in add.get_ir() and "MTE2->S" in band.get_ir(), band.get_ir()


# tilepipe's lowering: the original's makes the T.Parallel form one call per row
# (test_parallel_rows.py), without the broadcast this is about
@tilelang.jit(out_idx=[-1], pass_configs={"tilepipe.lowering": "tilepipe"})
def pipelined_rows(M, N, bm, authors_broadcast):
    """D = A - V[:, None] by tiles of bm rows in a T.Pipelined loop: multibuffer versions v."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), V: T.Tensor((M,), "float32"),
             D: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((bm, N), "float32")
            v = T.alloc_ub((bm,), "float32")
            d = T.alloc_ub((bm, N), "float32")
            with T.Scope("V"):
                for t in T.Pipelined(M // bm, num_stages=2):
                    T.copy(A[t * bm, 0], a)
                    T.copy(V[t * bm], v)
                    if authors_broadcast:
                        T.tile.broadcast(d, v)
                        T.tile.sub(d, a, d)
                    else:
                        for i, j in T.Parallel(bm, N):
                            d[i, j] = a[i, j] - v[i]
                    T.copy(d, D[t * bm, 0])

    return main


def test_a_row_vector_keeps_its_direction_when_multibuffering_versions_it():
    # the version slot gives v[i] the shape of a row [1, bm]: the broadcast says its
    # direction (a column, one value per row) instead of leaving it to the shape
    a, v = rand(64, 32), rand(64)
    k = pipelined_rows(64, 32, 16, False)
    np.testing.assert_allclose(k(a, v), a - v[:, None], rtol=1e-6)
    assert "tile.broadcast par_bc1, v[(t % 2):+1, 0:+16], column" in k.get_ir(), k.get_ir()


def test_the_authors_broadcast_keeps_the_direction_its_shape_gave_when_versioned():
    # multibuffer versions v: the region rewriter states the direction v's own shape gave
    a, v = rand(64, 32), rand(64)
    k = pipelined_rows(64, 32, 16, True)
    np.testing.assert_allclose(k(a, v), a - v[:, None], rtol=1e-6)
    assert "tile.broadcast d[(t % 2):+1, 0:+16, 0:+32], v[(t % 2):+1, 0:+16], column" \
        in k.get_ir(), k.get_ir()

"""The per-repeat reductions (T.tile.block_reduce_* / wholereduce*) and T.tile.mul_add_dst,
composed in the front end from tile ops, against numpy models of AscendC's BlockReduce /
WholeReduce (a pairwise tree per block / repeat, rounded to the element type at every level,
a half sum saturating at +-65504) and of MulAddDst as tilepipe models it (docs/ir.md); and
their must-fail cases."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError

RNG = np.random.default_rng(2525)


def tree(x, group, op, dtype):
    """Each run of `group` elements reduced pairwise (x[2 i] op x[2 i + 1] per level)."""
    x = x.astype(dtype)
    while group > 1:
        p = x.reshape(-1, 2).astype(np.float32)
        if op == "sum":
            y = (p[:, 0] + p[:, 1]).astype(dtype)
            if dtype == np.float16:
                y = np.clip(y, -65504, 65504).astype(dtype)
        else:
            y = getattr(np, {"max": "maximum", "min": "minimum"}[op])(p[:, 0], p[:, 1])
            y = y.astype(dtype)
        x, group = y, group // 2
    return x


@tilelang.jit(out_idx=[1])
def block_kernel(op, repeat, dtype):
    per = 256 // np.dtype(dtype).itemsize
    blk = per // 8

    @T.prim_func
    def main(A: T.Tensor((repeat, per), dtype), B: T.Tensor((repeat, 8), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((repeat, per), dtype)
            b = T.alloc_ub((repeat, 8), dtype)
            with T.Scope("V"):
                T.copy(A, a)
                getattr(T.tile, f"block_reduce_{op}")(b, a, repeat, per, 1, 1, 8)
                T.copy(b, B)

    assert blk * 8 == per
    return main


@pytest.mark.parametrize("op", ["max", "min", "sum"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_block_reduce_is_a_pairwise_tree_per_32_byte_block(op, dtype):
    npd = np.dtype(dtype).type
    per = 256 // np.dtype(dtype).itemsize
    a = RNG.standard_normal((2, per)).astype(dtype)
    b = block_kernel(op, 2, dtype)(a)
    want = tree(a.reshape(-1), per // 8, op, npd).reshape(2, 8)
    np.testing.assert_array_equal(b, want)


def test_block_reduce_sum_saturates_half_partial_sums_at_65504():
    a = np.zeros((1, 128), np.float16)
    # the AscendC example: 60000 + 60000 saturates to 65504, -30000 + 100 = -29900 (-29904
    # in half), 65504 - 29904 = 35600, 35584 in half (the documentation's 35604 is the
    # unrounded value)
    a[0, :4] = [60000, 60000, -30000, 100]
    a[0, 16:18] = [65504, 65504]
    a[0, 32:34] = [-65504, -65504]
    b = block_kernel("sum", 1, "float16")(a)
    assert list(b[0, :3]) == [35584, 65504, -65504]


@tilelang.jit(out_idx=[1])
def whole_kernel(op, mask, repeat, dtype, order="ORDER_VALUE_INDEX"):
    eb = np.dtype(dtype).itemsize
    outn = repeat if op == "sum" or order == "ORDER_ONLY_VALUE" else 2 * repeat

    @T.prim_func
    def main(A: T.Tensor((1, mask * repeat), dtype), B: T.Tensor((1, outn), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, mask * repeat), dtype)
            b = T.alloc_ub((1, outn), dtype)
            with T.Scope("V"):
                T.copy(A, a)
                if op == "sum":
                    T.tile.wholereducesum(b, a, mask, repeat, 1, 1, mask * eb // 32)
                else:
                    getattr(T.tile, f"wholereduce{op}")(b, a, mask, repeat, 1, 1,
                                                        mask * eb // 32, order)
                T.copy(b, B)

    return main


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype,mask", [("float16", 64), ("float16", 128), ("float32", 64),
                                        ("float32", 16)])
def test_wholereduce_max_min_give_the_value_and_the_first_index_bits(op, dtype, mask):
    rep = 3
    a = RNG.integers(-6, 6, (1, mask * rep)).astype(dtype)  # ties: the first index
    b = whole_kernel(op, mask, rep, dtype)(a)
    g = a.reshape(rep, mask)
    arg = getattr(np, f"arg{op}")(g, axis=1)  # numpy: the first occurrence
    ib = np.uint16 if dtype == "float16" else np.uint32
    np.testing.assert_array_equal(b[0, 0::2], getattr(np, op)(g, axis=1))
    np.testing.assert_array_equal(b[0, 1::2].view(ib), arg.astype(ib))


def test_wholereduce_orders():
    a = RNG.standard_normal((1, 128)).astype(np.float32)
    iv = whole_kernel("max", 64, 2, "float32", "ORDER_INDEX_VALUE")(a)
    v = whole_kernel("max", 64, 2, "float32", "ORDER_ONLY_VALUE")(a)
    g = a.reshape(2, 64)
    np.testing.assert_array_equal(iv[0, 1::2], g.max(1))
    np.testing.assert_array_equal(iv[0, 0::2].view(np.uint32), g.argmax(1).astype(np.uint32))
    np.testing.assert_array_equal(v[0], g.max(1))


@pytest.mark.parametrize("dtype,mask", [("float16", 64), ("float16", 128), ("float32", 32)])
def test_wholereducesum_is_a_pairwise_tree_per_repeat(dtype, mask):
    a = (RNG.standard_normal((1, mask * 2)) * 100).astype(dtype)
    b = whole_kernel("sum", mask, 2, dtype)(a)
    np.testing.assert_array_equal(b[0], tree(a.reshape(-1), mask, "sum", np.dtype(dtype).type))


def test_repeat_reductions_refuse_what_they_do_not_model():
    with pytest.raises(TilelangError, match="mask 48 is not modelled"):
        whole_kernel("sum", 48, 2, "float16")
    with pytest.raises(TilelangError, match="mask 64 is not modelled"):

        @T.prim_func
        def partial(A: T.Tensor((1, 128), "float16"), B: T.Tensor((1, 8), "float16")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((1, 128), "float16")
                b = T.alloc_ub((1, 8), "float16")
                with T.Scope("V"):
                    T.copy(A, a)
                    T.tile.block_reduce_max(b, a, 1, 64, 1, 1, 8)
                    T.copy(b, B)

        tilelang.compile(partial)
    with pytest.raises(TilelangError, match="srcRepStride 8, dstRepStride 1 is not modelled"):

        @T.prim_func
        def strided(A: T.Tensor((1, 256), "float16"), B: T.Tensor((1, 4), "float16")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((1, 256), "float16")
                b = T.alloc_ub((1, 4), "float16")
                with T.Scope("V"):
                    T.copy(A, a)
                    T.tile.wholereducesum(b, a, 64, 2, 1, 1, 8)
                    T.copy(b, B)

        tilelang.compile(strided)


@tilelang.jit(out_idx=[3])
def mad_kernel(N, dtype, ddtype):
    @T.prim_func
    def main(A: T.Tensor((4, N), dtype), B: T.Tensor((4, N), dtype),
             C: T.Tensor((4, N), ddtype), D: T.Tensor((4, N), ddtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((4, N), dtype)
            b = T.alloc_ub((4, N), dtype)
            c = T.alloc_ub((4, N), ddtype)
            with T.Scope("V"):
                T.copy(A, a)
                T.copy(B, b)
                T.copy(C, c)
                T.tile.mul_add_dst(c, a, b)
                T.copy(c, D)

    return main


@pytest.mark.parametrize("dtype,ddtype", [("float32", "float32"), ("float16", "float16"),
                                          ("float16", "float32")])
def test_mul_add_dst_computes_in_float32_and_rounds_to_the_destination(dtype, ddtype):
    a, b = (RNG.standard_normal((4, 128)).astype(dtype) for _ in range(2))
    c = RNG.standard_normal((4, 128)).astype(ddtype)
    d = mad_kernel(128, dtype, ddtype)(a, b, c)
    prod = (a.astype(np.float32) * b.astype(np.float32)).astype(np.float32)
    want = (prod + c.astype(np.float32)).astype(np.float32).astype(ddtype)
    np.testing.assert_array_equal(d, want)


def test_mul_add_dst_refuses_a_float_product_into_half():
    @T.prim_func
    def bad(A: T.Tensor((4, 128), "float32"), C: T.Tensor((4, 128), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((4, 128), "float32")
            c = T.alloc_ub((4, 128), "float16")
            with T.Scope("V"):
                T.copy(A, a)
                T.copy(C, c)
                T.tile.mul_add_dst(c, a, a)
                T.copy(c, C)

    with pytest.raises(TilelangError, match="is not modelled"):
        tilelang.compile(bad)


def test_reduce_on_declared_buffers_returns_the_original_call():
    tir = tilelang.tvm.tir
    x = tir.decl_buffer((4, 8), "float32")
    y = tir.decl_buffer((1, 8), "float32")
    call = T.reduce_sum(x, y, dim=-1, real_shape=[4, 4])
    assert isinstance(call, tir.Call)
    assert call.op.same_as(tir.op.Op.get("tl.ascend_reduce"))
    assert call.args[0].extents == [4, 4]

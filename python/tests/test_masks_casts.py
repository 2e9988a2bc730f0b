"""Bit-packed compare / select masks (one bit per lane, as the original's T.tile.compare
writes and T.tile.select reads them), the cast's rounding modes, and the row-expand / brcb
experiment ops, through the front end against numpy, with their must-fail cases."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError

RNG = np.random.default_rng(2525)


def pack(mask):
    """numpy bool [R, C] -> uint8 [R, C / 8], lane 8 j + k in bit k of byte j."""
    return np.packbits(mask.astype(np.uint8), axis=-1, bitorder="little")


@tilelang.jit(out_idx=[2])
def compare_kernel(R, C, mode, mdtype, scalar=None):
    @T.prim_func
    def main(A: T.Tensor((R, C), "float32"), B: T.Tensor((R, C), "float32"),
             M: T.Tensor((R, C // 8), mdtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((R // 2, C), "float32")
            b = T.alloc_ub((R // 2, C), "float32")
            m = T.alloc_ub((R // 2, C // 8), mdtype)
            with T.Scope("V"):
                T.copy(A[vid * R // 2, 0], a)
                T.copy(B[vid * R // 2, 0], b)
                if scalar is None:
                    T.tile.compare(m, a, b, mode)
                else:
                    T.tile.compare(m, a, scalar, mode)
                T.copy(m, M[vid * R // 2, 0])

    return main


@pytest.mark.parametrize("mdtype", ["uint8", "int8"])
@pytest.mark.parametrize("mode,fn", [("LT", np.less), ("GE", np.greater_equal),
                                     ("EQ", np.equal)])
def test_compare_writes_one_bit_per_lane(mdtype, mode, fn):
    a = RNG.integers(-3, 3, (8, 128)).astype(np.float32)
    b = RNG.integers(-3, 3, (8, 128)).astype(np.float32)
    got = compare_kernel(8, 128, mode, mdtype)(a, b)
    np.testing.assert_array_equal(got.view(np.uint8), pack(fn(a, b)))


def test_compare_with_a_scalar_writes_bits():
    a = RNG.standard_normal((8, 64)).astype(np.float32)
    got = compare_kernel(8, 64, "GT", "uint8", 0.25)(a, a)
    np.testing.assert_array_equal(got, pack(a > 0.25))


@tilelang.jit(out_idx=[3])
def select_kernel(R, C, scalar=None):
    @T.prim_func
    def main(A: T.Tensor((R, C), "float16"), B: T.Tensor((R, C), "float16"),
             M: T.Tensor((R, C // 8), "uint8"), D: T.Tensor((R, C), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((R // 2, C), "float16")
            b = T.alloc_ub((R // 2, C), "float16")
            d = T.alloc_ub((R // 2, C), "float16")
            m = T.alloc_ub((R // 2, C // 8), "uint8")
            with T.Scope("V"):
                T.copy(A[vid * R // 2, 0], a)
                T.copy(B[vid * R // 2, 0], b)
                T.copy(M[vid * R // 2, 0], m)
                if scalar is None:
                    T.tile.select(d, m, a, b, "VSEL_TENSOR_TENSOR_MODE")
                else:
                    T.tile.select(d, m, a, scalar, "VSEL_TENSOR_SCALAR_MODE")
                T.copy(d, D[vid * R // 2, 0])

    return main


def test_select_reads_a_packed_mask_from_gm():
    a = RNG.standard_normal((4, 256)).astype(np.float16)
    b = RNG.standard_normal((4, 256)).astype(np.float16)
    bits = RNG.integers(0, 2, (4, 256)).astype(bool)
    np.testing.assert_array_equal(select_kernel(4, 256)(a, b, pack(bits)), np.where(bits, a, b))
    np.testing.assert_array_equal(
        select_kernel(4, 256, 1.0)(a, b, pack(bits)), np.where(bits, a, np.float16(1.0)))


@tilelang.jit(out_idx=[1])
def mask_size_kernel(nbytes):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), M: T.Tensor((nbytes,), "uint8")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((64,), "float32")
            m = T.alloc_ub((nbytes,), "uint8")
            with T.Scope("V"):
                T.copy(A, a)
                T.tile.compare(m, a, 0.0, "GT")
                T.copy(m, M)

    return main


def test_a_larger_mask_buffer_gets_the_leading_bytes():
    a = RNG.standard_normal(64).astype(np.float32)
    got = mask_size_kernel(32)(a)
    np.testing.assert_array_equal(got[:8], pack(a > 0))


def test_a_mask_too_small_for_the_lanes_is_an_error_at_the_line():
    with pytest.raises(TilelangError, match="bit mask m has 4 bytes for 64 lanes"):
        mask_size_kernel(4)(np.zeros(64, np.float32))


@tilelang.jit(out_idx=[1])
def cast_kernel(N, src, dst, mode, via_copy=False):
    @T.prim_func
    def main(A: T.Tensor((2, N), src), B: T.Tensor((2, N), dst)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), src)
            y = T.alloc_ub((N,), dst)
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                if via_copy:
                    T.copy(x, y)
                else:
                    T.tile.cast(y, x, mode, N)
                T.copy(y, B[vid, :])

    return main


def test_cast_f32_to_f16_rounds():
    a = (np.random.default_rng(0).standard_normal((2, 128)) * 100).astype(np.float32)
    np.testing.assert_array_equal(cast_kernel(128, "float32", "float16", "CAST_RINT")(a),
                                  a.astype(np.float16))


HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.7, -3.7] * 8, np.float32).reshape(2, 32)


@pytest.mark.parametrize("mode,fn", [
    ("CAST_RINT", np.rint), ("CAST_NONE", np.rint), ("CAST_FLOOR", np.floor),
    ("CAST_CEIL", np.ceil), ("CAST_TRUNC", np.trunc),
    ("CAST_ROUND", lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5))])
def test_float_to_int_cast_rounds_by_its_mode(mode, fn):
    got = cast_kernel(32, "float32", "int32", mode)(HALVES)
    np.testing.assert_array_equal(got, fn(HALVES).astype(np.int32))


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float16", "int16"),
                                     ("float16", "int8")])
def test_a_converting_ub_copy_rounds_to_nearest_even(src, dst):
    a = HALVES.astype(src)
    got = cast_kernel(32, src, dst, None, via_copy=True)(a)
    np.testing.assert_array_equal(got, np.rint(a.astype(np.float64)).astype(dst))


def test_a_float_cast_into_its_own_type_rounds_to_integral_floats():
    got = cast_kernel(32, "float32", "float32", "CAST_FLOOR")(HALVES)
    np.testing.assert_array_equal(got, np.floor(HALVES))


def test_a_narrowing_float_cast_in_another_mode_is_an_error():
    with pytest.raises(TilelangError, match="f32 -> f16 with CAST_FLOOR is not modelled"):
        cast_kernel(32, "float32", "float16", "CAST_FLOOR")(HALVES)


@tilelang.jit(out_idx=[2])
def row_expand_kernel(R, C, kind, dtype, in_place=False):
    op = getattr(T.tile, f"row_expand_{kind}_experiment")
    per = 32 // (2 if dtype == "float16" else 4)

    @T.prim_func
    def main(A: T.Tensor((R, C), dtype), S: T.Tensor((R,), dtype), D: T.Tensor((R, C), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((R // 2, C), dtype)
            s = T.alloc_ub((R // 2,), dtype)
            t = T.alloc_ub((R // 2, per), dtype)
            d = T.alloc_ub((R // 2, C), dtype)
            with T.Scope("V"):
                T.copy(A[vid * R // 2, 0], a)
                T.copy(S[vid * R // 2], s)
                if in_place:
                    op(a, a, s, t)
                    T.copy(a, D[vid * R // 2, 0])
                else:
                    op(d, a, s, t)
                    T.copy(d, D[vid * R // 2, 0])

    return main


@pytest.mark.parametrize("kind,fn", [("mul", np.multiply), ("sub", np.subtract),
                                     ("div", np.divide)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("in_place", [False, True])
def test_row_expand_experiments_apply_one_value_per_row(kind, fn, dtype, in_place):
    a = RNG.standard_normal((16, 64)).astype(dtype)
    s = (RNG.random(16) + 0.5).astype(dtype)
    got = row_expand_kernel(16, 64, kind, dtype, in_place)(a, s)
    want = fn(a.astype(np.float32), s.astype(np.float32)[:, None]).astype(dtype)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3)


@tilelang.jit(out_idx=[2])
def row_expand_brcb_kernel(R, C, kind):
    """xattention's spelling: a per-row statistic [1, R, 1] broadcast by brcb into one
    32-byte block per row ([R, 8] f32), then row_expand without tmp on a [1, R, C] slice of a
    3-D tile, in place."""
    op = getattr(T.tile, f"row_expand_{kind}_experiment")

    @T.prim_func
    def main(A: T.Tensor((R, C), "float32"), S: T.Tensor((R,), "float32"),
             D: T.Tensor((R, C), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((2, R, C), "float32")
            s = T.alloc_ub((1, R, 1), "float32")
            b = T.alloc_ub((R, 8), "float32")
            with T.Scope("V"):
                if vid == 0:
                    T.copy(A, a[1, :, :])
                    T.copy(S, s[0, :, 0])
                    T.set_flag("mte2", "v", 0)
                    T.wait_flag("mte2", "v", 0)
                    T.tile.brcb_experiment(b, s, R // 8, 1, 8)
                    T.pipe_barrier("v")
                    op(a[1, :, :], a[1, :, :], b)
                    T.set_flag("v", "mte3", 0)
                    T.wait_flag("v", "mte3", 0)
                    T.copy(a[1, :, :], D)

    return main


@pytest.mark.parametrize("kind,fn", [("mul", np.multiply), ("sub", np.subtract)])
def test_row_expand_of_a_brcb_block_per_row_on_a_3d_tile(kind, fn):
    a = RNG.standard_normal((16, 64)).astype(np.float32)
    s = (RNG.random(16) + 0.5).astype(np.float32)
    got = row_expand_brcb_kernel(16, 64, kind)(a, s)
    np.testing.assert_allclose(got, fn(a, s[:, None]), rtol=1e-6)


@tilelang.jit(out_idx=[1])
def brcb_kernel(M, dtype, blk=1, rep_stride=8):
    per = 32 // (2 if dtype == "float16" else 4)

    @T.prim_func
    def main(A: T.Tensor((M,), dtype), C: T.Tensor((M, per), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((M,), dtype)
            c = T.alloc_ub((M, per), dtype)
            with T.Scope("V"):
                T.copy(A, a)
                T.tile.brcb_experiment(c, a, M // 8, blk, rep_stride)
                T.copy(c, C)

    return main


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_brcb_experiment_fills_one_block_per_element(dtype):
    a = np.arange(1, 65).astype(dtype)
    per = 32 // a.itemsize
    np.testing.assert_array_equal(brcb_kernel(64, dtype)(a), np.repeat(a[:, None], per, 1))


def test_brcb_experiment_with_other_strides_is_an_error():
    with pytest.raises(TilelangError, match="block stride 2 and repeat stride 8"):
        brcb_kernel(64, "float32", 2, 8)(np.zeros(64, np.float32))


@tilelang.jit(out_idx=[1])
def deq_kernel(N, scale):
    @T.prim_func
    def main(A: T.Tensor((2, N), "int32"), B: T.Tensor((2, N), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "int32")
            y = T.alloc_ub((N,), "float16")
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.set_deq_scale(scale)
                T.copy(x, y)
                T.copy(y, B[vid, :])

    return main


def test_set_deq_scale_one_is_the_plain_conversion():
    a = RNG.integers(-1000, 1000, (2, 64)).astype(np.int32)
    np.testing.assert_array_equal(deq_kernel(64, 1.0)(a), a.astype(np.float16))


def test_another_deq_scale_is_an_error_at_the_line():
    with pytest.raises(TilelangError, match=r"T.set_deq_scale\(0.5\) is not modelled"):
        deq_kernel(64, 0.5)(np.zeros((2, 64), np.int32))


@tilelang.jit(out_idx=[1])
def one_row_kernel(N):
    @T.prim_func
    def main(A: T.Tensor((1, N), "float32"), B: T.Tensor((1, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((1, N), "float32")
            T.copy(A[cid + vid, 0], x)  # the second vector core's row is past the tensor
            T.tile.add(x, x, 1.0)
            T.copy(x, B[cid + vid, 0])

    return main


def test_a_whole_tile_past_the_end_reads_padding_drops_writes_and_warns():
    from tilelang._jit import OutOfBoundsTileWarning

    a = RNG.standard_normal((1, 64)).astype(np.float32)
    with pytest.warns(OutOfBoundsTileWarning, match="tiles of 'A' run past dimension 0"):
        got = one_row_kernel(64)(a)
    np.testing.assert_array_equal(got, a + np.float32(1.0))

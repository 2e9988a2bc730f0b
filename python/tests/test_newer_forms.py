"""Language forms of TileLang-Ascend scripts written after the front end's snapshot (issue 45:
cann-bench operators, MoE kernels, attention variants): each class of form works with the
original's meaning or is an error at its line, never dropped."""

import os

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError

HERE = os.path.basename(__file__)
SYNC = {tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True}


def lineno(marker):
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "lineno(" not in line)


# ---- T.tile ops bind their arguments by the original's parameter names ----


@tilelang.jit(out_idx=[1], pass_configs=SYNC)
def keyword_ops(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([N], "float32")
            m = T.alloc_ub([N // 8], "uint8")
            o = T.alloc_ub([N], "float32")
            T.copy(A, a)
            T.tile.compare(m, src0=a, src1=0.0, mode="GT")
            # selMode by its name: a scalar src1 (dropping it would read src1 as a tile)
            T.tile.select(o, selMask=m, src0=a, src1=-1.0, selMode="VSEL_TENSOR_SCALAR_MODE")
            T.tile.axpy(o, src0=a, scalar_value=0.5)
            T.tile.clamp(out=o, buffer=o, min_scalar=-1.25, max_scalar=2.0, count=N)
            T.copy(o, B)

    return main


def test_tile_ops_bind_the_originals_parameter_names():
    a = np.linspace(-4, 4, 64, dtype=np.float32)
    want = np.clip(np.where(a > 0, a, -1.0) + 0.5 * a, -1.25, 2.0)
    np.testing.assert_allclose(keyword_ops(64)(a), want, rtol=1e-6)


@tilelang.jit(out_idx=[1], pass_configs=SYNC)
def stray_argument(form):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([64], "float32")
            m = T.alloc_ub([8], "uint8")
            T.copy(A, a)
            if form == "count":
                T.tile.exp(a, a, 64)  # MARK-count
            else:
                T.tile.select(a, m, a, a, mode="VSEL_TENSOR_TENSOR_MODE")  # MARK-mode
            T.copy(a, B)

    return main


@pytest.mark.parametrize("form, message", [
    ("count", r"T\.tile\.exp\(dst, src0\): too many positional arguments"),
    ("mode", r"T\.tile\.select\(dst, selMask, src0, src1, selMode\): got an unexpected "
             r"keyword argument 'mode'")])
def test_an_argument_the_original_does_not_take_is_an_error_at_its_line(form, message):
    with pytest.raises(TilelangError, match=message) as e:
        stray_argument(form)
    assert e.value.loc == (HERE, lineno(f"# MARK-{form}"))


# ---- T.tile.broadcast: the original's axis rule ----


@tilelang.jit(out_idx=[2], pass_configs=SYNC)
def broadcast_into_square(N, shape, axis):
    @T.prim_func
    def main(A: T.Tensor((N, N), "float32"), G: T.Tensor(shape, "float32"),
             B: T.Tensor((N, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([N, N], "float32")
            g = T.alloc_ub(shape, "float32")
            t = T.alloc_ub([N, N], "float32")
            T.copy(A, a)
            T.copy(G, g)
            if axis is None:
                T.tile.broadcast(t, g)
            else:
                T.tile.broadcast(t, g, axis)
            T.tile.mul(a, a, t)
            T.copy(a, B)

    return main


@pytest.mark.parametrize("shape, axis, as_row", [
    ((16,), None, True),  # a 1-D source of the column count is a row, square or not
    ((16,), 0, True), ((16,), 1, False),
    ((1, 16), None, True), ((16, 1), None, False)])
def test_broadcast_follows_the_originals_axis_rule(shape, axis, as_row):
    a = np.arange(256, dtype=np.float32).reshape(16, 16) / 64
    g = np.arange(1, 17, dtype=np.float32)
    want = a * (g[None, :] if as_row else g[:, None])
    out = broadcast_into_square(16, shape, axis)(a, g.reshape(shape))
    np.testing.assert_allclose(out, want, rtol=1e-6)


# ---- T.gemm: the original's keywords ----


@tilelang.jit(out_idx=[2])
def gemm_twice(kw):
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), Bm: T.Tensor((32, 32), "float16"),
             C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_L1([32, 32], "float16")
            b = T.alloc_L1([32, 32], "float16")
            c = T.alloc_L0C([32, 32], "float32")
            with T.Scope("C"):
                T.copy(A, a)
                T.copy(Bm, b)
                T.gemm(a, b, c, clear_accum=True)
                T.gemm(a, b, c, **kw)  # MARK-gemm
                T.copy(c, C)

    return main


@pytest.mark.parametrize("kw, times", [
    (dict(clear_accum=True), 1), (dict(clear_accum=False), 2), (dict(), 2),
    (dict(transpose_B=False, policy=T.GemmWarpPolicy.FullRow, clear_accum=True), 1)])
def test_gemm_clear_accum_initialises_or_accumulates(kw, times):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    want = times * (a.astype(np.float32) @ b.astype(np.float32))
    np.testing.assert_allclose(gemm_twice(kw)(a, b), want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("kw, message", [
    (dict(k_pack=2), r"not supported: T\.gemm k_pack=2"),
    (dict(wg_wait=1), r"not supported: T\.gemm wg_wait=1"),
    (dict(init=True), r"unexpected keyword argument 'init'")])
def test_gemm_arguments_without_a_cube_meaning_are_errors_at_the_line(kw, message):
    with pytest.raises(TilelangError, match=message) as e:
        gemm_twice(kw)
    assert e.value.loc == (HERE, lineno("# MARK-gemm"))


# ---- T.tile.cast: a count into a whole buffer's 32-byte padding ----


@tilelang.jit(out_idx=[1], pass_configs=SYNC)
def row_max_index(n, count, whole):
    @T.prim_func
    def main(A: T.Tensor((n, 64), "float16"), O: T.Tensor((n, 8), "int64")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([64], "float16")
            ac = T.alloc_ub([64], "float32")
            mx = T.alloc_ub([1] if whole else [8], "float32")
            o = T.alloc_ub([8], "int64")
            for r in T.serial(n):
                T.copy(A[r, 0:64], a)
                T.tile.cast(ac, a, "CAST_NONE", 64)
                T.reduce_max(ac, mx[0:1], dim=-1, clear=True)
                if whole:
                    T.tile.cast(o, mx, "CAST_RINT", count)  # MARK-cast-whole
                else:
                    T.tile.cast(o, mx[0:1], "CAST_RINT", count)  # MARK-cast-slice
                T.copy(o, O[r, 0:8])

    return main


def test_cast_count_into_a_whole_buffers_32_byte_padding_converts_what_it_holds():
    """arg_max's `T.tile.cast(idx_i64[8], max_f32[1], "CAST_RINT", 8)`: the [1] buffer's
    32-byte block holds 8 floats, of which only the first is defined."""
    a = (np.arange(4 * 64, dtype=np.float32).reshape(4, 64) % 97 - 40).astype(np.float16)
    out = row_max_index(4, 8, True)(a)
    np.testing.assert_array_equal(out[:, 0], np.round(a.astype(np.float32).max(axis=1)))


@pytest.mark.parametrize("count, whole, marker", [
    (9, True, "# MARK-cast-whole"),  # past the [1] float buffer's 32-byte block
    (8, False, "# MARK-cast-slice")])  # past a slice: the buffer's next elements
def test_cast_count_past_the_block_or_a_slice_is_an_error_at_the_line(count, whole, marker):
    with pytest.raises(TilelangError, match=f"T.tile.cast count {count} is not within"
                       ) as e:
        row_max_index(2, count, whole)
    assert e.value.loc == (HERE, lineno(marker))


# ---- T.copy, the flags: the original's parameter order and names ----


@tilelang.jit(out_idx=[2])
def gemm_relu_out(relu):
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), Bm: T.Tensor((32, 32), "float16"),
             C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_L1([32, 32], "float16")
            b = T.alloc_L1([32, 32], "float16")
            c = T.alloc_L0C([32, 32], "float32")
            with T.Scope("C"):
                T.copy(A, a)
                T.copy(Bm, b)
                T.gemm_v0(a, b, c, init=True)
                T.copy(c, C, relu)  # the third parameter is enable_relu

    return main


@pytest.mark.parametrize("relu", [False, True])
def test_copys_third_positional_argument_is_enable_relu(relu):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(gemm_relu_out(relu)(a, b), np.maximum(want, 0) if relu else want,
                               rtol=1e-3, atol=1e-3)


@tilelang.jit(out_idx=[1])
def flags_by_keyword(pipe):
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([64], "float32")
            with T.Scope("V"):
                T.copy(A, a)
                T.set_flag("mte2", "v", eventId=1)
                T.wait_flag("mte2", "v", 1)
                T.tile.mul(a, a, 2.0)
                T.set_flag(src="v", dst="mte3", eventId=2)
                T.wait_flag("v", "mte3", eventId=2)
                T.copy(a, B)
                if pipe:
                    T.wait_cross_flag(0, pipe)  # MARK-cross-pipe
            if pipe:
                with T.Scope("C"):
                    T.set_cross_flag("FIX", 0)

    return main


def test_flag_event_ids_by_the_originals_keyword():
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(flags_by_keyword("")(a), 2 * a)


def test_wait_cross_flag_on_a_pipe_waits_on_the_scalar_unit_as_on_a2_a3():
    """The pipe is the original's A5 parameter; its A2/A3 codegen drops it (the HISA
    scripts pass "MTE2"): the kernel runs as without it, and a name that is no pipe is an
    error at the line."""
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(flags_by_keyword("MTE2")(a), 2 * a)
    with pytest.raises(TilelangError, match=r"unknown pipe 'MTE9'") as e:
        flags_by_keyword("mte9")
    assert e.value.loc == (HERE, lineno("# MARK-cross-pipe"))


# ---- T.Tensor: the original's parameters; a layout other than dense is an error ----


def tensor_with(**kw):
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32", **kw), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([4, 8], "float32")
            T.copy(A, a)
            T.copy(a, B)

    return main


def test_tensor_annotation_takes_dense_layouts_only():
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    for kw in (dict(strides=(8, 1)), dict(align=64, offset_factor=16), dict(scope="global")):
        np.testing.assert_array_equal(tilelang.compile(tensor_with(**kw), out_idx=[1])(a), a)
    for kw, name in ((dict(strides=(16, 1)), "strides"), (dict(elem_offset=4), "elem_offset")):
        with pytest.raises(TilelangError, match=f"not supported: T.Tensor {name}="):
            tensor_with(**kw)


def test_reduce_keyword_the_original_does_not_take_is_an_error():
    @T.prim_func
    def main(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 1), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([4, 8], "float32")
            m = T.alloc_ub([4, 1], "float32")
            T.copy(A, a)
            T.reduce_max(a, m, dim=-1, keepdim=True)  # MARK-reduce-kw
            T.copy(m, B)

    with pytest.raises(TilelangError, match="unexpected keyword argument 'keepdim'") as e:
        tilelang.compile(main, out_idx=[1])
    assert e.value.loc == (HERE, lineno("# MARK-reduce-kw"))


# ---- the NPU-IR dialect (the original's npuir branch): clear errors, not other meanings ----


def npuir_style_copy():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            a = T.alloc_ub([32], "float32")
            T.copy(A[cid * 32], a, [T.min(32, 64 - cid * 32)])  # MARK-npuir-copy
            T.copy(a, B[cid * 32])

    return main


def test_npuir_dialect_forms_are_errors_at_their_line():
    # T.copy(src, dst, sizes): the list would have been a truthy enable_relu
    with pytest.raises(TilelangError, match="enable_relu .* is list") as e:
        tilelang.compile(npuir_style_copy(), out_idx=[1])
    assert e.value.loc == (HERE, lineno("# MARK-npuir-copy"))
    with pytest.raises(TilelangError, match="not supported: T.npuir_atomic_add .*NPU-IR"):
        T.npuir_atomic_add(1, 2)
    with pytest.raises(TilelangError, match="not supported: target 'npuir'"):
        tilelang.jit(target="npuir")

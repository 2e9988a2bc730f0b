"""Language forms of TileLang-Ascend scripts written after the front end's snapshot (issue 45:
cann-bench operators, MoE kernels, attention variants): each class of form works with the
original's meaning or is an error at its line, never dropped."""

import os
import warnings

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError

HERE = os.path.basename(__file__)
SYNC = {tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True}


def where(record, category):
    """(file, line) of the first warning of `category` in a pytest.warns record."""
    w = next(x for x in record if issubclass(x.category, category))
    return w.filename, w.lineno


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


def test_cast_count_past_the_buffers_block_is_reported_at_the_line():
    """A count past the [1] buffer's 32-byte block: the NPU's Cast reads on into whatever UB
    follows. tilepipe converts what the buffers hold and says so at the line."""
    from tilelang.language.tile import TileOverrunWarning

    a = (np.arange(2 * 64, dtype=np.float32).reshape(2, 64) % 97 - 40).astype(np.float16)
    with pytest.warns(TileOverrunWarning, match="T.tile.cast covers 9 elements from the "
                      "start of mx, which holds 1 from there") as w:
        out = row_max_index(2, 9, True)(a)
    assert where(w, TileOverrunWarning) == (HERE, lineno("# MARK-cast-whole"))
    np.testing.assert_array_equal(out[:, 0], np.round(a.astype(np.float32).max(axis=1)))


def test_cast_count_past_a_slice_converts_the_buffers_next_elements():
    """AscendC's Cast counts contiguous elements from the tile's address: a count of 8 from
    mx[0:1] covers mx[0:8] (defined or not, no warning: the buffer holds them)."""
    from tilelang.language.tile import TileOverrunWarning

    a = (np.arange(2 * 64, dtype=np.float32).reshape(2, 64) % 97 - 40).astype(np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileOverrunWarning)
        out = row_max_index(2, 8, False)(a)
    np.testing.assert_array_equal(out[:, 0], np.round(a.astype(np.float32).max(axis=1)))


@tilelang.jit(out_idx=[1], pass_configs=SYNC)
def counted_cast(rows, first, count, mode, dst_dtype):
    @T.prim_func
    def main(A: T.Tensor((rows, 16), "float32"), B: T.Tensor((rows, 16), dst_dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((rows, 16), "float32")
            b = T.alloc_ub((rows, 16), dst_dtype)
            T.copy(A, a)
            T.tile.fill(b, -7)
            T.tile.cast(b[first, :], a[first, :], mode, count)  # MARK-counted-cast
            T.copy(b, B)

    return main


def test_a_row_slices_count_covers_the_rows_after_it():
    """The language suite's cast_slice: `T.tile.cast(b[i, :], a[i, :], mode, count)` converts
    `count` elements from row i's first one: rows 2 and 3 here, the rows before untouched."""
    a = np.linspace(-9, 9, 4 * 16, dtype=np.float32).reshape(4, 16)
    got = counted_cast(4, 2, 32, "CAST_NONE", "float16")(a)
    np.testing.assert_array_equal(got[:2], np.full((2, 16), -7, np.float16))
    np.testing.assert_array_equal(got[2:], a[2:].astype(np.float16))


@pytest.mark.parametrize("mode, rule", [
    ("CAST_RINT", np.rint), ("CAST_FLOOR", np.floor), ("CAST_CEIL", np.ceil),
    ("CAST_TRUNC", np.trunc), ("CAST_ROUND", lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5))])
def test_a_float_cast_into_its_own_type_rounds_to_integral_values(mode, rule):
    """AscendC's Cast of f32 into f32 with a rounding mode rounds each value to an integral
    float (the language suite's test_cast: 0.5 -> 0.0 with CAST_RINT, ties to even)."""
    a = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.7, 0.7, 3.2, -3.2, 7.5, 8.5, 0.0, 1.0,
                  -1e6 - 0.5, 2.25] * 4, np.float32).reshape(4, 16)
    got = counted_cast(4, 0, 64, mode, "float32")(a)
    np.testing.assert_array_equal(got, rule(a).astype(np.float32))


def test_a_count_past_the_buffers_end_converts_the_tiles_and_warns():
    """The language suite's test_cast: a count of 4096 for [16, 16] tiles. The NPU converts
    on into the UB after them (the pto target's TCVT converts the tiles): tilepipe converts
    the tiles and reports the rest at the line."""
    from tilelang.language.tile import TileOverrunWarning

    a = np.full((16, 16), 0.5, np.float32)
    with pytest.warns(TileOverrunWarning, match="covers 4096 elements from the start of a, "
                      "which holds 256") as w:
        got = counted_cast(16, 0, 4096, "CAST_RINT", "float32")(a)
    assert where(w, TileOverrunWarning) == (HERE, lineno("# MARK-counted-cast"))
    np.testing.assert_array_equal(got, np.zeros((16, 16), np.float32))


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


# ---- a guard on == / != with one outcome for every core is decided when the kernel is built ----


@tilelang.jit(out_idx=[1])
def split_by_halves(split):
    @T.prim_func
    def main(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float32")):
        with T.Kernel(4 * split, is_npu=True) as (cid, vid):
            row = cid // split
            half = cid % split
            a = T.alloc_ub([64], "float32")
            with T.Scope("V"):
                if vid == 0:
                    if half == 0:
                        T.copy(A[row, 0:64], a)
                        T.tile.add(a, a, 1.0)
                        T.copy(a, B[row, 0:64])
                    else:
                        # with split = 1 this branch never runs: its slice starts past the end
                        T.copy(A[row, split * 64:split * 64 + 64], a)
                        T.copy(a, B[row, 0:64])

    return main


def test_an_equality_guard_that_never_holds_drops_its_branch():
    a = np.arange(256, dtype=np.float32).reshape(4, 64)
    np.testing.assert_allclose(split_by_halves(1)(a), a + 1.0)


# ---- T.copy's pad_value in hand-synchronised code: the padding races with nothing ----


@tilelang.jit(out_idx=[1])
def padded_rows(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([16], "float32")
            with T.Scope("V"):
                if vid == 0:
                    T.copy(A[0:n], a, pad_value=-1.0)
                    T.barrier_all()
                    T.tile.mul(a, a, 2.0)
                    T.barrier_all()
                    T.copy(a, B)

    return main


def test_pad_value_fills_only_what_the_copy_does_not_write():
    a = np.arange(1, 9, dtype=np.float32)
    want = np.concatenate([2 * a, np.full(8, -2.0, np.float32)])
    np.testing.assert_allclose(padded_rows(8)(a), want)


# ---- T.reinterpretcast between element widths: the same bytes ----


@tilelang.jit(out_idx=[1])
def bytes_as_halves(barrier_after):
    @T.prim_func
    def main(A: T.Tensor((64,), "uint8"), B: T.Tensor((32,), "uint16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([64], "uint8")
            h = T.alloc_ub([32], "uint16")
            with T.Scope("V"):
                if vid == 0:
                    T.copy(A, a)
                    T.barrier_all()
                    T.reinterpretcast(h, a, "uint16_t")
                    if barrier_after:
                        T.barrier_all()
                    T.copy(h, B)

    return main


@pytest.mark.parametrize("barrier_after", [True, False])
def test_reinterpretcast_across_widths_names_the_same_bytes(barrier_after):
    """In hand-synced code the original's view needs no flag after it (nms: a barrier, the
    cast, the copy out): tilepipe's copy of the bytes is ordered before later readers."""
    a = np.arange(64, dtype=np.uint8) * 3
    np.testing.assert_array_equal(bytes_as_halves(barrier_after)(a), a.view(np.uint16))


# ---- earlier versions' names: T.tile.reduce_*(out, buffer, tmp, dim), broadcast's tmp, the
# PTO dialect's T.add / T.sub / T.mul / T.div ----


@tilelang.jit(out_idx=[1], pass_configs=SYNC)
def earlier_row_softmax(R, C):
    @T.prim_func
    def main(A: T.Tensor((R, C), "float32"), B: T.Tensor((R, C), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([R // 2, C], "float32")
            m = T.alloc_ub([R // 2, 1], "float32")
            m2 = T.alloc_ub([R // 2, C], "float32")
            tmp = T.alloc_ub([R // 2 * C * 4], "uint8")
            T.copy(A[vid * (R // 2), 0], a)
            T.tile.reduce_max(m, a, tmp, dim=-1)
            T.tile.broadcast(m2, m, tmp)
            T.sub(a, a, m2)
            T.tile.exp(a, a)
            T.tile.reduce_sum(m, a, tmp, -1)
            T.tile.broadcast(m2, m, tmp)
            T.div(a, a, m2)
            T.mul(a, a, 3.0)
            T.add(a, a, 1.0)
            T.copy(a, B[vid * (R // 2), 0])

    return main


def test_earlier_versions_reduce_broadcast_and_pto_names_keep_their_meaning():
    a = np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    want = 3 * e / e.sum(axis=1, keepdims=True) + 1
    np.testing.assert_allclose(earlier_row_softmax(8, 32)(a), want, rtol=1e-5)


# ---- slices whose length is a run-time value: T.copy moves that many elements ----


@tilelang.jit(out_idx=[1], pass_configs=SYNC)
def tail_rows_and_columns(M, N, block, dtype, form="copy"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block), is_npu=True) as (cid, vid):
            a = T.alloc_ub([block // 2, 64], dtype)
            with T.Scope("V"):
                row = cid * block + vid * (block // 2)
                rows = T.min(block // 2, T.max(M - row, 0))
                for c in T.serial(T.ceildiv(N, 64)):
                    cols = T.min(64, N - c * 64)
                    T.tile.fill(a, -1.0)
                    T.copy(A[row:row + rows, c * 64:c * 64 + cols], a[0:rows, 0:cols])
                    if form == "copy":
                        T.tile.add(a, a, 1.0)
                    else:
                        T.tile.add(a[0:rows, 0:cols], a[0:rows, 0:cols], 1.0)  # MARK-dyn
                    T.copy(a[0:rows, 0:cols], B[row:row + rows, c * 64:c * 64 + cols])

    return main


@pytest.mark.parametrize("M, N, dtype", [(21, 100, "float32"), (16, 64, "float32"),
                                         (13, 77, "float16"), (9, 130, "int8")])
def test_a_copy_of_a_run_time_length_moves_exactly_that_many_elements(M, N, dtype):
    a = (np.arange(M * N) % 61).reshape(M, N).astype(dtype)
    out = tail_rows_and_columns(M, N, 8, dtype)(a)
    np.testing.assert_array_equal(out, a + np.ones((), dtype))


def test_a_run_time_length_outside_t_copy_is_an_error_at_its_line():
    with pytest.raises(TilelangError, match=r"not supported: slice of 'a' in dimension 0 with "
                                            r"a run-time extent .* outside T\.copy") as e:
        tail_rows_and_columns(21, 100, 8, "float32", "tile")
    assert e.value.loc == (HERE, lineno("# MARK-dyn"))


# ---- T.gemm_v0's newer parameters: kL0Size (the K chunk moved into L0), n_actual ----


@tilelang.jit(out_idx=[2])
def gemm_v0_chunks(kl0, hand, n_actual=None, N=64):
    @T.prim_func
    def main(A: T.Tensor((32, 256), "float16"), Bm: T.Tensor((N, 256), "float16"),
             C: T.Tensor((32, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_L1([32, 256], "float16")
            b = T.alloc_L1([N, 256], "float16")
            c = T.alloc_L0C([32, N], "float32")
            with T.Scope("C"):
                T.copy(A, a)
                T.copy(Bm, b)
                if hand:
                    T.barrier_all()
                T.gemm_v0(a, b, c, transpose_B=True, init=True, kL0Size=kl0, n_actual=n_actual)  # MARK-gemmv0
                if hand:
                    T.barrier_all()
                T.copy(c, C)

    return main


@pytest.mark.parametrize("kl0, hand", [(64, True), (128, True), (256, False), (64, False)])
def test_gemm_v0_kl0size_cuts_k_into_chunks_of_that_size(kl0, hand):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((32, 256)).astype(np.float16)
    b = rng.standard_normal((64, 256)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32).T
    np.testing.assert_allclose(gemm_v0_chunks(kl0, hand)(a, b), want, rtol=1e-3, atol=1e-2)
    # K = 256 is moved and multiplied in 256 / kl0 chunks: one gemm per chunk
    src = gemm_v0_chunks(kl0, hand).get_ir(after_passes=True)
    assert sum(1 for ln in src.splitlines() if ln.strip().startswith("gemm ")) == 256 // kl0


def test_gemm_v0_n_actual_computes_the_leading_columns_and_refuses_bad_counts():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((32, 256)).astype(np.float16)
    b = rng.standard_normal((64, 256)).astype(np.float16)
    out = gemm_v0_chunks(None, False, n_actual=32)(a, b)
    want = a.astype(np.float32) @ b.astype(np.float32).T
    np.testing.assert_allclose(out[:, :32], want[:, :32], rtol=1e-3, atol=1e-2)
    with pytest.raises(TilelangError, match=r"n_actual=40: expected a multiple of 16") as e:
        gemm_v0_chunks(None, False, n_actual=40)
    assert e.value.loc == (HERE, lineno("# MARK-gemmv0"))
    with pytest.raises(TilelangError, match=r"kL0Size=24: expected a multiple of 16"):
        gemm_v0_chunks(24, False)


# ---- a GM tile whose start is read from memory may run past the tensor's end: clipped ----


@tilelang.jit(out_idx=[2], pass_configs=SYNC)
def rows_from_loaded_start(H, R):
    @T.prim_func
    def main(X: T.Tensor((H, 64), "float32"), S: T.Tensor((8,), "int32"),
             Y: T.Tensor((R, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            s = T.alloc_ub([8], "int32")
            t = T.alloc_ub([R, 64], "float32")
            with T.Scope("V"):
                if vid == 0:
                    T.copy(S, s)
                    T.copy(X[s[0]:s[0] + R, 0:64], t)
                    T.copy(t, Y)

    return main


def test_a_tile_at_a_loaded_start_past_the_end_reads_zeros_there():
    x = np.arange(20 * 64, dtype=np.float32).reshape(20, 64)
    start = np.array([16, 0, 0, 0, 0, 0, 0, 0], dtype=np.int32)
    want = np.zeros((8, 64), np.float32)
    want[:4] = x[16:]
    np.testing.assert_array_equal(rows_from_loaded_start(20, 8)(x, start), want)


# ---- T.alloc_var accumulators (`acc = acc + x` in a run-time loop) in an unscoped kernel
# without Cube work: registers from the loop's entry, the kernel the vector cores' ----


@tilelang.jit(out_idx=[2], pass_configs=SYNC)
def prefix_row(n):
    @T.prim_func
    def main(X: T.Tensor((64, 16), "float32"), C: T.Tensor((n,), "int32"),
             Y: T.Tensor((1, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            c = T.alloc_ub([n], "int32")
            row = T.alloc_ub([1, 16], "float32")
            acc = T.alloc_var("int32", init=0)
            T.copy(C, c)
            for i in T.serial(n):
                acc = acc + c[i]
            T.copy(X[acc, 0:16], row)
            T.copy(row, Y)

    return main


def test_an_accumulator_in_a_loop_of_an_unscoped_vector_kernel_is_a_register():
    x = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    counts = np.array([3, 1, 4, 1, 5, 9, 2, 6], dtype=np.int32)
    np.testing.assert_array_equal(prefix_row(8)(x, counts), x[31:32])


# ---- gather_mask: the library packs every kept element from the destination's start ----


@tilelang.jit(out_idx=[1], pass_configs=SYNC)
def sorted_head(N, pattern):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub([N], "float32")
            srt = T.alloc_ub([2 * N], "float32")
            head = T.alloc_ub([8], "float32")
            T.copy(A, a)
            T.tile.sort(srt, a, N)
            T.tile.gather_mask(head, srt, pattern)  # MARK-gather-head
            T.copy(head, B)

    return main


@pytest.mark.parametrize("pattern, step, first", [("P0101", 2, 0), ("P1010", 2, 1)])
def test_gather_mask_past_a_small_destination_keeps_its_head_and_warns(pattern, step, first):
    """arg_max: `T.tile.gather_mask(tile_max_f[8], sort_dst[2 N], "P0101")` keeps N values
    (the library's GatherMask takes the whole source); the NPU writes them on past the
    [8] buffer. tilepipe fills the buffer with the first 8 and reports the rest at the line."""
    from tilelang.language.tile import TileOverrunWarning

    a = np.random.default_rng(3).permutation(128).astype(np.float32)
    with pytest.warns(TileOverrunWarning, match="T.tile.gather_mask covers 128 elements "
                      "from the start of head, which holds 8") as w:
        got = sorted_head(128, pattern)(a)
    assert where(w, TileOverrunWarning) == (HERE, lineno("# MARK-gather-head"))
    order = np.argsort(-a, kind="stable")  # the library's Sort: (value, index) pairs
    pairs = np.stack([a[order], order.astype(np.float32)], 1).reshape(-1)
    np.testing.assert_array_equal(got, pairs[first::step][:8])


# ---- a float element converted to an integer by the scalar unit ----


@tilelang.jit(out_idx=[2], pass_configs=SYNC)
def float_indexed_rows(N):
    @T.prim_func
    def main(A: T.Tensor((N, 16), "float32"), F: T.Tensor((8,), "float32"),
             B: T.Tensor((2, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            f = T.alloc_ub([8], "float32")
            row = T.alloc_ub([16], "float32")
            T.copy(F, f)
            k = T.cast(f[0], "int32")  # nms: kc = T.cast(cnt[0], "int32"); kept[kc] = ...
            T.copy(A[k, 0:16], row)
            T.copy(row, B[0, 0:16])
            j = T.int32(f[1] * 2.0)  # an element expression, computed first
            T.copy(A[j, 0:16], row)
            T.copy(row, B[1, 0:16])

    return main


def test_a_float_element_cast_to_an_integer_indexes_toward_zero():
    """The scalar unit's C conversion of the float it reads: -0.7 -> 0 (not floor's -1),
    1.75 * 2 = 3.5 -> 3."""
    a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    f = np.array([-0.7, 1.75, 0, 0, 0, 0, 0, 0], np.float32)
    got = float_indexed_rows(8)(a, f)
    np.testing.assert_array_equal(got, a[[0, 3]])


@tilelang.jit(out_idx=[0], pass_configs=SYNC)
def filled(dtype, value):
    @T.prim_func
    def main(B: T.Tensor((16,), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            m = T.alloc_ub((16,), dtype)
            T.tile.fill(m, value)
            T.copy(m, B)

    return main


@pytest.mark.parametrize("dtype, value, want", [
    ("uint16", -1, 0xFFFF), ("uint8", -2, 0xFE), ("int16", 0xFFFF, -1), ("int32", 7, 7)])
def test_an_integer_fill_keeps_the_values_low_bits(dtype, value, want):
    """AscendC's Duplicate takes the scalar as the element type (C's conversion): nms fills
    its uint16 keep mask with -1 to set every bit."""
    np.testing.assert_array_equal(filled(dtype, value)(), np.full(16, want, dtype))

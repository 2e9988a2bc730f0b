"""The dtypes of A2/A3 through the front end, against numpy: every dtype in tensors and UB
buffers (int64 and uint64 exact past 2^53), casts (through the hardware's chain where it has
no direct conversion), compares into masks, selects, index math on int64 elements; the fp8
family and the ops the vector unit has no 64-bit form of are clear errors."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError

RNG = np.random.default_rng(4545)
BIG = 2**62 + 1  # no double holds it


def values(dtype, shape):
    """Random values of a dtype, with its extremes (and int64 values past 2^53)."""
    if dtype == "bool":
        return RNG.random(shape) > 0.5
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        v = RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
        v.flat[:2] = [info.min, info.max]
        if dtype == "int64":
            v.flat[2:4] = [BIG, -BIG]
        return v
    return RNG.standard_normal(shape).astype(dtype)


@tilelang.jit(out_idx=[-1])
def copy_kernel(R, C, dtype):
    @T.prim_func
    def main(A: T.Tensor((R, C), dtype), B: T.Tensor((R, C), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((R // 2, C), dtype)
            with T.Scope("V"):
                T.copy(A[vid * R // 2, 0], a)
                T.copy(a, B[vid * R // 2, 0])

    return main


@pytest.mark.parametrize("dtype", ["int64", "uint64", "int32", "uint32", "int16", "uint16",
                                   "int8", "uint8", "bool", "float16", "float32"])
def test_a_copy_through_ub_keeps_every_value_of_every_dtype(dtype):
    a = values(dtype, (4, 64))
    b = copy_kernel(4, 64, dtype)(a)
    assert b.dtype == a.dtype
    np.testing.assert_array_equal(b, a)


def test_dtype_spellings_name_the_same_dtype():
    a = values("int64", (4, 64))
    for spelling in (T.int64, "int64", np.int64, "long"):
        np.testing.assert_array_equal(copy_kernel(4, 64, spelling)(a), a)
    m = values("bool", (4, 64))
    np.testing.assert_array_equal(copy_kernel(4, 64, T.bool)(m), m)


@tilelang.jit(out_idx=[-1])
def cast_kernel(C, src, dst, mode):
    @T.prim_func
    def main(A: T.Tensor((2, C), src), B: T.Tensor((2, C), dst)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, C), src)
            b = T.alloc_ub((1, C), dst)
            with T.Scope("V"):
                T.copy(A[vid, 0], a)
                T.tile.cast(b, a, mode, C)
                T.copy(b, B[vid, 0])

    return main


def saturate(v, dtype):
    info = np.iinfo(dtype)
    return np.clip(v, float(info.min), float(info.max)).astype(dtype)


@pytest.mark.parametrize("src,dst,mode,ref", [
    ("int64", "float32", "CAST_RINT", lambda a: a.astype(np.float32)),
    ("int64", "float16", "CAST_RINT", lambda a: a.astype(np.float32).astype(np.float16)),
    ("float32", "int64", "CAST_TRUNC", lambda a: saturate(np.trunc(a), "int64")),
    ("float32", "int64", "CAST_RINT", lambda a: saturate(np.rint(a), "int64")),
    ("int32", "int64", "CAST_NONE", lambda a: a.astype(np.int64)),
    ("int64", "int32", "CAST_NONE", lambda a: saturate(a, "int32")),
    ("uint8", "int64", "CAST_NONE", lambda a: a.astype(np.int64)),
    ("bool", "float16", "CAST_NONE", lambda a: a.astype(np.float16)),
    ("float16", "bool", "CAST_NONE", lambda a: a != 0),
])
def test_a_cast_matches_numpy(src, dst, mode, ref):
    if src == "int64":
        a = RNG.integers(-2**40, 2**40, (2, 64), dtype=np.int64)
        a[0, :4] = [BIG, -BIG, 2**31, -2**31 - 1]
    elif src.startswith("float"):
        a = (RNG.standard_normal((2, 64)) * 1e3).astype(src)
        a[0, :4] = [2.5, -2.5, 0.0, 3e9 if src == "float32" else 6e4]
    else:
        a = values(src, (2, 64))
    if src == "float16":
        a[0, 3] = 0
    with np.errstate(over="ignore"):  # past float16's range: inf, as the store gives
        want = ref(a)
    np.testing.assert_array_equal(cast_kernel(64, src, dst, mode)(a), want)


@tilelang.jit(out_idx=[-2, -1])
def compare_select_kernel(C):
    @T.prim_func
    def main(A: T.Tensor((2, C), "int64"), B: T.Tensor((2, C), "int64"),
             M: T.Tensor((2, C), "bool"), D: T.Tensor((2, C), "int64")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, C), "int64")
            b = T.alloc_ub((1, C), "int64")
            m = T.alloc_ub((1, C), "bool")
            with T.Scope("V"):
                T.copy(A[vid, 0], a)
                T.copy(B[vid, 0], b)
                T.tile.compare(m, a, b, "GT")
                T.tile.select(a, m, a, b, "VSEL_TENSOR_TENSOR_MODE")
                T.tile.sub(a, a, 7)
                T.copy(m, M[vid, 0])
                T.copy(a, D[vid, 0])

    return main


def test_int64_compare_into_a_bool_mask_select_and_sub_are_exact():
    a = RNG.integers(-2**62, 2**62, (2, 64), dtype=np.int64)
    b = a.copy()
    b[:, ::2] += 1  # differs from a in the last bit only: no double tells them apart
    b[:, 1::4] -= 1
    m, d = compare_select_kernel(64)(a, b)
    assert m.dtype == np.bool_ and d.dtype == np.int64
    np.testing.assert_array_equal(m, a > b)
    np.testing.assert_array_equal(d, np.maximum(a, b) - 7)


@tilelang.jit(out_idx=[-1])
def gather_rows(rows, n, dtype):
    """Out[j] = Src[Idx[j]]: int64 indices read by the scalar unit, as MoE kernels do."""

    @T.prim_func
    def main(Src: T.Tensor((n, 16), "float32"), Idx: T.Tensor((rows,), dtype),
             Out: T.Tensor((rows, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                idx_ub = T.alloc_ub((rows,), dtype)
                row = T.alloc_ub((rows, 16), "float32")
                T.copy(Idx, idx_ub)
                T.set_flag("mte2", "s", 0)
                T.wait_flag("mte2", "s", 0)
                for j in T.serial(rows):
                    r = idx_ub[j]
                    if r >= 0 and r < n:
                        T.copy(Src[r, 0:16], row[j, 0:16])
                T.set_flag("mte2", "mte3", 0)
                T.wait_flag("mte2", "mte3", 0)
                T.copy(row, Out)

    return main


@pytest.mark.parametrize("dtype", ["int64", "uint64", "int16", "uint16"])
def test_an_index_element_of_any_integer_dtype_addresses_gm(dtype):
    src = np.arange(64 * 16, dtype=np.float32).reshape(64, 16)
    idx = np.array([63, 0, 17, 5, 40, 2, 9, 31], dtype=dtype)
    np.testing.assert_array_equal(gather_rows(8, 64, dtype)(src, idx), src[idx.astype(np.int64)])


@tilelang.jit(out_idx=[-1])
def binary_kernel(C, dtype, op):
    @T.prim_func
    def main(A: T.Tensor((2, C), dtype), B: T.Tensor((2, C), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, C), dtype)
            with T.Scope("V"):
                T.copy(A[vid, 0], a)
                getattr(T.tile, op)(a, a, a)
                T.copy(a, B[vid, 0])

    return main


@pytest.mark.parametrize("dtype,op,match", [
    ("int64", "mul", "no 64-bit mul"),
    ("uint64", "div", "defined for f16/bf16/f32"),
    ("bool", "add", "bool"),
])
def test_an_op_the_vector_unit_lacks_for_the_dtype_is_an_error_at_its_line(dtype, op, match):
    with pytest.raises(TilelangError, match=match) as e:
        binary_kernel(64, dtype, op)(values(dtype, (2, 64)))
    assert "test_dtypes.py" in str(e.value)


@pytest.mark.parametrize("name", ["float8_e4m3", "float8_e5m2", "e4m3_float8", "e5m2_float8",
                                  "float8_e4m3fn", "float8_e5m2fnuz"])
@pytest.mark.parametrize("form", ["string", "T"])
def test_the_fp8_family_is_not_supported_on_a2_a3(name, form):
    dtype = name if form == "string" else getattr(T, name)
    with pytest.raises(TilelangError, match=f"not supported.*{name}.*A2/A3"):
        copy_kernel(4, 64, dtype)(np.zeros((4, 64), np.float32))


def test_torch_int64_and_bool_tensors_come_back_as_torch_tensors_of_their_dtype():
    torch = pytest.importorskip("torch")
    if getattr(torch, "_tilepipe_unsigned", None) is not None:
        pytest.skip("the runner's torch stand-in")
    a = torch.from_numpy(values("int64", (4, 64)))
    b = copy_kernel(4, 64, torch.int64)(a)
    assert b.dtype == torch.int64 and torch.equal(a, b)
    m = torch.from_numpy(values("bool", (4, 64)))
    assert torch.equal(copy_kernel(4, 64, torch.bool)(m), m)

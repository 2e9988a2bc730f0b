"""Issue 16's vector tile ops (T.tile.sin / cos / pow) against numpy, and their must-fail
cases."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilepipeError

RNG = np.random.default_rng(16)


def unary_kernel(op, M, N, dtype="float32"):
    @tilelang.jit(out_idx=[1])
    def build():
        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((M // 2, N), dtype)
                y = T.alloc_ub((M // 2, N), dtype)
                with T.Scope("V"):
                    T.copy(A[vid * (M // 2):(vid + 1) * (M // 2), :], x)
                    op(y, x)
                    T.copy(y, B[vid * (M // 2):(vid + 1) * (M // 2), :])

        return main

    return build()


@pytest.mark.parametrize("name,ref", [("sin", np.sin), ("cos", np.cos)])
def test_sin_cos(name, ref):
    a = (RNG.standard_normal((8, 64)) * 4).astype(np.float32)
    k = unary_kernel(getattr(T.tile, name), 8, 64)
    np.testing.assert_allclose(k(a), ref(a), rtol=1e-5, atol=1e-6)


def test_sin_f16():
    a = RNG.standard_normal((8, 64)).astype(np.float16)
    k = unary_kernel(T.tile.sin, 8, 64, "float16")
    np.testing.assert_allclose(k(a).astype(np.float32), np.sin(a.astype(np.float32)),
                               rtol=2e-3, atol=2e-3)


@tilelang.jit(out_idx=[2])
def pow_kernel(N, dtype):
    @T.prim_func
    def main(A: T.Tensor((2, N), dtype), E: T.Tensor((2, N), dtype),
             B: T.Tensor((2, N), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), dtype)
            e = T.alloc_ub((N,), dtype)
            y = T.alloc_ub((N,), dtype)
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.copy(E[vid, :], e)
                T.tile.pow(y, x, e)
                T.copy(y, B[vid, :])

    return main


def test_pow_tile_tile():
    a = RNG.uniform(0.1, 3.0, (2, 64)).astype(np.float32)
    e = RNG.uniform(-2.0, 2.0, (2, 64)).astype(np.float32)
    np.testing.assert_allclose(pow_kernel(64, "float32")(a, e), np.power(a, e), rtol=1e-5)


def test_pow_int32_is_exact():
    a = RNG.integers(-9, 10, (2, 64)).astype(np.int32)
    e = RNG.integers(0, 5, (2, 64)).astype(np.int32)
    np.testing.assert_array_equal(pow_kernel(64, "int32")(a, e), a.astype(np.int64) ** e)


def test_sin_on_int_tile_fails():
    with pytest.raises(TilepipeError) as e:
        unary_kernel(T.tile.sin, 8, 64, "int32")(np.zeros((8, 64), np.int32))
    msg = str(e.value)
    assert "sin" in msg and "f16/bf16/f32" in msg

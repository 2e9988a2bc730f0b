"""UB bytes the front end and the memory planning spend as the original's compiler does:
no hidden temporaries where the original has none, no bytes for buffers nothing uses, and
scalar loads of values computed on chip (docs/python.md, "UB as the original lays it
out")."""

import numpy as np

import tilelang
import tilelang.language as T

RNG = np.random.default_rng(7)


@tilelang.jit(out_idx=[2, 3])
def gather_kernel(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), O: T.Tensor((N,), "uint32"),
             B: T.Tensor((N,), "float32"), P: T.Tensor((N,), "uint32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            o = T.alloc_ub((N,), "uint32")
            y = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A, x)
                T.copy(O, o)
                T.tile.gather(y, x, o, 0)
                T.copy(y, B)
                T.copy(o, P)  # the offsets stay live across the gather

    return main


def test_gather_takes_the_byte_offsets_without_a_temporary():
    # Three 48 KiB buffers live at the gather: the original's Gather reads the uint32 byte
    # offsets as they are; a fourth, shifted copy of them would not fit the usable UB.
    n = 12288
    a = RNG.standard_normal(n).astype(np.float32)
    idx = RNG.integers(0, n, n)
    off = (idx * 4).astype(np.uint32)
    got, back = gather_kernel(n)(a, off)
    np.testing.assert_array_equal(got, a[idx])
    np.testing.assert_array_equal(back, off)


@tilelang.jit(out_idx=[1], pass_configs={"tl.ascend_memory_planning": False})
def unused_kernel(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            spare = T.alloc_ub((N,), "float32")  # never used: the original drops it
            x = T.alloc_ub((N,), "float32")
            y = T.alloc_ub((N,), "float32")
            z = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A, x)
                T.tile.exp(y, x)
                T.tile.add(z, y, x)
                T.copy(z, B)

    return main


def test_a_buffer_nothing_uses_takes_no_bytes():
    # The sequential layout (memory planning off): four 64 KiB buffers declared, three used,
    # 192 KiB, the physical UB.
    n = 16384
    a = RNG.standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(unused_kernel(n)(a), np.exp(a) + a, rtol=1e-5, atol=1e-5)


@tilelang.jit(out_idx=[2])
def flag_kernel(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), F: T.Tensor((2, 8), "int32"),
             B: T.Tensor((2, N), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            flag = T.alloc_ub((8,), "int32")
            x = T.alloc_ub((N,), "float32")
            T.copy(F[cid, :], flag)
            T.tile.sub(flag, flag, 1)  # computed on chip, then read by the scalar unit
            T.copy(A[cid, :], x)
            if flag[0] != 0:
                T.tile.exp(x, x)
            T.copy(x, B[cid, :])

    return main


def test_a_scalar_load_of_a_value_computed_on_chip():
    n = 64
    a = RNG.standard_normal((2, n)).astype(np.float32)
    f = np.array([[1] * 8, [5] * 8], dtype=np.int32)  # block 0: 1 - 1 = 0 keeps x
    k = flag_kernel(n)
    got = k(a, f)
    np.testing.assert_array_equal(got[0], a[0])
    np.testing.assert_allclose(got[1], np.exp(a[1]), rtol=1e-6)
    # Timing mode runs the subtraction too, so the branch follows the computed flag.
    skip = k.cycles(a, np.ones((2, 8), dtype=np.int32))
    take = k.cycles(a, np.full((2, 8), 5, dtype=np.int32))
    assert skip < take


@tilelang.jit(out_idx=[1])
def rows_kernel(R, C):
    @T.prim_func
    def main(A: T.Tensor((2, R, C), "float32"), B: T.Tensor((2, R, C), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            rows = T.alloc_ub((R, C), "float32")
            big = T.alloc_ub((R, C), "float32")
            if vid == 0:  # one vector core writes B: both would race on its rows
                for t in T.serial(2):
                    for r in T.serial(R):
                        T.copy(A[t, r, :], rows[r, :])  # the whole tile, a row at a time
                    T.copy(rows, B[t, :, :])
                    T.copy(A[t, :, :], big)
                    T.tile.exp(big, big)
                    T.copy(big, B[t, :, :])

    return main


def test_a_tile_filled_row_by_row_is_not_live_across_the_outer_loop():
    # rows and big are 96 KiB each: rows is refilled before every read, so it shares its
    # bytes with big (together they would need 192 KiB, over the usable UB).
    a = RNG.standard_normal((2, 24, 1024)).astype(np.float32)
    np.testing.assert_allclose(rows_kernel(24, 1024)(a), np.exp(a), rtol=1e-5)

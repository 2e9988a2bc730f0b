"""Issue 25's library ops through the front end (T.tile.sort / topk / merge_sort /
gather_mask / gatherb / createvecindex / arith_progression / round / atomic_add) against
numpy, and their must-fail cases."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T
from tilelang import TilelangError, TilepipeError

RNG = np.random.default_rng(25)


def pairs_ref(a, count):
    """The library's Sort: (value, index) pairs descending, ties by index, the source past
    `count` padded with -inf up to the next 32-element block."""
    aligned = (count + 31) // 32 * 32
    v = a[:aligned].astype(np.float64).copy()
    v[count:] = -np.inf
    order = np.argsort(-v, kind="stable")
    out = np.empty(2 * aligned)
    out[0::2], out[1::2] = v[order], order
    return out


@tilelang.jit(out_idx=[1, 2])
def sort_kernel(N, count, K, dtype):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), S: T.Tensor((2 * N,), dtype),
             P: T.Tensor((2 * K,), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), dtype)
            s = T.alloc_ub((2 * N,), dtype)
            p = T.alloc_ub((2 * K,), dtype)
            with T.Scope("V"):
                T.copy(A, x)
                T.tile.sort(s, x, count)
                T.tile.topk(p, x, K, count)
                T.copy(s, S)
                T.copy(p, P)

    return main


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_sort_and_topk_match_a_stable_descending_sort(dtype):
    a = RNG.integers(-20, 20, 96).astype(dtype)  # ties
    s, p = sort_kernel(96, 70, 10, dtype)(a)
    want = pairs_ref(a, 70)
    np.testing.assert_array_equal(s[:len(want)].astype(np.float64), want)
    np.testing.assert_array_equal(p.astype(np.float64), want[:20])


@tilelang.jit(out_idx=[1])
def sort_pad_kernel(N, count):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            s = T.alloc_ub((2 * N,), "float32")
            with T.Scope("V"):
                T.copy(A, x)
                T.tile.sort(s, x, count)
                T.copy(x, B)

    return main


def test_sort_pads_its_source_in_place_as_the_hardware_does():
    a = RNG.standard_normal(64).astype(np.float32)
    b = sort_pad_kernel(64, 20)(a)
    np.testing.assert_array_equal(b[:20], a[:20])
    assert np.all(b[20:32] == -np.inf)
    np.testing.assert_array_equal(b[32:], a[32:])


@tilelang.jit(out_idx=[4])
def merge_kernel(L, ways):
    @T.prim_func
    def main(A: T.Tensor((L,), "float32"), B: T.Tensor((L,), "float32"),
             C: T.Tensor((L,), "float32"), D: T.Tensor((L,), "float32"),
             M: T.Tensor((ways * L,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((L,), "float32")
            b = T.alloc_ub((L,), "float32")
            c = T.alloc_ub((L,), "float32")
            d = T.alloc_ub((L,), "float32")
            m = T.alloc_ub((ways * L,), "float32")
            with T.Scope("V"):
                T.copy(A, a)
                T.copy(B, b)
                T.copy(C, c)
                T.copy(D, d)
                if ways == 2:
                    T.tile.merge_sort(m, a, b)
                elif ways == 3:
                    T.tile.merge_sort(m, a, b, c)
                else:
                    T.tile.merge_sort(m, a, b, c, d)
                T.copy(m, M)

    return main


@pytest.mark.parametrize("ways", [2, 3, 4])
def test_merge_sort_merges_sorted_pair_lists(ways):
    L = 32
    lists = []
    for w in range(4):
        v = np.sort(RNG.standard_normal(L // 2).astype(np.float32))[::-1]
        blk = np.empty(L, np.float32)
        blk[0::2], blk[1::2] = v, np.arange(L // 2) + 100 * w
        lists.append(blk)
    m = merge_kernel(L, ways)(*lists)
    pairs = np.concatenate([x.reshape(-1, 2) for x in lists[:ways]])
    want = pairs[np.argsort(-pairs[:, 0], kind="stable")].reshape(-1)
    np.testing.assert_array_equal(m, want)


@tilelang.jit(out_idx=[2])
def sort32_kernel(N, dtype):
    per = 4 if dtype == "float16" else 2

    @T.prim_func
    def main(A: T.Tensor((N,), dtype), I: T.Tensor((N,), "uint32"),
             C: T.Tensor((per * N,), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((N,), dtype)
            i = T.alloc_ub((N,), "uint32")
            c = T.alloc_ub((per * N,), dtype)
            with T.Scope("V"):
                T.copy(A, a)
                T.copy(I, i)
                T.tile.sort32(c, a, i)
                T.copy(c, C)

    return main


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_sort32_sorts_each_block_of_32_with_its_index_bits(dtype):
    """Sort32 as the original's test reads it back: 8-byte (key, u32 index) pairs per block of
    32, descending; the index bits reinterpreted as the key's type."""
    N = 96
    a = RNG.integers(0, 20, N).astype(dtype)  # ties: stable by position
    # Indices as positions are: below 0x7c00 in each 16-bit half, no half is an f16 NaN or
    # inf pattern (the engine stores values: such a half would come back as the canonical NaN).
    idx = (RNG.integers(0, 16, N) << 16 | RNG.integers(0, 0x7c00, N)).astype(np.uint32)
    c = sort32_kernel(N, dtype)(a, idx)
    per = 4 if dtype == "float16" else 2
    pairs = c.reshape(N, per)
    for b in range(0, N, 32):
        order = b + np.argsort(-a[b:b + 32].astype(np.float64), kind="stable")
        np.testing.assert_array_equal(pairs[b:b + 32, 0], a[order])
        bits = pairs[b:b + 32, per // 2:].copy().view(np.uint32).ravel()
        np.testing.assert_array_equal(bits, idx[order])


@tilelang.jit(out_idx=[1])
def gather_mask_kernel(N, pattern, dtype):
    kept = {"P0101": (N + 1) // 2, "P1010": N // 2, "P1111": N}.get(pattern, N // 4)

    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((kept,), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), dtype)
            y = T.alloc_ub((kept,), dtype)
            with T.Scope("V"):
                T.copy(A, x)
                T.tile.gather_mask(y, x, pattern)
                T.copy(y, B)

    return main


@pytest.mark.parametrize("pattern,start,step", [("P0101", 0, 2), ("P1010", 1, 2),
                                                ("P0001", 0, 4), ("P0010", 1, 4),
                                                ("P0100", 2, 4), ("P1000", 3, 4),
                                                ("P1111", 0, 1)])
@pytest.mark.parametrize("dtype", ["float32", "int16"])
def test_gather_mask_builtin_patterns(pattern, start, step, dtype):
    a = RNG.integers(-1000, 1000, 128).astype(dtype)
    np.testing.assert_array_equal(gather_mask_kernel(128, pattern, dtype)(a), a[start::step])


@tilelang.jit(out_idx=[2])
def gather_mask_custom_kernel(N, n):
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), I: T.Tensor((n,), "uint32"),
             B: T.Tensor((n,), "int32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "int32")
            i = T.alloc_ub((n,), "uint32")
            y = T.alloc_ub((n,), "int32")
            with T.Scope("V"):
                T.copy(A, x)
                T.copy(I, i)
                T.tile.gather_mask(y, x, i)
                T.copy(y, B)

    return main


def test_gather_mask_with_a_uint32_buffer_gathers_by_element_index():
    a = RNG.integers(-1000, 1000, 64).astype(np.int32)
    idx = np.array([1, 2, 2, 5, 63, 6, 0, 8], np.uint32)
    np.testing.assert_array_equal(gather_mask_custom_kernel(64, 8)(a, idx), a[idx])


@tilelang.jit(out_idx=[2])
def gatherb_kernel(N, dtype, reps):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), O: T.Tensor((8 * reps,), "uint32"),
             B: T.Tensor((N,), dtype)):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), dtype)
            o = T.alloc_ub((8 * reps,), "uint32")
            y = T.alloc_ub((N,), dtype)
            with T.Scope("V"):
                T.copy(A, x)
                T.copy(O, o)
                T.tile.gatherb(y, x, o, reps, 1, 8)
                T.copy(y, B)

    return main


@pytest.mark.parametrize("dtype,size", [("uint16", 2), ("int32", 4)])
def test_gatherb_moves_32_byte_blocks(dtype, size):
    per = 32 // size
    n = 16 * per  # 16 blocks: two repeats of 8
    a = RNG.integers(0, 30000, n).astype(dtype)
    blocks = RNG.permutation(16)
    o = (blocks * 32).astype(np.uint32)
    want = np.concatenate([a[b * per:(b + 1) * per] for b in blocks])
    np.testing.assert_array_equal(gatherb_kernel(n, dtype, 2)(a, o), want)


@tilelang.jit(out_idx=[0, 1])
def index_kernel(N, first, dtype):
    @T.prim_func
    def main(C: T.Tensor((2, N), dtype), D: T.Tensor((N,), "int32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            c = T.alloc_ub((N,), dtype)
            d = T.alloc_ub((N,), "int32")
            with T.Scope("V"):
                T.tile.createvecindex(c, first + cid)
                T.tile.arith_progression(d, cid * 1000, 1, N)
                T.copy(c, C[cid, :])
                if cid == 1:
                    T.copy(d, D)

    return main


@pytest.mark.parametrize("dtype", ["int32", "int16", "float16", "float32"])
def test_createvecindex_and_arith_progression(dtype):
    c, d = index_kernel(64, 5, dtype)()
    np.testing.assert_array_equal(c, np.stack([np.arange(5, 69), np.arange(6, 70)]).astype(dtype))
    np.testing.assert_array_equal(d, np.arange(1000, 1064))


@tilelang.jit(out_idx=[1])
def round_kernel(N):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A, x)
                T.tile.round(x, x, N)
                T.copy(x, B)

    return main


def test_round_rounds_halves_away_from_zero():
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.7] * 8, np.float32)
    x = a.astype(np.float64)  # exact: 0.49999997 + 0.5 would round up in float32
    want = (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(np.float32)
    np.testing.assert_array_equal(round_kernel(64)(a), want)


def atomic_kernel(blocks, dtype):
    @T.prim_func
    def main(C: T.Tensor((4, 32), dtype)):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            u = T.alloc_ub((4, 32), dtype)
            T.tile.fill(u, cid + 1)
            T.tile.atomic_add(C[0, 0], u)

    return main


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_atomic_add_from_every_vector_core_accumulates(dtype):
    c = np.full((4, 32), 0.25, dtype)
    k = tilelang.compile(atomic_kernel(4, dtype), pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_CV_COMBINE: True})
    k(c)
    # 4 blocks x 2 vector cores add cid + 1 onto what was there
    np.testing.assert_array_equal(c, np.full((4, 32), 0.25 + 2 * (1 + 2 + 3 + 4), dtype))
    k.check(c)  # concurrent atomic adds are not a race


@tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_ASCEND_AUTO_CV_COMBINE: True})
def atomic_l0c_kernel(blocks):
    @T.prim_func
    def main(A: T.Tensor((16, 32), "float16"), B: T.Tensor((32, 16), "float16"),
             C: T.Tensor((16, 16), "float32")):
        with T.Kernel(blocks, is_npu=True) as (cid, vid):
            a = T.alloc_L1((16, 32), "float16")
            b = T.alloc_L1((32, 16), "float16")
            c = T.alloc_L0C((16, 16), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm_v0(a, b, c, init=True)
            T.tile.atomic_add(C, c)

    return main


def test_atomic_add_from_l0c_adds_every_blocks_product():
    a = RNG.standard_normal((16, 32)).astype(np.float16)
    b = RNG.standard_normal((32, 16)).astype(np.float16)
    c = np.zeros((16, 16), np.float32)
    atomic_l0c_kernel(3)(a, b, c)
    prod = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, 3 * prod, rtol=1e-5, atol=1e-5)


def test_sort_with_a_run_time_count_is_an_error_at_the_line():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            x = T.alloc_ub((64,), "float32")
            s = T.alloc_ub((128,), "float32")
            with T.Scope("V"):
                T.copy(A, x)
                T.tile.sort(s, x, 30 + cid)
                T.copy(s, B)

    with pytest.raises(TilelangError, match="run-time valid count") as e:
        tilelang.compile(main)(np.zeros(64, np.float32), np.zeros(128, np.float32))
    assert e.value.loc[0].endswith("test_ops25.py")  # located at the user's line


def test_sort_of_a_source_not_in_whole_blocks_is_a_verifier_error():
    @T.prim_func
    def main(A: T.Tensor((40,), "float32"), B: T.Tensor((80,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((40,), "float32")
            s = T.alloc_ub((80,), "float32")
            with T.Scope("V"):
                T.copy(A, x)
                T.tile.sort(s, x, 40)
                T.copy(s, B)

    with pytest.raises(TilepipeError, match="expected a multiple of 32"):
        tilelang.compile(main)(np.zeros(40, np.float32), np.zeros(80, np.float32))


def test_arith_progression_with_another_step_is_an_error():
    @T.prim_func
    def main(D: T.Tensor((64,), "int32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            d = T.alloc_ub((64,), "int32")
            with T.Scope("V"):
                T.tile.arith_progression(d, 0, 3, 64)
                T.copy(d, D)

    with pytest.raises(TilelangError, match="step 3 is not modelled"):
        tilelang.compile(main)(np.zeros(64, np.int32))


@tilelang.jit(out_idx=[-1])
def bits_as_float(write_after):
    @T.prim_func
    def main(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((64,), "int32")
            f = T.alloc_ub((64,), "float32")
            g = T.alloc_ub((64,), "float32")
            with T.Scope("V"):
                T.copy(A, a)
                T.barrier_all()
                T.tile.add(a, a, 1)
                T.reinterpretcast(f, a, "float")
                if write_after:
                    T.tile.add(a, a, 1)  # MARK-write-after
                T.tile.mul(g, f, 2.0)
                T.barrier_all()
                T.copy(g, B)

    return main


def test_reinterpretcast_reads_the_bytes_as_the_other_dtype():
    """rope.py's T.reinterpretcast(mask_ub, mask_ub_i32, "uint32_t"): a view of the bytes,
    modelled as their copy at the cast; a kernel where the two would differ stops at its
    line."""
    a = np.array([1.0, -2.5, 3.25, 0.0] * 16, np.float32).view(np.int32) - 1
    np.testing.assert_array_equal(bits_as_float(False)(a), (a + 1).view(np.float32) * 2)
    with pytest.raises(TilepipeError, match="reads 'f', a view of 'a', after 'a' was written"):
        bits_as_float(True)

"""`x = buf[i]` in a kernel scope is a binding read once where it stands (ir::LetStmt), as
the original's parser makes it a LetStmt: not an element read written into every use."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def halves_gather(rows):
    """Row j of Out is row table[idx[j] // 4] * 4 + idx[j] % 4 of Src, copied in two
    column halves through the same bound row."""

    @T.prim_func
    def main(Src: T.Tensor((16, 16), "float32"), Table: T.Tensor((4,), "int32"),
             Idx: T.Tensor((rows,), "int32"), Out: T.Tensor((rows, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                idx_ub = T.alloc_ub((rows,), "int32")
                row = T.alloc_ub((rows, 16), "float32")
                T.copy(Idx, idx_ub)
                T.set_flag("mte2", "s", 0)
                T.wait_flag("mte2", "s", 0)
                for j in T.serial(rows):
                    at = idx_ub[j]
                    page = Table[at // 4]
                    r = page * 4 + at % 4
                    T.copy(Src[r, 0:8], row[j, 0:8])
                    T.copy(Src[r, 8:16], row[j, 8:16])
                T.set_flag("mte2", "mte3", 0)
                T.wait_flag("mte2", "mte3", 0)
                T.copy(row, Out)

    return main


def test_a_bound_element_is_read_once_and_the_rest_of_the_block_reads_the_name():
    k = halves_gather(4)
    src = np.arange(256, dtype=np.float32).reshape(16, 16)
    table = np.array([2, 0, 3, 1], dtype=np.int32)
    idx = np.array([5, 1, 14, 0], dtype=np.int32)
    out = k(src, table, idx)
    want = np.stack([src[table[i // 4] * 4 + i % 4] for i in idx])
    np.testing.assert_array_equal(out, want)
    text = k.get_ir(after_passes=False)
    assert "let at = load(idx_ub[" in text, text
    assert "let page = load(Table[(at / 4)])" in text, text
    # `r` reads no element itself: written into its uses, which read `page`, not the table.
    assert text.count("load(") == 2, text


@tilelang.jit(out_idx=[-1])
def last_marked_row(n):
    """Out = the row of Src after the last row whose Mark is positive, found by a
    T.alloc_var stored under a run-time if inside a run-time loop."""

    @T.prim_func
    def main(Src: T.Tensor((n, 16), "float32"), Mark: T.Tensor((n,), "int32"),
             Out: T.Tensor((1, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                mark_ub = T.alloc_ub((n,), "int32")
                row = T.alloc_ub((1, 16), "float32")
                last = T.alloc_var("int32", init=0)
                T.copy(Mark, mark_ub)
                T.set_flag("mte2", "s", 0)
                T.wait_flag("mte2", "s", 0)
                for j in T.serial(n - 1):
                    if mark_ub[j] > 0:
                        last = j + 1
                T.copy(Src[last, 0:16], row)
                T.set_flag("mte2", "mte3", 0)
                T.wait_flag("mte2", "mte3", 0)
                T.copy(row, Out)

    return main


def test_an_alloc_var_stored_under_a_run_time_if_is_a_register():
    k = last_marked_row(8)
    src = np.arange(128, dtype=np.float32).reshape(8, 16)
    for mark, want in (([0, 1, 0, 1, 0, 0, 0, 0], 4), ([0] * 8, 0), ([1] * 8, 7)):
        out = k(src, np.array(mark, dtype=np.int32))
        np.testing.assert_array_equal(out, src[want:want + 1])
    text = k.get_ir(after_passes=False)
    assert "let last = 0" in text and "let last = (j + 1)" in text, text


@tilelang.jit(out_idx=[-1])
def read_before_its_store(n):
    @T.prim_func
    def main(Src: T.Tensor((n, 16), "float32"), Out: T.Tensor((n, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                row = T.alloc_ub((1, 16), "float32")
                prev = T.alloc_var("int32", init=0)
                for j in T.serial(n):
                    T.copy(Src[prev, 0:16], row)
                    T.set_flag("mte2", "mte3", 0)
                    T.wait_flag("mte2", "mte3", 0)
                    T.copy(row, Out[j, 0:16])
                    T.set_flag("mte3", "mte2", 0)
                    T.wait_flag("mte3", "mte2", 0)
                    if j % 2 == 0:
                        prev = j

    return main


def test_a_read_under_the_loop_before_the_store_there_reads_the_last_iterations_store():
    """`prev` is read at the top of each iteration and stored at its end: it is a register
    from the loop's entry (the loop stores it), so iteration j reads what j - 1 left."""
    src = np.arange(64, dtype=np.float32).reshape(4, 16)
    np.testing.assert_array_equal(read_before_its_store(4)(src), src[[0, 0, 0, 2]])


@tilelang.jit(out_idx=[-1])
def two_bound_rows(n):
    """Row j of X into buf[at], then buf[bt] out, at / bt bound from one index tile: two
    different elements, whatever the names (the dependence analysis compares variables by
    identity, and reads a bound index as data)."""

    @T.prim_func
    def main(X: T.Tensor((n, 16), "float32"), Idx: T.Tensor((2 * n,), "int32"),
             Out: T.Tensor((n, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("V"):
                idx_ub = T.alloc_ub((2 * n,), "int32")
                buf = T.alloc_ub((4, 16), "float32")
                tmp = T.alloc_ub((4, 16), "float32")
                x = T.alloc_ub((1, 16), "float32")
                T.copy(Idx, idx_ub)
                T.tile.fill(buf, 0.0)
                for j in T.serial(n):
                    at = idx_ub[2 * j]
                    bt = idx_ub[2 * j + 1]
                    T.copy(X[j, 0:16], buf[at, 0:16])
                    T.copy(buf[bt, 0:16], x)
                    T.copy(x, Out[j, 0:16])
                    T.tile.fill(tmp, 1.0)

    return main


def test_two_bound_indices_name_different_elements_and_buffers_are_not_shared():
    x = np.arange(64, dtype=np.float32).reshape(4, 16) + 10
    out = two_bound_rows(4)(x, np.array([0, 0, 1, 0, 2, 1, 3, 2], dtype=np.int32))
    np.testing.assert_array_equal(out[:, 0], [10, 10, 26, 42])


@tilelang.jit(out_idx=[-1])
def paged_cube(n):
    """A page bound from a table in the loop, its K rows copied to L1: the copy moves with
    the iteration (l1_residency keeps it in the loop that binds the page)."""

    @T.prim_func
    def main(Q: T.Tensor((16, 16), "float16"), K: T.Tensor((64, 16), "float16"),
             Table: T.Tensor((n,), "int32"), O: T.Tensor((n * 16, 16), "float")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            with T.Scope("C"):
                q_l1 = T.alloc_L1((16, 16), "float16")
                k_l1 = T.alloc_L1((16, 16), "float16")
                c = T.alloc_L0C((16, 16), "float")
                T.copy(Q, q_l1)
                for i in T.serial(n):
                    page = Table[i]
                    T.copy(K[page * 16:(page + 1) * 16, 0:16], k_l1)
                    T.gemm_v0(q_l1, k_l1, c, transpose_B=True, init=True)
                    T.copy(c, O[i * 16:(i + 1) * 16, 0:16])

    return main


def test_a_copy_through_a_page_bound_in_its_loop_stays_in_the_loop():
    rng = np.random.default_rng(5)
    q = rng.random((16, 16)).astype(np.float16)
    k = rng.random((64, 16)).astype(np.float16)
    t = np.array([3, 1, 0, 2], dtype=np.int32)
    out = paged_cube(4)(q, k, t)
    want = np.concatenate([q.astype(np.float32) @ k[p * 16:(p + 1) * 16].astype(np.float32).T
                           for p in t])
    np.testing.assert_allclose(out, want, rtol=1e-3)


@tilelang.jit(out_idx=[-1])
def marked_row(n, kernel_level):
    """last_marked_row without hand flags, unscoped, or in a scope with the variable declared
    at kernel level (`kernel_level`)."""

    @T.prim_func
    def scoped(Src: T.Tensor((n, 16), "float32"), Mark: T.Tensor((n,), "int32"),
               Out: T.Tensor((1, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            last = T.alloc_var("int32", init=0)
            mark_ub = T.alloc_ub((n,), "int32")
            row = T.alloc_ub((1, 16), "float32")
            with T.Scope("V"):
                T.copy(Mark, mark_ub)
                for j in T.serial(n - 1):
                    if mark_ub[j] > 0:
                        last = j + 1
                T.copy(Src[last, 0:16], row)
                T.copy(row, Out)

    @T.prim_func
    def unscoped(Src: T.Tensor((n, 16), "float32"), Mark: T.Tensor((n,), "int32"),
                 Out: T.Tensor((1, 16), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            last = T.alloc_var("int32", init=0)
            mark_ub = T.alloc_ub((n,), "int32")
            row = T.alloc_ub((1, 16), "float32")
            T.copy(Mark, mark_ub)
            for j in T.serial(n - 1):
                if mark_ub[j] > 0:
                    last = j + 1
            T.copy(Src[last, 0:16], row)
            T.copy(row, Out)

    return scoped if kernel_level else unscoped


@pytest.mark.parametrize("kernel_level", [False, True])
def test_registers_in_an_unscoped_vector_kernel_or_an_automatically_synced_scope(kernel_level):
    """Unscoped without Cube work the kernel is the vector cores' (lowered as one Vector
    scope, where registers are kept); automatic sync takes the register as having no value,
    so the copy it indexes is ordered as one touching any row."""
    src = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    mark = np.array([0, 1, 0, 0, 1, 0, 0, 0], dtype=np.int32)
    out = marked_row(8, kernel_level=kernel_level)(src, mark)
    np.testing.assert_array_equal(out, src[5:6])

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


def test_a_read_under_the_loop_before_the_first_store_there_is_an_error_at_the_store():
    """`prev` is read at the top of each iteration and stored at its end: the first read
    was built with the initial value, which later iterations do not see."""
    with pytest.raises(tilelang.TilelangError, match=r"'prev' assigned under a run-time "
                       r"loop or if: it was read under run-time control before"):
        read_before_its_store(4).get_ir()

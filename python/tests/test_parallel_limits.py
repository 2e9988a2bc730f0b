"""The original's limits of T.Parallel, enforced where it enforces them: a nest of three or
more dimensions (its vector lowering takes one or two) and a coalesced_width that does not
divide the innermost extent are errors at the loop's line; `import tvm` (which the
original's `import tilelang` makes importable) gives tvm.TVMError, which catches them."""

import numpy as np
import pytest

import tilelang
import tilelang.language as T


def kernel(dims, width=None):
    shape = (4, 8, 64)[-dims:] if dims <= 3 else (2, 4, 8, 64)

    @T.prim_func
    def main(A: T.Tensor(shape, "float32"), C: T.Tensor(shape, "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub(shape, "float32")
            with T.Scope("V"):
                T.copy(A, a)
                if dims == 1:
                    for i in T.Parallel(*shape, coalesced_width=width):
                        a[i] = a[i] + 1.0
                elif dims == 2:
                    for i, j in T.Parallel(*shape, coalesced_width=width):
                        a[i, j] = a[i, j] + 1.0
                else:
                    for i, j, k in T.Parallel(*shape):  # MARK-3d
                        a[i, j, k] = a[i, j, k] + 1.0
                T.copy(a, C)

    return tilelang.compile(main, out_idx=[-1])


@pytest.mark.parametrize("dims,width", [(1, None), (2, None), (2, 16), (1, 64)])
def test_one_and_two_dimensional_nests_run_with_a_dividing_width(dims, width):
    shape = (4, 8, 64)[-dims:]
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    np.testing.assert_array_equal(kernel(dims, width)(a), a + 1)


def test_a_three_dimensional_nest_is_the_originals_compile_error():
    import tvm

    with pytest.raises(tvm.TVMError, match=r"T\.Parallel over 3 dimensions") as e:
        kernel(3)
    assert e.value.loc[1] == next(i for i, ln in enumerate(open(__file__), 1) if "MARK-3d" in ln)


@pytest.mark.parametrize("width", [7, 0])
def test_a_coalesced_width_that_does_not_divide_the_extent_is_an_error(width):
    with pytest.raises(tilelang.TilelangError, match="coalesced_width"):
        kernel(2, width)

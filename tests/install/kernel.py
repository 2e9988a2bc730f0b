"""A kernel run from an installed tilepipe (check.sh: cmake --install; pip_check.sh: pip
install into a venv): the package, the module and the chip configs must all come from the
installation whose root is argv[1], nothing from the checkout."""

import sys
import numpy as np
import _tilepipe
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def plus_one(N):
    @T.prim_func
    def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((N,), "float32")
            with T.Scope("V"):
                T.copy(A[vid, :], x)
                T.tile.adds(x, x, 1.0)
                T.copy(x, B[vid, :])

    return main


prefix = sys.argv[1]
assert _tilepipe.__file__.startswith(prefix), _tilepipe.__file__
assert tilelang.__file__.startswith(prefix), tilelang.__file__
assert _tilepipe.config_dir().startswith(prefix), _tilepipe.config_dir()
a = np.arange(128, dtype="float32").reshape(2, 64)
np.testing.assert_array_equal(plus_one(64)(a), a + 1)
print("python kernel ok", round(plus_one(64).profile() * 1000, 3), "us")

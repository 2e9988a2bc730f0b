"""MatmulTemplate(M, N, K, ...).with_arch(Ascend()).recommend_hints(topk): block sizes
(block = [block_M, block_N], rstep = [block_K]) whose L1 tiles and L0C accumulator fit the
die, ranked by the data they move from GM over the whole matmul (fewest bytes first), then by
how evenly the blocks fill the cores."""

from .._core import dtype_bytes
from .arch.ascend import Ascend


class Hint:
    def __init__(self, block, rstep, cost):
        self.block = list(block)
        self.rstep = list(rstep)
        self.cost = cost

    def __repr__(self):
        return f"Hint(block={self.block}, rstep={self.rstep})"


class MatmulTemplate:
    def __init__(self, M, N, K, in_dtype="float16", out_dtype="float16", accum_dtype="float32",
                 **kw):
        self.M, self.N, self.K = M, N, K
        self.in_dtype, self.out_dtype, self.accum_dtype = in_dtype, out_dtype, accum_dtype
        self.arch = None

    def with_arch(self, arch):
        self.arch = arch
        return self

    def recommend_hints(self, topk=10):
        arch = self.arch or Ascend()
        ib = dtype_bytes(self.in_dtype)
        cands = []
        for bm in (16, 32, 64, 128, 256):
            for bn in (16, 32, 64, 128, 256):
                for bk in (32, 64, 128, 256, 512):
                    if self.M % bm or self.N % bn or self.K % bk:
                        continue
                    if (bm + bn) * bk * ib > arch.l1_size or bm * bn * 4 > arch.l0c_size:
                        continue
                    blocks = (self.M // bm) * (self.N // bn)
                    moved = blocks * (bm + bn) * self.K * ib
                    waves = -(-blocks // arch.core_num)
                    fill = blocks / (waves * arch.core_num)
                    cands.append(Hint((bm, bn), (bk,), (moved * waves / fill, -bk)))
        cands.sort(key=lambda h: h.cost)
        return cands[:topk]

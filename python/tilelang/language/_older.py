"""Names of earlier TileLang-Ascend versions that scripts still call (versions of the
original's examples in the code index written against them), each with that version's
meaning:

- `T.tile.reduce_max / reduce_min / reduce_sum(out, buffer, tmp, dim)`: ascend_tile.py's
  reductions before `T.reduce_*` (destination first, a scratch buffer `tmp` the library
  needs and tilepipe does not);
- `T.add / T.sub / T.mul / T.div(dst, src0, src1)`: the PTO dialect's (`target="pto"`,
  tilelang/language/pto.py) element-wise ops at the top of `T`, which are `T.tile.*`'s.

T's package installs them (language/__init__.py); docs/python.md, "Newer scripts"."""

from .._core import Buffer, Region, err
from . import tile
from ._mem import _reduce
from .reduce_ascend import _legal_dim


def _tile_reduce(kind):
    def reduce_fn(out, buffer, tmp=None, dim=-1):
        if tmp is not None and not isinstance(tmp, (Buffer, Region)):
            raise err(f"T.tile.reduce_{kind}(out, buffer, tmp, dim): tmp is {tmp!r}, expected "
                      "a scratch buffer (the earlier form; the current one is "
                      f"T.reduce_{kind}(buffer, out, dim))")
        _reduce(kind, buffer, out, _legal_dim(dim, len(getattr(buffer, "shape", None) or
                                                        buffer.extents)), True)

    reduce_fn.__name__ = f"reduce_{kind}"
    return reduce_fn


TILE = {f"reduce_{k}": _tile_reduce(k) for k in ("max", "min", "sum")}
TOP = {k: getattr(tile, k) for k in ("add", "sub", "mul", "div")}

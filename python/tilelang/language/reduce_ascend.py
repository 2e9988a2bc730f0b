"""`tilelang.language.reduce_ascend`: the reductions with the original's calling forms —
`T.reduce_sum(src, dst, dim=-1, clear=True, real_shape=None)`, and positionally
`(src, dst, dim, clear)`, `(src, dst, dim, real_shape)`, `(src, dst, dim, real_shape, clear)`
or `(src, dst, dim, clear, real_shape)`. `real_shape` is the valid leading part of a tail
block: only that part of the source is reduced, into the matching part of the destination.
The axis is normalised to -1 (the last dimension) or a non-negative index."""

from .._core import TilelangError, err
from ..tvm import Call, is_decl
from ._mem import _reduce


class ReduceAxisError(TilelangError, ValueError):
    """A reduction axis outside the source's rank (also a ValueError, as in the original)."""


def _shape(x):
    shape = getattr(x, "shape", None)
    if shape is None and hasattr(x, "buffer"):
        shape = x.extents  # a Region
    return list(shape) if shape is not None else None


def _ndim(x):
    s = _shape(x)
    return len(s) if s is not None else None


def _legal_dim(dim, ndim):
    if ndim is None:
        return dim
    d = dim + ndim if dim < 0 else dim
    if not 0 <= d < ndim:
        e = err(f"reduce axis {dim} out of range for a {ndim}-D source",
                hint=f"use -1 (the last axis) or 0..{ndim - 1}")
        raise ReduceAxisError(e.message, loc=e.loc, hint=e.hint)
    return -1 if d == ndim - 1 else d


def _reduce_with_clear(buffer, out, reduce_type, dim, clear, real_shape):
    kind = reduce_type[len("reduce_"):]
    if real_shape is not None:
        real = [int(r) for r in real_shape]
        buffer = buffer[tuple(slice(0, r) for r in real)]
        kept = [r for d, r in enumerate(real) if d != (len(real) - 1 if dim == -1 else dim)]
        shp = _shape(out)
        if _ndim(out) == len(kept):
            out = out[tuple(slice(0, r) for r in kept)]
        elif shp is not None and len([d for d in shp if d != 1]) == 1:
            # a row / column destination of another rank (out [1, 8] for 4 results): the
            # results fill its leading elements, as the original writes them
            n = 1
            for r in kept:
                n *= r
            long = next(i for i, d in enumerate(shp) if d != 1)
            if shp[long] > n:
                out = out[tuple(slice(0, n if i == long else d) for i, d in enumerate(shp))]
    if is_decl(buffer) or is_decl(out):
        # declared buffers outside a kernel: the call the original builds (nothing runs)
        return Call("handle", "tl.ascend_reduce", [buffer, out, reduce_type, dim, clear])
    return _reduce(kind, buffer, out, dim, clear)


def _make(kind):
    def reduce_fn(buffer, out, *args, dim=None, clear=None, real_shape=None):
        for a in args:
            if isinstance(a, bool):
                clear = a
            elif isinstance(a, int) and dim is None:
                dim = a
            elif isinstance(a, (list, tuple)):
                real_shape = list(a)
            else:
                raise err(f"T.reduce_{kind}: unexpected argument {a!r}",
                          hint="(src, dst, dim, clear) or (src, dst, dim, real_shape, clear)")
        dim = -1 if dim is None else dim
        clear = True if clear is None else clear
        return _reduce_with_clear(buffer, out, f"reduce_{kind}", _legal_dim(dim, _ndim(buffer)),
                                  clear, real_shape)

    reduce_fn.__name__ = f"reduce_{kind}"
    return reduce_fn


reduce_sum = _make("sum")
reduce_max = _make("max")
reduce_min = _make("min")

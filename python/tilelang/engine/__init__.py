"""`tilelang.engine`: the original's ahead-of-time lowering to an NPU library."""

from .._core import unsupported as _unsupported


def lower(func, *args, **kwargs):
    raise _unsupported("tilelang.engine.lower (ahead-of-time compilation to an NPU library)",
                       "tilepipe simulates kernels: wrap the prim_func with @tilelang.jit and "
                       "call it")

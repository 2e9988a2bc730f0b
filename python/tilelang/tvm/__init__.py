"""`tilelang.tvm`: the few TVM names scripts reach through tilelang (tilepipe has no TVM).
`tir.decl_buffer(shape, dtype)` declares a buffer description with a shape and dtype, which
the front end's calls accept where they only inspect shapes."""

from types import SimpleNamespace


class _DeclBuffer:
    def __init__(self, shape, dtype="float32", name="buffer", *a, **kw):
        self.shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
        self.dtype = str(dtype)
        self.name = name

    def __repr__(self):
        return f"decl_buffer({self.name}, {self.shape}, {self.dtype})"


tir = SimpleNamespace(decl_buffer=_DeclBuffer)

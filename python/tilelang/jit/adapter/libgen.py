"""`tilelang.jit.adapter.libgen`: the original's NPU library builder (no host model)."""

from ..._core import unsupported as _unsupported


class LibraryGenerator:
    """Builds and loads a kernel's NPU library in the original; tilepipe has none to build."""

    def __init__(self, *a, **kw):
        pass

    def update_lib_code(self, code):
        self.lib_code = code

    def compile_lib(self, *a, **kw):
        raise _unsupported("tilelang.jit.adapter.libgen.LibraryGenerator.compile_lib",
                           "tilepipe simulates kernels and builds no NPU library")

    def load_lib(self, *a, **kw):
        raise _unsupported("tilelang.jit.adapter.libgen.LibraryGenerator.load_lib",
                           "tilepipe simulates kernels and builds no NPU library")

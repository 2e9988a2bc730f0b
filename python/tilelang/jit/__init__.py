"""`tilelang.jit`: the decorator (`@tilelang.jit(...)`, this module is callable) and the
original's module path (`tilelang.jit.adapter`, whose NPU library loader has no host model)."""

import sys
import types

from .._jit import JITKernel, compile, jit as _jit  # noqa: F401


class _JitModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return _jit(*args, **kwargs)


sys.modules[__name__].__class__ = _JitModule

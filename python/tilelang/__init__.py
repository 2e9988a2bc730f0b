"""tilelang on tilepipe: TileLang-Ascend's Python kernel language, lowered to tilepipe's tile
IR and run on its simulator of one A2/A3 die (docs/python.md)."""

import importlib.util
import os
import sys

from . import _core
from ._core import HazardWarning, KernelCheckError, TilelangError, TilepipeError  # noqa: F401
from . import language  # noqa: F401  (first: the modules below build on it)
from . import _jit
from ._jit import JITKernel, PassConfigKey, compile  # noqa: F401
from ._jit import OutOfBoundsTileWarning, TensorViewWarning  # noqa: F401
from . import jit  # noqa: F401  (callable: @tilelang.jit)
from . import profiler  # noqa: F401
from .profiler import Profiler  # noqa: F401
from . import intrinsics  # noqa: F401
from . import math  # noqa: F401
from . import tvm  # noqa: F401
from . import cache  # noqa: F401
from .cache import disable_cache, enable_cache, is_cache_enabled  # noqa: F401
from . import carver  # noqa: F401
from . import engine  # noqa: F401
from . import utils  # noqa: F401
from .autotune import autotune  # noqa: F401
from .math import cdiv, next_power_of_2  # noqa: F401

__version__ = "0.1.0+tilepipe"

if "tvm" not in sys.modules and importlib.util.find_spec("tvm") is None:
    # The original's `import tilelang` puts its TVM on the path, so its scripts and tests
    # `import tvm` (for tvm.TVMError, tvm.tir); without a TVM that is tilelang.tvm.
    sys.modules["tvm"] = tvm


class DataType(str):
    """`tilelang.DataType("float16")`: a dtype name."""

    def __new__(cls, name):
        return str.__new__(cls, _core.dtype_name(name))

    @property
    def bits(self):
        return 8 * _core.dtype_bytes(str(self))


_cache_dir = [os.path.join(os.path.expanduser("~"), ".tilelang", "cache")]


def set_cache_dir(path):
    """The original's on-disk cache directory: recorded for get_cache_dir (tilepipe's cache
    is in memory, nothing is written there)."""
    _cache_dir[0] = os.fspath(path)


def get_cache_dir():
    return _cache_dir[0]


def __getattr__(name):
    return _core.surface_name(f"tilelang.{name}", f"tilelang.{name}")


def set_chip(name):
    """Chip config the kernels compile and simulate for: "a3" (default) or "a2" (any name of
    the configs directory, case-insensitive, or a path ending in .json). An unknown name is an
    error listing the chips; kernels compiled before recompile for the new chip."""
    _jit.set_chip(name)


def set_max_cycles(n):
    """Cycle budget of every later simulation (default 1e13): a run past it stops with an
    error naming the kernel and the budget, as `tilepipe run --max-cycles` does."""
    _jit.set_max_cycles(n)

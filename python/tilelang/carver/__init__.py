"""`tilelang.carver`: tile-size recommendations for a matmul on an Ascend die (the
original's roller: hints of block sizes that fit the on-chip buffers, best first)."""

from . import arch  # noqa: F401
from .arch.ascend import Ascend  # noqa: F401
from .template import MatmulTemplate  # noqa: F401

"""Where the tools find tilepipe's Python package, its extension, the host torch and the
TileLang-Ascend examples; importing this module puts the first two on sys.path and sets up
the runner's host side (Debian's torch with the npu device on the CPU, else the numpy
stand-in)."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "python"),
                os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))]
from tilepipe import runner  # noqa: E402

runner.use_host_torch()
CORPUS = os.environ.get("TILELANG_CORPUS",
                        os.path.join(os.path.dirname(ROOT), "shared", "tilelang-ascend", "examples"))

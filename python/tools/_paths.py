"""Where the tools find tilepipe's Python package, its extension, the torch shim and the
TileLang-Ascend examples; importing this module puts the first three on sys.path."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "python", "tilepipe", "_shim"),
                os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build"))]
CORPUS = os.environ.get("TILELANG_CORPUS",
                        os.path.join(os.path.dirname(ROOT), "shared", "tilelang-ascend", "examples"))

"""pytest setup: the package from python/, the extension from the build tree."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build")))
CORPUS = os.environ.get("TILELANG_CORPUS",
                        os.path.join(os.path.dirname(ROOT), "shared", "tilelang-ascend", "examples"))

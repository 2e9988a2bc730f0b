"""pytest setup: the package from python/, the extension from the build tree."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.environ.get("TILEPIPE_BUILD_DIR", os.path.join(ROOT, "build")))
CORPUS = os.environ.get("TILELANG_CORPUS",
                        os.path.join(os.path.dirname(ROOT), "shared", "tilelang-ascend", "examples"))


def kernel_from_body(tmp_path, body, name):
    """A `@tilelang.jit(out_idx=[-1])` factory `k(N=64)` whose prim_func `main(A, B)` (two
    float32 [2, N] tensors) has `body`, written to tmp_path/NAME.py and imported (the front
    end reads kernel sources from files): (the file's path, the factory)."""
    import importlib
    import textwrap

    src = textwrap.dedent('''
        import tilelang
        import tilelang.language as T


        @tilelang.jit(out_idx=[-1])
        def k(N=64):
            @T.prim_func
            def main(A: T.Tensor((2, N), "float32"), B: T.Tensor((2, N), "float32")):
        ''') + textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8) + \
        "\n\n    return main\n"
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    sys.path.insert(0, str(tmp_path))
    try:
        return path, importlib.import_module(name).k
    finally:
        sys.path.remove(str(tmp_path))

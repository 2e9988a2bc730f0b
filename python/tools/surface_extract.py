"""Writes python/tests/data/tilelang_surface.txt: the public names of the original
TileLang-Ascend's language (`T.*`, `T.tile.*`), package (`tilelang.*`) and pass configs
(`tilelang.PassConfigKey.*`), read statically (ast, nothing imported) from a git checkout of
tile-ai/tilelang-ascend and of the TVM its submodule pins (the `from tvm.script.parser.tir
import *` part of `T`).

    python/tools/surface_extract.py --tilelang GITDIR[@COMMIT] --tvm GITDIR[@COMMIT]

A module's public names are its `__all__` when it has one, else its top-level defs, classes
and assignments not starting with `_` (names it imports from outside the package are not
re-exported by intent). The keys a newer version of pass_config.py added after the checkout
(read in the code index) are NEWER_KEYS."""

import argparse
import ast
import os
import re
import subprocess

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data",
                   "tilelang_surface.txt")

# Keys of the newest tilelang/transform/pass_config.py in the code index (after the checkout):
# name, string, where it is defined.
NEWER_KEYS = [
    ("TL_ENABLE_FAST_MATH", "tl.enable_fast_math", "pass_config.py (code index, newest)"),
    ("TL_DISABLE_THREAD_STORAGE_SYNC", "tl.disable_thread_storage_sync",
     "pass_config.py (code index, newest)"),
    ("TL_ASCEND_AUTO_SYNC_VS", "tl.ascend_auto_sync_vs", "pass_config.py (code index, newest)"),
    ("TL_ASCEND_TAIL_MASK", "tl.ascend_tail_mask", "pass_config.py (code index, newest)"),
    ("TL_ASCEND_PTO_USE_PIPE_IN_CV_COPY", "tl.ascend_pto_use_pipe_in_cv_copy",
     "pass_config.py (code index, newest)"),
    ("TL_ASCEND_EXCEPTION_DUMP", "tl.ascend_exception_dump", "pass_config.py (code index, newest)"),
    ("TL_ASCEND_VECTOR_MASK_REUSE", "tl.ascend_vector_mask_reuse",
     "src/transform/ascend_vector_mask_legalize.cc + docs (code index, newest)"),
]

# T.tile ops added after the checkout, seen in the code index (a design note adding them to
# ascend_tile.py): name, where.
NEWER_TILE = [
    ("erf", "ascend_tile.py (code index, newer: T.tile.erf design note)"),
    ("tanh", "ascend_tile.py (code index, newer: T.tile.tanh design note)"),
]

# TVM's vector-lane dtypes (float16x4, int8x64, ...): no tile kernel names them; the front end
# refuses them by pattern (tilelang/_surface.py), so the list does not carry ~150 of them.
_LANES = re.compile(r"^[a-z0-9_]+x\d+$")


class Repo:
    def __init__(self, spec):
        self.git, _, rev = spec.partition("@")
        self.rev = subprocess.check_output(["git", "--git-dir", self.git, "rev-parse",
                                            rev or "HEAD"], text=True).strip()

    def read(self, path):
        try:
            return subprocess.check_output(["git", "--git-dir", self.git, "show",
                                            f"{self.rev}:{path}"], text=True,
                                           stderr=subprocess.DEVNULL)
        except subprocess.CalledProcessError:
            return None


def module_file(repo, mod):
    """tilelang.language.tir.ir -> its .py path in the repo (a package's __init__.py)."""
    base = mod.replace(".", "/")
    for path in (base + ".py", base + "/__init__.py"):
        if repo.read(path) is not None:
            return path
    return None


def resolve(package, level, module):
    parts = package.split(".")
    base = parts[:len(parts) - level + 1] if level else []
    return ".".join(base + ([module] if module else [])) if level else module


def exports(repo, mod, root, seen=None):
    """{public name: module path it comes from} of module `mod` (star-import view)."""
    seen = seen or set()
    path = module_file(repo, mod)
    if path is None or mod in seen:
        return {}
    seen.add(mod)
    tree = ast.parse(repo.read(path))
    package = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    names, explicit = {}, None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                for t in node.targets):
            explicit = [e.value for e in ast.walk(node.value)
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = path
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names[t.id] = path
        elif isinstance(node, ast.Delete):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names.pop(t.id, None)
        elif isinstance(node, ast.ImportFrom):
            src = resolve(package, node.level, node.module)
            if not src or not src.startswith(root):
                continue
            for a in node.names:
                if a.name == "*":
                    names.update(exports(repo, src, root, seen))
                else:
                    names[a.asname or a.name] = module_file(repo, src) or path
    if explicit is not None:
        return {n: names.get(n, path) for n in explicit}
    return {n: p for n, p in names.items() if not n.startswith("_")}


def star_of_tvm(tvm):
    """`from tvm.script.parser.tir import *`: its __all__ (ir_builder.tir.ir's plus a few)."""
    tree = ast.parse(tvm.read("python/tvm/script/ir_builder/tir/ir.py"))
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in
                                                ("__all__", "bases") for t in node.targets):
            names += [e.value for e in ast.walk(node.value)
                      if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    names += ["Buffer", "Ptr", "bool", "prim_func", "macro"]
    return {n: "tvm:python/tvm/script/ir_builder/tir/ir.py" for n in names
            if not _LANES.match(n)}


def language(repo, tvm):
    """T.* and T.tile.*: tilelang/language/__init__.py's imports and defs, in order."""
    path = "tilelang/language/__init__.py"
    tree = ast.parse(repo.read(path))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            src = resolve("tilelang.language", node.level, node.module)
            if src == "tvm.script.parser.tir":
                out.update({f"T.{n}": p for n, p in star_of_tvm(tvm).items()})
                continue
            if not src.startswith("tilelang"):
                continue
            for a in node.names:
                if a.name == "*":
                    out.update({f"T.{n}": p for n, p in exports(repo, src, "tilelang").items()})
                elif src == "tilelang.language" and a.name == "ascend_tile":
                    tile = exports(repo, "tilelang.language.ascend_tile", "tilelang")
                    out.update({f"T.{a.asname}.{n}": p for n, p in tile.items()})
                elif not (a.asname or a.name).startswith("_"):
                    out[f"T.{a.asname or a.name}"] = module_file(repo, src + "." + a.name) or \
                        module_file(repo, src) or path
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            out[f"T.{node.name}"] = path
    return out


def package(repo):
    out = {}
    for n, p in exports(repo, "tilelang", "tilelang").items():
        out[f"tilelang.{n}"] = p
    tree = ast.parse(repo.read("tilelang/__init__.py"))
    for node in tree.body:  # `from . import (transform, language, ...)`: submodules
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
            for a in node.names:
                out[f"tilelang.{a.asname or a.name}"] = "tilelang/__init__.py"
    for key in ("set_log_level", "logger", "TqdmLoggingHandler", "libinfo",
                "SKIP_LOADING_TILELANG_SO"):
        out.pop(f"tilelang.{key}", None)  # logging and library loading, not the language
    return out


def pass_configs(repo):
    path = "tilelang/transform/pass_config.py"
    tree = ast.parse(repo.read(path))
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "PassConfigKey":
            for st in node.body:
                if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant):
                    out[f"PassConfigKey.{st.targets[0].id}"] = f"{path} = {st.value.value!r}"
    for name, string, where in NEWER_KEYS:
        out.setdefault(f"PassConfigKey.{name}", f"{where} = {string!r}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tilelang", required=True, help="GITDIR[@COMMIT] of tile-ai/tilelang-ascend")
    ap.add_argument("--tvm", required=True, help="GITDIR[@COMMIT] of the TVM it pins")
    ap.add_argument("--out", default=OUT)
    a = ap.parse_args()
    tl, tvm = Repo(a.tilelang), Repo(a.tvm)
    names = {**language(tl, tvm), **package(tl), **pass_configs(tl)}
    for name, where in NEWER_TILE:
        names.setdefault(f"T.tile.{name}", where)
    with open(a.out, "w") as f:
        f.write("# The original's public surface, one name and where it is defined per line.\n"
                f"# tile-ai/tilelang-ascend {tl.rev} (branch ascendc_pto, newest commit of the\n"
                f"# snapshot), its TVM (3rdparty/tvm) {tvm.rev}; pass-config keys added after\n"
                "# that commit from the newest pass_config.py in the code index, and T.tile ops\n"
                "# added since (NEWER_TILE).\n"
                "# Generated by python/tools/surface_extract.py; checked by "
                "test_lang_surface.py.\n")
        for n in sorted(names):
            f.write(f"{n}\t{names[n]}\n")
    print(f"{len(names)} names -> {a.out}")


if __name__ == "__main__":
    main()

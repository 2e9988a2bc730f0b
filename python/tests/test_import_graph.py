"""The front end's import graph (issue 45): no module of tilelang or tilepipe imports another
that imports it back (directly or around a longer circle), and a function imports only
optional dependencies (torch, dask, ...), never one of the package's own modules: shared
pieces live in leaf modules that everything imports at the top."""

import ast
import os

import pytest

PY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Package roots: the directory a module name is relative to. The numpy-backed torch stand-in
# is put on the path as its own top-level packages (torch, torch_npu).
ROOTS = [(os.path.join(PY, "tilelang"), PY), (os.path.join(PY, "tilepipe", "_shim"),
                                               os.path.join(PY, "tilepipe", "_shim")),
         (os.path.join(PY, "tilepipe"), PY)]
# Optional dependencies a function may import (the stand-in's packages are own modules only
# to themselves).
OPTIONAL = ("torch", "torch_npu")
OWN = ("tilelang", "tilepipe")


def _modules():
    """{module name: (path, is_package)} of every module of both packages."""
    mods = {}
    for top, base in ROOTS:
        for d, dirs, files in os.walk(top):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__" and
                             os.path.join(d, x) != os.path.join(PY, "tilepipe", "_shim"))
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, base)[:-3].split(os.sep)
                pkg = rel[-1] == "__init__"
                if pkg:
                    rel = rel[:-1]
                mods.setdefault(".".join(rel), (path, pkg))
    return mods


def _targets(node, mod, is_pkg, mods):
    """Own modules an import statement of `mod` loads explicitly (a package's __init__ for a
    name it defines, the submodule for a submodule)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
        return [n for n in names if n in mods]
    base = node.module or ""
    if node.level:
        parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
        parts = parts[:len(parts) - (node.level - 1)]
        base = ".".join(parts + ([base] if base else []))
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
    # `from PKG import name`: PKG's __init__ when a name is defined there, not a submodule
    # (importing a submodule loads its parent first, which every module of a package does)
    whole = [base] if base in mods and len(subs) < len(node.names) else []
    return whole + subs


def _top(mod):
    return mod.split(".")[0]


def _imports(mods):
    """(module-level edges {mod: {target: line}}, function-level imports [(mod, line, target)]).
    A function may import an optional dependency: the torch stand-in (torch is one for the
    rest), another top-level package (tilepipe loads the front end only for Python
    kernels), or an own module that imports one at its top (tilepipe._host.cube needs
    torch)."""
    edges, inner = {}, []
    for mod, (path, is_pkg) in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        edges[mod] = {}

        def walk(node, in_function):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for t in _targets(child, mod, is_pkg, mods):
                        if t == mod:
                            continue
                        if in_function and _top(mod) == _top(t):
                            inner.append((mod, child.lineno, t))
                        elif in_function:
                            continue
                        else:
                            edges[mod].setdefault(t, child.lineno)
                walk(child, in_function or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        walk(tree, False)
    optional = {m for m, ts in edges.items()
                if any(_top(t) in OPTIONAL and _top(t) != _top(m) for t in ts)}
    return edges, [(m, line, t) for m, line, t in inner if t not in optional]


def _cycles(edges):
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return comps


def test_graph_is_built():
    # The graph sees the imports it is meant to judge: the interpreter imports the core.
    edges, _ = _imports(_modules())
    assert "tilelang._core" in edges["tilelang._interp"]
    assert "tilelang.language" in edges["tilelang"]
    assert "torch" in edges["torch.nn"] or "torch.nn.functional" in edges["torch.nn"]


def test_cycle_detection_finds_a_circle():
    assert _cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == \
        [["a", "b", "c"]]
    assert _cycles({"a": {"b": 1}, "b": {}}) == []


def test_no_import_cycles():
    # The torch stand-in mirrors torch's own layout (torch.nn imports torch, as the real one
    # does): a copy of a third-party package's surface, not the front end, so it is left out.
    edges, _ = _imports(_modules())
    edges = {m: {t: line for t, line in ts.items() if _top(t) in OWN}
             for m, ts in edges.items() if _top(m) in OWN}
    comps = _cycles(edges)
    lines = []
    for comp in comps:
        for m in comp:
            for t, line in sorted(edges[m].items()):
                if t in comp:
                    lines.append(f"  {m}:{line} imports {t}")
    assert not comps, "modules importing each other in a circle:\n" + "\n".join(lines)


def test_no_function_level_imports_of_own_modules():
    _, inner = _imports(_modules())
    assert not inner, "function-level imports of the package's own modules (move the shared " \
        "piece into a leaf module imported at the top):\n" + \
        "\n".join(f"  {m}:{line} imports {t}" for m, line, t in sorted(inner))


if __name__ == "__main__":
    pytest.main([__file__])

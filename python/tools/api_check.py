"""The original's public API surface (python/tests/data/tilelang_api.txt: every `T.*` /
`tilelang.*` name its examples and language tests use) and the names a Python file uses:
what `tilepipe emit`'s files are checked against (test_emit.py, corpus_emit.py)."""

import ast
import os

API_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                        "data", "tilelang_api.txt")


def api_names():
    with open(API_FILE) as f:
        return {ln.strip() for ln in f if ln.strip() and not ln.startswith("#")}


def attribute_chains(tree):
    """Every maximal dotted name rooted at T or tilelang (T.tile.add, tilelang.jit, ...)."""
    chains, inner = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts, v = [], node
            while isinstance(v, ast.Attribute):
                parts.append(v.attr)
                v = v.value
            if isinstance(v, ast.Name) and v.id in ("T", "tilelang"):
                chain = ".".join([v.id] + parts[::-1])
                chains.add(chain)
                if isinstance(node.value, ast.Attribute):
                    inner.add(chain.rsplit(".", 1)[0])
    return chains - inner


def names_outside(source):
    """The API names a Python source uses that the original does not document, sorted."""
    return sorted(attribute_chains(ast.parse(source)) - api_names())

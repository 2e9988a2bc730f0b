"""Vid reduction: the original's AscendVidReduction pass (developer mode,
`T.Kernel(n, threads=2) as cid`: C:V = 1:2 with no `vid` in the source). The front end
applies the original's rules while it lowers the body (docs/python.md, "Vid reduction"):
UB buffers are allocated with half their first dimension, each vector core copies its half
of the GM rows (`vid * rows` on the GM dimension the UB's first one meets), and loops whose
variable indexes the first dimension of a halved buffer run half their trips. Buffers
filled or drained by a copy whose GM index holds a UB element (a gather, SFA's
`KV[b, idx_ub[i], ...]`) keep their shape."""

import ast

from . import _core
from ._core import cur, err
from ._core import _ext


def reducing():
    return cur().vid_threads == 2


_ALLOCS = ("alloc_shared", "alloc_ub", "alloc_fragment", "alloc_local")


def skip_names(body):
    """Names of the buffers the original leaves whole: the UB side of a T.copy whose other
    side is indexed (directly, in one of its indices) by an element of an on-chip buffer."""
    tree = ast.Module(body=list(body), type_ignores=[])
    onchip = {n.targets[0].id for n in ast.walk(tree)
              if isinstance(n, ast.Assign) and len(n.targets) == 1 and
              isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call) and
              getattr(n.value.func, "attr", "") in _ALLOCS}
    skip = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "copy"
                and len(node.args) >= 2):
            continue
        for here, other in ((node.args[0], node.args[1]), (node.args[1], node.args[0])):
            if not isinstance(here, ast.Subscript):
                continue
            idx = here.slice.elts if isinstance(here.slice, ast.Tuple) else [here.slice]
            if any(isinstance(i, ast.Subscript) and isinstance(i.value, ast.Name) and
                   i.value.id in onchip for i in idx):
                while isinstance(other, ast.Subscript):
                    other = other.value
                if isinstance(other, ast.Name):
                    skip.add(other.id)
    return skip


def alloc_shape(scope, shape, api):
    """The shape a user allocation gets: a UB buffer's first dimension halved (at least 1),
    as the original's ModifyExtents, unless the buffer is in the skip set."""
    if not reducing() or scope != "UB" or cur().pending_name in cur().vid_skip:
        return shape, None
    if api not in ("alloc_shared", "alloc_ub"):
        # The original halves "shared" (UB) buffers only: its fragments are Cube memories
        # (wmma.*) after scope inference and alloc_local is gone; none is split.
        raise err(f"T.{api} '{cur().pending_name}' used as a UB buffer in a kernel with "
                  "threads=2: the original's vid reduction splits only T.alloc_shared / "
                  "T.alloc_ub buffers (UB) between the vector cores",
                  hint="allocate it with T.alloc_shared or T.alloc_ub")
    shape = [_core.to_index(x, "buffer dimension") for x in shape]
    if not isinstance(shape[0], int):
        return shape, None  # refused by the allocation
    return [max(1, shape[0] // 2)] + list(shape[1:]), shape[0]


class HalvedBuffer(_core.Buffer):
    """A UB buffer whose first dimension the reduction halved (vid_full: the rows the author
    allocated)."""

    def __init__(self, buf, full):
        super().__init__(buf.ext, buf.name, buf.shape, buf.dtype, buf.scope)
        self.vid_full = full

    def slice_rows(self, start, ext):
        """A slice of the first dimension: the original divides the extent of a region that
        starts at row 0 (the tile-op sizes and copy regions it rewrites); `:` means the rows
        the author allocated. Other starts would keep their full extent there, past the
        halved buffer: refused."""
        return _slice_rows(self, start, ext)


def _slice_rows(buf, start, ext):
    if ext == 1:
        return ext
    if start != 0:
        raise err(f"slice of '{buf.name}' starting at row {start!r} with {ext} rows: the buffer's "
                  f"first dimension ({buf.vid_full} rows) is split between the two vector cores "
                  "(T.Kernel(..., threads=2), vid reduction)",
                  hint="slice from row 0 or index one row; or write the kernel with "
                  "`as (cid, vid)` and split the rows by hand")
    return max(1, ext // 2)


def rows_of(buf):
    """Rows a vector core holds of a halved buffer, or None."""
    return getattr(buf, "vid_full", None) and buf.shape[0]


def halved_loop(interp, body, name):
    """Does loop variable `name` index the first dimension of a halved buffer in the body
    (`buf[name, ...]`, as an element or a row), the original's
    LoopVarUsedInVidReducedUbFirstDim?"""
    if not reducing():
        return False
    for node in ast.walk(ast.Module(body=list(body), type_ignores=[])):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            buf = interp.vars.get(node.value.id)
            if buf is None or not rows_of(buf):
                continue
            first = node.slice.elts[0] if isinstance(node.slice, ast.Tuple) and \
                node.slice.elts else node.slice
            if isinstance(first, ast.Name) and first.id == name:
                return True
    return False


def half_trips(begin, end, step, where):
    """A halved loop's end: the original halves the extent (at least 1)."""
    if step != 1:
        raise err(f"a loop with step {step} over the rows of a vid-reduced buffer ({where})",
                  hint="loop with step 1")
    n = end - begin
    if isinstance(n, int):
        return begin + max(1, n // 2)
    return begin + n // 2


def copy_regions(s, d):
    """The original's rewrite of a GM <-> UB copy (AscendVidReduction on tl.ascend_copy):
    the vector core's rows of the GM side. Regions of halved buffers already have their
    halved extents (make_region)."""
    if not reducing():
        return s, d
    su, du = s.buffer.scope == "UB", d.buffer.scope == "UB"
    if su == du:
        return s, d
    ub, other = (s, d) if su else (d, s)
    if other.buffer.scope != "GM":
        return s, d  # L0C -> UB / UB -> L1: tilepipe's cv_split splits the rows (_split.py)
    if any(st is e for st in other.starts for e in cur().vid_ub_loads):
        return s, d  # a gather (the skip set's copies): the original leaves it as written
    rows = rows_of(ub.buffer)
    vid = _ext.vid()
    starts, extents = list(other.starts), list(other.extents)
    if rows:
        k = len(other.extents) - len(ub.buffer.shape)
        if k < 0:
            raise err(f"copy between '{other.buffer.name}' (rank {len(other.extents)}) and the "
                      f"vid-reduced '{ub.buffer.name}' (rank {len(ub.buffer.shape)}): the "
                      "original offsets the GM dimension its first one meets, and there is none",
                      hint="index the GM tensor with at least as many dimensions")
        starts[k] = starts[k] + vid * rows
        if not other.points[k] and extents[k] != 1:
            extents[k] = max(1, extents[k] // 2)
    else:
        # A UB buffer left whole inside a halved loop: the GM dimension indexed by the loop's
        # variable alone moves by vid * (halved trips) when both halves fit in the tensor.
        for var, trips in cur().vid_loops:
            for k, st in enumerate(starts):
                if isinstance(st, _ext.Expr) and st.var_id() == var and \
                        isinstance(trips, int) and trips * 2 <= other.buffer.shape[k]:
                    starts[k] = st + vid * trips
    other = _core.Region(other.buffer, starts, extents, list(other.points))
    return (ub, other) if su else (other, ub)

"""The original's intra-core software pipeline of a T.Pipelined loop whose T.Scope carries the
author's flags (the original pipelines it regardless of the flags; _interp.hand_pipelined).

What the original does (src/transform/pipeline_planning.cc, inject_pipeline.cc, read, not
copied): each top-level statement of the body is a pipeline block. A block copying a GM
tensor into an on-chip buffer that a later block reads is a copy stage: stage 0, ordered
right after its last reader; every other block gets stage num_stages, in program order. When
all copies end up after every other block, the orders rotate them to the front and the other
blocks' stage drops by one. A buffer a stage-s block writes and a stage-t block reads gets
t - s + 1 versions (one fewer unless a writer precedes a reader in order at a lower stage),
indexed by the writer's iteration; only buffers allocated inside the loop (used nowhere
else) are versioned. The loop then runs as a prologue (virtual iterations 0 .. S-1: the
blocks whose iteration i - stage is already >= 0), a body (iterations S .. n-1, every block
at iteration i - stage, in order) and an epilogue (the blocks whose iteration is < n).

Modelled here for the cases that can be decided from the source exactly; anything else (a
GM copy nested in an if / loop, a condition reading a copied buffer, a copied buffer used
outside the loop, a run-time trip count) is an error at the loop."""

import ast

from . import _core
from ._core import ctx


class _Ring(_core.Versioned):
    """A versioned buffer whose version is its own (the iteration of the block being
    emitted, modulo its version count), not the cross-core pipeline's ctx.slot."""

    def __init__(self, inner, shape, versions):
        super().__init__(inner, shape)
        self.versions = versions
        self.slot = None

    def _slotted(self, r):
        saved, ctx.slot = ctx.slot, self.slot
        try:
            return super()._slotted(r)
        finally:
            ctx.slot = saved


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def software_pipeline(interp, s, name, begin, end, step, stages):
    """Emits the loop's pipelined schedule (True), or returns False when that schedule is
    the program order (every block in one stage): the caller runs the loop serially."""
    def refuse(why, hint="write the loop as T.serial (the author's flags then order the "
               "serial program), or drop the scope's flags so auto_sync places them"):
        return interp.error(s, "T.Pipelined loop in a T.Scope with hand-written flags: the "
                            "original software-pipelines it anyway (GM copies of later "
                            f"iterations moved ahead, buffers versioned); {why}", hint=hint)

    from ._interp import _is_let
    from .language import _alloc_buffer

    n = (end - begin) if step == 1 else None
    if not isinstance(n, int) or not isinstance(begin, int):
        raise refuse("a run-time trip count or a step other than 1 is not modelled")
    lets = [(k, st) for k, st in enumerate(s.body) if _is_let(st)]
    for k, st in lets:
        if any(isinstance(x, ast.Subscript) for x in ast.walk(st.value)):
            # it is re-evaluated before each block at that block's iteration: only index
            # arithmetic may be (an element read would be a value at another time)
            raise refuse(f"the binding at line {interp.loc(st)[1]} reads a buffer element; "
                         "only index arithmetic is modelled there")
    blocks = []
    for k, st in enumerate(s.body):
        if _is_let(st):
            continue
        dst = interp._gm_copy(st)
        if dst is None and any(interp._gm_copy(x) is not None for x in ast.walk(st)
                               if isinstance(x, ast.Expr) and x is not st):
            raise refuse(f"the GM copy nested in the statement at line "
                         f"{interp.loc(st)[1]} is not modelled")
        blocks.append({"k": k, "st": st, "dst": dst, "names": _names(st), "last": -1,
                       "order": -1, "stage": -1})
    # the Python names bound to each copied buffer (the source refers to buffers by name)
    bound = {id(b["dst"]): {v for v, x in interp.vars.items() if x is b["dst"]}
             for b in blocks if b["dst"] is not None}
    for j, b in enumerate(blocks):
        if b["dst"] is None:
            continue
        for m in range(j + 1, len(blocks)):
            if blocks[m]["names"] & bound[id(b["dst"])]:
                b["last"] = m
    tests = set()
    for st in s.body:
        for x in ast.walk(st):
            if isinstance(x, (ast.If, ast.IfExp)):
                tests |= _names(x.test)
    for b in blocks:
        if b["dst"] is not None and tests & bound[id(b["dst"])]:
            raise refuse(f"a condition reads '{b['dst'].name}', which a GM copy writes "
                         "(the planner's condition stage) is not modelled")
    N = stages
    order = 0
    for j, b in enumerate(blocks):
        if b["dst"] is not None and b["last"] != -1:
            continue
        b["order"], b["stage"] = order, N
        order += 1
        for c in blocks:
            if c["dst"] is not None and c["last"] == j:
                c["order"], c["stage"] = order, 0
                order += 1
    if order != len(blocks):
        raise refuse("a GM copy read only by another GM copy is not modelled")
    copies = [b for b in blocks if b["dst"] is not None]
    others = [b for b in blocks if b["dst"] is None]
    if copies and N >= 2 and min(b["order"] for b in copies) > max(
            [b["order"] for b in others] or [0]):
        for b in blocks:
            b["order"] = (b["order"] + len(copies)) % len(blocks)
            if b["dst"] is None:
                b["stage"] -= 1
    if len({b["stage"] for b in blocks}) == 1:
        # no copy stage (a GM -> L1 copy is none): the schedule is the program order
        return False
    # versions of each copied buffer
    rings = {}
    for b in copies:
        buf = b["dst"]
        if id(buf) in rings:
            continue
        writers = [x for x in copies if x["dst"] is buf]
        readers = [x for x in blocks if x["names"] & bound[id(buf)] and x not in writers]
        if not readers:
            continue
        d = min(x["stage"] for x in writers)
        u = max(x["stage"] for x in readers)
        v = u - d + 1
        if v >= 2 and not any(w["order"] < r["order"] and w["stage"] < r["stage"]
                              for w in writers for r in readers):
            v -= 1
        if v < 2:
            continue
        fdef = interp.src.tree.body[0]
        if any(getattr(d, "attr", getattr(d, "id", None)) == "macro"
               for d in getattr(fdef, "decorator_list", [])):
            raise refuse(f"'{buf.name}' needs {v} versions, and in a T.macro its uses outside "
                         "the loop cannot be seen")
        outside = set()
        for node in _outside(interp.src.tree, s):
            outside |= _names(node)
        if outside & bound[id(buf)]:
            raise refuse(f"'{buf.name}' needs {v} versions but is used outside the loop (the "
                         "original versions only buffers allocated in the loop)")
        inner = _alloc_buffer(buf.scope, [v] + list(buf.shape), buf.dtype, f"{buf.name}_v")
        rings[id(buf)] = _Ring(inner, list(buf.shape), v)
    smax = max(b["stage"] for b in blocks)
    ordered = sorted(blocks, key=lambda b: b["order"])
    b_ = _core.builder()
    loc = interp.loc(s)
    saved = {v: interp.vars[v] for ids in bound.values() for v in ids}
    trip_before = list(ctx.trip_stack)

    def emit(blk, it):
        """Block blk at iteration `it` (an int or an IR expression), after the body's lets."""
        interp.vars[name] = it if begin == 0 else begin + it
        for ring in rings.values():
            ring.slot = it % ring.versions
        for k, st in lets:
            if k < blk["k"]:
                interp.stmt(st)
        interp.stmt(blk["st"])

    try:
        with interp.loop_var(name):
            for bid, ring in rings.items():
                for v in bound[bid]:
                    interp.vars[v] = ring
            for i in range(smax):  # prologue
                for blk in ordered:
                    j = i - blk["stage"]
                    if 0 <= j < n:
                        emit(blk, j)
            if n > smax:
                var = b_.begin_for(name + "_pipe", smax, n, 1, "serial", 0, 1, loc)
                ctx.var_ranges[var.var_id()] = (smax, n - 1)
                ctx.trip_stack.append(n - smax)
                try:
                    for blk in ordered:
                        emit(blk, var - blk["stage"])
                finally:
                    ctx.trip_stack.pop()
                b_.end_for(loc)
            for i in range(max(n, smax), n + smax):  # epilogue
                for blk in ordered:
                    j = i - blk["stage"]
                    if 0 <= j < n:
                        emit(blk, j)
    finally:
        interp.vars.update(saved)
        ctx.trip_stack[:] = trip_before
    return True


def _outside(tree, loop):
    """The statements of the function that are not `loop` and do not contain it, with the
    headers (tests, iterators) of those that contain it."""
    out = []

    def walk(stmts):
        for st in stmts:
            if st is loop:
                continue
            if any(x is loop for x in ast.walk(st)):
                for field in ("test", "iter", "items"):
                    part = getattr(st, field, None)
                    if part is not None:
                        out.extend(part if isinstance(part, list) else [part])
                for field in ("body", "orelse"):
                    walk(getattr(st, field, []) or [])
            else:
                out.append(st)

    walk(tree.body[0].body)
    return out

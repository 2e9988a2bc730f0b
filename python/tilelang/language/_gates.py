"""Where an op of the kernel language is emitted during the front end's C/V split of
unscoped code (tilelang._split): each core kind's pass keeps its own ops."""

from .._core import ctx, err

_CUBE = ("L1", "L0A", "L0B", "L0C")


def _gate(core):
    """Whether an op of `core` ("C" or "V") is emitted now (the C/V split of unscoped code)."""
    if ctx.split is None:
        return True
    if ctx.split == "probe":
        for n in ctx.node_stack:
            ctx.probe.setdefault(n, set()).add(core)
        ctx.probe_cores.add(core)
        return False
    return ctx.split == core


def _no_split(what):
    if ctx.split is not None:
        raise err(f"{what} in unscoped code (the automatic C/V split inserts the "
                  "cross-core synchronisation)",
                  hint='write the kernel with T.Scope("C") / T.Scope("V") to place cross-core '
                  'flags by hand')


def _flag_gate(*pipes):
    """Intra-core flags and barriers in unscoped code belong to the core owning their pipes
    (MTE1 / M / FIX: Cube; V / MTE3 / S: Vector; MTE2 alone: Vector)."""
    if ctx.split is None:
        return True
    core = "C" if any(p in ("MTE1", "M", "FIX") for p in pipes) else "V"
    if ctx.split == "probe":
        ctx.hand_sync.add(core)
    return _gate(core)

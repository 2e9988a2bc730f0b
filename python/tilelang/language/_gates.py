"""Whether an op of the kernel language is emitted now: not while the front end probes an
unscoped body before lowering it for the C/V split (tilelang/_split.py)."""

from .._core import cur, err

_CUBE = ("L1", "L0A", "L0B", "L0C")


def _gate():
    """Whether an op is emitted now (not during the C/V split's probe)."""
    return cur().split != "probe"


def _no_split(what):
    if cur().split is not None:
        raise err(f"{what} in unscoped code (the automatic C/V split inserts the "
                  "cross-core synchronisation)",
                  hint='write the kernel with T.Scope("C") / T.Scope("V") to place cross-core '
                  'flags by hand')


def _flag_gate(*pipes):
    """Intra-core flags and barriers in unscoped code belong to the core owning their pipes
    (MTE1 / M / FIX: Cube; V / MTE3 / S: Vector; MTE2 alone: Vector); the probe notes which
    cores carry them."""
    if cur().split == "probe":
        cur().hand_sync.add("C" if any(p in ("MTE1", "M", "FIX") for p in pipes) else "V")
    return _gate()

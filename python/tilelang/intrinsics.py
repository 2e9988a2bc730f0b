"""`tilelang.intrinsics`: layout descriptors for T.annotate_layout (zN / nZ fractal order).
tilepipe models L1 capacity and copy costs, not the byte order: the layouts are recorded and
checked for their buffer, nothing else (docs/python.md)."""

from ._core import Buffer, TilelangError


class Layout:
    def __init__(self, kind, buffer):
        if not isinstance(buffer, Buffer):
            raise TilelangError(f"{kind} layout of {buffer!r}: expected a buffer")
        self.kind = kind
        self.buffer = buffer

    def __repr__(self):
        return f"{self.kind}({self.buffer.name})"


def make_zn_layout(buffer):
    return Layout("zN", buffer)


def make_nz_layout(buffer):
    return Layout("nZ", buffer)


def make_col_major_layout(buffer):
    return Layout("col_major", buffer)

"""`tilelang.language` (imported as T): the kernel language. Inside a @T.prim_func body the
interpreter (tilelang._interp) evaluates each call below; the calls emit tile IR into
tilepipe's KernelBuilder. See docs/python.md for what maps to what."""

import math as _math

from .. import _core
from .. import _felem
from .._core import (Buffer as _Buffer, Expr, Region, Sym, TilelangError, as_region, builder, cur,
                     err, dtype_name, resolve, to_index)
from .._core import _ext
from .._eval import logical
from .._interp import macro, prim_func  # noqa: F401
from . import reduce_ascend
from . import tile  # noqa: F401
from ._mem import _hand_synced
from ._mem import (alloc_L0A, alloc_L0B, alloc_L0C, alloc_L1,  # noqa: F401
                   alloc_fragment, alloc_local, alloc_shared, alloc_ub, copy, gemm, gemm_v0, mma,
                   GemmWarpPolicy)
from ._types import (Buffer, Buffer_, Else, If, Kernel, Parallel, Persistent,  # noqa: F401
                     Pipelined, Scope, Tensor, Then, _DType, bfloat16, boolean, dyn, float16,
                     float32, func_attr, grid, half, int8, int16, int32, int64, parallel, serial,
                     symbolic, uint8, uint16, uint32, uint64, unroll, vectorized)
from .tile import reduce  # noqa: F401
from ._var import Var, alloc_var  # noqa: F401
from .sync import (BARRIER_EVENT_ID, SYNC_ALL_FLAG_ID, SYNC_ALL_MODE,  # noqa: F401
                   barrier_all, pipe_barrier, set_cross_flag, set_flag, sync_all,
                   wait_cross_flag, wait_flag)
from . import _older

# Earlier versions' names (language/_older.py): T.tile.reduce_*(out, buffer, tmp, dim), the PTO
# dialect's T.add / T.sub / T.mul / T.div.
for _n, _f in _older.TILE.items():
    setattr(tile, _n, _f)
globals().update(_older.TOP)


def annotate_layout(layouts):
    if not isinstance(layouts, dict):
        raise err("T.annotate_layout takes a dict {buffer: layout}")
    for k, v in layouts.items():
        if not isinstance(k, _Buffer):
            raise err(f"T.annotate_layout key {k!r} is not a buffer")
    # Layout (zN / nZ fractal order) changes the bytes' order, not the values or the
    # costs tilepipe models for L1: accepted and recorded only (docs/python.md).


def use_swizzle(index, *a, **kw):
    """Tile-order swizzle (an L2 locality permutation on hardware): the identity here, so
    results are the same and only the order tiles are visited in differs (docs/python.md)."""
    return index


npu_use_swizzle = use_swizzle


def _flag_map(fmap, what, emit):
    """The original's {src: {dst: [event ids]}} flag maps (init_flag / clear_flag)."""
    if not isinstance(fmap, dict) or not all(isinstance(d, dict) for d in fmap.values()):
        raise err(f"T.{what} takes a dict {{src pipe: {{dst pipe: [event ids]}}}}",
                  hint=f'e.g. T.{what}({{"MTE2": {{"V": [0, 1]}}}})')
    for src, d in fmap.items():
        for dst, ids in d.items():
            for i in ([ids] if isinstance(ids, int) else ids):
                emit(src, dst, i)


def init_flag(fmap):
    """Sets each flag of the map once (the original's credits before a pipelined loop)."""
    _flag_map(fmap, "init_flag", set_flag)


def clear_flag(fmap):
    """Waits for each flag of the map (the credits init_flag gave, taken back at the end)."""
    _flag_map(fmap, "clear_flag", wait_flag)


def annotate_address(addresses):
    """{buffer: byte offset}: the author's placement of on-chip buffers (kept by memory
    planning; the verifier checks alignment and bounds)."""
    if not isinstance(addresses, dict):
        raise err("T.annotate_address takes a dict {buffer: byte offset}")
    b = builder()
    for buf, off in addresses.items():
        if not isinstance(buf, _Buffer) or buf.scope == "GM":
            raise err(f"T.annotate_address key {buf!r} is not an on-chip buffer")
        o = to_index(off, "address")
        if not isinstance(o, int):
            raise err("T.annotate_address offsets must be compile-time integers")
        if cur().split != "probe":
            b.pin(buf.ext, o)



def _reduce_entry(kind):
    def f(*a, **kw):
        return getattr(reduce_ascend, f"reduce_{kind}")(*a, **kw)

    f.__name__ = f"reduce_{kind}"
    return f


reduce_max = _reduce_entry("max")
reduce_min = _reduce_entry("min")
reduce_sum = _reduce_entry("sum")


# ---- synchronisation ----

# ---- scalar helpers ----


def _try_resolve(x):
    try:
        return resolve(x)
    except TilelangError:
        return x  # an unbound symbolic dim: stays symbolic until the call binds it


def ceildiv(a, b):
    a, b = _try_resolve(a), _try_resolve(b)
    if isinstance(a, Sym) or isinstance(b, Sym):
        return (a + b - 1) // b
    if isinstance(a, int) and isinstance(b, int):
        return IntImm(-(-a // b))
    return (to_index(a) + to_index(b) - 1) // to_index(b)


def if_then_else(cond, a, b):
    c = resolve(cond)
    if isinstance(c, Region):
        c = c.load()
    if not isinstance(c, _ext.Expr):
        return a if c else b
    if _felem.is_float(a) or _felem.is_float(b):  # float elements: an IR `if` when stored
        return _felem.select(c, a, b)
    return _ext.select(c, to_index(a), to_index(b))


Select = if_then_else  # TIR's spelling (causal_conv1d)


class IntImm(int):
    """A compile-time integer result of T.min / T.max / T.ceildiv: an int that also has the
    original's `IntImm.value`."""

    @property
    def value(self):
        return int(self)


def min(a, b):  # noqa: A001
    a, b = to_index(a), to_index(b)
    if isinstance(a, int) and isinstance(b, int):
        return IntImm(a if a < b else b)
    return _ext.min(a, b)


def max(a, b):  # noqa: A001
    a, b = to_index(a), to_index(b)
    if isinstance(a, int) and isinstance(b, int):
        return IntImm(a if a > b else b)
    return _ext.max(a, b)


def Min(a, b):  # noqa: N802
    return min(a, b)


def Max(a, b):  # noqa: N802
    return max(a, b)


def Cast(dtype, value):  # noqa: N802
    """TIR's Cast node (dtype first): T.cast(value, dtype)."""
    return cast(value, dtype)


def clamp(x, lo, hi):
    """The original's T.clamp of a value: max(x, lo), then min(.., hi)."""
    return min(max(x, lo), hi)


def infinity(dtype="float32"):
    return _math.inf


def max_value(dtype="float32"):
    return {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
            "float32": 3.4028234663852886e38, "int32": 2**31 - 1}[dtype_name(dtype)]


def min_value(dtype="float32"):
    return -max_value(dtype)


def cast(value, dtype):
    return _DType(dtype_name(dtype))(value)



def fill(buffer, value):
    """T.fill(buffer | region | element, value): every element set to value, a vector
    Duplicate on UB (a one-element fill is the scalar unit's SetValue). The Cube memories
    and GM have no fill instruction."""
    r = as_region(buffer, "T.fill destination")
    if r.buffer.scope != "UB":
        hint = ("initialise the accumulator with the gemm's init=True (or init=(k == 0) in "
                "the K loop)" if r.buffer.scope == "L0C" else
                "fill a UB tile and T.copy it there")
        raise err(f"T.fill / T.clear of {r.buffer.scope} buffer '{r.buffer.name}': only UB "
                  "buffers are filled by an instruction (the vector unit's Duplicate)", hint=hint)
    tile.fill(r, value)


def clear(buffer):
    """T.clear(buffer): T.fill(buffer, 0)."""
    fill(buffer, 0)


def floordiv(a, b):
    a, b = to_index(a), to_index(b)
    return a // b


def floormod(a, b):
    a, b = to_index(a), to_index(b)
    return a % b


truncdiv = floordiv  # equal on the non-negative indices kernels compute
truncmod = floormod


def abs_(a):
    a = to_index(a)
    return a if isinstance(a, int) and a >= 0 else max(a, 0 - a)


def _scalar_math(name, fn):
    def f(x, *a):
        v = resolve(x)
        if isinstance(v, (int, float)):
            return fn(v, *a)
        raise err(f"T.{name} on a run-time value outside T.Parallel",
                  hint=f"use T.tile.{name if name != 'log' else 'ln'} on a tile")

    f.__name__ = name
    return f


exp = _scalar_math("exp", _math.exp)
log = _scalar_math("log", _math.log)
sqrt = _scalar_math("sqrt", _math.sqrt)
rsqrt = _scalar_math("rsqrt", lambda v: 1.0 / _math.sqrt(v))


def set_deq_scale(scale):
    """The vector unit's dequantisation scale for int32 -> float16 conversions (its DEQSCALE
    register). tilepipe converts int32 -> float16 without a scale, which is the scale 1.0;
    any other scale is refused here."""
    v = tile._const_float(scale, "T.set_deq_scale scale")
    if v != 1.0:
        raise err(f"T.set_deq_scale({v}) is not modelled",
                  hint="tilepipe's int32 -> float16 conversion has the scale 1.0; multiply the "
                       "result by the scale with T.tile.mul")


_CTYPES = {"float": "float32", "float32_t": "float32", "half": "float16",
           "float16_t": "float16", "bfloat16_t": "bfloat16", "int32_t": "int32",
           "uint32_t": "uint32", "int16_t": "int16", "uint16_t": "uint16", "int8_t": "int8",
           "uint8_t": "uint8", "int64_t": "int64", "uint64_t": "uint64", "bool": "bool"}


def reinterpretcast(dst, src, casttype):
    """AscendC's ReinterpretCast: from here to the end of the block, dst names src's UB
    bytes read as `casttype` (dst's own dtype; a view, no instruction). tilepipe copies the
    bytes at this line, in no cycles (tile.reinterpret); its verifier refuses the kernels
    where a copy and a view would differ (a write of either after the cast, a read of dst
    outside the block) at their line (docs/python.md)."""
    want = _CTYPES.get(str(casttype))
    if want is None:
        raise err(f"T.reinterpretcast type {casttype!r}",
                  hint="an AscendC element type: " + ", ".join(sorted(_CTYPES)))
    for what, x in (("destination", dst), ("source", src)):
        if not isinstance(x, _Buffer):
            raise err(f"T.reinterpretcast {what} must be a whole UB buffer",
                      hint="pass the buffers themselves, not slices of them")
    if _core.dtype_name(dst.dtype) != want:
        raise err(f"T.reinterpretcast({dst.name}, {src.name}, {casttype!r}): '{dst.name}' is "
                  f"{_core.dtype_name(dst.dtype)}, not {want}",
                  hint=f"allocate '{dst.name}' as {want}")
    tile._emit("reinterpret", dst, [src])
    if _hand_synced("V") or not cur().auto_sync:
        # the original's view is no instruction, so the author orders nothing after it; the
        # copy that models it runs on V: a barrier of the core keeps later readers after it
        barrier_all()


def printf(*a, **kw):
    """Device printf: nothing is printed by the simulator (accepted, no IR)."""


def print(*a, **kw):  # noqa: A001
    """Device print of a value or buffer: accepted, no IR (as T.printf)."""


def dump_tensor(*a, **kw):
    """Device tensor dump: accepted, no IR (inspect outputs or kernel.trace instead)."""


def __getattr__(name):
    if name in _ALIASES:  # names that would shadow Python's builtins inside this module
        return globals()[_ALIASES[name]]
    return _core.surface_name(f"T.{name}", name)


_ALIASES = {"bool": "boolean", "abs": "abs_"}


def And(*xs):
    v = xs[0]
    for x in xs[1:]:
        v = logical(v, x, True)
    return v


def Or(*xs):
    v = xs[0]
    for x in xs[1:]:
        v = logical(v, x, False)
    return v


def Not(x):
    x = to_index(x) if not isinstance(x, bool) else x
    return (x == 0) if isinstance(x, _ext.Expr) else (not x)

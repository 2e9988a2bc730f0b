"""`T.tile.*`: vector ops on UB tiles (pipe V), one IR tile op each."""

import ast
import builtins
import functools
import inspect
import warnings

from .. import _core
from .._core import Buffer, Region, as_region, builder, err, resolve
from .._core import _ext
from ._gates import _gate
from ._mem import _BOOL_OK, _copy, _reduce, refuse_bool, temporary

_CMP = {"EQ": "EQ", "NE": "NE", "GT": "GT", "GE": "GE", "LT": "LT", "LE": "LE",
        "==": "EQ", "!=": "NE", ">": "GT", ">=": "GE", "<": "LT", "<=": "LE"}


def _scalar(x, what):
    x = resolve(x)
    if isinstance(x, _core.Deferred):
        x = x.scalar_region()  # a float element expression computed into a temporary
    if isinstance(x, Buffer) and len(x.shape) and all(d == 1 for d in x.shape):
        x = x.region()  # a one-element buffer read by the scalar unit
    if isinstance(x, Region):
        if x.elements() != 1:
            raise err(f"{what}: a slice with {x.elements()} elements used as a scalar",
                      hint="index one element, or pass a tile of the destination's size")
        return x  # a UB element read by the scalar unit (_emit passes it on as a region)
    if isinstance(x, bool):
        return float(x)
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, _ext.Expr):
        return x
    try:
        return float(x)
    except (TypeError, ValueError):
        raise err(f"{what}: expected a tile or a scalar, found {type(x).__name__} {x!r}")


# The ops whose AscendC call (Adds, Subs, Muls, Divs, Maxs, Mins, Select, CompareScalar)
# the original's code generator prints with its own PipeBarrier<PIPE_ALL>() before the
# GetValue of a buffer-element scalar (codegen_ascend.cc), whatever the sync mode.
_SCALAR_BARRIER = ("add", "sub", "mul", "div", "max", "min", "select", "compare")


def _emit(kind, dst, srcs, scalar=None, cmp="EQ", attrs=(0, 0, 0)):
    if kind not in _BOOL_OK:
        for x in [dst] + list(srcs):
            b = x if isinstance(x, Buffer) else x.buffer if isinstance(x, Region) else None
            if b is not None and b.dtype == "bool":
                refuse_bool(f"T.tile.{kind}", b)

    if not _gate():
        return
    d = as_region(dst, f"T.tile.{kind} destination")
    rs = [as_region(s, f"T.tile.{kind} source").tup() for s in srcs]
    if isinstance(scalar, Region):
        c = _core.cur()
        if kind in _SCALAR_BARRIER and c.scope == "V" and c.scope_hand and not c.in_parallel:
            # With the author's flags that barrier is the front end's to place (in automatic
            # code the original_sync pass places it, docs/passes.md; a T.Parallel row's is
            # placed around its nest, _parallel.py).
            builder().barrier_all("V", _core.current_loc())
        scalar = scalar.tup()
    builder().tile_op(kind, d.tup(), rs, scalar, cmp, _core.current_loc(), list(attrs))


def _binary(kind):
    def op(dst, a, b):
        if isinstance(b, (Buffer, Region)) and not (
                isinstance(b, Region) and b.elements() == 1 and as_region(dst).elements() != 1):
            _emit(kind, dst, [a, b])
        else:
            _emit(kind, dst, [a], _scalar(b, f"T.tile.{kind}"))

    op.__name__ = kind
    return op


add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")
max = _binary("max")  # noqa: A001
min = _binary("min")  # noqa: A001
pow = _binary("pow")  # noqa: A001


def adds(dst, a, s):
    _emit("add", dst, [a], _scalar(s, "T.tile.adds"))


def muls(dst, a, s):
    _emit("mul", dst, [a], _scalar(s, "T.tile.muls"))


def subs(dst, a, s):
    s = resolve(s)
    if isinstance(s, (int, float)):
        _emit("add", dst, [a], -float(s))
    else:
        raise err("T.tile.subs with a run-time scalar is not supported",
                  hint="use T.tile.adds with the negated value")


def divs(dst, a, s):
    s = resolve(s)
    if isinstance(s, (int, float)):
        _emit("mul", dst, [a], 1.0 / float(s))
    else:
        raise err("T.tile.divs with a run-time scalar is not supported",
                  hint="use T.tile.div with a filled tile")


def maxs(dst, a, s):
    _emit("max", dst, [a], _scalar(s, "T.tile.maxs"))


def mins(dst, a, s):
    _emit("min", dst, [a], _scalar(s, "T.tile.mins"))


def _unary(kind):
    def op(dst, src):
        _emit(kind, dst, [src])

    op.__name__ = kind
    return op


exp = _unary("exp")
ln = _unary("ln")
abs = _unary("abs")  # noqa: A001
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
reciprocal = _unary("reciprocal")
relu = _unary("relu")
sin = _unary("sin")
cos = _unary("cos")

# BroadcastDir (tilepipe/vec_modes.h): one value per row / the source repeated down the rows.
_PER_ROW, _ROW_REPEATED = 1, 2


def _per_row(dst, vec):
    """vec's R values, one per row of dst [R, C] (vec of any shape with R elements)."""
    _emit("broadcast", dst, [vec], attrs=(_PER_ROW, 0, 0))


def broadcast(dst, src, axis=None):
    """The original's Broadcast over the last two dimensions: axis 0 repeats a row src [1, C]
    (or [C]) down dst's rows, axis 1 spreads a column src [R, 1] (or [R]) along them. A 1-D
    src is a row when it has dst's column count (a square dst too), else a column; a 2-D one
    is a row when it has one row, a column when it has one column; `axis` chooses."""
    what = "T.tile.broadcast"
    d, s = as_region(dst, f"{what} destination"), as_region(src, f"{what} source")
    if isinstance(axis, (Buffer, Region)):
        axis = None  # an earlier version's third parameter: a scratch buffer (tmp)
    if axis not in (None, 0, 1):
        raise err(f"{what}: axis {axis!r} is not 0 (a row repeated down the rows) or 1 (one "
                  "value per row)")
    de, se = list(d.extents[-2:]), list(s.extents[-2:])
    if len(de) < 2 or se == de:
        _emit("broadcast", d, [s])  # 1-D, or no broadcast (the original's equal shapes)
        return
    if len(se) == 1:
        se = [1, se[0]] if axis == 0 or (axis is None and de[1] == se[0]) else [se[0], 1]
        if se == de:
            _emit("broadcast", d, [s])
            return
    if axis is None:
        axis = 0 if se[0] == 1 and de[0] != 1 else 1
    if se[1 - axis] != de[1 - axis] or se[axis] != 1:
        raise err(f"{what}: source {list(s.extents)} does not broadcast along axis {axis} "
                  f"into the destination's {de}",
                  hint="axis 0: a row of the destination's columns; axis 1: a column of its "
                       "rows")
    # Stated only where the IR's shape rule (BroadcastDir::ByShape) would read it otherwise
    # (a square destination), so the IR of every other broadcast stays as written.
    if (axis == 1) == _per_row_by_shape(s, de[0]):
        _emit("broadcast", d, [s])
    else:
        _emit("broadcast", d, [s], attrs=(_ROW_REPEATED if axis == 0 else _PER_ROW, 0, 0))


def _per_row_by_shape(s, rows):
    """The IR's shape rule (ir::broadcast_per_row_by_shape): one value per row when the
    vector has the destination's row count and is not shaped as a row [1, n]."""
    ext, n = list(s.extents), s.elements()
    return n == rows and not (len(ext) >= 2 and ext[-2] == 1 and ext[-1] == n and n > 1)


def axpy(dst, src, scalar):
    """dst = scalar * src + dst"""
    _emit("axpy", dst, [src], _scalar(scalar, "T.tile.axpy"))


# The original's cast modes for a float source into an integer tile (vec_modes.h CastRound);
# CAST_NONE and CAST_RINT round to nearest, ties to even.
_CAST_ROUND = {"CAST_NONE": 0, "CAST_RINT": 0, "CAST_FLOOR": 1, "CAST_CEIL": 2, "CAST_ROUND": 3,
               "CAST_TRUNC": 4}


class TileOverrunWarning(UserWarning):
    """A T.tile op's element count (its count argument, or what its library call writes)
    runs past the UB allocation its tile starts in: on the NPU the op goes on into whatever
    UB follows (other buffers); tilepipe stops at the allocation's end."""


_OVERRUN_SEEN = {}  # warnings' registry: each line's report once, however often it is built


def _flat_start(r):
    """r's first element as an offset in its buffer's row-major order, or None when r
    starts at a run-time position."""
    if not all(isinstance(x, int) for x in r.starts):
        return None
    off = 0
    for x, dim in zip(r.starts, r.buffer.shape):
        off = off * dim + x
    return off


def _reach(r, padded=False):
    """How many elements a count may cover from r's first one: AscendC counts contiguous
    elements from the tile's address, so to the end of r's buffer from a constant start (to
    the end of its allocation's 32-byte block with `padded`: UB allocations are 32-byte
    aligned, no other buffer shares the block); r's own elements from a run-time start."""
    off = _flat_start(r)
    if off is None:
        return _padded(r) if padded else r.elements()
    n = r.buffer.region().elements()
    if padded:
        per_block = 32 // _core.dtype_bytes(r.buffer.dtype)
        n = -(-n // per_block) * per_block
    return n - off


def _padded(r):
    """The elements r may be counted over: a whole buffer's, rounded up to its 32-byte
    block; a slice's own."""
    n = r.elements()
    if n != r.buffer.region().elements():
        return n
    per_block = 32 // _core.dtype_bytes(r.buffer.dtype)
    return -(-n // per_block) * per_block


def _run(r, n, what):
    """The n contiguous elements from r's first one as one region: r's first n, or, past
    r's end (n within _reach), the buffer's elements from r's start (a row slice counted
    over the rows after it)."""
    if n <= r.elements():
        return _prefix(r, n, what)
    off = _flat_start(r)
    p = _flat(r.buffer.region(), off, off + n, what)
    if len(p) != 1:
        raise err(f"{what}: {n} elements of {r.buffer.name} from its element {off} are not "
                  "one rectangle", hint="count whole rows of the buffer, or slice the tiles")
    return p[0]


def _counted(what, count, tiles, wanted=None):
    """The elements an op covers when the original's count (or its library call) covers
    `wanted` elements from each tile's first one (`count` itself by default): the count
    clipped to what every tile's buffer holds from there (_reach). Past the allocations'
    32-byte blocks the NPU writes into whatever UB follows, which tilepipe does not model:
    reported once per line (TileOverrunWarning), as the pto target's TCVT converts the
    tiles."""
    c = resolve(count) if wanted is None else wanted
    if not isinstance(c, int) or isinstance(c, bool) or c <= 0:
        raise err(f"{what} count {c!r}: expected a positive integer known when the kernel "
                  "is built", hint="pass the number of elements as a constant")
    if c > builtins.min(_reach(t, padded=True) for t in tiles):
        over = builtins.max(tiles, key=lambda t: c - _reach(t))
        loc = _core.current_loc() or ("<kernel>", 0)
        warnings.warn_explicit(
            f"{what} covers {c} elements from the start of {over.buffer.name}, which holds "
            f"{_reach(over)} from there: on the NPU the op goes on into whatever UB follows; "
            "tilepipe stops at the end of the buffer", TileOverrunWarning, loc[0], loc[1],
            registry=_OVERRUN_SEEN)
    return builtins.min([c] + [_reach(t) for t in tiles])


def cast(dst, src, mode="CAST_NONE", count=None):
    """dst = src converted to dst's dtype, a float into an integer rounded by the mode
    (CAST_NONE / CAST_RINT to nearest even, CAST_FLOOR, CAST_CEIL, CAST_ROUND ties away from
    zero, CAST_TRUNC), a float into its own type rounded to an integral value by the mode;
    between float types to nearest even. `count`: AscendC's Cast converts that many
    contiguous elements from each tile's first one (_counted)."""
    d, s = as_region(dst), as_region(src)
    if count is not None:
        c = _counted("T.tile.cast", count, (s, d))
        s, d = _run(s, c, "T.tile.cast"), _run(d, c, "T.tile.cast")
    m = str(mode).upper()
    if m not in _CAST_ROUND and m != "CAST_ODD":
        raise err(f"T.tile.cast mode {mode!r}", hint="modes: " + " ".join(_CAST_ROUND))
    sc, dc = (_core._DTYPES[_core.dtype_name(x.buffer.dtype)] for x in (s, d))
    sf, df = sc[0] == "f" or sc == "bf16", dc[0] == "f" or dc == "bf16"
    if m == "CAST_ODD":
        raise err("T.tile.cast with CAST_ODD is not modelled", hint="use CAST_RINT")
    integral = sf and sc == dc and m != "CAST_NONE"  # f32 -> f32: rounded to integral values
    if sf and df and sc != dc and m not in ("CAST_NONE", "CAST_RINT"):
        raise err(f"T.tile.cast {sc} -> {dc} with {m} is not modelled",
                  hint="tilepipe rounds between float types to nearest even (CAST_RINT / "
                       "CAST_NONE); the other modes of a narrowing float cast are not modelled")
    _emit("cast", d, [s], attrs=(_CAST_ROUND[m] if sf and (integral or not df) else 0,
                                 _ext.CAST_INTEGRAL if integral else 0, 0))


def fill(dst, value):
    """Duplicate: every element = value, converted to dst's type as C converts the scalar
    argument: an integer into an integer tile keeps its low bits (nms's
    `T.tile.fill(keepmask_u16, -1)` sets every bit, 0xFFFF)."""
    v = resolve(value)
    code = _code(dst)
    if isinstance(v, int) and not isinstance(v, bool) and code[0] in "iu":
        bits = int(code[1:])
        v &= (1 << bits) - 1
        if code[0] == "i" and v >> (bits - 1):
            v -= 1 << bits
    _emit("fill", dst, [], _scalar(v, "T.tile.fill"))


def _store(dst, value):
    """`ub[i] = x` (a number, an integer expression or a UB element): the scalar unit's
    SetValue of one UB element (the IR's tile.store, on the S pipe). The front end's own
    spelling of an element store, not a name of the original's T.tile."""
    _emit("store", dst, [], _scalar(value, "element store"))


def _mask(m, n):
    """A compare destination or select mask for n lanes: a uint8 / int8 bit mask (one bit
    per lane, the original's form) is taken as its first n / 8 bytes (a mask buffer may be
    larger than the tile, e.g. 32 bytes for 64 lanes); any other tile holds one element per
    lane."""
    r = as_region(m, "mask")
    code = _core._DTYPES[_core.dtype_name(r.buffer.dtype)]
    if code not in ("u8", "i8") or r.elements() == n:
        return r
    if n % 8 or r.elements() < n // 8:
        raise err(f"bit mask {r.buffer.name} has {r.elements()} bytes for {n} lanes",
                  hint="give the mask one bit per lane: lanes / 8 bytes, lanes a multiple of 8")
    if r.elements() == n // 8:
        return r
    if any(e != 1 for e in r.extents[:-1]):
        raise err(f"bit mask {r.buffer.name} {list(r.extents)} has {r.elements()} bytes for "
                  f"{n} lanes", hint="slice the mask to lanes / 8 bytes")
    # a vector (or a row of a per-stage versioned buffer): its first n / 8 bytes
    return Region(r.buffer, list(r.starts), list(r.extents[:-1]) + [n // 8],
                  [False] * len(r.extents))


def compare(dst, a, b, mode="EQ"):
    m = _CMP.get(str(mode).upper())
    if m is None:
        raise err(f"T.tile.compare mode {mode!r}", hint="modes: EQ NE GT GE LT LE")
    d = _mask(dst, as_region(a).elements())
    if isinstance(b, (Buffer, Region)) and as_region(b).elements() != 1:
        _emit("compare", d, [a, b], None, m)
    else:
        _emit("compare", d, [a], _scalar(b, "T.tile.compare"), m)


def select(dst, mask, a, b, mode="VSEL_TENSOR_TENSOR_MODE"):
    """dst = mask ? a : b (b a tile, or a scalar in VSEL_TENSOR_SCALAR_MODE)."""
    d = as_region(dst)
    mk = _mask(mask, d.elements())
    if isinstance(b, (Buffer, Region)) and as_region(b).elements() != 1:
        _emit("select", d, [mk, a, b])
    else:
        _emit("select", d, [mk, a], _scalar(b, "T.tile.select"))


def transpose(dst, src):
    """dst [C, R] = src [R, C] transposed (a vector op on UB tiles)."""
    _emit("transpose", dst, [src])


_ELEM_SHIFT = {1: 0, 2: 1, 4: 2}


def _temp(tag, like, dtype):
    """A UB temporary of `like`'s extents for one call site."""
    r = as_region(like)
    return temporary((tag, tuple(r.extents), dtype), "UB", r.extents, dtype, f"{tag}_tmp")


def gather(dst, src, offsets, src_base_addr=0):
    """dst[i] = src[offsets[i] / sizeof(element)]: the original's offsets are byte offsets
    from src's start (uint32), as tilepipe's gather takes them; int32 offsets are shifted
    into element offsets in a temporary (the IR's other form)."""
    if resolve(src_base_addr) != 0:
        raise err("T.tile.gather with a non-zero src_base_addr is not modelled",
                  hint="slice src to start where the base address points")
    s, o = as_region(src), as_region(offsets)
    shift = _ELEM_SHIFT[_core.dtype_bytes(s.buffer.dtype)]
    if o.buffer.dtype not in ("uint32", "int32"):
        raise err(f"T.tile.gather offsets '{o.buffer.name}' are {o.buffer.dtype}; expected "
                  "uint32 byte offsets")
    el = o
    if o.buffer.dtype == "int32" and shift:
        el = _temp("gather_off", o, "int32")
        _emit("shr", el, [o], float(shift))
    _emit("gather", dst, [s, el])


def reduce(src, dst, kind="sum", dim=-1, clear=True):
    _reduce(str(kind), src, dst, dim, clear)


def _logic(kind, bitop):
    def op(dst, a, b):
        # on bit masks too: the original's masks are bytes, one bit per lane
        if isinstance(b, (Buffer, Region)) and as_region(b).elements() != 1:
            _emit(bitop, dst, [a, b])
        else:
            _emit(bitop, dst, [a], _scalar(b, f"T.tile.{kind}"))

    op.__name__ = kind
    return op


bitwise_and = _logic("bitwise_and", "bit_and")
bitwise_or = _logic("bitwise_or", "bit_or")


def bitwise_xor(dst, a, b):
    if isinstance(b, (Buffer, Region)) and as_region(b).elements() != 1:
        _emit("bit_xor", dst, [a, b])
    else:
        _emit("bit_xor", dst, [a], _scalar(b, "T.tile.bitwise_xor"))


def bitwise_not(dst, src):
    _emit("bit_not", dst, [src])


def bitwise_lshift(dst, src, shift):
    _emit("shl", dst, [src], _scalar(shift, "T.tile.bitwise_lshift"))


def bitwise_rshift(dst, src, shift):
    _emit("shr", dst, [src], _scalar(shift, "T.tile.bitwise_rshift"))


# ---- ops composed from tilepipe's tile ops ----


def _overlaps(a, b):
    ra, rb = as_region(a), as_region(b)
    return ra.buffer is rb.buffer or ra.buffer.name == rb.buffer.name


def clear(dst):
    fill(dst, 0.0)


def sigmoid(dst, src):
    """dst = 1 / (1 + exp(-src))"""
    mul(dst, src, -1.0)
    exp(dst, dst)
    adds(dst, dst, 1.0)
    reciprocal(dst, dst)


def silu(dst, src):
    """dst = src * sigmoid(src); dst must not be src (no scratch tile here)."""
    if _overlaps(dst, src):
        raise err("T.tile.silu in place: tilepipe composes it from sigmoid and mul",
                  hint="write into a different tile")
    sigmoid(dst, src)
    mul(dst, dst, src)


def leaky_relu(dst, src, alpha):
    """dst = src if src >= 0 else alpha * src, composed as min(src, 0) * (alpha - 1) + src
    (any alpha); in place through a UB temporary."""
    a = resolve(alpha)
    if not isinstance(a, (int, float)):
        raise err("T.tile.leaky_relu needs an immediate alpha",
                  hint="tilepipe composes it from min, mul and add with alpha a constant")
    t = dst
    if _overlaps(dst, src):
        d = as_region(dst)
        t = temporary(("leaky_relu", tuple(d.extents), d.buffer.dtype), "UB", d.extents,
                      d.buffer.dtype, "leaky_relu_tmp")
    min(t, src, 0.0)
    mul(t, t, float(a) - 1.0)
    add(dst, t, src)


def clamp_max(dst, src, value, count=None):
    min(dst, src, value)


def clamp_min(dst, src, value, count=None):
    max(dst, src, value)


def clamp(dst, src, lo, hi, count=None):
    max(dst, src, lo)
    min(dst, dst, hi)


def row_expand_mul(dst, src, vec, tmp=None):
    """dst[i, :] = src[i, :] * vec[i]: the row vector broadcast into dst, or in place (dst is
    src) into a UB temporary of the tile's size, then one multiply (tmp, the original's
    workspace, does not change the result)."""
    wide = _temp("row_expand_mul", dst, as_region(dst).buffer.dtype) if _overlaps(dst, src) \
        else dst
    _per_row(wide, vec)
    mul(dst, wide, src)


def _row_vector(vec, rows, what):
    """The row vector of a row-expand op: one value per row, [R] with any unit dimensions
    around it ([R, 1], or xattention's [1, R, 1] of a per-row statistic)."""
    v = as_region(vec, what)
    if v.elements() != rows or len([e for e in v.extents if e != 1]) > 1 or (
            len(v.extents) >= 2 and v.extents[-1] != 1 and rows != 1):
        raise err(f"{what}: the row vector {v.buffer.name} {list(v.extents)} is not [R] or "
                  f"[R, 1] for the destination's {rows} rows",
                  hint="pass one value per row as a 1-D tile")
    return v


def _row_expand(kind):
    def op(dst, src0, src1, tmp=None):
        d = as_region(dst, f"T.tile.row_expand_{kind}_experiment destination")
        if len(d.extents) < 2 or any(e != 1 for e in d.extents[:-2]):
            raise err(f"T.tile.row_expand_{kind}_experiment needs a 2-D destination (rows x "
                      f"columns, unit dimensions before them allowed), found {list(d.extents)}")
        what = f"T.tile.row_expand_{kind}_experiment"
        rows = d.extents[-2]
        s1 = as_region(src1, what)
        block = 32 // _core.dtype_bytes(s1.buffer.dtype)
        if tmp is None and list(s1.extents) == [rows, block] and rows != 1:
            # Without tmp the original takes src1 as brcb's output, one 32-byte block per
            # row holding that row's value (its codegen: {op}_mask with src1 block stride 0).
            src1 = Region(s1.buffer, list(s1.starts), [rows, 1], [False, False])
        v = _row_vector(src1, rows, what)
        if tmp is not None:
            # the original broadcasts src1 into tmp's 32-byte blocks (brcb) first
            t = as_region(tmp, f"{what} tmp")
            if len(t.extents) == 2 and t.extents[0] == rows:
                _per_row(t, v)
        wide = (d if not (_overlaps(dst, src0) or _overlaps(dst, src1))
                else _temp(f"row_expand_{kind}", d, d.buffer.dtype))
        _per_row(wide, v)
        _emit(kind, d, [src0, wide])

    op.__name__ = f"row_expand_{kind}_experiment"
    op.__doc__ = f"dst[i, :] = src0[i, :] {kind} src1[i] (src1 broadcast along the rows)"
    return op


row_expand_mul_experiment = _row_expand("mul")
row_expand_sub_experiment = _row_expand("sub")
row_expand_div_experiment = _row_expand("div")


def _const_float(x, what):
    v = resolve(x)
    if isinstance(v, _ext.Expr) and v.const_value() is not None:
        v = v.const_value()
    if not isinstance(v, (int, float)):
        raise err(f"{what} must be a build-time number, found {v!r}")
    return float(v)


def brcb_experiment(dst, src, repeat_times, dst_blk_stride, dst_repeat_stride):
    """Each of repeat_times * 8 elements of src fills one 32-byte block of dst: with block
    stride 1 and repeat stride 8 (consecutive blocks) dst [repeat_times * 8, 32 / elem] is
    src broadcast along the rows."""
    what = "T.tile.brcb_experiment"
    rep = _const(repeat_times, f"{what} repeat_times")
    blk = _const(dst_blk_stride, f"{what} dst_blk_stride")
    rstride = _const(dst_repeat_stride, f"{what} dst_repeat_stride")
    d, s = as_region(dst, what), as_region(src, what)
    per = 32 // _core.dtype_bytes(d.buffer.dtype)
    if blk != 1 or rstride != 8:
        raise err(f"{what} with block stride {blk} and repeat stride {rstride} is not modelled",
                  hint="tilepipe models consecutive blocks (block stride 1, repeat stride 8)")
    if len(d.extents) != 2 or d.extents[0] != rep * 8 or d.extents[1] != per:
        raise err(f"{what}: destination {d.buffer.name} {list(d.extents)} is not "
                  f"[{rep * 8}, {per}] ({rep} repeats of 8 blocks of 32 bytes)",
                  hint="give dst one 32-byte block per source element")
    if s.elements() < rep * 8:
        raise err(f"{what}: source {s.buffer.name} has {s.elements()} elements, fewer than "
                  f"repeat_times * 8 = {rep * 8}")
    if s.elements() != rep * 8:
        if len(s.extents) != 1:
            raise err(f"{what}: source {s.buffer.name} {list(s.extents)} has more than "
                      f"{rep * 8} elements", hint="slice the source to repeat_times * 8")
        s = Region(s.buffer, [s.starts[0]], [rep * 8], [False])
    _per_row(d, _row_vector(s, rep * 8, what))


# ---- index generation, sorting, masked gathers, atomic accumulation ----


def _const(x, what):
    v = resolve(x)
    if isinstance(v, _ext.Expr) and v.const_value() is not None:
        v = v.const_value()
    if not isinstance(v, int):
        raise err(f"{what} must be a build-time integer, found {v!r}",
                  hint="tilepipe models this parameter as a constant of the instruction")
    return v


def _whole_count(what, count, *tiles):
    """The original's `count` arguments cover whole tiles here: a prefix is not modelled."""
    if count is None:
        return
    c = resolve(count)
    n = as_region(tiles[0]).elements()
    if c != n:
        raise err(f"{what} count {c} differs from the tile's {n} elements",
                  hint="operating on a prefix of a tile is not supported; slice the tiles")


def _experiment(name, op):
    """The original's `NAME_experiment(dst, operands..., count)`: `op` on the tiles, its
    count covering them whole (a prefix is not modelled)."""

    def f(dst, *operands):
        if not operands:
            raise err(f"T.tile.{name}_experiment takes (dst, operands..., count)")
        *ops, count = operands
        _whole_count(f"T.tile.{name}_experiment", count, dst)
        return op(dst, *ops)

    f.__name__ = f"{name}_experiment"
    return f


def _flat(r, lo, hi, what):
    """The regions covering elements [lo, hi) of r in row-major order (r's leading extents
    of 1 dropped): a run within one row, whole rows, or a row tail, whole rows and a row
    head. Regions of rank > 2 (after dropping) are only taken whole."""
    r = as_region(r)
    ext = r.extents
    lead = 0
    while lead < len(ext) - 1 and ext[lead] == 1:
        lead += 1
    inner = ext[lead:]
    if lo >= hi:
        return []
    if len(inner) == 1 or (lo == 0 and hi == r.elements()):
        if len(inner) > 1:
            return [r]
        starts = list(r.starts)
        starts[-1] = starts[-1] + lo
        return [Region(r.buffer, starts, ext[:-1] + [hi - lo], [False] * len(ext))]
    if len(inner) != 2:
        raise err(f"{what}: part of the rank-{len(inner)} tile {r.buffer.name} is not a "
                  "rectangle tilepipe can name", hint="use a 1-D or 2-D tile")
    cols = inner[1]

    def rows(a, b, c0, c1):  # rows [a, b), columns [c0, c1)
        starts = list(r.starts)
        starts[-2] = starts[-2] + a
        starts[-1] = starts[-1] + c0
        return Region(r.buffer, starts, ext[:-2] + [b - a, c1 - c0], [False] * len(ext))

    out = []
    r0, c0 = divmod(lo, cols)
    r1, c1 = divmod(hi, cols)
    if r0 == r1:
        return [rows(r0, r0 + 1, c0, c1)]
    if c0:
        out.append(rows(r0, r0 + 1, c0, cols))
        r0 += 1
    if r1 > r0:
        out.append(rows(r0, r1, 0, cols))
    if c1:
        out.append(rows(r1, r1 + 1, 0, c1))
    return out


def _prefix(r, n, what):
    """The first n elements of r as one region."""
    p = _flat(r, 0, n, what)
    if len(p) != 1:
        raise err(f"{what}: the first {n} elements of {as_region(r).buffer.name} are not one "
                  "rectangle", hint="make the tile 1-D, or a whole number of rows")
    return p[0]


def createvecindex(dst, first_value):
    """dst[i] = first_value + i (the hardware's CreateVecIndex)."""
    _emit("arange", dst, [], _scalar(first_value, "T.tile.createvecindex"))


def arith_progression(buffer, first_value, diff_value, count):
    """buffer[i] = first_value + i * diff_value for i < count (step 1 modelled)."""
    if resolve(diff_value) != 1:
        raise err(f"T.tile.arith_progression with step {resolve(diff_value)!r} is not modelled",
                  hint="tilepipe models step 1 (T.tile.createvecindex); scale the result with "
                  "T.tile.muls")
    n = _const(count, "T.tile.arith_progression count")
    _emit("arange", _prefix(buffer, n, "T.tile.arith_progression"), [],
          _scalar(first_value, "T.tile.arith_progression"))


def round(dst, src, count=None):  # noqa: A001
    """dst = src rounded to the nearest integer, halves away from zero (the original's PTO
    lowering is a cast in CAST_ROUND mode)."""
    _whole_count("T.tile.round", count, dst, src)
    _emit("round", dst, [src])


def _sort(dst, src, actual_num, limit, what):
    """The library's Sort (see tilepipe's tile.sort): pads src's last 32-element block past
    the valid count with -inf in place (emitted here as a fill, so later reads see it), then
    sorts into the first `limit` elements of dst."""
    s = as_region(src, f"{what} source")
    n = resolve(actual_num)
    if isinstance(n, _ext.Expr) and n.const_value() is not None:
        n = n.const_value()
    if isinstance(n, int):
        end = builtins.min(s.elements(), (n + 31) // 32 * 32)
        # The library pads the partial 32-byte block with a masked Duplicate; tilepipe has no
        # lane masks, so those elements are one-element stores (exempt from alignment) and
        # the whole blocks after them one fill.
        per_block = 32 // _core.dtype_bytes(s.buffer.dtype)
        head = builtins.min(end, -(-builtins.max(n, 0) // per_block) * per_block)
        for i in range(builtins.max(n, 0), head):
            _emit("fill", _flat(s, i, i + 1, what)[0], [], float("-inf"))
        for part in _flat(s, head, end, what):
            _emit("fill", part, [], float("-inf"))
        count = float(n)
    elif isinstance(n, _ext.Expr):
        raise err(f"{what} with a run-time valid count is not modelled: the hardware pads the "
                  "source past the count with -inf in place, a write of run-time length",
                  hint="pass the count as a build-time value (a T.symbolic dim is one per "
                  "compiled program)")
    else:
        raise err(f"{what}: the valid count {n!r} is not an integer")
    d = as_region(dst, f"{what} destination")
    _emit("sort", _prefix(d, builtins.min(limit, d.elements()), what), [s], count)


def sort(dst, src, actual_num):
    """dst = (value, index) pairs of src's first actual_num elements, sorted descending."""
    _sort(dst, src, actual_num, 2 * as_region(src).elements(), "T.tile.sort")


def topk(dst, src, K, actual_num):
    """The first K (value, index) pairs of the descending sort of src: the original sorts
    all of src and copies 2 K elements rounded up to 32 bytes into dst."""
    k = _const(K, "T.tile.topk K")
    per_block = 32 // _core.dtype_bytes(as_region(src).buffer.dtype)
    _sort(dst, src, actual_num, (2 * k + per_block - 1) // per_block * per_block, "T.tile.topk")


def merge_sort(dst, src0, src1, src2=None, src3=None):
    """dst = the 2-4 descending (value, index) pair lists merged (one MrgSort on hardware);
    tilepipe's instruction takes at most 3 lists, so a 4-way merge is a 3-way one into a UB
    temporary and a 2-way one (same order: ties keep the earlier list first)."""
    srcs = [x for x in (src0, src1, src2, src3) if x is not None]
    if len(srcs) < 4:
        _emit("merge_sort", dst, srcs)
        return
    head = sum(as_region(x).elements() for x in srcs[:3])
    dt = as_region(dst).buffer.dtype
    t = temporary(("merge_sort", head, dt), "UB", [head], dt, "merge_sort_tmp")
    _emit("merge_sort", t, srcs[:3])
    _emit("merge_sort", dst, [t, srcs[3]])


_GATHER_MASK = {"P0101": 1, "P1010": 2, "P0001": 3, "P0010": 4, "P0100": 5, "P1000": 6,
                "P1111": 7}


# Source elements per kept one of each built-in pattern (P0101 / P1010 keep one of two).
_GATHER_MASK_STEP = {1: 2, 2: 2, 3: 4, 4: 4, 5: 4, 6: 4, 7: 1}


def _gather_mask_tiles(dst, src, code):
    """(dst, [src]) of a built-in pattern's gather: the library's GatherMask takes the whole
    source and packs every kept element from dst's first one on (_counted: past dst's buffer
    the NPU writes on into the UB that follows; tilepipe keeps what the buffer holds, from
    the source's head)."""
    d, s = as_region(dst), as_region(src)
    step = _GATHER_MASK_STEP[code]
    kept = builtins.sum(1 for i in range(s.elements()) if _ext.gather_mask_keeps(code, i))
    n = _counted("T.tile.gather_mask", None, (d,), wanted=kept)
    if n < kept:
        s = _run(s, n * step, "T.tile.gather_mask")
    if n > d.elements():
        d = _run(d, n, "T.tile.gather_mask")
    return d, [s]


def gather_mask(dst, src, src1Pattern):  # noqa: N803
    """Built-in pattern (a string): the kept elements of src packed into dst. A uint32
    buffer: the original's custom mode, which is a gather by element index (it scales the
    indices to byte offsets in place, then gathers one element per index)."""
    p = resolve(src1Pattern)
    if isinstance(p, str):
        if p not in _GATHER_MASK:
            raise err(f"T.tile.gather_mask pattern {p!r}",
                      hint="patterns: " + " ".join(_GATHER_MASK))
        _emit("gather_mask", *_gather_mask_tiles(dst, src, _GATHER_MASK[p]),
              attrs=(_GATHER_MASK[p], 0, 0))
        return
    pr = as_region(p, "T.tile.gather_mask pattern")
    if pr.buffer.dtype != "uint32":
        raise err(f"T.tile.gather_mask pattern '{pr.buffer.name}' is {pr.buffer.dtype}; "
                  "expected uint32 element indices")
    _emit("mul", pr, [pr], float(_core.dtype_bytes(as_region(src).buffer.dtype)))
    gather(_prefix(dst, pr.elements(), "T.tile.gather_mask"), src, pr)


def gatherb(dst, src0, offset, repeat_time, dst_blk_stride, dst_rep_stride):
    """32-byte blocks of src0 at the byte offsets in `offset` (uint32) into dst's blocks
    repeat * dst_rep_stride + j * dst_blk_stride (8 per repeat)."""
    attrs = tuple(_const(x, f"T.tile.gatherb {w}") for x, w in (
        (repeat_time, "repeat_time"), (dst_blk_stride, "dst_blk_stride"),
        (dst_rep_stride, "dst_rep_stride")))
    _emit("gatherb", dst, [src0, offset], attrs=attrs)


def atomic_add(dst, src):
    """dst (GM) += src (a UB or L0C tile), done by the DMA unit: a copy with atomic add."""
    _copy(src, dst, atomic_add=True)


# ---- per-repeat reductions and the multiply-accumulate, composed from tile ops ----


def _code(r):
    return _core._DTYPES[_core.dtype_name(as_region(r).buffer.dtype)]


def _scratch(tag, shape, dtype):
    """A UB temporary of `shape` for one call site."""
    return temporary((tag, tuple(shape), dtype), "UB", shape, dtype, f"{tag}_tmp")


def _head(buf, n):
    """Elements [0, n) of a 1-D temporary."""
    return Region(buf, [0], [n], [False])


def _span(buf, lo, n):
    return Region(buf, [lo], [n], [False])


def _iota(tag, n):
    """An int32 temporary holding 0 .. n - 1."""
    t = _scratch(tag, [n], "int32")
    _emit("arange", t, [], 0.0)
    return t


_F16_MAX = 65504.0


def _pair_tree(kind, src, n, group, dtype, what, out=None):
    """Reduces each run of `group` consecutive elements of src's first n (row-major) by the
    hardware's binary tree: each level combines neighbours, x'[i] = x[2 i] op x[2 i + 1]
    (gathered into two halves first), rounded to the element type at every level; a half
    sum saturates at +-65504 at every level (AscendC BlockReduceSum / ReduceSum). The last
    level is written into `out` (a region of n / group elements) or a temporary, returned."""
    dt = as_region(src).buffer.dtype
    h0 = n // 2
    idx = _scratch(f"{what}_off", [h0], "int32")
    odd = _scratch(f"{what}_odd", [h0], dt)
    ev = [_scratch(f"{what}_even", [h0], dt), _scratch(f"{what}_even2", [h0], dt)]
    cur, m, level = as_region(src), n, 0
    while m > n // group:
        h = m // 2
        e = _head(ev[level % 2], h)
        _emit("arange", _head(idx, h), [], 0.0)
        _emit("mul", _head(idx, h), [_head(idx, h)], 2.0)
        _emit("gather", e, [cur, _head(idx, h)])
        _emit("add", _head(idx, h), [_head(idx, h)], 1.0)
        _emit("gather", _head(odd, h), [cur, _head(idx, h)])
        last = h == n // group
        d = out if (last and out is not None) else e
        _emit(kind, d, [e, _head(odd, h)])
        if kind == "add" and _code(src) == "f16":
            _emit("min", d, [d], _F16_MAX)
            _emit("max", d, [d], -_F16_MAX)
        cur, m, level = d, h, level + 1
    return cur


def _copy_flat(dst, src, n, what):
    """dst (any shape, n elements) = src's first n elements in row-major order (a gather)."""
    off = _iota(f"{what}_copy", n)
    _emit("gather", dst, [src, off])


def _pow2(x):
    return x > 0 and x & (x - 1) == 0


def _repeat_params(what, d, s, repeat, mask, dst_rep, src_blk, src_rep, per_rep_max):
    """The consecutive layout tilepipe models: whole 32-byte blocks, src block stride 1,
    repeats back to back in src (src_rep blocks = mask elements) and in dst."""
    eb = _core.dtype_bytes(s.buffer.dtype)
    per_block = 32 // eb
    rep = _const(repeat, f"{what} repeat")
    m = _const(mask, f"{what} mask")
    db, sb, sr = (_const(x, f"{what} {w}") for x, w in (
        (dst_rep, "dstRepStride"), (src_blk, "srcBlkStride"), (src_rep, "srcRepStride")))
    if d.buffer.dtype != s.buffer.dtype or _code(s) not in ("f16", "f32"):
        raise err(f"{what} on {s.buffer.dtype} -> {d.buffer.dtype}",
                  hint="half or float, source and destination of one type")
    if not (1 <= m <= per_rep_max) or not _pow2(m) or m % per_block:
        raise err(f"{what} mask {m} is not modelled",
                  hint=f"tilepipe models a contiguous mask of whole 32-byte blocks, a power of "
                       f"two up to {per_rep_max} elements (the hardware's pairwise tree)")
    if sb != 1 or sr * per_block != m or (db != 1 and rep > 1):
        raise err(f"{what} with srcBlkStride {sb}, srcRepStride {sr}, dstRepStride {db} is "
                  "not modelled", hint=f"tilepipe models repeats back to back: srcBlkStride 1, "
                  f"srcRepStride {m // per_block} (the mask's blocks), dstRepStride 1")
    if rep < 1 or s.elements() < rep * m:
        raise err(f"{what}: {rep} repeats of {m} elements read past the source "
                  f"{s.buffer.name} ({s.elements()} elements)")
    return rep, m


def _block_reduce(kind):
    name = f"block_reduce_{kind}"

    def op(dst, src, repeat, mask, dstRepStride, srcBlkStride, srcRepStride):  # noqa: N803
        what = f"T.tile.{name}"
        d, s = as_region(dst, what), as_region(src, what)
        per_rep = 256 // _core.dtype_bytes(s.buffer.dtype)
        if _const(mask, f"{what} mask") != per_rep:
            raise err(f"{what} mask {_const(mask, what)} is not modelled",
                      hint=f"tilepipe models the full mask ({per_rep} elements: 8 blocks)")
        rep, m = _repeat_params(what, d, s, repeat, mask, dstRepStride, srcBlkStride,
                                srcRepStride, per_rep)
        group = 32 // _core.dtype_bytes(s.buffer.dtype)
        n = rep * m
        if d.elements() < n // group:
            raise err(f"{what}: destination {d.buffer.name} has {d.elements()} elements for "
                      f"{n // group} block results")
        t = _pair_tree({"sum": "add"}.get(kind, kind), s, n, group, s.buffer.dtype, name)
        _copy_flat(_prefix(d, n // group, what), t, n // group, name)

    op.__name__ = name
    op.__doc__ = (f"dst[k] = {kind} of src's 32-byte block k (repeat * 8 blocks): AscendC "
                  f"BlockReduce{kind.capitalize()}, a pairwise tree per block")
    return op


block_reduce_max = _block_reduce("max")
block_reduce_min = _block_reduce("min")
block_reduce_sum = _block_reduce("sum")

_ORDERS = ("ORDER_VALUE_INDEX", "ORDER_INDEX_VALUE", "ORDER_ONLY_VALUE")


def _whole_reduce(kind):
    name = f"wholereduce{kind}"

    def op(dst, src, mask, repeattimes, dstrepstride, srcblkstride, srcrepstride,
           ReduceOrder="ORDER_VALUE_INDEX"):  # noqa: N803
        what = f"T.tile.{name}"
        d, s = as_region(dst, what), as_region(src, what)
        eb = _core.dtype_bytes(s.buffer.dtype)
        rep, m = _repeat_params(what, d, s, repeattimes, mask, dstrepstride, srcblkstride,
                                srcrepstride, 256 // eb)
        n = rep * m
        if kind == "sum":
            if d.elements() < rep:
                raise err(f"{what}: destination {d.buffer.name} has {d.elements()} elements "
                          f"for {rep} sums")
            t = _pair_tree("add", s, n, m, s.buffer.dtype, name)
            _copy_flat(_prefix(d, rep, what), t, rep, name)
            return
        order = str(getattr(ReduceOrder, "name", ReduceOrder)).split(".")[-1].upper()
        if order not in _ORDERS:
            raise err(f"{what} with {order} is not modelled", hint="orders: " + " ".join(_ORDERS))
        if order == "ORDER_ONLY_VALUE":
            if d.elements() < rep:
                raise err(f"{what}: destination {d.buffer.name} has {d.elements()} elements "
                          f"for {rep} values")
            t = _pair_tree(kind, s, n, m, s.buffer.dtype, name)
            _copy_flat(_prefix(d, rep, what), t, rep, name)
            return
        if d.elements() < 2 * rep:
            raise err(f"{what}: destination {d.buffer.name} has {d.elements()} elements for "
                      f"{rep} (value, index) pairs")
        dt = s.buffer.dtype
        per_block = 32 // eb
        ra = -(-rep // per_block) * per_block  # the indices start on a 32-byte block
        both = _scratch(f"{name}_pairs", [2 * ra], dt)
        _pair_tree(kind, s, n, m, dt, name, out=_head(both, rep))
        # the index: the first lane of each repeat holding its extreme
        x2 = _scratch(f"{name}_rows", [rep, m], dt)
        _copy_flat(x2, s, n, name)
        ext = _scratch(f"{name}_ext", [rep, m], dt)
        _emit("broadcast", ext, [_head(both, rep)])
        _emit("compare", ext, [x2, ext], None, "EQ")
        lane_i = _scratch(f"{name}_lane_i", [1, m], "int32")
        _emit("arange", lane_i, [], 0.0)
        lane = _scratch(f"{name}_lane", [1, m], dt)
        _emit("cast", lane, [lane_i])
        pos = _scratch(f"{name}_pos", [rep, m], dt)
        _emit("broadcast", pos, [lane])
        _emit("select", pos, [ext, pos], float(m))
        first = _scratch(f"{name}_first", [rep], dt)
        _reduce("min", pos, first, -1, True)
        # the index's bits in the value's slot (a u16 in a half, a u32 in a float): for an
        # index below 2^10 (half) / 2^23 (float) these bits are the subnormal index * 2^-24
        # / index * 2^-149, which the multiply makes exactly
        _emit("mul", _span(both, ra, rep), [first], 2.0 ** (-24 if eb == 2 else -149))
        # interleave: out[2 i] = value i, out[2 i + 1] = index i (swapped for INDEX_VALUE)
        k = _iota(f"{name}_k", 2 * rep)
        half = _scratch(f"{name}_half", [2 * rep], "int32")
        _emit("shr", half, [k], 1.0)
        _emit("bit_and", k, [k], 1.0)
        if order == "ORDER_INDEX_VALUE":
            _emit("bit_xor", k, [k], 1.0)
        _emit("mul", k, [k], float(ra))
        _emit("add", k, [k, half])
        _emit("gather", _prefix(d, 2 * rep, what), [both, k])

    op.__name__ = name
    op.__doc__ = (f"AscendC WholeReduce{kind.capitalize()}: one {kind} per repeat of `mask` "
                  "elements" + ("" if kind == "sum" else
                                ", with the first index of it (the index's bits in the slot "
                                "after the value, ORDER_VALUE_INDEX)"))
    return op


wholereducemax = _whole_reduce("max")
wholereducemin = _whole_reduce("min")
wholereducesum = _whole_reduce("sum")


def mul_add_dst(dst, src0, src1):
    """dst = src0 * src1 + dst (AscendC MulAddDst), modelled as Axpy is: the product and the
    sum in float32, the result rounded to dst's type (docs/ir.md). half sources with a float
    destination are converted first (exactly)."""
    what = "T.tile.mul_add_dst"
    d, a, b = (as_region(x, what) for x in (dst, src0, src1))
    cd, ca, cb = _code(d), _code(a), _code(b)
    if ca != cb or cd not in ("f16", "f32") or ca not in ("f16", "f32") or (
            cd == "f16" and ca == "f32"):
        raise err(f"{what} on {ca} * {cb} + {cd} is not modelled",
                  hint="half or float operands of one type, or half sources into a float dst")
    if not (a.elements() == b.elements() == d.elements()):
        raise err(f"{what}: the tiles have {a.elements()}, {b.elements()} and {d.elements()} "
                  "elements", hint="give the three tiles the same shape")
    if ca == "f32":
        p = _temp("mul_add_dst_prod", d, "float32")
        _emit("mul", p, [a, b])
    else:
        p = _temp("mul_add_dst_a", d, "float32")
        q = _temp("mul_add_dst_b", d, "float32")
        _emit("cast", p, [a])
        _emit("cast", q, [b])
        _emit("mul", p, [p, q])  # exact: two 11-bit significands
    if cd == "f32":
        _emit("add", d, [p, d])
    else:
        c = _temp("mul_add_dst_c", d, "float32")
        _emit("cast", c, [d])
        _emit("add", p, [p, c])
        _emit("cast", d, [p])


def sort32(dst, src0, src1):
    """Each 32-element block of src0 sorted descending, each key paired with its u32 from
    src1: 8 bytes per pair (f32: key, index bits; f16: key, 0, index bits in two halves)."""
    _emit("sort32", dst, [src0, src1])


sub_experiment = _experiment("sub", sub)
abs_experiment = _experiment("abs", abs)
mins_experiment = _experiment("mins", mins)


# ---- the original's parameters ----

# Each op's parameters as the original names them (its tilelang/language/ascend_tile.py): a
# call binds its arguments to these, as Python binds the original's, so a keyword argument
# reaches the parameter it names (`T.tile.select(d, m, a, b, selMode=...)`, `T.tile.clamp(
# out=..., buffer=..., ...)`) and an argument the original does not take is an error at the
# call, never dropped. Where the original has no default, tilepipe's (docs/python.md) stands.
_ORIGINAL = {
    "add": "dst, src0, src1", "sub": "dst, src0, src1", "mul": "dst, src0, src1",
    "div": "dst, src0, src1", "max": "dst, src0, src1", "min": "dst, src0, src1",
    "pow": "dst, src0, src1", "bitwise_and": "dst, src0, src1",
    "bitwise_or": "dst, src0, src1", "bitwise_xor": "dst, src0, src1",
    "exp": "dst, src0", "ln": "dst, src0", "abs": "dst, src0", "reciprocal": "dst, src0",
    "sqrt": "dst, src0", "rsqrt": "dst, src0", "relu": "dst, src0", "bitwise_not": "dst, src0",
    "sin": "dst, src", "cos": "dst, src", "sigmoid": "dst, src", "silu": "dst, src",
    "transpose": "dst, src", "atomic_add": "dst, src", "fill": "buffer, value",
    "clear": "buffer", "leaky_relu": "dst, src0, scalar_value",
    "axpy": "dst, src0, scalar_value", "mul_add_dst": "dst, src0, src1",
    "bitwise_lshift": "dst, src0, scalarValue", "bitwise_rshift": "dst, src0, scalarValue",
    "cast": "dst, src, mode, count", "compare": "dst, src0, src1, mode",
    "select": "dst, selMask, src0, src1, selMode",
    "clamp": "out, buffer, min_scalar, max_scalar, count",
    "clamp_max": "out, buffer, scalar_value, count",
    "clamp_min": "out, buffer, scalar_value, count", "round": "out, buffer, count",
    "broadcast": "dst, src, axis=None", "row_expand_mul": "dst, src0, src1, tmp=None",
    "row_expand_mul_experiment": "dst, src0, src1, tmp=None",
    "row_expand_sub_experiment": "dst, src0, src1, tmp=None",
    "row_expand_div_experiment": "dst, src0, src1, tmp=None",
    "sub_experiment": "dst, src0, src1, count", "abs_experiment": "dst, src, count",
    "mins_experiment": "dst, src, scalarValue, count",
    "brcb_experiment": "dst, src, repeat_times, dst_blk_stride, dst_repeat_stride",
    "createvecindex": "dst, firstValue",
    "arith_progression": "buffer, first_value, diff_value, count",
    "gather": "dst, src, src_offset, src_base_addr",
    "gather_mask": "dst, src, src1Pattern",
    "gatherb": "dst, src0, offset, repeat_time, dst_blk_stride, dst_rep_stride",
    "sort": "dst, src, actual_num", "topk": "dst, src, K, actual_num",
    "merge_sort": "dst, src0, src1, src2=None, src3=None", "sort32": "dst, src0, src1",
    "wholereducemax": "dst, src, mask, repeattimes, dstrepstride, srcblkstride, srcrepstride, "
                      "ReduceOrder='ORDER_VALUE_INDEX'",
    "wholereducemin": "dst, src, mask, repeattimes, dstrepstride, srcblkstride, srcrepstride, "
                      "ReduceOrder='ORDER_VALUE_INDEX'",
    "wholereducesum": "dst, src, mask, repeattimes, dstrepstride, srcblkstride, srcrepstride",
    "block_reduce_max": "dst, src, repeat, mask, dstPepStride, srcBlkStride, srcRepStride",
    "block_reduce_min": "dst, src, repeat, mask, dstPepStride, srcBlkStride, srcRepStride",
    "block_reduce_sum": "dst, src, repeat, mask, dstPepStride, srcBlkStride, srcRepStride",
}


def _as_original(name, fn, params):
    ours = [p.default for p in inspect.signature(fn).parameters.values()
            if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
    listed = []
    for i, spec in enumerate(x.strip() for x in params.split(",")):
        pname, _, default = spec.partition("=")
        if default:
            d = ast.literal_eval(default)
        else:
            d = ours[i] if i < len(ours) else inspect.Parameter.empty
        listed.append(inspect.Parameter(pname, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        default=d))
    sig = inspect.Signature(listed)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise err(f"T.tile.{name}({params}): {e}",
                      hint="pass the arguments the original's T.tile." + name + " takes")
        bound.apply_defaults()
        return fn(*bound.args)

    call.__signature__ = sig
    return call


for _name, _params in _ORIGINAL.items():
    globals()[_name] = _as_original(_name, globals()[_name], _params)
log = ln  # the original's other name of ln


def __getattr__(name):
    return _core.surface_name(f"T.tile.{name}", f"tile.{name}")

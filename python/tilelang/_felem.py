"""Float arithmetic on single elements of UB buffers (`s[0, i] = s[0, i] + g[0, i]`, the
original's scalar-unit GetValue / SetValue on float values).

tilepipe's scalar expressions (Expr) are integers, so a float element must never become one
(it would be truncated: the silent wrong sums of issue 25). Instead an expression over float
elements, numbers and integer expressions builds a FloatElem tree, and storing it into a UB
element lowers it exactly to vector ops on one-element regions: `+ - * /` and negation, each
result rounded to the element's dtype as the scalar unit rounds it (one op per node, a
one-element UB temporary per inner node). A comparison of float elements (`if x > 20.0:`)
is a one-element vector compare whose 0 / 1 the scalar unit reads back, an integer; a
`T.if_then_else` choosing between float elements is an IR `if` around two one-element
moves. A FloatElem used anywhere else — an index, a loop bound, `int(x)` — is an error at
the line (docs/python.md)."""

from . import _core
from ._core import Buffer, Deferred, Expr, Region, Sym, cur, dtype_bytes, err, resolve
from ._core import float_refused as refuse
from .language import _mem, tile
from .language.sync import BARRIER_EVENT_ID, set_flag, wait_flag

FLOATS = ("float16", "bfloat16", "float32")
_OPS = {"+": "add", "-": "sub", "*": "mul", "/": "div"}


def is_float_region(x):
    return isinstance(x, Region) and x.buffer.dtype in FLOATS


def is_float(x):
    return isinstance(x, FloatElem) or is_float_region(x)


def _operand(x):
    if isinstance(x, Sym):
        x = resolve(x)
    if isinstance(x, bool):
        return float(x)
    if isinstance(x, Buffer) and x.shape and all(d == 1 for d in x.shape):
        x = x.region()
    if isinstance(x, Region):
        if x.elements() != 1:
            raise err(f"a slice of '{x.buffer.name}' with {x.elements()} elements in element "
                      "arithmetic", hint="index one element, or use T.tile.* ops on tiles")
        if x.buffer.scope not in ("UB", "GM"):
            raise err(f"float element arithmetic on '{x.buffer.name}' in {x.buffer.scope}: only "
                      "UB and GM elements are modelled", hint="copy the values to UB first")
        return x if x.buffer.dtype in FLOATS else _int_load(x)
    if isinstance(x, (int, float, Expr, FloatElem)):
        return x
    raise err(f"{type(x).__name__} {x!r} in float element arithmetic")


def _int_load(r):
    return r.load()


class FloatElem(Deferred):
    """op in + - * / neg over operands: float Regions (one element), FloatElems, numbers,
    integer Exprs."""

    def __init__(self, op, a, b=None, cond=None):
        self.op, self.a, self.b, self.cond = op, a, b, cond  # cond: "select"'s condition

    @staticmethod
    def make(op, a, b=None):
        return FloatElem(op, _operand(a), None if b is None else _operand(b))

    def _bin(op, reverse=False):
        def f(self, other):
            return FloatElem.make(op, other, self) if reverse else FloatElem.make(op, self, other)

        return f

    __add__, __radd__ = _bin("+"), _bin("+", True)
    __sub__, __rsub__ = _bin("-"), _bin("-", True)
    __mul__, __rmul__ = _bin("*"), _bin("*", True)
    __truediv__, __rtruediv__ = _bin("/"), _bin("/", True)

    def __neg__(self):
        return FloatElem("neg", self)

    def __pos__(self):
        return self

    def _refuse(self, *a):
        raise refuse("used as an integer or a truth value")

    def _cmp(op):
        return lambda self, other: compare(op, self, other)

    __lt__, __le__, __gt__, __ge__ = _cmp("<"), _cmp("<="), _cmp(">"), _cmp(">=")
    # == / != stay Python's identity tests on the object (the interpreter's `==` compares
    # values through compare(); a FloatElem in a Python container must not emit IR)
    __bool__ = __index__ = __int__ = _refuse
    __hash__ = object.__hash__
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __float__ = _refuse

    def dtype(self):
        if self.op == "select":
            return _dtype_of(self.b if _scalar(self.a) else self.a)
        for x in (self.a, self.b):
            if isinstance(x, Region):
                return x.buffer.dtype
            if isinstance(x, FloatElem):
                return x.dtype()
        return "float32"

    def scalar_region(self):
        return as_scalar_region(self)

    def __repr__(self):
        return f"FloatElem({self.op}, {self.a!r}, {self.b!r})"


def _dtype_of(x):
    if isinstance(x, Region):
        return x.buffer.dtype
    return x.dtype() if isinstance(x, FloatElem) else "float32"


def arith(op, a, b=None):
    """a op b where an operand is a float element: a FloatElem (op in + - * / neg)."""
    if op not in _OPS and op != "neg":
        raise refuse(f"with operator '{op}'")
    return FloatElem.make(op, a, b)


_MODES = {"<": "LT", "<=": "LE", ">": "GT", ">=": "GE", "==": "EQ", "!=": "NE"}
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def compare(op, a, b):
    """a op b with a float element operand, as the original's scalar unit compares (float
    values, the result a bool): here a one-element vector compare (both sides widened to
    float32 exactly) into a one-element int32 temporary, which the scalar unit reads back
    (a scalar load waits for the V pipe's write). The result is an integer 0 / 1 usable in
    conditions and index arithmetic."""
    a, b = _operand(a), _operand(b)
    if _scalar(a) and not _scalar(b):
        a, b, op = b, a, _MIRROR[op]
    lhs = _f32(a)
    rhs = float(b) if isinstance(b, (int, float)) else _f32(b)
    out = temp("int32")
    tile.compare(out, lhs, rhs, _MODES[op])
    _to_scalar_unit()
    return out.load()


def _to_scalar_unit(pipe="V"):
    """The original computes these values in the scalar unit's registers; here the V pipe
    does (or MTE2 brings a GM element into UB), so in code with the author's flags (which
    cannot know of these ops) the front end orders them before the scalar unit's reads
    itself: a pipe -> S flag pair, on barrier_all's event id. In automatic code auto_sync
    places the flags."""
    if _mem._hand_synced("V"):
        set_flag(pipe, "S", BARRIER_EVENT_ID)
        wait_flag(pipe, "S", BARRIER_EVENT_ID)


def _f32(x):
    """x (an operand) in an aligned one-element float32 region: computed in its own dtype
    (rounded as the scalar unit rounds it), then widened (exact for f16 / bf16)."""
    d = _dtype_of(x) if not _scalar(x) else "float32"
    r = materialize(x, d)
    if d == "float32":
        return r
    w = temp("float32")
    tile.cast(w, r)
    return w


def select(cond, a, b):
    """T.if_then_else(cond, a, b) with float element operands (cond a run-time integer):
    materialised as an IR `if` around the two one-element moves."""
    return FloatElem("select", _operand(a), _operand(b), cond)


_REGION_OPS = {"__add__": ("+", False), "__radd__": ("+", True), "__sub__": ("-", False),
               "__rsub__": ("-", True), "__mul__": ("*", False), "__rmul__": ("*", True),
               "__truediv__": ("/", False), "__rtruediv__": ("/", True)}


_REGION_CMPS = {"__lt__": "<", "__le__": "<=", "__gt__": ">", "__ge__": ">="}


def region_op(name, region, *a):
    """Python operator `name` on a float element region."""
    if name == "__neg__":
        return arith("neg", region)
    if name in _REGION_CMPS:
        return compare(_REGION_CMPS[name], region, a[0])
    if name not in _REGION_OPS:
        raise refuse(f"with operator {name.strip('_')}")
    op, rev = _REGION_OPS[name]
    return arith(op, a[0], region) if rev else arith(op, region, a[0])


def _scalar(x):
    return isinstance(x, (int, float, Expr))


def temp(dtype):
    return _mem.alloc_ub((1,), dtype).region()


def _aligned(r, dtype):
    """r is UB, starts at a constant, 32-byte aligned offset and has `dtype` (a vector op
    may use it directly)."""
    if r.buffer.scope != "UB" or r.buffer.dtype != dtype or \
            not all(isinstance(s, int) for s in r.starts):
        return False
    off, stride = 0, 1
    for st, dim in zip(reversed(r.starts), reversed(r.buffer.shape)):
        off += st * stride
        stride *= dim
    return off * dtype_bytes(dtype) % 32 == 0


def materialize(x, dtype, into=None):
    """A one-element UB region holding x, 32-byte aligned for the vector ops (a temporary;
    an element at another offset is moved by a one-element copy, the scalar unit's
    GetValue / SetValue); with `into`, the value is then copied there."""


    if isinstance(x, Region) and _aligned(x, dtype):
        out = x
    elif isinstance(x, Region):
        out = temp(dtype)
        _mem.copy(x, out)
    elif _scalar(x):
        out = temp(dtype)
        tile.fill(out, x)
    else:
        out = into if into is not None and _aligned(into, dtype) else temp(dtype)
        _emit(x, dtype, out)
    if into is not None and out is not into:
        _mem.copy(out, into)
    return into if into is not None else out


def _emit(x, dtype, out):
    if x.op == "select":
        b = _core.builder()
        loc = _core.current_loc()
        b.begin_if(x.cond, loc)
        materialize(x.a, dtype, into=out)
        b.begin_else(loc)
        materialize(x.b, dtype, into=out)
        b.end_if(loc)
        return
    if x.op == "neg":
        tile.muls(out, materialize(x.a, dtype), -1.0)
        return
    a, b, op = x.a, x.b, x.op
    if op in ("+", "*") and _scalar(a) and not _scalar(b):
        a, b = b, a
    if _scalar(b) and op in ("+", "-", "*") and not _scalar(a):
        ra = materialize(a, dtype)
        if op == "*":
            tile.muls(out, ra, b)
        else:
            tile.adds(out, ra, b if op == "+" else -b)
        return
    if _scalar(a) and op == "-" and not _scalar(b):  # c - x = (-x) + c, exactly
        tile.muls(out, materialize(b, dtype), -1.0)
        tile.adds(out, out, a)
        return
    getattr(tile, _OPS[op])(out, materialize(a, dtype), materialize(b, dtype))


def snapshot(value, name=None):
    """`x = buf[i]` / `x = a[i] * 2 + b` binding a float element to a name: in the original
    a scalar the scalar unit reads (GetValue) or computes at that statement (a LetStmt), so
    later stores into buf do not change x (fused_sigmoid_gating_delta_rule reads
    `exp_A = v[0]`, then overwrites v[0]; hadamard's butterfly). The value is copied into a
    one-element temporary named after the variable; other values (a tile slice, an index, a
    GM element, whose tensor a kernel does not change under its reads) are bound as they
    are."""
    if isinstance(value, FloatElem) or (
            is_float_region(value) and value.buffer.scope == "UB" and all(value.points)
            and value.elements() == 1):
        d = value.dtype() if isinstance(value, FloatElem) else value.buffer.dtype
        saved, cur().pending_name = cur().pending_name, name
        try:
            t = temp(d)
        finally:
            cur().pending_name = saved
        out = materialize(value, d, into=t)
        _to_scalar_unit()  # the value is in a scalar register from here on
        return out
    return value


def store(dst, value):
    """dst (one UB element of a float buffer) = value (a FloatElem)."""
    if dst.buffer.scope != "UB" or dst.elements() != 1:
        raise refuse(f"stored into '{dst.buffer.name}' ({dst.buffer.scope}, "
                     f"{dst.elements()} elements)")
    materialize(value, dst.buffer.dtype, into=dst)


def as_scalar_region(x):
    """A FloatElem given as the scalar of a T.tile op: computed into a one-element temp,
    which the scalar unit reads as the op's operand (ordered after the V ops that wrote it,
    as a snapshot is)."""
    r = materialize(x, x.dtype())
    _to_scalar_unit()
    return r


_core.register_float_op(region_op)

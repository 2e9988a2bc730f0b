"""Shared state of the front end: the extension module, errors, dtypes, symbolic dims,
buffers and regions, and the lowering context the `T.` calls emit into."""

import contextlib
import functools
import numbers
import operator
import os
import re
import sys
import warnings

import numpy as np

from . import _surface
from ._builder import Idle

try:
    import _tilepipe as _ext
except ImportError:
    # A source checkout: the module is built into <repo>/build (or $TILEPIPE_BUILD_DIR).
    _build = os.environ.get("TILEPIPE_BUILD_DIR") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "build")
    sys.path.append(_build)
try:
    import _tilepipe as _ext
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "tilelang: the tilepipe extension module _tilepipe was not found "
        f"({e}); build it with `ninja -C build _tilepipe` and put build/ on PYTHONPATH "
        "(`tilepipe run-py` does both)"
    ) from e


class TilelangError(Exception):
    """A user error in a kernel, located at the Python file:line that caused it."""

    def __init__(self, message, loc=None, hint=None):
        # loc is (file, line) or (file, line, column); .loc keeps (file, line)
        self.column = loc[2] if loc is not None and len(loc) > 2 else None
        self.loc = tuple(loc[:2]) if loc is not None else None
        self.hint = hint
        self.message = message
        text = message
        if loc is not None:
            col = f":{self.column}" if self.column else ""
            text = f"{loc[0]}:{loc[1]}{col}: error: {message}"
        if hint:
            text += f"\n  hint: {hint}"
        super().__init__(text)


class UnsupportedName(TilelangError, AttributeError):
    """A `T.` name tilepipe does not provide (also an AttributeError, so hasattr() works)."""


class DeviceCountError(TilelangError):
    """A script or kernel that needs several NPUs (ACL SHMEM, dispatch / combine across
    ranks): tilepipe simulates one die."""


def needs_devices(n, what, loc=None):
    n = f"{n}" if n else "several"
    return DeviceCountError(
        f"{what} needs {n} devices; tilepipe simulates one die (1 device)",
        loc=loc or user_loc(),
        hint="multi-device kernels (shmem put / get, MoE dispatch / combine across ranks) have "
             "no model; run the single-device examples")


class TilepipeError(TilelangError):
    """Diagnostics from tilepipe's verifier, passes, lowering or simulator."""

    def __init__(self, message, diagnostics=()):
        self.diagnostics = list(diagnostics)
        Exception.__init__(self, message)
        self.message = message
        self.loc = None
        self.hint = None
        if self.diagnostics:
            d = self.diagnostics[0]
            self.loc = (d["file"], d["line"])
            self.hint = d["hint"]

    @property
    def kinds(self):
        return [d["kind"] for d in self.diagnostics]


# Run-time findings of the race, flag and deadlock checks (and the other program errors a
# run finds: a run-time slice out of range); budgets, interrupts and host data are not.
CHECK_KINDS = frozenset(_ext.CHECK_KINDS)


class HazardWarning(UserWarning):
    """A hazard of the hardware or of the original's toolchain that the simulation does not
    show (tilepipe's verifier warnings, docs/errors.md "Warnings"), at the kernel's line.
    `warnings.simplefilter("error", HazardWarning)` or TILEPIPE_WERROR=1 makes them errors."""


def warn_hazards(compiled):
    """Each warning of a compilation as a HazardWarning at the user's .py line."""
    for w in compiled.warnings:
        warn_at(f"{w['message']} [{w['kind']}]\n  hint: {w['fix']}", HazardWarning,
                (w["file"], w["line"]) if w["file"] else None)


class KernelCheckError(TilepipeError):
    """A kernel call whose run found a race, an unmatched flag, a deadlock or another program
    error: the kernel would be wrong or hang on the NPU, whatever its outputs here
    (`tilepipe run-py` exits 3)."""


# The extension raises these for tilepipe's errors (python/ext/errors.cc: a check finding of a
# run is a KernelCheckError, any other user error a TilepipeError).
_ext.set_error_types(TilepipeError, KernelCheckError)


def checks_on():
    """Kernel calls run the race detector unless the user opted out: TILEPIPE_NO_CHECK=1 (or
    `tilepipe run-py --no-check`, which sets it). Flags and deadlocks are always checked."""
    return os.environ.get("TILEPIPE_NO_CHECK", "") in ("", "0")


# Errors tilepipe raised out of a kernel call or compilation, in order: a script that
# catches them and goes on still ends non-zero under `tilepipe run-py` (raised()). The
# front end's own catches (autotune's rejected configs) take theirs back (handled()).
RAISED = []


def raised(e):
    if not any(r is e for r in RAISED):
        RAISED.append(e)


def handled(e):
    RAISED[:] = [r for r in RAISED if r is not e]


def records_errors(fn):
    """Wraps a user-facing entry (a kernel call, a compilation): a TilelangError leaving it
    is recorded in RAISED before it reaches the caller."""

    @functools.wraps(fn)
    def entry(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TilelangError as e:
            raised(e)
            raise

    return entry

_OWN_DIRS = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d)
                  + os.sep for d in ("tilelang", "tilepipe"))


def is_own_file(path):
    """A file of tilepipe's Python side (the front end, the runner and its host modules)."""
    return os.path.abspath(path).startswith(_OWN_DIRS)


def user_loc():
    """(file, line) of the innermost caller outside tilepipe's own Python files, or None."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith("<") and not is_own_file(fn) and "/importlib/" not in fn:
            return (os.path.basename(fn), f.f_lineno)
        f = f.f_back
    return None


def warn_at(msg, category, loc, stacklevel=2):
    """A warning reported at `loc` ((file, line[, column]), the user's line) when known, else
    at the caller `stacklevel` frames up, as warnings.warn counts them."""
    if loc:
        warnings.warn_explicit(msg, category, loc[0], loc[1])
    else:
        warnings.warn(msg, category, stacklevel=stacklevel + 1)


def unsupported(what, why, hint=None):
    """The error for a part of the original's surface tilepipe does not model, at the
    user's line."""
    return UnsupportedName(f"{what} is not supported by tilepipe: {why}", loc=user_loc(),
                           hint=hint)


def unsupported_class(what, why):
    """A class of the original's surface whose use is `unsupported(what, why)`."""

    class Unsupported:
        def __init__(self, *a, **kw):
            raise unsupported(what, why)

    Unsupported.__name__ = what.rsplit(".", 1)[-1]
    return Unsupported


class Unsupported:
    """A name of the original's surface that tilepipe does not provide (tilelang/_surface.py).
    It resolves, so imports and feature probes (`hasattr`) work; calling it or using it as a
    value (a dtype, an attribute) is the error `not supported: NAME (why)` at the user's
    line."""

    def __init__(self, name, why):
        self._name, self._why = name, why

    def error(self):
        if self._why == _surface.DEVICES:
            return needs_devices(None, f"{self._name} ({self._why})", loc=current_loc())
        return UnsupportedName(f"not supported: {self._name} ({self._why})", loc=current_loc(),
                               hint="docs/python.md lists the language and what each name maps to")

    def __call__(self, *a, **kw):
        raise self.error()

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise self.error()

    def __repr__(self):
        return self._name


def surface_name(qualname, key):
    """`T.NAME` / `T.tile.NAME` / `tilelang.NAME` that a module does not define: the
    Unsupported stub of a name of the original's surface (`key` as _surface's table spells
    it), else an UnsupportedName error (no such name)."""
    if key.startswith("__"):
        raise AttributeError(key)
    why = _surface.why_not(key)
    if why is not None:
        return Unsupported(qualname, why)
    raise UnsupportedName(f"{qualname} is not a name of TileLang-Ascend's language",
                          loc=current_loc(),
                          hint="check the spelling; docs/python.md lists every name")

# ---- dtypes ----

# The dtypes of A2/A3: every spelling -> the IR's short name (ir::to_string).
_DTYPES = {
    "float16": "f16", "half": "f16", "fp16": "f16", "f16": "f16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float": "f32", "float32": "f32", "fp32": "f32", "f32": "f32",
    "int32": "i32", "i32": "i32", "int": "i32",
    "int8": "i8", "i8": "i8",
    "uint8": "u8", "u8": "u8",
    "int16": "i16", "i16": "i16", "short": "i16",
    "uint16": "u16", "u16": "u16",
    "uint32": "u32", "u32": "u32",
    "int64": "i64", "i64": "i64", "long": "i64",
    "uint64": "u64", "u64": "u64",
    "bool": "bool", "boolean": "bool",
}
# short name -> (canonical name, numpy dtype of host arrays, bytes of an element)
_CODES = {"f16": ("float16", "float16", 2), "bf16": ("bfloat16", "float32", 2),
          "f32": ("float32", "float32", 4), "i32": ("int32", "int32", 4),
          "i8": ("int8", "int8", 1), "u8": ("uint8", "uint8", 1), "i16": ("int16", "int16", 2),
          "u16": ("uint16", "uint16", 2), "u32": ("uint32", "uint32", 4),
          "i64": ("int64", "int64", 8), "u64": ("uint64", "uint64", 8),
          "bool": ("bool", "bool", 1)}
# The fp8 (and fp4) family in any of its spellings (float8_e4m3, float8_e4m3fn, e4m3_float8,
# fp8_e5m2, float8_e8m0fnu, ...): Ascend 950's types, not A2/A3's.
_FP8 = re.compile(r"float8|fp8|e4m3|e5m2|e8m0|hifloat8|float4|fp4")


def dtype_bytes(d):
    """Bytes of one element of a dtype given by name."""
    return _CODES[dtype_code(d)][2]


def check_buffer_size(name, shape, dtype, loc=None):
    """The C++ layers take int64 extents and buffers of at most MAX_BUFFER_BYTES: a larger
    shape is this `bad-shape` error, never an overflow or a binding's TypeError."""
    nbytes = dtype_bytes(dtype)
    for d in shape:
        if isinstance(d, int):
            nbytes *= d
    if nbytes > _ext.MAX_BUFFER_BYTES:
        raise err(f"bad-shape: buffer '{name}' has shape {list(shape)} of {dtype_name(dtype)}: "
                  f"{nbytes} bytes, more than the limit of 2^48 bytes (256 TiB) for one buffer",
                  hint="check the sizes that shape this buffer", loc=loc)


def dtype_name(d):
    """Canonical tilelang name of a dtype given as a string, T.float16, a numpy or torch dtype."""
    if isinstance(d, Unsupported):
        raise d.error()
    s = getattr(d, "_tl_name", None)
    if s is None and isinstance(d, type) and d.__module__ == "numpy":
        s = np.dtype(d).name  # a numpy scalar type (np.int64, np.bool_)
    if s is None:
        s = str(d)
    s = s.replace("torch.", "")
    if s not in _DTYPES and _FP8.search(s.lower()):
        raise TilelangError(
            f"not supported on A2/A3: dtype {s} (the fp8 family is stored and computed only "
            "by Ascend 950; A2/A3 have no fp8 conversion or arithmetic)",
            loc=current_loc(),
            hint="keep the data in bfloat16 or float16 (or int8 with a scale) on A2/A3")
    if s not in _DTYPES:
        raise TilelangError(
            f"unknown dtype {d!r}",
            loc=current_loc(),
            hint="use one of float16, bfloat16, float32 (float), int64, int32, int16, int8, "
            "uint64, uint32, uint16, uint8, bool",
        )
    return _CODES[_DTYPES[s]][0]


def dtype_code(d):
    return _DTYPES[dtype_name(d)]


def numpy_dtype(d):
    return _CODES[dtype_code(d)][1]


# ---- the lowering context ----


class _Process:
    """What is per process: the symbolic bindings in force (a kernel call resolves shapes
    outside any build too) and the kernel build under way (a _builder.Builder, or None)."""

    def __init__(self):
        self.bindings = None  # symbolic dim name -> value
        self.build = None


ctx = _Process()
_IDLE = Idle()


def cur():
    """The kernel build under way (tilelang/_builder.py), or the idle one outside a build."""
    return ctx.build if ctx.build is not None else _IDLE


@contextlib.contextmanager
def building(b):
    """Builder b is the build under way inside the `with` (the previous one after it)."""
    saved = ctx.build
    ctx.build = b
    try:
        yield b
    finally:
        ctx.build = saved
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def current_loc():
    """Location for an API call: the caller's line when called from a plain Python helper
    (a function the kernel calls), else the statement the interpreter is lowering."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back
    stmt_loc = cur().stmt_loc
    if f is not None and cur().ir is not None and stmt_loc is not None:
        # Frames below the interpreter (its statement walk, its expression evaluation)
        # belong to the script that called the kernel factory.
        g = sys._getframe(1)
        while g is not None and g is not f:
            if g.f_code.co_filename.endswith(("_interp.py", "_eval.py")):
                return stmt_loc
            g = g.f_back
        return (os.path.basename(f.f_code.co_filename), f.f_lineno)
    if stmt_loc is not None:
        return stmt_loc
    if f is not None:
        return (os.path.basename(f.f_code.co_filename), f.f_lineno)
    return None


def err(message, hint=None, loc=None):
    return TilelangError(message, loc=loc or current_loc(), hint=hint)


def builder():
    """The IR builder of the kernel being built (an error outside a kernel body)."""
    ir = cur().ir
    if ir is None:
        raise err(
            "a T. statement used outside a kernel body",
            hint="call it inside `with T.Kernel(...)` of a @T.prim_func",
        )
    return ir


# ---- symbolic dims ----


class Sym:
    """`T.symbolic(name)`: a dimension bound from the argument shapes at call time."""

    def __init__(self, op, a=None, b=None, name=None):
        self.op, self.a, self.b, self.name = op, a, b, name

    def _bin(op):
        def f(self, other):
            return Sym(op, self, other)

        def r(self, other):
            return Sym(op, other, self)

        return f, r

    __add__, __radd__ = _bin("+")
    __sub__, __rsub__ = _bin("-")
    __mul__, __rmul__ = _bin("*")
    __floordiv__, __rfloordiv__ = _bin("//")
    __mod__, __rmod__ = _bin("%")
    __lt__, _ = _bin("<")
    __le__, _ = _bin("<=")
    __gt__, _ = _bin(">")
    __ge__, _ = _bin(">=")

    def __neg__(self):
        return Sym("-", 0, self)

    def __repr__(self):
        if self.op == "var":
            return self.name
        return f"({self.a!r} {self.op} {self.b!r})"

    def __hash__(self):
        return id(self)

    def __bool__(self):
        return bool(resolve(self))

    def __index__(self):
        v = resolve(self)
        if not isinstance(v, int):
            raise err(f"symbolic {self!r} is a run-time value here; a Python int is needed")
        return v

    def __int__(self):
        return self.__index__()


def resolve(x):
    """The value of a symbolic expression under the current bindings (ints stay ints)."""
    if not isinstance(x, Sym):
        return x
    if x.op == "var":
        if ctx.bindings is None or x.name not in ctx.bindings:
            raise err(
                f"symbolic dimension '{x.name}' has no value yet",
                hint="symbolic dimensions are bound from the shapes of the arrays passed to "
                "the kernel; call the kernel with arrays before asking for its source",
            )
        return ctx.bindings[x.name]
    a, b = resolve(x.a), resolve(x.b)
    return _SYM_OPS[x.op](a, b)


_SYM_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
            "%": operator.mod, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge}


def sym_vars(x, out):
    if isinstance(x, Sym):
        if x.op == "var":
            out.add(x.name)
        else:
            sym_vars(x.a, out)
            sym_vars(x.b, out)
    return out


# ---- values ----


class Deferred:
    """A value the front end computes only where it is used: a float element expression
    (tilelang/_felem.py). As the scalar operand of a tile op it is computed into a
    one-element UB region first."""

    def scalar_region(self):
        raise NotImplementedError


def float_refused(how):
    """The error for float element arithmetic used where tilepipe does not model it."""
    return err(f"float element arithmetic on UB values {how}: tilepipe models it only when "
               "stored into a UB element (`x[i] = a[i] * 2 + b[j]`), passed as the scalar "
               "of a T.tile op, compared (`if x > 0.5:`) or chosen by T.if_then_else",
               hint="tilepipe's scalar expressions are integers; compute on tiles with "
               "T.tile.* instead")


# Python operators on float element regions: tilelang/_felem.py lowers them to tile ops, a
# layer above these values, and registers its entry here when it is imported.
_float_op = [None]


def register_float_op(fn):
    _float_op[0] = fn

Expr = _ext.Expr


def is_expr(x):
    return isinstance(x, Expr)


def to_index(x, what="index"):
    """An integer or an integer expression (Expr), from ints, symbolic dims and elements."""
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, Sym):
        x = resolve(x)
    if isinstance(x, Region):
        return x.load()
    if isinstance(x, Expr):
        c = x.const_value()
        return c if c is not None else x
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, float) and x.is_integer():
        return int(x)
    raise err(f"expected an integer {what}, found {type(x).__name__} {x!r}",
              hint="indices, loop bounds and conditions are integer expressions")


class Buffer:
    """A GM tensor or an on-chip allocation; indexing gives a Region."""

    vid_full = None  # the author's rows of a buffer the vid reduction halved (_vid.py)

    def __init__(self, ext, name, shape, dtype, scope):
        self.ext = ext
        self.name = name
        self.shape = list(shape)
        self.dtype = dtype
        self.scope = scope  # "GM", "L1", "L0A", "L0B", "L0C", "UB"

    def __getitem__(self, idx):
        return make_region(self, idx)

    def region(self):
        return Region(self, [0] * len(self.shape), list(self.shape), [False] * len(self.shape))

    @property
    def ndim(self):
        return len(self.shape)

    def __repr__(self):
        return f"Buffer({self.name}, {self.scope}, {self.shape}, {self.dtype})"

    def slice_rows(self, start, ext):
        """The extent a slice of the first dimension takes (a halved buffer's: _vid.py)."""
        return ext

    def __setitem__(self, idx, value):
        raise err(
            f"element assignment to '{self.name}' is not supported: tilepipe's IR has no "
            "scalar stores",
            hint="write whole tiles with T.tile.* ops (T.tile.fill, T.tile.add, ...) or T.copy",
        )


def bind_let(name, value):
    """`name = value` in a scope, where value reads a tensor element: an integer element
    (`index_i = indices_ub_[i]`, `block_i = block_table[b, idx]`) or an integer expression
    that reads one. The original's parser makes such a binding a LetStmt, read once by the
    scalar unit where it stands; so does tilepipe (ir::LetStmt), instead of substituting the
    read into every use. Anything else is returned unchanged."""
    if cur().ir is None or (cur().scope is None and cur().split != "all") or not name:
        return value
    if isinstance(value, Region) and all(value.points) and value.elements() == 1 and \
            value.buffer.dtype.startswith(("int", "uint")) and value.buffer.dtype != "uint8":
        bound = Region(value.buffer, value.starts, value.extents, value.points)
        bound.let = _bind(name, value.load())
        return bound
    if isinstance(value, Expr) and value.has_load():
        return _bind(name, value)
    return value


def _bind(name, e):
    v = cur().ir.let(name, e, current_loc())
    if any(e is x for x in cur().vid_ub_loads):
        cur().vid_ub_loads.append(v)  # still a UB element for the vid reduction (_vid.py)
    return v


class Region:
    """A rectangular slice: start expression and static extent per dimension."""

    let = None  # the variable a binding read the element into (bind_let)
    dyn = None  # {dimension: run-time length} of a slice with run-time lengths (make_region)

    def __init__(self, buffer, starts, extents, points):
        self.buffer = buffer
        self.starts = starts
        self.extents = extents
        self.points = points  # the index was a single position

    def tup(self):
        if self.dyn:
            d, length = next(iter(self.dyn.items()))
            raise runtime_extent_error(self.buffer, d, length)
        return (self.buffer.ext, list(self.starts), list(self.extents))

    def elements(self):
        n = 1
        for e in self.extents:
            n *= e
        return n

    def squeezed(self):
        e = list(self.extents)
        while len(e) > 1 and e[0] == 1:
            e.pop(0)
        return e

    def load(self, convert=False):
        """The element as an integer expression: an integer element's value, or with
        `convert` (an explicit conversion, `T.cast(x, "int32")`) a float element's, truncated
        toward zero as the scalar unit's C conversion of GetValue does (the IR's load)."""
        if self.let is not None:
            return self.let
        if self.buffer.dtype in ("float16", "bfloat16", "float32") and not convert:
            # tilepipe's scalar expressions are integers: a float element read as one would
            # be truncated (see _felem.py)
            raise float_refused(f"('{self.buffer.name}') read as an integer value: a condition, an "
                         "index, a loop bound, a comparison or a T.alloc_var")
        if any(e != 1 for e in self.extents):
            raise err(
                f"slice of '{self.buffer.name}' with extents {self.extents} used as a scalar",
                hint="index every dimension with a single position to read one element",
            )
        e = _ext.load(self.buffer.ext, list(self.starts), current_loc())
        if self.buffer.scope == "UB" and cur().vid_threads == 2:
            cur().vid_ub_loads.append(e)  # a GM index that is one keeps its rows (_vid.py)
        return e

    def __getitem__(self, idx):
        raise err("slicing a slice is not supported", hint="index the buffer directly")

    def __setitem__(self, idx, value):
        raise err("element assignment is not supported: tilepipe's IR has no scalar stores",
                  hint="use T.tile.fill / T.tile.* on a tile")

    # Arithmetic on an element reads it with the scalar unit (data-dependent addressing);
    # on a float element it is float arithmetic (_felem.py).
    def _op(name):
        def f(self, *a):
            if self.buffer.dtype in ("float16", "bfloat16", "float32"):
                return _float_op[0](name, self, *a)
            if name in ("__truediv__", "__rtruediv__"):
                raise err("'/' on an integer element", hint="use '//' (floor division)")
            return getattr(self.load(), name)(*[to_index(x) for x in a])

        return f

    for _n in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
               "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__lt__", "__le__",
               "__gt__", "__ge__", "__neg__", "__truediv__", "__rtruediv__"):
        locals()[_n] = _op(_n)
    del _n

    def __repr__(self):
        return f"{self.buffer.name}[{self.starts}; {self.extents}]"


def make_region(buf, idx):
    if not isinstance(idx, tuple):
        idx = (idx,)
    shape = buf.shape
    if len(idx) > len(shape):
        raise err(
            f"'{buf.name}' has rank {len(shape)} (shape {shape}) but was indexed with "
            f"{len(idx)} indices",
            hint=f"pass at most {len(shape)} indices",
        )
    starts, extents, points = [], [], []
    dyn = {}
    full = buf.vid_full
    for d, i in enumerate(idx):
        dim = full if d == 0 and full else shape[d]
        if isinstance(i, slice):
            if i.step not in (None, 1):
                raise err(f"slice step {i.step!r} on '{buf.name}': only step 1 is supported")
            start = 0 if i.start is None else to_index(i.start, "slice start")
            if i.stop is None:
                if isinstance(start, int):
                    ext = dim - start
                else:
                    raise err(
                        f"slice '{buf.name}[...{d}: open end]' with a run-time start has no "
                        "static extent",
                        hint="write the end as start + EXTENT",
                    )
            else:
                stop = to_index(i.stop, "slice end")
                if isinstance(start, int) and isinstance(stop, int):
                    ext = stop - start
                else:
                    ext = _ext.const_diff(start, stop)
                    if ext is None:
                        ext = _runtime_extent(buf, d, dim, start, stop, dyn)
            if ext <= 0:
                raise err(f"slice of '{buf.name}' in dimension {d} has extent {ext}",
                          hint="the end of a slice must be after its start")
            if d == 0 and full:
                if d in dyn:
                    raise runtime_extent_error(buf, d, dyn[d])
                ext = buf.slice_rows(start, ext)
            starts.append(start)
            extents.append(ext)
            points.append(False)
        elif i is Ellipsis:
            raise err("Ellipsis (...) in an index is not supported", hint="write ':' per dimension")
        else:
            starts.append(to_index(i))
            extents.append(1)
            points.append(True)
    for d in range(len(idx), len(shape)):
        starts.append(0)
        extents.append(shape[d])
        points.append(False)
    r = Region(buf, starts, extents, points)
    if dyn:
        r.dyn = dyn
    return r


def runtime_extent_error(buf, d, length):
    return err(
        f"not supported: slice of '{buf.name}' in dimension {d} with a run-time extent "
        f"({length!r}) outside T.copy (tilepipe's tile ops hold a build-time number of "
        "elements; T.copy takes a run-time length)",
        hint="copy the run-time part into a whole tile (T.copy takes it) and compute on the "
        "tile; docs/python.md, \"Run-time lengths\"")


def _runtime_extent(buf, d, dim, start, stop, dyn):
    """A slice `start:stop` whose length is a run-time value: the region keeps the length
    (region.dyn) and, as its static extent, the largest the length can be (interval bounds
    over the launch and loop indices, at most the dimension). T.copy moves the run-time
    length (docs/python.md, "Run-time lengths"); any other use is an error at its line."""
    length = stop - start
    r = _ext.bounds(length, cur().var_ranges, cur().block_num)
    hi = dim if r is None else min(dim, r[1])
    if hi <= 0:
        raise err(f"slice of '{buf.name}' in dimension {d} has the run-time extent "
                  f"{length!r}, which is never positive",
                  hint="the end of a slice must be after its start")
    dyn[d] = length
    return hi


def as_region(x, what="operand", runtime_extents=False):
    """A buffer or slice as a Region. A slice with a run-time length (region.dyn) is taken
    only where `runtime_extents` says the caller moves it (T.copy)."""
    if isinstance(x, Buffer):
        return x.region()
    if isinstance(x, Region):
        if x.dyn and not runtime_extents:
            d, length = next(iter(x.dyn.items()))
            raise runtime_extent_error(x.buffer, d, length)
        return x
    raise err(f"expected a buffer or a slice as {what}, found {type(x).__name__} {x!r}",
              hint="pass a T.Tensor parameter, an alloc_* buffer or a slice of one")

"""The kernel language's types and frames: dtypes (`T.float16`, which also convert a value),
parameter annotations (`T.Tensor`), `T.symbolic`, and the objects the interpreter's `with` and
`for` take (`T.Kernel`, `T.Scope`, `T.If`, `T.serial` / `T.Pipelined` / `T.Parallel`,
`T.Persistent`). Re-exported by tilelang.language."""

from .. import _felem
from .._core import Region, Sym, TilelangError, cur, dtype_name, err, resolve, to_index

# ---- types ----


class _DType(str):
    """T.float16 etc.: a dtype name that also converts a value (`T.float32(x)`)."""

    @property
    def _tl_name(self):
        return str(self)

    def __call__(self, value=0):
        v = resolve(value)
        if isinstance(v, Region) and v.buffer.scope == "GM" and v.elements() == 1 and \
                self in _felem.FLOATS:
            # A GM element as a float scalar operand (`T.float32(seqlen[i])`): the scalar
            # unit's GetValue and conversion, modelled as a one-element UB operand (an
            # integer element is read as an integer and filled in).
            gm_float = v.buffer.dtype in _felem.FLOATS
            r = _felem.materialize(v if gm_float else v.load(), str(self))
            _felem._to_scalar_unit("MTE2" if gm_float else "V")  # read by the scalar unit
            return r
        if self not in _felem.FLOATS and self != "bool" and _felem.is_float(v):
            return _float_to_int(v)
        if isinstance(v, Region):
            return v
        if isinstance(v, (int, float)) and self in _felem.FLOATS:
            return float(v)
        if isinstance(v, float) and self != "bool":
            return int(v)  # C's conversion: toward zero
        return v


def _float_to_int(v):
    """A float element or element expression converted to an integer by the scalar unit
    (`kc = T.cast(cnt[0], "int32")` then `kept[kc]`): C's conversion of the value, toward
    zero. An expression is computed into a one-element UB temporary first (the V pipe, then
    a V -> S order for the scalar unit's read, as for every float element value)."""
    if isinstance(v, Region):
        if v.elements() != 1:
            raise err(f"a slice of '{v.buffer.name}' with {v.elements()} elements converted "
                      "to an integer", hint="index one element")
        return v.load(convert=True)
    r = _felem.materialize(v, v.dtype())
    _felem._to_scalar_unit("V")
    return r.load(convert=True)


float16 = _DType("float16")
bfloat16 = _DType("bfloat16")
float32 = _DType("float32")
int32 = _DType("int32")
int8 = _DType("int8")
uint8 = _DType("uint8")
int16 = _DType("int16")
int64 = _DType("int64")
uint16 = _DType("uint16")
uint32 = _DType("uint32")
uint64 = _DType("uint64")
boolean = _DType("bool")  # T.bool: __getattr__ (a module-level `bool` would hide the builtin)
half = float16


class TensorSpec:
    scalar = False

    def __init__(self, shape, dtype):
        if isinstance(shape, (int, Sym)):
            shape = (shape,)
        self.shape = list(shape)
        self.dtype = dtype_name(dtype)

    def __repr__(self):
        return f"T.Tensor({self.shape}, {self.dtype})"


class ScalarSpec:
    """A scalar kernel parameter (`n: T.int32`, `s: T.float32`, `n: int`)."""

    scalar = True

    def __init__(self, dtype):
        self.shape = []
        self.dtype = dtype_name(dtype)

    def __repr__(self):
        return f"T.{self.dtype}"


def _dense(shape, strides):
    """Whether `strides` are the row-major strides of `shape` (build-time numbers)."""
    def number(x):
        try:
            return resolve(x)
        except TilelangError:
            return x  # an unbound symbolic dim: not a number
    dims = [number(d) for d in (shape if isinstance(shape, (list, tuple)) else [shape])]
    want = [1]
    for d in reversed(dims[1:]):
        want.insert(0, want[0] * d)
    got = [number(x) for x in (strides if isinstance(strides, (list, tuple)) else [strides])]
    return len(got) == len(want) and all(
        isinstance(g, int) and isinstance(w, int) and g == w for g, w in zip(got, want))


class _TensorAnnotation:
    """`T.Tensor(shape, dtype)` and the subscript spelling `T.Tensor[shape, dtype]`."""

    def __call__(self, shape, dtype="float32", data=None, strides=None, elem_offset=None,
                 scope=None, align=None, offset_factor=None, buffer_type="",
                 axis_separators=None):
        """The original's parameters (its proxy.py). A layout other than the dense row-major
        one (strides, an element offset, a data pointer, a memory scope) is an error at the
        annotation, not read as dense; align / offset_factor / buffer_type / axis_separators
        do not change the elements."""
        for name, value, ok in (
                ("strides", strides, strides is None or _dense(shape, strides)),
                ("elem_offset", elem_offset, elem_offset in (None, 0)),
                ("data", data, data is None),
                ("scope", scope, scope in (None, "global"))):
            if not ok:
                raise err(f"not supported: T.Tensor {name}={value!r} (tilepipe's tensors are "
                          "dense row-major arrays in GM, the layout the caller's array has)",
                          hint=f"drop {name}: pass the tensor as a dense array")
        return TensorSpec(shape, dtype)

    def __getitem__(self, args):
        if not isinstance(args, tuple) or len(args) not in (1, 2):
            raise err("T.Tensor[shape, dtype] takes a shape and a dtype")
        return TensorSpec(*args)


Tensor = _TensorAnnotation()


Buffer_ = Tensor
Buffer = Tensor  # noqa: F811 - T.Buffer spells the same annotation


def symbolic(name, dtype="int32"):
    return Sym("var", name=name)


dyn = symbolic


def func_attr(attrs):
    if not isinstance(attrs, dict):
        raise err("T.func_attr takes a dict")
    if "enable_auto_sync" in attrs and cur().kernel is not None:
        cur().kernel.func_attrs["enable_auto_sync"] = bool(attrs["enable_auto_sync"])


# ---- kernel and scopes (used by the interpreter's `with`) ----


class KernelCtx:
    def __init__(self, *blocks, is_npu=True, threads=None, **kw):
        if len(blocks) != 1:
            raise err(
                f"T.Kernel with {len(blocks)} grid dimensions: tilepipe launches a 1-D grid "
                "of AI-core tasks",
                hint="flatten the grid: T.Kernel(m_num * n_num, is_npu=True) as (cid, vid); "
                "bx = cid // n_num; by = cid % n_num",
            )
        n = to_index(blocks[0], "block count")
        if not isinstance(n, int):
            raise err("T.Kernel's block count must be a compile-time integer")
        self.block_num = n
        self.is_npu = is_npu
        if isinstance(threads, (list, tuple)) and len(threads) == 1:
            threads = threads[0]
        threads = resolve(threads)
        if threads is not None and threads not in (1, 2):
            raise err(f"T.Kernel(threads={threads!r}): an NPU kernel launches 1 or 2 vector "
                      "cores per Cube core", hint="threads=1 (C:V = 1:1) or threads=2 (1:2)")
        # developer mode: the kernel binds only cid and the rows split by vid reduction
        self.threads = threads


def Kernel(*blocks, **kw):
    return KernelCtx(*blocks, **kw)


class ScopeCtx:
    def __init__(self, kind):
        if kind not in ("C", "V"):
            raise err(f"T.Scope({kind!r}): expected \"C\" (Cube) or \"V\" (Vector)")
        self.kind = kind


def Scope(kind):
    return ScopeCtx(kind)


# ---- loops (used by the interpreter's `for`) ----


class IfFrame:
    """`with T.If(cond):` (the interpreter turns the frame and its T.Then / T.Else blocks
    into an `if`; outside a `with` it does nothing)."""

    def __init__(self, cond):
        self.cond = cond


class ThenFrame:
    """`with T.Then():`, only directly inside `with T.If(...)`."""


class ElseFrame:
    """`with T.Else():`, only directly inside `with T.If(...)`, after T.Then."""


def If(cond):
    return IfFrame(cond)


def Then():
    return ThenFrame()


def Else():
    return ElseFrame()


class LoopSpec:
    def __init__(self, kind, begin, end, step=1, num_stages=0, cross_interval=1, dims=None):
        self.kind, self.begin, self.end, self.step = kind, begin, end, step
        self.num_stages, self.cross_interval = num_stages, cross_interval
        self.dims = dims


class PersistentSpec:
    """`T.Persistent(domain, wave_size, index, group_size)`: the interpreter's
    Interpreter.persistent lowers the loop over it."""

    def __init__(self, domain, wave_size, index, group_size):
        self.domain, self.wave_size = domain, wave_size
        self.index, self.group_size = index, group_size


def Persistent(domain, wave_size, index, group_size=8):
    return PersistentSpec(list(domain), wave_size, index, group_size)


def _range_args(args, what):
    if len(args) == 1:
        return 0, args[0], 1
    if len(args) == 2:
        return args[0], args[1], 1
    if len(args) == 3:
        return args
    raise err(f"{what} takes (end), (begin, end) or (begin, end, step); got {len(args)} arguments")


def serial(*args, **kw):
    b, e, s = _range_args(args, "T.serial")
    return LoopSpec("serial", b, e, s)


def Pipelined(*args, num_stages=2, cross_interval=1, **kw):
    b, e, s = _range_args(args, "T.Pipelined")
    return LoopSpec("pipelined", b, e, s, num_stages=num_stages, cross_interval=cross_interval)


def Parallel(*dims, coalesced_width=None):
    """The original's signature: extents, and coalesced_width (a vector width hint that must
    divide the innermost extent; it changes no result). The original lowers 1-D and 2-D
    parallel loops only (AscendLowerParallelToVector stops on more)."""
    if len(dims) >= 3:
        raise err(f"T.Parallel over {len(dims)} dimensions: the original lowers 1-D and 2-D "
                  "parallel loops only", hint="nest a T.serial loop (or range) around a 2-D "
                  "T.Parallel over the last two dimensions")
    if coalesced_width is not None:
        w, last = resolve(coalesced_width), to_index(dims[-1], "T.Parallel extent") if dims \
            else None
        if not isinstance(w, int) or w <= 0 or (isinstance(last, int) and last % w):
            raise err(f"T.Parallel coalesced_width={w!r} does not divide the innermost extent "
                      f"{last}", hint="pass a divisor of the innermost extent, or drop it")
    return LoopSpec("parallel", 0, None, 1, dims=list(dims))


def grid(*extents):
    return LoopSpec("grid", 0, None, 1, dims=list(extents))


unroll = serial
vectorized = serial
parallel = serial  # TIR's parallel loop kind: independent iterations, the same results

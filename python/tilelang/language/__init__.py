"""`tilelang.language` (imported as T): the kernel language. Inside a @T.prim_func body the
interpreter (tilelang._interp) evaluates each call below; the calls emit tile IR into
tilepipe's KernelBuilder. See docs/python.md for what maps to what."""

import enum as _enum
import math as _math

from .. import _core
from .. import _felem
from .._core import (Buffer as _Buffer, Expr, Region, Sym, TilelangError, as_region, builder, ctx,
                     err, dtype_code, dtype_name, resolve, to_index)
from .._core import _ext
from .._interp import macro, prim_func  # noqa: F401
from ._gates import _CUBE, _flag_gate, _gate, _no_split  # noqa: F401
from ._var import Var, alloc_var  # noqa: F401
from .sync import (BARRIER_EVENT_ID, SYNC_ALL_FLAG_ID, SYNC_ALL_MODE, _on_the_core,  # noqa: F401
                   barrier_all, drain, pipe_barrier, set_cross_flag, set_flag, sync_all,
                   wait_cross_flag, wait_flag)

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
        if isinstance(v, Region):
            return v
        if isinstance(v, (int, float)) and self in _felem.FLOATS:
            return float(v)
        return v


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
    dims = [_try_resolve(d) for d in (shape if isinstance(shape, (list, tuple)) else [shape])]
    want = [1]
    for d in reversed(dims[1:]):
        want.insert(0, want[0] * d)
    got = [_try_resolve(x) for x in (strides if isinstance(strides, (list, tuple)) else [strides])]
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
    if "enable_auto_sync" in attrs and ctx.kernel is not None:
        ctx.kernel.func_attrs["enable_auto_sync"] = bool(attrs["enable_auto_sync"])


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


def Parallel(*dims, **kw):
    return LoopSpec("parallel", 0, None, 1, dims=list(dims))


def grid(*extents):
    return LoopSpec("grid", 0, None, 1, dims=list(extents))


unroll = serial
vectorized = serial
parallel = serial  # TIR's parallel loop kind: independent iterations, the same results

# ---- memory ----


def _alloc(scope, shape, dtype, name=None, api="alloc_shared"):
    full = None
    if name is None:  # the author's allocation (the front end's temporaries are named)
        from .. import _vid

        shape, full = _vid.alloc_shape(scope, [shape] if isinstance(shape, (int, Sym))
                                       else list(shape), api)
    buf = _alloc_buffer(scope, shape, dtype, name)
    if full is not None:
        buf.vid_full = full
    return buf


def _alloc_buffer(scope, shape, dtype, name=None):
    b = builder()
    if isinstance(shape, (int, Sym)):
        shape = (shape,)
    shape = [to_index(s, "buffer dimension") for s in shape]
    for s in shape:
        if not isinstance(s, int) or s <= 0:
            raise err(f"buffer shape {shape} must be positive compile-time integers")
    name = name or ctx.pending_name or f"buf{len(ctx.names)}"
    base, k = name, 1
    while name in ctx.names:
        k += 1
        name = f"{base}_{k}"
    ctx.names.add(name)
    dt = dtype_name(dtype)
    loc = _core.current_loc()
    _core.check_buffer_size(name, shape, dt)
    if ctx.split == "probe":
        # the probe's: visible to its Python, never allocated
        return _Buffer(_ext.detached_buffer(name, scope, shape, dtype_code(dt), loc), name,
                       shape, dt, scope)
    return _Buffer(b.alloc(name, scope, shape, dtype_code(dt), loc), name, shape, dt, scope)


def alloc_L1(shape, dtype, *a, **kw):
    return _alloc("L1", shape, dtype)


def alloc_L0A(shape, dtype, *a, **kw):
    return _alloc("L0A", shape, dtype)


def alloc_L0B(shape, dtype, *a, **kw):
    return _alloc("L0B", shape, dtype)


def alloc_L0C(shape, dtype, *a, **kw):
    return _alloc("L0C", shape, dtype)


def alloc_ub(shape, dtype, *a, **kw):
    return _alloc("UB", shape, dtype)


def _inferred(default):
    """UB for a buffer the kernel hands to vector ops (or inside Scope("V")), or for any
    buffer of a kernel without Cube ops; else default."""
    name = ctx.pending_name
    vec, cube = ctx.usage
    if ctx.scope == "V" or (name in vec and name not in cube):
        scope = "UB"
    elif not cube and ctx.scope != "C":
        scope = "UB"  # a kernel without Cube work: shared memory is the vector core's
    else:
        scope = default
    return scope


def alloc_shared(shape, dtype, scope=None, *a, **kw):
    """Developer-mode spelling: UB when the kernel uses it in vector ops (or in
    Scope("V")), else L1 (Cube operand staging)."""
    return _alloc(_inferred("L1"), shape, dtype)


def alloc_fragment(shape, dtype, scope=None, *a, **kw):
    """Developer-mode spelling: UB when used by vector ops (or in Scope("V")), else L0C."""
    return _alloc(_inferred("L0C"), shape, dtype, api="alloc_fragment")


def alloc_local(shape, dtype, *a, **kw):
    return _alloc("UB", shape, dtype, api="alloc_local")


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
        if ctx.split != "probe":
            b.pin(buf.ext, o)


# ---- bounds padding: out-of-range GM tiles (the original clamps them) ----


def _note_gm(r, pad=None):
    if r.buffer.scope != "GM":
        return
    ends = ctx.gm_extent.setdefault(r.buffer.name, list(r.buffer.shape))
    for d, (s, e) in enumerate(zip(r.starts, r.extents)):
        whole = r.buffer.shape[d] % e == 0
        if isinstance(s, int):
            if whole:
                continue  # a constant start past the end stays the verifier's error
            hi = s
        else:
            # a whole tile: only a start of the launch indices alone (no loop variable,
            # whose interval may be loose) is taken at its extreme
            b = _ext.bounds(s, {} if whole else ctx.var_ranges, ctx.block_num)
            if b is None:
                continue
            hi = b[1]
        if hi + e > r.buffer.shape[d] and whole:
            # A whole tile whose start runs past the end for some launch index (a second
            # vector core's rows of a one-row tensor): on hardware an unchecked access
            # past the tensor. Padded like a tail, and reported.
            ctx.gm_past.setdefault(r.buffer.name, {}).setdefault(d, _core.current_loc())
        ends[d] = max(ends[d], hi + e)
    if pad is not None:
        ctx.gm_pad.setdefault(r.buffer.name, pad)


# ---- data movement ----


def _origin(r, other):
    """Point-as-origin: `A[i, j]` names the corner of a tile the size of the other operand.
    Returns both operands: a point of lower rank than the other operand's tile takes its
    trailing extents, and the copy moves that many elements into (or out of) the tile's
    first row, as the original's copy does (gemv: a vector `x[k]` into row 0 of an L1
    fractal tile, row 0 of L0C out to `y[n]`)."""
    if not all(r.points) or all(other.points) or len(r.extents) == 0:
        return r, other
    ext = other.squeezed()
    if len(ext) > len(r.extents):
        k = len(r.extents)
        lead = len(other.extents) - k
        other = Region(other.buffer, other.starts, [1] * lead + list(other.extents[lead:]),
                       [False] * len(other.extents))
        ext = ext[-k:]
    extents = [1] * (len(r.extents) - len(ext)) + ext
    return Region(r.buffer, r.starts, extents, [False] * len(extents)), other


def _prefix(s, d, pad):
    """A GM tile smaller than its UB destination (the original copies it into the leading
    part and pads the rest with pad_value): fill the tile with pad_value (or leave it), then
    copy into the leading rows / columns that match the source's extents."""
    se = [e for e in s.extents if e != 1] or [1]
    lead = [i for i, e in enumerate(d.extents) if e != 1]
    if len(se) > len(lead) or any(d.extents[i] < e for i, e in zip(lead, se)):
        return d  # not a prefix: the verifier reports the size mismatch
    if pad is not None and _gate():
        builder().tile_op("fill", d.tup(), [], float(pad), "EQ", _core.current_loc())
    extents = list(d.extents)
    for i, e in zip(lead, se):
        extents[i] = e
    return Region(d.buffer, d.starts, extents, [False] * len(extents))


def copy(src, dst, enable_relu=False, transpose=False, pad_value=None):
    """T.copy, with the original's parameters in its order (npu_copy_v2): enable_relu,
    FixPipe's ReLU on the way out of L0C (max(0, x)); transpose; pad_value."""
    relu = resolve(enable_relu)
    if not isinstance(relu, (bool, int)):
        raise err(f"T.copy enable_relu (its third parameter) is {type(relu).__name__} "
                  f"{relu!r}, expected a bool",
                  hint="T.copy(src, dst, enable_relu, transpose, pad_value); the NPU-IR "
                  "dialect's T.copy(src, dst, sizes) is not tilepipe's (it models AscendC)")
    _copy(src, dst, transpose, pad_value, relu=bool(relu))


def _copy(src, dst, transpose=False, pad_value=None, atomic_add=False, relu=False):
    """T.copy; with atomic_add (T.tile.atomic_add) the DMA unit adds src into the GM dst."""
    b = builder()
    what = "atomic_add" if atomic_add else "copy"
    s, d = as_region(src, f"{what} source"), as_region(dst, f"{what} destination")
    from .. import _vid

    s, d = _vid.copy_regions(s, d)
    s, d = _origin(s, d)
    d, s = _origin(d, s)
    pad = None
    if pad_value is not None:
        pad = float(resolve(pad_value))
    if s.elements() < d.elements() and s.buffer.scope == "GM" and d.buffer.scope == "UB":
        d = _prefix(s, d, pad)
    scopes = (s.buffer.scope, d.buffer.scope)
    if ctx.split == "probe" and "UB" in scopes and any(x in _CUBE for x in scopes):
        ctx.mixed_copy = True  # L0C -> UB / UB -> L1: tilepipe's cv_split (_split.py)
    if not _gate():
        return
    _note_gm(s, pad)
    _note_gm(d)
    loc = _core.current_loc()
    # pad_value is the value of the out-of-range part of a GM tile: the front end pads the
    # host tensor with it (see _note_gm), so the IR copy moves equal element counts.
    b.copy(s.tup(), d.tup(), bool(transpose), None, loc, atomic_add, relu)


def _init_flag(init):
    init = resolve(init)
    if isinstance(init, Region):
        init = init.load()
    if isinstance(init, _ext.Expr):
        c = init.const_value()
        return bool(c) if c is not None else init
    return bool(init)


def _gemm(a, b, c, ta, tb, init):
    flag = _init_flag(init)
    if not _gate():
        return
    bd = builder()
    loc = _core.current_loc()
    if isinstance(flag, bool):
        bd.gemm(a.tup(), b.tup(), c.tup(), ta, tb, flag, loc)
        return
    bd.begin_if(flag, loc)
    bd.gemm(a.tup(), b.tup(), c.tup(), ta, tb, True, loc)
    bd.begin_else(loc)
    bd.gemm(a.tup(), b.tup(), c.tup(), ta, tb, False, loc)
    bd.end_if(loc)


def mma(A, B, C, init=False):
    _gemm(as_region(A), as_region(B), as_region(C), False, False, init)


_STAGE_BYTES = 16 * 1024  # one gemm_v0 staging tile in L0A / L0B (docs/python.md)


def _staging(scope, shape, dtype):
    """gemm_v0's L0A/L0B staging tile of one shape (shared by the calls that use it)."""
    # one staging tile per call site: the buffer is allocated where the call is (a loop body
    # may be the block), so it is not shared with calls in other blocks
    key = (scope, tuple(shape), dtype, ctx.stmt_loc)
    if key not in ctx.hidden:
        tag = "l0a" if scope == "L0A" else "l0b"
        ctx.hidden[key] = _alloc(scope, list(shape), dtype,
                                 name=f"gemm_{tag}_" + "x".join(str(d) for d in shape))
    return ctx.hidden[key]


def _sub(r, dim, start, ext):
    """Region r restricted to [start, start + ext) along squeezed dimension dim (0 or 1)."""
    lead = len(r.extents) - 2
    starts, extents = list(r.starts), list(r.extents)
    starts[lead + dim] = starts[lead + dim] + start if start else starts[lead + dim]
    extents[lead + dim] = ext
    return Region(r.buffer, starts, extents, [False] * len(extents))


def gemm_v0(A, B, C, transpose_A=False, transpose_B=False, init=False):
    """C (+)= op(A) op(B) with A, B in L1 (or L0A / L0B): K is cut into chunks whose L0 tiles
    fit the staging budget; each chunk is copied L1 -> L0A / L0B (MTE1) and multiplied (M),
    the first chunk initialising C when `init`."""
    ra, rb, rc = as_region(A), as_region(B), as_region(C)
    if ctx.split == "probe":
        return  # nothing to note: the library's flags are its own
    if ra.buffer.scope != "L1" and rb.buffer.scope != "L1":
        _gemm(ra, rb, rc, bool(transpose_A), bool(transpose_B), init)
        return
    bd = builder()
    loc = _core.current_loc()
    ta, tb = bool(transpose_A), bool(transpose_B)
    for r in (ra, rb, rc):
        if len(r.squeezed()) != 2 or len(r.extents) < 2 or any(e != 1 for e in r.extents[:-2]):
            raise err(f"T.gemm_v0 operand '{r.buffer.name}' is not a 2-D tile ({r.extents})")
    am, ak = (ra.extents[-1], ra.extents[-2]) if ta else (ra.extents[-2], ra.extents[-1])
    bk, bn = (rb.extents[-1], rb.extents[-2]) if tb else (rb.extents[-2], rb.extents[-1])
    if ak != bk:
        raise err(f"T.gemm_v0: A is [{am} x {ak}] and B is [{bk} x {bn}]; the K extents differ",
                  hint="check the shapes and the transpose flags")
    K = ak
    if _hand_synced("C") or not ctx.auto_sync:
        # the library's own flags: no pass places any where the author syncs, or turned
        # automatic sync off (TL_ASCEND_AUTO_SYNC: False with only cross flags in the scope)
        _gemm_v0_library(ra, rb, rc, ta, tb, init, K)
        return
    eb = _core.dtype_bytes(ra.buffer.dtype)
    kf = 32 // eb  # a fractal's K: 16 half, 8 float, 32 int8 elements
    kc = K
    while (kc // 2) % kf == 0 and kc % 2 == 0 and \
            (am * kc * eb > _STAGE_BYTES or bn * kc * eb > _STAGE_BYTES):
        kc //= 2
    if K % kc:
        kc = K
    flag = _init_flag(init)
    for i in range(K // kc):
        ops = []
        for r, scope, trans, rows_is_k, n in ((ra, "L0A", ta, ta, am), (rb, "L0B", tb, not tb, bn)):
            if r.buffer.scope != "L1":
                ops.append(r if K == kc else _sub(r, 0 if rows_is_k else 1, i * kc, kc))
                continue
            part = r if K == kc else _sub(r, 0 if rows_is_k else 1, i * kc, kc)
            shape = part.squeezed()
            st = _staging(scope, shape, r.buffer.dtype)
            bd.copy(part.tup(), st.region().tup(), False, None, loc)
            ops.append(st.region())
        if i == 0:
            _gemm(ops[0], ops[1], rc, ta, tb, flag)
        else:
            bd.gemm(ops[0].tup(), ops[1].tup(), rc.tup(), ta, tb, False, loc)


def _hand_synced(core):
    """Is the code being lowered for `core` ("C" / "V") code carrying the author's flags?"""
    if ctx.split == "all":
        return core in ctx.hand_sync
    return ctx.scope_hand


_GEMM_V0_K = 128  # the original's gemm_v0 library: K chunks of 128, two L0 slots


def _gemm_v0_library(ra, rb, rc, ta, tb, init, K):
    """gemm_v0 in hand-synced code, as the original's library does it: its own flags order it
    after earlier MTE2 / FIX work and before later MTE2 / FIX work, and ping-pong two L0A /
    L0B slots over K chunks of 128 with M <-> MTE1 flags (ids 0 and 1). In automatic code
    auto_sync places the flags instead."""
    loc = _core.current_loc()
    chunks = -(-K // _GEMM_V0_K)
    slots = min(2, chunks)
    flag = _init_flag(init)
    set_flag("MTE2", "MTE1", 0)
    wait_flag("MTE2", "MTE1", 0)
    set_flag("FIX", "M", 0)
    wait_flag("FIX", "M", 0)
    set_flag("M", "MTE1", 0)
    set_flag("M", "MTE1", 1)
    for i in range(chunks):
        pp = i & 1
        k0, kn = i * _GEMM_V0_K, min(_GEMM_V0_K, K - i * _GEMM_V0_K)
        wait_flag("M", "MTE1", pp)
        ops = []
        for r, scope, k_dim in ((ra, "L0A", 0 if ta else 1), (rb, "L0B", 1 if tb else 0)):
            part = _sub(r, k_dim, k0, kn)
            shape = part.squeezed()
            full = list(shape)
            full[k_dim] = min(K, _GEMM_V0_K)
            st = _staging(scope, [slots] + full, r.buffer.dtype)
            dst = Region(st, [pp, 0, 0], [1] + shape, [False] * 3)
            builder().copy(part.tup(), dst.tup(), False, None, loc)
            ops.append(dst)
        set_flag("MTE1", "M", pp)
        wait_flag("MTE1", "M", pp)
        pipe_barrier("M")
        _gemm(ops[0], ops[1], rc, ta, tb, flag if i == 0 else False)
        set_flag("M", "MTE1", pp)
    wait_flag("M", "MTE1", 0)
    wait_flag("M", "MTE1", 1)
    set_flag("MTE1", "MTE2", 0)
    wait_flag("MTE1", "MTE2", 0)
    set_flag("M", "FIX", 0)
    wait_flag("M", "FIX", 0)


class GemmWarpPolicy(_enum.IntEnum):
    """T.gemm's `policy`: how a GPU splits the product among warps (no result changes)."""

    Square = 0
    FullRow = 1
    FullCol = 2


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0):
    """The original's T.gemm (its GPU tile op tl.gemm): C = A B when clear_accum, else C += A B,
    lowered as T.gemm_v0 with init = clear_accum. `policy` partitions the product among GPU
    warps and changes no result; k_pack (CDNA) and wg_wait (Hopper's wgmma) have no Cube
    counterpart and are errors when set."""
    for name, value, default, why in (
            ("k_pack", k_pack, 1, "CDNA's packing of K into one warp"),
            ("wg_wait", wg_wait, 0, "Hopper's asynchronous warp-group wait")):
        if resolve(value) != default:
            raise err(f"not supported: T.gemm {name}={resolve(value)!r} ({why}; the Cube unit "
                      "has no such mode)", hint=f"drop {name}, or use T.gemm_v0")
    gemm_v0(A, B, C, transpose_A, transpose_B, clear_accum)


# ---- reductions ----


def _reduce(kind, src, dst, dim, clear):
    if not _gate():
        return
    if kind == "sum" and as_region(src).buffer.dtype == "bool":
        from .tile import refuse_bool

        refuse_bool("reduce_sum", as_region(src).buffer)
    builder().reduce(kind, as_region(src).tup(), as_region(dst).tup(), int(dim), bool(clear),
                     _core.current_loc())


def _reduce_entry(kind):
    def f(*a, **kw):
        from . import reduce_ascend  # looked up per call, so the module's helpers rule

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
    from .._felem import is_float, select

    if is_float(a) or is_float(b):  # float elements: an IR `if` when stored (_felem.py)
        return select(c, a, b)
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


from . import tile  # noqa: E402,F401
from .tile import reduce  # noqa: E402,F401


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
    from .tile import _const_float

    v = _const_float(scale, "T.set_deq_scale scale")
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
    from .tile import _emit

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
    _emit("reinterpret", dst, [src])


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
    from .._interp import Interpreter

    v = xs[0]
    for x in xs[1:]:
        v = Interpreter.logical(None, v, x, True)
    return v


def Or(*xs):
    from .._interp import Interpreter

    v = xs[0]
    for x in xs[1:]:
        v = Interpreter.logical(None, v, x, False)
    return v


def Not(x):
    x = to_index(x) if not isinstance(x, bool) else x
    return (x == 0) if isinstance(x, _ext.Expr) else (not x)

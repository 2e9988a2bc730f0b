"""The kernel language's memory and data movement: allocations (`T.alloc_*`, with the vid
reduction's halving), `T.copy` (with the bounds padding of out-of-range GM tiles), the Cube's
`T.mma` / `T.gemm_v0` and the reductions. Re-exported by tilelang.language; the tile ops,
the float element lowering and T.Parallel build on these."""

import enum as _enum

from .. import _core
from .. import _vid
from .._core import Buffer as _Buffer, Region, Sym, as_region, builder, cur, err, dtype_code
from .._core import dtype_name, resolve, to_index
from .._core import _ext
from ._gates import _CUBE, _gate
from .sync import pipe_barrier, set_flag, wait_flag

# What a buffer declared "bool" may take part in: moves, masks, selects, casts and the
# logical ops (max / min on 0 / 1 are or / and). Arithmetic on bools has no exact meaning on
# uint8 lanes (0 - 1 wraps to 255 where a float reference gives -1): refused (docs/python.md).
_BOOL_OK = {"fill", "store", "compare", "select", "cast", "transpose", "gather", "max", "min",
            "bit_and", "bit_or", "bit_xor", "bit_not", "broadcast", "copy"}


def refuse_bool(what, buf):
    raise err(f"{what} on the bool buffer '{buf.name}': bool values have no arithmetic in "
              "tilepipe (stored as uint8, 0 - 1 would wrap to 255)",
              hint="cast to a numeric dtype first (T.tile.cast), or use compare / select / "
              "bitwise ops on bools")


# ---- memory ----


def _alloc(scope, shape, dtype, name=None, api="alloc_shared"):
    full = None
    if name is None:  # the author's allocation (the front end's temporaries are named)
        shape, full = _vid.alloc_shape(scope, [shape] if isinstance(shape, (int, Sym))
                                       else list(shape), api)
    buf = _alloc_buffer(scope, shape, dtype, name)
    return _vid.HalvedBuffer(buf, full) if full is not None else buf


def _alloc_buffer(scope, shape, dtype, name=None):
    b = builder()
    if isinstance(shape, (int, Sym)):
        shape = (shape,)
    shape = [to_index(s, "buffer dimension") for s in shape]
    for s in shape:
        if not isinstance(s, int) or s <= 0:
            raise err(f"buffer shape {shape} must be positive compile-time integers")
    name = name or cur().pending_name or f"buf{len(cur().names)}"
    base, k = name, 1
    while name in cur().names:
        k += 1
        name = f"{base}_{k}"
    cur().names.add(name)
    dt = dtype_name(dtype)
    loc = _core.current_loc()
    _core.check_buffer_size(name, shape, dt)
    if cur().split == "probe":
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
    name = cur().pending_name
    vec, cube = cur().usage
    if cur().scope == "V" or (name in vec and name not in cube):
        scope = "UB"
    elif not cube and cur().scope != "C":
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


# ---- bounds padding: out-of-range GM tiles (the original clamps them) ----


def _note_gm(r, pad=None):
    if r.buffer.scope != "GM":
        return
    ends = cur().gm_extent.setdefault(r.buffer.name, list(r.buffer.shape))
    for d, (s, e) in enumerate(zip(r.starts, r.extents)):
        whole = r.buffer.shape[d] % e == 0
        if isinstance(s, int):
            if whole:
                continue  # a constant start past the end stays the verifier's error
            hi = s
        else:
            # a whole tile: only a start of the launch indices alone (no loop variable,
            # whose interval may be loose) is taken at its extreme
            b = _ext.bounds(s, {} if whole else cur().var_ranges, cur().block_num)
            if b is None:
                continue
            hi = b[1]
        if hi + e > r.buffer.shape[d] and whole:
            # A whole tile whose start runs past the end for some launch index (a second
            # vector core's rows of a one-row tensor): on hardware an unchecked access
            # past the tensor. Padded like a tail, and reported.
            cur().gm_past.setdefault(r.buffer.name, {}).setdefault(d, _core.current_loc())
        ends[d] = max(ends[d], hi + e)
    if pad is not None:
        cur().gm_pad.setdefault(r.buffer.name, pad)


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
    s, d = _vid.copy_regions(s, d)
    s, d = _origin(s, d)
    d, s = _origin(d, s)
    pad = None
    if pad_value is not None:
        pad = float(resolve(pad_value))
    if s.elements() < d.elements() and s.buffer.scope == "GM" and d.buffer.scope == "UB":
        d = _prefix(s, d, pad)
    scopes = (s.buffer.scope, d.buffer.scope)
    if cur().split == "probe" and "UB" in scopes and any(x in _CUBE for x in scopes):
        cur().mixed_copy = True  # L0C -> UB / UB -> L1: tilepipe's cv_split (_split.py)
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


def temporary(key, scope, shape, dtype, name):
    """The front end's temporary buffer for `key` at the statement being lowered: allocated
    the first time, the same buffer after (one per call site: the buffer is allocated where
    the call is, and a loop body may be the block, so it is not shared with other blocks)."""
    b = cur()
    key = tuple(key) + (b.stmt_loc,)
    if key not in b.hidden:
        b.hidden[key] = _alloc(scope, list(shape), dtype, name=name)
    return b.hidden[key]


def _staging(scope, shape, dtype):
    """gemm_v0's L0A/L0B staging tile of one shape (shared by the calls that use it)."""
    tag = "l0a" if scope == "L0A" else "l0b"
    return temporary((scope, tuple(shape), dtype), scope, shape, dtype,
                     f"gemm_{tag}_" + "x".join(str(d) for d in shape))


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
    if cur().split == "probe":
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
    if _hand_synced("C") or not cur().auto_sync:
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
    if cur().split == "all":
        return core in cur().hand_sync
    return cur().scope_hand


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
        refuse_bool("reduce_sum", as_region(src).buffer)
    builder().reduce(kind, as_region(src).tup(), as_region(dst).tup(), int(dim), bool(clear),
                     _core.current_loc())

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
        if scope in _CUBE:
            cur().cube_work = True
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


def _note_gm(r, pad=None, guarded=False):
    """Records how far GM tiles reach (the host pads the tensor to it). `guarded`: a piece of a
    run-time length, under an `if` that keeps it in range; its start's interval is no sign of
    an access past the end."""
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
            # a whole tile: only a start of the launch indices alone is taken at its
            # extreme. A loop's interval may be loose, and the host pad it would set is
            # silent where the caller's tensor sizes the dimension: past its rows a loop's
            # tile stays the run's located error
            b = _ext.bounds(s, {} if whole else cur().var_ranges, cur().block_num)
            if b is None and s.has_load() and not whole:
                # a start read from memory (a row index a kernel loads) of a tile that does
                # not divide its dimension: in range, the tile may still run past the end,
                # which the original's copy clips (zero-filled reads, dropped writes) as for
                # a tail tile (a dividing tile at a loaded start, a page, is taken as aligned)
                ends[d] = max(ends[d], r.buffer.shape[d] - 1 + e)
                continue
            if b is None:
                continue
            hi = b[1]
        if hi + e > r.buffer.shape[d] and whole and not guarded:
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


def _complement(d, extents):
    """The part of tile d outside its leading box of `extents`: one box per dimension the box
    is shorter in (the rows below it, then the columns beside it in its rows, ...)."""
    boxes = []
    for i, (full, e) in enumerate(zip(d.extents, extents)):
        if e < full:
            starts = list(d.starts)
            starts[i] = starts[i] + e
            ext = list(extents[:i]) + [full - e] + list(d.extents[i + 1:])
            boxes.append(Region(d.buffer, starts, ext, [False] * len(ext)))
    return boxes


def _prefix(s, d, pad):
    """A GM tile smaller than its UB destination (the original copies it into the leading
    part and pads the rest with pad_value): copy into the leading rows / columns that match
    the source's extents and fill the rest with pad_value (or leave it). The fill (V) writes
    only what the copy (MTE2) does not, so the two need no order between them, as the
    original's single padding DMA needs none in hand-synchronised code."""
    se = [e for e in s.extents if e != 1] or [1]
    lead = [i for i, e in enumerate(d.extents) if e != 1]
    if len(se) > len(lead) or any(d.extents[i] < e for i, e in zip(lead, se)):
        return d  # not a prefix: the verifier reports the size mismatch
    extents = list(d.extents)
    for i, e in zip(lead, se):
        extents[i] = e
    if pad is not None and _gate():
        for box in _complement(d, extents):
            builder().tile_op("fill", box.tup(), [], float(pad), "EQ", _core.current_loc())
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


def _granule(r, dim):
    """Elements of one 32-byte UB block along `dim` of region r when dim is its buffer's last
    (contiguous) dimension in UB, else 1: offsets in multiples of it keep a UB operand on
    the block boundary the DMA needs."""
    if r.buffer.scope != "UB" or dim != len(r.extents) - 1:
        return 1
    return max(1, 32 // _core.dtype_bytes(r.buffer.dtype))


def _runtime_pairs(s, d):
    """The dimensions of a copy's two regions that move a run-time length, paired in order of
    their non-point dimensions: [(source dim, destination dim, length, largest length,
    granule)]."""
    sd = [i for i, p in enumerate(s.points) if not p]
    dd = [i for i, p in enumerate(d.points) if not p]
    if len(sd) != len(dd):
        r = s if s.dyn else d
        dim, length = next(iter(r.dyn.items()))
        raise _core.runtime_extent_error(r.buffer, dim, length)
    pairs = []
    for i, j in zip(sd, dd):
        ls, ld = (s.dyn or {}).get(i), (d.dyn or {}).get(j)
        if ls is not None or ld is not None:
            # the expression with the tighter bound: `0:valid_n` over `col : col + valid_n`
            found = []
            for r, dim, length in ((s, i, ls), (d, j, ld)):
                if length is not None:
                    b = _ext.bounds(length, cur().var_ranges, cur().block_num)
                    found.append((b[1] if b else float("inf"), r, dim, length, b))
            _, r, dim, length, b = min(found, key=lambda f: f[0])
            most = min(s.extents[i], d.extents[j])
            # a length no interval bounds (a T.alloc_var register) has the room of the
            # tiles, as the original's copy has: longer would overrun them on the NPU too
            if b is not None and b[1] > most:
                other, odim = (d, j) if r is s else (s, i)
                raise err(f"T.copy of the run-time length {length!r} in dimension {dim} of "
                          f"'{r.buffer.name}' may be up to {b[1]}, more than the "
                          f"{most} elements of '{other.buffer.name}' in dimension {odim}",
                          hint=f"clamp the length (T.min(length, {most})) or write the end as "
                          "start + EXTENT with a build-time EXTENT")
            pairs.append((i, j, length, most, max(_granule(s, i), _granule(d, j))))
    return pairs


def _copy_runtime(s, d, emit):
    """T.copy of slices whose lengths are run-time values (`x[r : r + valid_rows]` into
    `ub[0:valid_rows]`), as pieces of build-time size each under an `if` on the length n
    (docs/python.md, "Run-time lengths"): n = q G + t with G the elements of a 32-byte UB
    block along a UB row (1 elsewhere); q G is one piece of 2^k elements per set bit k >= log2
    G, at offset n with bits 0..k cleared; the tail t < G one piece of t elements at offset q G
    (one `if` per possible t). Offsets stay on UB blocks, as the original's single DMA of n
    starts on one. Several run-time dimensions give the product of their pieces.
    `emit(s_piece, d_piece)` copies one piece."""
    pairs = _runtime_pairs(s, d)
    loc = _core.current_loc()
    bd = builder()

    def pieces(n, most, g):
        """(condition, offset, size) of each piece of a length n <= most. Where its condition
        holds a piece ends by n <= most: its offset is clamped to [0, most - size] as written,
        so the verifier's range check, which does not read the condition, sees that too."""
        def at(n, step, size):  # n with its digits below `step` cleared, clamped
            return _ext.max(_ext.min((n // step) * step, (most - size) // step * step), 0)

        for bit in reversed(range(g.bit_length() - 1, most.bit_length())):
            size = 1 << bit
            yield (n // size) % 2 > 0, at(n, 2 * size, size), size
        for t in range(1, min(g, most + 1)):
            yield n % g == t, at(n, g, t), t

    def place(k, ss, dd):
        if k == len(pairs):
            emit(Region(s.buffer, ss, list(se), list(s.points)),
                 Region(d.buffer, dd, list(de), list(d.points)))
            return
        i, j = pairs[k][:2]
        for cond, off, size in pieces(*pairs[k][2:]):
            if _gate():
                bd.begin_if(cond, loc)
            se[i], de[j] = size, size
            place(k + 1, ss[:i] + [ss[i] + off] + ss[i + 1:], dd[:j] + [dd[j] + off] + dd[j + 1:])
            if _gate():
                bd.end_if(loc)

    se, de = list(s.extents), list(d.extents)
    # a length that may be 0 or less moves nothing (its bits would not say so)
    guards = [n > 0 for _, _, n, _, _ in pairs
              if (_ext.bounds(n, cur().var_ranges, cur().block_num) or (0, 0))[0] < 1]
    for g in guards:
        if _gate():
            bd.begin_if(g, loc)
    place(0, list(s.starts), list(d.starts))
    for g in guards:
        if _gate():
            bd.end_if(loc)


def _copy(src, dst, transpose=False, pad_value=None, atomic_add=False, relu=False,
          guarded=False):
    """T.copy; with atomic_add (T.tile.atomic_add) the DMA unit adds src into the GM dst."""
    b = builder()
    what = "atomic_add" if atomic_add else "copy"
    s = as_region(src, f"{what} source", runtime_extents=True)
    d = as_region(dst, f"{what} destination", runtime_extents=True)
    if s.dyn or d.dyn:
        _copy_runtime(s, d, lambda x, y: _copy(x, y, transpose, pad_value, atomic_add, relu,
                                               guarded=True))
        return
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
    _note_gm(s, pad, guarded)
    _note_gm(d, None, guarded)
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


def temporary(key, scope, shape, dtype, name):
    """The front end's temporary buffer for `key` at the statement being lowered: allocated
    the first time, the same buffer after (one per call site: the buffer is allocated where
    the call is, and a loop body may be the block, so it is not shared with other blocks)."""
    b = cur()
    key = tuple(key) + (b.stmt_loc,)
    if key not in b.hidden:
        b.hidden[key] = _alloc(scope, list(shape), dtype, name=name)
    return b.hidden[key]


def _sub(r, dim, start, ext):
    """Region r restricted to [start, start + ext) along squeezed dimension dim (0 or 1)."""
    lead = len(r.extents) - 2
    starts, extents = list(r.starts), list(r.extents)
    starts[lead + dim] = starts[lead + dim] + start if start else starts[lead + dim]
    extents[lead + dim] = ext
    return Region(r.buffer, starts, extents, [False] * len(extents))


def _n_actual(rb, rc, tb, n_actual):
    """gemm_v0's n_actual: only the first n_actual columns of C (rows of a transposed B) are
    computed; a build-time count narrows both operands, a run-time one is refused."""
    n = resolve(n_actual)
    if not isinstance(n, int):
        raise err(f"not supported: T.gemm_v0 n_actual={n!r}, a run-time column count (the "
                  "Cube tiles here have build-time extents)",
                  hint="pass a build-time n_actual, or narrow C and B with slices")
    if not tb:
        raise err("T.gemm_v0 n_actual is taken on the transpose_B path only (the original's)",
                  hint="pass transpose_B=True with B as [N, K], or drop n_actual")
    if n <= 0 or n > rc.extents[-1] or n % 16:
        raise err(f"T.gemm_v0 n_actual={n}: expected a multiple of 16 in [16, "
                  f"{rc.extents[-1]}] (C's columns)", hint="round n_actual up to 16")
    return _sub(rb, 0, 0, n), _sub(rc, 1, 0, n)


def gemm_v0(A, B, C, transpose_A=False, transpose_B=False, init=False, kL0Size=None,
            n_actual=None):
    """C (+)= op(A) op(B) with A, B in L1 (or L0A / L0B): one gemm_l1 statement, which the
    gemm_l1 pass stages through L0A / L0B in K chunks (src/passes/gemm_l1.h): of kL0Size when
    given (the library's protocol in hand-synced code: 128 by default); only C's first
    n_actual columns when given (the transpose_B path)."""
    ra, rb, rc = as_region(A), as_region(B), as_region(C)
    kl0 = None if kL0Size is None else resolve(kL0Size)
    if kl0 is not None and (not isinstance(kl0, int) or kl0 <= 0 or kl0 % 16 or kl0 > 4095):
        raise err(f"T.gemm_v0 kL0Size={kl0!r}: expected a multiple of 16 up to 4095 (the K "
                  "chunk moved L1 -> L0A / L0B)", hint="use 64, 128 or 256")
    if n_actual is not None:
        rb, rc = _n_actual(rb, rc, bool(transpose_B), n_actual)
    flag = _init_flag(init)
    if not _gate():
        return  # nothing to note in the probe: the library's flags are its own
    builder().gemm_l1(ra.tup(), rb.tup(), rc.tup(), bool(transpose_A), bool(transpose_B), flag,
                      kl0 or 0, _core.current_loc())


def _hand_synced(core):
    """Is the code being lowered for `core` ("C" / "V") code carrying the author's flags?"""
    if cur().split == "all":
        return core in cur().hand_sync
    return cur().scope_hand


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

"""`for i, j in T.Parallel(R, C): D[i, j] = <expression>`: element assignments, lowered to
element code inside a nest of parallel loops, which the vectorize pass turns into tile ops
over all lanes (tilepipe's IR has no scalar stores). Each element reference `A[i, j]` is one
element of A at the indexed offset (`i` or `i + k` per dimension), `v[i]` and `w[j]`
elements of row and column vectors (broadcast by the pass), numbers and lane-free elements
scalar operands, a loop variable itself a tile of its lane's indices (arange);
`+ - * /`, unary minus and T.exp / T.log / T.abs / T.sqrt / T.rsqrt / T.max / T.min / T.relu
map to tile ops, `T.if_then_else` over a condition on the lanes to compare + select,
compound expressions go through UB temporaries, GM operands through UB copies."""

import ast
import copy as _copy
import inspect
import textwrap

from . import _core
from . import _vid
from ._core import Buffer, Region, TilelangError, cur, to_index
from .language import tile as Ttile
from .language import _mem

_UNARY = {"exp": "exp", "log": "ln", "ln": "ln", "abs": "abs", "sqrt": "sqrt", "rsqrt": "rsqrt",
          "relu": "relu", "reciprocal": "reciprocal"}
_ARITH = ("add", "sub", "mul", "div", "max", "min")
_BITWISE = ("bit_and", "bit_or", "bit_xor", "shl", "shr")
_CMP = {ast.Lt: "LT", ast.LtE: "LE", ast.Gt: "GT", ast.GtE: "GE", ast.Eq: "EQ", ast.NotEq: "NE"}
_MIRROR = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}
_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
           ast.BitAnd: "bit_and", ast.BitOr: "bit_or", ast.BitXor: "bit_xor",
           ast.LShift: "shl", ast.RShift: "shr"}


class _Tile:
    """A value of the loop body: a region spanning some of the loop's lanes (the tile it is
    over the whole nest), and per dimension the lane that indexes it (None: not a lane)."""

    def __init__(self, region, lanes, dim_lanes):
        self.region, self.lanes, self.dim_lanes = region, lanes, dim_lanes


def vectorize(it, s, spec):
    t = s.target
    names = [t.id] if isinstance(t, ast.Name) else [e.id for e in t.elts]
    if len(names) != len(spec.dims):
        raise it.error(s, f"T.Parallel over {len(spec.dims)} dims bound to {len(names)} names")
    dims = [to_index(d, "T.Parallel extent") for d in spec.dims]
    if not all(isinstance(d, int) for d in dims):
        raise it.error(s, "T.Parallel extents must be compile-time integers")
    k = _serial_prefix(s.body, names)
    rows = not k and cur().lowering == "original" and _per_row(it, s.body, names, dims)
    if rows:
        k = 1
    if k:
        # An index that reads another element with a loop variable (`a[idx[i], j]`): the
        # original's serial fallback. The outer variables up to the last one used that way
        # become serial loops (bound to run-time values, so `idx[i]` is a scalar load), and
        # the inner ones stay vectorised.
        if k == len(names):
            raise it.error(s, f"T.Parallel variable '{names[-1]}' indexes an element read "
                           "(an indirect index) in the innermost dimension",
                           hint="keep the innermost T.Parallel variable a direct index; "
                                "use T.tile.gather for an indirect innermost index")
        inner = _copy.copy(s)
        inner.target = ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names[k:]],
                                 ctx=ast.Store())
        spec2 = _copy.copy(spec)
        spec2.dims = list(spec.dims)[k:]

        def nest(d):
            if d == k:
                if rows and cur().scope == "V" and cur().scope_hand and _row_scalar(s.body, names):
                    # the code generator's full barrier before the row's GetValue (tile.py
                    # _SCALAR_BARRIER): with the author's flags the front end places it
                    _core.builder().barrier_all("V", it.loc(s))
                vectorize(it, inner, spec2)
                return
            it.loop(s, names[d], "serial", 0, dims[d], 1, 0, 1, lambda: nest(d + 1))

        nest(0)
        return
    if any(isinstance(d, int) and d <= 0 for d in dims):
        return  # no iteration
    V = _Vec(it, names, dims)
    b = _core.builder()
    loc = it.loc(s)

    def nest(k):
        # the lanes: loops the vectorize pass turns into tile ops over all their iterations
        if k == len(dims):
            cur().in_parallel = True
            try:
                _stores(it, s, V)
            finally:
                cur().in_parallel = False
            return
        V.vars.append(b.begin_for(names[k], 0, dims[k], 1, "parallel", 0, 1, loc))
        nest(k + 1)
        b.end_for(loc)

    nest(0)


def _stores(it, s, V):
    for stmt in s.body:
        cur().stmt_loc = it.loc(stmt)
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
        dst = V.ref(target, stmt)
        if dst.lanes != tuple(range(len(V.dims))):
            raise it.error(stmt, "the assigned element must be indexed by every T.Parallel variable",
                           hint="write D[i, j] = ... over all loop variables")
        if isinstance(stmt, ast.AugAssign):
            value = ast.BinOp(left=target, op=stmt.op, right=stmt.value)
            ast.copy_location(value, stmt)
        else:
            value = stmt.value
        if dst.region.buffer.scope in ("L0A", "L0B", "L0C"):
            _warn_cube_store(it, stmt, dst.region.buffer)
            continue
        value = V.inline(value, stmt)
        if dst.region.buffer.scope == "GM":
            # A GM element: computed into a UB tile, then copied out (the original's
            # automatic UB -> GM copy of a T.Parallel writing global memory).
            if isinstance(stmt, ast.Assign) and isinstance(value, ast.Subscript):
                v = V.ref(value, stmt)
                b = v.region.buffer
                if v.lanes == dst.lanes and (b.scope == "L0C" or (
                        b.scope in ("UB", "L1") and b.dtype == dst.region.buffer.dtype)):
                    # an element of an on-chip tile: one copy out (L0C -> GM on the FIX
                    # pipe, which converts f32 -> f16 / bf16), no UB temporary
                    V.copy(v, dst)
                    continue
            t = V.temp(dst.region.buffer.dtype)
            if isinstance(stmt, ast.AugAssign):
                V.copy(dst, t)
            V.emit_into(value, t, stmt)
            V.copy(t, dst)
        else:
            V.emit_into(value, dst, stmt)


class CubeStoreWarning(UserWarning):
    """Element stores into a Cube buffer: the original's SetValue reaches UB only."""


def _warn_cube_store(it, stmt, buf):
    """`C_L0[i, j] = 0` over a T.Parallel: the original emits one scalar-unit SetValue per
    element, which AscendC supports on UB tensors only (the AIC has no UB): no L0 buffer
    changes on the NPU, and none here (grouped_gemm_bwd's fill, which its gemm's init
    overwrites). Warned, since a kernel that reads those elements reads undefined data."""
    _core.warn_at(
        f"element stores into {buf.scope} buffer '{buf.name}': the original emits the scalar "
        f"unit's SetValue, which writes UB only (AscendC supports it on VECIN / VECCALC / "
        f"VECOUT tensors), so {buf.name} is left as it was, on the NPU and here; reading these "
        f"elements before a gemm with init=True reads undefined data (their scalar cycles are "
        f"not counted)", CubeStoreWarning, it.loc(stmt))


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _per_row(it, body, names, dims):
    """Whether the original lowers this two-variable nest one row at a time: a serial loop
    over the outer variable around one vector call per row of the inner one
    (ascend_lower_parallel_to_vector.cc: TryVectorizeBufferStoreSeq falls back to rows when
    CheckExpressionSupports2DVectorization fails). One call covers the whole tile only when
    every element read is indexed by both variables, or when no element read is of a rank-2
    buffer and each one indexed by fewer is a broadcast vector. So an element indexed by one
    variable or none (`m_i[i]`, `o[k, i]`, `g[C - 1]`) beside an element of a rank-2 buffer
    makes rows; in each row an element of the outer variable only is a scalar the scalar
    unit reads (GetValue, after the full barrier the original places before it)."""
    if len(names) != 2 or dims[0] == 1:
        return False
    reads = []
    for stmt in body:
        if isinstance(stmt, ast.AugAssign):
            reads.append(stmt.target)
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AugAssign)) else stmt
        reads += [n for n in ast.walk(value) if isinstance(n, ast.Subscript)]
    ranks, partial = [], False
    for node in reads:
        buf = it.eval(node.value)
        if not isinstance(buf, Buffer):
            continue
        ranks.append(len(buf.shape))
        if not set(names) <= _names(node.slice):
            if buf.scope == "GM":
                # the row's scalar would be a GM element, which tilepipe's vector ops do not
                # take (the original reads it with GetValue): staged and broadcast instead
                return False
            partial = True
    return partial and 2 in ranks


def _row_scalar(body, names):
    """Does a row of this per-row nest read an element the inner variable does not index (a
    scalar operand of the row's call)?"""
    return any(isinstance(n, ast.Subscript) and names[-1] not in _names(n.slice)
               for stmt in body for n in ast.walk(stmt))


def _serial_prefix(body, names):
    """1 + the outermost-last loop variable that an index uses other than directly (`i`,
    `i + k`): e.g. `a[idx[i], j]`; 0 if none."""
    lanes = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Subscript):
                continue
            idx = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            for ix in idx:
                used = _names(ix) & set(names)
                if not used or (isinstance(ix, ast.Name)):
                    continue
                if isinstance(ix, ast.BinOp) and isinstance(ix.op, ast.Add) and any(
                        isinstance(a, ast.Name) and a.id in names and not (_names(b) & set(names))
                        for a, b in ((ix.left, ix.right), (ix.right, ix.left))):
                    continue
                lanes |= {names.index(n) for n in used}
    return max(lanes) + 1 if lanes else 0


class _Vec:
    def __init__(self, it, names, dims):
        self.it, self.names, self.dims = it, names, dims
        self.vars = []  # the lanes' loop variables
        self.one = all(d == 1 for d in dims)  # a nest of one element
        self.ntemp = 0

    def elem(self, v):
        """The element of tile v that one iteration of the nest reads or writes."""
        r = v.region
        starts = [st if lane is None else (self.vars[lane] if isinstance(st, int) and st == 0
                                           else st + self.vars[lane])
                  for st, lane in zip(r.starts, v.dim_lanes)]
        extents = [e if lane is None else 1 for e, lane in zip(r.extents, v.dim_lanes)]
        return Region(r.buffer, starts, extents, list(r.points))

    def op(self, kind, dst, srcs, scalar=None, cmp="EQ"):
        """One element op (an IR tile op's name): tile operands as elements, a scalar (a
        number, a run-time value or a lane-free element) as the op's scalar operand. In a
        nest of one element the T.tile ops' own rules for one-element operands hold: a
        lane-free element is a tile operand of an arithmetic op, and a tile the scalar of a
        bitwise op or shift."""
        if self.one and kind in _ARITH and isinstance(scalar, Region):
            srcs, scalar = srcs + [scalar], None
        elif self.one and kind in _BITWISE and len(srcs) == 2:
            srcs, scalar = srcs[:1], srcs[1].region
        if scalar is not None:
            scalar = Ttile._scalar(scalar, f"T.Parallel {kind}")
        Ttile._emit(kind, self.elem(dst),
                    [self.elem(x) if isinstance(x, _Tile) else x for x in srcs], scalar, cmp)

    def copy(self, a, b):
        """T.copy of tile a into tile b, element by element: the GM extents it reaches are
        noted for the whole tile (vid reduction's row offset applied as to the tiles)."""
        s, d = _vid.copy_regions(a.region, b.region)
        _mem._note_gm(s)
        _mem._note_gm(d)
        _mem._copy(self.elem(a), self.elem(b))

    def lane_of(self, node):
        """(lane, offset expression) of an index `i`, `i + k`, `k + i`; None otherwise."""
        if isinstance(node, ast.Name) and node.id in self.names:
            return self.names.index(node.id), 0
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            for a, b in ((node.left, node.right), (node.right, node.left)):
                if isinstance(a, ast.Name) and a.id in self.names:
                    return self.names.index(a.id), self.it.eval(b)
        return None

    def ref(self, node, stmt):
        buf = self.it.eval(node.value)
        if not isinstance(buf, Buffer):
            raise self.it.error(stmt, f"T.Parallel element of {type(buf).__name__}; expected a buffer")
        idx = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(idx) != len(buf.shape):
            raise self.it.error(stmt, f"'{buf.name}' has rank {len(buf.shape)}; index every dimension")
        starts, extents, lanes, dim_lanes = [], [], [], []
        for d, ix in enumerate(idx):
            lo = self.lane_of(ix)
            if lo is None:
                starts.append(to_index(self.it.eval(ix)))
                extents.append(1)
                dim_lanes.append(None)
            else:
                lane, off = lo
                if lanes and lane <= lanes[-1]:
                    raise self.it.error(stmt, "T.Parallel variables must index dimensions in loop order")
                lanes.append(lane)
                starts.append(to_index(off))
                extents.append(self.dims[lane])
                dim_lanes.append(lane)
        return _Tile(Region(buf, starts, extents, [False] * len(starts)), tuple(lanes), dim_lanes)

    def temp(self, dtype):
        self.ntemp += 1
        t = _mem.temporary(("parallel", tuple(self.dims), dtype, self.ntemp), "UB", self.dims,
                           dtype, f"par_tmp{self.ntemp}")
        lanes = tuple(range(len(self.dims)))
        return _Tile(t.region(), lanes, list(lanes))

    def typed(self, v, dtype, stmt):
        """v in dtype: a tile of every lane cast into a temporary if needed (the vectorize
        pass broadcasts a tile of fewer lanes, in its own dtype)."""
        if v.region.buffer.dtype == dtype:
            return v
        if len(v.lanes) != len(self.dims):
            raise self.it.error(stmt, "a broadcast operand with another dtype: cast it first")
        t = self.temp(dtype)
        self.op("cast", t, [v])
        return t

    def staged(self, v):
        """A GM tile copied into a UB temporary (vector ops read UB only)."""
        if v.region.buffer.scope != "GM" or not v.lanes:
            return v
        self.ntemp += 1
        r = v.region
        buf = _mem.temporary(("parallel-gm", tuple(r.extents), r.buffer.dtype, self.ntemp), "UB",
                             r.extents, r.buffer.dtype, f"par_gm{self.ntemp}")
        t = _Tile(buf.region(), v.lanes, v.dim_lanes)
        self.copy(v, t)
        return t

    def inline(self, node, stmt):
        """Calls of plain Python functions (`op_func(a[i, j], b[i, j])` with op_func a lambda
        or a one-`return` def) are expanded into their expression, arguments substituted."""
        node = _copy.deepcopy(node)
        it = self

        class Expand(ast.NodeTransformer):
            def visit_Call(self, call):
                self.generic_visit(call)
                f = it.callee(call)
                if f is None:
                    return call
                params, body, fn = f
                if len(params) != len(call.args) or call.keywords:
                    raise it.it.error(stmt, f"T.Parallel call passes {len(call.args)} arguments "
                                      f"to a function of {len(params)}")
                sub = dict(zip(params, call.args))

                # the function's own free variables (numbers) are read where it was defined
                cells = dict(zip(fn.__code__.co_freevars,
                                 [c.cell_contents for c in fn.__closure__ or ()]))

                class Subst(ast.NodeTransformer):
                    def visit_Name(self, n):
                        if n.id in sub:
                            return _copy.deepcopy(sub[n.id])
                        v = cells.get(n.id, fn.__globals__.get(n.id))
                        if isinstance(v, (int, float)) and not isinstance(v, bool):
                            return ast.copy_location(ast.Constant(v), n)
                        return n

                return Subst().visit(_copy.deepcopy(body))

        return Expand().visit(node)

    def callee(self, call):
        """(parameter names, body expression) of a plain Python function called in the body,
        or None (T.* intrinsics and anything else are left to emit_into)."""
        if not self.uses_lanes(call):
            return None
        try:
            f = self.it.eval(call.func)
        except TilelangError:
            return None
        if not inspect.isfunction(f) or f.__module__.startswith("tilelang"):
            return None
        try:
            lines, _ = inspect.getsourcelines(f)
        except (OSError, TypeError):
            return None
        src = "".join(lines)
        shift = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
        try:
            tree = ast.parse(textwrap.dedent(src))
        except SyntaxError:
            return None
        code = f.__code__
        params = list(code.co_varnames[:code.co_argcount])
        if f.__name__ == "<lambda>":
            # The lambda among those on its lines: same parameters, body at the column
            # where the function's code starts (several lambdas may share a line).
            cols = [c for _, _, c, _ in code.co_positions() if c is not None]
            cands = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                     and [a.arg for a in n.args.args] == params]
            if len(cands) > 1 and cols:
                at = [n for n in cands if min(cols) in (n.col_offset + shift,
                                                        n.body.col_offset + shift)]
                cands = at or cands
            if cands and all(ast.dump(n) == ast.dump(cands[0]) for n in cands):
                return params, cands[0].body, f
        for n in ast.walk(tree):
            if isinstance(n, ast.FunctionDef) and n.name == f.__name__ and len(n.body) == 1 \
                    and isinstance(n.body[0], ast.Return) and n.body[0].value is not None:
                return [a.arg for a in n.args.args], n.body[0].value, f
        raise self.it.error(call, f"T.Parallel calls '{f.__name__}', which is not one expression",
                            hint="use a lambda or a def whose body is `return <expression>`")

    def is_bool(self, node):
        """A comparison or boolean operator over the loop's lanes: a mask per lane."""
        return isinstance(node, (ast.Compare, ast.BoolOp)) or (
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not))

    def value(self, node, dtype, stmt):
        """A tile, or a Python number / run-time scalar (returned as is)."""
        if self.lane_name(node) or (self.is_bool(node) and self.uses_lanes(node)):
            t = self.temp(dtype)
            self.emit_into(node, t, stmt)
            return t
        if isinstance(node, ast.Subscript):
            v = self.ref(node, stmt)
            if not v.lanes:
                return v.region  # one element: a scalar operand
            return self.staged(v)
        if isinstance(node, (ast.BinOp, ast.Call, ast.UnaryOp)):
            if self.uses_lanes(node):
                t = self.temp(dtype)
                self.emit_into(node, t, stmt)
                return t
        return self.it.eval(node)

    def uses_lanes(self, node):
        return any(isinstance(n, ast.Name) and n.id in self.names for n in ast.walk(node))

    def lane_name(self, node):
        return isinstance(node, ast.Name) and node.id in self.names

    def scalar(self, node):
        """A lane-free operand: a number, or a run-time integer (an integer element read by
        the scalar unit, `batch_sizes[bz]`)."""
        v = self.it.eval(node)
        if isinstance(v, Region) and v.buffer.dtype not in ("float16", "bfloat16", "float32"):
            return v.load()
        return v

    def operand(self, node, dtype, stmt):
        """A tile over some lanes, or a lane-free scalar."""
        return self.value(node, dtype, stmt) if self.uses_lanes(node) else self.scalar(node)

    def mask(self, cond, stmt):
        """A condition over the lanes as a 0/1 u8 tile: `compare` of its two sides, in the
        dtype of the first element over the lanes it reads (f32 when it reads none: indices
        are exact there up to 2^24); `and` / `or` combine masks bitwise, `not` flips bit 0."""
        if isinstance(cond, ast.UnaryOp) and isinstance(cond.op, ast.Not):
            t = self.temp("uint8")
            self.op("bit_xor", t, [self.mask(cond.operand, stmt)], 1)
            return t
        if isinstance(cond, ast.BoolOp):
            op = "bit_and" if isinstance(cond.op, ast.And) else "bit_or"
            parts = [self.mask(v, stmt) if self.uses_lanes(v) else None for v in cond.values]
            if any(p is None for p in parts):
                raise self.it.error(stmt, "a T.Parallel condition combines a lane-free value "
                                    "with a comparison over the lanes",
                                    hint="test the lane-free part with an `if` around the loop")
            m = parts[0]
            for p in parts[1:]:
                t = self.temp("uint8")
                self.op(op, t, [m, p])
                m = t
            return m
        if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1
                and type(cond.ops[0]) in _CMP):
            raise self.it.error(stmt, "a T.Parallel condition must be one comparison (<, <=, "
                                ">, >=, ==, !=) or an `and` / `or` of comparisons")
        refs = [n for n in ast.walk(cond) if isinstance(n, ast.Subscript) and self.uses_lanes(n)]
        dt = "float32"
        for r in refs:
            b = self.it.eval(r.value)
            if isinstance(b, Buffer):
                dt = b.dtype
                break
        mode = _CMP[type(cond.ops[0])]
        a = self.operand(cond.left, dt, stmt)
        b = self.operand(cond.comparators[0], dt, stmt)
        if not isinstance(a, _Tile):
            a, b, mode = b, a, _MIRROR[mode]
        m = self.temp("uint8")
        if isinstance(b, _Tile):
            self.op("compare", m, [self.typed(a, dt, stmt), self.typed(b, dt, stmt)], cmp=mode)
        else:
            self.op("compare", m, [self.typed(a, dt, stmt)], b, cmp=mode)
        return m

    def select(self, args, dst, stmt):
        """`T.if_then_else(cond, a, b)` with cond over the lanes: a mask, then `select`
        (a scalar `a` filled into a temporary first; a scalar `b` is select's own)."""
        dt = dst.region.buffer.dtype
        m = self.mask(args[0], stmt)
        a = self.operand(args[1], dt, stmt)
        b = self.operand(args[2], dt, stmt)
        if not isinstance(a, _Tile):
            t = self.temp(dt)
            self.op("fill", t, [], a)
            a = t
        a = self.typed(a, dt, stmt)
        if isinstance(b, _Tile):
            self.op("select", dst, [m, a, self.typed(b, dt, stmt)])
        else:
            self.op("select", dst, [m, a], b)

    def emit_into(self, node, dst, stmt):
        dt = dst.region.buffer.dtype
        if self.is_bool(node) and self.uses_lanes(node):
            self.op("cast", dst, [self.mask(node, stmt)])  # a comparison as 0 / 1
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            op = _BINARY[type(node.op)]
            a = self.value(node.left, dt, stmt)
            b = self.value(node.right, dt, stmt)
            if not isinstance(a, _Tile) and isinstance(b, _Tile):
                if op in ("add", "mul", "bit_and", "bit_or", "bit_xor"):
                    a, b = b, a
                elif op in ("shl", "shr"):
                    raise self.it.error(stmt, "a shift of a number by a tile is not supported",
                                        hint="shift the tile by a number: x << k, x >> k")
                elif op == "sub":  # s - x = (-1) * x + s
                    self.op("mul", dst, [self.typed(b, dt, stmt)], -1.0)
                    self.op("add", dst, [dst], a)
                    return
                else:  # s / x
                    self.op("reciprocal", dst, [self.typed(b, dt, stmt)])
                    self.op("mul", dst, [dst], a)
                    return
            if not isinstance(a, _Tile):
                raise self.it.error(stmt, "T.Parallel expression without an element of a buffer")
            a = self.typed(a, dt, stmt)
            if isinstance(b, _Tile):
                if op in ("shl", "shr") and not self.one:
                    raise self.it.error(stmt, "a shift by a tile is not supported",
                                        hint="shift the tile by a number: x << k, x >> k")
                self.op(op, dst, [a, self.typed(b, dt, stmt)])
            elif op == "div" and isinstance(b, (int, float)):
                self.op("mul", dst, [a], 1.0 / b)
            else:
                self.op(op, dst, [a], b)
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            a = self.value(node.operand, dt, stmt)
            self.op("bit_not", dst, [self.typed(a, dt, stmt)])
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            a = self.value(node.operand, dt, stmt)
            self.op("mul", dst, [self.typed(a, dt, stmt)], -1.0)
            return
        if self.lane_name(node):
            # the lane's index as a value: the vectorize pass makes it an arange
            self.op("arange", dst, [], self.vars[self.names.index(node.id)])
            return
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            args = node.args
            if name in ("if_then_else", "Select") and len(args) == 3 and self.uses_lanes(args[0]):
                self.select(args, dst, stmt)
                return
            if name in _UNARY and len(args) == 1:
                a = self.value(args[0], dt, stmt)
                self.op(_UNARY[name], dst, [self.typed(a, dt, stmt)])
                return
            if name in ("max", "min") and len(args) == 2:
                a, b = self.value(args[0], dt, stmt), self.value(args[1], dt, stmt)
                if not isinstance(a, _Tile):
                    a, b = b, a
                if isinstance(b, _Tile):
                    self.op(name, dst, [self.typed(a, dt, stmt), self.typed(b, dt, stmt)])
                else:
                    self.op(name, dst, [self.typed(a, dt, stmt)], b)
                return
            if name in ("cast", "float32", "float16", "bfloat16") and args:
                a = self.value(args[0], dt, stmt)
                if a.lanes != dst.lanes:
                    raise self.it.error(stmt, "T.Parallel cast of a broadcast operand")
                if a.region.buffer.dtype != dt:
                    self.op("cast", dst, [a])
                else:
                    self.op("add", dst, [a], 0.0)
                return
        if isinstance(node, ast.Subscript):
            v = self.ref(node, stmt)
            if v.lanes and v.region.buffer.dtype != dt:
                self.op("cast", dst, [v])  # the pass broadcasts a tile of fewer lanes
            elif v.lanes:
                if v.lanes != dst.lanes:
                    self.op("broadcast", dst, [v])
                else:
                    self.copy(v, dst)
            else:
                self.op("fill", dst, [], v.region)
            return
        v = self.it.eval(node)
        if isinstance(v, (int, float, _core.Expr)):
            self.op("fill", dst, [], v)
            return
        raise TilelangError(
            f"T.Parallel expression {ast.dump(node)[:60]}... is not supported",
            loc=self.it.loc(stmt),
            hint="use + - * /, unary -, T.exp/T.log/T.abs/T.sqrt/T.rsqrt/T.relu/T.max/T.min "
            "on buffer elements, row / column vectors and numbers")

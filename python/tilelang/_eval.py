"""Expression evaluation of the prim_func interpreter (a mixin of _interp.Interpreter):
Python operators over build-time values and the IR's integer expressions, comparisons,
boolean logic and calls, as the kernel's own Python would evaluate them."""

import ast
import operator

from . import _felem
from ._core import Expr, Region, Sym, ctx, cur, resolve, to_index
from ._core import _ext
from .language._types import LoopSpec, _range_args
from .language._var import Var

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.Div: operator.truediv, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_CMPOPS = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}


def _dyn(x):
    return isinstance(x, (Expr, Region))


def _as_expr(x):
    return x.load() if isinstance(x, Region) else x


_FLOAT_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_FLOAT_CMPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
               ast.NotEq: "!="}


class ExprEval:
    def eval(self, node):
        m = getattr(self, "e_" + type(node).__name__, None)
        if m is None:
            return self.fallback(node)
        return m(node)

    def fallback(self, node):
        """Python's own evaluation for the rest (comprehensions, lambdas, f-strings)."""
        env = dict(self.globals)
        env.update(self.closure)
        env.update(self.vars)
        code = compile(ast.fix_missing_locations(ast.Expression(node)), self.src.path, "eval")
        return eval(code, env)

    def e_Constant(self, n):
        return n.value

    def e_Name(self, n):
        v = self.lookup(n.id, n)
        return v.load() if isinstance(v, Var) else v  # a T.alloc_var reads its value

    def e_Attribute(self, n):
        return getattr(self.eval(n.value), n.attr)

    def e_Tuple(self, n):
        return tuple(self.eval_list(n.elts))

    def e_List(self, n):
        return self.eval_list(n.elts)

    def eval_list(self, elts):
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self.eval(e.value))
            else:
                out.append(self.eval(e))
        return out

    def e_NamedExpr(self, n):
        """`(x := e)`: binds x in the kernel's names, as an assignment does."""
        v = self.eval(n.value)
        self.assign(n.target, v, n)
        return v

    def e_Dict(self, n):
        d = {}
        for k, v in zip(n.keys, n.values):
            if k is None:  # `**other`
                d.update(self.eval(v))
            else:
                d[self.eval(k)] = self.eval(v)
        return d

    def e_Slice(self, n):
        return slice(None if n.lower is None else self.eval(n.lower),
                     None if n.upper is None else self.eval(n.upper),
                     None if n.step is None else self.eval(n.step))

    def e_Subscript(self, n):
        obj = self.eval(n.value)
        idx = self.eval(n.slice)
        return obj[idx]

    def e_Call(self, n):
        f = self.eval(n.func)
        args = self.eval_list(n.args)
        kw = {}
        for k in n.keywords:
            if k.arg is None:
                kw.update(self.eval(k.value))
            else:
                kw[k.arg] = self.eval(k.value)
        return self.call(f, args, kw, n)

    def call(self, f, args, kw, n):
        """f(*args, **kw) at call node n (the interpreter expands its macros first)."""
        if f is range:
            return range(*[resolve(a) for a in args]) if all(
                isinstance(resolve(a), int) for a in args) else self._range(args)
        return f(*args, **kw)

    def _range(self, args):
        b, e, s = _range_args(args, "range")
        return LoopSpec("serial", b, e, s)

    def binop(self, op, a, b, node):
        f = _BINOPS.get(type(op))
        if f is None:
            raise self.error(node, f"operator {type(op).__name__} is not supported")
        a, b = resolve(a) if isinstance(a, Sym) and ctx.bindings else a, resolve(b) if isinstance(b, Sym) and ctx.bindings else b
        if _felem.is_float(a) or _felem.is_float(b):  # float elements: _felem.py
            return _felem.arith(_FLOAT_OPS.get(type(op), type(op).__name__), a, b)
        if _dyn(a) or _dyn(b):
            a, b = _as_expr(a), _as_expr(b)
            if isinstance(op, ast.Div):
                if isinstance(a, float) or isinstance(b, float):
                    raise self.error(node, "float arithmetic on a run-time integer expression",
                                     hint="run-time values are integers; keep float math on "
                                     "compile-time values")
                raise self.error(node, "'/' on a run-time integer expression",
                                 hint="use '//' (floor division)")
            if isinstance(op, (ast.LShift, ast.RShift)):
                # x << k = x * 2^k and x >> k = x // 2^k (the IR's division floors, as an
                # arithmetic shift does) for every integer x; the IR has no shift
                p = self.pow2(b, node)
                return a * p if isinstance(op, ast.LShift) else a // p
            if isinstance(b, int) and not isinstance(b, bool) and b >= 0:
                # masks by constants: x & (2^n - 1) = x % 2^n (floor modulo: two's complement)
                if isinstance(op, ast.BitAnd) and (b & (b + 1)) == 0:
                    return a % (b + 1)
            if isinstance(op, (ast.Pow, ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift,
                               ast.RShift)):
                raise self.error(node, f"operator {type(op).__name__} on a run-time value is not "
                                 "supported", hint="use + - * // % and comparisons")
            if isinstance(a, float) or isinstance(b, float):
                raise self.error(node, "float operand in a run-time integer expression",
                                 hint="convert the compile-time value with int(...)")
        return f(a, b)

    def pow2(self, k, node):
        """2^k for a shift amount k: a number for a constant k; for a run-time k, a `select`
        over the values its bounds allow (loop ranges, cid / vid), exact for each of them."""
        if isinstance(k, int) and not isinstance(k, bool):
            if k < 0:
                raise self.error(node, f"shift by a negative amount {k}")
            return 1 << k
        r = _ext.bounds(_as_expr(k), cur().var_ranges, cur().block_num)
        if r is None or r[0] < 0 or r[1] > 62:
            raise self.error(node, f"a shift by a run-time amount whose range is {r or 'unknown'}",
                             hint="shift amounts must be provably within 0..62 (a loop variable "
                             "or cid / vid with constant bounds)")
        lo, hi = r
        p = 1 << lo
        for v in range(lo + 1, hi + 1):
            p = _ext.select(_as_expr(k) == v, 1 << v, p)
        return p

    def e_BinOp(self, n):
        if isinstance(n.op, ast.FloorDiv) and isinstance(n.left, ast.BinOp) and \
                isinstance(n.left.op, ast.Mult):
            # (x * c) // d with d dividing c is x * (c // d) exactly (for every integer x);
            # folding it keeps `vid * C // 2` a visible multiple of C // 2, so alignment
            # and bounds proofs downstream see it (they cannot see through the division)
            d = self.eval(n.right)
            lhs = [self.eval(n.left.left), self.eval(n.left.right)]
            for i in (1, 0):
                c = lhs[i]
                if isinstance(c, int) and not isinstance(c, bool) and isinstance(d, int) \
                        and not isinstance(d, bool) and d > 0 and c % d == 0 and \
                        isinstance(lhs[1 - i], Expr):
                    return self.binop(ast.Mult(), lhs[1 - i], c // d, n)
            return self.binop(n.op, self.binop(ast.Mult(), lhs[0], lhs[1], n.left), d, n)
        return self.binop(n.op, self.eval(n.left), self.eval(n.right), n)

    def e_UnaryOp(self, n):
        v = self.eval(n.operand)
        if isinstance(n.op, ast.Not):
            if _dyn(v):
                return _as_expr(v) == 0
            return not v
        if isinstance(n.op, ast.USub):
            if _felem.is_float(v):
                return _felem.arith("neg", v)
            return -(_as_expr(v))
        if isinstance(n.op, ast.UAdd):
            return v
        if _dyn(v):
            raise self.error(n, "'~' on a run-time value is not supported")
        return ~v

    def e_Compare(self, n):
        left = self.eval(n.left)
        result = None
        for op, right_node in zip(n.ops, n.comparators):
            right = self.eval(right_node)
            f = _CMPOPS[type(op)]
            if type(op) in _FLOAT_CMPS and (_felem.is_float(left) or _felem.is_float(right)):
                # float elements: a one-element vector compare read back (_felem.py)
                r = _felem.compare(_FLOAT_CMPS[type(op)], left, right)
            elif _dyn(left) or _dyn(right):
                if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                    raise self.error(n, f"'{type(op).__name__}' on a run-time value")
                r = f(_as_expr(left), _as_expr(right))
            else:
                r = f(resolve(left), resolve(right))
            result = r if result is None else logical(result, r, True)
            if not _dyn(result) and not result:
                return result
            left = right
        return result

    def e_BoolOp(self, n):
        is_and = isinstance(n.op, ast.And)
        v = self.eval(n.values[0])
        for e in n.values[1:]:
            if not _dyn(v):
                # Python short-circuit on compile-time values
                if is_and and not v:
                    return v
                if not is_and and v:
                    return v
                v = self.eval(e)
                continue
            v = logical(v, self.eval(e), is_and)
        return v

    def e_IfExp(self, n):
        c = self.eval(n.test)
        if not _dyn(c):
            return self.eval(n.body if resolve(c) else n.orelse)
        a, b = self.eval(n.body), self.eval(n.orelse)
        return _ext.select(_as_expr(c), to_index(a), to_index(b))

    def e_JoinedStr(self, n):
        return self.fallback(n)


def logical(a, b, is_and):
    """`a and b` / `a or b` (T.And / T.Or): Python's on build-time values, IR logic on
    run-time ones."""
    if not _dyn(a) and not _dyn(b):
        return (a and b) if is_and else (a or b)
    a, b = _as_expr(a), _as_expr(b)
    if not _dyn(a):
        return (b if a else False) if is_and else (True if a else b)
    if not _dyn(b):
        return (a if b else False) if is_and else (True if b else a)
    return a.logical_and(b) if is_and else a.logical_or(b)

"""The prim_func interpreter: walks a @T.prim_func body's Python `ast` and lowers it to
tilepipe IR. Statements become IR (loops, ifs, scopes) or run at build time (assignments
bind names, static ifs pick a branch); expressions are evaluated in Python over the
function's closure, with run-time values (loop variables, cid, vid, loaded elements) as
integer expressions of the IR."""

import ast
import builtins
import contextlib
import copy
import inspect
import os
import textwrap

from . import _core
from . import _felem
from . import _vid
from ._core import Buffer, Expr, Region, Sym, TilelangError, resolve, to_index
from ._builder import Builder
from ._core import _ext
from ._eval import ExprEval, _as_expr, _dyn  # noqa: F401
from ._parallel import vectorize
from ._split import CoreSplit
from .language import _mem, tile
from .language._types import (ElseFrame, IfFrame, KernelCtx, LoopSpec, PersistentSpec,
                              ScalarSpec, ScopeCtx, TensorSpec, ThenFrame, _DType)
from .language._var import Var

_UNBOUND = object()  # a name with no binding before a loop bound it



class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class Source:
    """A function's parsed source with the offsets that map ast lines to file lines."""

    def __init__(self, fn):
        self.fn = fn
        try:
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise TilelangError(
                f"cannot read the source of {fn.__qualname__} ({e})",
                hint="kernels must be defined in a .py file (not exec'd strings or the REPL)",
            )
        self.file = os.path.basename(fn.__code__.co_filename)
        self.path = fn.__code__.co_filename
        text = textwrap.dedent("".join(lines))
        first = next((ln for ln in lines if ln.strip()), "")
        self.indent = len(first) - len(first.lstrip())  # what dedent removed
        self.tree = ast.parse(text)
        self.offset = start - 1
        fdef = self.tree.body[0]
        if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise TilelangError(f"{fn.__qualname__} is not a function definition")
        self.fdef = fdef
        self.derived = {}  # id(ast node) -> the statement it stands for (Interpreter.derive)

    def env(self):
        """The names the body sees: its closure cells over the module globals."""
        fn = self.fn
        scope = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    scope[name] = cell.cell_contents
                except ValueError:
                    pass
        return scope


class Interpreter(CoreSplit, ExprEval):
    def __init__(self, source, local_vars, b):
        self.b = b  # the kernel build (_builder.Builder) the body is lowered into
        self.src = source
        self.globals = source.fn.__globals__
        self.closure = source.env()
        self.vars = dict(local_vars)
        self.static_loops = 0  # loops run at build time around the current statement

    def call(self, f, args, kw, n):
        if isinstance(f, Macro):
            return f.expand(self.b, args, kw, self.loc(n))
        return ExprEval.call(self, f, args, kw, n)

    # ---- locations and errors ----

    def loc(self, node):
        """(file, line, column) of a node, the column 1-based as compilers print it."""
        return (self.src.file, node.lineno + self.src.offset,
                node.col_offset + self.src.indent + 1)

    def error(self, node, message, hint=None):
        return TilelangError(message, loc=self.loc(node), hint=hint)

    # ---- names ----

    def lookup(self, name, node):
        for d in (self.vars, self.closure, self.globals):
            if name in d:
                return d[name]
        b = self.globals.get("__builtins__", builtins)
        b = b if isinstance(b, dict) else vars(b)
        if name in b:
            return b[name]
        raise self.error(node, f"name '{name}' is not defined",
                         hint="kernel bodies see the enclosing function's variables and the "
                         "module's globals")

    # ---- statements ----

    def run_body(self, stmts):
        if stmts is not self.b.blocks_of:
            for s in stmts:
                self.stmt(s)
            return
        self.b.blocks_of = None
        b = _core.builder()
        # The body is one block of blocks, so that a body of one statement stays one block.
        b.begin_block(self.loc(stmts[0]))
        for s in stmts:
            if _is_let(s):  # a binding is no block: it holds for the statements after it
                self.stmt(s)
                continue
            b.begin_block(self.loc(s))
            self.stmt(s)
            b.end_block(self.loc(s))
        b.end_block(self.loc(stmts[-1]))

    def stmt(self, s):
        self.b.stmt_loc = self.loc(s)
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise self.error(
                s, f"'{type(s).__name__}' statements are not supported in a kernel body",
                hint="kernel bodies use for / with / if / assignments / calls (docs/python.md)")
        # Lowered for the original_split pass: each source statement is one block (a
        # binding is none: it holds for the statements after it).
        block = self.b.split == "all" and not _is_let(s)
        if block:
            self.b.ir.begin_block(self.loc(s))
        try:
            method(s)
        except (_Return, _Break, _Continue):
            if block:  # the statement ends here too
                self.b.ir.end_block(self.loc(s))
            raise
        except (TilelangError, AssertionError):
            raise  # located already; an `assert` of the body fails as Python's does
        except Exception as e:
            # Python's own errors in the body's expressions (a wrong argument count, a bad
            # index, a name's attribute, a division by zero): at the statement's line.
            raise self.error(s, f"{type(e).__name__}: {e}") from e
        if block:
            self.b.ir.end_block(self.loc(s))

    def s_Expr(self, s):
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # docstring
        self.eval(s.value)

    def s_Pass(self, s):
        pass

    def s_Assert(self, s):
        v = self.eval(s.test)
        if _dyn(v):
            raise self.error(s, "assert on a run-time value",
                             hint="asserts in kernel bodies check compile-time values only")
        if not v:
            msg = self.eval(s.msg) if s.msg is not None else ""
            raise AssertionError(msg)

    def s_Return(self, s):
        raise _Return(self.eval(s.value) if s.value is not None else None)

    def assign(self, target, value, node):
        if isinstance(target, ast.Name):
            cur = self.vars.get(target.id)
            if isinstance(cur, Var) and not isinstance(value, Var):
                cur.store(value)  # a T.alloc_var: assignment is a store
            else:
                self.vars[target.id] = _felem.snapshot(_core.bind_let(target.id, value),
                                                       target.id) if self.b.ir else value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (Expr, Region, Buffer)):
                raise self.error(node, "cannot unpack a single value into several names")
            try:
                vals = list(value)
            except TypeError:
                raise self.error(node, f"cannot unpack a {type(value).__name__} into several "
                                 "names") from None
            elts = target.elts
            star = [k for k, t in enumerate(elts) if isinstance(t, ast.Starred)]
            if len(star) > 1 or (not star and len(vals) != len(elts)) or \
                    (star and len(vals) < len(elts) - 1):
                raise self.error(node, f"unpacking {len(vals)} values into {len(elts)} names")
            if star:  # `a, *rest = ...`: the starred name takes the middle as a list
                k, tail = star[0], len(elts) - star[0] - 1
                vals = vals[:k] + [vals[k:len(vals) - tail]] + vals[len(vals) - tail:]
                elts = elts[:k] + [elts[k].value] + elts[k + 1:]
            for t, v in zip(elts, vals):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            obj = self.eval(target.value)
            if isinstance(value, _felem.FloatElem):
                dst = obj[self.eval(target.slice)] if isinstance(obj, Buffer) else obj
                if not isinstance(dst, Region):
                    raise self.error(node, "float element arithmetic stored into a "
                                     f"{type(dst).__name__}")
                _felem.store(dst, value)
                return
            if isinstance(obj, Buffer) and obj.scope == "UB":
                # One element of a UB buffer: the original's SetValue, the scalar unit's store
                # (tile.store on the S pipe), of a number, an integer expression or an element
                # of another UB buffer (its GetValue); from GM, a DMA into a temporary first.
                dst = obj[self.eval(target.slice)]
                if isinstance(value, Region) and value.elements() == 1:
                    if value.buffer.scope == "GM" and dst.elements() == 1:
                        # the scalar unit's GetValue (GM) / SetValue (UB) at any UB offset:
                        # the DMA into an aligned one-element temporary, then an element move
                        _felem.materialize(value, dst.buffer.dtype, into=dst)
                        return
                    if value.buffer.scope == "UB" and dst.elements() == 1:
                        tile._store(dst, value)
                        return
                    _mem.copy(value, dst)
                    return
                if isinstance(value, (int, float, Expr)) and dst.elements() == 1:
                    tile._store(dst, value)
                    return
            if isinstance(obj, (Buffer, Region)):
                raise self.error(
                    node,
                    f"element assignment to '{obj.buffer.name if isinstance(obj, Region) else obj.name}'"
                    " is not supported: tilepipe's IR has no scalar stores",
                    hint="assign an element of a UB buffer from another element or a number, or "
                    "write whole tiles with T.tile.* ops or T.copy")
            obj[self.eval(target.slice)] = value
        elif isinstance(target, ast.Attribute):
            # TVMScript has no attribute stores; one on a buffer would change the front
            # end's own record of it
            raise self.error(node, f"assignment to the attribute '.{target.attr}' in a kernel "
                             "body", hint="bind a name instead: `x = ...`")
        else:
            raise self.error(node, f"unsupported assignment target {type(target).__name__}")

    def s_Assign(self, s):
        name = s.targets[0].id if len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) else None
        self.b.pending_name = name
        try:
            v = self.eval(s.value)
        finally:
            self.b.pending_name = None
        for t in s.targets:
            self.assign(t, v, s)

    def s_AnnAssign(self, s):
        if s.value is None:
            raise self.error(s, "a declaration without a value",
                             hint="bind a value (`x = expr`), or declare a variable with "
                             "`x = T.alloc_var(dtype, init=...)`")
        self.b.pending_name = s.target.id if isinstance(s.target, ast.Name) else None
        try:
            v = self.eval(s.value)
        finally:
            self.b.pending_name = None
        self.assign(s.target, v, s)

    def s_AugAssign(self, s):
        if not isinstance(s.target, ast.Name):
            raise self.error(s, "augmented assignment to an element or attribute is not supported",
                             hint="tilepipe's IR has no scalar stores; use T.tile.* ops")
        cur = self.e_Name(s.target)
        self.assign(s.target, self.binop(s.op, cur, self.eval(s.value), s), s)

    def s_FunctionDef(self, s):
        raise self.error(s, "nested function definitions inside a kernel body are not supported",
                         hint="define helpers (or @T.macro) outside the @T.prim_func")

    def _decided(self, test):
        """True / False when a run-time comparison `a OP b` has the same outcome for every
        value its loop variables, cid and vid can take (interval bounds of b - a), else None.
        A guard such as `if si < s_num - 1:` in a loop of s_num = 1 trips is then no code at
        all, as the original's simplifier removes it (its body's slices are never read)."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        op = type(test.ops[0])
        if op not in (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq):
            return None
        try:
            a, b = self.eval(test.left), self.eval(test.comparators[0])
            a, b = resolve(a), resolve(b)
            if not all(isinstance(x, (int, Expr)) and not isinstance(x, bool) for x in (a, b)):
                return None
            d = b - a
            if not isinstance(d, Expr):
                return None
            r = _ext.bounds(d, self.b.var_ranges, self.b.block_num)
        except TilelangError:
            return None
        if r is None:
            return None
        lo, hi = r  # of b - a
        if op in (ast.Eq, ast.NotEq):
            # both sides always equal (`half == 0` with half = cid % 1); a pair never equal
            # keeps its `if`, as the C++ kernels write such guards (`if j + 1 == 0`)
            if lo == hi == 0:
                return op is ast.Eq
            return None
        if op in (ast.Gt, ast.GtE):  # a > b  <=>  b - a < 0
            lo, hi = -hi, -lo
            op = ast.Lt if op is ast.Gt else ast.LtE
        if op is ast.Lt:  # a < b  <=>  b - a > 0
            return True if lo > 0 else False if hi <= 0 else None
        return True if lo >= 0 else False if hi < 0 else None

    def s_If(self, s):
        decided = self._decided(s.test) if self.b.ir is not None else None
        if decided is not None:
            self.run_body(s.body if decided else s.orelse)
            return
        c = self.eval(s.test)
        if isinstance(c, Sym):
            c = resolve(c)
        if not _dyn(c):
            self.run_body(s.body if c else s.orelse)
            return
        b = _core.builder()
        loc = self.loc(s)
        b.begin_if(_as_expr(c), loc)
        self.carry(s.body + s.orelse)
        self.b.control_depth += 1
        try:
            self.run_body(s.body)
            if s.orelse:
                b.begin_else(loc)
                self.run_body(s.orelse)
        finally:
            self.b.control_depth -= 1
        b.end_if(loc)

    # A while loop whose condition is known when the kernel is built runs at build time
    # (its body unrolled); tilepipe's IR has no loop with a run-time exit condition.
    MAX_WHILE = 4096

    def s_While(self, s):
        if s.orelse:
            raise self.error(s, "while/else is not supported")
        n = 0
        while True:
            c = self.eval(s.test)
            if isinstance(c, Sym):
                c = resolve(c)
            if _dyn(c):
                raise self.error(
                    s, "a while loop whose condition is only known at run time: tilepipe's IR "
                    "has no loop with a run-time exit",
                    hint="bound it: `for i in T.serial(n_max)` with `if cond:` around the body")
            if not c:
                return
            n += 1
            if n > self.MAX_WHILE:
                raise self.error(s, f"while loop still running after {self.MAX_WHILE} build-time "
                                 "iterations", hint="check its condition changes, or use T.serial")
            if not self.static_body(s.body):
                return

    def static_body(self, body):
        """One iteration of a loop run at build time; False when it ended in `break`."""
        self.static_loops += 1
        try:
            self.run_body(body)
        except _Break:
            return False
        except _Continue:
            pass
        finally:
            self.static_loops -= 1
        return True

    def s_Break(self, s):
        if not self.static_loops:
            raise self.error(s, "break in a loop that runs on the device: tilepipe's IR loops "
                             "have no early exit", hint="guard the rest of the body with `if`")
        raise _Break()

    def s_Continue(self, s):
        if not self.static_loops:
            raise self.error(s, "continue in a loop that runs on the device",
                             hint="guard the rest of the body with `if`")
        raise _Continue()

    def s_For(self, s):
        it = self.eval(s.iter)
        if s.orelse:
            raise self.error(s, "for/else is not supported")
        if isinstance(it, range):
            it = LoopSpec("serial", it.start, it.stop, it.step)
        elif isinstance(it, LoopSpec):
            pass
        elif isinstance(it, PersistentSpec):
            self.persistent(s, it)
            return
        elif isinstance(it, (list, tuple)) or inspect.isgenerator(it):
            # A Python sequence: unrolled at build time.
            for v in it:
                self.assign(s.target, v, s)
                if not self.static_body(s.body):
                    break
            return
        else:
            raise self.error(s, f"cannot loop over {type(it).__name__}",
                             hint="loop with T.serial / range / T.Pipelined / T.Parallel")
        if it.kind == "parallel":
            self.parallel(s, it)
            return
        if it.kind == "grid":
            self.grid(s, it)
            return
        if not isinstance(s.target, ast.Name):
            raise self.error(s, "a loop variable must be a single name")
        end, body = it.end, lambda: self.run_body(s.body)
        if _vid.halved_loop(self, s.body, s.target.id):
            # vid reduction: the loop runs over this vector core's rows
            end = _vid.half_trips(to_index(it.begin, "loop start"), to_index(it.end, "loop end"),
                                  resolve(it.step), f"loop '{s.target.id}'")

            def body():
                v = self.vars[s.target.id]
                self.b.vid_loops.append((v.var_id(), end - it.begin))
                try:
                    self.run_body(s.body)
                finally:
                    self.b.vid_loops.pop()
        self.loop(s, s.target.id, it.kind, it.begin, end, it.step, it.num_stages,
                  it.cross_interval, body)

    def grid(self, s, it):
        """`for i, j in T.grid(a, b)`: TVMScript's nest of serial loops."""
        t = s.target
        elts = t.elts if isinstance(t, ast.Tuple) else [t]
        if not all(isinstance(e, ast.Name) for e in elts) or len(elts) != len(it.dims):
            raise self.error(s, f"T.grid over {len(it.dims)} extents needs {len(it.dims)} loop "
                             f"names; the loop binds {len(elts)}",
                             hint="for i, j in T.grid(a, b):")

        def nest(k):
            if k == len(elts):
                self.run_body(s.body)
                return
            self.loop(s, elts[k].id, "serial", 0, it.dims[k], 1, 0, 1, lambda: nest(k + 1))

        nest(0)

    def persistent(self, s, it):
        """`for v0, .., vn in T.Persistent(domain, wave_size, index, group_size)` as the original
        builds it (src/ir.cc, PersistentFor): a serial loop over waves w; tile number
        t = w * wave_size + index, decomposed over [dn // g, d0, .., dn-1, g] (g = min(group_size,
        dn), innermost last) into v0..vn-1 and vn = (t's first digit) * g + (its last); with
        two or more waves the body is skipped once t >= d0 * .. * dn (the original breaks out
        of the loop there: t only grows with w, so skipping the rest is the same)."""
        names = ([s.target.id] if isinstance(s.target, ast.Name) else
                 [e.id for e in s.target.elts] if isinstance(s.target, ast.Tuple) and
                 all(isinstance(e, ast.Name) for e in s.target.elts) else None)
        vals = [resolve(to_index(x, "T.Persistent argument"))
                for x in (*it.domain, it.wave_size, it.group_size)]
        if not all(isinstance(x, int) and x > 0 for x in vals):
            raise self.error(s, "T.Persistent needs positive compile-time domain, wave_size and "
                             f"group_size; got {vals}",
                             hint="the number of waves and the tile order are fixed when built")
        dims, wave, group = vals[:-2], vals[-2], vals[-1]
        if names is None or len(names) != len(dims):
            raise self.error(s, f"T.Persistent over {len(dims)} dims binds {len(dims)} names")
        size = 1
        for d in dims:
            size *= d
        waves = -(-size // wave)
        g = min(group, dims[-1])
        grouped = [dims[-1] // g, *dims[:-1], g]
        index = to_index(it.index, "T.Persistent index")
        w_name = "persistent.w"  # not a Python name: the body cannot see or shadow it
        loc = self.loc(s)

        def body():
            t = self.vars[w_name] * wave + index
            digits, rem = [None] * len(grouped), t
            for i in range(len(grouped) - 1, 0, -1):
                digits[i], rem = rem % grouped[i], rem // grouped[i]
            digits[0] = rem
            coords = digits[1:len(dims)] + [digits[0] * g + digits[len(dims)]]
            with contextlib.ExitStack() as scoped:
                for n, v in zip(names, coords):
                    scoped.enter_context(self.loop_var(n))
                    self.vars[n] = v
                if waves < 2:  # the original has no exit test in a one-wave loop
                    self.run_body(s.body)
                    return
                b = _core.builder()
                b.begin_if(_as_expr(t < size), loc)
                self.b.control_depth += 1
                try:
                    self.run_body(s.body)
                finally:
                    self.b.control_depth -= 1
                b.end_if(loc)

        self.loop(s, w_name, "serial", 0, waves, 1, 0, 1, body)

    def loop(self, s, name, kind, begin, end, step, stages, cross, body):
        b = _core.builder()
        loc = self.loc(s)
        begin, end = to_index(begin, "loop start"), to_index(end, "loop end")
        step = resolve(step)
        if not isinstance(step, int) or step <= 0:
            raise self.error(s, f"loop step {step!r} must be a positive compile-time integer")
        stages, cross = resolve(stages), resolve(cross)
        if kind == "pipelined" and (not isinstance(stages, int) or stages < 1):
            raise self.error(s, f"T.Pipelined num_stages={stages!r} must be an integer >= 1")
        blocks = kind == "pipelined" and self.b.split is None and self.b.scope_hand
        if isinstance(begin, int) and isinstance(end, int) and end <= begin:
            return  # no iteration: the original's simplifier drops the loop and its body
        v = b.begin_for(name, begin, end, step, kind, int(stages or 0), int(cross or 1), loc)
        lo = self.bound(begin, 0)
        hi = self.bound(end, 1)
        if lo is not None and hi is not None:
            self.b.var_ranges[v.var_id()] = (lo, max(lo, hi - 1))
        self.carry(getattr(s, "body", []))
        self.b.control_depth += 1
        saved = self.b.blocks_of
        # A T.Pipelined loop in a scope with the author's flags: the hand_pipeline pass
        # schedules it as the original does, each source statement of the body one block.
        self.b.blocks_of = s.body if blocks else None
        try:
            with self.loop_var(name):
                self.vars[name] = v
                body()
        finally:
            self.b.control_depth -= 1
            self.b.blocks_of = saved
        b.end_for(loc)

    @contextlib.contextmanager
    def loop_var(self, name):
        # A device loop's variable is scoped to its body, as in the original's TVMScript
        # parser: after the loop the name means what it meant before (an outer loop's
        # variable of the same name), not the inner loop's variable.
        outer = self.vars.get(name, _UNBOUND)
        try:
            yield
        finally:
            if outer is _UNBOUND:
                self.vars.pop(name, None)
            else:
                self.vars[name] = outer

    def bound(self, e, which):
        if isinstance(e, int):
            return e
        r = _ext.bounds(e, self.b.var_ranges, self.b.block_num)
        return None if r is None else r[which]

    def parallel(self, s, it):
        t = s.target
        names = [e.id if isinstance(e, ast.Name) else None
                 for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        if any(_vid.halved_loop(self, s.body, n) for n in names if n):
            # vid reduction: each dimension whose variable indexes a halved buffer's rows
            dims = [_vid.half_trips(0, to_index(e, "T.Parallel extent"), 1, "T.Parallel")
                    if k < len(names) and names[k] and _vid.halved_loop(self, s.body, names[k])
                    else e for k, e in enumerate(it.dims)]
            it = copy.copy(it)
            it.dims = dims
        if s.body and all(isinstance(b, (ast.Assign, ast.AugAssign)) and
                          isinstance(b.targets[0] if isinstance(b, ast.Assign) else b.target,
                                     ast.Subscript) for b in s.body):
            vectorize(self, s, it)
            return
        names = []
        t = s.target
        if isinstance(t, ast.Name):
            names = [t.id]
        elif isinstance(t, ast.Tuple) and all(isinstance(e, ast.Name) for e in t.elts):
            names = [e.id for e in t.elts]
        else:
            raise self.error(s, "T.Parallel targets must be names")
        if len(names) != len(it.dims):
            raise self.error(s, f"T.Parallel over {len(it.dims)} dims bound to {len(names)} names")

        # A branch in the body: the original's AscendLowerParallelToVector cannot vectorize
        # it (only stores and sequences of stores) and lowers the loops to serial ones,
        # the body then run element by element (test_parallel_if_else_serial_fallback).
        kind = "serial" if any(isinstance(n, ast.If) for st in s.body
                               for n in ast.walk(st)) else "parallel"

        def nest(k):
            if k == len(names):
                self.run_body(s.body)
                return
            self.loop(s, names[k], kind, 0, it.dims[k], 1, 0, 1, lambda: nest(k + 1))

        nest(0)

    def derive(self, s, make):
        """The statement that `s` stands for, built once per source, so the C/V split's probe
        and its lowering of the body see the same node."""
        d = self.src.derived.get(id(s))
        if d is None:
            d = self.src.derived[id(s)] = ast.copy_location(make(), s)
        return d

    def s_With(self, s):
        if len(s.items) > 1:
            # `with A, B:` is `with A: with B:` (Python's own meaning; TVMScript parses it so)
            # (a withitem has no location of its own: the inner `with` is at its expression)
            self.stmt(self.derive(s, lambda: ast.With(items=s.items[:1], body=[
                ast.copy_location(ast.With(items=s.items[1:], body=s.body),
                                  s.items[1].context_expr)])))
            return
        item = s.items[0]
        c = self.eval(item.context_expr)
        loc = self.loc(s)
        if isinstance(c, IfFrame):
            self.stmt(self.derive(s, lambda: self.if_frame(s, item)))
            return
        if isinstance(c, KernelCtx):
            kernel = self.b.kernel
            if self.b.ir is not None:
                raise self.error(s, "nested T.Kernel")
            kernel.start(self.b, c.block_num, loc)
            if c.threads is not None:
                self.vid_launch(item, s, c.threads)
            if _has_scope(s.body):
                self.bind_launch(item, s)
                self.run_body(s.body)
            else:
                self.split_kernel(s, item, c, loc)
            return
        if isinstance(c, ScopeCtx):
            if self.b.scope is not None:
                raise self.error(s, f'T.Scope("{c.kind}") inside T.Scope("{self.b.scope}")',
                                 hint="scopes do not nest: close the first one")
            self.lower_scope(c.kind, s.body, loc)
            return
        if isinstance(c, (ThenFrame, ElseFrame)):
            raise self.error(s, "T.Then / T.Else outside `with T.If(...)`",
                             hint="nest them directly inside `with T.If(cond):`")
        raise self.error(s, f"unsupported context {type(c).__name__} in `with`",
                         hint='kernel bodies use `with T.Kernel(...)` and `with T.Scope("C"/"V")`')

    def carry(self, stmts):
        """At the entry of a run-time loop or if: the T.alloc_var variables its code stores
        become registers now, so its reads read the register (`acc = acc + x` in a loop reads
        the value the last iteration stored, not the one before the loop)."""
        for node in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                v = self.vars.get(t.id) if isinstance(t, ast.Name) else None
                if hasattr(v, "carry"):  # a T.alloc_var (language/_var.py)
                    v.carry()

    def lower_scope(self, kind, body, loc, bind=None):
        """`body` as the code of one core kind, T.Scope(kind); `bind` first binds names."""
        b = _core.builder()
        b.begin_scope(kind, loc)
        self.b.scope = kind
        self.b.scope_hand = _has_flags(body, barriers=not self.b.original_sync)
        try:
            if bind is not None:
                bind()
            self.run_body(body)
        finally:
            self.b.scope = None
            self.b.scope_hand = False
        b.end_scope(loc)

    def if_frame(self, s, item):
        """`with T.If(c):` holding `with T.Then():` and optionally `with T.Else():` (the
        original's IR-builder frames for an IfThenElse) as the `if c: ... else: ...` it builds."""
        call = item.context_expr
        if item.optional_vars is not None or len(call.args) != 1 or call.keywords:
            raise self.error(s, "T.If takes one condition and binds no name",
                             hint="with T.If(cond):  with T.Then(): ...  with T.Else(): ...")
        kinds = []
        for st in s.body:
            c = (self.eval(st.items[0].context_expr)
                 if isinstance(st, ast.With) and len(st.items) == 1 else None)
            kinds.append(type(c) if isinstance(c, (ThenFrame, ElseFrame)) else None)
        if kinds not in ([ThenFrame], [ThenFrame, ElseFrame]):
            raise self.error(s, "the body of `with T.If(...)` must be `with T.Then():` and "
                             "optionally `with T.Else():` after it, nothing else",
                             hint="put the statements inside the T.Then / T.Else blocks")
        return ast.If(test=call.args[0], body=s.body[0].body,
                      orelse=s.body[1].body if len(s.body) > 1 else [])

    def vid_launch(self, item, s, threads):
        """Developer mode (`T.Kernel(n, threads=1|2) as cid`): threads=2 turns on vid
        reduction (tilelang/_vid.py); threads=1 launches one vector core per Cube core."""
        if not isinstance(item.optional_vars, ast.Name):
            raise self.error(s, f"T.Kernel(..., threads={threads}) binds only `as cid` (the "
                             "original returns the block index alone; the vector cores' rows "
                             "are split by the compiler)",
                             hint="write `as cid`, or drop threads= and bind `as (cid, vid)`")
        self.b.vid_threads = threads
        self.b.vid_skip = _vid.skip_names(s.body)
        self.b.kernel.vector_cores = threads

    def bind_launch(self, item, s):
        if item.optional_vars is None:
            return
        t = item.optional_vars
        cid, vid = _ext.cid(), _ext.vid()
        if isinstance(t, ast.Name):
            self.vars[t.id] = cid
        elif isinstance(t, (ast.Tuple, ast.List)) and len(t.elts) == 2:
            self.assign(t, (cid, vid), s)
        else:
            raise self.error(s, "T.Kernel binds `as cid` or `as (cid, vid)`")

    # ---- expressions ----


_FLAG_CALLS = ("set_flag", "wait_flag")
_BARRIER_CALLS = ("pipe_barrier", "barrier_all")


def _is_let(st):
    return isinstance(st, ast.Assign) and all(isinstance(t, ast.Name) for t in st.targets)


def _has_flags(body, barriers=True):
    """Does the code (as written) place intra-core flags (or, with `barriers`, barriers)
    itself? Under the original's AUTO_SYNC its barriers leave the scope to auto_sync, which
    then also orders the front end's own work (the scalar unit's reads of UB values)."""
    calls = _FLAG_CALLS + _BARRIER_CALLS if barriers else _FLAG_CALLS
    return any(isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", ""))
               in calls for st in body for n in ast.walk(st))


def _has_scope(body):
    """Whether a kernel body opens T.Scope anywhere (expert / developer mode)."""
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.With):
            for it in node.items:
                f = it.context_expr.func if isinstance(it.context_expr, ast.Call) else None
                name = getattr(f, "attr", None) or getattr(f, "id", None)
                if name == "Scope":
                    return True
    return False


class Macro:
    """`@T.macro`: a helper whose body is lowered in place where it is called."""

    def __init__(self, fn):
        self.fn = fn
        self._src = None
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def source(self):
        if self._src is None:
            self._src = Source(self.fn)
        return self._src

    def expand(self, b, args, kw, call_loc):
        src = self.source()
        try:
            bound = inspect.signature(self.fn).bind(*args, **kw)
        except TypeError as e:
            raise TilelangError(f"macro {self.fn.__name__}: {e}", loc=call_loc)
        bound.apply_defaults()
        it = Interpreter(src, bound.arguments, b)
        saved = b.stmt_loc
        try:
            it.run_body(src.fdef.body)
        except _Return as r:
            return r.value
        finally:
            b.stmt_loc = saved
        return None

    def __call__(self, *args, **kw):
        """A macro called from a plain Python helper of the kernel."""
        b = _core.cur()
        if b.ir is not None:
            return self.expand(b, args, kw, b.stmt_loc)
        raise TilelangError(f"macro {self.fn.__name__} called outside a kernel body")


def macro(fn=None, **kw):
    if fn is None:
        return lambda f: Macro(f)
    return Macro(fn)


class PrimFunc:
    """`@T.prim_func`: the kernel's source, parsed; lowered by tilelang.jit per shape binding."""

    def __init__(self, fn):
        self.fn = fn
        self.source = Source(fn)
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def params(self):
        """[(name, TensorSpec)] from the annotations, evaluated over the closure."""
        with _core.building(Builder()) as b:
            return self._params(Interpreter(self.source, {}, b), b)

    def _params(self, it, b):
        out = []
        a = self.source.fdef.args
        for arg in a.posonlyargs + a.args:
            if arg.annotation is None:
                raise it.error(arg, f"parameter '{arg.arg}' has no T.Tensor annotation",
                               hint="annotate it: `A: T.Tensor((M, N), dtype)`")
            b.stmt_loc = it.loc(arg)
            # Annotations were evaluated when the `def` ran (their names need not be in
            # the closure); a string annotation (`from __future__ import annotations`) is
            # evaluated here over the closure.
            spec = self.fn.__annotations__.get(arg.arg)
            if spec is None or isinstance(spec, str):
                spec = it.eval(arg.annotation)
            if isinstance(spec, _DType) or spec in (int, float):
                spec = ScalarSpec({int: "int32", float: "float32"}.get(spec, spec))
            if not isinstance(spec, (TensorSpec, ScalarSpec)):
                raise it.error(arg, f"parameter '{arg.arg}' is annotated {spec!r}; expected "
                               "T.Tensor(shape, dtype) or a scalar type (T.int32, T.float32)")
            out.append((arg.arg, spec, it.loc(arg)))
        if a.vararg or a.kwarg or a.kwonlyargs:
            raise it.error(self.source.fdef, "kernel parameters must be plain positional tensors")
        return out

    def usage(self):
        """Names the body passes to vector ops and to cube ops (alloc_shared / alloc_fragment
        take their memory from how the buffer is used, as the original infers scopes)."""
        if getattr(self, "_usage", None) is None:
            vec, cube = set(), set()
            for node in ast.walk(self.source.fdef):
                if isinstance(node, ast.Call):
                    f = node.func
                    chain = []
                    while isinstance(f, ast.Attribute):
                        chain.append(f.attr)
                        f = f.value
                    name = chain[0] if chain else getattr(f, "id", "")
                    if "tile" in chain[1:] or name.startswith("reduce"):
                        kind = vec
                    elif name in ("gemm", "gemm_v0", "mma"):
                        kind = cube
                    else:
                        continue
                    for a in node.args:
                        while isinstance(a, ast.Subscript):
                            a = a.value
                        if isinstance(a, ast.Name):
                            kind.add(a.id)
                elif isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and \
                        getattr(node.iter.func, "attr", "") == "Parallel":
                    for n in ast.walk(node):
                        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
                            vec.add(n.value.id)
                elif isinstance(node, (ast.Assign, ast.AugAssign)):
                    # an element store (`out[j] = x[j]`): the scalar unit writes UB only
                    for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                            vec.add(t.value.id)
            # a buffer copied to or from a vector-used one is a UB buffer too (to a fixed point)
            copies = []
            for node in ast.walk(self.source.fdef):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "copy":
                    names = []
                    for a in node.args[:2]:
                        while isinstance(a, ast.Subscript):
                            a = a.value
                        names.append(a.id if isinstance(a, ast.Name) else None)
                    if len(names) == 2 and None not in names:
                        copies.append(names)
            changed = True
            while changed:
                changed = False
                for a, b in copies:
                    for x, y in ((a, b), (b, a)):
                        if x in vec and y not in vec and y not in cube:
                            vec.add(y)
                            changed = True
            self._usage = (vec, cube)
        return self._usage

    def lower_body(self, args, b):
        b.usage = self.usage()
        it = Interpreter(self.source, args, b)
        body = self.source.fdef.body
        it.run_body(body)

    def __call__(self, *a, **kw):
        raise TilelangError(
            f"prim_func {self.__name__} called directly",
            hint="return it from a @tilelang.jit factory and call the compiled kernel",
        )


def prim_func(fn=None, **kw):
    if fn is None:
        return lambda f: PrimFunc(f)
    return PrimFunc(fn)

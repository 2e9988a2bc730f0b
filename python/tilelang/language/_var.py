"""`T.alloc_var`: mutable scalars, tracked by the front end and, once stored under
run-time control, scalar registers (ir::LetStmt bindings of the same variable)."""

from .. import _core
from .._core import Expr, Region, Sym, cur, dtype_name, err, resolve

class Var:
    """`T.alloc_var`: a mutable scalar, a register of the scalar unit. The front end tracks
    its value as it builds the kernel, so a variable stored only under the control it was
    declared in folds into the code like a constant. The first store under a run-time `if`
    or loop makes it a register for the rest of the kernel: every store is an assignment
    (an ir::LetStmt of the same variable, emitted at each store) and every later read
    reads the register. A read under run-time control before that store may be a later
    iteration's read of the stored value, so it is an error at the store. Integer and
    bool variables only (the scalar unit's registers here hold integers)."""

    def __init__(self, name, dtype, value):
        self.name, self.dtype = name, dtype
        self.depth = cur().control_depth  # run-time loops / ifs around the declaration
        self.value = None
        self.reg = None  # the register's variable, once a store is emitted
        self.live = False  # reads read the register
        self.read_under = None  # where a tracked read happened under run-time control
        self.store(value)

    def load(self):
        if self.live:
            return self.reg
        if cur().control_depth > self.depth and self.read_under is None:
            self.read_under = _core.current_loc() or ("the kernel", 0)
        return self.value

    def carry(self):
        """A run-time loop or if about to be lowered stores this variable: from here reads
        read its register, which holds the current value (every store assigns it). Only
        where a store there would be allowed; the store reports the others."""
        if self.live or self.reg is None:
            return  # already a register, or not an integer one
        if cur().split == "probe":
            cur().registers = True
        elif cur().split is not None or cur().scope is None:
            return
        self.live = True

    def store(self, value):
        if isinstance(value, Var):
            value = value.load()
        if isinstance(value, Region):
            value = value.load()  # one element, read by the scalar unit now
        if isinstance(value, Sym):
            value = resolve(value)
        if isinstance(value, Expr) and value.const_value() is not None:
            value = value.const_value()
        if not isinstance(value, (bool, int, float, Expr)):
            raise err(f"cannot store {type(value).__name__} {value!r} in the T.alloc_var "
                      f"'{self.name}'",
                      hint="store a number, an integer expression or one element of a buffer")
        if self.dtype == "bool":
            value = bool(value) if not isinstance(value, Expr) else value
        elif self.dtype.startswith(("int", "uint")) and isinstance(value, float):
            value = int(value)
        integer = self.dtype == "bool" or self.dtype.startswith(("int", "uint"))
        if cur().control_depth > self.depth and self.value is not None and not self.live:
            why = None
            if not integer:
                why = f"a {self.dtype} variable (registers here hold integers)"
            elif cur().split == "probe":
                cur().registers = True  # a kernel without Cube work is lowered as Vector code
            elif cur().split is not None or cur().scope is None:
                why = ("outside T.Scope in a kernel with Cube work or T.Scope blocks, whose "
                       "kernel-level code the Cube/Vector split shares between cores that do "
                       "not share scalar registers")
            elif self.read_under is not None:
                why = (f"it was read under run-time control before (at {self.read_under[0]}:"
                       f"{self.read_under[1]}), where a later iteration would read this store")
            if why is not None:
                raise err(f"T.alloc_var '{self.name}' assigned under a run-time loop or if: "
                          f"{why}",
                          hint="declare the variable inside that loop / branch, or compute "
                          "the value as an expression (T.if_then_else(cond, a, b), loop "
                          "variables)")
            self.live = True
        self.value = value
        if integer and cur().ir is not None:
            v = int(value) if isinstance(value, bool) else value
            if self.reg is None:
                self.reg = cur().ir.let(self.name, v, _core.current_loc())
            else:
                cur().ir.assign(self.reg, v, _core.current_loc())

    def __repr__(self):
        return f"Var({self.name}, {self.dtype}, {self.value!r})"


def alloc_var(dtype, *args, scope="local.var", init=None):
    """A mutable scalar (the original's `local.var`): `T.alloc_var("int32", init=1)`,
    `T.alloc_var("int32", 1)`, `T.alloc_var("int32", "local.var", init=1)`; 0 when no
    initial value is given."""
    if len(args) == 1 and isinstance(args[0], str):
        scope = args[0]
    elif len(args) == 1:
        if init is not None:
            raise err("T.alloc_var: the initial value is given twice")
        init = args[0]
    elif len(args) == 2:
        if init is not None:
            raise err("T.alloc_var: the initial value is given twice")
        init, scope = args
    elif args:
        raise err(f"T.alloc_var takes (dtype, [init], [scope]); got {len(args) + 1} arguments")
    if scope != "local.var":
        raise err(f"T.alloc_var scope {scope!r}: only 'local.var' is supported")
    return Var(cur().pending_name or "var", dtype_name(dtype), 0 if init is None else init)

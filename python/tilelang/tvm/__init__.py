"""`tilelang.tvm`: the few TVM names scripts reach through tilelang (tilepipe has no TVM).
`tir.decl_buffer(shape, dtype)` declares a buffer description with a shape and dtype, which
the front end's calls accept where they only inspect shapes. A reduction called on such
descriptions outside a kernel returns the call the original builds (`tir.Call` of the op
`tl.ascend_reduce` with its operands): a description, it runs nothing."""

from types import SimpleNamespace

from .._core import TilelangError

# What the original surfaces as tvm.TVMError (its C++ passes' LOG(FATAL) / ICHECK at compile
# time) is tilepipe's located TilelangError: `except tvm.TVMError` catches it. A script's
# top-level `import tvm` (the original's `import tilelang` puts TVM on the path) gets this
# module when no TVM is installed (tilelang/__init__.py).
TVMError = TilelangError


class _DeclBuffer:
    def __init__(self, shape, dtype="float32", name="buffer", *a, **kw):
        self.shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
        self.dtype = str(dtype)
        self.name = name

    def __getitem__(self, idx):
        """A slice of the description: a region with the slices' extents."""
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != len(self.shape):
            raise IndexError(f"{self.name}: {len(idx)} indices for a {len(self.shape)}-D buffer")
        ext = []
        for i, d in zip(idx, self.shape):
            if isinstance(i, slice):
                lo, hi, step = i.indices(d)
                if step != 1:
                    raise IndexError(f"{self.name}: a slice with step {step}")
                ext.append(builtins_max(hi - lo, 0))
            else:
                ext.append(1)
        return _DeclRegion(self, ext)

    def __repr__(self):
        return f"decl_buffer({self.name}, {self.shape}, {self.dtype})"


def builtins_max(a, b):
    return a if a > b else b


class _DeclRegion:
    def __init__(self, buffer, extents):
        self.buffer = buffer
        self.extents = list(extents)
        self.shape = list(extents)
        self.dtype = buffer.dtype

    def __repr__(self):
        return f"region({self.buffer.name}, {self.extents})"


class Op:
    """An operator name; `Op.get(name)` returns one object per name (`same_as` compares)."""

    _ops = {}

    def __init__(self, name):
        self.name = name

    @classmethod
    def get(cls, name):
        return cls._ops.setdefault(name, cls(name))

    def same_as(self, other):
        return self is other

    def __repr__(self):
        return f"Op({self.name})"


class Call:
    def __init__(self, dtype, op, args):
        self.dtype = dtype
        self.op = op if isinstance(op, Op) else Op.get(str(op))
        self.args = list(args)

    def __repr__(self):
        return f"Call({self.op.name}, {self.args})"


def is_decl(x):
    return isinstance(x, (_DeclBuffer, _DeclRegion))


tir = SimpleNamespace(decl_buffer=_DeclBuffer, Call=Call, op=SimpleNamespace(Op=Op), Op=Op)

"""A small numpy-backed stand-in for the torch calls TileLang-Ascend's host scripts make
(randn, manual_seed, testing.assert_close, scaled_dot_product_attention, topk, ...) with
the `npu` device mapped to the host. Active only under `tilepipe run-py`, which puts this
directory first on sys.path; it is not torch and does not try to be (docs/python.md)."""

import builtins as _b
import math as _math

import numpy as _np

__version__ = "0.0.0+tilepipe-shim"


class dtype:
    def __init__(self, name, np_dtype, is_floating_point):
        self.name = name
        self.np = _np.dtype(np_dtype)
        self.is_floating_point = is_floating_point

    @property
    def _tl_name(self):
        return self.name

    def __repr__(self):
        return "torch." + self.name

    __str__ = __repr__


float16 = half = dtype("float16", _np.float16, True)
bfloat16 = dtype("bfloat16", _np.float32, True)  # stored as float32, rounded to bf16
float32 = float = dtype("float32", _np.float32, True)
float64 = double = dtype("float64", _np.float64, True)
int32 = int = dtype("int32", _np.int32, False)
int64 = long = dtype("int64", _np.int64, False)
int8 = dtype("int8", _np.int8, False)
uint8 = dtype("uint8", _np.uint8, False)
int16 = short = dtype("int16", _np.int16, False)
uint16 = dtype("uint16", _np.uint16, False)
uint32 = dtype("uint32", _np.uint32, False)
bool = dtype("bool", _np.bool_, False)  # noqa: A001

_BY_NAME = {d.name: d for d in (float16, bfloat16, float32, float64, int32, int64, int8, uint8,
                                 int16, uint16, uint32,
                                bool)}
_default_dtype = float32
_rng = [_np.random.default_rng(0)]


def _round_bf16(a):
    a = _np.ascontiguousarray(a, dtype=_np.float32)
    u = a.view(_np.uint32).astype(_np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    out = rounded.astype(_np.uint32).view(_np.float32)
    return _np.where(_np.isnan(a), a, out)


def _from_np_dtype(nd):
    nd = _np.dtype(nd)
    for d in (float16, float32, float64, int32, int64, int8, uint8, bool):
        if d.np == nd:
            return d
    return float32


def _conv(arr, dt):
    arr = _np.asarray(arr)
    if dt is bfloat16:
        return _round_bf16(arr.astype(_np.float32))
    return arr.astype(dt.np, copy=False)


class device:
    def __init__(self, name="cpu"):
        self.type = str(name).split(":")[0]

    def __repr__(self):
        return f"device(type='{self.type}')"


class Size(tuple):
    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


def _unwrap(x):
    return x.a if isinstance(x, Tensor) else x


def _dt_of(*xs):
    ds = [x.dtype for x in xs if isinstance(x, Tensor)]
    if not ds:
        return None
    fl = [d for d in ds if d.is_floating_point]
    if fl:
        order = [float16, bfloat16, float32, float64]
        return _b.max(fl, key=order.index)
    return ds[0]


class Tensor:
    __array_priority__ = 1000

    def __init__(self, a, dt=None):
        if dt is None:
            dt = _from_np_dtype(_np.asarray(a).dtype)
        self.dtype = dt
        self.a = _conv(a, dt)
        self.requires_grad = False

    # ---- tilelang interop ----
    def _tl_array(self):
        if self.dtype is bfloat16:
            return self.a  # float32 values already rounded to bf16
        return self.a

    def _tl_wrap(self, v, dtype_name):
        return Tensor(v, _BY_NAME.get(dtype_name, float32))

    def _tl_set(self, v):
        self.a[...] = _conv(v, self.dtype)

    def __array__(self, dtype=None):
        return self.a if dtype is None else self.a.astype(dtype)

    # ---- properties ----
    @property
    def shape(self):
        return Size(self.a.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self.a.shape[dim]

    def dim(self):
        return self.a.ndim

    ndim = property(dim)

    def numel(self):
        return self.a.size

    @property
    def device(self):
        return device("npu")

    @property
    def T(self):
        return Tensor(self.a.T, self.dtype)

    def is_contiguous(self):
        return True

    def __len__(self):
        return len(self.a)

    def __repr__(self):
        return f"tensor({self.a!r}, dtype={self.dtype})"

    def __index__(self):
        return _b.int(self.a)

    def __int__(self):
        return _b.int(self.a)

    def __float__(self):
        return _b.float(self.a)

    def __bool__(self):
        return _b.bool(self.a)

    def item(self):
        return self.a.item()

    def __getattr__(self, name):
        if name.startswith("_") or name == "a":
            raise AttributeError(name)
        return _np_fallback(name, self)

    def tolist(self):
        return self.a.tolist()

    def __iter__(self):
        for i in range(len(self.a)):
            yield self[i]

    # ---- conversions ----
    def to(self, *args, **kw):
        dt = kw.get("dtype")
        for a in args:
            if isinstance(a, dtype):
                dt = a
            elif isinstance(a, Tensor):
                dt = a.dtype
        return Tensor(self.a, dt) if dt is not None and dt is not self.dtype else self

    def npu(self, *a, **kw):
        return self

    def cuda(self, *a, **kw):
        return self

    def cpu(self):
        return self

    def contiguous(self):
        return self

    def numpy(self):
        return self.a

    def detach(self):
        return self

    def clone(self):
        return Tensor(self.a.copy(), self.dtype)

    def requires_grad_(self, flag=True):
        self.requires_grad = flag
        return self

    def half(self):
        return Tensor(self.a, float16)

    def float(self):
        return Tensor(self.a, float32)

    def bfloat16(self):
        return Tensor(self.a, bfloat16)

    def int(self):
        return Tensor(self.a, int32)

    def long(self):
        return Tensor(self.a, int64)

    def type(self, dt):
        return self.to(dt)

    # ---- shape ----
    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return Tensor(self.a.reshape([_b.int(s) for s in shape]), self.dtype)

    view = reshape

    def unsqueeze(self, d):
        return Tensor(_np.expand_dims(self.a, d), self.dtype)

    def squeeze(self, d=None):
        if d is None:
            return Tensor(_np.squeeze(self.a), self.dtype)
        if self.a.shape[d] != 1:
            return self
        return Tensor(_np.squeeze(self.a, d), self.dtype)

    def transpose(self, a, b):
        return Tensor(_np.swapaxes(self.a, a, b), self.dtype)

    def permute(self, *dims):
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = dims[0]
        return Tensor(_np.transpose(self.a, dims), self.dtype)

    def repeat(self, *reps):
        if len(reps) == 1 and isinstance(reps[0], (tuple, list)):
            reps = tuple(reps[0])
        return Tensor(_np.tile(self.a, reps), self.dtype)

    def repeat_interleave(self, n, dim=None):
        return Tensor(_np.repeat(self.a, n, axis=dim), self.dtype)

    def expand(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        # -1 keeps that dimension (aligned from the right, as torch does)
        lead = len(shape) - self.a.ndim
        shape = tuple(self.a.shape[i - lead] if s == -1 else s for i, s in enumerate(shape))
        return Tensor(_np.broadcast_to(self.a, shape).copy(), self.dtype)

    def flatten(self):
        return Tensor(self.a.reshape(-1), self.dtype)

    # ---- in-place fills ----
    def normal_(self, mean=0.0, std=1.0):
        self.a[...] = _conv(_rng[0].standard_normal(self.a.shape) * std + mean, self.dtype)
        return self

    def uniform_(self, a=0.0, b=1.0):
        self.a[...] = _conv(_rng[0].uniform(a, b, self.a.shape), self.dtype)
        return self

    def new_zeros(self, *shape, dtype=None, **kw):
        return Tensor(_np.zeros(_shape(shape)), dtype or self.dtype)

    def new_ones(self, *shape, dtype=None, **kw):
        return Tensor(_np.ones(_shape(shape)), dtype or self.dtype)

    def zero_(self):
        self.a[...] = 0
        return self

    def fill_(self, v):
        self.a[...] = v
        return self

    def copy_(self, o):
        self.a[...] = _conv(_unwrap(o), self.dtype)
        return self

    # ---- indexing ----
    def __getitem__(self, idx):
        r = self.a[_idx(idx)]
        return Tensor(r, self.dtype) if isinstance(r, _np.ndarray) else Tensor(_np.asarray(r), self.dtype)

    def __setitem__(self, idx, v):
        self.a[_idx(idx)] = _conv(_unwrap(v), self.dtype)

    # ---- math ----
    def _bin(f):
        def op(self, o):
            dt = _dt_of(self, o) or self.dtype
            return Tensor(f(self.a.astype(_np.float64) if dt.is_floating_point else self.a,
                            _unwrap(o)), dt)

        def rop(self, o):
            dt = _dt_of(self, o) or self.dtype
            return Tensor(f(_unwrap(o), self.a.astype(_np.float64) if dt.is_floating_point
                            else self.a), dt)

        return op, rop

    __add__, __radd__ = _bin(_np.add)
    __sub__, __rsub__ = _bin(_np.subtract)
    __mul__, __rmul__ = _bin(_np.multiply)
    __truediv__, __rtruediv__ = _bin(_np.true_divide)
    __floordiv__, __rfloordiv__ = _bin(_np.floor_divide)
    __mod__, __rmod__ = _bin(_np.mod)
    __pow__, __rpow__ = _bin(_np.power)

    def _bits(f):  # integer bit operations keep the tensor's dtype
        def op(self, o):
            return Tensor(f(self.a, _np.asarray(_unwrap(o)).astype(self.a.dtype)), self.dtype)

        def rop(self, o):
            return Tensor(f(_np.asarray(_unwrap(o)).astype(self.a.dtype), self.a), self.dtype)

        return op, rop

    __and__, __rand__ = _bits(_np.bitwise_and)
    __or__, __ror__ = _bits(_np.bitwise_or)
    __xor__, __rxor__ = _bits(_np.bitwise_xor)
    __lshift__, __rlshift__ = _bits(_np.left_shift)
    __rshift__, __rrshift__ = _bits(_np.right_shift)

    def __invert__(self):
        return Tensor(_np.invert(self.a), self.dtype)

    def __matmul__(self, o):
        dt = _dt_of(self, o)
        return Tensor(_np.matmul(self.a.astype(_np.float32), _unwrap(o).astype(_np.float32)), dt)

    def __neg__(self):
        return Tensor(-self.a, self.dtype)

    def _cmp(f):
        def op(self, o):
            return Tensor(f(self.a, _unwrap(o)), bool)

        return op

    __lt__ = _cmp(_np.less)
    __le__ = _cmp(_np.less_equal)
    __gt__ = _cmp(_np.greater)
    __ge__ = _cmp(_np.greater_equal)
    __eq__ = _cmp(_np.equal)
    __ne__ = _cmp(_np.not_equal)
    __hash__ = object.__hash__

    def sum(self, dim=None, keepdim=False):
        return Tensor(self.a.sum(axis=dim, keepdims=keepdim), self.dtype)

    def mean(self, dim=None, keepdim=False):
        return Tensor(self.a.mean(axis=dim, keepdims=keepdim), self.dtype)

    def max(self, dim=None, keepdim=False):
        return _extreme(self, dim, keepdim, _np.max, _np.argmax)

    def min(self, dim=None, keepdim=False):
        return _extreme(self, dim, keepdim, _np.min, _np.argmin)

    def __abs__(self):
        return self.abs()

    def clamp_min(self, lo):
        return Tensor(_np.maximum(self.a, _unwrap(lo)), self.dtype)

    def clamp_max(self, hi):
        return Tensor(_np.minimum(self.a, _unwrap(hi)), self.dtype)

    def element_size(self):
        # bfloat16 is held as float32 on the host but is 2 bytes on the device
        return 2 if self.dtype is bfloat16 else _np.dtype(self.a.dtype).itemsize

    def abs(self):
        return Tensor(_np.abs(self.a), self.dtype)

    def exp(self):
        return Tensor(_np.exp(self.a), self.dtype)

    def sigmoid(self):
        return Tensor(1.0 / (1.0 + _np.exp(-self.a.astype(_np.float32))), self.dtype)

    def sqrt(self):
        return Tensor(_np.sqrt(self.a), self.dtype)

    def tanh(self):
        return Tensor(_np.tanh(self.a), self.dtype)

    def softmax(self, dim):
        return nn.functional.softmax(self, dim)

    def all(self):
        return Tensor(_np.all(self.a), bool)

    def any(self):
        return Tensor(_np.any(self.a), bool)


def _wrap_np(r, like=None):
    if isinstance(r, _np.ndarray):
        return Tensor(r, bool if r.dtype == _np.bool_ else (like.dtype if like is not None and
                                                             r.dtype.kind == "f" else None))
    if isinstance(r, tuple):
        return tuple(_wrap_np(x, like) for x in r)
    return r


_NP_ALIASES = {"clamp": "clip", "clip": "clip", "amax": "amax", "amin": "amin",
               "pow": "power", "div": "true_divide", "mul": "multiply", "sub": "subtract",
               "neg": "negative", "argmax": "argmax", "argmin": "argmin", "square": "square"}


def _np_fallback(name, self=None):
    """Any other torch function or method of the same name as a numpy function (isnan,
    isinf, where, clip, ...), applied to the arrays; dim= becomes axis=."""
    f = getattr(_np, _NP_ALIASES.get(name, name), None)
    if name in ("clamp", "clip"):
        def f(a, min=None, max=None):  # noqa: A002
            return _np.clip(a, min, max)
    if not callable(f):
        raise AttributeError(f"torch shim (tilepipe run-py): no '{name}'")

    def call(*args, **kw):
        if "dim" in kw:
            kw["axis"] = kw.pop("dim")
        if "keepdim" in kw:
            kw["keepdims"] = kw.pop("keepdim")
        args = ([self] if self is not None else []) + list(args)
        like = next((a for a in args if isinstance(a, Tensor)), None)
        return _wrap_np(f(*[_unwrap(a) for a in args], **kw), like)

    return call


def _idx(idx):
    if isinstance(idx, tuple):
        return tuple(_unwrap(i) for i in idx)
    return _unwrap(idx)


# ---- factories ----


def _shape(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list, Size)):
        args = args[0]
    return tuple(_b.int(s) for s in args)


def set_printoptions(*a, **kw):
    pass


def manual_seed(seed):
    _rng[0] = _np.random.default_rng(seed)


def set_default_device(dev):
    pass


def set_default_dtype(dt):
    global _default_dtype
    _default_dtype = dt


def get_default_dtype():
    return _default_dtype


def randn(*shape, dtype=None, device=None, **kw):
    return Tensor(_rng[0].standard_normal(_shape(shape)), dtype or _default_dtype)


def rand(*shape, dtype=None, device=None, **kw):
    return Tensor(_rng[0].random(_shape(shape)), dtype or _default_dtype)


def randint(low, high=None, size=None, dtype=None, device=None, **kw):
    if high is None:
        low, high = 0, low
    return Tensor(_rng[0].integers(low, high, size=_shape((size,)) if isinstance(size, _b.int)
                                   else tuple(size)), dtype or int64)


def empty(*shape, dtype=None, device=None, **kw):
    return Tensor(_np.zeros(_shape(shape)), dtype or _default_dtype)


def zeros(*shape, dtype=None, device=None, **kw):
    return Tensor(_np.zeros(_shape(shape)), dtype or _default_dtype)


def ones(*shape, dtype=None, device=None, **kw):
    return Tensor(_np.ones(_shape(shape)), dtype or _default_dtype)


def full(size, fill_value, dtype=None, device=None, **kw):
    return Tensor(_np.full(_shape((size,)), fill_value), dtype or _default_dtype)


def zeros_like(t, dtype=None, **kw):
    return Tensor(_np.zeros(t.a.shape), dtype or t.dtype)


def empty_like(t, dtype=None, **kw):
    return zeros_like(t, dtype)


def ones_like(t, dtype=None, **kw):
    return Tensor(_np.ones(t.a.shape), dtype or t.dtype)


def randn_like(t, dtype=None, **kw):
    return Tensor(_rng[0].standard_normal(t.a.shape), dtype or t.dtype)


def arange(*args, dtype=None, device=None, **kw):
    a = _np.arange(*args)
    return Tensor(a, dtype or (int64 if a.dtype.kind in "iu" else _default_dtype))


def tensor(data, dtype=None, device=None, **kw):
    def conv(x):
        if isinstance(x, range):
            return list(x)
        if isinstance(x, (list, tuple)):
            return [conv(i) for i in x]
        return _unwrap(x)

    a = _np.asarray(conv(data))
    if dtype is None:
        dtype = int64 if a.dtype.kind in "iu" else (bool if a.dtype.kind == "b" else _default_dtype)
    return Tensor(a, dtype)


def softmax(t, dim=-1, dtype=None):
    return nn.functional.softmax(t, dim, dtype)


def randperm(n, dtype=None, device=None, **kw):
    return Tensor(_rng[0].permutation(_b.int(n)), dtype or int64)


class LongTensor(Tensor):
    pass


class IntTensor(Tensor):
    pass


class FloatTensor(Tensor):
    pass


class HalfTensor(Tensor):
    pass


def from_numpy(a):
    return Tensor(a)


def is_tensor(x):
    return isinstance(x, Tensor)


def cat(ts, dim=0):
    dt = _dt_of(*ts)
    return Tensor(_np.concatenate([_unwrap(t) for t in ts], axis=dim), dt)


def stack(ts, dim=0):
    return Tensor(_np.stack([_unwrap(t) for t in ts], axis=dim), _dt_of(*ts))


def matmul(a, b):
    return a @ b


def einsum(eq, *ts):
    return Tensor(_np.einsum(eq, *[_unwrap(t).astype(_np.float32) for t in ts]), _dt_of(*ts))


def bmm(a, b):
    return a @ b


def exp(t):
    return t.exp()


def _unary_math(fn):
    def f(t, *a, **kw):
        return Tensor(fn(t.a.astype(_np.float32)), t.dtype)

    return f


sigmoid = _unary_math(lambda x: 1.0 / (1.0 + _np.exp(-x)))
tanh = _unary_math(_np.tanh)
sqrt = _unary_math(_np.sqrt)
rsqrt = _unary_math(lambda x: 1.0 / _np.sqrt(x))
log = _unary_math(_np.log)
relu = _unary_math(lambda x: _np.maximum(x, 0))
sin = _unary_math(_np.sin)
cos = _unary_math(_np.cos)


def split(t, size, dim=0):
    n = t.a.shape[dim]
    sizes = [size] * (n // size) + ([n % size] if n % size else []) if isinstance(size, _b.int) \
        else list(size)
    out, start = [], 0
    for s in sizes:
        out.append(Tensor(_np.take(t.a, range(start, start + s), axis=dim), t.dtype))
        start += s
    return tuple(out)


def chunk(t, n, dim=0):
    return split(t, -(-t.a.shape[dim] // n), dim)


class _ValuesIndices(tuple):
    """torch.return_types.max / min: (values, indices) with names."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]


def _extreme(t, dim, keepdim, f, argf):
    if dim is None:
        return Tensor(f(t.a), t.dtype)
    idx = argf(t.a, axis=dim)
    if keepdim:
        idx = _np.expand_dims(idx, dim)
    return _ValuesIndices((Tensor(f(t.a, axis=dim, keepdims=keepdim), t.dtype),
                           Tensor(idx, int64)))


def max(t, other=None, dim=None, keepdim=False):  # noqa: A001
    """torch.max(t), torch.max(t, dim), torch.max(t, other) (elementwise)."""
    if isinstance(other, Tensor):
        return maximum(t, other)
    return t.max(other if other is not None else dim, keepdim)


def min(t, other=None, dim=None, keepdim=False):  # noqa: A001
    if isinstance(other, Tensor):
        return minimum(t, other)
    return t.min(other if other is not None else dim, keepdim)


def clamp_min(t, lo):
    return t.clamp_min(lo)


def clamp_max(t, hi):
    return t.clamp_max(hi)


inf = _b.float("inf")
nan = _b.float("nan")


def gather(t, dim, index):
    return Tensor(_np.take_along_axis(t.a, _unwrap(index).astype(_np.int64), axis=dim), t.dtype)


def maximum(a, b):
    return Tensor(_np.maximum(_unwrap(a), _unwrap(b)), _dt_of(a, b))


def minimum(a, b):
    return Tensor(_np.minimum(_unwrap(a), _unwrap(b)), _dt_of(a, b))


def sum(t, dim=None, keepdim=False):  # noqa: A001
    return t.sum(dim, keepdim)


def abs(t):  # noqa: A001
    return t.abs()


def allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False):
    return _np.allclose(_np.asarray(_unwrap(a), dtype=_np.float64),
                        _np.asarray(_unwrap(b), dtype=_np.float64), rtol=rtol, atol=atol,
                        equal_nan=equal_nan)


def topk(t, k, dim=-1, largest=True, sorted=True):
    a = t.a
    order = _np.argsort(-a if largest else a, axis=dim, kind="stable")
    idx = _np.take(order, _np.arange(k), axis=dim)
    vals = _np.take_along_axis(a, idx, axis=dim)
    return Tensor(vals, t.dtype), Tensor(idx, int64)


def where(c, a, b):
    return Tensor(_np.where(_unwrap(c), _unwrap(a), _unwrap(b)), _dt_of(a, b) or float32)


class no_grad:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def __call__(self, f):
        return f


from . import cuda, npu, nn, testing  # noqa: E402,F401


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _np_fallback(name)

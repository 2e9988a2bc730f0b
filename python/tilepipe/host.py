"""The host side of `tilepipe run-py`: Debian's PyTorch (CPU) with the `npu` device mapped to
the CPU, plus only what torch itself lacks (docs/python.md):

- `device="npu"` / `"npu:0"` / `torch.device("npu")` / `.npu()` / `.to("npu")` mean the CPU;
- `torch.npu` (synchronize, set_device, current_device, device_count, Event, config,
  get_device_properties, current_stream, empty_cache); graph capture is refused;
- `torch_npu` (python/tilepipe/_host/torch_npu) with golden versions of the vendor ops whose
  semantics are public, and `torch.ops.npu.*` for the same ops;
- functions of newer torch releases the scripts call (`F.scaled_dot_product_attention`, ...);
- int32 class indices for `F.cross_entropy` / `F.nll_loss`, and int32 index tensors for the
  index operations (gather, scatter, take, index_fill, one_hot, ...), as torch_npu takes them;
- float16 and bfloat16 operations CPU torch lacks, computed in float32 and rounded.

install() patches the imported torch in place; only the runner calls it."""

import functools
import itertools
import math
import os
import sys
import time
import types

HOST_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_host")

# Cube cores of the simulated die (the A3 config's AIC count), for get_device_properties.
CUBE_CORES = 24
VECTOR_CORES = 48


def torch_available():
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def _is_npu(d):
    if isinstance(d, str):
        return d.split(":")[0] == "npu"
    return False


def _map_device(d):
    return "cpu" if _is_npu(d) else d


_FACTORIES = (
    "tensor", "as_tensor", "empty", "zeros", "ones", "full", "rand", "randn", "randint",
    "randperm", "arange", "range", "linspace", "logspace", "eye", "empty_like", "zeros_like",
    "ones_like", "full_like", "rand_like", "randn_like", "randint_like", "empty_strided",
    "tril_indices", "triu_indices", "normal", "scalar_tensor", "asarray",
)
_TENSOR_NEW = ("new_empty", "new_zeros", "new_ones", "new_full", "new_tensor")


def _wrap_device_kw(fn):
    def wrapper(*args, **kw):
        if "device" in kw:
            kw["device"] = _map_device(kw["device"])
        return fn(*args, **kw)

    wrapper.__name__ = getattr(fn, "__name__", "fn")
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    wrapper.__wrapped__ = fn
    return wrapper


def _device_context(real_device):
    """torch >= 2.0: `with torch.device(d):` makes d the default device of the factories in
    the block. Every device a script names under run-py is the host CPU, so the block runs as
    it is. 1.13's device type has no such methods and cannot be subclassed (torch's argument
    parsing takes only the real type), so they are added to the type's own dictionary."""
    import ctypes
    import gc

    if hasattr(real_device, "__enter__"):
        return
    methods = gc.get_referents(real_device.__dict__)[0]  # the dict behind the mappingproxy
    methods["__enter__"] = lambda self: self
    methods["__exit__"] = lambda self, *exc: None
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(real_device))


def _patch_device(torch):
    real_device = torch.device

    class _DeviceMeta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, real_device)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, real_device)

    class device(metaclass=_DeviceMeta):  # noqa: N801  (torch's own name)
        """torch.device with "npu" meaning the CPU (tilepipe run-py)."""

        def __new__(cls, kind, index=None):
            if _is_npu(kind):
                return real_device("cpu")
            return real_device(kind) if index is None else real_device(kind, index)

    torch.device = device
    torch._tilepipe_real_device = real_device
    _device_context(real_device)
    for name in _FACTORIES:
        fn = getattr(torch, name, None)
        if fn is not None and not hasattr(fn, "__wrapped__"):
            setattr(torch, name, _wrap_device_kw(fn))

    T = torch.Tensor
    for name in _TENSOR_NEW:
        fn = getattr(T, name, None)
        if fn is not None:
            setattr(T, name, _wrap_device_kw(fn))
    real_to = T.to

    def to(self, *args, **kw):
        args = tuple(_map_device(a) for a in args)
        if "device" in kw:
            kw["device"] = _map_device(kw["device"])
        return real_to(self, *args, **kw)

    T.to = to

    def npu(self, *a, **kw):
        return self

    T.npu = npu
    T.is_npu = property(lambda self: False)

    if not hasattr(torch.Generator, "_tilepipe"):
        real_gen = torch.Generator

        def Generator(device="cpu"):  # noqa: N802
            return real_gen(device=_map_device(device))

        Generator._tilepipe = True
        torch.Generator = Generator


class _Event:
    """torch.npu.Event on the host: wall-clock time between records (host time, not the
    simulated kernel's)."""

    def __init__(self, enable_timing=False, **kw):
        self.t = None

    def record(self, *a, **kw):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def wait(self, *a, **kw):
        pass

    def query(self):
        return True

    def elapsed_time(self, end):
        if self.t is None or end.t is None:
            return 0.0
        return (end.t - self.t) * 1000.0


class _Stream:
    def synchronize(self):
        pass

    def wait_stream(self, *a):
        pass

    def __getattr__(self, name):
        raise _unsupported(f"torch.npu.current_stream().{name}",
                           "an NPU runtime stream handle (ctypes / AOT launch) has no host model")


class _Props:
    """The simulated die (tilelang.set_chip): its name as the NPU runtime reports it (so
    tilelang.utils.target.determine_platform sees A2 or A3) and its core counts."""

    def __init__(self):
        from tilelang import _jit

        cores, aiv = CUBE_CORES, VECTOR_CORES
        try:
            die = _jit.chip_config()["die"]
            cores = int(die["ai_cores"]["value"])
            aiv = cores * int(die["aiv_per_core"]["value"])
        except (OSError, KeyError, ValueError):
            pass
        self.name = "Ascend910B2" if _jit.CHIP == "a2" else "Ascend910_9382"
        self.cube_core_num = cores
        self.vector_core_num = aiv
        self.total_memory = 64 << 30

    def __repr__(self):
        return f"_NPUDeviceProperties(name='{self.name}', cube_core_num={self.cube_core_num})"


def _indexing(torch):
    """Tensor indexing as torch >= 2.0 does it (Tensor.__getitem__ / __setitem__ replaced).
    Returns the real methods by the replacements: what the function mode (_half_mode) calls
    when torch hands it a replacement, the index widened already."""
    T = torch.Tensor
    # torch >= 2.0 indexes with int32 tensors; 1.13 wants int64 (or bool / uint8 masks)
    narrow = (torch.int32, torch.int16, torch.int8)

    plain = {int, slice, bool, type(None), type(Ellipsis)}  # most indices: kept as they are

    def widen(idx):
        if type(idx) in plain:
            return idx
        if isinstance(idx, torch.Tensor) and idx.dtype in narrow:
            return idx.long()
        if isinstance(idx, tuple):
            if all(type(i) in plain for i in idx):
                return idx
            return tuple(widen(i) for i in idx)
        if isinstance(idx, list) and any(isinstance(i, torch.Tensor) for i in idx):
            return [widen(i) for i in idx]
        return idx

    real_getitem, real_setitem = T.__getitem__, T.__setitem__
    wrapping = {torch.int8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64,
                torch.uint8: 8}

    def wrap(v, dt):
        """v as the integer dtype dt holds its low bits (two's complement when signed)."""
        bits = wrapping[dt]
        v &= (1 << bits) - 1
        return v - (1 << bits) if dt != torch.uint8 and v >> (bits - 1) else v

    def getitem(self, idx):
        return real_getitem(self, widen(idx))

    def setitem(self, idx, value):
        idx = widen(idx)
        try:
            return real_setitem(self, idx, value)
        except RuntimeError as e:
            if "without overflow" in str(e) and type(value) is int \
                    and self.dtype in wrapping:
                # torch_npu stores a Python int into an integer tensor as the dtype's
                # bits (its fill casts on the device, no range check); CPU torch refuses
                return real_setitem(self, idx, wrap(value, self.dtype))
            # torch >= 2.0 skips a copy whose source is the destination's own memory (same
            # address, sizes, strides, dtype: `x[:, a:b] = x_slice` where x_slice is that
            # very view); 1.13 refuses it as an overlap
            if "single memory location" not in str(e) or not isinstance(value, torch.Tensor):
                raise
            def layout(t):  # a size-1 dimension's stride addresses nothing
                return (t.data_ptr(), t.shape, t.dtype,
                        [st for st, n in zip(t.stride(), t.shape) if n > 1])

            if layout(real_getitem(self, idx)) != layout(value):
                raise

    T.__getitem__, T.__setitem__ = getitem, setitem
    return {getitem: real_getitem, setitem: real_setitem}


def _unsupported(what, why):
    from tilelang._core import unsupported

    return unsupported(what, why)


def _npu_module(torch):
    m = types.ModuleType("torch.npu", "torch.npu: the NPU runtime, mapped to the host CPU.")
    m.synchronize = lambda *a, **kw: None
    m.is_available = lambda: True
    m.set_device = lambda *a, **kw: None
    m.current_device = lambda: 0
    m.device_count = lambda: 1
    m.empty_cache = lambda: None
    m.Event = _Event
    m.Stream = _Stream
    m.current_stream = lambda *a, **kw: _Stream()
    m.default_stream = lambda *a, **kw: _Stream()
    m.get_device_properties = lambda *a, **kw: _Props()
    m.get_device_name = lambda *a, **kw: _Props().name
    m.manual_seed = torch.manual_seed
    m.manual_seed_all = torch.manual_seed
    m.config = types.SimpleNamespace(allow_internal_format=False)
    m.utils = types.SimpleNamespace(get_device_properties=m.get_device_properties)

    m.NPUGraph = _Graph
    m.graph = _capturing
    return m


class _Graph:
    """torch.npu.NPUGraph: the kernel launches made while capturing, run again by replay()
    on the same tensors (as the NPU replays its captured tasks on the same memory). Torch
    operations inside the capture are refused unless they only view or name tensors: the
    NPU would replay them, and here they ran once (_half_mode)."""

    def __init__(self, *a, **kw):
        self.launches = []

    def capture_begin(self, *a, **kw):
        from tilelang import _jit

        if _jit.CAPTURE[0] is not None:
            raise _unsupported("nested torch.npu.graph captures", "capture one graph at a time")
        self.launches = []
        _jit.CAPTURE[0] = self.launches

    def capture_end(self):
        from tilelang import _jit

        _jit.CAPTURE[0] = None

    def replay(self):
        for kernel, args in self.launches:
            kernel(*args)

    def reset(self):
        self.launches = []


class _capturing:  # noqa: N801  (torch.npu.graph)
    def __init__(self, graph, *a, **kw):
        self.graph = graph

    def __enter__(self):
        self.graph.capture_begin()
        return self.graph

    def __exit__(self, *exc):
        self.graph.capture_end()


def _ops_npu(torch):
    class _NpuOps:
        def __getattr__(self, name):
            import torch_npu  # python/tilepipe/_host, on sys.path once install() ran

            return getattr(torch_npu, name)  # the vendor op, or its clear error

    return _NpuOps()


def _newer_functions(torch):
    """Functions of torch releases after 1.13 that the corpus's host code calls."""
    F = torch.nn.functional
    if not hasattr(F, "scaled_dot_product_attention"):
        def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                         is_causal=False, scale=None, enable_gqa=False):
            L, S = query.size(-2), key.size(-2)
            s = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
            if enable_gqa and key.size(-3) != query.size(-3):
                rep = query.size(-3) // key.size(-3)
                key = key.repeat_interleave(rep, dim=-3)
                value = value.repeat_interleave(rep, dim=-3)
            def one(q, k, v, m):
                attn = q @ k.transpose(-2, -1) * s
                if is_causal:
                    causal = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)
                    attn = attn.masked_fill(~causal, float("-inf"))
                if m is not None:
                    attn = attn.masked_fill(~m, float("-inf")) if m.dtype == torch.bool \
                        else attn + m
                attn = torch.softmax(attn, dim=-1)
                if dropout_p > 0.0:
                    attn = torch.dropout(attn, dropout_p, train=True)
                return attn @ v

            # One (batch, head) at a time: the score matrix of a whole batch of long
            # sequences (B*H*L*S floats) would be gigabytes; one head's is L*S.
            lead = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
            q = query.expand(*lead, *query.shape[-2:])
            k = key.expand(*lead, *key.shape[-2:])
            v = value.expand(*lead, *value.shape[-2:])
            m = None if attn_mask is None else attn_mask.expand(*lead, L, S)
            out = None
            for idx in itertools.product(*(range(n) for n in lead)):
                o = one(q[idx], k[idx], v[idx], None if m is None else m[idx])
                if out is None:
                    out = o.new_empty(*lead, *o.shape)
                out[idx] = o
            return out

        F.scaled_dot_product_attention = scaled_dot_product_attention
    # torch < 2.3 has no uint16 / uint32 tensors: the names stand for the signed type of the
    # same size, whose tensors a kernel reads and writes as the unsigned values' bits
    # (tilelang/_jit.py _TWIN): element sizes, bit operations and wrap-around stay those of
    # the unsigned type; only comparisons and printing see the signed reading.
    twins = set()
    for name, twin in (("uint16", torch.int16), ("uint32", torch.int32),
                       ("uint64", torch.int64)):
        if not hasattr(torch, name):
            setattr(torch, name, twin)
            twins.add(name)
    torch._tilepipe_unsigned = frozenset(twins)
    if not hasattr(F, "rms_norm"):
        def rms_norm(input, normalized_shape, weight=None, eps=None):
            """x / sqrt(mean(x^2 over the normalized dims) + eps) * weight, accumulated in
            float32 for float16 / bfloat16 (torch 2.4's F.rms_norm)."""
            if isinstance(normalized_shape, int):
                normalized_shape = (normalized_shape,)
            dims = tuple(range(-len(normalized_shape), 0))
            x = input.float() if input.dtype in (torch.float16, torch.bfloat16) else input
            e = torch.finfo(input.dtype).eps if eps is None else eps
            y = x * torch.rsqrt(x.pow(2).mean(dim=dims, keepdim=True) + e)
            if weight is not None:
                y = y * weight.to(y.dtype)
            return y.to(input.dtype)

        F.rms_norm = rms_norm
        torch.rms_norm = rms_norm
    if not hasattr(torch, "set_default_device"):
        def set_default_device(device):
            if device is not None and not _is_npu(device) and str(device) != "cpu":
                raise _unsupported(f"torch.set_default_device({device!r})", "the host is the CPU")

        torch.set_default_device = set_default_device


def _int32_class_indices(torch):
    """torch_npu's cross_entropy / nll_loss take int32 class indices (the corpus's
    cross_entropy_loss example passes them); CPU torch takes only int64: widen them."""
    F = torch.nn.functional

    def widened(fn):
        def call(input, target, *a, **kw):
            if isinstance(target, torch.Tensor) and target.dtype in (
                    torch.int32, torch.int16, torch.int8, torch.uint8):
                target = target.long()
            return fn(input, target, *a, **kw)

        call.__wrapped__ = fn
        return call

    for name in ("cross_entropy", "nll_loss"):
        setattr(F, name, widened(getattr(F, name)))


def _half_mode(torch, indexing):
    """A torch function mode that runs float16 / bfloat16 operations the CPU build lacks
    (matmul, softmax, exp, ... are "not implemented for 'Half'", mish and mse_loss for
    'BFloat16', in torch 1.13's CPU kernels) in float32 and rounds the results back to the
    operands' dtype, as an NPU computes them (float32 accumulation). In-place operations write
    back into their tensor. Index arguments torch_npu takes as int32 (gather, scatter, take,
    index_fill, one_hot, ...) are widened to the int64 CPU torch requires. Normalisations and softmax of
    float16 / bfloat16 tensors are computed in float32 and rounded once, as the NPU's
    vector unit accumulates; their matrix products as the Cube computes them (_host/cube.py).

    Installed as torch's C-level function mode, not through torch.overrides.TorchFunctionMode:
    that class pushes and pops its mode stack in Python on every call (18 us per tensor
    operation, a 4x slowdown of scripts that build their tensors element by element); here
    the handler swaps the C-level mode out and back (7 us; plain torch 4 us). A script's own
    TorchFunctionMode would replace it (torch 1.13 has one C-level mode). `indexing`: the
    real indexing methods by their replacements (_indexing)."""
    set_mode = torch._C._set_torch_function_mode

    half, f32 = torch.float16, torch.float32

    def tree(x, f):
        if isinstance(x, torch.Tensor):
            return f(x)
        if isinstance(x, (list, tuple)):
            items = [tree(y, f) for y in x]
            if hasattr(x, "_fields"):  # namedtuple
                return type(x)(*items)
            try:
                return type(x)(items)  # list, tuple, torch.return_types (structseq)
            except TypeError:
                return tuple(items)
        if isinstance(x, dict):
            return {k: tree(v, f) for k, v in x.items()}
        return x

    def dtypes(x, out):
        tree(x, lambda t: out.add(t.dtype) or t)
        return out

    F = torch.nn.functional
    low = (half, torch.bfloat16)
    LOW_NAMES = {half: "Half", torch.bfloat16: "BFloat16"}  # as CPU torch's errors name them

    # Index arguments torch_npu takes as int32 (and CPU torch 1.13 only as int64), by the
    # function's name: (position, keyword). Only these are widened: an int32 tensor in
    # another place (the tensor indexed, a scatter's source) keeps its dtype.
    index_args = {n: (2, "index") for n in (
        "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce",
        "scatter_reduce_", "index_fill", "index_fill_", "index_copy", "index_copy_")}
    index_args.update({"take": (1, "index"), "take_along_dim": (1, "indices"),
                       "index_put": (1, "indices"), "index_put_": (1, "indices"),
                       "one_hot": (0, "tensor")})
    narrow_ints = (torch.int32, torch.int16, torch.int8)

    def widen_index(name, args, kwargs):
        pos, key = index_args[name]
        def wide(x):
            return tree(x, lambda t: t.long() if t.dtype in narrow_ints else t)
        if key in kwargs:
            kwargs = dict(kwargs, **{key: wide(kwargs[key])})
        elif len(args) > pos:
            args = (*args[:pos], wide(args[pos]), *args[pos + 1:])
        return args, kwargs
    # Reductions an NPU's vector unit accumulates in float32 even on float16 / bfloat16
    # tensors; torch's CPU kernels accumulate bfloat16 in bfloat16 (group_norm of a bf16
    # tensor is off by several ulps), so the golden value is computed in float32 and
    # rounded once.
    accumulate_f32 = {F.group_norm, F.layer_norm, F.softmax, F.log_softmax, F.normalize,
                      torch.group_norm, torch.layer_norm, torch.softmax, torch.log_softmax,
                      F.instance_norm, F.batch_norm, torch.Tensor.softmax,
                      torch.Tensor.log_softmax}

    # Transcendental functions of float32 tensors: torch's vectorised CPU kernels are within
    # 1 ulp, the simulator's are correctly rounded (computed in float64, rounded once); the
    # host golden is computed the same way, so a script comparing float16 results at 1e-5
    # sees the kernel's rounding, not the host library's (gdn_wy_fast: torch.exp).
    precise = {torch.exp, torch.Tensor.exp, torch.log, torch.Tensor.log, torch.sigmoid,
               torch.Tensor.sigmoid, torch.tanh, torch.Tensor.tanh, torch.sin, torch.Tensor.sin,
               torch.cos, torch.Tensor.cos, torch.rsqrt, torch.Tensor.rsqrt, torch.erf,
               torch.Tensor.erf, torch.exp2, torch.log2, torch.Tensor.log2, F.sigmoid,
               F.silu, F.softplus, F.gelu, F.logsigmoid}

    def in_f64(func, args, kwargs):
        up_args, up_kwargs = tree((args, kwargs), lambda t: t.double() if t.dtype == f32 else t)
        out = func(*up_args, **up_kwargs)
        return tree(out, lambda t: t.float() if t.dtype == torch.float64 else t)

    def in_f32(func, args, kwargs, dt):
        up_args, up_kwargs = tree((args, kwargs), lambda t: t.float() if t.dtype in low else t)
        out = func(*up_args, **up_kwargs)
        return tree(out, lambda t: t.to(dt) if t.dtype == f32 else t)

    from ._host import cube

    products = set(cube.FUNCS)
    from tilelang._jit import CAPTURE as capture

    # what a captured graph may do with tensors besides launching kernels: name and view them
    VIEWS = {"view", "reshape", "view_as", "reshape_as", "__getitem__", "getitem", "size",
             "dim", "numel", "stride", "is_contiguous", "contiguous", "__get__", "data_ptr",
             "element_size", "unsqueeze", "squeeze", "flatten", "permute", "transpose",
             "expand", "narrow", "detach", "__len__", "__repr__", "__format__"}

    class HalfOnCpu:
        def __enter__(self):
            # Functions written in Python (F.silu, ...) reach a mode through torch.overrides'
            # stack helper, which expects TorchFunctionMode's stack: it calls this one.
            mode = self

            class Stack:
                def __torch_function__(self, func, types, args=(), kwargs=None):
                    return mode.__torch_function__(func, types, args, kwargs)

            torch.overrides._TorchFunctionStackMode = Stack
            set_mode(self)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            set_mode(None)  # torch calls made here run unhandled
            try:
                return handle(func, args, kwargs or {})
            finally:
                set_mode(self)

    def handle(func, args, kwargs):
        if capture[0] is not None:
            name = getattr(func, "__name__", "")
            if name not in VIEWS:
                if name == "to":
                    out = func(*args, **kwargs)
                    if args and out is args[0]:
                        return out  # to the device and dtype it has: the tensor itself
                raise _unsupported(f"torch.{name} inside a torch.npu.graph capture",
                                   "tilepipe replays the captured kernel launches; a torch "
                                   "operation there ran once at capture and would not be "
                                   "replayed: move it out of the capture")
        if func in indexing:
            return indexing[func](*args, **kwargs)
        if func in products:
            out = cube.product(func, args, kwargs)
            if out is not NotImplemented:
                return out
        if func in precise and "out" not in kwargs:
            seen = dtypes((args, kwargs), set())
            if seen == {f32}:
                return in_f64(func, args, kwargs)
        if func in accumulate_f32:
            seen = dtypes((args, kwargs), set())
            if len(seen & set(low)) == 1 and not seen & {f32, torch.float64} \
                    and "dtype" not in kwargs:
                return in_f32(func, args, kwargs, (seen & set(low)).pop())
        name = getattr(func, "__name__", "")
        if name in index_args:
            args, kwargs = widen_index(name, args, kwargs)
        try:
            return func(*args, **kwargs)
        except RuntimeError as e:
            seen = dtypes((args, kwargs), set())
            lacking = [t for t in low if f"'{LOW_NAMES[t]}'" in str(e) and t in seen]
            if not lacking:
                raise
        dt = lacking[0]
        up_args, up_kwargs = tree((args, kwargs), lambda t: t.float() if t.dtype == dt else t)
        out = func(*up_args, **up_kwargs)
        target = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if name.endswith("_") and not name.endswith("__") and target is not None \
                and target.dtype == dt:
            with torch.no_grad():
                target.copy_(out)
            return target
        if "out" in kwargs and isinstance(kwargs["out"], torch.Tensor):
            kwargs["out"].copy_(out)
            return kwargs["out"]
        if seen & {f32, torch.float64}:
            return out  # a float input promotes the result anyway
        return tree(out, lambda t: t.to(dt) if t.dtype == f32 else t)

    return HalfOnCpu()


def _child_errors():
    """A DeviceCountError in a multiprocessing child (one process per rank) ends the child
    quietly and is raised again in the parent at its join(), so the script stops with the
    child's located error instead of printing a traceback per rank and going on."""
    import atexit
    import json
    import multiprocessing.process as mpp
    import shutil
    import tempfile

    from tilelang._core import DeviceCountError

    box = tempfile.mkdtemp(prefix="tilepipe-ranks-")
    atexit.register(shutil.rmtree, box, True)
    real_run, real_join = mpp.BaseProcess.run, mpp.BaseProcess.join

    def run(self):
        try:
            real_run(self)
        except DeviceCountError as e:
            try:  # the parent may be gone already (it stops at the first rank's error)
                with open(os.path.join(box, str(os.getpid())), "w") as f:
                    json.dump({"message": e.message, "loc": e.loc, "hint": e.hint}, f)
            except OSError:
                pass
            os._exit(2)

    raised = []

    def join(self, timeout=None):
        real_join(self, timeout)
        path = os.path.join(box, str(self.pid))
        if self.exitcode == 2 and os.path.exists(path) and not raised:
            raised.append(self.pid)  # once: the other ranks' joins (and atexit's) stay quiet
            with open(path) as f:
                d = json.load(f)
            raise DeviceCountError(d["message"], loc=tuple(d["loc"]) if d["loc"] else None,
                                   hint=d["hint"])

    mpp.BaseProcess.run, mpp.BaseProcess.join = run, join


def _chunked_assert_close(torch, chunk=1 << 20):
    """torch.testing.assert_close of two large tensors of one shape, dtype and layout, checked
    `chunk` elements at a time: the comparison is elementwise, so every chunk passing is the
    whole passing, and its temporaries (promoted copies, differences, masks: some 36 bytes per
    element on the CPU) stay a chunk's, not GBs beside a large output (rms_norm's [16384, 7168]
    tensors). A chunk that fails, and every other call, is the original call on the whole
    tensors: the same error and message."""
    original = torch.testing.assert_close

    def chunkable(a, e):
        return (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)
                and type(a) is type(e) and a.layout == torch.strided == e.layout
                and a.shape == e.shape and a.dtype == e.dtype and a.device == e.device
                and a.numel() > chunk and a.is_contiguous() and e.is_contiguous())

    @functools.wraps(original)
    def assert_close(actual, expected, *args, **kwargs):
        if chunkable(actual, expected) and not kwargs.get("check_stride", False):
            a, e = actual.reshape(-1), expected.reshape(-1)
            try:
                for i in range(0, a.numel(), chunk):
                    original(a[i:i + chunk], e[i:i + chunk], *args, **kwargs)
                return None
            except AssertionError:
                pass  # the whole call reports it
        return original(actual, expected, *args, **kwargs)

    torch.testing.assert_close = assert_close


def install():
    """Patch the imported torch (imports it) and make `torch_npu` importable; idempotent."""
    import torch

    if getattr(torch, "_tilepipe_host", False):
        return torch
    _patch_device(torch)
    indexing = _indexing(torch)
    npu = _npu_module(torch)
    torch.npu = npu
    sys.modules["torch.npu"] = npu
    _newer_functions(torch)
    _int32_class_indices(torch)
    _chunked_assert_close(torch)
    if HOST_DIR not in sys.path:
        sys.path.insert(0, HOST_DIR)
    try:
        torch.ops.npu = _ops_npu(torch)
    except Exception:
        pass
    _child_errors()
    mode = _half_mode(torch, indexing)
    mode.__enter__()  # for the whole script run
    torch._tilepipe_host = True
    return torch

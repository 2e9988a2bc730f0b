"""The host side of a kernel call: reading the caller's arguments (numpy, torch, the
runner's stand-ins) as the simulator's inputs, checking their dtypes and shapes, and writing
outputs back into the caller's tensors."""

import sys

import numpy as np

from . import _core
from ._core import TilelangError, dtype_code, numpy_dtype

class TensorViewWarning(UserWarning):
    """An argument's shape differs from its declaration: the kernel views its memory."""


def _raw_input(dtype, given, a, shape):
    """The argument as the simulator reads it in place (the extension's host_inputs): the
    array itself when its element type is the tensor's, the bits of a torch bfloat16 tensor
    of the declared shape with their dtype, else None (float64 values)."""
    code = dtype_code(dtype)
    if code == "bf16":
        t = _torch_tensor(given)
        if t is None or str(t.dtype) != "torch.bfloat16" or list(t.shape) != list(shape):
            return None
        torch = sys.modules["torch"]
        return (t.detach().cpu().contiguous().view(torch.int16).numpy().reshape(-1), "bf16")
    if a.dtype != np.dtype(numpy_dtype(dtype)):
        return None
    return np.ascontiguousarray(a).reshape(-1)


def _torch_tensor(x):
    """x if it is a torch.Tensor (torch already imported by the caller), else None."""
    torch = sys.modules.get("torch")
    T = getattr(torch, "Tensor", None) if torch is not None else None
    return x if isinstance(T, type) and isinstance(x, T) else None


def _dtype_of(x, a):
    """The element type name of a caller's argument x (read as the numpy array a): torch's
    own dtype for a torch tensor (bfloat16 included), the array's otherwise."""
    d = getattr(x, "dtype", None)
    if d is not None and not isinstance(d, np.dtype):
        name = getattr(d, "_tl_name", None) or str(d).replace("torch.", "")
        return {"half": "float16", "float": "float32", "double": "float64", "long": "int64",
                "int": "int32", "short": "int16"}.get(name, name)
    return str(a.dtype)


def _to_numpy(x):
    """A host array from numpy, a torch tensor (bfloat16 read as float32 holding bf16 values),
    the shim's tensor, or anything with __array__ / DLPack."""
    if isinstance(x, np.ndarray):
        return x
    t = _torch_tensor(x)
    if t is not None:
        t = t.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return t.resolve_conj().numpy() if hasattr(t, "resolve_conj") else t.numpy()
    tl = getattr(x, "_tl_array", None)  # the runner's numpy torch stand-in
    if tl is not None:
        return tl()
    if hasattr(x, "__array__"):
        try:
            return np.asarray(x)
        except Exception:
            pass
    if hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x)
        except Exception:
            pass
    raise TilelangError(f"cannot read a {type(x).__name__} as an array",
                        hint="pass numpy arrays or torch tensors (or objects with __array__ / "
                        "DLPack)")


def _check_dtype(name, spec, given, a, loc, is_out):
    """The element type of an argument against the kernel's declaration: equal, or a numpy
    float32 array for a bfloat16 tensor (numpy has no bfloat16), or bool for uint8 / bool.
    Anything else is an error (it used to be converted silently: an int8 output array
    truncated, f16 or int64 inputs into an f32 kernel)."""
    got = _dtype_of(given, a)
    want = spec.dtype
    if got == want or (want == "uint8" and got == "bool"):
        return
    if _twin_active(want) and got == np.dtype(_TWIN[want]).name and \
            _torch_tensor(given) is not None:
        return  # torch.uint16 / uint32 of the runner's host: the same bits (_TWIN)
    if want == "bfloat16" and got == "float32" and isinstance(given, np.ndarray):
        return
    role = "output" if is_out else "argument"
    raise TilelangError(
        f"{role} '{name}' has dtype {got}; the kernel declares {want} (parameter at "
        f"{loc[0]}:{loc[1]})", loc=_core.user_loc(),
        hint=f"convert it first: x.to(torch.{want}) or "
        f"np.asarray(x, dtype=np.{numpy_dtype(want)})")


def _check_writable(name, given, loc):
    """An output the caller passed must take the kernel's values: a read-only numpy array
    (np.broadcast_to, a memory-mapped file opened "r", flags.writeable = False) is an error
    before the run, not numpy's ValueError after it."""
    if isinstance(given, np.ndarray) and not given.flags.writeable:
        raise TilelangError(
            f"output '{name}' is read-only: the kernel writes it (parameter at "
            f"{loc[0]}:{loc[1]})", loc=_core.user_loc(),
            hint="pass a writable array, e.g. a copy: np.array(x)")


def _round_bf16(v):
    """float64 values rounded to bfloat16 (round to nearest even), as float64."""
    f = np.ascontiguousarray(v, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    r = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(f), f, r).astype(np.float64).reshape(np.shape(v))


def _scalar_value(name, spec, v, loc):
    """The value of a scalar argument (a Python or numpy number, or a 0-d tensor)."""
    item = getattr(v, "item", None)
    if item is not None and getattr(v, "shape", None) in ((), []):
        v = item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TilelangError(f"scalar parameter '{name}' ({spec.dtype}) got a "
                            f"{type(v).__name__}", loc=loc, hint="pass a Python number")
    if spec.dtype.startswith(("int", "uint")):
        if int(v) != v:
            raise TilelangError(f"scalar parameter '{name}' is {spec.dtype}; got {v!r}", loc=loc,
                                hint="pass an integer")
        return int(v)
    return float(v)


_TWIN = {"uint16": np.int16, "uint32": np.int32, "uint64": np.int64}


def _twin_active(dtype):
    """torch has no `dtype` and the runner's host names its signed twin instead."""
    torch = sys.modules.get("torch")
    return (dtype in _TWIN and getattr(torch, "_tilepipe_unsigned", None) is not None
            and dtype in torch._tilepipe_unsigned)


def _torch_from(v, dtype):
    import torch

    if _twin_active(dtype):
        v = np.ascontiguousarray(v.astype(dtype)).view(_TWIN[dtype])
    t = torch.from_numpy(np.ascontiguousarray(v))
    return t.to(torch.bfloat16) if dtype == "bfloat16" else t


def _wrap_like(v, args, dtype):
    """An output the kernel allocated: a torch tensor of the kernel's dtype when the caller
    passed torch tensors, or passed no arrays under the runner's host torch (the shim's
    tensor when it passed the shim's), else a numpy array."""
    for a in args:
        if _torch_tensor(a) is not None:
            return _torch_from(v, dtype)
        wrap = getattr(a, "_tl_wrap", None)
        if wrap is not None:
            return wrap(v, dtype)
    torch = sys.modules.get("torch")
    if getattr(torch, "_tilepipe_host", False) and not any(
            isinstance(a, np.ndarray) for a in args):
        return _torch_from(v, dtype)
    return v


def _warn_view(name, given, declared, loc):
    msg = (f"argument '{name}' has shape {tuple(given)}; the kernel declares "
           f"{tuple(declared)}: it sees the tensor's memory in its declared shape, as on the "
           "NPU (the original's wrapper checks no static shapes)")
    if int(np.prod(given)) == int(np.prod(declared)):
        msg += ("; the same elements in another arrangement (a transposed weight reads as "
                "other values): pass it in the declared shape, e.g. .reshape / .T.contiguous()")
    elif int(np.prod(given)) < int(np.prod(declared)):
        msg += ("; past the tensor's end it reads NaN (on the NPU: whatever memory follows), "
                "and a number written there is an error")
    _core.warn_at(msg, TensorViewWarning, loc, stacklevel=3)  # at the parameter's declaration


def _check_short(name, v, n, loc):
    """An output that is an input too, given with fewer elements than declared: the kernel
    may not write past them (on the NPU that is memory after the tensor)."""
    past = v.reshape(-1)[n:]
    written = np.flatnonzero(~np.isnan(past))
    if written.size:
        raise TilelangError(
            f"the kernel wrote element {n + int(written[0])} of '{name}', whose tensor has "
            f"{n} elements (on the NPU: memory past the tensor)", loc=loc,
            hint="pass a tensor of the declared size")
    return v.reshape(-1)[:n]


def _write_back(dst, v):
    """Writes an output into the caller's array or tensor in place (into its first
    elements when the kernel declares fewer than it has)."""
    t = _torch_tensor(dst)
    n = t.numel() if t is not None else getattr(dst, "size", None)
    if isinstance(n, int) and v.size != n:
        if t is not None:
            _write_back(t.view(-1)[:v.size], v.reshape(-1))
        elif isinstance(dst, np.ndarray):
            dst.flat[:v.size] = v.reshape(-1).astype(dst.dtype)  # any layout, in place
        else:
            raise TilelangError(f"cannot write a {v.size}-element output into a "
                                f"{type(dst).__name__} of {n}")
        return
    t = _torch_tensor(dst)
    if t is not None:
        import torch

        if t.dtype == torch.bfloat16:
            src = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32))
        else:
            npd = torch.empty((), dtype=t.dtype).numpy().dtype
            v = np.ascontiguousarray(v)
            if v.dtype.kind == "u" and npd.kind == "i" and v.dtype.itemsize == npd.itemsize:
                src = torch.from_numpy(v.view(npd))  # the unsigned bits (_TWIN)
            else:
                src = torch.from_numpy(v.astype(npd))
        with torch.no_grad():
            t.copy_(src.reshape(t.shape))
        return
    setter = getattr(dst, "_tl_set", None)
    if setter is not None:
        setter(v)
    elif isinstance(dst, np.ndarray):
        dst[...] = v.astype(dst.dtype).reshape(dst.shape)
    else:
        raise TilelangError(f"cannot write an output back into a {type(dst).__name__}",
                            hint="pass numpy arrays or torch tensors for outputs")

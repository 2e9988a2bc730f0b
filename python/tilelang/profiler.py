"""`tilelang.profiler`: simulated timing of compiled kernels."""

import time

from . import _jit
from ._core import _ext
from ._jit import JITKernel, Profiler  # noqa: F401


def do_bench(fn, *args, warmup=0, rep=1, _n_warmup=0, _n_repeat=1, **kw):
    """Simulated time in ms of what `fn` runs on the NPU (what the original measures with
    device events). `fn` is a JITKernel (called with `args`, or with random inputs), or a
    callable: it runs once, and the kernels it called are re-simulated in timing mode with
    the same inputs, their times summed. A callable that runs no tilelang kernel (a host
    reference such as `a @ b`) is timed on the host instead (wall-clock ms)."""
    if isinstance(fn, JITKernel):
        return fn.profile(*args)
    calls = []
    _jit._call_hooks.append(calls.append)
    t0 = time.perf_counter()
    try:
        fn(*args)
    finally:
        wall = time.perf_counter() - t0
        _jit._call_hooks.remove(calls.append)
    if not calls:
        return wall * 1000.0
    total = 0.0
    for compiled, host in calls:
        r = _ext.run(compiled.compiled, host, "timing")
        total += r.cycles * compiled.compiled.us_per_cycle / 1000.0
    return total


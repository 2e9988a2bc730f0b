"""`tilelang.profiler`: simulated timing of compiled kernels."""

import time

from . import _jit
from ._jit import JITKernel


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
    import _tilepipe

    for compiled, host in calls:
        r = _tilepipe.run(compiled.compiled, host, "timing")
        total += r.cycles * compiled.compiled.us_per_cycle / 1000.0
    return total


class Profiler:
    def __init__(self, kernel):
        self.kernel = kernel

    def do_bench(self, *args, **kw):
        return self.kernel.profile(*args)

    def assert_allclose(self, ref_prog, *args, rtol=1e-2, atol=1e-2, **kw):
        import numpy as np

        inputs = self.kernel._example_inputs(args)
        out = self.kernel(*inputs)
        ref = ref_prog(*inputs)
        np.testing.assert_allclose(np.asarray(out, dtype=np.float64),
                                   np.asarray(ref, dtype=np.float64), rtol=rtol, atol=atol)

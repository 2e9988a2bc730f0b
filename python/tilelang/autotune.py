"""`@tilelang.autotune(configs=..., ref_prog=..., supply_prog=...)` over a @tilelang.jit
factory: each config is built, run and checked against ref_prog, and timed on the simulator
(the same number as kernel.profile()); the fastest correct one is returned. Called with every
tuned parameter given, the factory is called directly, as in the original."""

import functools
import inspect

import numpy as np

from . import _core
from ._jit import _to_numpy
from ._core import TilelangError, user_loc


class AutotuneResult:
    def __init__(self, config, latency, ref_latency, results):
        self.config = config
        self.latency = latency
        self.ref_latency = ref_latency
        self.results = results  # [(config, latency ms or None, why not)]

    def __repr__(self):
        return f"AutotuneResult(config={self.config}, latency={self.latency:.4f} ms)"


def _arrays(x):
    if isinstance(x, (list, tuple)):
        return [a for y in x for a in _arrays(y)]
    return [np.asarray(_to_numpy(x), dtype=np.float64)]


def _close(out, ref, atol, rtol, max_mismatched_ratio):
    got, want = _arrays(out), _arrays(ref)
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference gives {len(want)}"
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return f"output shape {g.shape}, the reference's {w.shape}"
        bad = ~np.isclose(g, w, atol=atol, rtol=rtol, equal_nan=True)
        if bad.mean() > max_mismatched_ratio:
            return f"{bad.sum()} of {bad.size} elements differ from the reference"
    return None


def autotune(func=None, *, configs=None, warmup=25, rep=100, timeout=100, supply_type=None,
             ref_prog=None, supply_prog=None, rtol=1e-2, atol=1e-2, max_mismatched_ratio=0.01,
             skip_check=False, manual_check_prog=None, cache_input_tensors=False, **kw):
    def deco(factory):
        try:
            sig = inspect.signature(factory)
        except (TypeError, ValueError):
            sig = None

        @functools.wraps(factory)
        def wrapper(*args, **kwargs):
            if callable(configs):  # the original passes the call's arguments
                n = len(inspect.signature(configs).parameters)
                cfgs = list(configs(*(args, kwargs)[:n]))
            else:
                cfgs = list(configs or [])
            keys = {k for c in cfgs for k in c}
            given = set(kwargs)
            if sig is not None:
                try:
                    given = set(sig.bind_partial(*args, **kwargs).arguments)
                except TypeError:
                    pass
            if not cfgs or keys <= given:  # every tuned parameter given: no tuning
                return factory(*args, **kwargs)
            where = user_loc()
            results, best = [], None
            for cfg in cfgs:
                try:
                    kernel = factory(*args, **{**kwargs, **cfg})
                    inputs = (supply_prog(kernel.params_for_supply()) if supply_prog
                              else kernel._example_inputs(()))
                    out = kernel(*inputs)
                    why = None
                    if ref_prog is not None and not skip_check:
                        why = _close(out, ref_prog(*inputs), atol, rtol, max_mismatched_ratio)
                    if why is None and manual_check_prog is not None:
                        manual_check_prog(out, ref_prog(*inputs) if ref_prog else None)
                    if why:
                        results.append((cfg, None, why))
                        continue
                    ms = kernel.profile(*inputs)
                except TilelangError as e:  # a rejected config: not the script's error
                    _core.handled(e)
                    results.append((cfg, None, str(e).splitlines()[0]))
                    continue
                results.append((cfg, ms, None))
                if best is None or ms < best[1]:
                    best = (kernel, ms, cfg)
            if best is None:
                first = results[0]
                raise TilelangError(
                    f"autotune: none of the {len(cfgs)} configs of {factory.__name__} built and "
                    f"matched the reference; the first, {first[0]}: {first[2]}", loc=where)
            kernel, ms, cfg = best
            kernel.config = dict(cfg)
            kernel.latency = ms
            kernel.autotune_result = AutotuneResult(dict(cfg), ms, None, results)
            kernel.get_tuner_result = lambda: dict(cfg)
            return kernel

        return wrapper

    if func is not None and callable(func):
        return deco(func)
    return deco


class AutoTuner:
    """The original's imperative tuner: AutoTuner.from_kernel(factory, configs).set_compile_args
    (...).run() is `autotune` applied to the factory."""

    def __init__(self, fn, configs):
        self.fn, self.configs, self.opts = fn, configs, {}

    @classmethod
    def from_kernel(cls, kernel, configs):
        return cls(kernel, configs)

    def set_compile_args(self, **kw):
        return self

    def set_profile_args(self, supply_prog=None, ref_prog=None, rtol=1e-2, atol=1e-2, **kw):
        self.opts.update(supply_prog=supply_prog, ref_prog=ref_prog, rtol=rtol, atol=atol)
        return self

    def run(self, *args, **kw):
        k = autotune(configs=self.configs, **self.opts)(self.fn)(*args)
        return k.autotune_result

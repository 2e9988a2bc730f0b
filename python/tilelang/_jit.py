"""`@tilelang.jit`: the factory runs as plain Python and returns a @T.prim_func; the result
is a JITKernel that lowers the prim_func to tilepipe IR (per binding of its symbolic dims),
compiles it (verify -> passes -> lower) and runs it on the simulator."""

import functools
import hashlib
import inspect
import json
import math
import os
import sys
import tempfile
import time
import types
import warnings

import numpy as np

from . import _core
from . import _felem
from ._core import Buffer, Sym, TilelangError, ctx, dtype_code, numpy_dtype, resolve, sym_vars
from ._builder import Builder
from ._core import _ext
from ._args import (_TWIN, TensorViewWarning, _check_dtype, _check_short,  # noqa: F401
                    _raw_input, _round_bf16, _scalar_value, _to_numpy, _warn_view, _wrap_like,
                    _write_back, _check_writable)
from ._interp import PrimFunc

CHIP = "a3"
MAX_CYCLES = [1e13]  # the simulator's cycle budget per run (set_max_cycles)
# The kernel launches of a torch.npu.graph capture, or None: launched at replay (tilepipe.host)
CAPTURE = [None]


def config_dir():
    """Where the chip configs are: the simulator's lookup ($TILEPIPE_CONFIG_DIR, else an
    installed prefix's share/tilepipe/configs, else the source tree's configs/)."""
    return _ext.config_dir()


def available_chips():
    """Names of the chip configs (the *.json files with a "die" section), sorted."""
    d = config_dir()
    out = []
    try:
        files = sorted(os.listdir(d))
    except OSError:
        return out
    for f in files:
        if f.endswith(".json"):
            try:
                with open(os.path.join(d, f)) as fh:
                    if "die" in json.load(fh):
                        out.append(f[:-5])
            except (OSError, ValueError):
                pass
    return out


def _launch_chip(info):
    """The chip a kernel runs on: CHIP, or for `T.Kernel(..., threads=1)` (C:V = 1:1) CHIP
    with one vector core per AI core, as the original launches it (the second one idles)."""
    if getattr(info, "vector_cores", None) != 1:
        return CHIP
    cfg = chip_config(CHIP)
    cfg["die"]["aiv_per_core"]["value"] = 1
    text = json.dumps(cfg, indent=1)
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    d = os.path.join(tempfile.gettempdir(), f"tilepipe-chips-{os.getuid()}")
    path = os.path.join(d, f"{os.path.basename(CHIP)[:-5] if CHIP.endswith('.json') else CHIP}"
                        f"-1aiv-{digest}.json")
    if not os.path.exists(path):
        os.makedirs(d, exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def chip_config(name=None):
    """The parsed chip config of `name` (default: the current chip)."""
    name = name or CHIP
    path = name if name.endswith(".json") else os.path.join(config_dir(), name + ".json")
    with open(path) as f:
        return json.load(f)


@functools.lru_cache(maxsize=None)
def _hbm_bytes(chip):
    """The HBM capacity of a chip config (read once per chip: kernels ask at every call)."""
    return chip_config(chip)["die"]["hbm_bytes"]["value"]


def set_chip(name):
    """Validates and selects the chip config kernels compile and simulate for; kernels
    compiled before recompile for it on their next call (the chip is part of the cache key)."""
    global CHIP
    if not isinstance(name, str) or not name:
        raise TilelangError(f"set_chip({name!r}): expected a chip name",
                            hint=f"one of {', '.join(available_chips())}")
    if name.endswith(".json"):
        if not os.path.isfile(name):
            raise TilelangError(f"set_chip({name!r}): no such chip config file")
        CHIP = name
        return
    names = available_chips()
    low = name.lower()
    if low not in names:
        raise TilelangError(
            f"unknown chip {name!r}: expected one of {', '.join(names) or '(none found)'} "
            f"(the chip configs in {config_dir()})", loc=_core.user_loc(),
            hint="use one of those names, or a path to a chip config ending in .json")
    CHIP = low


def set_max_cycles(n):
    """Cycle budget of every later simulation (`tilepipe run --max-cycles`): a run past it
    stops with a located error instead of running on (a kernel that never ends, a tail
    guard gone wrong). Default 1e13."""
    if isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) or n <= 0:
        raise TilelangError(f"set_max_cycles({n!r}): expected a positive number of cycles",
                            loc=_core.user_loc(), hint="e.g. tilelang.set_max_cycles(1e9)")
    MAX_CYCLES[0] = float(n)


_NO_EFFECT = "accepted, no effect"
_GPU_KEY = _NO_EFFECT + ": a switch of TVM's GPU or generic lowering, which tilepipe does not run"

# The original's pass-config keys (its newest tilelang/transform/pass_config.py and the
# keys its Ascend passes register): name -> (key string, what tilepipe does with it). The
# second column is docs/python.md's table (python/tools/surface_table.py); pass_options maps
# the keys that change something.
PASS_CONFIGS = {
    "TL_ASCEND_AUTO_SYNC": ("tl.ascend_auto_sync", "`auto_sync` and `original_sync` (the "
                            "original's full barriers, docs/passes.md)"),
    "TL_ASCEND_MEMORY_PLANNING": ("tl.ascend_memory_planning", "`memory_planning`"),
    "TL_ASCEND_AUTO_CV_COMBINE": ("tl.ascend_auto_cv_combine", "`cv_split` (on if either "
                                  "CV key is on)"),
    "TL_ASCEND_AUTO_CV_SYNC": ("tl.ascend_auto_cross_core_sync", "`cv_split` (on if either "
                               "CV key is on)"),
    "TL_ASCEND_TAIL_MASK": ("tl.ascend_tail_mask", _NO_EFFECT + " on values: it makes vector "
                            "ops on a tail tile compute only the valid region, which is all "
                            "the copy out writes either way; tilepipe computes (and times) "
                            "the whole tile, the gap filled by T.copy's pad_value"),
    "TL_ASCEND_AUTO_SYNC_VS": ("tl.ascend_auto_sync_vs", _NO_EFFECT + ": the vector / scalar "
                               "sync supplement and the compiler flags paired with it (CCE "
                               "auto-sync off, -O3) are code generation; tilepipe's auto_sync "
                               "places the flags the simulator checks"),
    "TL_ASCEND_VECTOR_MASK_REUSE": ("tl.ascend_vector_mask_reuse", _NO_EFFECT + ": reuse of "
                                    "the vector mask register between instructions is code "
                                    "generation"),
    "TL_ASCEND_EXCEPTION_DUMP": ("tl.ascend_exception_dump", _NO_EFFECT + ": the AI core "
                                 "exception callback of the NPU runtime; tilepipe's errors name "
                                 "the line"),
    "TL_ASCEND_PTO_USE_PIPE_IN_CV_COPY": ("tl.ascend_pto_use_pipe_in_cv_copy", _NO_EFFECT +
                                          ": a switch of the PTO back end's code generation"),
    "TL_SIMPLIFY": ("tl.Simplify", _NO_EFFECT + ": TVM's simplifier; the IR is built folded"),
    "TL_DYNAMIC_ALIGNMENT": ("tl.dynamic_alignment", _GPU_KEY),
    "TL_DISABLE_DYNAMIC_TAIL_SPLIT": ("tl.disable_dynamic_tail_split", _GPU_KEY),
    "TL_DISABLE_WARP_SPECIALIZED": ("tl.disable_warp_specialized", _GPU_KEY),
    "TL_ENABLE_FAST_MATH": ("tl.enable_fast_math", _GPU_KEY),
    "TL_DISABLE_THREAD_STORAGE_SYNC": ("tl.disable_thread_storage_sync", _GPU_KEY),
    "TL_CONFIG_INDEX_BITWIDTH": ("tl.config_index_bitwidth", _NO_EFFECT + ": index "
                                 "expressions are 64-bit in tilepipe's IR"),
    "TL_DISABLE_TMA_LOWER": ("tl.disable_tma_lower", _GPU_KEY),
    "TL_DISABLE_SAFE_MEMORY_ACCESS": ("tl.disable_safe_memory_legalize", _GPU_KEY),
    "TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS": ("tl.debug_merge_shared_memory_allocations",
                                                 _GPU_KEY),
    # The vectorize switches are TVM's VectorizeLoop's, which runs after the original's
    # AscendLowerParallelToVector (tilepipe's vectorize pass, always on for Python kernels).
    "TL_DISABLE_VECTORIZE": ("tl.disable_vectorize", _NO_EFFECT + " (an older version's key): "
                             "see TIR_DISABLE_VECTORIZE"),
    "TIR_DISABLE_VECTORIZE": ("tir.disable_vectorize", _NO_EFFECT + ": TVM's VectorizeLoop, "
                              "which the original runs after its AscendLowerParallelToVector "
                              "(tilepipe's `vectorize`, which stays on; `tilepipe.vectorize: "
                              "False` switches it off)"),
    "TIR_ENABLE_EQUIV_TERMS_IN_CSE": ("tir.enable_equiv_terms_in_cse_tir", _GPU_KEY),
    "TIR_DISABLE_CSE": ("tir.disable_cse_tir", _GPU_KEY),
    "TIR_SIMPLIFY": ("tir.Simplify", _NO_EFFECT + ": TVM's simplifier; the IR is built folded"),
    "TIR_DISABLE_STORAGE_REWRITE": ("tir.disable_storage_rewrite", _GPU_KEY),
    "TIR_USE_ASYNC_COPY": ("tir.use_async_copy", _GPU_KEY),
    "TIR_ENABLE_DEBUG": ("tir.enable_debug", _GPU_KEY),
    "TIR_MERGE_STATIC_SMEM": ("tir.merge_static_smem", _GPU_KEY),
    "TIR_ADD_LOWER_PASS": ("tir.add_lower_pass", _NO_EFFECT + ": TVM passes of the author's "
                           "cannot run on tilepipe's IR"),
    "TIR_NOALIAS": ("tir.noalias", _GPU_KEY),
    "CUDA_KERNELS_OUTPUT_DIR": ("cuda.kernels_output_dir", _GPU_KEY),
}
_KEY_STRINGS = {v[0] for v in PASS_CONFIGS.values()}


class _KeyMeta(type):
    def __getattr__(cls, name):
        if name.startswith("_"):
            raise AttributeError(name)
        raise _core.UnsupportedName(
            f"PassConfigKey.{name} is not a pass config of TileLang-Ascend",
            loc=_core.current_loc(),
            hint="the keys: " + ", ".join(PASS_CONFIGS) + " (docs/python.md, \"Pass configs\")")


class _Key(str):
    """A member of PassConfigKey: its key string (so a script may write the member or the
    string), with the enum member's .name and .value."""

    def __new__(cls, name, key):
        member = str.__new__(cls, key)
        member.name = name
        return member

    @property
    def value(self):
        return str(self)


class PassConfigKey(metaclass=_KeyMeta):
    """The original's enum of pass-config keys."""


for _name, (_key, _) in PASS_CONFIGS.items():
    setattr(PassConfigKey, _name, _Key(_name, _key))


LOWERINGS = ("original", "tilepipe")
# Set by the command line's `--variant` of a Python source (tilepipe/sources.py): the
# lowering of every kernel built meanwhile, over the files' own "tilepipe.lowering".
lowering_override = [None]


def lowering(configs):
    """How unscoped (automatic) kernels are lowered (docs/python.md, "Two lowerings"):
    "original" splits Cube and Vector code in the front end as TileLang-Ascend's compiler
    does; "tilepipe" emits the kernel unscoped for tilepipe's passes (cv_split, multibuffer,
    auto_sync). A kernel whose passes have cv_split off keeps the front end's split."""
    choice = lowering_override[0]
    for k, v in (configs or {}).items():
        if getattr(k, "value", k) == "tilepipe.lowering" and choice is None:
            choice = v
    choice = choice or "original"
    if choice not in LOWERINGS:
        raise TilelangError(f"pass config 'tilepipe.lowering' is {choice!r}",
                            hint=f"use one of {', '.join(LOWERINGS)}")
    if choice == "tilepipe" and not pass_options(configs, {}).get("cv_split", True):
        return "original"
    return choice


def pass_options(configs, func_attrs):
    """The original's pass configs -> tilepipe's PassOptions (docs/python.md)."""
    o = {}
    for k, v in (configs or {}).items():
        key = getattr(k, "value", k)
        on = bool(v)
        if key == "tilepipe.lowering":
            pass  # the front end's choice (lowering()), not a pass option
        elif key == PassConfigKey.TL_ASCEND_AUTO_SYNC:
            # The original's AUTO_SYNC also places full barriers (original_sync.h): the
            # original-compatible lowering keeps them, so the time predicts the NPU's.
            o["auto_sync"] = o["original_sync"] = on
        elif key == PassConfigKey.TL_ASCEND_MEMORY_PLANNING:
            o["memory_planning"] = on
        elif key in (PassConfigKey.TL_ASCEND_AUTO_CV_COMBINE, PassConfigKey.TL_ASCEND_AUTO_CV_SYNC):
            o["cv_split"] = o.get("cv_split", False) or on
            if key == PassConfigKey.TL_ASCEND_AUTO_CV_COMBINE:
                o["cv_combine"] = on  # else unscoped work is the warning outer-scope
        elif key.startswith("tilepipe."):
            o[key[len("tilepipe."):]] = on
        elif key in _KEY_STRINGS:
            pass  # accepted, no effect (PASS_CONFIGS says why)
        else:
            raise TilelangError(
                f"unknown pass config {key!r}",
                loc=_core.user_loc(),
                hint="the original's keys (tilelang.PassConfigKey.*, or their strings such as "
                "'tl.ascend_auto_sync'), or 'tilepipe.<pass option>' (docs/python.md)",
            )
    if func_attrs.get("enable_auto_sync") is not None and "auto_sync" not in o:
        o["auto_sync"] = o["original_sync"] = func_attrs["enable_auto_sync"]
    # The original's code generator lays the author's buffers out without checking its
    # limit; the hardware runs them up to the physical size (docs/python.md).
    o.setdefault("reserved_tail", True)
    # The original's init credits left set at the end: the hardware drops them (cross_drains).
    o.setdefault("cross_drains", True)
    # The original software-pipelines T.Pipelined loops in hand-synced scopes too.
    o.setdefault("hand_pipeline", True)
    o.setdefault("cv_combine", False)
    return o


class _KernelInfo:
    """One lowering of a prim_func: the builder and the GM tensors it declared."""

    def __init__(self, name, params, roles):
        self.name = name
        self.params = params  # [(name, shape, dtype, loc)]
        self.roles = roles
        self.buffers = {}
        self.func_attrs = {}
        self.split_pass = False  # the C/V split left to the original_split pass (_split.py)
        self.started = False

    def start(self, build, block_num, loc):
        b = _ext.Builder(self.name, block_num, loc)
        build.ir = b
        build.block_num = block_num
        for name, shape, dtype, ploc in self.params:
            ext = b.param(name, shape, dtype_code(dtype), self.roles[name], ploc)
            self.buffers[name].ext = ext
        self.started = True


class Compiled:
    def __init__(self, ext, program, opts, compiled, info, pads, lower_s):
        self.ext = ext
        self.program = program  # as the front end built it, before tilepipe's passes
        self.opts = opts  # the pass options of pass_configs and T.func_attr
        self.compiled = compiled
        self.info = info
        self.pads = pads  # name -> (padded shape, pad value)
        self.lower_s = lower_s


def _positions_of(what, idx, specs):
    """out_idx / workspace_idx as the original's adapter takes them (None, an int or a list of
    ints, negative from the end) -> parameter positions."""
    n = len(specs)
    items = [idx] if isinstance(idx, int) else [] if idx is None else idx
    if isinstance(idx, bool) or not isinstance(items, (list, tuple)) or \
            not all(isinstance(i, int) and not isinstance(i, bool) for i in items):
        raise TilelangError(f"{what}={idx!r}: expected None, a parameter position or a list of "
                            "them", loc=_core.user_loc(),
                            hint=f"e.g. {what}=[-1] for the last of the {n} parameters")
    out = []
    for i in items:
        if not -n <= i < n:
            raise TilelangError(f"{what} {i} is out of range for the {n} parameters of the "
                                "kernel", loc=_core.user_loc(),
                                hint=f"positions run from {-n} to {n - 1}")
        out.append(i % n)
    return out


class JITKernel:
    """A compiled kernel: call it with arrays; profile, trace, check and advise it."""

    def __init__(self, prim, out_idx, workspace_idx, pass_configs, name):
        self.prim = prim
        self.name = name
        self.factory_args = {}  # the factory's integer arguments (set by @tilelang.jit)
        self.pass_configs = pass_configs or {}
        self.specs = prim.params()

        self.out_idx = _positions_of("out_idx", out_idx, self.specs)
        self.workspace_idx = _positions_of("workspace_idx", workspace_idx, self.specs)
        for i in set(self.out_idx) & set(self.workspace_idx):
            raise TilelangError(f"parameter '{self.specs[i][0]}' is both an output (out_idx) "
                                "and a workspace (workspace_idx)", loc=_core.user_loc(),
                                hint="give each position to one of the two lists")
        self._cache = {}
        self.last_run = None
        self._syms = set()
        self._viewed = set()  # (parameter, shape) warned about: a shape not declared
        # Scalar parameters (`n: T.int32`) specialise the kernel on their value at call time,
        # like a symbolic dim bound from a shape (docs/python.md).
        self.scalars = {i for i, (_, spec, _) in enumerate(self.specs) if spec.scalar}
        for i, (name, spec, _) in enumerate(self.specs):
            if spec.scalar:
                if i in self.out_idx or i in self.workspace_idx:
                    raise TilelangError(f"scalar parameter '{name}' cannot be an output or a "
                                        "workspace", loc=self.specs[i][2])
                self._syms.add(name)
            for d in spec.shape:
                sym_vars(d, self._syms)
        if not self._syms and not self._beyond_hbm():
            self._compile({})  # errors surface at the factory call, as in the original

    # ---- lowering ----

    def _beyond_hbm(self):
        """Whether the tensor parameters' declared static shapes exceed the chip's HBM
        together: then a leading dim is a bound on the rows the kernel accepts
        (`T.Tensor([MAX_TOKENS, H], ...)`, the true extent a scalar parameter), and a
        caller's smaller tensor sizes it at each call (_bind)."""
        hbm = _hbm_bytes(CHIP)
        total = 0
        for name, spec, _ in self.specs:
            if not spec.scalar and all(isinstance(d, int) for d in spec.shape):
                total += _core.dtype_bytes(spec.dtype) * int(np.prod(spec.shape, dtype=object))
        return total > hbm

    def _shape(self, name, spec):
        """A tensor parameter's shape under the current bindings (ctx.bindings): the
        declared one, its leading dim the caller's rows where _bind bound them."""
        shape = [resolve(d) for d in spec.shape]
        rows = (ctx.bindings or {}).get(name + ".rows")
        if rows is not None:
            shape[0] = rows
        return shape

    def _bound_shape(self, name, spec, c):
        saved = ctx.bindings
        ctx.bindings = c.bindings
        try:
            return self._shape(name, spec)
        finally:
            ctx.bindings = saved

    def _roles(self, written):
        roles = {}
        for i, (name, spec, _) in enumerate(self.specs):
            if spec.scalar:
                roles[name] = "scalar"
            elif i in self.workspace_idx:
                roles[name] = "workspace"
            elif i in self.out_idx or name in written:
                roles[name] = "output"
            else:
                roles[name] = "input"
        return roles

    def _lower(self, bindings, roles, pads):
        saved = ctx.bindings
        ctx.bindings = bindings
        options = pass_options(self.pass_configs, {})
        b = Builder(lowering(self.pass_configs), options.get("auto_sync", True),
                    options.get("original_sync", False))
        try:
            with _core.building(b):
                params = []
                for name, spec, loc in self.specs:
                    if spec.scalar:
                        continue
                    shape = self._shape(name, spec)
                    if name in pads:
                        shape = pads[name][0]
                    _core.check_buffer_size(name, shape, spec.dtype, loc)
                    params.append((name, shape, spec.dtype, loc))
                info = _KernelInfo(self.name, params, roles)
                b.kernel = info
                args = {name: bindings[name] for name, spec, _ in self.specs if spec.scalar}
                for name, shape, dtype, _ in params:
                    buf = Buffer(None, name, shape, dtype, "GM")
                    info.buffers[name] = buf
                    args[name] = buf
                self.prim.lower_body(args, b)
            if b.ir is None:
                raise TilelangError(f"kernel {self.name} has no `with T.Kernel(...)` block",
                                    loc=(self.prim.source.file, self.prim.source.fdef.lineno
                                         + self.prim.source.offset))
            program = b.ir.finish()
            self._past = {n: dict(v) for n, v in b.gm_past.items()}
            return program, info, dict(b.gm_extent), dict(b.gm_pad)
        finally:
            ctx.bindings = saved

    def _compile_for(self, arrays, with_outs):
        """The kernel compiled for the caller's arrays (bound where it has call-time sizes)."""
        call_time = self._syms or self._beyond_hbm()
        return self._compile(self._bind(arrays, with_outs) if call_time else {})

    def _compile(self, bindings):
        key = (CHIP, lowering(self.pass_configs), tuple(sorted(bindings.items())))
        if key in self._cache:
            return self._cache[key]
        saved = ctx.bindings
        ctx.bindings = bindings
        try:
            c = self._compile_bound(bindings)
        finally:
            ctx.bindings = saved
        c.bindings = bindings
        # The same kernel at these bindings under another lowering, without running its
        # caller again (a profile times both lowerings of a script's launch).
        c.relower = lambda: self._compile(bindings)
        self._cache[key] = c
        return c

    def _compile_bound(self, bindings):
        self._past = {}
        t0 = time.perf_counter()
        roles = self._roles(set())
        program, info, extents, gm_pad = self._lower(bindings, roles, {})
        # Tensors the body writes are outputs even without out_idx (written in place).
        written = set(_written(program))
        pads = {}
        for name, spec, _ in self.specs:
            if spec.scalar:
                continue
            shape = self._shape(name, spec)
            ends = extents.get(name)
            if ends and any(e > s for e, s in zip(ends, shape)):
                pads[name] = ([max(e, s) for e, s in zip(ends, shape)], gm_pad.get(name, 0.0))
                for d, loc in sorted(getattr(self, "_past", {}).get(name, {}).items()):
                    _warn_past(name, d, shape, pads[name][0], loc)
        roles2 = self._roles(written)
        if roles2 != roles or pads:
            program, info, _, _ = self._lower(bindings, roles2, pads)
        lower_s = time.perf_counter() - t0
        opts = pass_options(self.pass_configs, info.func_attrs)
        if info.split_pass:
            opts["original_split"] = True
        if lowering(self.pass_configs) == "tilepipe":
            opts.pop("original_sync", None)  # tilepipe's passes, not the original's barriers
        compiled = _ext.compile(program, _launch_chip(info), opts)
        _core.warn_hazards(compiled)
        return Compiled(self, program, opts, compiled, info, pads, lower_s)

    def _positions(self, with_outs):
        """Parameter indices of the caller's arguments, in order."""
        return [i for i in range(len(self.specs)) if i not in self.workspace_idx
                and (with_outs or i not in self.out_idx)]

    def _bind(self, arrays, with_outs=False):
        """Symbolic dims from the shapes of the arrays the caller passed, scalar parameters
        from their values."""
        bindings = {}
        beyond = self._beyond_hbm()
        for i, a in zip(self._positions(with_outs), arrays):
            name, spec, loc = self.specs[i]
            if spec.scalar:
                bindings[name] = _scalar_value(name, spec, a, loc)
                continue
            static = all(isinstance(d, int) for d in spec.shape) and spec.shape
            if beyond and static and a.size < int(np.prod(spec.shape, dtype=object)):
                # the rows the caller's tensor has: its memory on the NPU
                row = int(np.prod(spec.shape[1:], dtype=object))
                bindings[name + ".rows"] = max(1, -(-int(a.size) // row))
            if len(a.shape) != len(spec.shape):
                continue  # a view of another rank binds nothing (checked in _run)
            for d, (want, got) in enumerate(zip(spec.shape, a.shape)):
                if isinstance(want, Sym) and want.op == "var":
                    if bindings.setdefault(want.name, int(got)) != int(got):
                        raise TilelangError(
                            f"symbolic dim '{want.name}' is {bindings[want.name]} from an earlier "
                            f"argument but {got} in '{name}'", loc=loc)
        return bindings

    # ---- calling ----

    @_core.records_errors
    def __call__(self, *args, **kw):
        if CAPTURE[0] is not None:
            return self._capture(args)
        c, outs = self._run(args, mode="functional", races=_core.checks_on())
        if os.environ.get("TILEPIPE_PROFILE") == "1":
            r = self.last_run[1]
            print(f"[tilepipe] {self.name}: {r.cycles:.0f} cycles = "
                  f"{r.cycles * c.compiled.us_per_cycle:.2f} us simulated on {c.compiled.chip} "
                  f"(lower {c.lower_s * 1000:.0f} ms, simulate {r.wall_s:.2f} s)", file=sys.stderr)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    def _capture(self, args):
        """A launch inside torch.npu.graph: recorded with every argument (the outputs
        allocated here, undefined until the replay, as on the NPU) and run at replay."""
        records, CAPTURE[0] = CAPTURE[0], None  # the host's own torch calls are not captured
        args = self._call_args(args)
        try:
            arrays, with_outs = self._inputs(args)
            c = self._compile_for(arrays, with_outs)
            full, outs, pos = [], [], 0
            for i in self._positions(True):
                name, spec, _ = self.specs[i]
                if i in self.out_idx and not with_outs:
                    v = np.zeros(self._bound_shape(name, spec, c), numpy_dtype(spec.dtype))
                    full.append(_wrap_like(v, args, spec.dtype))
                    outs.append(full[-1])
                else:
                    full.append(args[pos])
                    pos += 1
            records.append((self, full))
        finally:
            CAPTURE[0] = records
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    def _call_args(self, args):
        """The caller's arguments as the kernel binds them. A call may pass the inputs only
        (outputs and workspaces allocated, outputs returned), the inputs and the outputs, or
        every parameter in order, as the original's wrapper takes them; passed workspaces are
        not used (the kernel's own are, as on the NPU)."""
        n = len(self.specs)
        if self.workspace_idx and len(args) == n:
            return tuple(a for i, a in enumerate(args) if i not in self.workspace_idx)
        return args

    def _inputs(self, args):
        n_in = len(self.specs) - len(self.out_idx) - len(self.workspace_idx)
        n_all = len(self.specs) - len(self.workspace_idx)
        if len(args) not in (n_in, n_all):
            names = [s[0] for i, s in enumerate(self.specs)
                     if i not in self.out_idx and i not in self.workspace_idx]
            counts = sorted({n_in, n_all, len(self.specs)})
            raise TilelangError(
                f"kernel {self.name} takes {n_in} arrays ({', '.join(names)}); {len(args)} given",
                loc=_core.user_loc(),
                hint=f"pass {' or '.join(map(str, counts))} arrays: the inputs; the inputs and "
                "the outputs (out_idx); or every parameter in order (workspace_idx positions "
                "are allocated by the kernel either way)")
        with_outs = len(args) == n_all
        return [a if self.specs[i][1].scalar else _to_numpy(a)
                for i, a in zip(self._positions(with_outs), args)], with_outs

    def _host(self, args):
        """The compiled kernel for these arrays, its inputs as the simulator takes them
        (by name: flat arrays of the tensor's own type read in place, _raw_input, else
        float64, padded), the caller's objects by parameter index, and the
        element counts of the caller's tensors smaller than declared."""
        args = self._call_args(args)
        arrays, with_outs = self._inputs(args)
        c = self._compile_for(arrays, with_outs)
        host = {}
        given = {}  # parameter index -> the caller's object
        short_of = {}  # name -> elements of a caller's tensor smaller than declared
        pos = 0
        for i, (name, spec, loc) in enumerate(self.specs):
            if i in self.workspace_idx or (i in self.out_idx and not with_outs):
                continue
            a = arrays[pos]
            given[i] = args[pos]
            pos += 1
            if spec.scalar:
                continue
            shape = self._bound_shape(name, spec, c)
            size = int(np.prod(shape))
            short = None  # elements the caller's tensor has, when fewer than declared
            if list(a.shape) != list(shape):
                # The kernel's view of the caller's memory, as a pointer is on the NPU (the
                # original's wrapper checks dtypes, not static shapes): the same elements in
                # another shape (a [M, 1] tensor for a [M] parameter), the first elements of
                # a larger tensor, or a smaller one when the kernel touches only its part.
                flat = np.ascontiguousarray(a).reshape(-1)
                if a.size != size:
                    if a.size < size and spec.dtype not in _felem.FLOATS:
                        raise TilelangError(
                            f"argument '{name}' has shape {tuple(a.shape)} ({a.size} "
                            f"elements); the kernel declares {tuple(shape)} ({size} elements)",
                            loc=loc, hint="pass a tensor of at least the declared size")
                    if (name, a.shape) not in self._viewed:  # once, not on every call
                        self._viewed.add((name, a.shape))
                        _warn_view(name, a.shape, shape, loc)
                elif [d for d in a.shape if d != 1] != [d for d in shape if d != 1] and \
                        (name, a.shape) not in self._viewed:
                    # the same elements in another arrangement: a transposed weight (an
                    # nn.Linear [N, K] for a declared [K, N]) reads as other values
                    self._viewed.add((name, a.shape))
                    _warn_view(name, a.shape, shape, loc)
                if a.size >= size:
                    a = flat[:size].reshape(shape)
                else:
                    short, a = a.size, flat
            if a.dtype.kind not in "biuf":  # object, complex, strings: no tensor dtype
                raise TilelangError(
                    f"argument '{name}' has dtype {a.dtype}; expected a numeric array of "
                    f"{spec.dtype}", loc=loc,
                    hint=f"convert it first, e.g. np.asarray(x, dtype=np.{numpy_dtype(spec.dtype)})")
            _check_dtype(name, spec, args[pos - 1], a, loc, i in self.out_idx)
            if c.info.roles.get(name) == "output":
                _check_writable(name, args[pos - 1], loc)
            if spec.dtype in _TWIN and a.dtype == _TWIN[spec.dtype]:
                a = a.view(spec.dtype)  # torch.uint16 / uint32 of the runner's host
            if short is None and name not in c.pads:
                raw = _raw_input(spec.dtype, args[pos - 1], a, shape)
                if raw is not None:  # read in place: no float64 copy of a large tensor
                    host[name] = raw
                    continue
            v = np.asarray(a, dtype=np.float64)
            if spec.dtype == "bfloat16" and isinstance(args[pos - 1], np.ndarray):
                v = _round_bf16(v)  # a float32 array into a bf16 tensor: its bf16 values
            if short is not None:
                # past the caller's tensor: NaN, so a read there cannot pass for data, and a
                # write there is found after the run (_check_short)
                v = np.concatenate([v, np.full(size - short, np.nan)]).reshape(shape)
                short_of[name] = short
            if name in c.pads:
                pshape, pad = c.pads[name]
                full = np.full(pshape, pad, dtype=np.float64)
                full[tuple(slice(0, s) for s in v.shape)] = v
                v = full
            host[name] = v.reshape(-1)
        return c, host, given, short_of

    def _run(self, args, mode="functional", races=False, record=False, exact=False):
        c, host, given, short_of = self._host(args)
        for hook in _call_hooks:
            hook((c, host))
        # Only the outputs come back; with no hook holding `host`, its float64 copies go
        # as the simulator takes them (the largest memory of a big functional run).
        outputs = [name for name, _, _ in self.specs if c.info.roles.get(name) == "output"]
        try:
            r = _ext.run(c.compiled, host, mode, races, record, exact, outputs=outputs,
                         consume=not _call_hooks, max_cycles=MAX_CYCLES[0])
        except _core.TilepipeError as e:
            if _core.CHECK_KINDS.isdisjoint(e.kinds):
                raise
            raise _core.KernelCheckError(str(e), e.diagnostics) from None
        self.last_run = (c, r)
        outs = []
        if mode == "functional":
            for i, (name, spec, loc) in enumerate(self.specs):
                if i in self.workspace_idx or c.info.roles[name] != "output":
                    continue
                shape = self._bound_shape(name, spec, c)
                pshape = c.pads[name][0] if name in c.pads else shape
                v = r.outputs[name].reshape(pshape)[tuple(slice(0, s) for s in shape)]
                if name in short_of:
                    v = _check_short(name, v, short_of[name], loc)
                v = v.astype(numpy_dtype(spec.dtype))
                if i in given:
                    _write_back(given[i], v)
                    if i in self.out_idx:  # passed in as well: returned, as the original does
                        outs.append(given[i])
                else:
                    outs.append(_wrap_like(v, args, spec.dtype))
        return c, outs

    # ---- tools ----

    def get_kernel_source(self, *args):
        if self._unbound(args):
            return self._unbound_source()
        c = self._current(args)
        return c.program.print()

    def get_ir(self, after_passes=True, *args):
        if self._unbound(args):
            return self._unbound_source()
        c = self._current(args)
        return c.compiled.print() if after_passes else c.program.print()

    def _unbound(self, args):
        return not args and self._syms and self.last_run is None

    def _unbound_source(self):
        """What a kernel with symbolic dims is before its first call: tilepipe's IR has
        static shapes, so it is lowered per call, at the arguments' sizes (the original prints
        its dynamic-shape code here; a script printing it before the call goes on)."""
        try:
            text = inspect.getsource(self.prim.fn)
        except (OSError, TypeError):
            text = ""
        dims = ", ".join(sorted(self._syms))
        return (f"# kernel {self.name}: symbolic dims ({dims}) are bound per call, from the "
                "arguments' shapes and scalars;\n# call it, then ask again for the program "
                "at those sizes.\n" + text)

    def _current(self, args=()):
        if args:
            arrays, with_outs = self._inputs(self._call_args(args))
            return self._compile_for(arrays, with_outs)
        if self._syms:
            if self.last_run is not None:
                return self.last_run[0]
            raise TilelangError(
                f"kernel {self.name} has symbolic dims ({', '.join(sorted(self._syms))})",
                hint="call it (or pass example arrays) before asking for its source")
        return self._compile({})

    def _example_inputs(self, args, seed=0):
        if args:
            return args
        if self._syms:
            raise TilelangError("profile() of a kernel with symbolic dims or scalar parameters "
                                "needs example arguments")
        rng = np.random.default_rng(seed)
        out = []
        for i, (name, spec, _) in enumerate(self.specs):
            if i in self.out_idx or i in self.workspace_idx:
                continue
            shape = [resolve(d) for d in spec.shape]
            if spec.dtype.startswith("int") or spec.dtype == "uint8":
                out.append(np.zeros(shape, dtype=numpy_dtype(spec.dtype)))
            else:
                out.append(rng.standard_normal(shape).astype(numpy_dtype(spec.dtype)))
        return out

    @_core.records_errors
    def profile(self, *args, exact=False):
        """Simulated kernel time in milliseconds (timing mode; fast-forward unless exact)."""
        c, _ = self._run(self._example_inputs(args), mode="timing", exact=exact)
        r = self.last_run[1]
        return r.cycles * c.compiled.us_per_cycle / 1000.0

    @_core.records_errors
    def cycles(self, *args):
        self._run(self._example_inputs(args), mode="timing")
        return self.last_run[1].cycles

    @_core.records_errors
    def summary(self, *args):
        c, _ = self._run(self._example_inputs(args), mode="timing")
        return json.loads(_ext.summary_json(c.compiled, self.last_run[1]))

    @_core.records_errors
    def trace(self, path, *args):
        """Trace of one timing run, every iteration simulated: Perfetto's protobuf if `path`
        ends in .pftrace / .perfetto-trace, else Chrome trace JSON (gzip'd if it ends in .gz)."""
        c, _ = self._run(self._example_inputs(args), mode="timing", record=True, exact=True)
        _ext.write_trace(c.compiled, self.last_run[1], str(path))
        return str(path)

    def _profile(self, args, html=""):
        """Profile through the driver, as `tilepipe profile` does: (JSON text, advice text)."""
        c, host, _, _ = self._host(self._example_inputs(args))
        return _ext.profile(c.compiled, host, True, html, MAX_CYCLES[0])

    @_core.records_errors
    def report(self, path, *args):
        """The HTML profile report (summary, timeline, evidence, verified advice) of one
        timing run: the report `tilepipe profile --html` writes."""
        self._profile(args, html=str(path))
        return str(path)

    @_core.records_errors
    def advice(self, *args, as_json=False):
        """Advice with each gain verified by a what-if re-simulation (`tilepipe profile`)."""
        j, text = self._profile(args)
        return json.loads(j)["advice"] if as_json else text

    @_core.records_errors
    def check(self, *args):
        """Functional run with race detection; raises TilepipeError on a race or deadlock."""
        c, outs = self._run(self._example_inputs(args), mode="functional", races=True)
        return outs[0] if len(outs) == 1 else outs

    def emit(self, path, *args):
        """Writes the kernel after tilepipe's passes as a TileLang-Ascend expert-mode file
        (`tilepipe emit`): a factory named like this one, with its integer arguments."""
        c = self._current(args)
        text = _ext.emit(c.compiled, self.name, self.factory_args,
                         f"{self.name}({', '.join(f'{k}={v}' for k, v in self.factory_args.items())})")
        with open(path, "w") as f:
            f.write(text)
        return str(path)

    @property
    def adapter(self):
        raise _core.unsupported("JITKernel.adapter (the launcher of the kernel's compiled NPU "
                                "library)", "tilepipe simulates the kernel and builds no library",
                                hint="call the kernel directly")

    def params_for_supply(self):
        """The kernel's parameters as the original's supply_prog receives them (name, shape,
        dtype of each)."""
        return [types.SimpleNamespace(name=name, dtype=spec.dtype,
                                      shape=[resolve(d) for d in spec.shape])
                for name, spec, _ in self.specs]

    def get_profiler(self, *a, **kw):
        return Profiler(self)


class Profiler:
    """`kernel.get_profiler()` (tilelang.profiler.Profiler)."""

    def __init__(self, kernel):
        self.kernel = kernel

    def do_bench(self, *args, **kw):
        return self.kernel.profile(*args)

    def assert_allclose(self, ref_prog, *args, rtol=1e-2, atol=1e-2, **kw):
        inputs = self.kernel._example_inputs(args)
        out = self.kernel(*inputs)
        ref = ref_prog(*inputs)
        np.testing.assert_allclose(np.asarray(out, dtype=np.float64),
                                   np.asarray(ref, dtype=np.float64), rtol=rtol, atol=atol)


def resolve_with(d, c):
    return resolve(d) if not isinstance(d, Sym) else _resolve_bound(d, c)


def _resolve_bound(d, c):
    saved = ctx.bindings
    ctx.bindings = c.bindings
    try:
        return resolve(d)
    finally:
        ctx.bindings = saved


def _written(program):
    """Names of the GM tensors the program writes (copy destinations)."""
    return program.written_gm()


# torch releases before 2.3 have no uint16 / uint32 tensors: under the runner
# torch.uint16 / uint32 name int16 / int32 (tilepipe/host.py) and such tensors hold the
# unsigned values' bits, reinterpreted on the way in and out (docs/python.md).


def jit(func=None, *, out_idx=None, workspace_idx=None, pass_configs=None, target=None,
        execution_backend=None, verbose=False, **kw):
    """`@tilelang.jit(out_idx=..., workspace_idx=..., pass_configs=...)`."""

    _check_target(target)

    def deco(factory):
        cache = {}

        @functools.wraps(factory)
        @_core.records_errors
        def wrapper(*args, **kwargs):
            try:
                key = (args, tuple(sorted(kwargs.items())))
                hash(key)
            except TypeError:
                key = None
            if key is not None and key in cache and _cache_enabled[0]:
                return cache[key]
            prim = factory(*args, **kwargs)
            if not isinstance(prim, PrimFunc):
                raise TilelangError(
                    f"@tilelang.jit factory {factory.__name__} returned {type(prim).__name__}",
                    hint="return the @T.prim_func defined inside the factory")
            k = JITKernel(prim, out_idx, workspace_idx, pass_configs, factory.__name__)
            k.factory_args = _int_arguments(factory, args, kwargs)
            if key is not None:
                cache[key] = k
            return k

        wrapper.cache = cache
        _factory_caches.append(cache)
        wrapper.__jit_impl__ = _JitInfo(target or "auto", out_idx, workspace_idx, pass_configs)
        return wrapper

    if func is not None and callable(func):
        return deco(func)
    return deco


def _int_arguments(factory, args, kwargs):
    """The factory's integer arguments by name, defaults applied (what an emitted file's
    factory takes)."""
    try:
        bound = inspect.signature(factory).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return {}
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items()
            if isinstance(v, int) and not isinstance(v, bool)}


class _JitInfo:
    """What the original exposes as `factory.__jit_impl__` (target and jit options)."""

    def __init__(self, target, out_idx, workspace_idx, pass_configs):
        self.target = target
        self.out_idx = out_idx
        self.workspace_idx = workspace_idx
        self.pass_configs = pass_configs


_cache_enabled = [True]
_factory_caches = []  # every @tilelang.jit factory's kernels, for cache.clear_cache()


def clear_caches():
    for c in _factory_caches:
        c.clear()
_call_hooks = []  # profiler.do_bench watching which kernels a callable runs


@_core.records_errors
def compile(prim, out_idx=None, workspace_idx=None, pass_configs=None, target=None,  # noqa: A001
            **kw):
    _check_target(target)
    return JITKernel(prim, out_idx, workspace_idx, pass_configs, prim.__name__)


def _check_target(target):
    """The original's NPU-IR backend (target "npuir") compiles another dialect (T.npuir_*,
    T.copy(src, dst, sizes)); tilepipe models the AscendC one. Any other target is the
    chip tilepipe simulates."""
    if isinstance(target, str) and target.lower().startswith("npuir"):
        raise TilelangError(f"not supported: target {target!r} (the original's NPU-IR backend "
                            "and its dialect; tilepipe models the AscendC backend)",
                            hint="drop target=, and write the kernel with the T.tile ops")


class OutOfBoundsTileWarning(UserWarning):
    """A whole GM tile starts past its tensor's end for some launch index (cid, vid)."""


def _warn_past(name, dim, shape, padded, loc):
    where = f"{loc[0]}:{loc[1]}: " if loc else ""
    warnings.warn(
        f"{where}tiles of '{name}' run past dimension {dim} ({shape[dim]} elements, up to "
        f"{padded[dim]}) for some launch index (cid, vid): on the NPU an unchecked access "
        "past the tensor; tilepipe reads the pad value there and drops the writes",
        OutOfBoundsTileWarning, stacklevel=2)


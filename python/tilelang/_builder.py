"""The state of one kernel build: a Builder is created per lowering of a prim_func
(tilelang/_jit.py), handed to the interpreter that walks the body, and is the current build
while that runs (tilelang/_core.py: `cur()`), which is how the `T.` calls the kernel's code
makes reach it. Nothing of a build outlives it; the process keeps only the symbolic
bindings in force and the build under way (_core.ctx)."""


class Builder:
    def __init__(self, lowering="original", auto_sync=True, original_sync=False):
        self.ir = None  # the extension's IR builder (_ext.Builder) once T.Kernel starts
        self.kernel = None  # the _KernelInfo being built
        self.stmt_loc = None  # (file, line) of the statement being lowered
        self.pending_name = None  # assignment target name for alloc_* calls
        self.names = set()  # buffer names given so far
        self.var_ranges = {}  # loop var id -> (lo, hi)
        self.block_num = 1
        self.scope = None  # "C", "V" or None
        self.scope_hand = False  # the T.Scope being lowered has the author's flags
        self.in_parallel = False  # lowering a T.Parallel nest's element code (_parallel.py)
        self.auto_sync = auto_sync  # the kernel's pass configs leave automatic sync on
        # TL_ASCEND_AUTO_SYNC given: the author's barriers (T.barrier_all, T.pipe_barrier)
        # leave a scope automatic, only flags make it hand-synced (auto_sync, docs/passes.md)
        self.original_sync = original_sync
        self.lowering = lowering  # of unscoped kernels: "original" | "tilepipe" (_jit.py)
        self.blocks_of = None  # the statements whose IR is grouped one block each
        self.gm_extent = {}  # GM buffer name -> per-dim max end seen (bounds padding)
        self.gm_pad = {}  # GM buffer name -> pad value
        self.gm_past = {}  # GM buffer name -> {dim: loc} of whole tiles starting past the end
        self.hidden = {}  # the front end's temporaries (T.Parallel's scratch tiles) by key
        # The C/V split of unscoped kernels (tilelang/_split.py, docs/python.md): None,
        # "probe" (what the lowering must know first; nothing emitted) or "all" (lowered
        # once for the original_split pass).
        self.split = None
        self.mixed_copy = False  # an L0C -> UB / UB -> L1 copy: tilepipe's own cv_split
        self.cube_work = False  # the probe met a Cube buffer (L1 / L0*): the kernel has Cube work
        self.registers = False  # the probe met a T.alloc_var stored under run-time control
        self.usage = (set(), set())  # names used by vector ops / by cube ops (prim_func)
        self.hand_sync = set()  # the cores whose unscoped code has the author's flags
        # Run-time loops and ifs around the statement being lowered (T.alloc_var's registers).
        self.control_depth = 0
        # Vid reduction (tilelang/_vid.py): T.Kernel's threads when it binds only cid, the
        # names of the buffers left whole, the halved loops around [(var id, trips)], the
        # element loads of UB buffers (index expressions).
        self.vid_threads = None
        self.vid_skip = set()
        self.vid_loops = []
        self.vid_ub_loads = []


class Idle(Builder):
    """What the `T.` calls see outside a build (a kernel's parameters read at definition,
    a call on the host): no IR, nothing recorded. Writing to it is a front end bug."""

    def __init__(self):
        super().__init__()
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, name, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"tilelang: Builder.{name} set outside a kernel build")
        super().__setattr__(name, value)

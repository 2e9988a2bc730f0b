"""The front end's own C/V split of unscoped kernels (the original lowering of
AUTO_CV_COMBINE / AUTO_CV_SYNC, docs/python.md): the body lowered once per core kind with a
cross-core hand-off around each GM tensor one core writes and the other reads, and the
cross-core pipeline of T.Pipelined loops (the plan: _xpipe.py). A mixin of the
interpreter (_interp.py), whose statement walk it drives."""

from . import _core
from ._core import Buffer, ctx
from ._core import _ext


class CoreSplit:
    def place_handoff(self, name, producer, ready, free):
        """Hand-off of GM tensor `name` from the producer core to the other, once per
        iteration of the innermost block holding all its accesses: on each core, a wait
        before the first statement of that block touching the tensor and a set after the
        last (producer: wait free / set ready; consumer: wait ready / set free)."""
        accesses = ctx.gm_paths[name]
        paths = [p for _, _, p in accesses]
        common = 0
        while all(len(p) > common + 1 for p in paths) and len({p[common] for p in paths}) == 1:
            common += 1
        # Each core's accesses inside one loop of its own at the common level (a Cube loop
        # and a Vector loop over the same iterations, written one after the other): the
        # hand-off is per iteration of those loops.
        level = {}
        for core in ("C", "V"):
            mine = [p for c, _, p in accesses if c == core]
            heads = {p[common] for p in mine}
            level[core] = common
            if mine and len(heads) == 1 and ctx.loop_ids.get(next(iter(heads))) and \
                    all(len(p) > common + 1 for p in mine):
                level[core] = common + 1
        if level["C"] != level["V"] or (level["C"] > common and not self.same_trips(
                [p[common] for _, _, p in accesses])):
            level = {"C": common, "V": common}
        for core in ("C", "V"):
            mine = [p for c, k, p in accesses if c == core]
            if not mine:
                continue
            common = level[core]
            # the anchors are statements of the common block: order by first execution
            order = []
            for p in mine:
                if p[common] not in order:
                    order.append(p[common])
            first, last = order[0], order[-1]
            if core == producer:
                before, after = ("wait", None, free), ("set", "FIX" if core == "C" else "MTE3", ready)
            else:
                before, after = ("wait", None, ready), ("set", "MTE2", free)
            ctx.anchor_before.setdefault((core, first), []).append(before)
            ctx.anchor_after.setdefault((core, last), []).append(after)

    @staticmethod
    def same_trips(heads):
        """Do these device loops run the same number of iterations (so a hand-off per
        iteration pairs one Cube iteration with one Vector iteration)?"""
        trips = [ctx.loop_ids.get(h) for h in set(heads)]
        if not all(isinstance(t, tuple) for t in trips):
            return False
        a = trips[0][0]
        return all(b == a if isinstance(a, int) and isinstance(b, int)
                   else _ext.const_diff(a, b) == 0 for (b,) in trips[1:])

    def split_kernel(self, s, item, kctx, loc):
        """Unscoped kernel body (the original's AUTO_CV_COMBINE): lowered once per core kind,
        each pass keeping its core's statements (and the loops / ifs around them), with a
        cross-core hand-off around each copy through a GM tensor one core writes and the
        other reads (AUTO_CV_SYNC). A first pass only classifies (docs/python.md)."""
        snapshot = dict(self.vars)
        real = ctx.builder
        ctx.builder = _ext.Builder("probe", kctx.block_num, loc)
        ctx.split = "probe"
        ctx.probe, ctx.probe_cores, ctx.node_stack, ctx.gm_use = {}, set(), [], {}
        ctx.gm_paths, ctx.hand_sync, ctx.loop_ids = {}, set(), {}
        ctx.probe_scopes = {}
        ctx.onchip, ctx.pipelined, ctx.xpipe, ctx.versioned = {}, {}, {}, {}
        ctx.mixed_copy = False
        names, hidden = set(ctx.names), dict(ctx.hidden)
        try:
            self.bind_launch(item, s)
            self.run_body(s.body)
        finally:
            ctx.builder = real
            ctx.split = None
        ctx.names, ctx.hidden = names, hidden
        self.vars = dict(snapshot)
        if ctx.mixed_copy or (ctx.lowering == "tilepipe" and not ctx.hand_sync):
            # L0C -> UB / UB -> L1 copies: tilepipe's cv_split places the workspaces itself.
            # The "tilepipe" lowering: cv_split also pairs the author's GM hand-offs into
            # cross-core flags and pipelines (docs/passes.md); code with hand-written
            # intra-core flags keeps the front end's split.
            if ctx.mixed_copy and ctx.vid_threads == 2:
                # vid reduction is cv_split's row split there (its workspaces carry the
                # vector cores' rows of the Cube tiles): the body keeps the author's shapes
                ctx.vid_threads = None
            self.bind_launch(item, s)
            self.run_body(s.body)
            return
        ctx.crossing = {}
        ctx.anchor_before, ctx.anchor_after = {}, {}
        ids = 0
        for name, use in sorted(ctx.gm_use.items()):
            for p in sorted(use["w"]):
                if use["r"] - {p}:
                    if len(use["w"]) > 1:
                        raise self.error(s, f"GM tensor '{name}' is written by both the Cube "
                                         "and the Vector code and read across them",
                                         hint="give each direction its own workspace")
                    ctx.crossing[name] = (p, ids, ids + 1)
                    self.place_handoff(name, p, ids, ids + 1)
                    ids += 2
        if ids > 16:
            raise self.error(s, f"{ids // 2} GM tensors cross between Cube and Vector; the "
                             "automatic split has 16 cross-core flag ids (8 tensors)")
        from . import _xpipe

        credits = {name: 1 for name in ctx.crossing}
        slotted = {}
        b = ctx.builder
        for lid, (node, stages) in sorted(ctx.pipelined.items(), key=lambda kv: kv[1][0].lineno):
            p, _why = _xpipe.plan(node, stages, ctx.crossing)
            if p is None:
                continue  # the loop runs serially on each core, handed over per iteration
            ctx.xpipe[lid] = p
            ctx.versioned.update(p["buffers"])
            for name, S in p["workspaces"].items():
                credits[name] = S
                ws = snapshot[name]
                shp = _core.slotted_shape(S, ws.shape)
                inner = Buffer(b.param(f"{name}_slots", shp, _core.dtype_code(ws.dtype),
                                       "workspace", loc), f"{name}_slots", shp, ws.dtype, "GM")
                slotted[name] = _core.Versioned(inner, ws.shape)
        for core in ("C", "V"):
            if core not in ctx.probe_cores:
                continue
            ctx.names = set(names)
            self.vars = dict(snapshot)
            self.vars.update(slotted)
            ctx.split = core
            ctx.scope = core
            ctx.hidden = {}
            b.begin_scope(core, loc)
            try:
                for name, (p, ready, free) in sorted(ctx.crossing.items()):
                    if p != core:  # consumer: the first fills of the tensor are free
                        for _ in range(credits[name]):
                            b.set_cross_flag("MTE2", free, 2, loc)
                self.bind_launch(item, s)
                self.run_body(s.body)
                for name, (p, ready, free) in sorted(ctx.crossing.items()):
                    if p == core:  # producer: take back the consumer's last releases
                        for _ in range(credits[name]):
                            b.wait_cross_flag(free, loc)
            finally:
                ctx.split = None
                ctx.scope = None
            b.end_scope(loc)
        self.vars = dict(snapshot)

    def xpipe_loop(self, s, name, begin, end, step, plan):
        """This core's part of a cross-core pipeline (tilelang/_xpipe.py): batches of S
        iterations; per batch, each of this core's stages is a loop over the batch."""
        b = _core.builder()
        loc = self.loc(s)
        S = plan["S"]
        if step != 1:
            raise self.error(s, "a cross-core T.Pipelined loop needs step 1")
        trip = end - begin
        batches = (trip + S - 1) // S
        bt = b.begin_for(name + "_batch", 0, batches, 1, "serial", 0, 1, loc)
        hi = self.bound(batches, 1)
        if hi is not None:
            ctx.var_ranges[bt.var_id()] = (0, max(0, hi - 1))
        ctx.trip_stack.append(batches)
        try:
            with self.loop_var(name):
                for core, ids in plan["stages"]:
                    if core != ctx.split:
                        continue
                    left = trip - bt * S
                    n = _ext.min(S, left) if not isinstance(left, int) else min(S, left)
                    # Hand-written flags are written for the serial order. Automatic code: the
                    # original compiler's stage loops are serial (CrossCorePipeline tags them
                    # stage_loop and drops num_stages, so PipelinePlanning skips them: only
                    # what crosses stages gets versions); tilepipe's lowering double-buffers
                    # each stage loop (multibuffer), as its cv_split does.
                    auto = ctx.split not in ctx.hand_sync
                    versioned = auto and ctx.lowering == "tilepipe"
                    j = b.begin_for(name + "_stage", 0, n, 1,
                                    "pipelined" if versioned else "serial",
                                    2 if versioned else 0, 1, loc)
                    ctx.var_ranges[j.var_id()] = (0, S - 1)
                    self.vars[name] = begin + bt * S + j
                    exact = isinstance(trip, int) and trip % S == 0
                    ctx.trip_stack.append(S if exact else None)
                    ctx.slot = j
                    try:
                        for st in s.body:
                            if id(st) in ids or not ctx.probe.get(id(st)):
                                self.stmt(st)
                        if not auto:
                            # The author's flags order one iteration; consecutive iterations of
                            # a stage (V1 of i and i + 1) were apart in the serial order. A
                            # barrier orders them, as the serial order's hand-offs did.
                            from .language import drain

                            drain(ctx.split)
                    finally:
                        ctx.slot = None
                        ctx.trip_stack.pop()
                    b.end_for(loc)
        finally:
            ctx.trip_stack.pop()
        b.end_for(loc)

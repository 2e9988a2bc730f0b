"""Cross-core pipelining of unscoped code (the original's CrossCorePipeline over the C/V
split, docs/python.md): a `T.Pipelined(n, num_stages=S)` loop whose body holds Cube and
Vector statements is cut into stages, each a run of consecutive top-level statements of one
core. Each core runs the loop in batches of S iterations; within a batch each of its stages
is a loop over the batch's iterations, so a core runs up to S iterations of an early stage
before the later ones, and the other core works on the iterations it has handed over. Values
crossing stages need S versions: GM workspaces handed between the cores get a slot per
iteration of the batch (S credits instead of one), and on-chip buffers a stage writes and a
later stage of the same core reads get `[S, *shape]` (the iteration's slot is ctx.slot)."""

from ._core import box_within, ctx


def plan(loop, stages_wanted, crossing):
    """The pipeline plan of one probed T.Pipelined loop, or (None, reason)."""
    body = loop.body
    cores = [ctx.probe.get(id(st), set()) for st in body]
    if any(len(c) > 1 for c in cores):
        return None, "a statement of its body mixes Cube and Vector code"
    stages, stage_of = [], {}
    for st, c in zip(body, cores):
        if not c:
            continue  # plain Python: runs in every stage
        k = next(iter(c))
        if not stages or stages[-1][0] != k:
            stages.append((k, []))
        stages[-1][1].append(id(st))
        stage_of[id(st)] = len(stages) - 1
    if {k for k, _ in stages} != {"C", "V"}:
        return None, "its body does not hold both Cube and Vector statements"

    def top(path):
        """The top-level body statement an access path goes through (None: outside)."""
        if id(loop) not in path:
            return None
        i = path.index(id(loop))
        return path[i + 1] if i + 1 < len(path) else None

    def made_before_read(inside, per_stage):
        """Every read of the buffer in the body lies in a box written before it in the same
        iteration (by the same stage if per_stage): no value is carried from one iteration
        to the next (nor, per stage, from one stage to another)."""
        written = {}
        for a, t in inside:
            if t is None:
                continue
            done = written.setdefault(stage_of.get(t) if per_stage else 0, [])
            if not all(any(box_within(r, w) for w in done) for r in a[1]):
                return False
            done.extend(w for w in a[2] if w is not None)
        return True

    buffers = {}
    for name, accs in ctx.onchip.items():
        inside = [(a, top(a[3])) for a in accs]
        used = {stage_of.get(t) for _, t in inside if t is not None}
        used.discard(None)
        if len(used) < 2 or not any(a[2] for a, t in inside if t is not None):
            continue  # one stage's, or read-only in the loop: one copy serves every stage
        if made_before_read(inside, per_stage=True):
            # Scratch of each stage (the Cube's L0A/L0B/L0C reused by the QK and PV stages
            # of an attention loop): a stage's statements run in order on one core, so one
            # copy serves every stage.
            continue
        if any(t is None for _, t in inside):
            return None, f"'{name}' crosses its stages and is also used outside the loop"
        # Each iteration must make the values it reads (a slot per iteration holds them).
        if not made_before_read(inside, per_stage=False):
            return None, (f"'{name}' crosses its stages but may carry a value from one "
                          "iteration to the next (a read in the body is not inside a part "
                          "the same iteration wrote before it)")
        buffers[name] = stages_wanted
    workspaces = {}
    for name in crossing:
        tops = [top(p) for _, _, p in ctx.gm_paths[name]]
        if all(t is None for t in tops):
            continue
        if any(t is None for t in tops):
            return None, f"workspace '{name}' is used inside and outside the loop"
        workspaces[name] = stages_wanted
    return {"S": stages_wanted, "stages": stages, "buffers": buffers,
            "workspaces": workspaces}, None

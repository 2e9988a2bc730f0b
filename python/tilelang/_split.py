"""The front end's side of the C/V split of unscoped kernels (the original's AUTO_CV_COMBINE /
AUTO_CV_SYNC, docs/python.md): a probe run says what the lowering must know first (which
cores carry the author's flags, whether an L0C -> UB / UB -> L1 copy makes it tilepipe's
cv_split's), then the body is lowered once, unscoped. The split
itself, its hand-offs and its cross-core pipelines are passes: original_split
(src/passes/original_split.h) or cv_split. A mixin of the interpreter (_interp.py)."""

from ._core import ctx
from ._core import _ext


class CoreSplit:
    def split_kernel(self, s, item, kctx, loc):
        """Unscoped kernel body: probed, then lowered once for the pass that splits it."""
        snapshot = dict(self.vars)
        real = ctx.builder
        ctx.builder = _ext.Builder("probe", kctx.block_num, loc)
        ctx.split = "probe"
        ctx.hand_sync, ctx.mixed_copy = set(), False
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
            # intra-core flags is split as the original splits it.
            if ctx.mixed_copy and ctx.vid_threads == 2:
                # vid reduction is cv_split's row split there (its workspaces carry the
                # vector cores' rows of the Cube tiles): the body keeps the author's shapes
                ctx.vid_threads = None
            self.bind_launch(item, s)
            self.run_body(s.body)
            return
        # The original_split pass: each source statement one block (_interp.stmt), each op
        # emitted as on its core.
        ctx.hidden = {}
        ctx.split = "all"
        ctx.kernel.split_pass = True
        ctx.builder.begin_block(loc)
        try:
            self.bind_launch(item, s)
            self.run_body(s.body)
        finally:
            ctx.split = None
        ctx.builder.end_block(loc)
        self.vars = dict(snapshot)

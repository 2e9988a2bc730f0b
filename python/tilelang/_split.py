"""The front end's side of the C/V split of unscoped kernels (the original's AUTO_CV_COMBINE /
AUTO_CV_SYNC, docs/python.md): a probe run says what the lowering must know first (which
cores carry the author's flags, whether an L0C -> UB / UB -> L1 copy makes it tilepipe's
cv_split's), then the body is lowered once, unscoped. The split
itself, its hand-offs and its cross-core pipelines are passes: original_split
(src/passes/original_split.h) or cv_split. A mixin of the interpreter (_interp.py)."""

from ._core import _ext


class CoreSplit:
    def split_kernel(self, s, item, kctx, loc):
        """Unscoped kernel body: probed, then lowered once for the pass that splits it."""
        snapshot = dict(self.vars)
        real = self.b.ir
        self.b.ir = _ext.Builder("probe", kctx.block_num, loc)
        self.b.split = "probe"
        self.b.hand_sync, self.b.mixed_copy = set(), False
        self.b.cube_work = self.b.registers = False
        names, hidden = set(self.b.names), dict(self.b.hidden)
        try:
            self.bind_launch(item, s)
            self.run_body(s.body)
        finally:
            self.b.ir = real
            self.b.split = None
        self.b.names, self.b.hidden = names, hidden
        self.vars = dict(snapshot)
        if self.b.registers and not self.b.cube_work:
            # T.alloc_var registers in a kernel without Cube work: all of it is the vector
            # cores' code (the original's split leaves the Cube core nothing to run), so it
            # is lowered as one T.Scope("V"), where registers are kept
            self.lower_scope("V", s.body, loc, lambda: self.bind_launch(item, s))
            return
        if self.b.mixed_copy or (self.b.lowering == "tilepipe" and not self.b.hand_sync):
            # L0C -> UB / UB -> L1 copies: tilepipe's cv_split places the workspaces itself.
            # The "tilepipe" lowering: cv_split also pairs the author's GM hand-offs into
            # cross-core flags and pipelines (docs/passes.md); code with hand-written
            # intra-core flags is split as the original splits it.
            if self.b.mixed_copy and self.b.vid_threads == 2:
                # vid reduction is cv_split's row split there (its workspaces carry the
                # vector cores' rows of the Cube tiles): the body keeps the author's shapes
                self.b.vid_threads = None
            self.bind_launch(item, s)
            self.run_body(s.body)
            return
        # The original_split pass: each source statement one block (_interp.stmt), each op
        # emitted as on its core.
        self.b.hidden = {}
        self.b.split = "all"
        self.b.kernel.split_pass = True
        self.b.ir.begin_block(loc)
        try:
            self.bind_launch(item, s)
            self.run_body(s.body)
        finally:
            self.b.split = None
        self.b.ir.end_block(loc)
        self.vars = dict(snapshot)

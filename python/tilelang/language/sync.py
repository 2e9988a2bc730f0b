"""Synchronisation in the kernel language: intra-core flags and barriers, cross-core flags,
T.sync_all (docs/python.md)."""

from .. import _core
from .._core import builder, cur, err, to_index
from ._gates import _flag_gate, _gate, _no_split

_PIPES = {"MTE1": "MTE1", "MTE2": "MTE2", "MTE3": "MTE3", "M": "M", "FIX": "FIX", "V": "V",
          "S": "S", "PIPE_MTE1": "MTE1", "PIPE_MTE2": "MTE2", "PIPE_MTE3": "MTE3",
          "PIPE_M": "M", "PIPE_FIX": "FIX", "PIPE_V": "V", "PIPE_S": "S"}


def _pipe(p):
    p = str(p).upper()
    if p not in _PIPES:
        raise err(f"unknown pipe {p!r}", hint="pipes: MTE1, MTE2, MTE3, M, FIX, V, S")
    return _PIPES[p]


def _event(event_id):
    """The event id of a flag, as written: ids past the chip's count (the original's kernels
    use up to 15) are renamed by the pipeline's event_ids pass (docs/passes.md)."""
    return to_index(event_id, "event id")


def set_flag(src, dst, eventId=0):  # noqa: N803 (the original's parameter names)
    s, d = _pipe(src), _pipe(dst)
    if not _flag_gate(s, d):
        return
    builder().set_flag(s, d, _event(eventId), _core.current_loc())


def wait_flag(src, dst, eventId=0):  # noqa: N803
    s, d = _pipe(src), _pipe(dst)
    if not _flag_gate(s, d):
        return
    builder().wait_flag(s, d, _event(eventId), _core.current_loc())


def pipe_barrier(pipe):
    if str(pipe).upper() in ("ALL", "PIPE_ALL"):
        return barrier_all()
    p = _pipe(pipe)
    # under the original's AUTO_SYNC a barrier leaves its core's code automatic (auto_sync)
    if not (_gate() if cur().original_sync else _flag_gate(p)):
        return
    builder().pipe_barrier(p, _core.current_loc())


BARRIER_EVENT_ID = _core._ext.BARRIER_EVENT_ID  # the event id of barrier_all's flags


def barrier_all():
    """PipeBarrier<PIPE_ALL>: every earlier instruction of the core finishes before any later
    one starts. Spelt as flags through a hub pipe (M on the Cube core, the scalar unit on
    the Vector core), event id 7. In unscoped code each core's part of the C/V split gets
    its own (PipeBarrier<PIPE_ALL> orders one core's pipes; what crosses the cores is the
    split's hand-offs)."""
    _on_the_core(drain, "T.barrier_all() outside T.Scope: the barrier belongs to one core",
                 'place it inside `with T.Scope("C")` or `with T.Scope("V")`')


def _each_core(emit):
    """emit(core) in a scope of each core kind."""
    bd, loc = builder(), _core.current_loc()
    for core in ("C", "V"):
        bd.begin_scope(core, loc)
        emit(core)
        bd.end_scope(loc)


def _on_the_core(emit, outside, hint):
    """emit(core) for the scope's core, or for each core's part of the C/V split of unscoped
    code; `outside` (with `hint`) is the error outside both."""
    if cur().split == "all":
        # Lowered once for the original_split pass: each core's spelling in its own scope.
        _each_core(emit)
        return
    if cur().split == "probe":
        return
    if cur().scope is None:
        raise err(outside, hint=hint)
    emit(cur().scope)


def drain(core):
    """Every earlier instruction of `core` ("C" / "V") finishes before any later one starts
    (ir::barrier_all's flags)."""
    builder().barrier_all(core, _core.current_loc())


def set_cross_flag(pipe, flag, mode=2):
    _no_split("T.set_cross_flag")
    builder().set_cross_flag(_pipe(pipe), to_index(flag, "cross flag id"), int(mode),
                             _core.current_loc())


def wait_cross_flag(flag, pipe=""):
    """`pipe`, the pipe that waits, is the original's A5 parameter: on A2/A3, which tilepipe
    models, the wait is the scalar unit's whatever the pipe (the original's AscendC codegen
    prints CrossCoreWaitFlag(flag) and drops it), so a named pipe is checked and ignored."""
    if pipe != "":
        _pipe(pipe)
    _no_split("T.wait_cross_flag")
    builder().wait_cross_flag(to_index(flag, "cross flag id"), _core.current_loc())


SYNC_ALL_FLAG_ID = 15  # the cross-core flag id T.sync_all uses (docs/python.md)
SYNC_ALL_MODE = 3  # its set's mode: every core of the launch (ir::kSyncAllMode)


def sync_all():
    """AscendC's SyncAll: every core of the launch (AIC and AIVs) finishes its earlier work,
    then waits until all have arrived. Spelt as a drain of the core's pipes (barrier_all), a
    cross-core set of every core of the launch (SYNC_ALL_MODE; SyncAll is built from FFTS
    flags) and its wait, on cross-core flag SYNC_ALL_FLAG_ID."""
    if cur().split is None and cur().scope is None and cur().ir is not None:
        # At kernel level in an expert kernel: the original replicates kernel-level code into
        # both cores' programs, so every core of the launch arrives, each in its own code.
        _each_core(_sync_all)
        return
    _on_the_core(_sync_all, "T.sync_all() outside a kernel", "call it inside T.Kernel")


def _sync_all(core):
    drain(core)
    bd = builder()
    loc = _core.current_loc()
    # the set fires after the drain's hub: M on the Cube core, the scalar unit on the Vector
    bd.set_cross_flag("M" if core == "C" else "S", SYNC_ALL_FLAG_ID, SYNC_ALL_MODE, loc)
    bd.wait_cross_flag(SYNC_ALL_FLAG_ID, loc)

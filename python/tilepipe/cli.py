"""`python3 -m tilepipe.cli VERB ...`: the tilepipe command line (the C++ one, from the
extension module) with Python files as kernel sources (tilepipe/sources.py) and `tune
--scheduler ADDRESS` simulating on a Dask cluster (tilepipe/cluster.py). The tilepipe binary
hands any command whose kernel is FILE.py[:NAME], any `tune --scheduler`, and `fidelity` and
`calibrate` (their anchors include Python files) to this module."""

import os
import sys
import warnings

from . import cluster, runner, sources
from .commands import CommandError, run_json, setup  # noqa: F401  (tilepipe.cli.CommandError)


# Verbs that run many sources and print a table: the scripts' own prints are dropped.
_QUIET_VERBS = ("fidelity", "calibrate")


def _chip(argv):
    """The --chip value of a command line, or None."""
    for i, a in enumerate(argv):
        if a == "--chip" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--chip="):
            return a[len("--chip="):]
    return None


def main(argv):
    runner.use_host_torch()
    import tilelang

    # The verb's compile reports the verifier's warnings itself (stderr and the JSON's
    # `warnings`); the front end's HazardWarning of the same findings would print each twice.
    warnings.filterwarnings("ignore", category=tilelang.HazardWarning)

    chip = _chip(argv)
    if chip and chip.endswith(".json") and os.path.isfile(chip):
        # The front end compiles each kernel it builds for its own chip too: the command's,
        # as an absolute path (scripts run in their own directory).
        tilelang.set_chip(os.path.abspath(chip))
    sources.quiet[0] = bool(argv) and argv[0] in _QUIET_VERBS
    _tilepipe = setup()
    try:
        return _tilepipe.cli_main(["tilepipe"] + list(argv))
    finally:
        cluster.close()


def hand_over(code):
    """Tells the tilepipe binary (tools/main.cc, supervise_python) that the command finished
    with `code`: it exits with it. Without this word from the command's own end, the binary
    takes the process as ended by the user's code (os._exit at import) and exits 2, never 0."""
    fd = os.environ.pop("TILEPIPE_RESULT_FD", None)
    if fd is not None:
        try:
            os.write(int(fd), f"{code}\n".encode())
            os.close(int(fd))
        except (OSError, ValueError):
            pass
    return code


if __name__ == "__main__":
    sys.exit(hand_over(main(sys.argv[1:])))

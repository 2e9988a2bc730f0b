"""`python3 -m tilepipe.cli VERB ...`: the tilepipe command line (the C++ one, from the
extension module) with Python files as kernel sources (tilepipe/sources.py). The tilepipe
binary hands any command whose kernel is FILE.py[:NAME] to this module, and `fidelity` and
`calibrate` (their anchors include Python files)."""

import os
import sys

from . import runner, sources

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
    import _tilepipe
    import tilelang

    chip = _chip(argv)
    if chip and chip.endswith(".json") and os.path.isfile(chip):
        # The front end compiles each kernel it builds for its own chip too: the command's,
        # as an absolute path (scripts run in their own directory).
        tilelang.set_chip(os.path.abspath(chip))
    sources.quiet[0] = bool(argv) and argv[0] in _QUIET_VERBS
    _tilepipe.register_resolver(sources.resolve)
    return _tilepipe.cli_main(["tilepipe"] + list(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

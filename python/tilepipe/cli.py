"""`python3 -m tilepipe.cli VERB ...`: the tilepipe command line (the C++ one, from the
extension module) with Python files as kernel sources (tilepipe/sources.py) and `tune
--scheduler ADDRESS` simulating on a Dask cluster (tilepipe/cluster.py). The tilepipe binary
hands any command whose kernel is FILE.py[:NAME], and any `tune --scheduler`, to this
module."""

import json
import sys

from . import cluster, runner, sources


_registered = []


def setup():
    """Registers the Python-file resolver and the Dask executor with the extension (once)."""
    import _tilepipe

    if not _registered:
        _tilepipe.register_resolver(sources.resolve)
        cluster.register()
        _registered.append(True)
    return _tilepipe


def main(argv):
    runner.use_host_torch()
    _tilepipe = setup()
    try:
        return _tilepipe.cli_main(["tilepipe"] + list(argv))
    finally:
        cluster.close()


class CommandError(Exception):
    """A command that failed: `message` (the CLI's one-line error) and `exit_code` (2: bad
    input, 1: internal error, 3: check found a problem)."""

    def __init__(self, message, exit_code):
        super().__init__(message)
        self.message, self.exit_code = message, exit_code


def run_json(argv):
    """Runs `tilepipe ARGV... --json` in this process and returns its JSON object; raises
    CommandError when the command fails."""
    _tilepipe = setup()
    rc, out = _tilepipe.cli_capture(["tilepipe"] + list(argv) + ["--json"])
    result = json.loads(out)
    if rc != 0:
        raise CommandError(result.get("error", out), rc)
    return result


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

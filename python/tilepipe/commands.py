"""Running tilepipe's command line inside this process (the extension's cli_main): the
Python-file resolver and the Dask executor registered once, and a command's JSON result or
its error. tilepipe.cli (`python3 -m tilepipe.cli VERB ...`) and `tilepipe.tune()` build on
it; the package imports this module, not cli, so `-m tilepipe.cli` runs a module not yet
imported."""

import json

from . import cluster, sources


_registered = []


def setup():
    """Registers the Python-file resolver and the Dask executor with the extension (once)."""
    import _tilepipe

    if not _registered:
        _tilepipe.register_resolver(sources.resolve)
        cluster.register()
        _registered.append(True)
    return _tilepipe


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

"""`python3 -m tilepipe.cli VERB ...`: the tilepipe command line (the C++ one, from the
extension module) with Python files as kernel sources (tilepipe/sources.py). The tilepipe
binary hands any command whose kernel is FILE.py[:NAME] to this module."""

import sys

from . import runner, sources


def main(argv):
    runner.use_host_torch()
    import _tilepipe

    _tilepipe.register_resolver(sources.resolve)
    return _tilepipe.cli_main(["tilepipe"] + list(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

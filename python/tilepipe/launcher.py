"""The `tilepipe` command of a pip install: replaces this process with the packed binary
(site-packages/tilepipe_native/bin/tilepipe), which finds its libraries, configs and this
package by their relative paths."""

import os
import sys


def binary():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "tilepipe_native", "bin", "tilepipe")


def main():
    exe = binary()
    if not os.access(exe, os.X_OK):
        print(f"tilepipe: the packed binary {exe} is missing; reinstall with "
              "`pip install --no-build-isolation .` from a tilepipe checkout", file=sys.stderr)
        return 1
    os.execv(exe, [exe, *sys.argv[1:]])

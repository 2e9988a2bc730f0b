#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: the release build, then
# the same tests under AddressSanitizer + UndefinedBehaviorSanitizer, then a short libFuzzer
# run of the parsers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs="${TILEPIPE_JOBS:-$(nproc)}"
scripts/build.sh release
ctest --test-dir build --output-on-failure -j "$jobs"
# The Python front end (python/): its pytest suite on Debian's python3 and the release module.
TILEPIPE_BUILD_DIR="$PWD/build" /usr/bin/python3 -m pytest -q python/tests
# `pip install --no-build-isolation .` into a venv runs a kernel (its build reuses build/'s
# objects through ccache).
tests/install/pip_check.sh
scripts/build.sh asan
# Under the sanitizers, the timing comparisons that only repeat the release suite's engine
# paths at more shapes are left out (the fast-forward jump and replay paths keep their own
# tests: FastForwardVsExact.*, FastForward.*).
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$jobs" \
  -E 'Kernels/FastForwardVsExact|GemmLadder\.EachStep'

# libFuzzer smoke of the chip-config and CLI value parsers (clang build in build-fuzz/).
scripts/fuzz.sh 2000
scripts/format.sh --check

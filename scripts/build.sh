#!/usr/bin/env bash
# Configures and builds one configuration. Usage: scripts/build.sh [release|asan]
set -euo pipefail
cd "$(dirname "$0")/.."
cfg="${1:-release}"
jobs="${TILEPIPE_JOBS:-$(nproc)}"
case "$cfg" in
  release) dir=build; flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  # asan: -O1 with line tables, as the sanitizer guide recommends; it compiles in half the
  # time of -O2 -g, which the CI budget needs.
  asan) dir=build-asan; flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DTILEPIPE_SANITIZE=ON -DTILEPIPE_BENCH=OFF -DTILEPIPE_PYTHON=OFF) ;;
  *) echo "usage: scripts/build.sh [release|asan]" >&2; exit 2 ;;
esac
# ccache (scripts/setup.sh installs it) serves the pip install's build of the same sources;
# paths under the checkout are hashed relative to it.
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  flags+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
ninja -C "$dir" -j "$jobs"

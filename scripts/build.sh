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
cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
ninja -C "$dir" -j "$jobs"

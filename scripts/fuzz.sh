#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (build-fuzz/, ASan + UBSan) and runs each
# for a fixed number of inputs. Usage: scripts/fuzz.sh [RUNS]   (default 20000 per target)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20000}"
jobs="${TILEPIPE_JOBS:-$(nproc)}"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DTILEPIPE_FUZZ=ON -DTILEPIPE_BENCH=OFF -DTILEPIPE_PYTHON=OFF >/dev/null
ninja -C build-fuzz -j "$jobs" chip_config_fuzz params_fuzz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/chip" "$work/params"
cp configs/*.json "$work/chip/"
cp fuzz/corpus/params/* "$work/params/"
build-fuzz/chip_config_fuzz -runs="$runs" -max_len=8192 -timeout=10 "$work/chip"
build-fuzz/params_fuzz -runs="$runs" -max_len=512 -timeout=10 "$work/params"
echo "fuzz: $runs inputs per target, no crash"

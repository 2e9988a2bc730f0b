#!/usr/bin/env bash
# Installs what is missing, builds, and runs the demo: kernels on the simulated A3 die.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
mkdir -p out
echo "== kernels available"
./build/tilepipe list
echo "== GEMM 512x512x512 (functional: real values, checked against the C++ reference)"
./build/tilepipe run gemm --param M=512 --param N=512 --param K=512 --json > out/gemm.json
echo "== softmax 256x1024"
./build/tilepipe run softmax --param R=256 --param C=1024 --json > out/softmax.json
echo "== elementwise add with 1, 2, 3 UB buffers (timing mode)"
for b in 1 2 3; do
  ./build/tilepipe run elementwise --mode timing --param N=4194304 --param buffers=$b
done
echo "demo: JSON reports in out/"

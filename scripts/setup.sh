#!/usr/bin/env bash
# Installs the Debian 12 packages tilepipe needs. Idempotent: a no-op when all are present.
set -euo pipefail
PKGS=(cmake ninja-build g++ git libfmt-dev nlohmann-json3-dev libcli11-dev
      libgtest-dev libgmock-dev libbenchmark-dev clang-format zlib1g-dev
      libopenblas-dev         # the functional simulator's Cube matmul (src/sim/exec.cc)
      libnlopt-cxx-dev        # tilepipe calibrate's optimiser (src/driver/calibrate.cc)
      clang libclang-rt-dev   # clang: the libFuzzer smoke (scripts/fuzz.sh)
      chromium                # the HTML report checked in a headless browser (tests/)
      python3-dev pybind11-dev python3-numpy python3-pytest   # the Python front end (python/)
      protobuf-compiler python3-protobuf   # decoding the Perfetto traces in tests (python/tests)
      python3-hypothesis      # the property-based fuzzers (python/tests/test_fuzz_*.py)
      python3-distributed     # tune --scheduler: Dask executor and its tests (python/tilepipe/cluster.py)
      python3-torch           # the host side of `tilepipe run-py` (python/tilepipe/host.py)
      python3-scipy           # the reference of the corpus's hadamard_transform example
      python3-venv python3-pip python3-setuptools python3-wheel   # the pip install test
      ccache)                 # one compile per source shared by build/ and the pip build
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

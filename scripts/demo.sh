#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main demo: the Flash Attention
# optimisation ladder on the simulated A3 die (B=1, H=12, KV_H=1, S=32K, D=128), then one
# profiled run of the expert kernel with a Chrome trace and reports. Outputs go to out/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
mkdir -p out
echo "== FA ladder, S=32768 (timing mode; published AscendC time is the reference)"
./build/tilepipe ladder fa --param S=32768 --json > out/fa_ladder.json
echo "== FA expert, S=1024, H=2: functional check (values vs the C++ reference, race detection)"
./build/tilepipe check fa --variant expert --param S=1024 --param H=2
echo "== FA expert, S=4096: profile with trace (open out/fa_trace.json.gz in ui.perfetto.dev)"
./build/tilepipe run fa --variant expert --mode timing --param S=4096 \
  --trace out/fa_trace.json.gz --csv-dir out --json > out/fa_expert.json
echo "== FA auto (dataflow only, compiled by the passes) vs expert, S=32768"
./build/tilepipe run fa --variant auto --mode timing --param S=32768 --json > out/fa_auto.json
./build/tilepipe run fa --variant auto --mode timing --param S=32768
./build/tilepipe run fa --variant expert --mode timing --param S=32768
echo "== FA ladder, S=8192 (a smaller shape: each step's advice is re-simulated), with verified"
echo "   advice per step: out/fa_report.html and out/fa_ladder_advice.json, both headed S=8192"
./build/tilepipe ladder fa --param S=8192 --advise --html out/fa_report.html --json > out/fa_ladder_advice.json
echo "demo: out/fa_ladder.json (S=32768), out/fa_report.html and"
echo "      out/fa_ladder_advice.json (S=8192), out/fa_auto.json, out/fa_expert.json, out/fa_trace.json.gz,"
echo "      out/pipe_utilization.csv, out/code_exe.csv"

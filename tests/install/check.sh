#!/usr/bin/env bash
# The installed tree, tried from outside (ctest InstallTree.OutsideProject):
#   tests/install/check.sh BUILD_DIR [CMAKE]
# installs BUILD_DIR into a temporary prefix, builds tests/install/ (an outside project:
# find_package(tilepipe), its own kernel run, profiled and tuned) against it and runs it, then
# runs the installed tilepipe binary and Python package from another directory with no
# TILEPIPE_CONFIG_DIR: everything must come from the prefix, nothing from the source tree.
set -euo pipefail
build=$(cd "$1" && pwd)
cmake_exe="${2:-cmake}"
src=$(cd "$(dirname "$0")" && pwd)
unset TILEPIPE_CONFIG_DIR TILEPIPE_BUILD_DIR PYTHONPATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
configs="$prefix/share/tilepipe/configs"
fail() {
  [ -s run.err ] && tail -n 5 run.err >&2
  echo "check.sh: $*" >&2
  exit 1
}

"$cmake_exe" --install "$build" --prefix "$prefix" >/dev/null
for f in bin/tilepipe lib/cmake/tilepipe/tilepipeConfig.cmake include/tilepipe/lang.h \
         include/tilepipe/driver.h include/tilepipe/cli.h include/tilepipe/kernels/registry.h share/tilepipe/configs/a3.json \
         share/tilepipe/configs/advice_rules.json share/tilepipe/configs/fidelity.json \
         share/tilepipe/configs/fit_ranges.json; do
  [ -e "$prefix/$f" ] || fail "missing $f in the installed tree"
done
# The installed binary and libraries load the installed libraries, not the build tree's.
if ldd "$prefix/bin/tilepipe" | grep -F "$build/" >&2; then fail "bin/tilepipe loads from $build"; fi

# The outside project: configure, build (one file), run.
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
"$cmake_exe" -S "$src" -B "$tmp/vadd" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
"$cmake_exe" --build "$tmp/vadd" >/dev/null
mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
out=$("$tmp/vadd/vadd")
echo "$out"
grep -qxF "configs $configs" <<<"$out" || fail "vadd did not find the installed configs"
grep -q "^functional correct" <<<"$out" || fail "vadd: functional run not correct"
grep -q "^cycles " <<<"$out" || fail "vadd: no cycles"
grep -q "^tune best " <<<"$out" || fail "vadd: no tune result"
# The same kernel through the installed command line (registered, not in the built-in list).
"$tmp/vadd/vadd" list >list.out && grep -q "^vadd " list.out || fail "vadd list: no vadd"
"$tmp/vadd/vadd" check vadd --param N=65536 >check.out 2>run.err || fail "vadd check vadd"
grep -q "correct" check.out || fail "vadd check vadd: $(cat check.out)"
"$tmp/vadd/vadd" tune vadd --param N=65536 --space tile=1024,2048 --no-cache --json >tune.out \
  2>run.err || fail "vadd tune vadd"
python3 -c "import json,sys; j=json.load(open('tune.out')); assert j['best_time_us'] > 0, j" ||
  fail "vadd tune vadd: no best time"

# The installed binary from another directory: --chip by path (relative and absolute), by
# name, and `list` showing the installed configs directory.
cp "$configs/a3.json" my.json
"$prefix/bin/tilepipe" run gemm --chip ./my.json --json >my.out 2>run.err || fail "run gemm --chip ./my.json"
"$prefix/bin/tilepipe" run gemm --chip "$configs/a3.json" --json >abs.out 2>run.err ||
  fail "run gemm --chip $configs/a3.json"
"$prefix/bin/tilepipe" run gemm --chip a3 --json >name.out 2>run.err || fail "run gemm --chip a3"
"$prefix/bin/tilepipe" list | tail -n 1
"$prefix/bin/tilepipe" list --json >list.json
python3 - "$configs" <<'PY' || fail "run/list results"
import json, sys
cycles = {f: json.load(open(f))["cycles"] for f in ("my.out", "abs.out", "name.out")}
assert len(set(cycles.values())) == 1, cycles
j = json.load(open("list.json"))
assert j["configs"] == sys.argv[1], (j["configs"], sys.argv[1])
assert j["chips"] == ["a2", "a3"], j["chips"]
print("gemm cycles", cycles["my.out"])
PY

# The installed anchors: the copies run; without a corpus next to the install, the corpus's
# Python files are skipped with a note (not failed).
TILELANG_CORPUS="$tmp/no-corpus" "$prefix/bin/tilepipe" fidelity --only copy.blocks \
  --only sfa-file.pa --json >fid.out 2>run.err || fail "fidelity from the installed tree"
python3 - <<'PY' || fail "fidelity results"
import json
j = json.load(open("fid.out"))
status = {a["name"]: a["status"] for a in j["anchors"]}
assert status == {"copy.blocks": "ok", "sfa-file.pa": "skipped"}, status
print("fidelity copy.blocks", round(j["anchors"][0]["error_pct"], 1), "%")
PY

# The Python package, with the documented PYTHONPATH (a prefix of /usr or /usr/local needs
# none): a kernel compiled, run and checked from here, and the same script through the
# installed binary's run-py (which needs no PYTHONPATH).
pydir=$(echo "$prefix"/lib/python3.*/dist-packages)
if [ -d "$pydir" ]; then
  cp "$src/kernel.py" kernel.py
  PYTHONPATH="$pydir" /usr/bin/python3 kernel.py "$prefix" >py.out 2>run.err ||
    fail "a kernel through the installed Python package"
  grep -q "^python kernel ok" py.out || fail "the installed Python package: $(cat py.out)"
  "$prefix/bin/tilepipe" run-py kernel.py "$prefix" >runpy.out 2>run.err ||
    fail "the installed tilepipe run-py"
  grep -q "^python kernel ok" runpy.out || fail "installed run-py: $(cat runpy.out)"
  cat py.out
fi
echo "install check: ok"

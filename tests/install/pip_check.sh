#!/usr/bin/env bash
# `pip install --no-build-isolation .` tried as a user does (scripts/test.sh runs it):
#   tests/install/pip_check.sh
# installs the checkout into a new venv (--system-site-packages: Debian's numpy and torch;
# offline, Debian's pip, setuptools and wheel), then, from another directory, runs a kernel
# through the venv's python and through the venv's `tilepipe run-py`, and `tilepipe run`
# and `list` of the packed binary: the package, module, binary and configs must all come
# from the venv.
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$src/../.." && pwd)
unset TILEPIPE_CONFIG_DIR TILEPIPE_BUILD_DIR PYTHONPATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  [ -s "$tmp/run.err" ] && tail -n 5 "$tmp/run.err" >&2
  echo "pip_check.sh: $*" >&2
  exit 1
}
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/pip" install --no-build-isolation --no-index --quiet "$root" >"$tmp/pip.log" 2>&1 ||
  { tail -n 20 "$tmp/pip.log" >&2; fail "pip install failed"; }
site=$("$tmp/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")
mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
cp "$src/kernel.py" kernel.py
"$tmp/venv/bin/python" kernel.py "$site" >py.out 2>"$tmp/run.err" || fail "a kernel through the venv's python"
grep -q "^python kernel ok" py.out || fail "venv python: $(cat py.out)"
[ -x "$tmp/venv/bin/tilepipe" ] || fail "no tilepipe command in the venv"
"$tmp/venv/bin/tilepipe" run-py kernel.py "$site" >runpy.out 2>"$tmp/run.err" || fail "venv tilepipe run-py"
grep -q "^python kernel ok" runpy.out || fail "venv run-py: $(cat runpy.out)"
"$tmp/venv/bin/tilepipe" run gemm --json >gemm.json 2>"$tmp/run.err" || fail "venv tilepipe run gemm"
"$tmp/venv/bin/python" - "$site" <<'PY' || fail "venv tilepipe results"
import json, subprocess, sys
assert json.load(open("gemm.json"))["correct"] is True
last = subprocess.run([sys.prefix + "/bin/tilepipe", "list"], capture_output=True, text=True,
                      check=True).stdout.strip().splitlines()[-1]
assert sys.argv[1] in last, last  # chips found in the venv's configs
PY
cat py.out
echo "pip check: ok"

#!/usr/bin/env bash
# clang-format every C++ file; --check fails (exit 1) instead of rewriting.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cc' 2>/dev/null || find include src kernels tools tests bench -name '*.h' -o -name '*.cc')
[ ${#files[@]} -gt 0 ] || exit 0
if [ "${1:-}" = "--check" ]; then
  clang-format --dry-run --Werror "${files[@]}"
  echo "format: clean"
else
  clang-format -i "${files[@]}"
fi

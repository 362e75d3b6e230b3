#!/usr/bin/env bash
# Checks that every tracked C++/CUDA source (*.cc, *.h, *.cu) is formatted as .clang-format says;
# exits non-zero, listing the files, when any is not. Changes nothing.
#   scripts/format-check.sh            check
#   CLANG_FORMAT=clang-format-15 scripts/format-check.sh   another binary (default: clang-format-14)
# To fix: clang-format-14 -i <files>.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
clang_format=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$clang_format" >/dev/null; then
  echo "format-check: $clang_format not found (scripts/install-deps.sh installs clang-format-14)" >&2
  exit 2
fi
mapfile -d '' files < <(git ls-files -z -- '*.cc' '*.h' '*.cu')
# One clang-format process per 64 files, nproc at a time (one process per file took 1-3 minutes of
# CI on 2 cores, mostly process start-up); --dry-run --Werror names every drifted file in its
# "FILE:LINE:COL: error: code should be clang-formatted" lines and goes on past them.
status=0
report=$(printf '%s\0' "${files[@]}" |
  xargs -0 -n 64 -P "$(nproc)" "$clang_format" --style=file --dry-run --Werror 2>&1 >/dev/null) ||
  status=$?
drift=()
if [ "$status" -ne 0 ]; then
  # The parallel processes' diagnostics can interleave mid-line in the shared pipe: the list of
  # drifted files comes from a second pass, one file at a time (only when something failed).
  for file in "${files[@]}"; do
    if ! "$clang_format" --style=file --dry-run --Werror "$file" >/dev/null 2>&1; then drift+=("$file"); fi
  done
fi
if [ "${#drift[@]}" -gt 0 ]; then
  printf 'format-check: %d of %d files differ from .clang-format:\n' "${#drift[@]}" "${#files[@]}" >&2
  printf '  %s\n' "${drift[@]}" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  # clang-format failed in another way (a file it could not read or parse): say what it printed.
  printf 'format-check: %s failed (exit %d):\n%s\n' "$clang_format" "$status" "$report" >&2
  exit 2
fi
echo "format-check: ${#files[@]} files formatted"

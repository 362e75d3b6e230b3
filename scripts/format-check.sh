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
drift=()
for file in "${files[@]}"; do
  if ! "$clang_format" --style=file --dry-run --Werror "$file" >/dev/null 2>&1; then drift+=("$file"); fi
done
if [ "${#drift[@]}" -gt 0 ]; then
  printf 'format-check: %d of %d files differ from .clang-format:\n' "${#drift[@]}" "${#files[@]}" >&2
  printf '  %s\n' "${drift[@]}" >&2
  exit 1
fi
echo "format-check: ${#files[@]} files formatted"

#!/usr/bin/env bash
# Makes a record in results/ from a committed tree, with the provenance exactly as the run wrote it.
#   scripts/record.sh results/NAME COMMAND [ARGS...]
# COMMAND runs from the checkout root with RECORD set to the record's folder, so it writes there
# directly (e.g. `--out "$RECORD"` inside `bash -c '...'`, or `@RECORD@` in the arguments, which is
# replaced by the folder): the command line in every output's provenance is the one that ran, and
# nothing is moved or rewritten afterwards.
# Refuses: a tree with uncommitted changes to tracked files, a build whose commit is not HEAD (or
# is -dirty), an existing folder. Writes RECORD.md (commit, machine, ISA, load, times, the
# command, exit status) and stdout.txt / stderr.txt beside the command's outputs; a failed command
# leaves its folder renamed NAME.failed-<time> so a partial record is never taken for a result.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [ $# -lt 2 ]; then
  echo "usage: scripts/record.sh results/NAME COMMAND [ARGS...]" >&2
  exit 2
fi
record=$1
shift
case "$record" in
  results/?*) ;;
  *) echo "record.sh: the record folder must be under results/ (got '$record')" >&2; exit 1 ;;
esac
if [ -e "$record" ]; then
  echo "record.sh: $record exists; a better run sits beside the old one with the spread of all runs, never over it" >&2
  exit 1
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "record.sh: the tree has uncommitted changes to tracked files; commit first (records come from a committed tree):" >&2
  git status --short --untracked-files=no >&2
  exit 1
fi
head=$(git rev-parse --short=12 HEAD)
build_dir=${BUILD_DIR:-$root/build}
cmake --build "$build_dir" -j "$(nproc)" >/dev/null
built=$("$build_dir/cli/moelab" --version)
case "$built" in
  *"git $head,"*) ;;
  *) echo "record.sh: $build_dir/cli/moelab says '$built', not commit $head" >&2; exit 1 ;;
esac

mkdir -p "$record"
export RECORD=$record
args=()
for a in "$@"; do args+=("${a//@RECORD@/$record}"); done
isa=scalar
grep -q ' avx2 ' /proc/cpuinfo && isa=avx2
grep -q ' avx512f ' /proc/cpuinfo && isa=avx512f
grep -q ' avx512_bf16 ' /proc/cpuinfo && isa=avx512bf16
start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
set +e
"${args[@]}" >"$record/stdout.txt" 2>"$record/stderr.txt"
status=$?
set -e
end=$(date -u +%Y-%m-%dT%H:%M:%SZ)
{
  echo "# Record: $(basename "$record")"
  echo
  echo "Made by \`scripts/record.sh\` from commit \`$head\` (clean tree; \`moelab --version\`: $built)."
  echo
  echo "| | |"
  echo "|---|---|"
  echo "| command | \`$(printf '%q ' "${args[@]}")\` |"
  echo "| started / ended (UTC) | $start / $end |"
  echo "| exit status | $status |"
  echo "| CPU | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs |"
  echo "| ISA (best path) | $isa |"
  echo "| load average before / after | $load_before / $(cut -d' ' -f1-3 /proc/loadavg) |"
} >"$record/RECORD.md"
if [ $status -ne 0 ]; then
  failed="$record.failed-$(date -u +%Y%m%dT%H%M%S)"
  mv "$record" "$failed"
  echo "record.sh: the command exited $status; its output is in $failed (not a record)" >&2
  exit $status
fi
echo "record.sh: $record written (commit $head)"

#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job with its
# defaults (the speculative-decoding plan of Qwen2-57B-A14B with a Qwen2-0.5B draft on two
# A100-80GB SXM). Extra arguments go to `moelab plan sd`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" >/dev/null
"$root/build/cli/moelab" plan sd "$@"

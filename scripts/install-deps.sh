#!/usr/bin/env bash
# Installs the Debian 12 packages moelab builds with, only those missing. Needs root when
# something is missing (apt-get); prints what it installs and why.
set -euo pipefail

# package            why
packages=(
  build-essential                # g++ 12, make
  cmake                          # build system (>= 3.25)
  git                            # provenance: the commit in every result file
  libboost-program-options-dev   # the moelab CLI's option parsing
  nlohmann-json3-dev             # presets, profiles, results: all JSON
  libgtest-dev                   # unit tests (GoogleTest)
  libbenchmark-dev               # kernel and executor benchmarks (Google Benchmark)
  libceres-dev                   # fit/: bounded nonlinear least squares (Ceres Solver)
  clang-format-14                # scripts/format-check.sh: the .clang-format style
  clang-14                       # scripts/fuzz.sh: the fuzz targets (fuzz/) build with clang
  libclang-rt-14-dev             # scripts/fuzz.sh: libFuzzer and the sanitizer runtimes
  gnuplot-nox                    # moelab validate --out: renders its plots (PNG, SVG)
  liburing-dev                   # the offload runtime's io_uring expert reader
  pkg-config                     # finds liburing
  ccache                         # CMakeLists.txt: rebuilds (CI's three builds) reuse objects
  libopenmpi-dev                 # parallel/: expert parallelism across MPI ranks (run --expert-parallel)
  openmpi-bin                    # mpirun, for --expert-parallel and its tests
  libcpp-httplib-dev             # moelab serve's HTTP server (server/), moelab loadgen's client (loadgen/), their tests
)

# `install-deps.sh --bench` adds what the scipy comparison (bench/fit_vs_scipy.py) needs.
if [ "${1:-}" = "--bench" ]; then
  packages+=("python3-scipy" "python3-numpy")
fi

missing=()
for entry in "${packages[@]}"; do
  name=${entry%% *}
  if ! dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$name")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: these packages are missing and installing them needs root: ${missing[*]}" >&2
  echo "install-deps: run this script as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

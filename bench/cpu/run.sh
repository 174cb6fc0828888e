#!/usr/bin/env bash
# Runs cpu_ceilings_bench with OPENBLAS_CORETYPE set (Debian's OpenBLAS
# 0.3.21 may misdetect the CPU; see design.md §8). Usage:
#   bench/cpu/run.sh [BUILD_DIR] [-- bench flags]
#   OPENBLAS_CORETYPE=Zen bench/cpu/run.sh build-cpu
# The default core type is SkylakeX, as design.md §8 says. On the AVX-512
# development machines 0.3.21 detects Cooperlake by itself, and Zen, Haswell
# and Cooperlake were all correct and as fast or faster than SkylakeX on one
# thread (bench/README.md, machine ceilings); the bench prints the core type it ran with.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build-cpu}"
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-SkylakeX}"
exec "$build/bench/cpu/cpu_ceilings_bench" "$@"

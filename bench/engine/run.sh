#!/usr/bin/env bash
# The CPU engine against the machine's ceilings, measured in the same run
# (design.md §8): the f32 GEMM peak and the DRAM read bandwidth from
# cpu_ceilings_bench, then engine_bench on the mid-size synthetic model
# (made once with tributary-synth) and on the embedded default model.
#   bench/engine/run.sh [BUILD_DIR] [THREADS]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
threads="${2:-2}"
models="$build/bench-models"
mkdir -p "$models"
if [ ! -f "$models/mid-size/model.safetensors" ]; then
  "$build/engine/cli/tributary-synth" --preset mid-size --out "$models/mid-size"
fi
ceilings=$("$root/bench/cpu/run.sh" "$build" -- --sections ab --threads "$threads")
echo "$ceilings" | grep -E "ceiling|OpenBLAS:" >&2
gemm=$(echo "$ceilings" | sed -n 's/.*GEMM ceiling (best of the above): \([0-9.]*\).*/\1/p')
dram=$(echo "$ceilings" | sed -n 's/.*DRAM ceiling (best of the above): \([0-9.]*\).*/\1/p')
for model in "$models/mid-size" "$root/models/tiny-shakespeare"; do
  "$build/bench/engine/engine_bench" --model "$model" --threads "$threads" --json
done | python3 "$root/bench/engine/report.py" "$gemm" "$dram"

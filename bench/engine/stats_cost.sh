#!/usr/bin/env bash
# The cost of the residual statistics as an exact instruction count:
# callgrind counts the instructions of HybridDecoder::Forward over one
# prefill and some decode steps, with the statistics on and then off.
# Deterministic, so unaffected by other jobs on the machine (wall-clock
# ratios from engine_bench are within its noise).
#   bench/engine/stats_cost.sh [BUILD_DIR] [MODEL_DIR] [PREFILL] [DECODE]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$root/build}"
model="${2:-$build/bench-models/mid-size}"
prefill="${3:-64}"
decode="${4:-4}"
if [ ! -f "$model/config.json" ]; then
  "$build/engine/cli/tributary-synth" --preset mid-size --out "$model"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() {
  valgrind --tool=callgrind --callgrind-out-file="$work/$1.out" \
    --toggle-collect='tributary::HybridDecoder::Forward*' \
    "$build/bench/engine/engine_bench" --model "$model" --threads 1 \
    --prefill-tokens "$prefill" --decode-tokens "$decode" \
    --only-statistics "$1" >/dev/null 2>&1
  callgrind_annotate "$work/$1.out" 2>/dev/null | sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,
}
on=$(count on)
off=$(count off)
python3 -c "
on, off = $on, $off
print(f'instructions in Forward, {\"$prefill\"}-token prefill + {\"$decode\"} decode steps:')
print(f'  statistics on  {on:>16,}')
print(f'  statistics off {off:>16,}')
print(f'  cost           {100 * (on - off) / off:+.3f} %')
"

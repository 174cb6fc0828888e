#!/usr/bin/env bash
# The batching gain, measured the way a noisy shared machine allows:
# generated tokens/s of `tributary-bench` at concurrency 1, 8 and 32 on the
# default model (64 requests, 32 prompt tokens, 64 generated, greedy), the
# concurrencies interleaved round by round, and the gain (32 against 1)
# computed per round, so that a drift of the machine's speed between rounds
# moves both sides of a ratio alike. Prints every run, then per
# concurrency the median tok/s, the mean batch, the engine loop's share of
# a step (time outside the forward pass), and the median gain.
# C = 1 is measured twice a round: after its default warm-up (one request:
# "1"), and after a warm-up of 32 requests at once ("1w"). On a 2-core
# AVX-512 VM a batch-1 step ran ~20 % faster after both cores had read the
# shared cache hard at once (a state of the machine that falls after ~100 ms
# idle; bench/journal/batch1-two-speeds.md); since batch-1 products run on both
# cores the two are 7–17 % apart, and the gain is reported against both.
# Extra flags that set --warmup themselves leave "1w" out.
#   bench/engine/batching_gain.sh [BUILD_DIR [ROUNDS]] [-- tributary-bench flags]
# (defaults: build, 5 rounds). The extra flags come after the fixed ones, so
# they can change the load (e.g. --cpu-matmul bf16), but one that repeats a
# fixed flag (--concurrency, --json) would break the report.
# Each round starts with the machine's ceilings, measured then
# (cpu_ceilings_bench --sections=r: the FMA rate of both cores, and their
# read rate of a buffer the size of the model's weights), followed by a
# second of idle so that the probe's load does not carry into the runs. The
# new binary's runs report every step's FLOPs and bytes (--step-work), and
# the report takes each step's floor against the best ceilings any round
# measured (a slow moment lowers a probe; the best is what the machine did
# in this run): each load's roofline (the tokens/s its steps allow), the
# fraction of it reached, and the ceiling gain, the gain the two rooflines
# allow (design.md §8). NO_ROOFLINE=1 leaves the probe out. With
# `-- --cpu-matmul bf16` the FLOP ceiling is the probe's VDPBF16PS rate.
# MODEL=DIR runs another model directory instead of the default one (the
# read probe then reads that model's weight bytes: for a model larger than
# the caches, memory's rate), e.g. MODEL=build/bench-models/mid-size
# (`tributary-synth --preset mid-size --out build/bench-models/mid-size`):
# the gain's goal (6x) is on the default model; this shows the engine's
# gain where batch-1 decode streams its weights from memory.
# With OLD_BENCH=path/to/another/tributary-bench, every run is paired with
# the same run of that binary (which goes first alternates by round), and
# the report adds the median new / old ratio per concurrency: an A/B of two
# builds side by side.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$root/build"
rounds=5
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build="$1"; shift; fi
if [ $# -gt 0 ] && [ "$1" != "--" ]; then rounds="$1"; shift; fi
if [ $# -gt 0 ]; then
  [ "$1" = "--" ] || { echo "usage: $0 [BUILD_DIR [ROUNDS]] [-- tributary-bench flags]" >&2; exit 2; }
  shift
fi
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
bench="$build/bench/tributary-bench"
[ -x "$bench" ] || { echo "no $bench: build first" >&2; exit 1; }
old="${OLD_BENCH:-}"
[ -z "$old" ] || [ -x "$old" ] || { echo "OLD_BENCH=$old is not executable" >&2; exit 1; }
model="${MODEL:-$root/models/tiny-shakespeare}"
[ -f "$model/config.json" ] || { echo "MODEL=$model holds no config.json" >&2; exit 1; }

ceilings_bench="$build/bench/cpu/cpu_ceilings_bench"
roofline=1
[ "${NO_ROOFLINE:-0}" = 0 ] || roofline=0
if [ "$roofline" = 1 ] && [ ! -x "$ceilings_bench" ]; then
  echo "no $ceilings_bench: the report leaves the roofline out" >&2
  roofline=0
fi

runs=$(mktemp)
err=$(mktemp)
ceilings=$(mktemp)  # a JSON line a round (measure_ceilings)
trap 'rm -f "$runs" "$err" "$ceilings"' EXIT
weight_bytes=0
if [ "$roofline" = 1 ]; then
  # The model's weight bytes (the read probe's buffer), from a one-token run.
  weight_bytes=$("$bench" --model "$model" \
      --num-requests 1 --prompt-tokens 1 --output-tokens 1 --warmup 0 \
      --threads 2 --json 2>"$err" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["weight_bytes"])') || {
    echo "tributary-bench failed sizing the weights:" >&2; cat "$err" >&2; exit 1; }
fi
measure_ceilings() {  # appends the round's ceilings (a JSON line)
  local line
  line=$("$ceilings_bench" --sections=r --reps 10 --threads 2 \
      --read_bytes="$weight_bytes" 2>"$err" | tail -n 1) || {
    echo "cpu_ceilings_bench failed:" >&2; cat "$err" >&2; exit 1; }
  echo "$line" | python3 -c 'import json, sys; d = json.load(sys.stdin); d["peak_gflops"], d["read_gbps"]' 2>/dev/null || {
    echo "cpu_ceilings_bench's last line is not its ceilings: $line" >&2; exit 1; }
  echo "$line" >> "$ceilings"
  sleep 1
}
one_run() {  # label binary concurrency round [extra bench flags]
  local label=$1 binary=$2 c=$3 r=$4 json load
  shift 4
  load=(--concurrency "$c")
  [ "$c" != 1w ] || load=(--concurrency 1 --warmup 32)
  [ "$label" != new ] || [ "$roofline" = 0 ] || load+=(--step-work)
  if ! json=$("$binary" --model "$model" \
      --num-requests 64 --prompt-tokens 32 --output-tokens 64 \
      "${load[@]}" --threads 2 --seed 1 --json "$@" 2>"$err"); then
    echo "$label tributary-bench failed at C=$c:" >&2
    cat "$err" >&2
    exit 1
  fi
  echo "$label $c $r $(echo "$json" | tr -d '\n')" >> "$runs"
}
# A run with bf16 products (--cpu-matmul bf16) takes its FLOPs at the
# probe's VDPBF16PS rate instead of the f32 fma rate: the products are
# almost all of a step's FLOPs, and a faster rate for the rest (attention,
# the delta rule) only lowers the floor, so the roofline stays a bound.
products=f32
case " $* " in *" --cpu-matmul bf16 "*|*" --cpu-matmul=bf16 "*) products=bf16 ;; esac
loads="1 1w 8 32"
case " $* " in *" --warmup"*) loads="1 8 32" ;; esac
for r in $(seq "$rounds"); do
  [ "$roofline" = 0 ] || measure_ceilings
  for c in $loads; do
    if [ -z "$old" ]; then
      one_run new "$bench" "$c" "$r" "$@"
    elif [ $((r % 2)) -eq 1 ]; then
      one_run old "$old" "$c" "$r" "$@"
      one_run new "$bench" "$c" "$r" "$@"
    else
      one_run new "$bench" "$c" "$r" "$@"
      one_run old "$old" "$c" "$r" "$@"
    fi
  done
done

python3 - "$runs" "$ceilings" "$products" <<'EOF'
import json, statistics, sys
rows = []
for line in open(sys.argv[1]):
    label, c, r, js = line.split(" ", 3)
    d = json.loads(js)
    if d["num_ok"] != d["num_requests"] or d["errors"]:
        sys.exit(f"{label} C={c} round {r}: {d['num_ok']} of "
                 f"{d['num_requests']} requests ok, errors {d['errors']}")
    rows.append((label, c, int(r), d))
    s = d["steps"]
    print(f"{label} C={c:>2} round {r}: {d['generated_tokens_per_second']:8.1f} tok/s, "
          f"mean batch {s['mean_batch_size']:5.2f}, outside the forward "
          f"{100 * s['overhead_fraction']:.2f} %")
labels = sorted({x[0] for x in rows}, reverse=True)  # "old" before "new"
tps = {(l, c, r): d["generated_tokens_per_second"] for l, c, r, d in rows}
rounds = sorted({x[2] for x in rows})
loads = [c for c in ("1", "1w", "8", "32") if any(x[1] == c for x in rows)]
for label in labels:
    print(f"\n{label}:")
    for c in loads:
        ds = [d for l, cc, _, d in rows if l == label and cc == c]
        print(f"  C={c:>2}: median {statistics.median(d['generated_tokens_per_second'] for d in ds):8.1f} tok/s, "
              f"mean batch {statistics.median(d['steps']['mean_batch_size'] for d in ds):5.2f}, "
              f"outside the forward {100 * statistics.median(d['steps']['overhead_fraction'] for d in ds):.2f} %")
    for c1, what in (("1", ""), ("1w", " (C = 1 after a 32-wide warm-up)")):
        if c1 not in loads:
            continue
        gains = [tps[(label, "32", r)] / tps[(label, c1, r)] for r in rounds]
        print(f"  gain 32 / {c1} per round: {' '.join(f'{g:.2f}' for g in gains)}; "
              f"median {statistics.median(gains):.2f}x{what} (issue 5's goal: 6x)")
    probes = [json.loads(line) for line in open(sys.argv[2])]
    if not probes or not any("step_work" in d for l, _, _, d in rows if l == label):
        continue
    peak_key, peak_name = "peak_gflops", "FMA"
    if sys.argv[3] == "bf16":
        if not all("bf16_peak_gflops" in p for p in probes):
            sys.exit("--cpu-matmul bf16, but the probe measured no VDPBF16PS rate")
        peak_key, peak_name = "bf16_peak_gflops", "VDPBF16PS"
    peak = 1e9 * max(p[peak_key] for p in probes)
    read = 1e9 * max(p["read_gbps"] for p in probes)
    def ceiling_tps(d):  # generated tokens over the steps' summed floors
        return d["generated_tokens"] / sum(max(f / peak, b / read)
                                           for f, b in d["step_work"])
    print(f"  roofline, at the best ceilings of {len(probes)} probes: {peak_name} {peak / 1e9:.1f} GFLOP/s "
          f"(probes {min(p[peak_key] for p in probes):.1f}–{max(p[peak_key] for p in probes):.1f}), "
          f"read of {rows[0][3]['weight_bytes']} weight bytes {read / 1e9:.2f} GB/s "
          f"(probes {min(p['read_gbps'] for p in probes):.2f}–{max(p['read_gbps'] for p in probes):.2f})")
    roof = {}
    for c in loads:
        ds = {r: d for l, cc, r, d in rows if l == label and cc == c}
        roof[c] = {r: ceiling_tps(d) for r, d in ds.items()}
        fractions = [ds[r]["generated_tokens_per_second"] / roof[c][r] for r in rounds]
        print(f"    C={c:>2}: ceiling {statistics.median(roof[c].values()):8.1f} tok/s, reached "
              f"{100 * statistics.median(fractions):5.1f} % of it (per round "
              f"{' '.join(f'{100 * x:.0f}' for x in fractions)})")
    for c1 in ("1", "1w"):
        if c1 not in loads:
            continue
        gains = [roof["32"][r] / roof[c1][r] for r in rounds]
        reached = [tps[(label, "32", r)] / tps[(label, c1, r)] / g
                   for r, g in zip(rounds, gains)]
        print(f"    ceiling gain 32 / {c1}: {statistics.median(gains):.2f}x; "
              f"the measured gain is {100 * statistics.median(reached):.1f} % of it (median over rounds)")
if "old" in labels:
    print("\nnew / old, paired runs:")
    for c in loads:
        ratios = [tps[("new", c, r)] / tps[("old", c, r)] for r in rounds]
        print(f"  C={c:>2}: {' '.join(f'{x:.2f}' for x in ratios)}; median {statistics.median(ratios):.3f}")
EOF

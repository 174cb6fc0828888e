#!/usr/bin/env bash
# The gRPC service's overhead on the default model, with the
# engine's compute kept apart from everything else:
#   - tributary-server runs with one compute thread (--threads 1), the
#     engine thread pinned to core 0 (--engine-cpus 0), and its other
#     threads (gRPC, the response pump, metrics) on core 1 (taskset -c 1);
#   - tributary-load is pinned to core 1 too (--cpu 1);
#   - the peer, tributary-bench (the same engine in-process, no gRPC), runs
#     with one compute thread on core 0, while the server is idle.
#
# 1. Streaming, one stream at a time (so every step is one decode of that
#    stream): time per token after the first, through gRPC against
#    in-process, in ROUNDS interleaved pairs (the machine drifts: pairs are
#    compared, then the median ratio is reported). The server's own step
#    time (tributary_step_duration_seconds) is printed too.
# 2. 1-token requests at 16 concurrent clients: requests/s through gRPC,
#    next to the in-process peer.
#
# Usage: bench/server/run.sh [BUILD_DIR]   (default build/)
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${ROUNDS:-5}
SERVER=$BUILD/server/tributary-server
LOAD=$BUILD/client/tributary-load
BENCH=$BUILD/bench/tributary-bench
LOG=$(mktemp)
OUT=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; rm -rf "$LOG" "$OUT"' EXIT

taskset -c 1 "$SERVER" --threads 1 --engine-cpus 0 --port 0 --health-port -1 \
  --metrics-port 0 --http-port -1 --max-waiting 4096 2> "$LOG" &
PID=$!
for _ in $(seq 100); do
  grep -q 'metrics listening' "$LOG" && break
  sleep 0.1
done
API=$(grep -o 'gRPC API listening on [0-9.]*:[0-9]*' "$LOG" | grep -o '[0-9]*$')
METRICS=$(grep -o 'metrics listening on http://[0-9.]*:[0-9]*' "$LOG" | grep -o '[0-9]*$')

step_stats() {  # "sum count" of the server's step-duration histogram
  curl -s "http://127.0.0.1:$METRICS/metrics" |
    awk '/^tributary_step_duration_seconds_sum/ {s=$2} /^tributary_step_duration_seconds_count/ {c=$2} END {print s, c}'
}

"$LOAD" --target "127.0.0.1:$API" --cpu 1 --concurrency 1 --num-requests 2 \
  --max-new-tokens 32 --prompt-tokens 16 > /dev/null 2>&1   # warm-up
echo "== streaming, one stream at a time: $ROUNDS rounds of 10 requests x 256 tokens"
for i in $(seq "$ROUNDS"); do
  read -r S0 C0 < <(step_stats)
  "$LOAD" --target "127.0.0.1:$API" --cpu 1 --concurrency 1 --num-requests 10 \
    --warmup 0 --max-new-tokens 256 --prompt-tokens 16 --json 2>/dev/null \
    > "$OUT/grpc-$i.json"
  read -r S1 C1 < <(step_stats)
  echo "$S0 $C0 $S1 $C1" > "$OUT/steps-$i.txt"
  taskset -c 0 "$BENCH" --threads 1 --num-requests 10 --prompt-tokens 16 \
    --output-tokens 256 --concurrency 1 --warmup 1 --json 2>/dev/null \
    > "$OUT/inproc-$i.json"
done

echo "== 1-token requests, 16 concurrent clients, 2000 requests"
"$LOAD" --target "127.0.0.1:$API" --cpu 1 --concurrency 16 --num-requests 2000 \
  --max-new-tokens 1 --prompt-tokens 16 --json 2>/dev/null > "$OUT/grpc-1tok.json"
kill $PID
wait $PID 2>/dev/null || true
taskset -c 0 "$BENCH" --threads 1 --num-requests 2000 --prompt-tokens 16 \
  --output-tokens 1 --concurrency 16 --json 2>/dev/null > "$OUT/inproc-1tok.json"

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def per_token(r):  # ms per token after the first, token-weighted
    return (r["end_to_end"]["mean_ms"] - r["ttft"]["mean_ms"]) / 255
ratios, step_ratios = [], []
for i in range(1, rounds + 1):
    g = json.load(open(f"{out}/grpc-{i}.json"))
    p = json.load(open(f"{out}/inproc-{i}.json"))
    s0, c0, s1, c1 = map(float, open(f"{out}/steps-{i}.txt").read().split())
    step = 1000 * (s1 - s0) / (c1 - c0)
    ratio = per_token(g) / per_token(p)
    ratios.append(ratio)
    step_ratios.append(per_token(g) / step)
    print(f"round {i}: in-process {per_token(p):.3f} ms/token, through gRPC "
          f"{per_token(g):.3f} ms/token ({100 * (ratio - 1):+.1f} %); "
          f"server step mean {step:.3f} ms, stream p99 gap "
          f"{g['inter_token_latency']['p99_ms']:.3f} ms")
print(f"stream time per token against the server's own step time (the "
      f"issue's measure), median of {rounds} rounds: "
      f"{100 * (statistics.median(step_ratios) - 1):+.1f} %")
print(f"stream time per token against the in-process engine, median of "
      f"{rounds} rounds: {100 * (statistics.median(ratios) - 1):+.1f} %")
g = json.load(open(f"{out}/grpc-1tok.json"))
p = json.load(open(f"{out}/inproc-1tok.json"))
print(f"1-token requests: through gRPC {g['requests_per_second']:.0f} requests/s "
      f"({g['num_ok']} ok of {g['num_requests']}, errors {g['errors']}); "
      f"in-process {p['requests_per_second']:.0f} requests/s "
      f"({100 * (g['requests_per_second'] / p['requests_per_second'] - 1):+.1f} %)")
PY

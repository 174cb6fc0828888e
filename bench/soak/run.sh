#!/usr/bin/env bash
# Soak: does tributary-server hold its memory, threads and sockets flat under
# hours of the traffic a real deployment sees? AddressSanitizer's leak check
# only sees memory nobody points to at exit; a map that keeps one entry per
# finished request, a metric label per request id or a thread per dropped
# connection are reachable, and grow until the pod is OOM-killed. This runs
# rounds of mixed traffic on the default model and samples the server after
# each round:
#   - gRPC streams to the end (tributary-load, closed loop);
#   - gRPC streams cut by a deadline mid-generation (--timeout);
#   - HTTP (OpenAI API) completions streamed, and streamed then dropped by the
#     client mid-stream (curl --max-time), and chat completions whole;
#   - requests refused (an unknown model, a bad field).
# It prints one row per round: requests so far, resident memory (VmRSS),
# threads, open file descriptors, and the size of the /metrics exposition;
# then the growth per 1000 requests between the end of the warm-up (round
# WARMUP_ROUNDS) and the last round, by a least-squares line. A benchmark,
# not a test: it reports and asserts nothing.
#
# RSS also moves with the allocator (arenas, fragmentation, the heap's top),
# so a slope in RSS is a place to look, not a verdict. HEAPTRACK_OUT=FILE
# runs the server under heaptrack and ends it with SIGKILL, so that what
# heaptrack_print calls "leaked" is the live heap at the end; two runs of
# different lengths then say whether the live heap grows with the requests:
#   HEAPTRACK_OUT=/tmp/short bench/soak/run.sh build 5
#   HEAPTRACK_OUT=/tmp/long  bench/soak/run.sh build 40
#   heaptrack_print -f /tmp/short.zst | grep leaked   (and /tmp/long.zst)
#
# Usage: bench/soak/run.sh [BUILD_DIR] [ROUNDS]   (default build/, 20)
#   ROUND_REQUESTS (default 200) gRPC requests per round and kind;
#   WARMUP_ROUNDS (default 3); SERVER_FLAGS (extra flags, e.g. --threads 1).
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-20}
ROUND_REQUESTS=${ROUND_REQUESTS:-200}
WARMUP_ROUNDS=${WARMUP_ROUNDS:-3}
SERVER=$BUILD/server/tributary-server
LOAD=$BUILD/client/tributary-load
for tool in "$SERVER" "$LOAD"; do
  [ -x "$tool" ] || { echo "soak: $tool not built (make build)" >&2; exit 1; }
done
for tool in curl python3; do
  command -v "$tool" > /dev/null || { echo "soak: $tool is needed" >&2; exit 1; }
done
LOG=$(mktemp)
ROWS=$(mktemp)
LOAD_LOG=$(mktemp)
PID=
STOP=TERM
PREFIX=()
if [ -n "${HEAPTRACK_OUT:-}" ]; then
  for tool in heaptrack pgrep; do
    command -v "$tool" > /dev/null || { echo "soak: $tool is needed" >&2; exit 1; }
  done
  PREFIX=(heaptrack -o "$HEAPTRACK_OUT")
  STOP=KILL
fi
# A drain and exit 0 are expected; anything else is shown and fails the run
# (an AddressSanitizer or LeakSanitizer report at exit, say).
stop_server() {
  [ -n "$PID" ] || return 0
  kill -s "$STOP" "$PID" 2>/dev/null || true
  local status=0
  wait "$PID" 2>/dev/null || status=$?
  wait  # for heaptrack too, which writes its file after the server ends
  if [ "$STOP" = TERM ] && [ "$status" -ne 0 ]; then
    echo "soak: the server exited with status $status; its log ends:" >&2
    tail -n 40 "$LOG" >&2
    return 1
  fi
}
finish() {
  local status=$?
  stop_server || status=1
  rm -f "$LOG" "$ROWS" "$LOAD_LOG"
  exit "$status"
}
trap finish EXIT

# shellcheck disable=SC2086  # SERVER_FLAGS is a list of flags
"${PREFIX[@]}" "$SERVER" --port 0 --health-port -1 --metrics-port 0 --http-port 0 \
  --max-waiting 4096 ${SERVER_FLAGS:-} 2> "$LOG" &
PID=$!
if [ -n "${HEAPTRACK_OUT:-}" ]; then
  # The server, not heaptrack's shell: its subshells carry the server's path
  # in their command lines too, so match the process name the server binary
  # gets when it starts (the kernel keeps 15 characters of it).
  child=
  for _ in $(seq 100); do
    child=$(pgrep -P "$PID" -x tributary-serve | head -n 1 || true)
    [ -n "$child" ] && break
    sleep 0.1
  done
  PID=${child:?soak: the server did not start under heaptrack}
fi
for _ in $(seq 300); do
  grep -q 'HTTP API listening' "$LOG" && grep -q 'metrics listening' "$LOG" &&
    break
  kill -0 "$PID" 2>/dev/null || { cat "$LOG" >&2; exit 1; }
  sleep 0.1
done
if ! grep -q 'HTTP API listening' "$LOG" || ! grep -q 'metrics listening' "$LOG"; then
  echo "soak: the server did not start listening in 30 s; its log:" >&2
  cat "$LOG" >&2
  exit 1
fi
API=$(grep -o 'gRPC API listening on [0-9.]*:[0-9]*' "$LOG" | grep -o '[0-9]*$')
METRICS=$(grep -o 'metrics listening on http://[0-9.]*:[0-9]*' "$LOG" | grep -o '[0-9]*$')
HTTP=$(grep -o 'HTTP API listening on http://[0-9.]*:[0-9]*' "$LOG" | grep -o '[0-9]*$')
MODEL=$(curl -s "http://127.0.0.1:$HTTP/v1/models" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')

requests=0
grpc_round() {  # to the end, then cut by deadlines
  if ! "$LOAD" --target "127.0.0.1:$API" --concurrency 16 --warmup 0 \
    --num-requests "$ROUND_REQUESTS" --prompt-tokens 24 --max-new-tokens 24 \
    --temperature 0.8 > /dev/null 2> "$LOAD_LOG"; then
    echo "soak: tributary-load failed:" >&2
    cat "$LOAD_LOG" >&2
    exit 1
  fi
  # A deadline of 30 ms ends most of these mid-stream: the server cancels.
  "$LOAD" --target "127.0.0.1:$API" --concurrency 16 --warmup 0 \
    --num-requests "$ROUND_REQUESTS" --prompt-tokens 24 --max-new-tokens 64 \
    --timeout 0.03 > /dev/null 2>&1 || true
  requests=$((requests + 2 * ROUND_REQUESTS))
}
# One HTTP call in the background. Its status is not checked: the dropped
# streams are meant to fail, and the server's health is checked after the
# round (alive, and at the end drained with exit 0).
http_call() {
  curl -s -o /dev/null -H 'content-type: application/json' "$@" &
  pids+=($!)
}
http_round() {
  local url="http://127.0.0.1:$HTTP/v1"
  local i pids
  for i in $(seq 20); do
    pids=()
    # Streamed to the end, streamed and dropped after 50 ms, a chat whole,
    # and two refusals (an unknown model; max_tokens of the wrong type).
    http_call -N "$url/completions" \
      -d "{\"model\":\"$MODEL\",\"prompt\":\"ROMEO $i:\",\"max_tokens\":16,\"stream\":true}"
    http_call -N --max-time 0.05 "$url/completions" \
      -d "{\"model\":\"$MODEL\",\"prompt\":\"JULIET $i:\",\"max_tokens\":200,\"stream\":true}"
    http_call "$url/chat/completions" \
      -d "{\"model\":\"$MODEL\",\"messages\":[{\"role\":\"user\",\"content\":\"hi $i\"}],\"max_tokens\":8}"
    http_call "$url/completions" -d "{\"model\":\"nobody-$i\",\"prompt\":\"x\"}"
    http_call "$url/completions" \
      -d "{\"model\":\"$MODEL\",\"prompt\":\"x\",\"max_tokens\":\"many\"}"
    wait "${pids[@]}" || true  # not a bare wait: the server is a child too
  done
  requests=$((requests + 100))
}
sample() {  # requests rss_kib threads fds metrics_bytes
  local rss threads fds bytes
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID/status")
  threads=$(awk '/^Threads:/ {print $2}' "/proc/$PID/status")
  fds=$(find "/proc/$PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
  bytes=$(curl -s "http://127.0.0.1:$METRICS/metrics" | wc -c)
  echo "$requests $rss $threads $fds $bytes"
}

printf '%6s %10s %9s %8s %5s %14s\n' round requests "RSS MiB" threads fds "metrics bytes"
start=$(date +%s)
for round in $(seq "$ROUNDS"); do
  grpc_round
  http_round
  sleep 1  # let the last cancellations and keep-alive connections settle
  kill -0 "$PID" 2>/dev/null || { echo "soak: the server died" >&2; cat "$LOG" >&2; exit 1; }
  row=$(sample)
  echo "$round $row" >> "$ROWS"
  read -r n rss threads fds bytes <<< "$row"
  awk -v r="$round" -v n="$n" -v rss="$rss" -v t="$threads" -v f="$fds" -v b="$bytes" \
    'BEGIN { printf "%6d %10d %9.1f %8d %5d %14d\n", r, n, rss / 1024, t, f, b }'
done
echo "$(( $(date +%s) - start )) s, $requests requests"
python3 - "$ROWS" "$WARMUP_ROUNDS" <<'EOF'
import sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
rows = [r for r in rows if r[0] >= int(sys.argv[2])]
if len(rows) < 3:
    sys.exit("too few rounds after the warm-up for a line")
def slope(col):  # least squares, per 1000 requests
    xs = [r[1] / 1000 for r in rows]; ys = [r[col] for r in rows]
    mx = sum(xs) / len(xs); my = sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
print(f"after round {int(rows[0][0])} ({int(rows[0][1])} requests) to the end "
      f"({int(rows[-1][1])}), per 1000 requests:")
print(f"  RSS {slope(2):+.1f} KiB (from {rows[0][2] / 1024:.1f} to {rows[-1][2] / 1024:.1f} MiB)")
print(f"  threads {slope(3):+.2f}, fds {slope(4):+.2f}, metrics bytes {slope(5):+.1f}")
EOF

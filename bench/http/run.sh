#!/usr/bin/env bash
# The HTTP attack benchmark: starts the given
# tributary-server on free ports with the embedded default model, waits for
# GET /health, runs bench/http/attack.py against its HTTP API port (baseline
# samples, a connection burst, the same samples under slowloris and header
# floods, recovery), stops the server and prints the report. A benchmark,
# not a test: it reports and asserts nothing.
#
# Usage: bench/http/run.sh <tributary-server binary> [attack.py flags]
#   e.g. bench/http/run.sh build/server/tributary-server --bad-length \
#          --json /tmp/attack.json
#   MODEL=DIR (default models/tiny-shakespeare); SERVER_FLAGS (extra server
#   flags, e.g. "--http-threads 16"). The client runs on the same machine:
#   `nice -n 10 bench/http/run.sh ...` on a shared one.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER=${1:?usage: bench/http/run.sh <tributary-server binary> [attack.py flags]}
shift
MODEL=${MODEL:-$ROOT/models/tiny-shakespeare}
[ -x "$SERVER" ] || { echo "http bench: $SERVER is not an executable" >&2; exit 1; }
command -v python3 > /dev/null || { echo "http bench: python3 is needed" >&2; exit 1; }
LOG=$(mktemp)
PID=
stop_server() {
  [ -n "$PID" ] || return 0
  kill -TERM "$PID" 2>/dev/null || true
  for _ in $(seq 150); do
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$PID" 2>/dev/null; then
    echo "http bench: the server did not stop in 15 s after SIGTERM; SIGKILL" >&2
    kill -KILL "$PID" 2>/dev/null || true
  fi
  wait "$PID" 2>/dev/null || true
  PID=
}
trap 'stop_server; rm -f "$LOG"' EXIT

echo "== machine: $(uname -n), $(nproc) cores" \
  "($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), load average" \
  "$(cut -d' ' -f1-3 /proc/loadavg), $(free -m | awk '/^Mem:/ {print $7}') MiB available"
echo "== server: $SERVER ($(stat -c '%s bytes, modified %y' "$SERVER" | cut -d. -f1))"
echo "== date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# shellcheck disable=SC2086  # SERVER_FLAGS is a list of flags
"$SERVER" --model "$MODEL" --port 0 --health-port -1 --metrics-port -1 \
  --http-port 0 --drain-grace 2 ${SERVER_FLAGS:-} 2> "$LOG" &
PID=$!
HTTP=
for _ in $(seq 300); do
  HTTP=$(grep -o 'HTTP API listening on http://[0-9.]*:[0-9]*' "$LOG" |
    grep -o '[0-9]*$' || true)
  [ -n "$HTTP" ] && break
  kill -0 "$PID" 2>/dev/null || { cat "$LOG" >&2; exit 1; }
  sleep 0.1
done
[ -n "$HTTP" ] || { echo "http bench: no HTTP port in 30 s; log:" >&2; cat "$LOG" >&2; exit 1; }
for _ in $(seq 100); do
  python3 -c 'import sys, urllib.request as u
u.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=1)' "$HTTP" \
    2>/dev/null && break
  sleep 0.1
done
echo "== HTTP API on 127.0.0.1:$HTTP, server pid $PID"

status=0
python3 "$ROOT/bench/http/attack.py" --host 127.0.0.1 --port "$HTTP" \
  --server-pid "$PID" "$@" || status=$?
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if ! kill -0 "$PID" 2>/dev/null; then
  echo "http bench: the server is gone; its log ends:" >&2
  tail -n 20 "$LOG" >&2
  PID=
fi
stop_server
exit "$status"

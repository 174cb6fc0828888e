#!/usr/bin/env bash
# Every command-line tool answers --help (and -h) with its usage on stdout,
# naming itself, and exit status 0; an unknown flag still fails with exit
# status 1 and one line on stderr.
#   cli_help_test.sh TOOL_BINARY...
set -uo pipefail
failed=0
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
for bin in "$@"; do
  name=$(basename "$bin")
  for flag in --help -h; do
    "$bin" "$flag" > "$out" 2> "$err" < /dev/null
    rc=$?
    if [ "$rc" -ne 0 ]; then
      echo "FAIL: $name $flag: exit $rc: $(head -c 200 "$err")"; failed=1
    elif ! grep -q -- "$name" "$out"; then
      echo "FAIL: $name $flag: stdout does not name the tool: $(head -c 200 "$out")"; failed=1
    fi
  done
  "$bin" --no-such-flag > "$out" 2> "$err" < /dev/null
  rc=$?
  if [ "$rc" -ne 1 ] || [ "$(wc -l < "$err")" -ne 1 ]; then
    echo "FAIL: $name --no-such-flag: exit $rc, stderr: $(head -c 200 "$err")"; failed=1
  fi
done
[ "$failed" -eq 0 ] && echo "every tool answers --help ($# tools)"
exit "$failed"

#!/usr/bin/env bash
# Runs each make target given after the make command, every one even when an
# earlier one fails (a failing Release run must not hide what ASan or TSan
# would find), then prints one line per stage with its result and time, and
# exits non-zero when any stage failed.
#   run-stages.sh MAKE STAGE...
set -uo pipefail

make_cmd=$1
shift
results=()
failed=0
for stage in "$@"; do
  start=$(date +%s)
  "$make_cmd" --no-print-directory "$stage"
  rc=$?
  seconds=$(( $(date +%s) - start ))
  if [ "$rc" -eq 0 ]; then
    results+=("$(printf '  %-14s passed  %3d min %02d s' "$stage" $((seconds / 60)) $((seconds % 60)))")
  else
    results+=("$(printf '  %-14s FAILED  %3d min %02d s (exit %d)' "$stage" $((seconds / 60)) $((seconds % 60)) "$rc")")
    failed=1
  fi
done

echo "== stages =="
printf '%s\n' "${results[@]}"
if [ "$failed" -ne 0 ]; then
  echo "== at least one stage failed: its output is above =="
  exit 1
fi
echo "== every stage passed =="

#!/usr/bin/env bash
# Two one-thread commands run side by side, one on each of the first two
# cores (taskset), swapped every run, so that both meet the same neighbours
# and the same state of the machine: on these shared VMs one command's
# figure drifts by 20–45 % within minutes, but the ratio of two figures
# taken at once drifts far less (bench/journal/measuring-on-shared-vms.md).
# Prints each run's two figures and B / A, then the ratios' median and
# geometric mean.
#   bench/cpu/side_by_side.sh [-n RUNS] [-f FIELD] 'COMMAND A' 'COMMAND B'
# FIELD (default: the last) is the whitespace-separated field of each
# command's last output line that holds its figure, a number where larger
# is better (GB/s, GFLOP/s, tok/s); RUNS defaults to 10. E.g. the recurrent
# delta rule on two paths, from delta_rule_bench's "recurrent:" line:
#   bench/cpu/side_by_side.sh -f 2 \
#     "build/bench/cpu/delta_rule_bench --isa avx2 | grep '^recurrent'" \
#     "build/bench/cpu/delta_rule_bench --isa avx512 | grep '^recurrent'"
# (there smaller is better: read the ratio upside down). Each command runs
# under bash -c, so pipes and redirections work.
set -euo pipefail
runs=10
field=NF
while getopts "n:f:" opt; do
  case "$opt" in
    n) runs=$OPTARG ;;
    f) field=$OPTARG ;;
    *) echo "usage: $0 [-n RUNS] [-f FIELD] 'COMMAND A' 'COMMAND B'" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: $0 [-n RUNS] [-f FIELD] 'COMMAND A' 'COMMAND B'" >&2; exit 2; }
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "RUNS must be a positive integer, got '$runs'" >&2; exit 2; }
[[ "$field" = NF || "$field" =~ ^[1-9][0-9]*$ ]] || { echo "FIELD must be a positive integer, got '$field'" >&2; exit 2; }
command -v taskset >/dev/null || { echo "needs taskset (util-linux)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs two cores" >&2; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
figure() {  # the figure in output file $1, or exit naming the command $2
  local x
  x=$(tail -n 1 "$1" | awk -v f="$field" '{ print (f == "NF") ? $NF : $f }')
  [[ "$x" =~ ^[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]] || {
    echo "command $2's last line has no number in field $field:" >&2
    tail -n 1 "$1" >&2
    exit 1
  }
  echo "$x"
}
for r in $(seq "$runs"); do
  if [ $((r % 2)) -eq 1 ]; then core_a=0; core_b=1; else core_a=1; core_b=0; fi
  taskset -c "$core_a" bash -c "$1" > "$dir/a" 2>&1 &
  pid=$!
  taskset -c "$core_b" bash -c "$2" > "$dir/b" 2>&1 || { echo "command B failed:" >&2; cat "$dir/b" >&2; exit 1; }
  wait "$pid" || { echo "command A failed:" >&2; cat "$dir/a" >&2; exit 1; }
  a=$(figure "$dir/a" A)
  b=$(figure "$dir/b" B)
  awk -v r="$r" -v a="$a" -v b="$b" 'BEGIN { printf "run %2d: A %10.4g  B %10.4g  B / A %.3f\n", r, a, b, b / a }' | tee -a "$dir/ratios"
done
# The geometric mean too: over an even number of runs each command ran as
# often on either core, so a core faster than the other (seen: one ~25 %
# faster for minutes) cancels out of it.
awk '{ print $NF }' "$dir/ratios" | sort -g |
  awk '{ x[NR] = $1; l += log($1) } END { m = (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2;
         printf "B / A over %d runs: median %.3f, geometric mean %.3f (range %.3f–%.3f)\n", NR, m, exp(l / NR), x[1], x[NR] }'

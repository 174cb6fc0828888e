#!/usr/bin/env bash
# Tributary's tokenizer vs HF tokenizers, single thread, same text, same
# machine. Usage (from the project root, after building tokenizer_bench and
# creating tools/tokenizer/.venv, see tools/tokenizer/README.md):
#   bench/tokenizer/run.sh [BUILD_DIR] [TOKENIZER]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
TOK=${2:-../shared/data/tokenizers/qwen3}
PY=tools/tokenizer/.venv/bin/python
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp ../shared/data/corpus/tinyshakespeare.txt "$WORK/tinyshakespeare.txt"
# A deterministic multilingual text (~1 MB) from the test-string generator.
(cd tools/tokenizer && "../../$PY" -c '
import textgen, sys
sys.stdout.write("\n".join(textgen.random_strings(99, 16000, max_items=40)))
') > "$WORK/multilingual.txt"

taskset -c 0 "$BUILD/bench/tokenizer/tokenizer_bench" --tokenizer "$TOK" \
  --repeat 5 "$WORK/tinyshakespeare.txt" "$WORK/multilingual.txt" > "$WORK/ours.txt"
RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false taskset -c 0 "$PY" \
  tools/tokenizer/bench_hf.py --tokenizer "$TOK" --repeat 5 \
  "$WORK/tinyshakespeare.txt" "$WORK/multilingual.txt" > "$WORK/hf.txt"

"$PY" - "$WORK/ours.txt" "$WORK/hf.txt" <<'PYEOF'
import re, sys, os
def parse(path):
    load, rows = None, {}
    for line in open(path):
        m = re.match(r"load .*: ([\d.]+) s", line)
        if m: load = float(m.group(1)); continue
        m = re.match(r"(\S+) (\w+): (\d+) bytes, (\d+) tokens, [\d.]+ s, ([\d.]+) MB/s", line)
        if m: rows[(os.path.basename(m.group(1)), m.group(2))] = (int(m.group(4)), float(m.group(5)))
    return load, rows
ol, ours = parse(sys.argv[1]); hl, hf = parse(sys.argv[2])
print(f"{'text':<22}{'mode':<7}{'tokens':>9}{'tributary MB/s':>16}{'HF MB/s':>10}{'ratio':>8}")
for key in ours:
    ot, om = ours[key]; ht, hm = hf[key]
    same = "" if ot == ht else f"  (token counts differ: {ot} vs {ht})"
    print(f"{key[0]:<22}{key[1]:<7}{ot:>9}{om:>16.2f}{hm:>10.2f}{om / hm:>7.2f}x{same}")
print(f"{'load time (s)':<38}{ol:>16.3f}{hl:>10.3f}")
PYEOF

#!/usr/bin/env python3
"""Differential check of tributary-tokenize against HF tokenizers on text
neither has seen: fresh random multilingual strings from a seed, and/or the
lines of a corpus file. Encodes with both, decodes our ids with both, and
reports every mismatch.

  compare.py --binary build/engine/cli/tributary-tokenize \
      --tokenizer ../shared/data/tokenizers/qwen3 --seed 1 --count 2000
  compare.py ... --corpus ../shared/data/corpus/tinyshakespeare.txt

Exit status 1 when anything differs."""

import argparse
import json
import os
import subprocess
import sys

from tokenizers import Tokenizer

import textgen


def run_binary(binary, tokenizer, lines, extra=()):
    payload = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    out = subprocess.run([binary, "--tokenizer", tokenizer, *extra],
                         input=payload.encode("utf-8"), capture_output=True,
                         check=True)
    result = [json.loads(l) for l in out.stdout.decode("utf-8").split("\n")[:-1]]
    if len(result) != len(lines):
        sys.exit(f"binary wrote {len(result)} lines for {len(lines)}")
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--tokenizer", required=True, help="file or directory")
    ap.add_argument("--seed", type=int, action="append", default=[])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--corpus", action="append", default=[])
    ap.add_argument("--show", type=int, default=10)
    args = ap.parse_args()

    path = args.tokenizer
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    hf = Tokenizer.from_file(path)

    texts = []
    for seed in args.seed:
        texts += textgen.random_strings(seed, args.count)
    for corpus in args.corpus:
        with open(corpus, encoding="utf-8") as f:
            texts += f.read().splitlines(keepends=True)
    if not texts:
        sys.exit("nothing to compare: give --seed and/or --corpus")

    expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    ours = run_binary(args.binary, args.tokenizer, [{"text": t} for t in texts])
    encode_bad = [(t, e, o) for t, e, o in zip(texts, expected, ours)
                  if o.get("ids") != e]
    decoded = run_binary(args.binary, args.tokenizer,
                         [{"ids": e} for e in expected], ["--decode"])
    decode_bad = [(e, hf.decode(e, skip_special_tokens=False), d)
                  for e, d in zip(expected, decoded)
                  if d.get("text") != hf.decode(e, skip_special_tokens=False)]
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    print(f"strings: {len(texts)}  bytes: {n_bytes}  "
          f"tokens: {sum(map(len, expected))}")
    print(f"encode mismatches: {len(encode_bad)}  "
          f"decode mismatches: {len(decode_bad)}")
    for t, e, o in encode_bad[:args.show]:
        print("ENCODE", json.dumps(t), "\n  hf  ", e, "\n  ours", o)
    for e, h, d in decode_bad[:args.show]:
        print("DECODE", e, "\n  hf  ", json.dumps(h), "\n  ours", d)
    return 1 if encode_bad or decode_bad else 0


if __name__ == "__main__":
    sys.exit(main())

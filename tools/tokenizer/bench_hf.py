#!/usr/bin/env python3
"""Single-thread encode throughput of HF tokenizers on the same files and in
the same two modes as bench/tokenizer/tokenizer_bench:
  whole: tok.encode(whole_text)
  lines: tok.encode_batch(lines) on one thread (RAYON_NUM_THREADS=1; the
         batch call keeps Python's per-call overhead out of the figure).
Best of N runs; prints the same line format, plus the load time.

  RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
      bench_hf.py --tokenizer DIR_OR_FILE [--repeat N] FILE...
"""

import argparse
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("RAYON_RS_NUM_CPUS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Tokenizer  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    path = args.tokenizer
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    t0 = time.perf_counter()
    tok = Tokenizer.from_file(path)
    print(f"load {args.tokenizer}: {time.perf_counter() - t0:.3f} s")
    for file in args.files:
        with open(file, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
        lines = text.split("\n")
        lines = [l + "\n" for l in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        for mode in ("whole", "lines"):
            best, n_tokens = 1e30, 0
            for _ in range(args.repeat):
                start = time.perf_counter()
                if mode == "whole":
                    n_tokens = len(tok.encode(text, add_special_tokens=False).ids)
                else:
                    encs = tok.encode_batch(lines, add_special_tokens=False)
                    n_tokens = sum(len(e.ids) for e in encs)
                best = min(best, time.perf_counter() - start)
            print(f"{file} {mode}: {len(raw)} bytes, {n_tokens} tokens, "
                  f"{best:.4f} s, {len(raw) / best / 1e6:.2f} MB/s")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Prefill and decode tokens/s of Tributary's CPU engine and of Hugging Face
transformers (PyTorch, CPU) on the same model, the same machine and the same
thread count, one after the other in one run. Never on the CI path.

Uses the virtual environment of tools/reference (torch + transformers, pinned
in tools/reference/requirements.txt):

  tools/reference/.venv/bin/python tools/bench/compare_transformers.py \
      --model DIR --engine-bench build/bench/engine/engine_bench --threads 2

Transformers runs in float32 on the stored weights converted to float32 (the
numerics of our CPU path, which computes in f32 from bf16 weights), eager
attention, the pure-PyTorch delta rule; `--torch-dtype bfloat16` adds a
second transformers row in bf16 for reference. Prefill: one forward over
--prefill-tokens tokens, best of --repeat. Decode: batch 1 with the KV/state
cache after a --decode-context-token prompt, --decode-tokens steps, median
step time.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time


def bench_transformers(model_dir, threads, prefill, context, steps, repeat, dtype_name):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=dtype, attn_implementation="eager")
    model.eval()
    vocab = model.config.vocab_size
    ids = torch.tensor([[(i * 7919 + 13) % vocab for i in range(max(prefill, context + steps))]])
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeat):
            start = time.perf_counter()
            model(ids[:, :prefill], use_cache=False, logits_to_keep=1)
            best = min(best, time.perf_counter() - start)
        out = model(ids[:, :context], use_cache=True, logits_to_keep=1)
        past = out.past_key_values
        times = []
        for i in range(steps):
            token = ids[:, context + i: context + i + 1]
            start = time.perf_counter()
            out = model(token, past_key_values=past, use_cache=True)
            past = out.past_key_values
            times.append(time.perf_counter() - start)
    return best, statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--engine-bench", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill-tokens", type=int, default=512)
    ap.add_argument("--decode-context", type=int, default=16)
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--torch-dtype", action="append", default=[])
    args = ap.parse_args()

    ours = json.loads(subprocess.run(
        [args.engine_bench, "--model", args.model, "--json",
         "--threads", str(args.threads),
         "--prefill-tokens", str(args.prefill_tokens),
         "--decode-context", str(args.decode_context),
         "--decode-tokens", str(args.decode_tokens),
         "--repeat", str(args.repeat)],
        check=True, capture_output=True, text=True).stdout)
    rows = [("tributary (f32 compute)", ours["prefill_seconds"], ours["decode_step_seconds"])]
    for dtype in ["float32"] + args.torch_dtype:
        p, d = bench_transformers(args.model, args.threads, args.prefill_tokens,
                                  args.decode_context, args.decode_tokens,
                                  args.repeat, dtype)
        rows.append((f"transformers ({dtype})", p, d))

    print(f"model {args.model}, {args.threads} threads, prefill {args.prefill_tokens} "
          f"tokens, decode batch 1 after {args.decode_context} tokens")
    print(f"{'engine':<28}{'prefill tok/s':>15}{'decode tok/s':>15}")
    for name, p, d in rows:
        print(f"{name:<28}{args.prefill_tokens / p:>15.1f}{1.0 / d:>15.1f}")
    base_p, base_d = rows[1][1], rows[1][2]
    print(f"tributary / transformers float32: prefill {base_p / rows[0][1]:.2f}x, "
          f"decode {base_d / rows[0][2]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Turns engine_bench --json lines (stdin) into the table of bench/README.md,
as fractions of the ceilings given on the command line (GEMM GFLOP/s, DRAM
GB/s), both measured in the same run by bench/engine/run.sh."""
import json
import sys

gemm, dram = float(sys.argv[1]), float(sys.argv[2])
print(f"ceilings: f32 GEMM {gemm:.1f} GFLOP/s, DRAM read {dram:.2f} GB/s")
print(f"{'model':<20}{'prefill tok/s':>14}{'GFLOP/s':>9}{'of GEMM':>9}"
      f"{'decode ms':>11}{'floor ms':>10}{'of floor':>10}{'stats cost':>12}")
for line in sys.stdin:
    r = json.loads(line)
    name = r["model"].rstrip("/").split("/")[-1]
    gflops = r["prefill_matrix_flops"] / r["prefill_seconds"] / 1e9
    floor = r["decode_weight_bytes"] / (dram * 1e9)
    stats = max(r["prefill_seconds"] / r["prefill_seconds_no_stats"],
                r["decode_step_seconds"] / r["decode_step_seconds_no_stats"]) - 1
    print(f"{name:<20}{r['prefill_tokens'] / r['prefill_seconds']:>14.1f}"
          f"{gflops:>9.1f}{100 * gflops / gemm:>8.1f}%"
          f"{1e3 * r['decode_step_seconds']:>11.2f}{1e3 * floor:>10.2f}"
          f"{100 * floor / r['decode_step_seconds']:>9.1f}%{100 * stats:>+11.2f}%")

#!/usr/bin/env python3
"""Writes tests/fixtures/fp8/e4m3_vectors.json: float8 e4m3 ("e4m3fn")
decode and encode vectors computed by ml_dtypes (the float8 types JAX and
TensorFlow use; its e4m3fn cast rounds to nearest even, as PyTorch's
.to(torch.float8_e4m3fn)), so that Tributary's own conversion
(engine/model/fp8.h) is checked against an implementation not written here.

    python3 -m venv tools/fp8/.venv
    tools/fp8/.venv/bin/pip install numpy ml_dtypes
    tools/fp8/.venv/bin/python tools/fp8/e4m3_vectors.py

decode: the f32 value of each code 0..255 ("nan" for NaN), as float.hex.
encode: [f32 bits, code] pairs: every code's value, every midpoint between
neighbouring codes (ties), and seeded random values in [-448, 448].
"""
import json
import pathlib

import ml_dtypes
import numpy as np

E4M3 = ml_dtypes.float8_e4m3fn


def main() -> None:
    codes = np.arange(256, dtype=np.uint8)
    values = codes.view(E4M3).astype(np.float32)
    decode = ["nan" if np.isnan(v) else float(v).hex() for v in values]

    finite = np.sort(np.unique(values[~np.isnan(values)]))
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    rng = np.random.default_rng(40)
    rand = np.concatenate([
        rng.uniform(-448, 448, 800),
        rng.standard_normal(800) * 0.05,   # small and subnormal range
    ]).astype(np.float32)
    xs = np.concatenate([finite, mids, -mids, rand]).astype(np.float32)
    enc = xs.astype(E4M3).view(np.uint8)
    encode = [[int(b), int(c)] for b, c in zip(xs.view(np.uint32), enc)]

    out = pathlib.Path(__file__).resolve().parents[2] / "tests/fixtures/fp8"
    out.mkdir(parents=True, exist_ok=True)
    (out / "e4m3_vectors.json").write_text(json.dumps({
        "generator": f"tools/fp8/e4m3_vectors.py, ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}",
        "decode": decode,
        "encode": encode,
    }) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes an FP8 block copy of a bf16/f32 model directory in the layout of
Qwen's published FP8 checkpoints (transformers' FineGrainedFP8 format):

  config.json      + "quantization_config": {"quant_method": "fp8",
                     "fmt": "e4m3", "activation_scheme": "dynamic",
                     "weight_block_size": [128, 128],
                     "modules_to_not_convert": ["lm_head"]}
  model.safetensors  every decoder projection matrix X.weight (q/k/v/o_proj,
                     in_proj_qkv/z/b/a, out_proj, gate/up/down_proj) as
                     F8_E4M3 with X.weight_scale_inv F32
                     [ceil(out/128), ceil(in/128)]; all else as stored.

Per block: scale_inv = amax / 448 (1 for an all-zero block), q = e4m3 of
w / scale_inv rounded to nearest even (ml_dtypes' cast, as torch's
.to(float8_e4m3fn)), so w ~ q * scale_inv. Independent of the C++ quantizer
in engine/model/fp8.cc.

    tools/fp8/.venv/bin/python tools/fp8/quantize_fp8.py models/tiny-shakespeare /tmp/tiny-fp8
"""
import json
import pathlib
import re
import shutil
import struct
import sys

import ml_dtypes
import numpy as np

MATRIX = re.compile(r"\.(self_attn\.[qkvo]_proj|linear_attn\.(in_proj_\w+|out_proj)"
                    r"|mlp\.(gate|up|down)_proj)\.weight$")
BLOCK = 128


def read_safetensors(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", None)
    return header, data, meta


def to_f32(entry, data):
    a, b = entry["data_offsets"]
    buf = np.frombuffer(data[a:b], dtype={"BF16": np.uint16, "F32": np.float32}[entry["dtype"]])
    if entry["dtype"] == "BF16":
        buf = (buf.astype(np.uint32) << 16).view(np.float32)
    return buf.reshape(entry["shape"]).astype(np.float32)


def quantize(w):
    rows, cols = w.shape
    br, bc = -(-rows // BLOCK), -(-cols // BLOCK)
    q = np.zeros(w.shape, dtype=ml_dtypes.float8_e4m3fn)
    s = np.ones((br, bc), dtype=np.float32)
    for i in range(br):
        for j in range(bc):
            blk = w[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK]
            amax = np.float32(np.abs(blk).max())
            if amax > 0:
                s[i, j] = amax / np.float32(448.0)
            q[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK] = np.clip(
                blk / s[i, j], -448, 448).astype(ml_dtypes.float8_e4m3fn)
    return q, s


def main(src, dst):
    src, dst = pathlib.Path(src), pathlib.Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    header, data, meta = read_safetensors(src / "model.safetensors")
    tensors = []  # (name, dtype, shape, bytes)
    for name in sorted(header):
        e = header[name]
        if MATRIX.search(name) and len(e["shape"]) == 2:
            q, s = quantize(to_f32(e, data))
            tensors.append((name, "F8_E4M3", list(q.shape), q.view(np.uint8).tobytes()))
            tensors.append((name + "_scale_inv", "F32", list(s.shape), s.tobytes()))
        else:
            a, b = e["data_offsets"]
            tensors.append((name, e["dtype"], e["shape"], data[a:b]))
    out_header, offset = {}, 0
    if meta:
        out_header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        out_header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(out_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(dst / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, _, raw in tensors:
            f.write(raw)
    config = json.loads((src / "config.json").read_text())
    config["quantization_config"] = {
        "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
        "weight_block_size": [BLOCK, BLOCK], "modules_to_not_convert": ["lm_head"]}
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for extra in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        if (src / extra).exists():
            shutil.copy(src / extra, dst / extra)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: quantize_fp8.py SRC_MODEL_DIR DST_DIR")
    main(sys.argv[1], sys.argv[2])

"""How far transformers' own bf16 forward lands from its f32 reference on the
committed fixtures: the yardstick for the CUDA backend's bf16 tolerance
(tests/engine/decoder/cuda_decoder_test.cc). For each fixture model and prompt,
the model is loaded with dtype=bfloat16 (pure PyTorch path, eager attention)
and run on the prompt; per position, max|logits_bf16 - logits_f32| over
max|logits_f32| (design.md section 7), and the worst over all positions is
printed per model.

    tools/reference/.venv/bin/python tools/reference/bf16_deviation.py
"""
import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import reference  # noqa: E402

torch.set_num_threads(1)


def load(model_dir, dtype):
    model = reference.load_fp32(model_dir)
    return model.to(dtype) if dtype != torch.float32 else model


def main():
    repo = os.path.join(os.path.dirname(__file__), "..", "..")
    root = os.path.join(repo, "tests", "fixtures", "models")
    cases = [(name, os.path.join(root, name), os.path.join(root, name, "reference.json"))
             for name in sorted(os.listdir(root))]
    cases.append(("default model (tiny-shakespeare)", os.path.join(repo, "models", "tiny-shakespeare"),
                  os.path.join(repo, "tests", "fixtures", "default-model", "reference.json")))
    worst_all = 0.0
    for name, d, ref_path in cases:
        if not os.path.exists(ref_path):
            continue
        refs = json.load(open(ref_path))["references"]
        model = load(d, torch.bfloat16)
        worst = 0.0
        for dump in refs:
            ids = dump["prompt_ids"]
            with torch.no_grad():
                out = model(input_ids=torch.tensor([ids]), use_cache=False)
            logits = out.logits[0].float()
            ref = torch.tensor(dump["logits"], dtype=torch.float64)
            diff = (logits.double() - ref).abs().max(dim=-1).values
            scale = ref.abs().max(dim=-1).values
            worst = max(worst, float((diff / scale).max()))
        worst_all = max(worst_all, worst)
        print(f"{name:32s} worst per-position max|bf16 - f32| / max|f32| = {worst:.4f}")
    print(f"{'all':32s} {worst_all:.4f}")


if __name__ == "__main__":
    main()

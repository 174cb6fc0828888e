"""Generate the tiny random-weight Qwen3.5 fixtures under tests/fixtures/models/<name>/.

Run from the repository root:  tools/reference/.venv/bin/python tools/reference/make_fixtures.py
Optional: --only NAME [NAME ...] to regenerate some configurations, --out DIR to write elsewhere
(used by the byte-for-byte reproducibility check).
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import reference  # noqa: E402

N_GENERATE = 8
L, F = "linear_attention", "full_attention"

# name -> (text config kwargs, storage, prompt lengths, extra)
CONFIGS = {
    # GQA 2, head_dim 24 (not a power of two), rotary 0.5, GDN ratio 1 with dk != dv, conv 4, tied, fp32
    "gqa2-hd24-rot50": dict(
        text=dict(vocab_size=256, hidden_size=48, intermediate_size=128, num_hidden_layers=4,
                  layer_types=[L, L, L, F], num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                  linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=16,
                  linear_value_head_dim=24, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
                  tie_word_embeddings=True),
        storage="float32", prompts=[1, 64, 200], seed=101),
    # full attention FIRST, MQA (4:1), head_dim 48, rotary 1.0, GDN ratio 2, conv 3, eps 1e-5, untied, fp32
    "attnfirst-mqa-hd48-rot100": dict(
        text=dict(vocab_size=320, hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                  layer_types=[F, L, L], num_attention_heads=4, num_key_value_heads=1, head_dim=48,
                  linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
                  linear_value_head_dim=32, linear_conv_kernel_dim=3, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 1.0},
                  tie_word_embeddings=False),
        storage="float32", prompts=[5, 65, 130], seed=202),
    # bf16 storage (every tensor bf16), GQA 3, rotary 0.25, GDN ratio 3 with dk > dv, conv 5, two attention layers
    "bf16-gqa3-gdn3-conv5": dict(
        text=dict(vocab_size=300, hidden_size=96, intermediate_size=192, num_hidden_layers=5,
                  layer_types=[L, F, L, L, F], num_attention_heads=6, num_key_value_heads=2, head_dim=32,
                  linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=32,
                  linear_value_head_dim=16, linear_conv_kernel_dim=5, rms_norm_eps=1e-6,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
                  tie_word_embeddings=True),
        storage="bfloat16", prompts=[1, 63, 200], seed=303),
    # bf16 storage with A_log and linear_attn.norm.weight kept in fp32 (as published), GQA 4, GDN ratio 4,
    # dk 24 / dv 32, untied, eps 1e-5
    "bf16-fp32extras-gqa4-gdn4": dict(
        text=dict(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=4,
                  layer_types=[L, L, L, F], num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                  linear_num_key_heads=1, linear_num_value_heads=4, linear_key_head_dim=24,
                  linear_value_head_dim=32, linear_conv_kernel_dim=4, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
                  tie_word_embeddings=False),
        storage="bfloat16+fp32extras", prompts=[5, 64, 130], seed=404),
    # two layers [GDN, attention], no GQA (1:1), head_dim 40 > hidden/heads, rotary 0.25 (10 dims),
    # GDN 4:4 with tiny heads (8/12), conv 3, hidden 32, eps 1e-5, tied, fp32
    "tiny2-mha-hd40": dict(
        text=dict(vocab_size=288, hidden_size=32, intermediate_size=96, num_hidden_layers=2,
                  layer_types=[L, F], num_attention_heads=2, num_key_value_heads=2, head_dim=40,
                  linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=8,
                  linear_value_head_dim=12, linear_conv_kernel_dim=3, rms_norm_eps=1e-5,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
                  tie_word_embeddings=True),
        storage="float32", prompts=[1, 63, 65], seed=505),
    # published VLM layout: Qwen3_5ForConditionalGeneration, text_config + tiny vision_config, tensors
    # model.language_model.* / model.visual.* / lm_head, plus hand-added mtp.* tensors; bf16 with fp32 A_log/norm
    "vlm-layout-mtp": dict(
        text=dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                  layer_types=[L, L, L, F], num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                  linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=16,
                  linear_value_head_dim=16, linear_conv_kernel_dim=4, rms_norm_eps=1e-6,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                                   "mrope_section": [2, 1, 1], "mrope_interleaved": True},
                  tie_word_embeddings=False),
        vision=dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=4,
                    temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=64, num_position_embeddings=16),
        storage="bfloat16+fp32extras", prompts=[5, 64], seed=606, vlm=True),
}


# ------------------------------------------------------------------ random weights
def randomize(model, seed, tied=False):
    """Fill every parameter from a fixed-seed generator, in sorted name order.

    Matrices: N(0, (gain/sqrt(fan_in))^2) with gain 1.5 (lm_head 2.0); embeddings std 0.8 (untied) or
    3/sqrt(hidden) (tied, so the logits' spread stays about the same);
    every 1-D parameter is perturbed away from its identity-like init.
    """
    g = torch.Generator().manual_seed(seed)
    named = dict(model.named_parameters())
    with torch.no_grad():
        for name in sorted(named):
            p = named[name]
            n = lambda *s: torch.randn(*s, generator=g, dtype=torch.float32)  # noqa: E731
            u = lambda lo, hi, *s: lo + (hi - lo) * torch.rand(*s, generator=g, dtype=torch.float32)  # noqa: E731
            if name.endswith("A_log"):
                v = torch.log(u(0.05, 4.0, p.shape))
            elif name.endswith("dt_bias"):
                v = n(p.shape) * 1.0 - 1.0
            elif name.endswith("linear_attn.norm.weight"):  # plain weight (init ones)
                v = 1.0 + 0.3 * n(p.shape)
            elif p.dim() == 1 and "norm" in name:  # zero-centred norms: stored offset w, scale 1 + w
                v = 0.3 * n(p.shape)
            elif p.dim() == 1:  # vision biases etc.
                v = 0.1 * n(p.shape)
            elif "conv1d" in name:
                v = n(p.shape) / (p.shape[-1] ** 0.5)
            elif "embed_tokens" in name:  # tied: it is also the head, keep logits' std around 3
                v = n(p.shape) * (3.0 / p.shape[1] ** 0.5 if tied else 0.8)
            elif name == "lm_head.weight":
                v = n(p.shape) * (2.0 / p.shape[1] ** 0.5)
            else:
                fan_in = p.shape[1] if p.dim() == 2 else p[0].numel()
                v = n(p.shape) * (1.5 / fan_in ** 0.5)
            p.copy_(v.reshape(p.shape))


def build(name, spec):
    from transformers import (Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration,
                              Qwen3_5TextConfig)
    torch.manual_seed(spec["seed"])
    text = dict(spec["text"], max_position_embeddings=512, eos_token_id=None, bos_token_id=None,
                pad_token_id=None)
    if spec.get("vlm"):
        from transformers import Qwen3_5VisionConfig
        tie = text.pop("tie_word_embeddings")
        cfg = Qwen3_5Config(text_config=Qwen3_5TextConfig(**text, tie_word_embeddings=tie),
                            vision_config=Qwen3_5VisionConfig(**spec["vision"]),
                            image_token_id=250, video_token_id=251, vision_start_token_id=252,
                            vision_end_token_id=253, tie_word_embeddings=tie)
        model = Qwen3_5ForConditionalGeneration(cfg)
    else:
        cfg = Qwen3_5TextConfig(**text)
        model = Qwen3_5ForCausalLM(cfg)
    randomize(model, spec["seed"], tied=model.config.get_text_config().tie_word_embeddings)
    if model.config.get_text_config().tie_word_embeddings:
        model.tie_weights()
    return model


def mtp_tensors(tcfg, seed):
    """Hand-made mtp.* tensors shaped like the published MTP head (model-spec §6.2)."""
    g = torch.Generator().manual_seed(seed + 7)
    H, I = tcfg.hidden_size, tcfg.intermediate_size
    nq, nkv, hd = tcfg.num_attention_heads, tcfg.num_key_value_heads, tcfg.head_dim
    shapes = {
        "mtp.fc.weight": (H, 2 * H),
        "mtp.pre_fc_norm_embedding.weight": (H,),
        "mtp.pre_fc_norm_hidden.weight": (H,),
        "mtp.layers.0.input_layernorm.weight": (H,),
        "mtp.layers.0.post_attention_layernorm.weight": (H,),
        "mtp.layers.0.self_attn.q_proj.weight": (2 * nq * hd, H),
        "mtp.layers.0.self_attn.k_proj.weight": (nkv * hd, H),
        "mtp.layers.0.self_attn.v_proj.weight": (nkv * hd, H),
        "mtp.layers.0.self_attn.o_proj.weight": (H, nq * hd),
        "mtp.layers.0.self_attn.q_norm.weight": (hd,),
        "mtp.layers.0.self_attn.k_norm.weight": (hd,),
        "mtp.layers.0.mlp.gate_proj.weight": (I, H),
        "mtp.layers.0.mlp.up_proj.weight": (I, H),
        "mtp.layers.0.mlp.down_proj.weight": (H, I),
        "mtp.norm.weight": (H,),
    }
    out = {}
    for k in sorted(shapes):
        s = shapes[k]
        v = torch.randn(*s, generator=g) * (0.3 if len(s) == 1 else 1.0 / s[-1] ** 0.5)
        out[k] = v.to(torch.bfloat16)
    return out


def save(name, spec, out_dir):
    from safetensors.torch import load_file, save_file
    model = build(name, spec)
    fp32_extras = {k: v.detach().clone() for k, v in model.state_dict().items()
                   if k.endswith("linear_attn.A_log") or k.endswith("linear_attn.norm.weight")}
    if spec["storage"].startswith("bfloat16"):
        model = model.to(torch.bfloat16)
    d = out_dir / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    model.save_pretrained(d, safe_serialization=True)
    st_path = d / "model.safetensors"
    assert st_path.exists() and not (d / "model.safetensors.index.json").exists()
    if spec["storage"].endswith("+fp32extras") or spec.get("vlm"):
        tensors = load_file(str(st_path))
        if spec["storage"].endswith("+fp32extras"):
            norm = lambda k: k.replace("model.language_model.", "model.")  # noqa: E731
            extras = {norm(k): v for k, v in fp32_extras.items()}
            for k in list(tensors):
                if norm(k) in extras:
                    tensors[k] = extras[norm(k)].to(torch.float32).contiguous()
            assert sum(1 for v in tensors.values() if v.dtype == torch.float32) == len(fp32_extras)
        if spec.get("vlm"):
            tensors.update(mtp_tensors(model.config.text_config, spec["seed"]))
        save_file(tensors, str(st_path), metadata={"format": "pt"})
    if spec.get("vlm"):
        # the published config carries MTP fields in text_config (transformers ignores them)
        cj = json.loads((d / "config.json").read_text())
        cj["text_config"]["mtp_num_hidden_layers"] = 1
        cj["text_config"]["mtp_use_dedicated_embeddings"] = False
        (d / "config.json").write_text(json.dumps(cj, indent=2, sort_keys=True) + "\n")
    # random prompts from a fixed seed
    g = torch.Generator().manual_seed(spec["seed"] + 1)
    vocab = spec["text"]["vocab_size"]
    prompts = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in spec["prompts"]]
    out = reference.make_reference_for_dir(d, prompts, N_GENERATE, extra_meta={
        "fixture": name, "storage": spec["storage"], "seed": spec["seed"],
        "generator": "tools/reference/make_fixtures.py"})
    reference.write_json(d / "reference.json", out)
    refs = out["references"]
    spread = [float(r["logits"].std()) for r in refs]
    mar = torch.cat([r["margins"] for r in refs])
    print(f"{name}: prompts {spec['prompts']} logit std {[round(s, 2) for s in spread]} "
          f"margin median {mar.median():.3f} frac<0.01 {(mar < 0.01).float().mean():.3f} "
          f"cache-match {[r['meta']['generate_with_cache_matches'] for r in refs]}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "models"))
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    reference.assert_pure_pytorch_path()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, spec in CONFIGS.items():
        if a.only and name not in a.only:
            continue
        save(name, spec, out_dir)


if __name__ == "__main__":
    main()

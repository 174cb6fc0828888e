"""Float32 reference computation with transformers' pure-PyTorch Qwen3.5 path.

Shared by make_fixtures.py, shakespeare.py (make-fixtures) and selfcheck.py.
The output layout per prompt is the engine's dump layout (see tests/fixtures/README.md).
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)

FORMAT_VERSION = 1


# ------------------------------------------------------------------ code path
def optional_kernels_installed():
    """Packages that would replace the pure-PyTorch GDN / conv / norm code in transformers."""
    return {name: importlib.util.find_spec(mod) is not None
            for name, mod in (("fla", "fla"), ("causal_conv1d", "causal_conv1d"), ("kernels", "kernels"))}


def assert_pure_pytorch_path():
    inst = optional_kernels_installed()
    bad = [k for k, v in inst.items() if v]
    if bad:
        raise SystemExit(f"refusing to run: optional kernel packages installed: {bad}; "
                         f"the reference must come from the pure-PyTorch fallback")
    from transformers.integrations import hub_kernels
    if getattr(hub_kernels, "_kernels_enabled", False) and importlib.util.find_spec("kernels") is not None:
        raise SystemExit("hub kernels enabled")
    return inst


class CallCounter:
    """Counts calls into the pure-PyTorch helpers of the GDN layer while a forward runs.

    transformers' torch_chunk_gated_delta_rule / torch_recurrent_gated_delta_rule call the module-level
    `l2norm` (FLA kernels do not), and causal_conv1d_fn / causal_conv1d_update call F.conv1d
    (the causal-conv1d CUDA kernel does not).
    """

    def __enter__(self):
        from transformers.models.qwen3_5 import modeling_qwen3_5 as m
        self.m = m
        self.counts = {"l2norm": 0, "conv1d": 0}
        self._l2 = m.l2norm
        self._conv = torch.nn.functional.conv1d

        def l2(*a, **k):
            self.counts["l2norm"] += 1
            return self._l2(*a, **k)

        def conv(*a, **k):
            self.counts["conv1d"] += 1
            return self._conv(*a, **k)

        m.l2norm = l2
        torch.nn.functional.conv1d = conv
        return self

    def __exit__(self, *exc):
        self.m.l2norm = self._l2
        torch.nn.functional.conv1d = self._conv
        return False


# ------------------------------------------------------------------ model loading
def load_fp32(model_dir):
    """Load a model directory (either layout) in float32 with the eager attention path."""
    from transformers import AutoConfig, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration
    cfg = AutoConfig.from_pretrained(model_dir)
    cls = Qwen3_5ForConditionalGeneration if cfg.model_type == "qwen3_5" else Qwen3_5ForCausalLM
    model = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    return model


def text_model(model):
    m = model.model
    return m.language_model if hasattr(m, "language_model") else m


# ------------------------------------------------------------------ reference
def _fwd_logits(model, ids):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].float()


def margins_of(logits):
    top2 = torch.topk(logits, 2, dim=-1).values
    return (top2[:, 0] - top2[:, 1])


def reference_for_prompt(model, prompt_ids, n_generate):
    tm = text_model(model)
    layers = tm.layers
    kinds = list(tm.config.layer_types) if hasattr(tm, "config") else None
    rec = {}
    hooks = []

    def pre(key):
        def f(mod, args, kwargs=None):
            rec[key] = args[0].detach().float().clone()
        return f

    def post(key):
        def f(mod, args, out):
            o = out[0] if isinstance(out, tuple) else out
            rec[key] = o.detach().float().clone()
        return f

    for i, layer in enumerate(layers):
        mixer = layer.self_attn if hasattr(layer, "self_attn") else layer.linear_attn
        hooks.append(layer.input_layernorm.register_forward_pre_hook(pre((i, "mixer", "x"))))
        hooks.append(mixer.register_forward_hook(post((i, "mixer", "u"))))
        hooks.append(layer.post_attention_layernorm.register_forward_pre_hook(pre((i, "ffn", "x"))))
        hooks.append(layer.mlp.register_forward_hook(post((i, "ffn", "u"))))
    hooks.append(tm.norm.register_forward_pre_hook(pre(("final",))))
    try:
        with CallCounter() as cc:
            logits = _fwd_logits(model, prompt_ids)
    finally:
        for h in hooks:
            h.remove()
    n_gdn = sum(1 for k in tm.config.layer_types if k == "linear_attention")
    if n_gdn:
        assert cc.counts["l2norm"] >= 2 * n_gdn and cc.counts["conv1d"] >= n_gdn, cc.counts

    residual = []
    for i in range(len(layers)):
        for s in ("mixer", "ffn"):
            x, u = rec[(i, s, "x")][0], rec[(i, s, "u")][0]
            y = x + u
            residual.append({"layer": i, "sublayer": s, "kind": kinds[i] if kinds else None,
                             "stream_norm": torch.linalg.vector_norm(x, dim=-1),
                             "update_norm": torch.linalg.vector_norm(u, dim=-1),
                             "sum_norm": torch.linalg.vector_norm(y, dim=-1)})
    # consistency: the stream entering layer i's ffn is x+u of its mixer, and so on
    for a, b in zip(residual, residual[1:]):
        assert torch.allclose(a["sum_norm"], b["stream_norm"], rtol=1e-5, atol=1e-6)
    final_norm = torch.linalg.vector_norm(rec[("final",)][0], dim=-1)
    assert torch.allclose(residual[-1]["sum_norm"], final_norm, rtol=1e-5, atol=1e-6)

    # greedy continuation, recomputing the whole sequence each step (no cache)
    seq = list(prompt_ids)
    gen, gen_margins = [], []
    for _ in range(n_generate):
        lg = _fwd_logits(model, seq)[-1]
        top2 = torch.topk(lg, 2)
        nxt = int(top2.indices[0])
        gen.append(nxt)
        gen_margins.append(float(top2.values[0] - top2.values[1]))
        seq.append(nxt)
    # the same with transformers' generate() and its cache (chunked prefill, recurrent decode)
    with torch.no_grad():
        g = model.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                           max_new_tokens=n_generate, min_new_tokens=n_generate,
                           do_sample=False, eos_token_id=None, pad_token_id=None)
    gen_cached = g[0, len(prompt_ids):].tolist()

    return {
        "prompt_ids": list(prompt_ids),
        "generated_ids": gen,
        "logits": logits,
        "margins": margins_of(logits),
        "generated_margins": gen_margins,
        "residual": residual,
        "final_stream_norm": final_norm,
        "meta_prompt": {"generate_with_cache_matches": gen_cached == gen, "generate_with_cache_ids": gen_cached},
    }


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def common_meta(model_dir, model):
    import transformers
    inst = assert_pure_pytorch_path()
    from safetensors import safe_open
    files = sorted(p.name for p in Path(model_dir).iterdir() if p.suffix in (".json", ".safetensors")
                   and p.name != "reference.json")
    dtypes = {}
    with safe_open(str(Path(model_dir) / "model.safetensors"), "pt") as f:
        for k in f.keys():
            dt = str(f.get_slice(k).get_dtype())
            dtypes[dt] = dtypes.get(dt, 0) + 1
    return {
        "format_version": FORMAT_VERSION,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "model_class": type(model).__name__,
        "compute_dtype": "float32",
        "weights": "stored weights converted to float32 (from_pretrained(dtype=torch.float32))",
        "stored_tensor_dtypes": dtypes,
        "attn_implementation": "eager",
        "code_path": {
            "gated_delta_rule": "transformers torch_chunk_gated_delta_rule (pure PyTorch, chunk 64), no cache",
            "conv": "transformers causal_conv1d_fn fallback (torch.nn.functional.conv1d)",
            "norms": "transformers Qwen3_5RMSNorm / Qwen3_5RMSNormGated (PyTorch)",
            "verified_by_call_counting": True,
        },
        "optional_kernels_installed": inst,
        "torch_num_threads": torch.get_num_threads(),
        "greedy": "argmax of the last position's logits, whole sequence recomputed each step, eos ignored",
        "file_sha256": {n: sha256(Path(model_dir) / n) for n in files},
    }


def make_reference_for_dir(model_dir, prompts, n_generate, extra_meta=None):
    model = load_fp32(model_dir)
    meta = common_meta(model_dir, model)
    if extra_meta:
        meta.update(extra_meta)
    refs = []
    for p in prompts:
        r = reference_for_prompt(model, p, n_generate)
        m = dict(meta)
        m.update(r.pop("meta_prompt"))
        r["meta"] = m
        refs.append(r)
    return {"format_version": FORMAT_VERSION, "references": refs}


# ------------------------------------------------------------------ JSON writing
def f32(x):
    """Shortest decimal string that round-trips the float32 value."""
    v = np.float32(x)
    if not np.isfinite(v):
        raise ValueError(f"non-finite value {v}")
    s = str(v)  # numpy gives the shortest round-trip repr for float32
    return s


def _num_list(t):
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().float().numpy().ravel().tolist()
    return "[" + ",".join(f32(x) for x in t) + "]"


def _int_list(t):
    return "[" + ",".join(str(int(x)) for x in t) + "]"


FLOAT_KEYS = {"margins", "generated_margins", "stream_norm", "update_norm", "sum_norm", "final_stream_norm"}


def _dump_ref(r, ind):
    p = ind + "  "
    parts = []
    parts.append(f'{p}"prompt_ids": {_int_list(r["prompt_ids"])}')
    parts.append(f'{p}"generated_ids": {_int_list(r["generated_ids"])}')
    rows = ",\n".join(f"{p}  {_num_list(row)}" for row in r["logits"])
    parts.append(f'{p}"logits": [\n{rows}\n{p}]')
    parts.append(f'{p}"margins": {_num_list(r["margins"])}')
    parts.append(f'{p}"generated_margins": {_num_list(r["generated_margins"])}')
    res = []
    for e in r["residual"]:
        res.append(f'{p}  {{"layer": {e["layer"]}, "sublayer": {json.dumps(e["sublayer"])}, '
                   f'"kind": {json.dumps(e["kind"])},\n{p}   "stream_norm": {_num_list(e["stream_norm"])},\n'
                   f'{p}   "update_norm": {_num_list(e["update_norm"])},\n'
                   f'{p}   "sum_norm": {_num_list(e["sum_norm"])}}}')
    parts.append(f'{p}"residual": [\n' + ",\n".join(res) + f"\n{p}]")
    parts.append(f'{p}"final_stream_norm": {_num_list(r["final_stream_norm"])}')
    parts.append(f'{p}"meta": {json.dumps(r["meta"], sort_keys=True, ensure_ascii=False)}')
    return ind + "{\n" + ",\n".join(parts) + "\n" + ind + "}"


def write_json(path, out):
    body = ",\n".join(_dump_ref(r, "  ") for r in out["references"])
    text = '{"format_version": %d,\n "references": [\n%s\n ]\n}\n' % (out["format_version"], body)
    json.loads(text)  # must be valid JSON
    Path(path).write_text(text)

"""Build the embedded default model models/tiny-shakespeare/.

Subcommands (run from the repository root, with the venv's python):
  train-tokenizer   byte-level BPE on the first 90 % of the corpus -> .work/tokenizer/
                    also writes models/tiny-shakespeare/tokenizer{,_config}.json
  vectors           tests/fixtures/tokenizer/tiny-shakespeare-vectors.jsonl
  train-model       trains Qwen3_5ForCausalLM (1 thread), checkpoints in .work/
  export            bf16 HF directory + MODEL_CARD.md in models/tiny-shakespeare/
  make-fixtures     tests/fixtures/default-model/reference.json (float32 reference)
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import json
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

CORPUS = ROOT.parent / "shared" / "data" / "corpus" / "tinyshakespeare.txt"
WORK = HERE / ".work"
MODEL_DIR = ROOT / "models" / "tiny-shakespeare"
VECTORS = ROOT / "tests" / "fixtures" / "tokenizer" / "tiny-shakespeare-vectors.jsonl"
FIXTURE_DIR = ROOT / "tests" / "fixtures" / "default-model"

# model-spec §8, Qwen3.5 pre-tokenizer regex (letters may carry combining marks).
QWEN35_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
BPE_VOCAB = 2995  # regular tokens (256 byte symbols + merges)
ADDED = [  # (content, special) -- ids follow the regular vocabulary, as in Qwen
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<think>", False),
    ("</think>", False),
]
EMBED_ROWS = 3008  # > tokenizer size (3000): a few unused rows, like Qwen's 248320 > 248077

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def read_corpus():
    text = CORPUS.read_text(encoding="utf-8")
    cut = int(len(text) * 0.9)
    return text[:cut], text[cut:]


# ---------------------------------------------------------------- tokenizer
def build_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import AddedToken

    train_text, _ = read_corpus()
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False, special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    # Feed the training split in line-aligned pieces (deterministic order).
    lines = train_text.splitlines(keepends=True)
    pieces = ["".join(lines[i:i + 200]) for i in range(0, len(lines), 200)]
    tok.train_from_iterator(pieces, trainer=trainer, length=len(pieces))
    assert tok.get_vocab_size() == BPE_VOCAB, tok.get_vocab_size()
    tok.add_tokens([AddedToken(c, special=s, normalized=False, lstrip=False, rstrip=False, single_word=False)
                    for c, s in ADDED])
    for i, (c, _) in enumerate(ADDED):
        assert tok.token_to_id(c) == BPE_VOCAB + i
    return tok


def cmd_train_tokenizer(args):
    tok = build_tokenizer()
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    # Write it in the shape of Qwen's own tokenizer.json: the Python constructors of decoders.ByteLevel ignore
    # their options when serialising, and the BPE model writes null for the empty prefix/suffix.
    from tokenizers import Tokenizer
    j = json.loads(tok.to_str())
    j["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    j["model"]["continuing_subword_prefix"] = ""
    j["model"]["end_of_word_suffix"] = ""
    text = json.dumps(j, ensure_ascii=False, separators=(",", ":"))
    check = Tokenizer.from_str(text)
    sample = read_corpus()[1][:5000] + " <|im_start|>x<|im_end|> <think>"
    assert check.encode(sample).ids == tok.encode(sample).ids
    assert check.decode(check.encode(sample).ids, skip_special_tokens=False) == sample
    (MODEL_DIR / "tokenizer.json").write_text(text, encoding="utf-8")
    added_decoder = {
        str(BPE_VOCAB + i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                             "single_word": False, "special": s}
        for i, (c, s) in enumerate(ADDED)
    }
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added_decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 1024,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    (MODEL_DIR / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    train_text, val_text = read_corpus()
    n_train = len(tok.encode(train_text).ids)
    n_val = len(tok.encode(val_text).ids)
    print(f"tokenizer: {tok.get_vocab_size()} tokens; train {len(train_text)} chars -> {n_train} tokens, "
          f"val {len(val_text)} chars -> {n_val} tokens")


def load_tokenizer():
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))


def cmd_vectors(args):
    from tokenizer_vectors import VECTOR_TEXTS
    tok = load_tokenizer()
    VECTORS.parent.mkdir(parents=True, exist_ok=True)
    train_text, val_text = read_corpus()
    texts = list(VECTOR_TEXTS)
    texts.append(val_text[:600])  # a longer held-out passage
    with open(VECTORS, "w", encoding="utf-8", newline="\n") as f:
        for t in texts:
            enc = tok.encode(t)  # add_special_tokens=True is a no-op: no template
            assert tok.decode(enc.ids, skip_special_tokens=False) == __import__("unicodedata").normalize("NFC", t)
            f.write(json.dumps({"text": t, "ids": enc.ids}, ensure_ascii=False) + "\n")
    print(f"wrote {len(texts)} vectors to {VECTORS}")


# ---------------------------------------------------------------- model
def model_config():
    from transformers import Qwen3_5TextConfig
    tok_size = BPE_VOCAB + len(ADDED)
    return Qwen3_5TextConfig(
        vocab_size=EMBED_ROWS,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=8,
        layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        linear_num_key_heads=4,
        linear_num_value_heads=8,
        linear_key_head_dim=32,
        linear_value_head_dim=32,
        linear_conv_kernel_dim=4,
        rms_norm_eps=1e-6,
        max_position_embeddings=1024,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        tie_word_embeddings=True,
        eos_token_id=BPE_VOCAB + 2,
        pad_token_id=BPE_VOCAB,
        bos_token_id=None,
        initializer_range=0.02,
    )


def setup_torch():
    import torch
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    return torch


def token_streams():
    import numpy as np
    cache = WORK / "tokens.npz"
    if cache.exists():
        d = np.load(cache)
        return d["train"], d["val"]
    tok = load_tokenizer()
    train_text, val_text = read_corpus()
    tr = np.array(tok.encode(train_text).ids, dtype=np.int32)
    va = np.array(tok.encode(val_text).ids, dtype=np.int32)
    pad = tok.token_to_id("<|endoftext|>")
    assert not (tr >= BPE_VOCAB).any() and not (va >= BPE_VOCAB).any(), "added tokens in data"
    assert not (tr == pad).any()
    WORK.mkdir(parents=True, exist_ok=True)
    np.savez(cache, train=tr, val=va)
    return tr, va


def evaluate(model, data, seq, torch, max_windows=None):
    import numpy as np
    model.eval()
    n = (len(data) - 1) // seq
    if max_windows:
        n = min(n, max_windows)
    tot, cnt = 0.0, 0
    with torch.no_grad():
        for i in range(0, n, 8):
            idx = range(i, min(n, i + 8))
            x = torch.tensor(np.stack([data[j * seq:(j * seq) + seq] for j in idx]), dtype=torch.long)
            y = torch.tensor(np.stack([data[j * seq + 1:(j * seq) + seq + 1] for j in idx]), dtype=torch.long)
            logits = model(input_ids=x).logits.float()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                                     reduction="sum")
            tot += loss.item()
            cnt += y.numel()
    model.train()
    return tot / cnt


def cmd_train_model(args):
    torch = setup_torch()
    import numpy as np
    from transformers import Qwen3_5ForCausalLM
    train, val = token_streams()
    seq, bs = args.seq, args.batch
    torch.manual_seed(1234)
    cfg = model_config()
    model = Qwen3_5ForCausalLM(cfg)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"params {nparams} train tokens {len(train)} val tokens {len(val)}", flush=True)
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    total = args.steps
    warm = min(100, total // 10)

    def lr_at(s):
        if s < warm:
            return args.lr * (s + 1) / warm
        p = (s - warm) / max(1, total - warm)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))

    ckpt = WORK / "ckpt.pt"
    step, elapsed, history, best = 0, 0.0, [], float("inf")
    rng = np.random.default_rng(42)
    if args.anneal_from:
        # Branch off a checkpoint (the best one, before overfitting set in) and anneal the learning rate
        # from --lr to --lr-end over --steps more steps (cosine).
        st = torch.load(args.anneal_from, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, elapsed, history, best = st["step"], st["elapsed"], st["history"], st["best"]
        rng = np.random.default_rng(4242)
        torch.set_rng_state(st["torch_rng"])
        step0, total = step, step + args.steps

        def lr_at(s):  # noqa: F811
            p = min(1.0, (s - step0) / args.steps)
            return args.lr_end + (args.lr - args.lr_end) * 0.5 * (1 + math.cos(math.pi * p))
        print(f"annealing from step {step} (best {best:.4f}) over {args.steps} steps, lr {args.lr} -> "
              f"{args.lr_end}", flush=True)
    elif ckpt.exists() and not args.fresh:
        st = torch.load(ckpt, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, elapsed, history = st["step"], st["elapsed"], st["history"]
        rng.bit_generator.state = st["rng"]
        best = st.get("best", best)
        torch.set_rng_state(st["torch_rng"])
        print(f"resumed at step {step}, {elapsed:.0f}s", flush=True)

    def save(path=ckpt):
        tmp = path.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "elapsed": elapsed,
                    "history": history, "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
                    "args": vars(args), "params": nparams, "best": best}, tmp)
        os.replace(tmp, path)

    model.train()
    t_last_save = time.time()
    t0 = time.time() - elapsed
    ema = None
    while step < total and (time.time() - t0) < args.max_seconds:
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = rng.integers(0, len(train) - seq - 1, size=bs)
        x = torch.tensor(np.stack([train[s:s + seq] for s in starts]), dtype=torch.long)
        y = torch.tensor(np.stack([train[s + 1:s + seq + 1] for s in starts]), dtype=torch.long)
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        elapsed = time.time() - t0
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 20 == 0 or step == 1:
            print(f"step {step}/{total} loss {loss.item():.4f} ema {ema:.4f} lr {lr_at(step):.2e} "
                  f"t {elapsed:.0f}s ({step / max(elapsed, 1e-9):.3f} steps/s)", flush=True)
        if step % args.eval_every == 0 or step == total:
            vl = evaluate(model, val, seq, torch)
            history.append({"step": step, "elapsed": round(elapsed, 1), "train_ema": round(ema, 4),
                            "val_loss": round(vl, 4)})
            print(f"EVAL step {step} val {vl:.4f}", flush=True)
            if vl < best:
                best = vl
                save(WORK / "best.pt")
                print(f"new best {vl:.4f} at step {step}", flush=True)
        if time.time() - t_last_save > args.save_every:
            save()
            t_last_save = time.time()
    save()
    print(f"done: step {step} elapsed {elapsed:.0f}s", flush=True)


# ---------------------------------------------------------------- export
def unigram_baseline(train, val, vocab):
    import numpy as np
    counts = np.bincount(train, minlength=vocab).astype(np.float64)
    p_train = counts / counts.sum()
    nz = p_train[p_train > 0]
    h_train = float(-(nz * np.log(nz)).sum())
    # add-1/2 smoothing over the regular vocabulary so tokens unseen in training get finite cost
    sm = (counts[:BPE_VOCAB] + 0.5) / (counts[:BPE_VOCAB].sum() + 0.5 * BPE_VOCAB)
    ce_val = float(-np.log(sm[val]).mean())
    return h_train, ce_val


def cmd_export(args):
    torch = setup_torch()
    from transformers import GenerationConfig, Qwen3_5ForCausalLM
    train, val = token_streams()
    # export the checkpoint with the best full validation loss (early stopping)
    st = torch.load(WORK / ("best.pt" if (WORK / "best.pt").exists() else "ckpt.pt"), weights_only=False)
    final = torch.load(WORK / "ckpt.pt", weights_only=False)
    cfg = model_config()
    model = Qwen3_5ForCausalLM(cfg)
    model.load_state_dict(st["model"])
    model.eval()
    seq = st["args"]["seq"]
    t_eval = time.time()
    val_loss = evaluate(model, val, seq, torch)
    train_loss = evaluate(model, train[: len(val) + 1], seq, torch)  # same-size slice of the train split
    print(f"eval fp32: train {train_loss:.4f} val {val_loss:.4f} ({time.time() - t_eval:.0f}s)", flush=True)
    h_train, ce_val = unigram_baseline(train, val, EMBED_ROWS)
    # bf16 export
    mb = model.to(torch.bfloat16)
    val_loss_bf16 = evaluate(mb, val, seq, torch)
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    for f in ("model.safetensors", "config.json", "generation_config.json"):
        (MODEL_DIR / f).unlink(missing_ok=True)
    mb.generation_config = GenerationConfig(eos_token_id=[BPE_VOCAB + 2, BPE_VOCAB], pad_token_id=BPE_VOCAB,
                                            bos_token_id=None, do_sample=False)
    mb.save_pretrained(MODEL_DIR, safe_serialization=True)
    # samples on the bf16 weights converted to fp32 (what the engine's CPU backend computes)
    from transformers import AutoModelForCausalLM
    m32 = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32)
    m32.eval()
    tok = load_tokenizer()
    prompts = ["ROMEO:\n", "First Citizen:\nWhat say you to the"]
    samples = []
    for k, p in enumerate(prompts):
        ids = torch.tensor([tok.encode(p).ids])
        g = m32.generate(ids, max_new_tokens=80, do_sample=False, eos_token_id=None, pad_token_id=BPE_VOCAB)
        torch.manual_seed(7 + k)
        s = m32.generate(ids, max_new_tokens=80, do_sample=True, temperature=0.8, top_k=40, eos_token_id=None,
                         pad_token_id=BPE_VOCAB)
        samples.append((p, tok.decode(g[0, ids.shape[1]:].tolist()), tok.decode(s[0, ids.shape[1]:].tolist())))
    info = {
        "params": st["params"], "steps": st["step"], "train_seconds": round(st["elapsed"], 1),
        "args": st["args"], "train_loss": train_loss, "val_loss": val_loss, "val_loss_bf16": val_loss_bf16,
        "unigram_train_entropy": h_train, "unigram_val_cross_entropy": ce_val, "history": st["history"],
        "train_tokens": int(len(train)), "val_tokens": int(len(val)),
        "final_step": final["step"], "final_elapsed": round(final["elapsed"], 1),
        "summary": training_summary(torch, st, final),
    }
    (WORK / "export_info.json").write_text(json.dumps(info, indent=1))
    write_model_card(cfg, info, samples)
    print(json.dumps({k: v for k, v in info.items() if k != "history"}, indent=1))
    for p, g, s in samples:
        print("PROMPT", repr(p), "\nGREEDY", repr(g), "\nSAMPLED", repr(s))


def training_summary(torch, best, final):
    """Describe the training phases from the checkpoints and logs in .work/."""
    import re

    def parse(log):
        evals, last_t, last_step = [], 0.0, 0
        if log.exists():
            for ln in log.read_text().splitlines():
                m = re.match(r"EVAL step (\d+) val ([0-9.]+)", ln)
                if m:
                    evals.append((int(m.group(1)), float(m.group(2))))
                m = re.match(r"step (\d+)/\d+ .* t (\d+)s", ln)
                if m:
                    last_step, last_t = int(m.group(1)), float(m.group(2))
        return evals, last_step, last_t

    anneal_from = final["args"].get("anneal_from")
    main_log = WORK / ("train_main.log" if (WORK / "train_main.log").exists() else "train.log")
    main_evals, main_last, main_t = parse(main_log)
    out = {"main_args": best["args"], "main_evals": main_evals, "main_last_step": main_last, "main_wall_s": main_t}
    total = main_t
    if anneal_from:
        base = torch.load(anneal_from, weights_only=False)
        out["main_args"] = base["args"]
        a_evals, a_last, _ = parse(WORK / "train_anneal.log")
        out["anneal"] = {"args": final["args"], "from_step": base["step"], "evals": a_evals,
                         "last_step": final["step"], "wall_s": final["elapsed"] - base["elapsed"]}
        total += out["anneal"]["wall_s"]
    out["total_wall_s"] = total
    return out


def training_lines(info, tokens_seen):
    sm = info["summary"]
    m = sm["main_args"]
    L = [f"- main run: AdamW (betas 0.9/0.95, weight decay 0.1 on matrices, grad clip 1.0), batch {m['batch']} x"
         f" {m['seq']} tokens, peak lr {m['lr']}, linear warmup then cosine to 10 % planned over {m['steps']} steps;"
         f" validation loss (whole split) at steps "
         + ", ".join(f"{st}: {v:.3f}" for st, v in sm["main_evals"])
         + f". It started to overfit after step {min(sm['main_evals'], key=lambda e: e[1])[0]}"
         f" (train loss kept falling, validation rose) and was stopped by hand at step {sm['main_last_step']}"
         f" after {sm['main_wall_s'] / 60:.1f} min."]
    if "anneal" in sm:
        an = sm["anneal"]
        L.append(f"- anneal: branched from the step-{an['from_step']} checkpoint, {an['args']['steps']} more steps with the"
                 f" learning rate going from {an['args']['lr']} to {an['args']['lr_end']} (cosine), same batch;"
                 f" validation loss at steps " + ", ".join(f"{st}: {v:.3f}" for st, v in an["evals"])
                 + f"; {an['wall_s'] / 60:.1f} min.")
    L.append(f"- exported: the checkpoint with the best validation loss, **step {info['steps']}**"
             f" ({tokens_seen:,} tokens seen, {tokens_seen / info['train_tokens']:.1f} epochs of the training split)")
    L.append(f"- **total training wall time {sm['total_wall_s'] / 60:.1f} min** (including the discarded overfitting"
             f" steps and the periodic evaluations)")
    return L


def write_model_card(cfg, info, samples):
    import torch
    import transformers
    a = info["args"]
    tokens_seen = info["steps"] * a["batch"] * a["seq"]
    lines = [
        "# tiny-shakespeare (Tributary's embedded default model)",
        "",
        "A tiny Qwen3.5-architecture text decoder (`Qwen3_5ForCausalLM`, `model_type` `qwen3_5_text`) trained",
        "from scratch on the first 90 % of tinyshakespeare (karpathy/char-rnn), validated on the last 10 %.",
        "It exists so the server has a real, small model to load, test and demo. It is not useful for anything else.",
        "",
        "## Architecture",
        "",
        f"- {cfg.num_hidden_layers} layers, `layer_types` = {cfg.layer_types}",
        f"  (GDN linear attention, every fourth layer gated full attention)",
        f"- hidden {cfg.hidden_size}, SwiGLU MLP {cfg.intermediate_size}",
        f"- full attention: {cfg.num_attention_heads} query heads / {cfg.num_key_value_heads} KV heads x {cfg.head_dim},"
        f" partial RoPE factor {cfg.rope_parameters['partial_rotary_factor']}, theta {cfg.rope_parameters['rope_theta']}",
        f"- GDN: {cfg.linear_num_key_heads} key heads x {cfg.linear_key_head_dim}, {cfg.linear_num_value_heads} value heads"
        f" x {cfg.linear_value_head_dim}, conv kernel {cfg.linear_conv_kernel_dim}",
        f"- vocab: {BPE_VOCAB + len(ADDED)} tokenizer tokens, {cfg.vocab_size} embedding rows (the last"
        f" {cfg.vocab_size - BPE_VOCAB - len(ADDED)} unused); tied embeddings; rms_norm_eps {cfg.rms_norm_eps}",
        f"- **{info['params']:,} parameters** (tied embedding counted once), stored in bfloat16 (model.safetensors)",
        "",
        "## Tokenizer",
        "",
        f"Byte-level BPE trained with HF `tokenizers` on the training split: NFC normalizer, Split with the Qwen3.5",
        f"regex (model-spec §8, with `\\p{{M}}`), behavior isolated, then ByteLevel (no prefix space, no regex);",
        f"ByteLevel decoder; {BPE_VOCAB} regular tokens (ids 0..{BPE_VOCAB - 1}) and added tokens "
        + ", ".join(f"`{c}` = {BPE_VOCAB + i}" for i, (c, _) in enumerate(ADDED)) + ".",
        "eos `<|im_end|>`, pad `<|endoftext|>` (never present in the training data), no BOS; ChatML chat template.",
        "generation_config.json stops on both `<|im_end|>` and `<|endoftext|>`. The model was trained on plain text",
        "only, so it has never seen the special tokens; chat prompts work mechanically but not meaningfully.",
        "",
        "## Training",
        "",
        f"- data: {info['train_tokens']:,} training tokens, {info['val_tokens']:,} validation tokens",
    ] + training_lines(info, tokens_seen) + [
        f"- all training on ONE CPU thread (torch.set_num_threads(1)), float32,"
        f" torch {torch.__version__}, transformers {transformers.__version__}",
        "",
        "## Results (nats per token, whole splits, float32)",
        "",
        "| quantity | value |",
        "|---|---|",
        f"| train loss (model, a validation-sized slice of the train split) | {info['train_loss']:.4f} |",
        f"| **validation loss (model)** | **{info['val_loss']:.4f}** (perplexity {math.exp(info['val_loss']):.1f}) |",
        f"| validation loss, bf16 weights and bf16 compute | {info['val_loss_bf16']:.4f} |",
        f"| unigram baseline: train-split unigram distribution on the validation split (add-1/2 smoothing) |"
        f" {info['unigram_val_cross_entropy']:.4f} |",
        f"| unigram entropy of the training split | {info['unigram_train_entropy']:.4f} |",
        "",
        "Evaluation uses non-overlapping windows of the training sequence length.",
        "Validation loss along the path of the exported checkpoint (full validation split; minutes = training"
        " time along that path):",
        "",
        "| step | minutes | train loss (EMA) | validation loss |",
        "|---|---|---|---|",
    ] + [f"| {h['step']} | {h['elapsed'] / 60:.1f} | {h['train_ema']:.3f} | {h['val_loss']:.3f} |"
         for h in info["history"]] + [
        "",
        "## Samples (bf16 weights converted to float32)",
        "",
    ]
    for k, (p, g, s) in enumerate(samples):
        lines += [f"Prompt `{p!r}`, greedy, 80 tokens:", "", "```", p + g, "```", "",
                  f"Sampled (temperature 0.8, top-k 40, torch.manual_seed({7 + k})):", "", "```", p + s, "```", ""]
    lines += ["## Reproduce", "", "See tools/reference/README.md (`train-tokenizer`, `train-model`, `export`;"
              " the exact training commands used are listed there). Training is not bit-reproducible.", ""]
    (MODEL_DIR / "MODEL_CARD.md").write_text("\n".join(lines))


# ---------------------------------------------------------------- fixtures
def cmd_make_fixtures(args):
    torch = setup_torch()
    import reference
    tok = load_tokenizer()
    texts = [
        "ROMEO:\nBut, soft! what light through yonder window breaks?\n",
        "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\nFirst Citizen:\n",
        "KING RICHARD II:\nNow is the",
    ]
    prompts = [tok.encode(t).ids for t in texts]
    out = reference.make_reference_for_dir(MODEL_DIR, prompts, n_generate=32, extra_meta={
        "model_dir": "models/tiny-shakespeare", "prompt_texts": texts})
    FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    reference.write_json(FIXTURE_DIR / "reference.json", out)
    for r, t in zip(out["references"], texts):
        print(repr(t), "->", repr(tok.decode(r["generated_ids"])))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("train-tokenizer")
    sub.add_parser("vectors")
    p = sub.add_parser("train-model")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--max-seconds", type=float, default=3600)
    p.add_argument("--save-every", type=float, default=180)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--fresh", action="store_true")
    p.add_argument("--anneal-from", default=None, help="checkpoint to branch from for an LR anneal")
    p.add_argument("--lr-end", type=float, default=5e-5)
    sub.add_parser("export")
    sub.add_parser("make-fixtures")
    a = ap.parse_args()
    {"train-tokenizer": cmd_train_tokenizer, "vectors": cmd_vectors, "train-model": cmd_train_model,
     "export": cmd_export, "make-fixtures": cmd_make_fixtures}[a.cmd](a)


if __name__ == "__main__":
    main()

"""Re-load every committed fixture and check that it is consistent.

Run from the repository root:  tools/reference/.venv/bin/python tools/reference/selfcheck.py
Checks, per tests/fixtures/models/<name>/ and tests/fixtures/default-model/:
  - the model files' sha256 match the ones recorded in reference.json (meta.file_sha256)
  - the JSON structure: shapes of logits / margins / residual entries, margins recomputed from the stored logits,
    sum_norm of each sublayer == stream_norm of the next, last sum_norm == final_stream_norm
  - transformers loads the directory; logits, residual norms and greedy continuation recomputed for one prompt
    (the longest) agree with the stored ones (max|a-b| <= 1e-5 * max|ref|)
And the tokenizer vectors re-encode identically with the HF tokenizers library.
Exit status 0 when everything passes.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import reference  # noqa: E402

TOL = 1e-5
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("  FAIL:", msg)
    return cond


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def check_fixture(ref_path, model_dir):
    print(f"{ref_path.relative_to(ROOT)} (model {model_dir.relative_to(ROOT)})")
    data = json.loads(ref_path.read_text())
    refs = data["references"]
    meta0 = refs[0]["meta"]
    for name, h in meta0["file_sha256"].items():
        check(reference.sha256(model_dir / name) == h, f"{model_dir}/{name}: sha256 differs from reference meta")
    model = reference.load_fp32(model_dir)
    tcfg = model.config.get_text_config()
    V, nl = tcfg.vocab_size, tcfg.num_hidden_layers
    for r in refs:
        n = len(r["prompt_ids"])
        lg = np.array(r["logits"], dtype=np.float32)
        check(lg.shape == (n, V), f"logits shape {lg.shape} != {(n, V)}")
        top2 = np.sort(lg, axis=1)[:, -2:]
        check(np.allclose(top2[:, 1] - top2[:, 0], r["margins"], rtol=1e-5, atol=1e-5), "margins != top-2 gap")
        check(len(r["generated_ids"]) == len(r["generated_margins"]), "generated margins length")
        res = r["residual"]
        check([(e["layer"], e["sublayer"]) for e in res] == [(i, s) for i in range(nl) for s in ("mixer", "ffn")],
              "residual entries order")
        for e in res:
            check(e["kind"] == tcfg.layer_types[e["layer"]], "residual kind")
            check(all(len(e[k]) == n for k in ("stream_norm", "update_norm", "sum_norm")), "residual lengths")
        for a, b in zip(res, res[1:]):
            check(rel_err(a["sum_norm"], b["stream_norm"]) < 1e-5, f"sum_norm/stream_norm chain at {b['layer']}")
        check(rel_err(res[-1]["sum_norm"], r["final_stream_norm"]) < 1e-5, "final_stream_norm")
        check(r["meta"]["optional_kernels_installed"] == {"fla": False, "causal_conv1d": False, "kernels": False},
              "fixture was made with optional kernels installed")
    # recompute the longest prompt
    r = max(refs, key=lambda x: len(x["prompt_ids"]))
    new = reference.reference_for_prompt(model, r["prompt_ids"], len(r["generated_ids"]))
    e1 = rel_err(new["logits"].numpy(), r["logits"])
    check(e1 <= TOL, f"logits differ: rel {e1:.2e}")
    e2 = max(rel_err(a[k].numpy(), b[k]) for a, b in zip(new["residual"], r["residual"])
             for k in ("stream_norm", "update_norm", "sum_norm"))
    check(e2 <= TOL, f"residual norms differ: rel {e2:.2e}")
    check(new["generated_ids"] == r["generated_ids"], "greedy continuation differs")
    print(f"  ok: {len(refs)} prompts {[len(x['prompt_ids']) for x in refs]}, vocab {V}, layers {nl}; "
          f"recomputed prompt of {len(r['prompt_ids'])}: logits rel err {e1:.1e}, residual rel err {e2:.1e}")


def check_vectors():
    from tokenizers import Tokenizer
    p = ROOT / "tests" / "fixtures" / "tokenizer" / "tiny-shakespeare-vectors.jsonl"
    tok = Tokenizer.from_file(str(ROOT / "models" / "tiny-shakespeare" / "tokenizer.json"))
    lines = p.read_text(encoding="utf-8").splitlines()
    bad = 0
    for ln in lines:
        o = json.loads(ln)
        if tok.encode(o["text"]).ids != o["ids"]:
            bad += 1
    check(bad == 0, f"{bad} tokenizer vectors differ")
    print(f"{p.relative_to(ROOT)}: {len(lines)} vectors, {bad} mismatches")


def main():
    reference.assert_pure_pytorch_path()
    for d in sorted((ROOT / "tests" / "fixtures" / "models").iterdir()):
        if (d / "reference.json").exists():
            check_fixture(d / "reference.json", d)
    dm = ROOT / "tests" / "fixtures" / "default-model" / "reference.json"
    if dm.exists():
        model_dir = ROOT / json.loads(dm.read_text())["references"][0]["meta"]["model_dir"]
        check_fixture(dm, model_dir)
    else:
        check(False, "tests/fixtures/default-model/reference.json missing")
    if (ROOT / "models" / "tiny-shakespeare" / "tokenizer.json").exists():
        check_vectors()
    print("SELFCHECK", "FAILED: %d problems" % len(failures) if failures else "PASSED")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

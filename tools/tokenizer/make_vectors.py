#!/usr/bin/env python3
"""Writes the tokenizer test vectors with HF tokenizers (the reference):

  tests/engine/tokenizer/testdata/qwen3_vectors.jsonl
      hand-written tricky strings + seeded random multilingual strings,
      encoded with the official Qwen3 tokenizer (../shared/data/...).
  tests/engine/tokenizer/testdata/qwen35_tiny/{tokenizer.json,
      tokenizer_config.json}
      a tiny byte-level BPE trained here with the Qwen3.5 pre-tokenizer regex
      (\\p{M} joins letters), with added tokens carrying every flag
      (lstrip, rstrip, single_word, normalized), to test that code path.
  tests/engine/tokenizer/testdata/qwen35_tiny_vectors.jsonl

Each vector line: {"text": ..., "ids": [...], "decoded": ...} where decoded
is HF's decode(ids, skip_special_tokens=False).

Usage: tools/tokenizer/.venv/bin/python tools/tokenizer/make_vectors.py
"""

import json
import os

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,
                        normalizers, pre_tokenizers, trainers)

import textgen

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHARED = os.path.join(ROOT, "..", "shared", "data", "tokenizers", "qwen3")
OUT = os.path.join(ROOT, "tests", "engine", "tokenizer", "testdata")
QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+"
                  r"|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CURATED = [
    "", " ", "  ", "\n", "\r\n", "\t", "Hello world", " Hello world",
    "Hello World!", "hello\n\nworld", "a  b   c    d", "trailing   ",
    "   leading", "tab\tseparated\tvalues", "line1\r\nline2\r\n\r\nline3",
    "mixed \t \n \r\n  \u3000 \xa0 spaces", "\u2028\u2029\x85\x0b\x0c",
    "DON'T", "don't", "I'M HERE", "'S", "'s", "'ll've'd", "we'RE 'Ve 'LL",
    "'ſx", "l'été", "rock 'n' roll", "''quoted''", "it’s",
    "1234567890", "3.14 + 2.71 = 5.85", "٣٤٥ ०१२ １２３ ² ½ Ⅻ",
    "e\u0301cole", "A\u030angstro\u0308m", "\u1100\u1161\u11a8\u1102\u1165",
    "\u1112\u1161\u11ab\u1100\u1173\u11af", "Z\u0301\u0327\u0308 zalgo\u0336",
    "नमस्ते दुनिया", "क़िला", "مرحبا بالعالم", "ภาษาไทยง่ายนิดเดียว", "한국어 텍스트",
    "日本語のテキスト、東京。", "中文：你好，世界！", "Ελληνικά και Русский",
    "👨\u200d👩\u200d👧\u200d👦 family", "🇯🇵🇫🇷🇩🇪", "🤦🏻\u200d♂️", "❤️ 1️⃣ #️⃣",
    "🏳️\u200d🌈", "emoji😀in😀text", "<|im_start|>user\nhi<|im_end|>\n",
    "<|im_end|>", "<|endoftext|><|endoftext|>", "x<|im_end|>y",
    "<think>\nreasoning\n</think>\n\nanswer", "<|im_end|", "<|IM_END|>",
    "<|im_end |>", "<<|im_start|>>", "< think>", "<thinking>", "<|>",
    "<tool_call>{\"a\": 1}</tool_call>", "def f(x):\n    return x ** 2\n",
    "    indented\n        more\n", "{\"key\": [1, 2, 3]}", "a\x00b\x01c\x7f",
    "\ufeffBOM", "zero\u200bwidth", "\u180emongolian", "ﬁ ﬂ ﬃ", "İıŞş",
    "Straße STRASSE", "...!!!???", "—–-", "«»“”„", "a\n\n\n\nb",
    "end with newline\n", " \n \n ", "\n \n", "x \n", "x  \ny", "x\t \ty",
    "x\u3000\u3000y", "$100.00 & 50%", "user@example.com", "https://a.b/c?d=e",
]

TINY_ADDED = [
    AddedToken("<|endoftext|>", special=True, normalized=False),
    AddedToken("<|im_start|>", special=True, normalized=False),
    AddedToken("<|im_end|>", special=True, normalized=False),
    AddedToken("<think>", special=False, normalized=False),
    AddedToken("</think>", special=False, normalized=False),
    AddedToken("<|mask|>", special=True, lstrip=True, rstrip=True,
               normalized=False),
    AddedToken("word", special=False, single_word=True, normalized=False),
    AddedToken("cafe\u0301!", special=False, normalized=True),
    AddedToken("hi there", special=False, normalized=False),
]
TINY_CURATED = [
    "a <|mask|> b", "a   <|mask|>   b", "<|mask|>", " <|mask|>\n\nx",
    "word", "a word here", "password words wordy", "word.word", "(word)",
    "café! and cafe\u0301! and CAFÉ!", "say hi there!", "hithere hi  there",
    "<think>x</think>", "<|im_start|>user\nhi<|im_end|>", "नमस्ते", "क़िला",
    "e\u0301e\u0301e\u0301", "\u0301\u0301start", "x\u0301\u0302 y\u20dd",
    "ภาษาไทย", "مَرْحَبًا", "'s 'S 'ſ", "Hello World", "  \n  ",
]
TINY_CONFIG = {
    "add_bos_token": False,
    "eos_token": "<|im_end|>",
    "pad_token": "<|endoftext|>",
    "chat_template": (
        "{%- for message in messages %}{{- '<|im_start|>' + message.role + "
        "'\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}"
        "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
        "{%- if enable_thinking is defined and enable_thinking is true %}"
        "{{- '<think>\\n' }}{%- else %}{{- '<think>\\n\\n</think>\\n\\n' }}"
        "{%- endif %}{%- endif %}"),
}


def write_vectors(tok, texts, path):
    with open(path, "w", encoding="utf-8") as f:
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            decoded = tok.decode(ids, skip_special_tokens=False)
            f.write(json.dumps({"text": text, "ids": ids, "decoded": decoded},
                               ensure_ascii=False) + "\n")
    print(f"wrote {len(texts)} vectors to {os.path.relpath(path, ROOT)}")


def train_tiny():
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_PATTERN), behavior="isolated",
                             invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = textgen.random_strings(777, 3000) + CURATED * 3
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens(TINY_ADDED)
    return tok


def main():
    os.makedirs(os.path.join(OUT, "qwen35_tiny"), exist_ok=True)
    qwen3 = Tokenizer.from_file(os.path.join(SHARED, "tokenizer.json"))
    texts = CURATED + textgen.random_strings(12345, 300)
    write_vectors(qwen3, texts, os.path.join(OUT, "qwen3_vectors.jsonl"))

    tiny = train_tiny()
    tiny_dir = os.path.join(OUT, "qwen35_tiny")
    tiny.save(os.path.join(tiny_dir, "tokenizer.json"))
    with open(os.path.join(tiny_dir, "tokenizer_config.json"), "w") as f:
        json.dump(TINY_CONFIG, f, indent=1)
        f.write("\n")
    texts = TINY_CURATED + CURATED + textgen.random_strings(54321, 200)
    write_vectors(tiny, texts, os.path.join(OUT, "qwen35_tiny_vectors.jsonl"))


if __name__ == "__main__":
    main()

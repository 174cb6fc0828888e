"""Deterministic random multilingual strings that stress a byte-level BPE
tokenizer: every Unicode space kind, CR/LF mixes, letters of many scripts,
combining marks (NFD input), Hangul jamo, digits of several kinds,
contractions in mixed case, emoji sequences, and special tokens or
look-alikes inside text. Shared by make_vectors.py and compare.py."""

import random

SPACES = [" ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\x0b", "\x0c",
          "\x85", "\xa0", "\u1680", "\u2000", "\u2003", "\u2009", "\u200a",
          "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b", "\u180e",
          "\ufeff", " \n ", "\t\n", "   \n\n  "]
WORDS = ["hello", "world", "the", "The", "THE", "tokenizer", "naïve", "café",
         "Straße", "über", "ÆØÅ", "İstanbul", "ǅ", "ﬁne", "Ωμέγα", "Привет",
         "мир", "שלום", "مرحبا", "بالعالم", "नमस्ते", "हिन्दी", "ภาษาไทย",
         "สวัสดีครับ", "한국어", "안녕하세요", "日本語", "東京都", "中文字符",
         "カタカナ", "ひらがな", "ქართული", "Հայերեն", "አማርኛ", "ᏣᎳᎩ", "ꦗꦮ",
         "mañana", "Ελληνικά", "Tiếng Việt", "x", "I", "a", "code_point",
         "CamelCase", "snake_case", "e.g.", "U.S.A."]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE",
                "'Ve", "'M", "'LL", "'lL", "'D", "'ſ", "’s", "'x", "'", "''",
                "DON'T", "don't", "I'M", "we'll", "you'RE", "it'S", "'sa",
                "o'clock", "rock'n'roll"]
MARKS = ["\u0301", "\u0300", "\u0308", "\u0327", "\u0303", "\u0323", "\u20dd",
         "\u093e", "\u094d", "\u0e31", "\u0e34", "\u064b", "\u0651", "\u05b7",
         "\u302a", "\u0489", "\ufe0f", "\u200d"]
NFD = ["e\u0301", "a\u0308", "o\u0302\u0301", "c\u0327", "n\u0303",
       "A\u030a", "\u1100\u1161", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab",
       "\u110b\u1175", "u\u0308\u0304", "\u0915\u093c", "Z\u0301\u0327"]
DIGITS = ["0", "7", "42", "2024", "3.14159", "1,000,000", "٣٤٥", "०१२",
          "１２３", "²", "½", "Ⅻ", "⑦", "𝟘𝟙", "123456789012"]
PUNCT = [".", ",", "!", "?", "...", "…", "—", "-", "--", "(", ")", "[]", "{}",
         "\"", "«", "»", "“", "”", "。", "、", "！", "¿", "¡", "#", "@", "$",
         "%", "^&*", "::", "->", "=>", "/*", "*/", "<", ">", "<>", "|", "\\",
         "~", "`", "_", "§", "©", "™", "°", "€", "£", "¥", "₿", "∑", "√",
         "≠", "∞", "♪", "☃", "✓", "\x00", "\x01", "\x7f", "\ufffd",
         "\U0001d400"]
EMOJI = ["😀", "👍", "👍🏽", "🤦🏻\u200d♂️", "👨\u200d👩\u200d👧\u200d👦", "🇯🇵",
         "🇫🇷🇩🇪", "❤️", "1️⃣", "🏳️\u200d🌈", "🧑\u200d💻", "🐍", "🦀",
         "☕", "🫠", "\U0001f9ea"]
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>",
           "</think>", "<tool_call>", "<|fim_prefix|>", "<|vision_pad|>"]
LOOKALIKE = ["<|im_end|", "<|im_end |>", "<|IM_END|>", "<|im_end|>>",
             "<<|im_start|>", "< think>", "<think", "</think", "<|>", "<||>",
             "<|im_start|><|im_end|>", "|>", "<|", "<thinking>",
             "<|endoftext|>x", "x<|endoftext|>"]
CLASSES = [(SPACES, 6), (WORDS, 8), (CONTRACTIONS, 3), (MARKS, 2), (NFD, 2),
           (DIGITS, 3), (PUNCT, 4), (EMOJI, 2), (SPECIAL, 1), (LOOKALIKE, 1)]
RANGES = [(0x20, 0x7e), (0xa0, 0x24f), (0x300, 0x36f), (0x370, 0x3ff),
          (0x400, 0x4ff), (0x590, 0x5ff), (0x600, 0x6ff), (0x900, 0x97f),
          (0xe00, 0xe7f), (0x1100, 0x11ff), (0x2000, 0x206f), (0x3000, 0x30ff),
          (0x4e00, 0x4fff), (0xac00, 0xacff), (0xfe00, 0xfe0f), (0xff00, 0xffef),
          (0x1f300, 0x1f64f), (0x1f900, 0x1f9ff)]


def random_code_point(rng):
    lo, hi = rng.choice(RANGES)
    while True:
        cp = rng.randint(lo, hi)
        if not 0xd800 <= cp <= 0xdfff:
            return chr(cp)


def random_string(rng, max_items=24):
    pools = [p for p, w in CLASSES for _ in range(w)]
    parts = []
    for _ in range(rng.randint(1, max_items)):
        if rng.random() < 0.12:
            parts.append(random_code_point(rng))
        else:
            parts.append(rng.choice(rng.choice(pools)))
    return "".join(parts)


def random_strings(seed, count, max_items=24):
    rng = random.Random(seed)
    return [random_string(rng, max_items) for _ in range(count)]

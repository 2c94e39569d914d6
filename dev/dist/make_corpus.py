#!/usr/bin/env python3
"""Synthetic corpus for data-parallel throughput runs: JSONL documents of common English words whose lengths follow
a lognormal distribution (median ~300 words, a long tail past the row length), so that packing cuts and fills rows
the way real text does. Usage: make_corpus.py OUT.jsonl [words] (default 2,000,000 words; seeded, deterministic)."""
import json
import math
import random
import sys

WORDS = ("the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
         "they you were her she there had been one all we their has would when if so no out up more what into some "
         "can them other its time only could new these two may first then do any like my now over such our man me "
         "even most made after also did many before must through back years where much your way well down should "
         "because each just those people state how too little good world very still own see men work long here get "
         "both between life being under never day same another know while last us might great old year off come "
         "since against go came right used take three").split()

out = sys.argv[1]
total = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000_000
rng = random.Random(0)
n_words = 0
with open(out, "w") as f:
    while n_words < total:
        n = max(8, int(math.exp(rng.gauss(math.log(300), 0.8))))
        f.write(json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(n))}) + "\n")
        n_words += n

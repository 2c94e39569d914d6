#!/bin/bash
# Thirty-third session: (1) the plain forward (no checkpoints: evaluation's, and the kernel the official forward's
# 0.673 ms compares with) beside the training forward (prod+st), v85's lab; (2) cs: the forward's checkpoint
# stores as st.global.cs (-DPM_SCAN_CK_CS=1: evict-first in L2, as the backward reads them only after the rest of
# the forward pass). Order v85 cs v85c, three rounds. Carry .gpu/scan37 (v85) and .gpu/scan39 (cs).
# Predictions: plain forward 1-2% below prod+st (call56 measured the stores at ~2% in v43's kernels); cs -0.5 to -1%
# on prod+st, nothing on prod.
mkdir -p .gpu/scan && cp .gpu/scan37/scan_lab_v85* .gpu/scan39/scan_lab_cs .gpu/scan/
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st,prod bash dev/kernels/lab_rounds.sh 3 "v85 cs v85c" | grep -v "^prod+st\|^==" | tail -20
cd "$OUT" && mkdir -p l && tar xzf labs.tgz -C l && for v in v85 cs v85c; do for r in 1 2 3; do grep -h "^prod " l/lab_${v}_$r.log | sed "s/^/$v $r /"; done; done | sort -k3,5 -s | awk '{print $1, $2, $4, $5, $6, $7, $8}'
rm -rf l; tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')

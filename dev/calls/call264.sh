#!/bin/bash
# Thirty-third session: timing-only ablations of v85 (results wrong by design; the lab's checks fail for them),
# to see what bounds each kernel now (the last ablations, call141, were of the staged forward, before v65):
# wnoexp (forward walkers' decays without ex2), pnomufu (forward producers' softplus and sigmoid without MUFU),
# wnoy (forward walkers' y gone), bnowexp (2-thread backward walk's decays without ex2: what keeping the
# recompute's decays would be worth at most), bnobfly (2-thread backward's dB/dC butterfly levels 2-4 as adds in
# the lane: what a cheaper channel sum would be worth at most). Two rounds; carry .gpu/scan40 (all six builds).
# Predictions: wnoexp fwd -15 to -25% (the walkers' MUFU is ~60% of the chunk), pnomufu -5 to -10%, wnoy -3 to
# -6%; bnowexp fwd+bwd -5 to -8%, bnobfly -5 to -8%.
mkdir -p .gpu/scan && cp .gpu/scan40/scan_lab_* .gpu/scan/
LAB_TIMEOUT=120 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 2 "v85 wnoexp pnomufu wnoy bnowexp bnobfly" | grep -v "^prod+st\|^==\|correctness" | tail -32
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')

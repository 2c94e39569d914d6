#!/bin/bash
# Thirty-first session: the walkers form the forward's output (lab switch -DPM_SCAN_WS_OUTW=1, scan_lab_outw)
# against HEAD's lab (scan_lab_prod, call247's build), three interleaved rounds. Carry .gpu/scan31.
# Why: call249 showed the producers' special-function work costs the walkers (2 more exps a (token, channel) in the
# producers: fwd +10% at B8·D2048 and B2·D4096·L8192, 1.6x their unit cycles), while one exp fewer a thread and
# token in the walkers gains ~1%. outw moves silu(z) (an ex2 and an rcp a (token, channel)) and the output's
# multiply-adds from the producers to the walkers (after their butterfly each walker thread owns one (token,
# channel) of a group): producers -2 MUFU and ~-60 instructions a warp and chunk, walkers +1 MUFU and ~+5.5
# instructions a thread and token. Same operations in the same order: the same output bits.
# Prediction: fwd -3 to -8% at B8·D2048, B4·D4096 and B2·D4096·L8192; B8·D1536 (96-wide, 4 walker threads a
# channel) -1 to -4%.
mkdir -p .gpu/scan && cp .gpu/scan31/scan_lab_* .gpu/scan/
LAB_TIMEOUT=100 LAB_BIGS=8x2048x2048,4x2048x4096,2x8192x4096,8x2048x1536 SCAN_LAB_VERSIONS=prod+st bash dev/kernels/lab_rounds.sh 3 "prod outw"
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')

#!/bin/bash
# v67 against three compile-time variants of its warp-specialized forward (lab binaries, all checks on): yout (the
# walkers stage y in fp32, the producers form (y + D u) silu(z) and the bf16 output: work off the walkers, the
# critical path; PM_SCAN_WS_YOUT=1), pw2 (2 producer warps a 64-wide block instead of 4: with 16-byte copies the
# producers issue less; PM_SCAN_WS_PW64=2), wg4 (4 walker threads a channel: twice the walker warps, more
# instructions a state; PM_SCAN_WS_WG=4). memcheck and racecheck on yout; then all four interleaved, two rounds.
# Carry .gpu/scan.
SAN_S=60 bash dev/kernels/lab_sanitize.sh .gpu/scan/scan_lab_yout prod+st
export SCAN_LAB_VERSIONS=prod+st LAB_BIGS=8x2048x2048,4x2048x4096,8x2048x3072,16x1024x1536,8x2048x5120
for r in 1 2; do for v in v67 yout pw2 wg4; do
    echo "== lab $v round $r"; timeout 60 .gpu/scan/scan_lab_$v > "$OUT/lab_${v}_$r.log" 2>&1
    echo "rc $?"; grep -E "^prod|correctness|FAIL|rror" "$OUT/lab_${v}_$r.log" | head -8
done; done
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"

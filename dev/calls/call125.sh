#!/bin/bash
# session 17, call 7: v54's backward order 6 (order 2 with each chunk's dB/dC sums over the warps moved from the
# flush into the next chunk's pass phase, so only the output tiles' stores remain between the walk's barrier and
# the next chunk) in both backward kernels, against the default: lab L2 = default, L6 = order 6, at the 370m,
# 130m and B2 D4096 L8192 shapes, interleaved three times; then end to end, the default build against one with
# -DPM_SCAN_BWD_ORDER=6 -DPM_SCAN_BWD_ORDER4=6, interleaved twice
# (.gpu/ab/base and .gpu/ab/o6 hold the two builds' packmamba alone, .gpu/ab/lib their libraries: the carry limit)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/ab/lib; cp -r .gpu/ab/lib .gpu/ab/base/lib; cp -r .gpu/ab/lib .gpu/ab/o6/lib
for r in 1 2 3; do for v in L2 L6; do
  LAB_BIGS=8x2048x2048,8x2048x1536,2x8192x4096 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 150 .gpu/scan/scan_lab_$v > $R/lab_${v}_$r.log 2>&1
  echo "== $v rc $?"; grep -E "^(v43|prod)|correctness" $R/lab_${v}_$r.log
done; done
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/ab/base .gpu/ab/o6 .gpu/ab/base .gpu/ab/o6" "--preset 370m --batch 8" \
  "--preset 130m --batch 8 --keep-activations"
cd $R && tar czf labs.tgz lab_*.log && rm -f lab_*.log

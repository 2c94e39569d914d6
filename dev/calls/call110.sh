#!/bin/bash
# session 16, call 3: v51 variants in the lab at the 130m, 370m and 1.4b shapes, v43 frozen beside each:
# A = v51 with the 4-thread backward's pass branchless too, B = v51 as call109 ran it (that pass keeps its branch),
# C = A with softplus'(v) from softplus's own exp (pass_vals, v51c: changes ddpre's bits)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
for v in A B C A B C; do
  LAB_BIGS=8x2048x1536,8x2048x2048,4x2048x4096 SCAN_LAB_VERSIONS=v43+st,prod+st timeout 100 .gpu/scan/scan_lab_$v > $R/lab_$v.log 2>&1
  echo "== $v rc $?"; grep -E "^(v43|prod)|correctness" $R/lab_$v.log
done

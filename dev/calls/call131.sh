#!/bin/bash
# session 18, call 3: v58 (the 2-thread backward's lanes with lane bit 2 set hold each quad's pairs swapped and read
# B/C from a second copy laid out that way: the butterfly's third level without selects) against v57 (the
# previous commit's cuda_scan.cu) in the lab, five shapes, interleaved twice; then the SASS of v58's lab binary
# (for the next instruction counts)
LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536,4x2048x4096,1x16384x1536 bash dev/kernels/lab_rounds.sh 2 "v57 v58"
cuobjdump -sass .gpu/scan/scan_lab_v58 | gzip > $OUT/sass_v58.txt.gz

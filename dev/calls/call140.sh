#!/bin/bash
# session 19, call 1: scan v62 (the backward flush's output tiles by bulk copies, dev/experiments/
# scan_v62_bulk_flush.patch) against v61 (HEAD) in the lab, interleaved three times (checks first in each run);
# then compute-sanitizer racecheck and memcheck on both builds' kept-states path over the lab's correctness shapes
# (v61: the 4-thread backward's pass changed since call136's clean run; v62: the bulk copies)
bash dev/kernels/lab_rounds.sh 3 "v61 v62"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for b in v61 v62; do for tool in racecheck memcheck; do
    timeout 60 $CS --tool $tool --print-limit 5 .gpu/scan/scan_lab_$b small prod+st >$OUT/cs_${tool}_$b.log 2>&1
    echo "== $tool $b rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|correctness' $OUT/cs_${tool}_$b.log | paste -sd' ')"
done; done

#!/bin/bash
# session 19, call 6: scan v63 (the 4-thread backward in order 3, two barriers a chunk): the CUDA op tests,
# compute-sanitizer racecheck and memcheck over the lab's correctness shapes with kept states, then end to end
# against v61 (.gpu/ab/v61: the previous commit's packmamba), interleaved twice, at 130m keeping activations and by
# default (the shapes that run the 4-thread backward)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib; cp -r .gpu/lib .gpu/ab/v61/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 200 bash dev/gpu.sh run > $R/optests.log 2>&1; echo "== op tests rc $?"
grep -E "ok,|FAIL" $R/t/summary.txt | head -5
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in racecheck memcheck; do
    timeout 60 $CS --tool $tool --print-limit 5 .gpu/scan/scan_lab_v63 small prod+st >$R/cs_$tool.log 2>&1
    echo "== $tool rc $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|correctness' $R/cs_$tool.log | paste -sd' ')"
done
OUT=$R PM_AB_TIMEOUT=120 bash dev/ab_bench.sh BIN ".gpu/ab/v61 .gpu .gpu/ab/v61 .gpu" \
  "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8"

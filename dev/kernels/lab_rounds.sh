#!/bin/bash
# lab_rounds.sh ROUNDS "V1 V2 ..." — on the GPU machine: the scan lab builds .gpu/scan/scan_lab_V1, _V2, ...
# (each built here with its own -D switches), run one after another ROUNDS times, so that the variants of one call
# share the GPU's state; each run's log in $OUT/lab_V_R.log (tarred into $OUT/labs.tgz at the end), its timing
# and correctness lines printed. LAB_BIGS (sizes) and SCAN_LAB_VERSIONS (default v43+st,prod+st: the frozen v43
# beside each build's production kernels) pass through to the lab. Last, dev/kernels/lab_summary.py prints each
# shape's per-variant ranges, medians and changes against the first variant (v43's median beside them).
R=${OUT:?set OUT}; rounds=${1:?rounds}; variants=${2:?variants}
cd "$(dirname "$0")/../.." || exit 1
export SCAN_LAB_VERSIONS=${SCAN_LAB_VERSIONS:-v43+st,prod+st}
for r in $(seq 1 "$rounds"); do for v in $variants; do
    timeout "${LAB_TIMEOUT:-150}" .gpu/scan/scan_lab_$v >"$R/lab_${v}_$r.log" 2>&1
    echo "== $v rc $?"; grep -E "^(v43|prod)|correctness" "$R/lab_${v}_$r.log"
done; done
python3 dev/kernels/lab_summary.py "$R" "$variants"
(cd "$R" && tar czf labs.tgz lab_*.log && rm -f lab_*.log)

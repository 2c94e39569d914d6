#!/bin/bash
# session 19, call 4: the final build (scan v61): the lab at the sizes and the 130m / 1.4b / long-row
# shapes (v43 frozen beside it), then README's whole end-to-end table with the op tests (dev/readme_table.sh)
R=$OUT
LAB_BIGS=8x2048x2048,2x8192x4096,8x2048x1536,4x2048x4096,1x16384x1536 SCAN_LAB_VERSIONS=v43+st,prod+st \
  timeout 150 .gpu/scan/scan_lab > $R/lab.log 2>&1; echo "== lab rc $?"; grep -E "^(v43|prod|floor)|correctness" $R/lab.log
bash dev/readme_table.sh
cd $R && tar czf all.tgz gpu && rm -rf gpu

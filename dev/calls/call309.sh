#!/bin/bash
# Thirty-eighth session, sixth call: README's headline rows (PM_TABLE=key) with the bench as it now is: GEMMs tuned
# at the tenth step, at least 2 s and 11 steps of warm-up, the clock line with the energy of the timed steps.
# Carry .gpu/bin .gpu/lib.
PM_TABLE=key bash dev/readme_table.sh
grep -ah 'SM clock\|warm-up' "$OUT/gpu/bench.log" | tr '\r' '\n' | grep -a 'SM clock\|warm-up' | sort | uniq -c | sort -rn | head -12
cd "$OUT" && tar czf all.tgz --remove-files gpu

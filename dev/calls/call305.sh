#!/bin/bash
# Thirty-eighth session, second call: README's headline rows (PM_TABLE=key) with the bench's new clock report
# (each configuration's mean SM clock and power against the board's power limit, and the share of its samples in
# which NVML names the power cap as a clock event reason; nvml_samples.csv's new clock_reasons column).
# Carry .gpu/bin .gpu/lib.
PM_TABLE=key bash dev/readme_table.sh
grep -h 'SM clock' "$OUT/gpu/bench.log" | tr '\r' '\n' | grep 'SM clock'
cd "$OUT" && tar czf all.tgz --remove-files gpu

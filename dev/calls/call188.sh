#!/bin/bash
# The final build of the twenty-fourth session (scan v70): the op tests and README's headline rows (PM_TABLE=key:
# 130m, 370m B8 and 1.4b B4 fixed-length, 130m keeping activations and with --memory-budget 14.24), with the GPU's
# measured ceilings. Carry .gpu/bin .gpu/lib.
PM_TABLE=key bash dev/readme_table.sh
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"

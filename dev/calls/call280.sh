#!/bin/bash
# Thirty-fifth session, fifth call: README's headline rows on src's build (scan v91; conv_xdt and conv v9 were not
# kept): `PM_TABLE=key bash dev/readme_table.sh` (the CUDA op tests, then 130m / 370m B8 and 1.4b B4 fixed rows,
# 130m keeping activations and with --memory-budget 14.24). Carry .gpu/bin .gpu/lib.
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
PM_TABLE=key bash dev/readme_table.sh 2>&1 | tail -12
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')

#!/bin/bash
# README's whole end-to-end table on the twenty-sixth session's build (scan v73, the probe fix): `dev/readme_table.sh`
# (the op tests, then every row: fixed and packed rows, the memory flags, the --memory-budget picks). The table in
# README was call155's (v63). Carry .gpu/bin .gpu/lib.
bash dev/readme_table.sh
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"

#!/bin/bash
# README's headline rows on the session's final build (scan v81): PM_TABLE=key dev/readme_table.sh (the CUDA op
# tests from both builds too). Carry .gpu/bin .gpu/lib.
PM_TABLE=key timeout 500 bash dev/readme_table.sh
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$') && ls -la "$OUT"

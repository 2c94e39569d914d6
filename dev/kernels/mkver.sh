#!/bin/sh
# mkver.sh NAME [SRC] — freeze SRC (default src/cuda_scan.cu) as dev/kernels/scan_NAME.cuh: the same code inside
# `namespace scan_NAME` (includes dropped; scan_lab.cu includes the headers first), so the lab can check and
# time every version side by side with the production file.
set -e
cd "$(dirname "$0")/../.."
src=${2:-src/cuda_scan.cu}
out=dev/kernels/scan_$1.cuh
{
    echo "// scan_$1.cuh — frozen copy of $src as version $1 (made by dev/kernels/mkver.sh)."
    echo "namespace scan_$1 {"
    grep -v '^#include' "$src"
    echo "}  // namespace scan_$1"
} >"$out"
echo "wrote $out"

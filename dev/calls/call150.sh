#!/bin/bash
# session 20, call 3: dev/confirm_build.sh's first run on the GPU (its compute-sanitizer step, now through
# dev/kernels/lab_sanitize.sh, had not run there), as an A/A check: HEAD's build (.gpu) as both NEW and BASE, so
# the op tests and sanitizer confirm v63 once more and the four interleaved runs each at 370m and at 130m keeping
# activations measure the spread between runs of one build. Needs `dev/gpu.sh pack` and the v63 lab (.gpu/scan/scan_lab_v63) built here.
bash dev/confirm_build.sh .gpu .gpu .gpu/scan/scan_lab_v63 "--preset 370m --batch 8" "--preset 130m --batch 8 --keep-activations"

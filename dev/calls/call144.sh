#!/bin/bash
# session 19, call 6: scan v63 (the 4-thread backward in order 3, two barriers a chunk): the CUDA op tests,
# compute-sanitizer racecheck and memcheck over the lab's correctness shapes with kept states, then end to end
# against v61 (.gpu/ab/v61: the previous commit's packmamba), interleaved twice, at 130m keeping activations and by
# default (the shapes that run the 4-thread backward)
# (the steps as run, since moved into dev/confirm_build.sh)
bash dev/confirm_build.sh .gpu .gpu/ab/v61 .gpu/scan/scan_lab_v63 \
  "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8"

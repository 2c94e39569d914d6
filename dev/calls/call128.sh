#!/bin/bash
# session 17, call 10: compute-sanitizer on v54 (the final build's scan: fewer barriers a chunk): racecheck and
# memcheck over the lab's correctness shapes (every staged kernel: 128- and 64-wide, segments, the 4-thread
# backward, partial blocks and chunks), the production kernels with kept states (training's path) and without
# (the lab's timing run skipped: LAB_S=1)
SAN="prod+st prod" SAN_TOOLS="racecheck memcheck" SAN_S=50 LAB_S=1 bash dev/kernels/scan_run.sh 2>&1 | grep -E "== (racecheck|memcheck)"

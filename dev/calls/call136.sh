#!/bin/bash
# session 18, call 8: compute-sanitizer on the final build's scan (v57 with BwdChunkSync): racecheck and memcheck
# over the lab's correctness shapes (every staged kernel: 128- and 64-wide, segments, the 4-thread backward,
# partial blocks and chunks), with kept states (training's path) and without (the lab's timing run skipped)
SAN="prod+st prod" SAN_TOOLS="racecheck memcheck" SAN_S=50 LAB_S=1 bash dev/kernels/scan_run.sh 2>&1 | grep -E "== (racecheck|memcheck)"

#!/bin/bash
# session 19, call 5: the 4-thread backward's chunk order again on v61 (its pass changed): order 3 (the previous
# chunk's flush after the opening barrier, ahead of the pass) against order 2 (HEAD: the flush after the walk);
# B8 D1536, the 130m shape, interleaved three times
LAB_BIGS=8x2048x1536 bash dev/kernels/lab_rounds.sh 3 "v61 o43"

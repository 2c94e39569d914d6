#!/bin/bash
# session 12, call 7: packed rows at 130m measured 97.1% of fixed in call73 (99.4-99.6% in earlier sessions):
# interleaved fixed / pack with the reduction queue off and on, to see whether it is the queue or the GPU's noise
R=$OUT; cd "$(dirname "$0")/../.." || exit 1
P="--preset 130m --batch 8 --steps 16"
bash dev/ab_bench.sh PM_DEFER_REDUCTIONS "0 1 0 1" "$P --policy fixed" "$P --policy pack" "$P --policy fixed" "$P --policy pack"

#!/bin/bash
# session 19, call 3: what bounds the forward's walk? Ablations of HEAD's forward kernel (timing only: their
# checks fail by design), interleaved twice against v61 (HEAD): noc = the walk's C loads dropped (C taken from the B
# registers: 4 of ~10 shared wavefronts a warp and token fewer), noexp = the walk's exps dropped (4 MUFU a warp and
# token fewer), nopm = the cooperative pass without its special-function results (softplus, sigmoid)
LAB_BIGS=8x2048x2048,8x2048x1536,2x8192x4096 bash dev/kernels/lab_rounds.sh 2 "v61 noc noexp nopm"

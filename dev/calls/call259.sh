#!/bin/bash
# Thirty-second session, sixth call (after call258's latency rows read 0 cycles for ex2, rcp and lg2: the SASS,
# by the device machine's cuobjdump, showed ptxas had evaluated those chains at compile time from their constant
# start): dev/kernels/mufu_lab.cu with start values from the thread index, built here into .gpu/mufu2 (carry it).
# Prediction: every f32 special-function instruction ~15-20 cycles of latency, tanh no slower than ex2.
timeout 60 .gpu/mufu2/mufu_lab 2>&1 | sed -n '/latency/,/accuracy/p'

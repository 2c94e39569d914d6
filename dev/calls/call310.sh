#!/bin/bash
# Thirty-eighth session, seventh call: joules per op (dev/kernels/energy_lab.c): each main op of a 370m layer
# (B8, T2048) and AdamW over the 370m parameters, alone in a loop for 2 s after a 1 s warm-up, against NVML's
# energy counter and clocks. Carry .gpu/bin .gpu/lib.
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
timeout 120 .gpu/bin/energy_lab 2 2>&1 | tee "$OUT/energy_lab.txt"

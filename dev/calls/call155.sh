#!/bin/bash
# session 21, call 5: README's table on this session's build (scan v63 as before; the memory dials: activations and
# in_proj outputs per layer, the weights cast when used, the budget's new order), through dev/readme_table.sh
# (now with 370m at the official peak, 29.5 GiB, and 1.4b with --recompute-scan --cast-weights).
# Needs `dev/gpu.sh pack` here; carry .gpu/bin .gpu/lib.
bash dev/readme_table.sh

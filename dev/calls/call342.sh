#!/bin/bash
# Forty-fourth session, its last code on the GPU (start_mask lost its unused token parameter): the CUDA op tests, and
# 370m packed on real documents with and without --carry-state (.gpu/data: the Linux admin-guide,
# `packmamba prepare --out .gpu/data --ext rst,rst.gz /usr/share/doc/linux-doc-6.1/Documentation/admin-guide`, 354
# documents, 2.73M byte tokens: most are longer than T = 2048, so most rows carry).
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops), .gpu/lib and .gpu/data.
. dev/calls/common.sh
pm_gpu_env
timeout 300 .gpu/bin/test_cuda_ops >"$OUT/test_cuda_ops.log" 2>&1
echo "test_cuda_ops rc $?"
grep -E "^\[  (PASSED|FAILED)|FAIL" "$OUT/test_cuda_ops.log" | head -20
for c in "" "--carry-state"; do
  k=${c:+carry}; k=${k:-pack}
  timeout 240 .gpu/bin/packmamba bench --device cuda --data .gpu/data --preset 370m --batch 8 --seq-len 2048 --policy pack \
      --steps 16 $c --out "$OUT/b$k" --no-plots >"$OUT/b$k.log" 2>&1 || tail -3 "$OUT/b$k.log"
  bench_line "$OUT/b$k/results.json"
  python3 -c "import json; c=json.load(open('$OUT/b$k/results.json'))['configs'][0]; print('  fill %.4f' % c['fill'])"
done

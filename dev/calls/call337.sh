#!/bin/bash
# Forty-fourth session: the carried state taken by the scan itself (carry v3; call338 runs the same for v4). The scan kernels no longer count a
# row's first token as a document start (its state before comes from checkpoint 0: 0, or the carried state); the
# carried part is added to the forward's output and to the scan states the backward reads, so the scan's own
# backward is the carried rows' (the separate carry backward is gone). Here: the CUDA op tests (test_scan_carried:
# every scan kernel and plan with rows carried in, against the CPU), the timings of the scan with and without carried
# rows, eval --carry-state against unbroken documents (GPU and CPU, as call336), train at 130m T=512 B8 with and
# without --carry-state (call336: 30.17 against 12.42 ms), and the 370m headline bench (the default path's kernels
# changed only in their start masks).
# Carry .gpu/bin (build/'s packmamba, test_cuda_ops) and .gpu/lib.
. dev/calls/common.sh
pm_gpu_env
timeout 300 .gpu/bin/test_cuda_ops >"$OUT/test_cuda_ops.log" 2>&1
echo "test_cuda_ops rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests? (run|skipped)|FAIL" "$OUT/test_cuda_ops.log" | head -30
PM_BENCH=1 PM_TEST_FILTER=test_carry_timings timeout 120 .gpu/bin/test_cuda_ops 2>&1 | grep -E "op |carry ops" | tee "$OUT/carry_timings.txt"
carry_eval
for c in "" "--carry-state"; do
  rm -rf /tmp/t; timeout 200 .gpu/bin/packmamba train --device cuda --data /tmp/c/data --out /tmp/t --preset 130m --seq-len 512 --batch 8 --steps 40 --log-every 0 $c >/dev/null 2>&1 || echo "train $c failed"
  python3 -c "
import json,sys
r=[json.loads(l) for l in open('/tmp/t/metrics.jsonl')][10:39]
print('130m T512 B8 %-14s median step %.2f ms, fill %.3f, loss at the end %.4f' % (sys.argv[1] or 'plain', sorted(x['step_s'] for x in r)[len(r)//2]*1e3, sum(x['fill'] for x in r)/len(r), r[-1]['loss']))" "$c"
done
if [ -z "${PM_CALL_NO_370M:-}" ]; then  # (call338 runs these lines without it)
timeout 240 .gpu/bin/packmamba bench --device cuda --preset 370m --batch 8 --seq-len 2048 --policy fixed --steps 16 \
    --out "$OUT/b370" --no-plots >"$OUT/b370.log" 2>&1 || tail -3 "$OUT/b370.log"
bench_line "$OUT/b370/results.json"
fi

#!/bin/bash
# session 13, call 6: the layer pairs kept in the bench's profiled steps (their regions as before; dist turns them
# off): the op tests, the GPU training checks (determinism, resume, GPU vs CPU eval, the policies on real
# documents), and 130m benches whose profiled step must now match the timed one (no GEMM tuning inside it)
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 timeout 150 bash dev/gpu.sh run > $R/optests.txt 2>&1; tail -3 $R/optests.txt
OUT=$R bash dev/gpu_train_check.sh > $R/train_check.txt 2>&1; tail -12 $R/train_check.txt
.gpu/bin/packmamba bench --device cuda --seq-len 2048 --steps 8 --warmup 2 --policy fixed --preset 130m --batch 8 \
  --no-plots --out /tmp/pb > $R/bench130.txt 2>&1
python3 - <<'PY'
import csv
for r in csv.DictReader(open('/tmp/pb/results.csv')):
    print(r['label'], 'tok/s', r['tok_per_s'], 'step', r['step_ms_median'], 'profiled', r['profiled_step_ms'],
          'x_proj bwd', r['x_proj_bwd_ms'], 'dt_proj bwd', r['dt_proj_bwd_ms'], 'out_proj bwd', r['out_proj_bwd_ms'])
PY
cd $R && tar czf all.tgz optests.txt t train_check* bench130.txt 2>/dev/null; rm -rf t train_check

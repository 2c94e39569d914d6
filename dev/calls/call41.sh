#!/bin/bash
# session 9, call 7: bf16 logits against --fp32-logits alternating (130m keep-activations twice, 370m once), and
# every kernel of one 130m keep-activations step under ncu (gpu__time_duration), for the per-kernel table
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
A="--device cuda --seq-len 2048 --steps 10 --warmup 3 --policy fixed --no-plots"
run() { rm -rf /tmp/pb; timeout 100 .gpu/bin/packmamba bench $A $1 --out /tmp/pb > $R/b_$2.log 2>&1
  python3 -c "
import csv; r=list(csv.DictReader(open('/tmp/pb/results.csv')))[0]
print('$1'.ljust(52), 'tok/s', r['tok_per_s'], 'step', r['step_ms_median'], 'cls', r.get('classifier_ms'), 'peak', round(float(r['mem_peak_bytes'])/2**30,2))" || echo "$1 failed"; }
i=0
for cfg in "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8 --keep-activations --fp32-logits" \
           "--preset 130m --batch 8 --keep-activations" "--preset 130m --batch 8 --keep-activations --fp32-logits" \
           "--preset 370m --batch 8" "--preset 370m --batch 8 --fp32-logits"; do i=$((i+1)); run "$cfg" $i; done
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
PM_GEMM_TUNE=0 timeout 240 $NCU --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
  .gpu/bin/packmamba bench --device cuda --preset 130m --batch 8 --seq-len 2048 --steps 1 --warmup 1 --profile-steps 0 \
  --policy fixed --no-plots --keep-activations --out /tmp/pb3 > $R/ncu_step.csv 2> $R/ncu_step.err
echo "== ncu rc $? lines $(wc -l < $R/ncu_step.csv)"
cd $R && tar czf all.tgz b_*.log ncu_step.* && rm -f b_*.log ncu_step.*

#!/bin/bash
# session 11, call 1: (1) scan lab: v36 (src at the session's start), v43 (v36 + predicated checkpoint stores in the
# forward), v42 (64-token chunks in the 128-wide forward), prod = v42 + v43, and prod without kept states (the
# plain forward: what the checkpoint stores cost); sanitizers on prod+st; (2) SASS of the 32-wide forward kernels
# (branches and stores); (3) op tests; (4) A/B benches: classifier chunk (PM_CL_CHUNK) at 130m keeping activations,
# v42 on/off (PM_SCAN_FT64) at 370m
R=$OUT; export LD_LIBRARY_PATH=$PWD/.gpu/lib
SCAN_LAB_VERSIONS=v36+st,v43+st,v42+st,prod+st,prod LAB_BIGS=8x2048x1536,8x2048x2048,2x8192x4096 \
  SAN=prod+st SAN_TOOLS="memcheck racecheck" SAN_S=70 LAB_S=200 bash dev/kernels/scan_run.sh > $R/lab.txt 2>&1
grep -E "==|timed|FAIL|fail|mismatch|all PASS" $R/lab.txt | tail -24
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)
$CUOBJ -sass .gpu/scan/scan_lab > $R/lab.sass 2>/dev/null
python3 - $R/lab.sass $R <<'PY'
import re, sys
txt = open(sys.argv[1]).read()
for part in txt.split('Function : ')[1:]:
    name = part.split('\n', 1)[0]
    if 'scan_fwd_staged_kernel' not in name or 'ILi32E' not in name: continue
    ns = re.search(r'scan_(v\d+)', name); ns = ns.group(1) if ns else 'prod'
    mode = re.search(r'ILi32ELi(\d)E', name).group(1)
    ins = re.findall(r'/\*[0-9a-f]{4,}\*/\s+([^;]*);', part)
    ops = [i.split()[0] if not i.startswith('@') else i.split()[1] for i in ins]
    print(f"sass {ns:5} mode {mode}: {len(ins)} instr, BRA {ops.count('BRA')}, STG.E.128 {sum(1 for i in ins if 'STG.E.128' in i)}, "
          f"predicated STG {sum(1 for i in ins if i.startswith('@') and 'STG' in i)}, EX2 {sum(1 for o in ops if o.startswith('MUFU.EX2'))}")
    if mode == '3' and ns in ('v36', 'prod'): open(f"{sys.argv[2]}/fwd32_ckpt_{ns}.sass", 'w').write(part)
PY
rm -f $R/lab.sass
mkdir -p $R/t; OUT=$R/t PM_BENCH=0 PM_E2E=0 PM_SANITIZE=0 PM_TEST_TIMEOUT=300 bash dev/gpu.sh run > $R/t/run.txt 2>&1; head -3 $R/t/summary.txt
bash dev/ab_bench.sh PM_CL_CHUNK "4096 16384 8192 4096 16384 8192" "--preset 130m --batch 8 --keep-activations"
bash dev/ab_bench.sh PM_SCAN_FT64 "0 1 0 1" "--preset 370m --batch 8"
bash dev/ab_bench.sh PM_CL_CHUNK "4096 8192" "--preset 130m --batch 8"
cd $R && tar czf all.tgz lab.txt cs_*.log fwd32_*.sass t 2>/dev/null; rm -rf cs_*.log fwd32_*.sass t

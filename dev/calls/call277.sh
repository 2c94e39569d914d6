#!/bin/bash
# Thirty-fifth session, second call: conv v9 (the warp's index as warp_index_uniform(), so the lim shuffles of the
# P unrolled steps carry no BRA.DIV; call276 counted 8 in every conv kernel of the production binary) against the
# same source built with -DPM_CONV_WU=0, in the conv lab: the small checks of both, then the production kernels
# ("new") at 130m and 370m, three interleaved rounds; the BRA.DIV count of both lab binaries' conv kernels; and every
# production kernel that still has a BRA.DIV (call276 printed only the first 20, all conv). Carry .gpu/conv9 .gpu/bin.
# Source: dev/experiments/conv_warp_uniform_v9.patch (not kept; its lab binaries built with and without
# -DPM_CONV_WU=0 into .gpu/conv9).
L=.gpu/conv9
for b in old wu; do
    timeout 150 $L/conv_lab_$b check >"$OUT/check_$b.txt" 2>&1; echo "check $b rc=$?"
    grep -E "PASSED|FAILED|failed:" "$OUT/check_$b.txt" | head -3
done
for r in 1 2 3; do
    for b in old wu; do
        timeout 100 $L/conv_lab_$b time new >"$OUT/time_${b}_$r.txt" 2>&1
        grep -E "^(130m|370m) +(fwd|bwd) +new " "$OUT/time_${b}_$r.txt" | sed "s/^/$b r$r /"
    done
done
F=cat; command -v cu++filt >/dev/null && F=cu++filt
bd() { cuobjdump -sass "$1" | awk '/Function :/ {f = $3} /BRA.DIV/ {n[f]++} END {for (k in n) print n[k], k}' | sort -rn; }
for b in old wu; do echo "BRA.DIV in conv_lab_$b: $(bd $L/conv_lab_$b | grep -c conv_) conv kernels with any"; done
bd .gpu/bin/packmamba | $F >"$OUT/bradiv_prod.txt"
echo "production kernels with a BRA.DIV: $(wc -l <"$OUT/bradiv_prod.txt"); those not conv:"
grep -v "conv_fwd_kernel\|conv_bwd_kernel" "$OUT/bradiv_prod.txt" | cut -c1-150 | head -40
cd "$OUT" && tar czf all.tgz --remove-files $(ls | grep -v '^all.tgz$')

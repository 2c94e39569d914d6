#!/usr/bin/env python3
"""lab_summary.py DIR "V1 V2 ..." — the summary of an interleaved lab call (dev/kernels/lab_rounds.sh).

Reads DIR/lab_<V>_<round>.log for every variant V (in the order given: the first is the baseline) and prints, per
shape, each variant's prod+st fwd and fwd+bwd times over the rounds (min-max and median), the change of its
fwd+bwd median against the baseline's, and the frozen v43's fwd+bwd median beside it in the same runs: v43 is the
same code in every build, so a variant whose v43 also moved ran on a GPU in a different state, not a faster kernel.
A variant whose lab run failed a check is marked.
"""
import os
import re
import statistics
import sys

LINE = re.compile(r"^(v43\+st|prod\+st)\s+(B\d+ D\d+ L\d+)\s+([0-9.]+)\s+([0-9.]+)")


def read(path):
    """{(version, shape): (fwd, fwdbwd)} and whether the run's checks passed"""
    times, ok = {}, False
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                times[(m.group(1), m.group(2))] = (float(m.group(3)), float(m.group(4)))
            if line.startswith("correctness:"):
                ok = "all PASS" in line
    return times, ok


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: lab_summary.py DIR \"V1 V2 ...\"")
    d, variants = sys.argv[1], sys.argv[2].split()
    runs = {v: [] for v in variants}  # variant -> [(times, ok)] over rounds
    for name in sorted(os.listdir(d)):
        m = re.match(r"lab_(.+)_(\d+)\.log$", name)
        if m and m.group(1) in runs:
            runs[m.group(1)].append(read(os.path.join(d, name)))
    shapes = []
    for v in variants:
        for times, _ in runs[v]:
            for (ver, shape) in times:
                if shape not in shapes:
                    shapes.append(shape)
    fails = [v for v in variants if any(not ok for _, ok in runs[v])]
    for v in fails:
        print(f"{v}: a run failed its checks or did not finish (see its log)")
    for shape in shapes:
        print(f"{shape}: prod+st fwd / fwd+bwd ms over the rounds; change of the fwd+bwd median against {variants[0]}")
        base = None  # the first variant's fwd+bwd median (None: it has no timing here, so no changes are printed)
        for v in variants:
            p = [t[("prod+st", shape)] for t, _ in runs[v] if ("prod+st", shape) in t]
            q = [t[("v43+st", shape)][1] for t, _ in runs[v] if ("v43+st", shape) in t]
            if not p:
                print(f"  {v:<12} (no timing)")
                continue
            fw, fb = [x[0] for x in p], [x[1] for x in p]
            med = statistics.median(fb)
            if v == variants[0]:
                base = med
            change = f"{100 * (med / base - 1):+.1f}%" if base else "no baseline"
            v43 = f"   v43 {statistics.median(q):.3f}" if q else ""
            print(f"  {v:<12} fwd {min(fw):.3f}-{max(fw):.3f}  fwd+bwd {min(fb):.3f}-{max(fb):.3f}"
                  f" (median {med:.3f}, {change}, {len(fb)} runs){v43}")


if __name__ == "__main__":
    main()

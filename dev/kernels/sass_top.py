#!/usr/bin/env python3
"""sass_top.py CSV [N] [--phases] — from ncu's SASS source page (--page source --print-source sass --csv), print the
N instructions with the most warp-stall samples and the samples summed by opcode, with each one's share.
--phases (the source page with SourceCounters and WarpStateStats): also the instructions executed by opcode, and
the kernel's hot loop (instructions executed at least half as often as the most executed one) cut at its
barriers into phases, each with its share of the samples, its share of the instructions executed and its top
stall reasons (how docs/perf.md's chunk phases of the scan kernels were counted, sixteenth session)."""
import csv
import sys
from collections import Counter


def opcode(s):
    t = s.split()
    op = t[1] if t and t[0].startswith("@") and len(t) > 1 else (t[0] if t else "?")
    return op.split(".")[0]


def phases(head, rows):
    """The hot loop's phases between barriers: samples, instructions executed, top stall reasons."""
    need = ["Source", "Instructions Executed"]
    if any(c not in head for c in need):
        print("phases: no 'Instructions Executed' column (profile with --section SourceCounters)")
        return
    src, ex = head.index("Source"), head.index("Instructions Executed")
    samp = next(i for i, c in enumerate(head) if c.startswith("Warp Stall Sampling (All"))
    stalls = [(i, c[len("stall_"):]) for i, c in enumerate(head) if c.startswith("stall_") and "Not Issued" not in c]
    num = lambda r, i: float(r[i].replace(",", "") or 0) if i < len(r) and r[i].strip() not in ("", "-") else 0.0
    rows = [r for r in rows if len(r) == len(head)]
    execd = [num(r, ex) for r in rows]
    ops = Counter()
    for r, e in zip(rows, execd):
        ops[opcode(r[src].strip())] += e
    etot, stot = sum(execd) or 1.0, sum(num(r, samp) for r in rows) or 1.0
    print("executed by opcode: " + ", ".join(f"{o} {100 * v / etot:.1f}%" for o, v in ops.most_common(16)))
    hot = [i for i, e in enumerate(execd) if e >= max(execd) / 2]
    if not hot:
        return
    bars = [i for i in hot if opcode(rows[i][src].strip()) == "BAR"]
    cuts = [hot[0]] + bars + [hot[-1] + 1]
    print(f"hot loop: instructions {hot[0]}-{hot[-1]}, barriers at {bars}")
    for a, b in zip(cuts, cuts[1:]):
        part = rows[a:b]
        sm = sum(num(r, samp) for r in part)
        st = Counter({name: sum(num(r, i) for r in part) for i, name in stalls})
        top = ", ".join(f"{k} {100 * v / (sm or 1):.0f}%" for k, v in st.most_common(5))
        print(f"  {a}-{b}: samples {100 * sm / stot:.1f}%, executed {100 * sum(execd[a:b]) / etot:.1f}%  ({top})")


def main():
    args = [a for a in sys.argv[1:] if a != "--phases"]
    path, n = args[0], int(args[1]) if len(args) > 1 else 30
    rows = [r for r in csv.reader(open(path, errors="replace")) if r]
    hi = next((i for i, r in enumerate(rows) if any("Source" == c.strip() for c in r)), None)
    if hi is None:
        print(f"{path}: no 'Source' column (not a SASS source page?)")
        return 1
    head = [c.strip() for c in rows[hi]]
    src = head.index("Source")
    samp = next((i for i, c in enumerate(head) if c.startswith("Warp Stall Sampling (All")), None)
    if samp is None:
        print(f"{path}: no 'Warp Stall Sampling (All Samples)' column; columns: {head}")
        return 1
    data = []
    for r in rows[hi + 1:]:
        if len(r) <= max(src, samp):
            continue
        try:
            v = float(r[samp].replace(",", ""))
        except ValueError:
            continue
        data.append((v, r[src].strip()))
    total = sum(v for v, _ in data) or 1.0
    print(f"{len(data)} instructions, {total:.0f} samples")
    for v, s in sorted(data, reverse=True)[:n]:
        print(f"{100 * v / total:5.1f}%  {s}")
    ops = Counter()
    for v, s in data:
        ops[opcode(s)] += v
    print("by opcode: " + ", ".join(f"{o} {100 * v / total:.1f}%" for o, v in ops.most_common(16)))
    if "--phases" in sys.argv[1:]:
        phases(head, rows[hi + 1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())

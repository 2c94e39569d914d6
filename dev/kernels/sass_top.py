#!/usr/bin/env python3
"""sass_top.py CSV [N] — from ncu's SASS source page (--page source --print-source sass --csv), print the N
instructions with the most warp-stall samples and the samples summed by opcode, with each one's share."""
import csv
import sys
from collections import Counter


def main():
    path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
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
        op = s.split()[0] if s else "?"
        if op.startswith("@"):
            op = s.split()[1] if len(s.split()) > 1 else op
        ops[op.split(".")[0]] += v
    print("by opcode: " + ", ".join(f"{o} {100 * v / total:.1f}%" for o, v in ops.most_common(16)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

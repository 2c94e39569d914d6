#!/usr/bin/env python3
"""mufu_dist.py SASS [OPCODE] — how far each special-function result is issued ahead of its first reader.

SASS: one kernel's listing from `cuobjdump -sass -fun NAME BINARY` (run on the GPU machine: this one has no
cuobjdump). For every unpredicated OPCODE (default MUFU.EX2) it finds the first later instruction that names the
destination register as a source and prints the histogram of those distances in instructions, their median, and
the readers' opcodes. Straight-line order only: a reader past a branch counts as if the code fell through, which
is right for the scan kernels' unrolled chunks (thirty-third session, docs/perf.md: v85's walkers read each exp
a median 15 instructions after it, v87's lookahead build 17).
"""
import re
import statistics
import sys
from collections import Counter

from sass_ops import listing  # (same directory: python puts the script's own first on its path)


def sources(text):
    """the operand text after the destination (stores and branches have no destination)"""
    t = text.split(None, 1)
    if t and t[0].startswith("@"):
        t = t[1].split(None, 1) if len(t) > 1 else []
    if len(t) < 2:
        return ""
    op, ops = t[0], t[1]
    if op.startswith(("ST", "BRA", "RED", "ATOM")):
        return ops
    return ops.split(",", 1)[1] if "," in ops else ""


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    opcode = sys.argv[2] if len(sys.argv) > 2 else "MUFU.EX2"
    ins = [t for kernel in listing(sys.argv[1]).values() for t in kernel]
    if not ins:
        sys.exit(f"mufu_dist: {sys.argv[1]}: no SASS instructions found (expected cuobjdump -sass output)")
    dists, readers = [], Counter()
    for i, text in enumerate(ins):
        if not text.startswith(opcode + " "):
            continue
        dst = text.split()[1].rstrip(",")
        pat = re.compile(r"(?<![\w.])" + re.escape(dst) + r"(?![\w])")
        for j in range(i + 1, min(i + 400, len(ins))):
            if pat.search(sources(ins[j])):
                dists.append(j - i)
                t = ins[j].split()
                readers[(t[1] if t[0].startswith("@") else t[0]).split(".")[0]] += 1
                break
    if not dists:
        sys.exit(f"mufu_dist: {sys.argv[1]}: no unpredicated {opcode} with a reader")
    print(f"{len(ins)} instructions, {len(dists)} unpredicated {opcode} with a reader")
    print("distance: count  " + "  ".join(f"{d}:{n}" for d, n in sorted(Counter(dists).items())))
    print(f"median {statistics.median(dists):g}, mean {statistics.mean(dists):.1f}; readers {dict(readers)}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""sass_ops.py SASS_A SASS_B [REGEX] — opcode counts of the kernels two builds share, side by side.

SASS_A, SASS_B: whole listings from `cuobjdump -sass BINARY` (run on the GPU machine: this one has no cuobjdump).
For every kernel whose mangled name matches REGEX (default: the scan's backward kernels) and whose instruction
count differs between the builds, prints the total and the counts of the arithmetic, shuffle and special-function
opcodes that a walk's changes move (thirty-fourth session: v89's fused butterfly level). Static counts: unrolled
chunk loops make them proportional to the work a chunk, not to time.
"""
import re
import sys
from collections import Counter, defaultdict

FUNC = re.compile(r"^\s*Function : (\S+)")
INSTR = re.compile(r"/\*[0-9a-f]{4,6}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")
SHOWN = ("FMUL", "FADD", "FFMA", "SHFL", "SEL", "FSEL", "MUFU", "LDS", "STS", "F2FP", "F2F", "PRMT")


def counts(path):
    out, name = defaultdict(Counter), None
    with open(path) as f:
        for line in f:
            m = FUNC.match(line)
            if m:
                name = m.group(1)
                continue
            m = INSTR.search(line)
            if m and name:
                out[name][m.group(1)] += 1
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: sass_ops.py SASS_A SASS_B [REGEX]")
    a, b = counts(sys.argv[1]), counts(sys.argv[2])
    pat = re.compile(sys.argv[3] if len(sys.argv) > 3 else r"scan_bwd")
    for name in sorted(set(a) & set(b)):
        if not pat.search(name) or sum(a[name].values()) == sum(b[name].values()) and a[name] == b[name]:
            continue
        print(name[:100])
        for label, c in (("A", a[name]), ("B", b[name])):
            print(f"  {label} total {sum(c.values()):6d}  " + " ".join(f"{k} {c[k]}" for k in SHOWN if c[k]))


if __name__ == "__main__":
    main()

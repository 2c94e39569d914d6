#!/usr/bin/env python3
"""sass_ops.py SASS_A SASS_B [REGEX] — opcode counts of the kernels two builds share, side by side.

SASS_A, SASS_B: whole listings from `cuobjdump -sass BINARY` (run on the GPU machine: this one has no cuobjdump).
For every kernel whose mangled name matches REGEX (default: the scan's backward kernels) and whose opcode counts
differ between the builds, prints the total and the counts of the arithmetic, shuffle and special-function
opcodes that a walk's changes move (thirty-fourth session: v89's fused butterfly level). Static counts: unrolled
chunk loops make them proportional to the work a chunk, not to time.
"""
import re
import sys
from collections import Counter

FUNC = re.compile(r"^\s*Function : (\S+)")
INSTR = re.compile(r"/\*[0-9a-f]{4,6}\*/\s+(.*?)\s*;")
PRED = re.compile(r"^@!?U?P[T0-9]+\s+")
SHOWN = ("FMUL", "FADD", "FFMA", "SHFL", "SEL", "FSEL", "MUFU", "LDS", "STS", "F2FP", "F2F", "PRMT")


def listing(path):
    """{kernel name: [instruction text, in order]} of a `cuobjdump -sass` listing ("" before any Function line);
    mufu_dist.py reads its listings through this too"""
    out, name = {}, ""
    with open(path) as f:
        for line in f:
            m = FUNC.match(line)
            if m:
                name = m.group(1)
                continue
            m = INSTR.search(line)
            if m:
                out.setdefault(name, []).append(m.group(1).strip())
    return out


def opcode(text):
    """an instruction's opcode without its predicate and modifiers: @!P0 MUFU.EX2 R1, R2 gives MUFU"""
    return PRED.sub("", text).split(None, 1)[0].split(".")[0]


def counts(path):
    return {name: Counter(opcode(t) for t in ins) for name, ins in listing(path).items()}


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: sass_ops.py SASS_A SASS_B [REGEX]")
    a, b = counts(sys.argv[1]), counts(sys.argv[2])
    pat = re.compile(sys.argv[3] if len(sys.argv) > 3 else r"scan_bwd")
    for name in sorted(set(a) & set(b)):
        if not pat.search(name) or a[name] == b[name]:
            continue
        print(name[:100])
        for label, c in (("A", a[name]), ("B", b[name])):
            print(f"  {label} total {sum(c.values()):6d}  " + " ".join(f"{k} {c[k]}" for k in SHOWN if c[k]))


if __name__ == "__main__":
    main()

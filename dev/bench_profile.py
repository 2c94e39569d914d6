#!/usr/bin/env python3
"""bench_profile.py RESULTS.JSON LABEL — one `packmamba bench` run's per-op profile in three lines: tok/s and step
times; milliseconds a step by category; each op over 0.3 ms with its fraction of its floor and what bounds it (the
floor: the op's busiest unit's time at that unit's measured ceiling; results from before the vector and exp
ceilings have no bound). Then the measured ceilings."""
import json
import sys

d = json.load(open(sys.argv[1]))
for c in d["configs"]:
    print(f"{sys.argv[2]} | tok/s {c['tok_per_s']:.0f} | step {c['step_ms']['median']:.2f} ms | profiled {c['profiled_step_ms']:.2f}"
          f" | other {c['other_ms']:.2f} | mfu {c.get('mfu')}")
    print("   ", ", ".join(f"{k} {v['ms']:.2f}" for k, v in c["categories"].items()))
    print("   ", "; ".join(f"{o['region']} {o['ms']:.2f} ({o['roof_fraction']:.2f}" + (f" {o['bound']}" if "bound" in o else "") + ")"
                           for o in c["ops"] if o["ms"] > 0.3))
print("ceilings", d["ceilings"])

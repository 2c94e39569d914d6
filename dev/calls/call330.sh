#!/bin/bash
# Forty-second session, first call: Hugging Face transformers' Mamba on the GPU machine's CPU (no build here).
# 1. dev/reference/make_hf_fixture.py writes tests/fixtures/hf/ (checkpoints saved by transformers, one of them
#    sharded, and transformers' float64 losses of them).
# 2. `packmamba export` of tests/fixtures/interop/mamba_ssm_bf16, made on the development machine (not committed):
#      packmamba export --checkpoint tests/fixtures/interop/mamba_ssm_bf16 --out dev/calls/call330_in/f32
#      packmamba export --checkpoint tests/fixtures/interop/mamba_ssm_bf16 --out dev/calls/call330_in/bf16 --dtype bf16
#    read by MambaForCausalLM.from_pretrained: its float64
#    per-document losses against expected.json's, which our own float64 reference (mamba_ref.py) computed.
PY=python3
for p in /opt/torch/.venv/bin/python3 python3; do $p -c 'import transformers' 2>/dev/null && PY=$p && break; done
$PY -c 'import transformers, torch; print("transformers", transformers.__version__, "torch", torch.__version__)'
$PY dev/reference/make_hf_fixture.py "$OUT/hf" 2>&1 | grep -v -i warn
for d in f32 bf16; do
    $PY dev/reference/hf_losses.py dev/calls/call330_in/$d tests/fixtures/interop/expected.json >"$OUT/export_$d.json" 2>"$OUT/export_$d.err"
    $PY - "$OUT/export_$d.json" tests/fixtures/interop/expected.json "$d" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))["per_doc"]
ref = [r["loss"] for r in json.load(open(sys.argv[2]))["per_doc"]]
err = max(abs(a - b) / abs(b) for a, b in zip(got, ref) if b is not None)
print(f"export {sys.argv[3]}: transformers' losses {got}; max rel diff from mamba_ref's {err:.2e}")
PY
done
find "$OUT" -type f | sort

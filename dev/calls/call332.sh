#!/bin/bash
# Forty-second session: tests/fixtures/bin/ (torch.save checkpoints written by torch 2.11, for tests/test_bin.c),
# returned as one tar file (the device returns at most 8 files), and the opcodes of two of their pickles (what
# src/torch_bin.c's pickle machine must read: PROTO, EMPTY_DICT, MARK, BINUNICODE, GLOBAL, BINPUT, BINGET, TUPLE,
# TUPLE1-3, BININT1, BININT2, BINPERSID, NEWFALSE, EMPTY_TUPLE, REDUCE, SETITEM, SETITEMS, BUILD, STOP).
# Unpack with: mkdir -p tests/fixtures/bin && tar xzf bin.tgz -C tests/fixtures/bin
PY=python3
for p in /opt/torch/.venv/bin/python3 python3; do $p -c 'import transformers' 2>/dev/null && PY=$p && break; done
rm -rf /tmp/bin
$PY dev/reference/make_bin_fixture.py /tmp/bin 2>&1 | grep -v -i "warn\|Loading\|falling"
(cd /tmp/bin && tar czf "$OUT/bin.tgz" .)
$PY - <<'PY'
import io, pickletools, zipfile
for f in ['/tmp/bin/hf_f32/pytorch_model.bin', '/tmp/bin/mamba_ssm_f32/pytorch_model.bin']:
    z = zipfile.ZipFile(f)
    out = io.StringIO()
    pickletools.dis(z.read([n for n in z.namelist() if n.endswith('data.pkl')][0]), out=out)
    ops = sorted({l.split(':', 1)[1].split()[0] for l in out.getvalue().splitlines()
                  if ':' in l and l.split(':')[0].strip().isdigit()})
    print(f, 'opcodes:', ops)
PY

#!/usr/bin/env bash
# GPU call: the pack16 experiment, its SASS, tapewise-bench's 16-bit sin forward SASS, torch eager beside.
set -u
cd build-exp
./pack16 | tee $OUT/pack16.txt
cuobjdump -sass pack16 > $OUT/pack16.sass
python3 - <<'PY' | tee -a $OUT/pack16.txt
import torch
n = 1 << 26
for dt in (torch.bfloat16, torch.float16):
    x = (torch.rand(n, device="cuda") * 8 - 4).to(dt)
    for name in ("sin", "sigmoid", "tanh", "log", "sqrt", "exp"):
        f = getattr(torch, name); ts = []
        xin = x.abs() + 0.5 if name in ("log", "sqrt") else x
        for r in range(25):
            a, b = torch.cuda.Event(True), torch.cuda.Event(True)
            a.record(); y = f(xin); b.record(); b.synchronize()
            if r >= 5: ts.append(a.elapsed_time(b) * 1000)
        ts.sort(); print(dt, "torch.%s eager 2^26: %.1f us" % (name, ts[len(ts) // 2]))
PY
cd .. && bash build-gpu-pack/setup.sh && cuobjdump -sass build/bin/tapewise-bench > /tmp/bench.sass && python3 - <<'PY'
import re, os
text = open('/tmp/bench.sass').read()
funcs = re.split(r'\n\s+Function : ', text)
keep = [f for f in funcs if 'ForwardFn' in f.split('\n')[0] and ('bfloat16' in f.split('\n')[0] or 'float16' in f.split('\n')[0])]
open(os.environ['OUT'] + '/tapewise_fwd16.sass', 'w').write('\n\n'.join(keep))
print(len(keep), '16-bit forward kernels dumped')
PY

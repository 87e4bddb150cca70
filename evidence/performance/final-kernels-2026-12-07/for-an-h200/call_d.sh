#!/usr/bin/env bash
# GPU call D (2026-12-07, sixteenth session): the Python package of HEAD 640f3f7 (the cp312 wheel of
# tools/build_wheel.sh --cuda-architectures 90, its files carried in .gpu/site) on CUDA: its pytest suite with
# PyTorch, tapewise.torch's nodes beside eager (bench/bench_torch_nodes.py), every 16-bit input against ATen.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS; LIMIT=${LIMIT:-575}
rm -rf .gpu/bin .gpu/site; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
export PYTHONPATH=$PWD/.gpu/site
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt; python3 -c "import torch, tapewise; print('torch', torch.__version__, 'tapewise', tapewise.__file__)" | tee -a $R/gpu.txt
s=$SECONDS; timeout ${P16:-200} python3 -P conform/aten_parity16.py --out $R/parity16 > $R/aten_parity16.txt 2>&1
echo "== parity16: exit $? after $((SECONDS-s)) s"; tail -n 2 $R/aten_parity16.txt; cp $R/parity16/aten_parity16.json $R/ 2>/dev/null; rm -rf $R/parity16
s=$SECONDS; timeout 150 python3 -P bench/bench_torch_nodes.py --out $R/bench_torch_nodes.json > $R/bench_torch_nodes.txt 2>&1
echo "== torch nodes: exit $? after $((SECONDS-s)) s"; cat $R/bench_torch_nodes.txt | cut -c1-160 | head -60
left=$((LIMIT - (SECONDS - T0)))
s=$SECONDS; TAPEWISE_CONFORM=$PWD/$B/tapewise-conform timeout $((left > 30 ? left - 10 : 20)) python3 -P -m pytest -q -n 8 -rs -p no:cacheprovider python/tests proptest/test_c_api_ctypes.py > $R/python_tests.txt 2>&1
echo "== pytest: exit $? after $((SECONDS-s)) s"; tail -n 4 $R/python_tests.txt; grep -E "^FAILED" $R/python_tests.txt | head
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT

#!/usr/bin/env bash
# Run 31: the final code of issue 24. The chain in three shapes at 2^12-2^20 beside PyTorch eager and
# CUDA graphs (torch.compile: earlier runs), twice, after every empty slab is kept (kept_memory.hpp);
# then every C++ test, the conformance run, the special-point audit and ATen parity on CUDA.
set -u
start=$SECONDS
commit=${1:?commit}
W=/tmp/run31; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run31.tar.xz run31; }
export TAPEWISE_TORCH_NATIVE_DIR=$TAPEWISE_TORCH_NATIVE_DIR
bash build-gpu-pack/setup.sh
python3 -m pip install -q --no-deps --force-reinstall wheelhouse/tapewise-*-cp312-*.whl > $W/pip.txt 2>&1; echo "pip exit $?"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $W/gpu.txt; lscpu | grep -E "Model name|^CPU\(s\)|MHz" >> $W/gpu.txt; cat $W/gpu.txt
timeout 120 python3 tools/bench/bench_torch.py --sizes '' --no-compile --chain-sizes 12,16,18,20 --chain-shapes unary,binary,fanout \
  --json $W/torch_chain.json > $W/torch_chain.txt 2>&1; echo "torch chain exit $? after $((SECONDS - start)) s"; save
for k in 1 2; do
  timeout 90 build/bin/tapewise-bench --no-kernels --chain-sizes 12,16,18,20 --chain-shapes unary,binary,fanout --commit $commit \
    --torch $W/torch_chain.json --json $W/bench_chain_$k.json > $W/bench_chain_$k.txt 2>&1; echo "bench chain $k exit $? after $((SECONDS - start)) s"
  grep -E "^  (unary|binary|fanout)|^  2\^" $W/bench_chain_$k.txt; save
done
timeout $((560 - (SECONDS - start))) tools/gpu_validate.sh $W/gv tests conform audit parity > $W/gpu_validate.txt 2>&1
echo "gpu_validate exit $? after $((SECONDS - start)) s"; cat $W/gpu_validate.txt; save
echo "total $((SECONDS - start)) s"

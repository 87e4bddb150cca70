#!/usr/bin/env bash
# Run 25: the host path after 105a68d..6c817e0 (a backward's gradients in between without a Buffer each,
# a cheaper record, steps built in place) and 01d9fe7 (region values made in the extension): the chain in
# three shapes at four sizes beside PyTorch eager and CUDA graphs (torch.compile: runs 18 and 22), twice,
# then bench_torch_nodes.py (a node, and the chain node by node, as a region and through Tape).
set -u
start=$SECONDS
commit=${1:?commit}
W=/tmp/run25; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run25.tar.xz run25; }
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
timeout 250 python3 tools/bench/bench_torch_nodes.py --reps 30 --commit $commit --out $W/bench_torch_nodes.json > $W/bench_torch_nodes.txt 2>&1
echo "bench_torch_nodes exit $? after $((SECONDS - start)) s"; sed -n '/(b)/,$p' $W/bench_torch_nodes.txt; save
echo "total $((SECONDS - start)) s"

#!/usr/bin/env bash
# Run 33: the Python package on the final code: its tests with PyTorch on CUDA (tools/gpu_validate.sh's
# python step: every python/tests file, the C ABI through ctypes), then bench_torch_nodes.py (a node, and
# the 1,000-node chain node by node, as a region and through Tape).
set -u
start=$SECONDS
commit=${1:?commit}
W=/tmp/run33; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run33.tar.xz run33; }
export TAPEWISE_TORCH_NATIVE_DIR=$TAPEWISE_TORCH_NATIVE_DIR
[ -x build/bin/tapewise-bench ] || bash build-gpu-pack/setup.sh
TAPEWISE_WHEEL=$(ls wheelhouse/tapewise-*-cp312-*.whl) timeout 330 tools/gpu_validate.sh $W/gv python > $W/gpu_validate.txt 2>&1
echo "gpu_validate python exit $? after $((SECONDS - start)) s"; tail -n 12 $W/gpu_validate.txt; save
timeout $((570 - (SECONDS - start))) python3 tools/bench/bench_torch_nodes.py --reps 20 --commit $commit --out $W/bench_torch_nodes.json > $W/bench_torch_nodes.txt 2>&1
echo "bench_torch_nodes exit $? after $((SECONDS - start)) s"; sed -n '/(b)/,$p' $W/bench_torch_nodes.txt; save
echo "total $((SECONDS - start)) s"

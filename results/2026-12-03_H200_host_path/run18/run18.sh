#!/usr/bin/env bash
# Run 18: the chain in three shapes beside PyTorch, compiled pieces on (the default), from one build of
# the commit below; then the host sampler on the new host path, then every test.
set -u
start=$SECONDS
commit=${1:?commit}
bash build-gpu-pack/setup.sh
W=/tmp/run18; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run18.tar.xz run18; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
timeout 250 python3 tools/bench/bench_torch.py --sizes '' --chain-sizes 12,16,18,20 --chain-shapes unary \
  --json $W/torch_unary.json > $W/torch_unary.txt 2>&1; echo "torch unary exit $? after $((SECONDS - start)) s"; save
timeout 90 python3 tools/bench/bench_torch.py --sizes '' --no-compile --chain-sizes 12,16,18,20 --chain-shapes binary,fanout \
  --json $W/torch_bf.json > $W/torch_bf.txt 2>&1; echo "torch binary/fanout exit $? after $((SECONDS - start)) s"; save
timeout 70 build/bin/tapewise-bench --no-kernels --chain-sizes 12,16,18,20 --chain-shapes unary --commit $commit \
  --torch $W/torch_unary.json --json $W/bench_unary.json > $W/bench_unary.txt 2>&1; echo "bench unary exit $? after $((SECONDS - start)) s"
timeout 70 build/bin/tapewise-bench --no-kernels --chain-sizes 12,16,18,20 --chain-shapes binary,fanout --commit $commit \
  --torch $W/torch_bf.json --json $W/bench_bf.json > $W/bench_bf.txt 2>&1; echo "bench binary/fanout exit $? after $((SECONDS - start)) s"
python3 tools/bench/digest.py $W/bench_unary.json | tail -12; save
for n in 12 16; do timeout 30 build-gpu-pack/cuda_chain $n 3000 $W/samples_$n.txt > $W/cuda_chain_$n.txt 2>&1; tail -1 $W/cuda_chain_$n.txt; done
save
timeout 130 build/bin/tapewise_tests --gtest_brief=1 > $W/tests.txt 2>&1; echo "tests exit $? after $((SECONDS - start)) s"; tail -3 $W/tests.txt
grep -E "compiled pieces:" $W/tests.txt | head -2; save
echo "total $((SECONDS - start)) s"

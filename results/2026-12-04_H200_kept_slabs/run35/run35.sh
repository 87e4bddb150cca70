#!/usr/bin/env bash
# Run 35: torch.compile of the binary chain and the
# fan-out DAG at 2^18 beside tapewise-bench (one compile each; earlier runs did 2^12, 2^16 and 2^20).
set -u
start=$SECONDS
commit=${1:?commit}
W=/tmp/run35; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run35.tar.xz run35; }
export TAPEWISE_TORCH_NATIVE_DIR=$TAPEWISE_TORCH_NATIVE_DIR
[ -x build/bin/tapewise-bench ] || bash build-gpu-pack/setup.sh
python3 -c "import tapewise.torch" 2>/dev/null || python3 -m pip install -q --no-deps --force-reinstall wheelhouse/tapewise-*-cp312-*.whl
left=$((560 - (SECONDS - start)))
timeout $((left - 40)) python3 tools/bench/bench_torch.py --sizes "" --chain-sizes 18 --chain-shapes binary,fanout \
  --json $W/torch_bf.json > $W/torch_bf.txt 2>&1; echo "torch binary/fanout (compile) exit $? after $((SECONDS - start)) s"; save
timeout 35 build/bin/tapewise-bench --no-kernels --chain-sizes 18 --chain-shapes binary,fanout --commit $commit \
  --torch $W/torch_bf.json --json $W/bench_bf.json > $W/bench_bf.txt 2>&1; echo "bench binary/fanout exit $? after $((SECONDS - start)) s"
grep -E "^  (binary|fanout)|^  2\^" $W/bench_bf.txt; save
echo "total $((SECONDS - start)) s"

#!/usr/bin/env bash
# Run 22: the final tapewise.torch numbers (bench_torch_nodes.py of the commit below, the C++ nodes built
# against the machine's torch), the tests that changed since run 21, then torch.compile of the binary
# chain and the fan-out DAG at 2^12 beside tapewise-bench (the peer those shapes lacked; one compile each).
set -u
start=$SECONDS
commit=${1:?commit}
W=/tmp/run22; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run22.tar.xz run22; }
export TAPEWISE_TORCH_NATIVE_DIR=/tmp/tw_torch_nodes
bash build-gpu-pack/setup.sh
python3 -m pip install -q --no-deps --force-reinstall wheelhouse/tapewise-*-cp312-*.whl > $W/pip.txt 2>&1; echo "pip exit $?"
python3 -c "import torch, tapewise.torch as twt; print(torch.__version__, twt.node_path())" > $W/node_path.txt 2>&1; tail -1 $W/node_path.txt
timeout 260 python3 tools/bench/bench_torch_nodes.py --reps 30 --out $W/bench_torch_nodes.json > $W/bench_torch_nodes.txt 2>&1
echo "bench exit $? after $((SECONDS - start)) s"; cat $W/bench_torch_nodes.txt; save
timeout 90 python3 -m pytest -q -p no:cacheprovider python/tests/test_torch.py -k "bench_torch_nodes or cpp_nodes or grad_fn or long_chain or python_nodes" > $W/pytest.txt 2>&1
echo "pytest exit $? after $((SECONDS - start)) s: $(tail -1 $W/pytest.txt)"; save
left=$((560 - (SECONDS - start)))
timeout $((left - 45)) python3 tools/bench/bench_torch.py --sizes "" --chain-sizes 12 --chain-shapes binary,fanout \
  --json $W/torch_bf.json > $W/torch_bf.txt 2>&1; echo "torch binary/fanout (compile) exit $? after $((SECONDS - start)) s"; save
timeout 40 build/bin/tapewise-bench --no-kernels --chain-sizes 12 --chain-shapes binary,fanout --commit $commit \
  --torch $W/torch_bf.json --json $W/bench_bf.json > $W/bench_bf.txt 2>&1; echo "bench binary/fanout exit $? after $((SECONDS - start)) s"
grep -E "^  2\^|strongest|binary|fanout" $W/bench_bf.txt | head -20; save
echo "total $((SECONDS - start)) s"

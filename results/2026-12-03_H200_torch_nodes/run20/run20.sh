#!/usr/bin/env bash
# Run 20: tapewise.torch's C++ nodes on the H200 — the wheel of the commit below installed, the C++
# nodes built against the machine's torch, test_torch.py on CPU and CUDA with both node paths, and
# bench_torch_nodes.py (each node beside eager, C++ and Python; the chain per node, in a region, on the tape).
set -u
start=$SECONDS
W=/tmp/run20; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run20.tar.xz run20; }
export TAPEWISE_TORCH_NATIVE_DIR=/tmp/tw_torch_nodes
python3 -m pip install -q --no-deps --force-reinstall wheelhouse/tapewise-*-cp312-*.whl > $W/pip.txt 2>&1; echo "pip exit $?"
python3 -c "import torch, tapewise; print(torch.__version__, tapewise.__version__, torch.cuda.get_device_name())" | tee $W/versions.txt
( time python3 -c "import torch, tapewise.torch as twt; print(twt.node_path())" ) > $W/first_call.txt 2>&1
echo "first call after $((SECONDS - start)) s:"; cat $W/first_call.txt | tail -6; save
timeout 300 python3 -m pytest -q -p no:cacheprovider python/tests/test_torch.py > $W/pytest_torch.txt 2>&1
echo "pytest exit $? after $((SECONDS - start)) s: $(tail -1 $W/pytest_torch.txt)"; save
timeout 240 python3 tools/bench/bench_torch_nodes.py --out $W/bench_torch_nodes.json > $W/bench_torch_nodes.txt 2>&1
echo "bench exit $? after $((SECONDS - start)) s"; cat $W/bench_torch_nodes.txt; save
echo "total $((SECONDS - start)) s"

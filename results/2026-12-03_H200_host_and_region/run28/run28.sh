#!/usr/bin/env bash
# Run 28: bench_torch_nodes.py with each variant timed in blocks (three rounds), on the wheel of run 25
# (6c817e0; the script is the tree's).
set -u
start=$SECONDS
commit=${1:?commit}
W=/tmp/run28; mkdir -p $W
save() { tar -C /tmp -cJf $OUT/run28.tar.xz run28; }
export TAPEWISE_TORCH_NATIVE_DIR=$TAPEWISE_TORCH_NATIVE_DIR
python3 -c "import tapewise.torch" 2>/dev/null || python3 -m pip install -q --no-deps --force-reinstall wheelhouse/tapewise-*-cp312-*.whl
timeout 300 python3 tools/bench/bench_torch_nodes.py --reps 30 --commit $commit --out $W/bench_torch_nodes.json > $W/bench_torch_nodes.txt 2>&1
echo "bench_torch_nodes exit $? after $((SECONDS - start)) s"; cat $W/bench_torch_nodes.txt; save

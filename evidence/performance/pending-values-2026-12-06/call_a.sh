#!/usr/bin/env bash
# GPU call A (2026-12-06, twelfth session): a fused program backward stores only the pending forwards it
# reads (186462a), and a process's exit waits for a compilation in flight (2ba2150): "new", beside
# c16d2cb ("base"). The whole test suite with the spec data in place; initcheck and memcheck over the
# programs' and compiled pieces' tests (a value left pending must never be read); the chains past L2
# (100 nodes at 2^22-2^26; fan-out and unary, float32 and bfloat16), both builds alternated, each row the
# median of five timed blocks; the 1,000-node chains at 2^12-2^20 (unary, fan-out, float32), both builds,
# and new with max_pending_nodes 1024 (the whole chain pending until its backward); PyTorch eager, CUDA
# graphs and torch.compile on the float32 fan-out chain past L2 in the same call, where time is left.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
s=$SECONDS; timeout 220 $B/tapewise_tests --gtest_brief=1 --gtest_filter='-CudaLimits.*:Cli.ProveWithoutAnAnswerIsNoVerdict' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|Failure' $R/tests.txt | head -8
for run in "initcheck Backends/Programs.*cuda" "initcheck CompiledPieces.*" "memcheck Backends/Programs.*cuda"; do
  set -- $run; tool=$1; f=$2
  s=$SECONDS; RC_PARAMS="seed=5 max_success=10" timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter="$f" > $R/t.txt 2>&1
  echo "== $tool $f: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t.txt | tr '\n' ' ')"
  tail -c 60000 $R/t.txt > "$R/${tool}_${f//[^A-Za-z]/_}.txt"
done
rm -f $R/t.txt
for dt in f32 bf16; do for bin in base new; do
  s=$SECONDS; timeout 45 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes fanout,unary --chain-dtype $dt --json $R/large_${bin}_$dt.json > $R/large_${bin}_$dt.txt 2>&1
  echo "== large $bin $dt: exit $? after $((SECONDS-s)) s"
done; done
left=$((490-SECONDS+T0)); if [ $left -gt 100 ]; then
  s=$SECONDS; timeout $((left-30)) python3 bench/bench_torch.py --sizes '' --no-kernels --conform $B/tapewise-conform --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes fanout --chain-dtype f32 --json $R/torch_f32_fanout.json > $R/torch_f32_fanout.txt 2>&1
  echo "== torch f32 fanout: exit $? after $((SECONDS-s)) s"; grep -E '^chain' $R/torch_f32_fanout.txt
fi
for bin in base new newp1024; do
  [ $((SECONDS-T0)) -gt 470 ] && break
  p=""; b=$bin; [ $bin = newp1024 ] && { p="--max-pending-nodes 1024"; b=new; }
  s=$SECONDS; timeout 45 $B/tapewise-bench-$b --no-kernels --chain-calls 5 --chain-sizes 12,16,18,20 --chain-shapes unary,fanout --chain-dtype f32 $p --json $R/small_$bin.json > $R/small_$bin.txt 2>&1
  echo "== small $bin: exit $? after $((SECONDS-s)) s"
done
python3 - $R <<'PY'
import json, glob, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + '/*_*.json')):
    name = f.split('/')[-1][:-5]
    d = json.load(open(f))
    for c in d.get('chain', []):
        rows.setdefault((c['shape'], c['dtype'], c['log2n']), []).append(f"{name}: {c['device_us_per_node'] or 0:.3f}/{c['us_per_node']:.3f} rec {c['record_host_us_per_node']:.3f}")
    for shape, c in d.get('chain_shapes', {}).items():
        for log2n, r in c['sizes'].items():
            rows.setdefault((shape, c['dtype'], int(log2n)), []).append(
                "eager %.2f graph %.2f compile %.2f" % (r['eager_us_per_node'], r['graph_us_per_node'], r['compile_us_per_node']))
for k, v in sorted(rows.items(), key=str): print(k, ' | '.join(v))
PY
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT

#!/usr/bin/env bash
# GPU call C (2026-12-06, eleventh session): compiled pieces with each step's slot writes as constants (82ceb27,
# "writes"), beside e3d718c ("new", the register history) and ee97800 ("base"). The whole test suite with the
# spec data in place; memcheck and initcheck over the programs' and compiled pieces' tests; ncu of the fan-out's
# pieces at 2^24; the chains: 1,000 nodes at 2^12-2^20 (unary, fan-out) and 100 at 2^22-2^26 (fan-out, unary;
# float32 and bfloat16), the three builds alternated, each the median of five timed blocks.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
s=$SECONDS; timeout 200 $B/tapewise_tests --gtest_brief=1 --gtest_filter='-CudaLimits.*:Cli.ProveWithoutAnAnswerIsNoVerdict' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|Failure' $R/tests.txt | head -8
for tool in memcheck initcheck; do for f in 'Backends/Programs.*cuda' 'CompiledPieces.*'; do
  s=$SECONDS; RC_PARAMS="seed=5 max_success=10" timeout 50 compute-sanitizer --tool $tool --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter="$f" > $R/t.txt 2>&1
  echo "== $tool $f: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t.txt | tr '\n' ' ')"
  tail -c 100000 $R/t.txt > "$R/${tool}_${f//[^A-Za-z]/_}.txt"
done; done
rm -f $R/t.txt
for bin in new writes; do
  timeout 40 ncu --kernel-name regex:tapewise_compiled_piece --launch-skip 4 --launch-count 2 --metrics smsp__inst_executed.sum,launch__registers_per_thread,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active --csv \
    $B/tapewise-bench-$bin --no-kernels --chain-sizes 24 --chain-nodes 96 --chain-shapes fanout --chain-dtype f32 > $R/ncu_$bin.csv 2> /dev/null
  echo "== ncu $bin: exit $?"; grep -E '^"[0-9]' $R/ncu_$bin.csv | awk -F'","' '{print $1, $(NF-2), $NF}'
done
for round in 1 2; do for bin in base new writes; do
  s=$SECONDS; timeout 40 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 12,16,18,20 --chain-shapes unary,fanout --chain-dtype f32 --json $R/small_${bin}_$round.json > $R/small_${bin}_$round.txt 2>&1
  echo "== small $bin $round: exit $? after $((SECONDS-s)) s"
done; done
for dt in f32 bf16; do for bin in base new writes; do
  s=$SECONDS; timeout 40 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes fanout,unary --chain-dtype $dt --json $R/large_${bin}_$dt.json > $R/large_${bin}_$dt.txt 2>&1
  echo "== large $bin $dt: exit $? after $((SECONDS-s)) s"
done; done
python3 - $R <<'PY'
import json, glob, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + '/*_*.json')):
    name = f.split('/')[-1][:-5]
    for c in json.load(open(f)).get('chain', []):
        rows.setdefault((c['shape'], c['dtype'], c['log2n']), []).append(f"{name}: {c['device_us_per_node'] or 0:.3f}/{c['us_per_node']:.3f}")
for k, v in sorted(rows.items()): print(k, ' | '.join(v))
PY
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT

#!/usr/bin/env bash
# GPU call E (2026-12-06, thirteenth session): HEAD dbc3c2d (max_pending_nodes 4,096 by default; the NVRTC
# header set kept to the process's end, both never run on a GPU before). The whole suite; memcheck over
# the programs' tests (three seeds) and the four compute-sanitizer tools over the compiled pieces';
# the 1,000-node chains at 2^12-2^20 (three shapes, float32 and bfloat16, median of five blocks); ncu's
# warp states of the unary chain's pieces at 2^12 (the end-to-end 0.15 us/node target's miss).
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
s=$SECONDS; timeout 220 $B/tapewise_tests --gtest_brief=1 --gtest_filter='-CudaLimits.*:Cli.ProveWithoutAnAnswerIsNoVerdict' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|Failure' $R/tests.txt | head -8
for run in "memcheck Backends/Programs.*cuda 1" "memcheck Backends/Programs.*cuda 2" "memcheck Backends/Programs.*cuda 3" \
           "memcheck CompiledPieces.* 4" "initcheck CompiledPieces.* 4" "racecheck CompiledPieces.* 4" "synccheck CompiledPieces.* 4"; do
  set -- $run; tool=$1; f=$2; seed=$3
  s=$SECONDS; RC_PARAMS="seed=$seed max_success=10" timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter="$f" > $R/t.txt 2>&1
  echo "== $tool $f seed $seed: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t.txt | tr '\n' ' ')"
  tail -c 20000 $R/t.txt > "$R/${tool}_${f//[^A-Za-z]/_}_$seed.txt"
done
rm -f $R/t.txt
for dt in f32 bf16; do
  s=$SECONDS; timeout 60 $B/tapewise-bench --no-kernels --chain-calls 5 --chain-sizes 12,16,18,20 --chain-shapes unary,binary,fanout --chain-dtype $dt --json $R/small_$dt.json > $R/small_$dt.txt 2>&1
  echo "== small $dt: exit $? after $((SECONDS-s)) s"
done
s=$SECONDS; timeout 90 ncu --kernel-name regex:'tapewise_compiled_piece|program_kernel' --launch-skip 12 --launch-count 6 \
  --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section SpeedOfLight \
  --metrics smsp__inst_executed.sum,gpu__time_duration.sum \
  $B/tapewise-bench --no-kernels --chain-calls 1 --chain-sizes 12 --chain-shapes unary --chain-dtype f32 > $R/ncu_unary_12.txt 2>&1
echo "== ncu unary 2^12: exit $? after $((SECONDS-s)) s"; grep -E 'tapewise_compiled_piece|program_kernel|Duration|Executed Instructions  |Stall Long|Warp Cycles Per Issued|No Eligible|Registers Per|Block Limit Reg|Achieved Occ' $R/ncu_unary_12.txt | head -80
python3 - $R <<'PY'
import json, glob, sys
for f in sorted(glob.glob(sys.argv[1] + '/small_*.json')):
    for c in json.load(open(f)).get('chain', []):
        print(c['shape'], c['dtype'], c['log2n'], f"device {c['device_us_per_node'] or 0:.3f} total {c['us_per_node']:.3f} rec {c['record_host_us_per_node']:.3f}")
PY
tail -3 $R/small_f32.txt
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT

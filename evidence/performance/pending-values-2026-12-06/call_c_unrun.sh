#!/usr/bin/env bash
# GPU call prepared (2026-12-06, twelfth session) and NOT run (no device time left): 92f176a ("new": max_pending_nodes 4,096 by default; the NVRTC
# header set kept to the process's end) beside c16d2cb ("base"): memcheck of the programs' tests six
# times (seeds 1-6) and of the compiled pieces' tests, initcheck of the latter; the CUDA tests of tapes,
# programs and compiled pieces; the 1,000-node chains at 2^12-2^20 (unary, fan-out, float32), alternated.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
for i in 1 2 3 4 5 6; do
  s=$SECONDS; RC_PARAMS="seed=$i max_success=10" timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter='Backends/Programs.*cuda' > $R/t.txt 2>&1
  echo "== memcheck programs, seed $i: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY|PASSED|FAILED|didn.t terminate' $R/t.txt | tr '\n' ' ')"
done
for t in memcheck initcheck; do
  s=$SECONDS; RC_PARAMS="seed=7 max_success=10" timeout 60 compute-sanitizer --tool $t --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter='CompiledPieces.*' > $R/t.txt 2>&1
  echo "== $t compiled pieces: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY|PASSED|FAILED|didn.t terminate' $R/t.txt | tr '\n' ' ')"
done
s=$SECONDS; timeout 90 $B/tapewise_tests --gtest_brief=1 --gtest_filter='*Program*:*Piece*:*Tape*:*Backward*:*StepSources*:*RegisterPass*:CApi*' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|Failure' $R/tests.txt | head -8
for round in 1 2; do for bin in base new; do
  s=$SECONDS; timeout 40 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 12,16,18,20 --chain-shapes unary,fanout --chain-dtype f32 --json $R/small_${bin}_$round.json > $R/small_${bin}_$round.txt 2>&1
  echo "== small $bin $round: exit $? after $((SECONDS-s)) s"
done; done
python3 - $R <<'PY'
import json, glob, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + '/small_*.json')):
    name = f.split('/')[-1][6:-5]
    for c in json.load(open(f)).get('chain', []):
        rows.setdefault((c['shape'], c['log2n']), []).append(f"{name}: {c['device_us_per_node'] or 0:.3f}/{c['us_per_node']:.3f} rec {c['record_host_us_per_node']:.3f}")
for k, v in sorted(rows.items()): print(k, ' | '.join(v))
PY
echo "total $((SECONDS-T0)) s"; rm -f $R/t.txt
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R

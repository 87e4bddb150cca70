#!/usr/bin/env bash
# GPU call F (2026-12-06, thirteenth session): a compiled piece of one lane loads its memory operands three
# steps ahead ("new"), beside dbc3c2d ("base", one step ahead). The CUDA tests of programs, pieces and
# tapes; initcheck and memcheck over the programs' and compiled pieces' tests (a load ahead must never
# read memory before its write); the 1,000-node chains at 2^12-2^20 (three shapes, float32 and bfloat16;
# both builds alternated, median of five blocks); ncu of the unary chain's pieces at 2^12, new.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
s=$SECONDS; timeout 120 $B/tapewise_tests --gtest_brief=1 --gtest_filter='*Program*:*Piece*:*Tape*:*Backward*:*StepSources*:*RegisterPass*:CApi*:*Chain*' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|Failure' $R/tests.txt | head -8
for run in "initcheck CompiledPieces.* 4" "initcheck Backends/Programs.*cuda 5" "memcheck CompiledPieces.* 6" "memcheck Backends/Programs.*cuda 2"; do
  set -- $run; tool=$1; f=$2; seed=$3
  s=$SECONDS; RC_PARAMS="seed=$seed max_success=10" timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter="$f" > $R/t.txt 2>&1
  echo "== $tool $f seed $seed: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t.txt | tr '\n' ' ')"
  tail -c 20000 $R/t.txt > "$R/${tool}_${f//[^A-Za-z]/_}_$seed.txt"
done
rm -f $R/t.txt
for round in 1 2; do for dt in f32 bf16; do for bin in base new; do
  s=$SECONDS; timeout 60 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 12,16,18,20 --chain-shapes unary,binary,fanout --chain-dtype $dt --json $R/small_${bin}_${dt}_$round.json > $R/small_${bin}_${dt}_$round.txt 2>&1
  echo "== small $bin $dt $round: exit $? after $((SECONDS-s)) s"
done; done; [ $((SECONDS-T0)) -gt 330 ] && break; done
s=$SECONDS; timeout 60 ncu --kernel-name regex:'tapewise_compiled_piece' --launch-skip 12 --launch-count 6 \
  --section WarpStateStats --section SchedulerStats --metrics smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread \
  $B/tapewise-bench-new --no-kernels --chain-calls 1 --chain-sizes 12 --chain-shapes unary --chain-dtype f32 > $R/ncu_unary_12.txt 2>&1
echo "== ncu unary 2^12: exit $? after $((SECONDS-s)) s"; grep -E 'Duration|gpu__time_duration|Warp Cycles Per Issued|inst_executed|registers_per|Est. Speedup|L1TEX' $R/ncu_unary_12.txt | head -40
python3 - $R <<'PY'
import json, glob, sys, statistics
rows = {}
for f in sorted(glob.glob(sys.argv[1] + '/small_*.json')):
    bin = f.split('/')[-1].split('_')[1]
    for c in json.load(open(f)).get('chain', []):
        rows.setdefault((c['shape'], c['dtype'], c['log2n']), {}).setdefault(bin, []).append((c['device_us_per_node'] or 0, c['us_per_node'], c['record_host_us_per_node']))
for k, v in sorted(rows.items(), key=str):
    print(k, ' | '.join(f"{b}: dev {' '.join('%.3f' % x[0] for x in r)} tot {' '.join('%.3f' % x[1] for x in r)}" for b, r in sorted(v.items())))
PY
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT

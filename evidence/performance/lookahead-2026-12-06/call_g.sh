#!/usr/bin/env bash
# GPU call G (2026-12-06, thirteenth session): a compiled piece of one lane loads three steps ahead and
# prefetches into L1 eight steps ahead ("new"), beside loads three steps ahead alone ("ahead", call F's
# new) and dbc3c2d ("base"). The CUDA tests of programs and pieces; initcheck over them; the 1,000-node chains
# at 2^12 and 2^16 (one lane; three shapes; float32 and bfloat16; the builds alternated; median of
# five blocks); ncu of the unary chain's pieces at 2^12, new.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
s=$SECONDS; timeout 80 $B/tapewise_tests --gtest_brief=1 --gtest_filter='*Program*:*Piece*:*Chain*:*RegisterPass*' > $R/tests.txt 2>&1
echo "== tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|Failure' $R/tests.txt | head -8
for run in "initcheck CompiledPieces.* 8" "initcheck Backends/Programs.*cuda 9"; do
  set -- $run; tool=$1; f=$2; seed=$3
  s=$SECONDS; RC_PARAMS="seed=$seed max_success=10" timeout 50 compute-sanitizer --tool $tool --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter="$f" > $R/t.txt 2>&1
  echo "== $tool $f seed $seed: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/t.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/t.txt | tr '\n' ' ')"
  tail -c 20000 $R/t.txt > "$R/${tool}_${f//[^A-Za-z]/_}_$seed.txt"
done
rm -f $R/t.txt
for job in "f32 1" "bf16 1"; do set -- $job; for bin in base ahead new; do
  [ $((SECONDS-T0)) -gt 250 ] && break 2
  s=$SECONDS; timeout 40 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 12,16 --chain-shapes unary,binary,fanout --chain-dtype $1 --json $R/small_${bin}_$1_$2.json > $R/small_${bin}_$1_$2.txt 2>&1
  echo "== small $bin $1 $2: exit $? after $((SECONDS-s)) s"
done; done
s=$SECONDS; timeout 40 ncu --kernel-name regex:'tapewise_compiled_piece' --launch-skip 12 --launch-count 6 \
  --section WarpStateStats --metrics smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread \
  $B/tapewise-bench-new --no-kernels --chain-calls 1 --chain-sizes 12 --chain-shapes unary --chain-dtype f32 > $R/ncu_unary_12.txt 2>&1
echo "== ncu unary 2^12: exit $? after $((SECONDS-s)) s"; grep -E 'gpu__time_duration|Warp Cycles Per Issued|inst_executed|registers_per|Est. Speedup|^ +on a ' $R/ncu_unary_12.txt | head -40
python3 - $R <<'PY'
import json, glob, sys
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

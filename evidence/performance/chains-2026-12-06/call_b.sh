#!/usr/bin/env bash
# GPU call B (2026-12-06, eleventh session): the CLI tests with the spec data in place (call A lacked it);
# where call A's memcheck exit status 11 (every test passed, 0 errors) comes from; ncu's instructions, registers
# and local memory of the fan-out's compiled pieces at 2^24, ee97800 (base) and the register history (new); then
# the 100-node chains at 2^22-2^26 beside PyTorch eager, CUDA graphs and torch.compile in the same call
# (bench/bench_torch.py), then tapewise-bench base and new, each the median of five timed blocks.
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin; R=$OUT/r; mkdir -p $R
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt; python3 -c "import torch; print('torch', torch.__version__)" | tee -a $R/gpu.txt
s=$SECONDS; timeout 60 $B/tapewise_tests --gtest_brief=1 --gtest_filter='Cli.*' > $R/cli.txt 2>&1
echo "== cli: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED)' $R/cli.txt | head -5
for f in 'Backends/Programs.*cuda:CompiledPieces.*:StepSources.*' 'Backends/Programs.*cuda' 'CompiledPieces.*'; do
  s=$SECONDS; RC_PARAMS="seed=5 max_success=10" timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tapewise_tests --gtest_brief=1 --gtest_filter="$f" > $R/memcheck.txt 2>&1
  echo "== memcheck $f: exit $? after $((SECONDS-s)) s: $(grep -E 'ERROR SUMMARY' $R/memcheck.txt | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' $R/memcheck.txt | tr '\n' ' ') $(grep -E 'terminate|compiled' $R/memcheck.txt | tail -2 | tr '\n' ' ')"
done
for bin in base new; do
  timeout 60 ncu --kernel-name regex:tapewise_compiled_piece --launch-skip 4 --launch-count 2 --metrics smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,sm__inst_executed_pipe_lsu.sum,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active --csv \
    $B/tapewise-bench-$bin --no-kernels --chain-sizes 24 --chain-nodes 96 --chain-shapes fanout --chain-dtype f32 > $R/ncu_inst_$bin.csv 2> $R/ncu_inst_$bin.err
  echo "== ncu $bin: exit $?"; grep -E '^"[0-9]' $R/ncu_inst_$bin.csv | awk -F'","' '{print $1, $(NF-2), $NF}' | head -16
done
for job in "f32 fanout" "bf16 fanout" "f32 binary" "f32 unary" "bf16 unary" "bf16 binary"; do
  set -- $job; dt=$1; shape=$2; left=$((575 - (SECONDS - T0)))
  [ "$left" -lt 90 ] && { echo "== $dt $shape: not reached ($left s left)"; continue; }
  s=$SECONDS; timeout $((left-40)) python3 bench/bench_torch.py --sizes '' --no-kernels --conform $B/tapewise-conform --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes $shape --chain-dtype $dt --json $R/torch_${dt}_$shape.json > $R/torch_${dt}_$shape.txt 2>&1
  echo "== torch $dt $shape: exit $? after $((SECONDS-s)) s"
  for bin in base new; do
    timeout 25 $B/tapewise-bench-$bin --no-kernels --chain-calls 5 --chain-sizes 22,24,26 --chain-nodes 100 --chain-shapes $shape --chain-dtype $dt --torch $R/torch_${dt}_$shape.json --json $R/bench_${bin}_${dt}_$shape.json > $R/bench_${bin}_${dt}_$shape.txt 2>&1
    echo "== tapewise $bin $dt $shape: exit $?"; grep -E "^  2\^" $R/bench_${bin}_${dt}_$shape.txt | cut -c1-150
  done
done
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT

#!/usr/bin/env bash
# GPU call 2: exact mode's float32 map kernels (two passes) at 2^26 in the four launch shapes side by side
# (--map-shapes: tapewise-bench sets TAPEWISE_MAP_SHAPE itself), and ncu of exp and tanh in t256v4.
set -u
T0=$SECONDS
[ -d .gpu/bin ] || tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
s=$SECONDS; timeout 200 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --map-shapes tuned,t128v1,t128v2,t256v4 --json $R/exact_shapes.json > $R/exact_shapes.txt 2>&1
echo "== exact shapes: exit $? after $((SECONDS-s)) s"; grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $R/exact_shapes.txt | awk '{print $1,$4,$5,$8}' | paste -sd' ' | cut -c1-3000
pack
s=$SECONDS; timeout 100 ncu --kernel-name regex:'map' --section SpeedOfLight --section InstructionStats --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --csv $B/tapewise-bench --once --no-chain --sizes 24 --dtypes f32 --ops exp,tanh --no-staged --math exact --map-shapes t256v4 > $R/ncu_exact_v4.csv 2> $R/ncu_exact_v4.err
echo "== ncu exact v4: exit $? after $((SECONDS-s)) s, $(wc -l < $R/ncu_exact_v4.csv) lines"
pack; echo "total $((SECONDS-T0)) s"

#!/usr/bin/env bash
# GPU call 1b: call1.sh's speed part again (its --reps was out of range).
set -u
T0=$SECONDS
[ -d .gpu/bin ] || tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
s=$SECONDS; timeout 80 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math aten --json $R/aten.json > $R/aten.txt 2>&1
echo "== aten: exit $? after $((SECONDS-s)) s"; grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $R/aten.txt | awk '{print $1,$4,$8}' | paste -sd' ' | cut -c1-400
for shape in tuned t128v2 t256v4; do
  s=$SECONDS; TAPEWISE_MAP_SHAPE=$shape timeout 80 $B/tapewise-bench --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --json $R/exact_$shape.json > $R/exact_$shape.txt 2>&1
  echo "== exact $shape: exit $? after $((SECONDS-s)) s"; grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $R/exact_$shape.txt | awk '{print $1,$4,$8}' | paste -sd' ' | cut -c1-400
done
pack; echo "total $((SECONDS-T0)) s"

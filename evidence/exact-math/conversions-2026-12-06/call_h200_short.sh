#!/usr/bin/env bash
# Call g (2026-12-06), asked for an H200 alone (needs_h200): 8930a26 (prev) against b7a048c (new) at 2^26,
# two rounds; softplus's CPU == CUDA check (call f's ran out of time there); the conversion variants.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/smi.txt
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
show() { grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $1 | awk '{print $1,$2,$4,$8}' | paste -sd' ' | cut -c1-900; }
for round in 1 2; do for v in prev new; do
  b=$B/tapewise-bench; [ $v != new ] && b=$B/tapewise-bench-$v
  s=$SECONDS; timeout 60 $b --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --json $R/${v}_exact_$round.json > $R/${v}_exact_$round.txt 2>&1
  echo "== $v exact $round: exit $? after $((SECONDS-s)) s"; show $R/${v}_exact_$round.txt
done; pack; done
s=$SECONDS; timeout 60 $B/tapewise-cross-check --ops softplus --vjp --jobs 14 > $R/cross_vjp_softplus.txt 2>&1
echo "== cross-check --vjp softplus: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_vjp_softplus.txt | cut -c1-120
pack
timeout 60 $B/variants > $R/variants.txt 2>&1; echo "== variants: exit $?"; cut -c1-150 $R/variants.txt
pack; echo "total $((SECONDS-T0)) s"

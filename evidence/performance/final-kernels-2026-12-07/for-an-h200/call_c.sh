#!/usr/bin/env bash
# GPU call C (2026-12-07, sixteenth session): issue 44's cross-machine check on the final kernels (HEAD 640f3f7):
# every float32 input of every unary node, the forward and both VJP paths at a fixed g, through the CPU backend
# (this machine's host) and the CUDA backend in exact mode, one node at a time; then random pairs of the six binary
# nodes in the time left. OPS="exp sin ..." picks the unary nodes (default: all 17).
set -u
T0=$SECONDS; LIMIT=${LIMIT:-575}
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu bin/tapewise-cross-check; B=.gpu/bin; R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt; nproc | tee -a $R/gpu.txt
for op in ${OPS:-exp log sin cos tanh sigmoid silu gelu softplus safeLog inv sqrt abs relu neg scale clamp}; do
  left=$((LIMIT - (SECONDS - T0))); [ "$left" -lt 20 ] && { echo "== $op: not reached"; continue; }
  lim=$(( left > 75 ? 75 : left ))
  timeout $lim $B/tapewise-cross-check --ops $op --vjp --jobs 15 >> $R/cross_check_unary.txt 2>&1; rc=$?
  [ $rc -ne 0 ] && echo "== $op: exit $rc (limit $lim)" | tee -a $R/cross_check_unary.txt
done
grep -E "results differ|IDENTICAL|DIFFER" $R/cross_check_unary.txt | cut -c1-120
left=$((LIMIT - (SECONDS - T0)))
for lg in 32 31 30; do
  need=$(( 80 << (lg - 30) ))
  if [ "$left" -gt $((need + 10)) ]; then
    timeout $((left - 5)) $B/tapewise-cross-check --ops binary --pairs $lg --vjp --jobs 15 > $R/cross_check_binary.txt 2>&1; echo "== binary 2^$lg pairs: exit $?"; cat $R/cross_check_binary.txt | cut -c1-200; break
  fi
done
echo "total $((SECONDS-T0)) s"
tar czf $OUT/results.tar.gz -C $OUT r && rm -rf $R; ls -la $OUT

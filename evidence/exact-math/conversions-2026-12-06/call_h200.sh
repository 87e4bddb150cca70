#!/usr/bin/env bash
# Call f (2026-12-06), on an H200: 8930a26 (prev) against 7b08d4b (mid: tanh's shorter fast path, log's bits
# reduction) and the constant-bank constants on top (new); the conversion variants and their pipes; CPU ==
# CUDA for the changed functions; the whole suite.
set -u
T0=$SECONDS
rm -rf .gpu/bin; tar xJf .gpu/all.tar.xz -C .gpu; B=.gpu/bin
mkdir -p .gpu/share/tapewise && cp -r spec/special_points spec/ops.def spec/bounds.def spec/stagings.def .gpu/share/tapewise/
R=$OUT/r; mkdir -p $R
pack() { tar czf $OUT/results.tar.gz -C $OUT r; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $R/smi.txt
OPS=exp,log,sin,cos,tanh,sigmoid,silu,gelu,softplus,safeLog
show() { grep -E "^(exp|log|sin|cos|tanh|sigmoid|silu|gelu|softplus|safeLog) " $1 | awk '{print $1,$2,$4,$8}' | paste -sd' ' | cut -c1-900; }
for round in 1 2; do for v in prev mid new; do
  b=$B/tapewise-bench; [ $v != new ] && b=$B/tapewise-bench-$v
  s=$SECONDS; timeout 60 $b --no-chain --sizes 26 --dtypes f32 --ops $OPS --reps 20 --no-staged --math exact --json $R/${v}_exact_$round.json > $R/${v}_exact_$round.txt 2>&1
  echo "== $v exact $round: exit $? after $((SECONDS-s)) s"; show $R/${v}_exact_$round.txt
done; pack; done
s=$SECONDS; timeout 90 $B/variants > $R/variants.txt 2>&1; echo "== variants: exit $? after $((SECONDS-s)) s"; cut -c1-150 $R/variants.txt
pack
P='sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.sum'
s=$SECONDS; VARIANTS_REPS=1 timeout 90 ncu --csv --metrics "$P" $B/variants > $R/ncu_pipes.csv 2>&1; echo "== ncu pipes: exit $? after $((SECONDS-s)) s"
python3 - $R/ncu_pipes.csv <<'PY'
import csv,io,sys
t=open(sys.argv[1]).read()
if '"ID"' not in t: print(t[-1500:]); sys.exit()
rows=list(csv.reader(io.StringIO(t[t.index('"ID"'):]))); h=rows[0]
k,m,v=h.index('Kernel Name'),h.index('Metric Name'),h.index('Metric Value')
line={}
for r in rows[1:]:
  if len(r)<=v or 'fill' in r[k] or 'Copy' in r[k]: continue
  name=r[k].split('(')[0].replace('void run<','')[:28]
  line.setdefault((r[0],name),[]).append(r[m].split('__')[1].split('.')[0].replace('inst_executed_pipe_','')+'='+r[v])
for (i,n),ms in line.items(): print(n, ' '.join(ms))
PY
pack
s=$SECONDS; timeout 60 $B/tapewise-cross-check --ops exp,log,sin,cos,tanh --jobs 14 > $R/cross_forwards.txt 2>&1
echo "== cross-check forwards: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_forwards.txt | cut -c1-120
s=$SECONDS; timeout 120 $B/tapewise-cross-check --ops log,safeLog,softplus,tanh --vjp --jobs 14 > $R/cross_vjp.txt 2>&1
echo "== cross-check --vjp: exit $? after $((SECONDS-s)) s"; grep -E 'differ|IDENTICAL|DIFFER' $R/cross_vjp.txt | cut -c1-120
pack
left=$((570 - (SECONDS - T0)))
s=$SECONDS; timeout "$left" $B/tapewise_tests --gtest_brief=1 --gtest_filter='-Cli.ProveWithoutAnAnswerIsNoVerdict' > $R/tests_all.txt 2>&1
echo "== all tests: exit $? after $((SECONDS-s)) s"; grep -E '^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|tests ran' $R/tests_all.txt | head -12
pack; echo "total $((SECONDS-T0)) s"

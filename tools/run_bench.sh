#!/usr/bin/env bash
# tools/run_bench.sh OUTDIR — PyTorch eager (tools/bench_torch.py) then tapewise-bench on the same GPU in
# one run; writes OUTDIR/bench_<date>.{txt,json} (the table and JSON to keep) and torch_<date>.{txt,json}.
# It builds nothing: it runs a built binary.
#
# Environment: TAPEWISE_BENCH   the binary (default: build-bench/bin/tapewise-bench, else build/bin/...)
#              TAPEWISE_COMMIT  the commit to record (default: git rev-parse, where .git exists; else unknown)
#              BENCH_SIZES (26,12)  BENCH_DTYPES (f32,f64)  BENCH_REPS (20)
set -uo pipefail
out=${1:?usage: tools/run_bench.sh OUTDIR}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.." || exit 1
export PYTHONUNBUFFERED=1
start=$SECONDS

bench=${TAPEWISE_BENCH:-}
if [ -z "$bench" ]; then
  for candidate in build-bench/bin/tapewise-bench build/bin/tapewise-bench; do
    if [ -x "$candidate" ]; then bench=$candidate; break; fi
  done
fi
if [ -z "$bench" ] || [ ! -x "$bench" ]; then
  echo "run_bench: no tapewise-bench binary (build it: ninja -C build-bench tapewise-bench; or set TAPEWISE_BENCH)" >&2
  exit 1
fi

date=$(date -u +%Y-%m-%d)
commit=${TAPEWISE_COMMIT:-}
if [ -z "$commit" ]; then
  commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit="$commit-dirty"
  fi
fi
sizes=${BENCH_SIZES:-26,12}
dtypes=${BENCH_DTYPES:-f32,f64}
reps=${BENCH_REPS:-20}
txt=$out/bench_$date.txt
json=$out/bench_$date.json
torch_json=$out/torch_$date.json

{
  echo "# tapewise benchmark: $date, commit $commit, binary $bench"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
      --format=csv 2>&1 | sed 's/^/# /'
  else
    echo "# nvidia-smi: not found"
  fi
} | tee "$txt"

echo "== PyTorch eager: tools/bench_torch.py (log: torch_$date.txt)"
rm -f "$torch_json"
python3 tools/bench_torch.py --sizes "$sizes" --dtypes "$dtypes" --reps "$reps" --json "$torch_json" \
  >"$out/torch_$date.txt" 2>&1
torch_rc=$?
tail -n 3 "$out/torch_$date.txt"
torch_args=()
if [ -s "$torch_json" ]; then
  torch_args=(--torch "$torch_json")
  [ $torch_rc -eq 0 ] || echo "# bench_torch.py exited $torch_rc (some rows failed: see torch_$date.txt)" | tee -a "$txt"
else
  echo "# bench_torch.py wrote no JSON (exit $torch_rc, see torch_$date.txt): no PyTorch ratios" | tee -a "$txt"
fi
echo "== PyTorch done after $((SECONDS - start)) s"

"$bench" --sizes "$sizes" --dtypes "$dtypes" --reps "$reps" --commit "$commit" --date "$date" \
  "${torch_args[@]}" --json "$json" 2>&1 | tee -a "$txt"
bench_rc=${PIPESTATUS[0]}
echo "== tapewise-bench exited $bench_rc after $((SECONDS - start)) s" | tee -a "$txt"

# A digest last (the part a remote run's output tail keeps): float32 at 2^26, the chain, the summary.
python3 - "$json" <<'EOF'
import json, sys
try:
    prod = json.load(open(sys.argv[1]))
except Exception as ex:
    sys.exit(f'digest: no tapewise JSON ({ex})')
m = prod['meta']
print(f"\n== digest: {m['gpu']} | {m['date']} | commit {m['commit']} | copy roofline "
      f"{prod['copy']['roofline_1GiB']['gbps']:.0f} GB/s")
print(f"{'op':9s} {'dir':4s} {'ms':>8s} {'%copy':>6s} {'torch':>8s} {'ratio':>6s} {'verdict':7s}")
for r in prod['rows']:
    if r['dtype'] != 'f32' or r['log2n'] != 26 or r['dir'] == 'staged': continue
    ratio = f"{r['ratio']:.2f}x" if r.get('ratio') else '-'
    torch = f"{r['torch_ms']:.4f}" if r.get('torch_ms') else '-'
    print(f"{r['op']:9s} {r['dir']:4s} {r['ms']:8.4f} {100 * r['frac_copy']:5.1f}% {torch:>8s} {ratio:>6s} {r['verdict']:7s}")
c = prod.get('chain')
if c:
    sp = f"{c['speedup']:.2f}x" if c.get('speedup') else '-'
    print(f"chain 1000 x 4096: {c['us_per_node']:.2f} us/node (record {c['record_host_us_per_node']:.2f}, backward "
          f"{c['backward_host_us_per_node']:.2f}, teardown {c['teardown_host_us_per_node']:.2f} host), torch "
          f"{c.get('torch_us_per_node') or float('nan'):.2f} -> {sp}: {c['verdict']}")
s = prod['summary']
print(f"summary: {s['pass']} PASS, {s['miss']} MISS of {s['judged']}; check failures: {len(s['check_failures'])}")
for line in s['misses'] + s['check_failures']: print('   ', line)
EOF
echo "== run_bench: done in $((SECONDS - start)) s; files in $out: $(cd "$out" && ls | tr '\n' ' ')"
exit "$bench_rc"

#!/usr/bin/env bash
# bench/run_bench.sh OUTDIR — the benchmark on one GPU in one run: PyTorch (bench/bench_torch.py: eager,
# torch.compile, CUDA graphs), the kernels' instruction counts under Nsight Compute (where ncu is on the
# PATH: bench/roofline.py turns them into compute rooflines), then tapewise-bench beside all of
# them. Writes OUTDIR/bench_<date>.{txt,json} (the table and JSON to keep), torch_<date>.{txt,json},
# ncu_<date>.csv and roofline_<date>.json. It builds nothing: it runs a built binary.
#
# Environment: TAPEWISE_BENCH   the binary (default: build-bench/bin/tapewise-bench, else build/bin/...);
#                               tapewise-conform must sit beside it
#              TAPEWISE_COMMIT  the commit to record (default: git rev-parse, where .git exists; else unknown)
#              BENCH_SIZES (26,12)  BENCH_DTYPES (f32,f64)  BENCH_REPS (20)  BENCH_CHAIN_SIZES (12,16,20)
#              BENCH_CHAIN_SHAPES (unary,binary,fanout)  the chain's graph shapes, in both tools
#              BENCH_CHAIN_DTYPE (f32)  the chain's dtype (f32, f64, bf16, f16), in both tools
#              BENCH_CHAIN_CALLS (5)    tapewise's chain timed in this many blocks: the median and its spread
#              BENCH_PEER_OPS   nodes PyTorch also runs as torch.compile and CUDA graphs (bench_torch.py's
#                               default subset; 'all' for every node: minutes more of compiling)
#              BENCH_NCU (1)    0 skips the Nsight Compute pass (no compute rooflines then)
set -uo pipefail
out=${1:?usage: bench/run_bench.sh OUTDIR}
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

# The op table (each node's sample scalars and inputs) comes from the runner built beside the benchmark.
conform=$(dirname "$bench")/tapewise-conform
if [ ! -x "$conform" ]; then
  echo "run_bench: no $conform beside $bench (bench_torch.py reads the op table from it)" >&2
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
chain_sizes=${BENCH_CHAIN_SIZES:-12,16,20}
chain_shapes=${BENCH_CHAIN_SHAPES:-unary,binary,fanout}
chain_dtype=${BENCH_CHAIN_DTYPE:-f32}
chain_calls=${BENCH_CHAIN_CALLS:-5}
txt=$out/bench_$date.txt
json=$out/bench_$date.json
torch_json=$out/torch_$date.json
roofline_json=$out/roofline_$date.json

{
  echo "# tapewise benchmark: $date, commit $commit, binary $bench"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
      --format=csv 2>&1 | sed 's/^/# /'
  else
    echo "# nvidia-smi: not found"
  fi
} | tee "$txt"

echo "== PyTorch: bench/bench_torch.py (log: torch_$date.txt)"
rm -f "$torch_json"
peer_args=()
[ -n "${BENCH_PEER_OPS:-}" ] && peer_args=(--peer-ops "$BENCH_PEER_OPS")
python3 bench/bench_torch.py --sizes "$sizes" --dtypes "$dtypes" --reps "$reps" --chain-sizes "$chain_sizes" \
  --chain-shapes "$chain_shapes" --chain-dtype "$chain_dtype" --conform "$conform" "${peer_args[@]}" --json "$torch_json" \
  >"$out/torch_$date.txt" 2>&1
torch_rc=$?
tail -n 5 "$out/torch_$date.txt"
torch_args=()
if [ -s "$torch_json" ]; then
  torch_args=(--torch "$torch_json")
  [ $torch_rc -eq 0 ] || echo "# bench_torch.py exited $torch_rc (some rows failed: see torch_$date.txt)" | tee -a "$txt"
else
  echo "# bench_torch.py wrote no JSON (exit $torch_rc, see torch_$date.txt): no PyTorch ratios" | tee -a "$txt"
fi
echo "== PyTorch done after $((SECONDS - start)) s"

# Instruction counts of every kernel at 2^26 (one untimed call each, clocks left as they are).
roofline_args=()
if [ "${BENCH_NCU:-1}" != 0 ] && command -v ncu >/dev/null; then
  ncu --clock-control none --csv --print-kernel-base mangled -k regex:map_kernel \
    --metrics "$(python3 bench/roofline.py --print-metrics)" \
    "$bench" --once --sizes 26 --dtypes "$dtypes" --no-chain >"$out/ncu_$date.csv" 2>"$out/ncu_$date.log"
  ncu_rc=$?
  if python3 bench/roofline.py "$out/ncu_$date.csv" --json "$roofline_json" 2>>"$out/ncu_$date.log"; then
    roofline_args=(--roofline "$roofline_json")
  else
    echo "# ncu (exit $ncu_rc) gave no instruction counts (see ncu_$date.log): no compute rooflines" | tee -a "$txt"
  fi
  echo "== ncu done after $((SECONDS - start)) s"
fi

"$bench" --sizes "$sizes" --dtypes "$dtypes" --reps "$reps" --chain-sizes "$chain_sizes" \
  --chain-shapes "$chain_shapes" --chain-dtype "$chain_dtype" --chain-calls "$chain_calls" --commit "$commit" \
  --date "$date" "${torch_args[@]}" "${roofline_args[@]}" --json "$json" 2>&1 | tee -a "$txt"
bench_rc=${PIPESTATUS[0]}
echo "== tapewise-bench exited $bench_rc after $((SECONDS - start)) s" | tee -a "$txt"

# A digest last (the part a remote run's output tail keeps): 2^26 rows, every chain shape beside the
# strongest peer, the summary.
python3 bench/digest.py "$json"
echo "== run_bench: done in $((SECONDS - start)) s; files in $out: $(cd "$out" && ls | tr '\n' ' ')"
exit "$bench_rc"

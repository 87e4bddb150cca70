// tools/bench/bench.hpp — what the benchmark's files share: options, one measured row, the chain
// result, CUDA checks, event timing on the backend's stream. Not a general benchmarking library.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include <tapewise/tapewise.hpp>

namespace tapewise::bench {

using json = nlohmann::ordered_json;

struct Options {
  std::vector<int> log2_sizes{26, 12};
  std::vector<DType> dtypes{DType::float32, DType::float64};
  std::vector<Op> ops;      // all 23 by default
  int reps = 20;            // timed runs for sizes >= 2^20; 10x that below (launch-bound, cheap)
  std::string backend = "cuda";  // cpu: a dry run of the harness without a GPU (numbers mean nothing)
  std::string json_path, torch_path, compare_path, commit, date;
  bool staged = true, chain = true;
  int device = 0;
  std::uint64_t seed = 20261130;
};

inline int reps_for(const Options& o, int log2n) { return log2n >= 20 ? o.reps : 10 * o.reps; }
inline const char* dtype_short(DType d) { return d == DType::float32 ? "f32" : "f64"; }

// One measured (op, dtype, size, direction). dir: fwd | vjp (fused) | staged.
struct Row {
  std::string op, dtype, dir;
  int log2n = 0;
  double ms = 0;              // median over the timed runs (CUDA events on the backend's stream)
  double bytes = 0;           // fewest bytes the kernel must move (see bytes_moved in main.cpp)
  double gbps = 0;            // bytes / ms
  double copy_ms = 0;         // D2D memcpy moving the same bytes (read + write), same run
  double frac_copy = 0;       // copy_ms / ms = gbps / copy GB/s
  std::optional<double> torch_ms, ratio;       // PyTorch eager (fwd; bwd via autograd.grad); torch/ours
  std::optional<double> torch_bytes;           // add/sub backward only: what PyTorch's kernels move
  std::optional<double> compare_ms, speedup;   // --compare: the same row of another tapewise JSON
  std::string check = "ok";   // poison check (and fused == staged) result
  std::string target;         // issue target, for f32 at 2^26 (fwd and fused vjp)
  std::string verdict = "-";  // PASS | MISS | - (not judged)
};

struct ChainResult {
  int nodes = 1000, runs = 5, warmup = 2;
  std::int64_t n = 4096;
  double us_per_node = 0;               // host wall clock, sync before and after (torch_extra.py)
  double record_host_us_per_node = 0;   // host time inside record calls
  double backward_host_us_per_node = 0; // host time inside tape.backward
  double teardown_host_us_per_node = 0; // dropping gradients and tape (frees)
  std::optional<double> torch_us_per_node, speedup;
  std::string verdict = "-";
};

[[noreturn]] void die(const std::string& message);
void cuda_ok(cudaError_t err, const char* what);
void ok_or_die(const Result<void>& r, const std::string& what);
template <class T>
T value_or_die(Result<T> r, const std::string& what) {
  if (!r) die(what + ": " + r.error().str());
  return std::move(*r);
}

// Median milliseconds of `call` between two events recorded on `stream`, after 3 warm-up calls
// and a synchronize, `reps` timed calls, no synchronisation between them (torch_baseline.py's
// timeit, in C++). A null stream (--backend cpu, the dry run) times each call with a host clock.
double median_ms(cudaStream_t stream, int reps, const std::function<Result<void>()>& call,
                 const std::string& what);

// The targets (float32, 2^26, H200). 0 = no ratio target (add, sub: report only).
double ratio_target(Op op);
inline constexpr double kForwardCopyTarget = 0.95;
inline constexpr double kVjpCopyTarget = 0.90;
inline constexpr double kChainSpeedupTarget = 10.0;

// report.cpp: the stdout table and the JSON file.
void print_table(const json& meta, const json& copy, const std::vector<Row>& rows,
                 const std::optional<ChainResult>& chain, bool have_torch, bool have_compare);
json rows_json(const std::vector<Row>& rows);
json chain_json(const ChainResult& c);
json summary_json(const std::vector<Row>& rows, const std::optional<ChainResult>& chain);

}  // namespace tapewise::bench

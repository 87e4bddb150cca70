// bench/bench.hpp — what the benchmark's files share: options, one measured row, the chain
// results, the peers' numbers, CUDA checks, event timing on the backend's stream. Not a general
// benchmarking library.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include <tapewise/tapewise.hpp>

#include "backends/engine.hpp"  // the engine behind Backend: the fill and copy prims

namespace tapewise::bench {

using json = nlohmann::ordered_json;

struct Options {
  std::vector<int> log2_sizes{26, 12};
  std::vector<DType> dtypes{DType::float32, DType::float64};
  std::vector<Op> ops;      // all 23 by default
  std::vector<int> chain_log2_sizes{12, 16, 20};
  std::vector<std::string> chain_shapes{"unary", "binary", "fanout"};  // chain.cpp's graph shapes
  int chain_nodes = 1000;   // nodes per chain (fanout: whole cycles of 6, so 996)
  int chain_calls = 1;      // timed blocks of the chain's runs: the median block, and the spread
  DType chain_dtype = DType::float32;  // --chain-dtype
  std::string chain_values_path;  // --chain-values: one untimed run's leaves, output and gradients
  std::vector<std::string> map_shapes{""};  // TAPEWISE_MAP_SHAPE per pass; "" = the library's default
  int reps = 20;            // timed runs for sizes >= 2^20; 10x that below (launch-bound, cheap)
  std::string backend = "cuda";  // cpu: a dry run of the harness without a GPU (numbers mean nothing)
  std::string math = "aten";     // the CUDA backend's math mode (--math)
  std::string json_path, torch_path, compare_path, roofline_path, commit, date;
  bool staged = true, kernels = true;
  bool once = false;        // each fwd and fused vjp once, untimed: a pass for a profiler (ncu)
  int device = 0;
  bool chain_every_gradient = false;     // --chain-gradients all
  std::int64_t program_threshold = -1;  // the chain's tapes', in elements; -1: the library's default
  std::int64_t max_pending_nodes = 0;   // the chain's tapes'; 0: the library's default
  std::int64_t recompute_from = -1;     // elements from which backward programs compute values again; -1: the library's
  std::uint64_t seed = 20261130;
};

inline int reps_for(const Options& o, int log2n) { return log2n >= 20 ? o.reps : 10 * o.reps; }
inline const char* dtype_short(DType d) {
  switch (d) {
    case DType::float32: return "f32";
    case DType::float64: return "f64";
    case DType::bfloat16: return "bf16";
    case DType::float16: return "f16";
  }
  return "?";
}

// The fastest of PyTorch's forms for one row or chain size: eager, torch.compile, a CUDA graph.
struct Peer {
  std::string name;   // eager | compile | graph
  double ms = 0;      // per call (rows) or us per node (chain)
};

// One measured (op, dtype, size, direction). dir: fwd | vjp (fused) | staged.
struct Row {
  std::string op, dtype, dir;
  std::string shape;          // the launch shape it ran with (TAPEWISE_MAP_SHAPE; "" = default)
  int log2n = 0;
  double ms = 0;              // median over the timed runs (CUDA events on the backend's stream)
  double bytes = 0;           // fewest bytes the kernel must move (see bytes_moved in main.cpp)
  double gbps = 0;            // bytes / ms
  double copy_ms = 0;         // D2D memcpy moving the same bytes (read + write), same run
  double frac_copy = 0;       // copy_ms / ms = gbps / copy GB/s
  std::optional<double> torch_ms, ratio;       // PyTorch eager (fwd; bwd via autograd.grad); torch/ours
  std::optional<double> compile_ms, graph_ms;  // torch.compile (steady state) and CUDA-graph replay
  std::optional<Peer> peer;                    // the fastest of eager, compile and graph
  std::optional<double> torch_bytes;           // add/sub backward only: what PyTorch's kernels move
  std::optional<double> compute_ms;            // --roofline: the instruction-issue bound (ncu counts)
  double roofline_ms = 0;                      // max(copy_ms, compute_ms): the time it cannot beat
  double frac_roofline = 0;                    // roofline_ms / ms
  std::optional<double> compare_ms, speedup;   // --compare: the same row of another tapewise JSON
  std::string check = "ok";   // poison check (and fused == staged) result
  std::string target;         // issue target, for f32 at 2^26 (fwd and fused vjp)
  std::string verdict = "-";  // PASS | MISS | - (not judged)
};

// The 1,000-node chain of one shape at one size: record + backward + release per run.
struct ChainResult {
  std::string shape = "unary";          // unary | binary | fanout (chain.cpp)
  DType dtype = DType::float32;          // the leaves' and every node's
  std::string ops;                      // the shape's nodes, in words
  int nodes = 1000, leaves = 1, runs = 5, warmup = 2;  // nodes: tape nodes other than leaves
  int calls = 1;                        // blocks of `runs` timed runs, each timed alone (--chain-calls)
  int log2n = 12;
  std::int64_t n = 4096;
  double us_per_node = 0;               // host wall clock of a block, synchronized before and after: the median block
  std::vector<double> us_per_node_calls;  // each block's, in order (the spread)
  double record_host_us_per_node = 0;   // host time inside record calls
  double backward_host_us_per_node = 0; // host time inside tape.backward
  double teardown_host_us_per_node = 0; // dropping gradients and tape (frees)
  std::optional<double> device_us_per_node;  // a run queued whole behind a closed gate, then events: device alone
  std::optional<double> eager_us_per_node, graph_us_per_node, compile_us_per_node, compile_first_call_s;
  std::optional<Peer> peer;             // the fastest of the three
  std::optional<double> speedup;        // peer / ours
  std::string target, verdict = "-";
};

// Errors travel as Result to main, which prints them and exits (1; 2 where no CUDA device is usable).
// A CUDA call's failure, named; a Result's error with what was being done prepended.
[[nodiscard]] Result<void> cuda_ok(cudaError_t err, const std::string& what);
template <class T>
[[nodiscard]] Result<T> in_context(Result<T> r, const std::string& what) {
  if (!r) return fail(r.error().code, what + ": " + r.error().message);
  return r;
}

// Median milliseconds of `call` between two events recorded on `stream`, after 3 warm-up calls
// and a synchronize, `reps` timed calls, no synchronisation between them (bench_torch.py's
// timeit, in C++). A null stream (--backend cpu, the dry run) times each call with a host clock.
[[nodiscard]] Result<double> median_ms(cudaStream_t stream, int reps, const std::function<Result<void>()>& call,
                                       const std::string& what);

// The targets (2^26, every dtype, H200): a verdict for every fwd and fused vjp row.
void judge(Row& r, bool have_torch);
inline constexpr double kTorchRatioTarget = 0.99;      // >= PyTorch eager (noise of one kernel ~1%)
inline constexpr double kMemoryBoundTarget = 0.98;     // of the roofline, for memory-bound kernels
inline constexpr double kChainUsPerNodeTarget = 0.35;  // the chain at 2^12: twice torch.compile's 0.70

// chain.cpp: one shape's chain at one size on `be` (times on the host; on CUDA, device time behind a
// gate). How the chain runs: its tapes' options, the nodes asked for, and whether backward returns
// every node's gradient or, as PyTorch's chain does (x.grad; all leaves for binary), the leaves'.
struct ChainSetup {
  TapeOptions tape;
  DType dtype = DType::float32;
  int nodes = 1000;
  int calls = 1;  // timed blocks of runs; the result is their median, with each block's time kept
  bool every_gradient = false;
};
// The shapes chain.cpp records, in their default order.
const std::vector<std::string>& chain_shape_names();
// `values`, when given, receives one untimed run's leaves, output and returned leaf gradients (their
// first kChainValuesElements elements), for tests that check the recording.
[[nodiscard]] Result<ChainResult> run_chain(const std::shared_ptr<Backend>& be, const ChainSetup& setup,
                                            const std::string& shape, int log2n, std::uint64_t seed,
                                            json* values = nullptr);
inline constexpr std::int64_t kChainValuesElements = 64;

// report.cpp: the stdout table and the JSON file.
void print_table(const json& meta, const json& copy, const std::vector<Row>& rows,
                 const std::vector<ChainResult>& chains, bool have_torch, bool have_compare);
json rows_json(const std::vector<Row>& rows);
json chain_json(const ChainResult& c);
json summary_json(const std::vector<Row>& rows, const std::vector<ChainResult>& chains);
std::string peer_text(const std::optional<Peer>& peer, double ours);

}  // namespace tapewise::bench

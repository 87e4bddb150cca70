// tools/bench/common.cpp — the benchmark's small shared pieces: fatal errors, CUDA checks, the event
// timer (torch_baseline.py's timeit in C++) and the per-op ratio targets.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench.hpp"

namespace tapewise::bench {

void die(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "tapewise-bench: %s\n", message.c_str());
  std::exit(1);
}

void cuda_ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    die(std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

void ok_or_die(const Result<void>& r, const std::string& what) {
  if (!r) die(what + ": " + r.error().str());
}

double median_ms(cudaStream_t stream, int reps, const std::function<Result<void>()>& call,
                 const std::string& what) {
  for (int i = 0; i < 3; ++i) ok_or_die(call(), what + " (warm-up)");
  if (!stream) {  // --backend cpu (dry run): the calls are synchronous, a host clock times them
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      ok_or_die(call(), what);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  cuda_ok(cudaStreamSynchronize(stream), "synchronize after warm-up");
  std::vector<cudaEvent_t> start(static_cast<std::size_t>(reps)), stop(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    cuda_ok(cudaEventCreate(&start[i]), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&stop[i]), "cudaEventCreate");
  }
  for (int i = 0; i < reps; ++i) {
    cuda_ok(cudaEventRecord(start[i], stream), "cudaEventRecord");
    ok_or_die(call(), what);
    cuda_ok(cudaEventRecord(stop[i], stream), "cudaEventRecord");
  }
  cuda_ok(cudaStreamSynchronize(stream), ("synchronize after " + what).c_str());
  std::vector<double> ms(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    cuda_ok(cudaEventElapsedTime(&t, start[i], stop[i]), "cudaEventElapsedTime");
    ms[i] = t;
    cudaEventDestroy(start[i]);
    cudaEventDestroy(stop[i]);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double ratio_target(Op op) {
  switch (op) {
    case Op::max: case Op::min: return 4.0;
    case Op::div: return 2.5;
    case Op::clamp: return 2.3;
    case Op::cos: case Op::inv: return 2.0;
    case Op::safeLog: return 1.8;
    case Op::sin: case Op::abs: case Op::sqrt: return 1.5;
    case Op::mul: return 1.1;
    case Op::add: case Op::sub: return 0.0;  // PyTorch hands g through: ratio and bytes reported only
    default: return 0.95;
  }
}

}  // namespace tapewise::bench

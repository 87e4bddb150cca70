// bench/common.cpp — the benchmark's small shared pieces: CUDA checks, the event timer
// (bench_torch.py's timeit in C++) and the targets.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "bench.hpp"

namespace tapewise::bench {

Result<void> cuda_ok(cudaError_t err, const std::string& what) {
  if (err != cudaSuccess)
    return fail(ErrorCode::CudaFailure, what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  return {};
}

namespace {
// Event pairs around each timed call; destroyed however the timing ends.
struct EventPairs {
  std::vector<cudaEvent_t> start, stop;
  ~EventPairs() {
    for (cudaEvent_t e : start) cudaEventDestroy(e);
    for (cudaEvent_t e : stop) cudaEventDestroy(e);
  }
  Result<void> create(int count) {
    for (int i = 0; i < count; ++i) {
      TAPEWISE_CHECK(cuda_ok(cudaEventCreate(&start.emplace_back()), "cudaEventCreate"));
      TAPEWISE_CHECK(cuda_ok(cudaEventCreate(&stop.emplace_back()), "cudaEventCreate"));
    }
    return {};
  }
};

double median(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
}  // namespace

Result<double> median_ms(cudaStream_t stream, int reps, const std::function<Result<void>()>& call,
                         const std::string& what) {
  for (int i = 0; i < 3; ++i) TAPEWISE_CHECK(in_context(call(), what + " (warm-up)"));
  std::vector<double> ms;
  if (!stream) {  // --backend cpu (dry run): the calls are synchronous, a host clock times them
    for (int i = 0; i < reps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      TAPEWISE_CHECK(in_context(call(), what));
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return median(ms);
  }
  TAPEWISE_CHECK(cuda_ok(cudaStreamSynchronize(stream), "synchronize after warm-up"));
  EventPairs events;
  TAPEWISE_CHECK(events.create(reps));
  for (int i = 0; i < reps; ++i) {
    TAPEWISE_CHECK(cuda_ok(cudaEventRecord(events.start[i], stream), "cudaEventRecord"));
    TAPEWISE_CHECK(in_context(call(), what));
    TAPEWISE_CHECK(cuda_ok(cudaEventRecord(events.stop[i], stream), "cudaEventRecord"));
  }
  TAPEWISE_CHECK(cuda_ok(cudaStreamSynchronize(stream), "synchronize after " + what));
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    TAPEWISE_CHECK(cuda_ok(cudaEventElapsedTime(&t, events.start[i], events.stop[i]), "cudaEventElapsedTime"));
    ms.push_back(t);
  }
  return median(ms);
}

namespace {
std::string percent(double fraction) { return std::to_string(static_cast<int>(fraction * 100.0 + 0.5)) + "%"; }
}  // namespace

// At 2^26 in both dtypes: every fwd and fused vjp at least 0.99x PyTorch eager
// (add and sub vjps excepted: they return fresh copies where PyTorch hands g through); memory-bound
// kernels at 98% of their roofline; softplus and safeLog float32 forwards at 95% of the copy; the
// float64 softplus, safeLog and gelu forwards at 90% of their roofline.
void judge(Row& r, bool have_torch) {
  if (r.log2n != 26 || r.dir == "staged") return;
  const bool fresh_copies = r.dir == "vjp" && (r.op == "add" || r.op == "sub");
  bool ok = true;
  std::string target;
  if (!fresh_copies) {
    target = ">=0.99x eager";
    if (have_torch && r.ratio) ok = ok && *r.ratio >= kTorchRatioTarget;
    else target += " (n/a)";
  }
  const bool f32_heavy = r.dtype == "f32" && r.dir == "fwd" && (r.op == "softplus" || r.op == "safeLog");
  const bool f64_heavy = r.dtype == "f64" && r.dir == "fwd" && (r.op == "softplus" || r.op == "safeLog" || r.op == "gelu");
  const bool memory_bound = !r.compute_ms || *r.compute_ms <= r.copy_ms;
  double want = 0;
  const char* of = "roofline";
  if (f32_heavy) {
    want = 0.95;
    of = "copy";
  } else if (f64_heavy) {
    want = 0.90;
  } else if (memory_bound) {
    want = kMemoryBoundTarget;
  }
  if (want > 0) {
    const double got = f32_heavy ? r.frac_copy : r.frac_roofline;
    ok = ok && got >= want;
    target += (target.empty() ? "" : ", ") + std::string(">=") + percent(want) + " " + of;
  }
  r.target = target;
  r.verdict = ok ? "PASS" : "MISS";
}

}  // namespace tapewise::bench

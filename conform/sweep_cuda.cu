// conform/sweep_cuda.cu — the sweep's device side: input generation (case index -> bits),
// g fill, and grading right after the production kernel (sweep_reference.hpp on the device), with
// per-thread tallies reduced per block in shared memory and once per block into global memory.
// Nothing per element goes back to the host.
#include <cuda_runtime.h>

#include <string>

#include "sweep.hpp"

namespace tapewise::conform::sweep {

namespace {

constexpr int kThreads = 256;

[[nodiscard]] Result<void> cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return fail(ErrorCode::CudaFailure, std::string("sweep: ") + what + ": " + cudaGetErrorString(e));
}

// `base` is the chunk's first position in the sweep; case_at maps positions to case indices.
template <class T>
__global__ void generate_kernel(Job job, std::uint64_t base, std::int64_t n, T* a, T* b) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint32_t index = case_at(job, base + static_cast<std::uint64_t>(i));
    if constexpr (sizeof(T) == 2) {  // bfloat16, float16: the bit patterns
      std::uint16_t ba, bb;
      case_bits16(job, index, &ba, &bb);
      a[i] = ba;
      if (b) b[i] = bb;
    } else if constexpr (sizeof(T) == 4) {
      float fa, fb;
      case_floats(job, index, &fa, &fb);
      a[i] = fa;
      if (b) b[i] = fb;
    } else {
      double da, db;
      case_doubles(job, index, &da, &db);
      a[i] = da;
      if (b) b[i] = db;
    }
  }
}

template <class T>
__global__ void fill_kernel(T* out, std::int64_t n, T value) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = value;
}

// One thread's share of a tally, kept in registers while it grades its elements.
struct LocalTally {
  unsigned int histogram[kBucketCount] = {};
  unsigned int above_by_cause[kCauseCount] = {};
  unsigned long long cause_example[kCauseCount] = {};
  unsigned long long worst_domain = 0, worst_finite = 0, worst_ratio = 0, worst_ratio_domain = 0;
};

__device__ void tally_element(LocalTally& t, OutputTally* global, const ElementVerdict& v, std::uint32_t index) {
  const Graded& r = v.graded;
  ++t.histogram[r.bucket];
  if (!r.within) {
    ++t.above_by_cause[v.cause];
    const unsigned long long example = static_cast<unsigned long long>(index) + 1;
    if (example > t.cause_example[v.cause]) t.cause_example[v.cause] = example;
    // The first few cases into the example slots; a plain read first keeps a node with 10^9 values
    // above its bound (gelu's dx beyond 2^65) from serializing on one atomic.
    if (*static_cast<volatile unsigned long long*>(&global->violations_recorded) < kViolationSlots) {
      const unsigned long long slot = atomicAdd(&global->violations_recorded, 1ull);
      if (slot < kViolationSlots) global->violation_cases[slot] = index;
    }
  }
  if (r.bucket < kNonfiniteExpected) {
    const unsigned long long key = worst_key(r.error_ulps, index);
    if (v.finite_inputs && key > t.worst_finite) t.worst_finite = key;
    if (v.domain && key > t.worst_domain) t.worst_domain = key;
    // Per binade straight into the global tally: too many slots for registers; the plain read first
    // leaves an atomic only to the (rare) new maxima.
    if (v.domain && v.binade >= 0) {
      unsigned long long* slot = &global->worst_domain_by_binade[v.binade];
      if (key > *static_cast<volatile unsigned long long*>(slot)) atomicMax(slot, key);
    }
  }
  const unsigned long long ratio_key = worst_key(r.ratio, index);
  if (ratio_key > t.worst_ratio) t.worst_ratio = ratio_key;
  if (v.domain && ratio_key > t.worst_ratio_domain) t.worst_ratio_domain = ratio_key;
}

// Block reduction in shared memory, then one atomic per field per block.
__device__ void flush_tally(const LocalTally& t, OutputTally* global) {
  __shared__ unsigned long long histogram[kBucketCount];
  __shared__ unsigned long long above_by_cause[kCauseCount], cause_example[kCauseCount];
  __shared__ unsigned long long worst_domain, worst_finite, worst_ratio, worst_ratio_domain;
  if (threadIdx.x < kBucketCount) histogram[threadIdx.x] = 0;
  if (threadIdx.x < kCauseCount) above_by_cause[threadIdx.x] = cause_example[threadIdx.x] = 0;
  if (threadIdx.x == 0) worst_domain = worst_finite = worst_ratio = worst_ratio_domain = 0;
  __syncthreads();
  for (int b = 0; b < kBucketCount; ++b)
    if (t.histogram[b]) atomicAdd(&histogram[b], static_cast<unsigned long long>(t.histogram[b]));
  for (int c = 0; c < kCauseCount; ++c)
    if (t.above_by_cause[c]) {
      atomicAdd(&above_by_cause[c], static_cast<unsigned long long>(t.above_by_cause[c]));
      atomicMax(&cause_example[c], t.cause_example[c]);
    }
  atomicMax(&worst_domain, t.worst_domain);
  atomicMax(&worst_finite, t.worst_finite);
  atomicMax(&worst_ratio, t.worst_ratio);
  atomicMax(&worst_ratio_domain, t.worst_ratio_domain);
  __syncthreads();
  if (threadIdx.x < kBucketCount && histogram[threadIdx.x])
    atomicAdd(&global->histogram[threadIdx.x], histogram[threadIdx.x]);
  if (threadIdx.x < kCauseCount && above_by_cause[threadIdx.x]) {
    atomicAdd(&global->above_bound, above_by_cause[threadIdx.x]);
    atomicAdd(&global->above_by_cause[threadIdx.x], above_by_cause[threadIdx.x]);
    atomicMax(&global->cause_example_key[threadIdx.x], cause_example[threadIdx.x]);
  }
  if (threadIdx.x == 0) {
    atomicMax(&global->worst_domain_key, worst_domain);
    atomicMax(&global->worst_finite_key, worst_finite);
    atomicMax(&global->worst_ratio_key, worst_ratio);
    atomicMax(&global->worst_ratio_domain_key, worst_ratio_domain);
  }
}

// An element's value: 16-bit buffers hold bit patterns.
template <class T>
__device__ double value_of(const Job& job, T element) {
  if constexpr (sizeof(T) == 2) return bits16_value(job.dtype, element);
  else return static_cast<double>(element);
}

template <class T>
__global__ void grade_kernel(Job job, OutputRequest request, std::uint64_t base, std::int64_t n,
                             const T* a, const T* b, const T* produced, OutputTally* global) {
  LocalTally t;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    Inputs in;
    in.a = value_of(job, a[i]);
    in.b = b ? value_of(job, b[i]) : 0.0;
    const ElementVerdict v = grade_element(job, request.output, request.g, request.bound, in, value_of(job, produced[i]));
    tally_element(t, global, v, case_at(job, base + static_cast<std::uint64_t>(i)));
  }
  flush_tally(t, global);
}

__global__ void reference_kernel(Job job, int output, double g, const Inputs* inputs, std::int64_t n, DD* out) {
  const std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i < n) out[i] = exact_value(job, output, inputs[i], g);
}

class CudaEngine final : public ChunkEngine {
 public:
  CudaEngine(Backend& backend, int slots) : backend_(backend), slots_(slots) {}
  ~CudaEngine() override {
    if (tallies_) {
      cudaSetDevice(backend_.device_id());
      cudaFree(tallies_);
    }
  }

  [[nodiscard]] Result<void> init() {
    stream_ = static_cast<cudaStream_t>(cuda_stream(backend_));
    if (auto r = cuda_check(cudaSetDevice(backend_.device_id()), "cudaSetDevice"); !r) return r;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, backend_.device_id());
    blocks_ = (sms > 0 ? sms : 132) * 8;
    if (auto r = cuda_check(cudaMalloc(&tallies_, sizeof(OutputTally) * slots_), "cudaMalloc"); !r) return r;
    return cuda_check(cudaMemsetAsync(tallies_, 0, sizeof(OutputTally) * slots_, stream_), "cudaMemset");
  }

  [[nodiscard]] Result<void> generate(const Job& job, std::uint64_t base, Buffer& a, Buffer* b) override {
    select();
    if (is_float64(job))
      launch_generate<double>(job, base, a, b);
    else if (is_16bit(job.dtype))
      launch_generate<std::uint16_t>(job, base, a, b);
    else
      launch_generate<float>(job, base, a, b);
    return cuda_check(cudaGetLastError(), "generate kernel");
  }

  [[nodiscard]] Result<void> fill(Buffer& g, double value) override {
    select();
    if (g.dtype() == DType::float64)
      fill_kernel<double><<<grid(g.numel()), kThreads, 0, stream_>>>(static_cast<double*>(g.data()), g.numel(), value);
    else if (is_16bit(g.dtype()))
      fill_kernel<std::uint16_t><<<grid(g.numel()), kThreads, 0, stream_>>>(static_cast<std::uint16_t*>(g.data()),
                                                                             g.numel(), bits16_of(g.dtype(), value));
    else
      fill_kernel<float><<<grid(g.numel()), kThreads, 0, stream_>>>(static_cast<float*>(g.data()), g.numel(),
                                                                     static_cast<float>(value));
    return cuda_check(cudaGetLastError(), "fill kernel");
  }

  [[nodiscard]] Result<void> grade(const Job& job, int slot, const OutputRequest& request, std::uint64_t base,
                                   const Buffer& a, const Buffer* b, const Buffer& produced) override {
    select();
    OutputTally* tally = tallies_ + slot;
    if (is_float64(job))
      launch_grade<double>(job, request, base, a, b, produced, tally);
    else if (is_16bit(job.dtype))
      launch_grade<std::uint16_t>(job, request, base, a, b, produced, tally);
    else
      launch_grade<float>(job, request, base, a, b, produced, tally);
    return cuda_check(cudaGetLastError(), "grade kernel");
  }

  [[nodiscard]] Result<std::vector<OutputTally>> finish() override {
    select();
    if (auto r = backend_.synchronize(); !r) return tl::unexpected(r.error());
    std::vector<OutputTally> out(static_cast<std::size_t>(slots_));
    auto copy = cuda_check(cudaMemcpyAsync(out.data(), tallies_, sizeof(OutputTally) * slots_,
                                           cudaMemcpyDeviceToHost, stream_), "copy tallies");
    if (!copy) return tl::unexpected(copy.error());
    cudaMemsetAsync(tallies_, 0, sizeof(OutputTally) * slots_, stream_);
    auto sync = cuda_check(cudaStreamSynchronize(stream_), "synchronize");
    if (!sync) return tl::unexpected(sync.error());
    return out;
  }

 private:
  void select() { cudaSetDevice(backend_.device_id()); }
  // T: the buffers' element type (std::uint16_t for the 16-bit dtypes' bit patterns).
  template <class T>
  void launch_generate(const Job& job, std::uint64_t base, Buffer& a, Buffer* b) {
    generate_kernel<T><<<grid(a.numel()), kThreads, 0, stream_>>>(job, base, a.numel(), static_cast<T*>(a.data()),
                                                                  b ? static_cast<T*>(b->data()) : nullptr);
  }
  template <class T>
  void launch_grade(const Job& job, const OutputRequest& request, std::uint64_t base, const Buffer& a,
                    const Buffer* b, const Buffer& produced, OutputTally* tally) {
    grade_kernel<T><<<grid(a.numel()), kThreads, 0, stream_>>>(
        job, request, base, a.numel(), static_cast<const T*>(a.data()), b ? static_cast<const T*>(b->data()) : nullptr,
        static_cast<const T*>(produced.data()), tally);
  }
  unsigned grid(std::int64_t n) const {
    const std::int64_t needed = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(needed < blocks_ ? (needed > 0 ? needed : 1) : blocks_);
  }
  Backend& backend_;
  int slots_;
  cudaStream_t stream_ = nullptr;
  int blocks_ = 1024;
  OutputTally* tallies_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<ChunkEngine>> make_cuda_engine(Backend& backend, int slots) {
  auto engine = std::make_unique<CudaEngine>(backend, slots);
  if (auto r = engine->init(); !r) return tl::unexpected(r.error());
  return std::unique_ptr<ChunkEngine>(std::move(engine));
}

Result<std::vector<DD>> device_reference_values(int device, const Job& job, int output, double g,
                                                const std::vector<Inputs>& inputs) {
  const auto n = static_cast<std::int64_t>(inputs.size());
  std::vector<DD> out(inputs.size());
  if (n == 0) return out;
  if (auto r = cuda_check(cudaSetDevice(device), "cudaSetDevice"); !r) return tl::unexpected(r.error());
  Inputs* d_in = nullptr;
  DD* d_out = nullptr;
  auto freed = [&] {
    cudaFree(d_in);
    cudaFree(d_out);
  };
  Result<void> r = cuda_check(cudaMalloc(&d_in, sizeof(Inputs) * n), "cudaMalloc");
  if (r) r = cuda_check(cudaMalloc(&d_out, sizeof(DD) * n), "cudaMalloc");
  if (r) r = cuda_check(cudaMemcpy(d_in, inputs.data(), sizeof(Inputs) * n, cudaMemcpyHostToDevice), "copy inputs");
  if (r) {
    reference_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads>>>(job, output, g, d_in, n, d_out);
    r = cuda_check(cudaGetLastError(), "reference kernel");
  }
  if (r) r = cuda_check(cudaMemcpy(out.data(), d_out, sizeof(DD) * n, cudaMemcpyDeviceToHost), "copy values");
  freed();
  if (!r) return tl::unexpected(r.error());
  return out;
}

}  // namespace tapewise::conform::sweep

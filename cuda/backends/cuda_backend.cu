// cuda/backends/cuda_backend.cu — the production backend: stream-ordered device memory (small buffers
// carved from slabs, slab.hpp; the rest cudaMallocFromPoolAsync on the backend's stream, from a memory
// pool of the backend's own) and one kernel per node and direction, with 16-byte vector loads and
// stores in each kernel's tuned launch shape. Every CUDA call is checked in cuda_check; every entry
// point that calls CUDA runs under a DeviceGuard, so the caller's current device is never changed.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <cuda_runtime.h>

#include <tapewise/backend.hpp>

#include "backends/engine.hpp"
#include "kernels/dispatch.hpp"
#include "backends/kernel_image.hpp"
#include "backends/block_cache.hpp"
#include "backends/compiled_pieces.hpp"
#include "backends/kept_memory.hpp"
#include "backends/program_launch.hpp"

namespace tapewise {
namespace {

[[nodiscard]] Result<void> cuda_check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return {};
  cudaGetLastError();  // clear the sticky-free error state so later calls are not blamed
  const ErrorCode code = err == cudaErrorMemoryAllocation ? ErrorCode::OutOfMemory
                         : (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
                             ? ErrorCode::DeviceUnavailable
                             : ErrorCode::CudaFailure;
  return fail(code, what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

template <class T, int N>
struct Pointers {
  T* p[N > 0 ? N : 1];
};

template <class T, int V>
struct alignas(16) Vec {
  T v[V];
};

// The elementwise kernel's launch shapes: threads per block and 16-byte vectors per thread (each
// thread loads all of its vectors before computing any). One block covers one tile of
// Threads * Vectors vectors. `tuned` gives each kernel its own (tuned_shape below); the environment
// variable TAPEWISE_MAP_SHAPE (read by make_cuda_backend) can put one shape on every float32 and
// float64 kernel, so that a benchmark compares them side by side in one run (a 16-bit kernel has
// one shape, Vectors16 below).
enum class MapShape { tuned, t128v1, t128v2, t256v4 };
struct MapShapeInfo {
  MapShape shape;
  const char* name;
};
constexpr MapShapeInfo kMapShapes[] = {
    {MapShape::tuned, "tuned"},
    {MapShape::t128v1, "t128v1"},  // PyTorch's vectorized kernel: one 16-byte vector a thread
    {MapShape::t128v2, "t128v2"},
    {MapShape::t256v4, "t256v4"},  // round 1's: four vectors in flight per operand and thread
};
constexpr MapShape kDefaultMapShape = MapShape::tuned;

// Each kernel's shape, from the side-by-side sweep of all shapes at 2^26 on the H200 (README,
// Performance): one vector a thread where the kernel streams memory (most of them: the copy's
// speed, PyTorch's shape); two where an element's libm math is long (a thread's second vector hides
// its latency); four for the longest (softplus, safeLog; float64 tanh, silu, gelu), where a thread's
// independent elements keep the issue slots busy.
constexpr MapShape forward_shape(Op op, bool f64) {
  switch (op) {
    case Op::softplus: case Op::safeLog: return MapShape::t256v4;
    case Op::tanh: case Op::silu: case Op::gelu: return f64 ? MapShape::t256v4 : op == Op::tanh ? MapShape::t128v1 : MapShape::t128v2;
    case Op::sin: case Op::cos: case Op::log: return MapShape::t128v2;
    case Op::exp: return f64 ? MapShape::t128v2 : MapShape::t128v1;
    case Op::clamp: return f64 ? MapShape::t128v1 : MapShape::t128v2;
    default: return MapShape::t128v1;
  }
}
constexpr MapShape vjp_shape(Op op, bool f64) {
  switch (op) {
    case Op::safeLog: return MapShape::t128v2;
    case Op::exp: case Op::sigmoid: case Op::softplus: case Op::gelu: return f64 ? MapShape::t128v2 : MapShape::t128v1;
    default: return MapShape::t128v1;
  }
}
template <class Fn>
struct TunedShape {  // prims: copies, fills and single ops of the staged VJPs, memory-bound
  static constexpr MapShape value = MapShape::t128v1;
};
template <Op op, class T>
struct TunedShape<detail::ForwardFn<op, T>> {
  static constexpr MapShape value = forward_shape(op, sizeof(T) == 8);
};
template <Op op, class T>
struct TunedShape<detail::VjpFn<op, T>> {
  static constexpr MapShape value = vjp_shape(op, sizeof(T) == 8);
};

// The 16-bit formats: 128 threads and one or two 16-byte vectors (8 or 16 elements) a thread, per
// kernel, from both side by side at 2^26 on the H200 (evidence/half-precision/): two where an
// element's libm math is long, as a thread's second vector hides its latency (sin's forward 0.93x
// -> 1.09x eager, gelu's 0.63x -> 0.69x), one where the kernel streams memory (two cost 0.5-1% there).
constexpr int forward_vectors16(Op op) {
  switch (op) {
    case Op::sqrt: case Op::sin: case Op::cos: case Op::log: case Op::inv: case Op::safeLog:
    case Op::sigmoid: case Op::tanh: case Op::silu: case Op::gelu: case Op::softplus: return 2;
    default: return 1;
  }
}
constexpr int vjp_vectors16(Op op) {
  switch (op) {
    case Op::sqrt: case Op::sin: case Op::cos: case Op::safeLog: case Op::sigmoid: case Op::tanh:
    case Op::silu: case Op::gelu: return 2;
    default: return 1;
  }
}
template <class Fn>
struct Vectors16 {  // prims: memory-bound
  static constexpr int value = 1;
};
template <Op op, class T>
struct Vectors16<detail::ForwardFn<op, T>> {
  static constexpr int value = forward_vectors16(op);
};
template <Op op, class T>
struct Vectors16<detail::VjpFn<op, T>> {
  static constexpr int value = vjp_vectors16(op);
};

constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 30;  // tiles beyond this: the grid strides

// One element of the 16-bit straight path's tail (the elements past the last whole vector). The
// general path's tail loop below writes the same body out: calling this from there changes the
// float32 and float64 kernels' PTX, which stays as measured (see map_kernel).
template <class Fn, class T>
__device__ __forceinline__ void map_element(const Fn& fn, std::int64_t i, const Pointers<const T, Fn::nin>& in,
                                            const Pointers<T, Fn::nout>& out) {
  constexpr int kIn = Fn::nin > 0 ? Fn::nin : 1;
  T x[kIn];
  T y[Fn::nout];
#pragma unroll
  for (int k = 0; k < Fn::nin; ++k) x[k] = in.p[k][i];
  fn(x, y);
#pragma unroll
  for (int k = 0; k < Fn::nout; ++k) out.p[k][i] = y[k];
}

// The 16-bit formats' straight path: a block whose tile is whole, in a grid that covers the tensor
// in one pass (every block but the last, below 2^40 elements), loads its vectors, computes, stores,
// and returns; block 0 also takes the few elements past the last whole vector. Where the elements
// are 2 bytes and a node's math is short, the general path's frame (the tile loop, its bound checks
// and the grid-stride tail, ~50 instructions a thread, 6-7 per element) was what separated the
// one-op forwards from ATen's (Nsight Compute, evidence/half-precision/).
template <class Fn, class T, int Threads, int Vectors>
__device__ __forceinline__ bool map_whole_tile16(const Fn& fn, std::int64_t n, std::int64_t nvec,
                                                 const Pointers<const T, Fn::nin>& in, const Pointers<T, Fn::nout>& out) {
  constexpr int V = 8;
  constexpr int kIn = Fn::nin > 0 ? Fn::nin : 1;
  constexpr std::int64_t kTile = std::int64_t{Threads} * Vectors;
  using VecT = Vec<T, V>;
  const std::int64_t base = std::int64_t{blockIdx.x} * kTile;
  if (!(base + kTile <= nvec && std::int64_t{gridDim.x} * kTile >= nvec)) return false;
  VecT xs[Vectors][kIn];
#pragma unroll
  for (int u = 0; u < Vectors; ++u) {
#pragma unroll
    for (int k = 0; k < Fn::nin; ++k) xs[u][k] = reinterpret_cast<const VecT*>(in.p[k])[base + threadIdx.x + u * Threads];
  }
#pragma unroll
  for (int u = 0; u < Vectors; ++u) {
    VecT ys[Fn::nout];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      T x[kIn];
      T y[Fn::nout];
#pragma unroll
      for (int k = 0; k < Fn::nin; ++k) x[k] = xs[u][k].v[e];
      fn(x, y);
#pragma unroll
      for (int k = 0; k < Fn::nout; ++k) ys[k].v[e] = y[k];
    }
#pragma unroll
    for (int k = 0; k < Fn::nout; ++k) reinterpret_cast<VecT*>(out.p[k])[base + threadIdx.x + u * Threads] = ys[k];
  }
  if (blockIdx.x == 0 && threadIdx.x < n - nvec * V) map_element(fn, nvec * V + threadIdx.x, in, out);
  return true;
}

// Block b covers tile b (and b + gridDim.x, ... past kMaxBlocks tiles): thread t takes the tile's
// vectors t + u * Threads (u < Vectors), coalesced per u. Offsets inside a tile are 32-bit; the
// tile's base is 64-bit once per block. All loads of a tile precede its first store, so in-place
// calls (a prim whose output is its input) stay correct: each element is read, then written, by one
// thread. No instantiation spills (cuobjdump --dump-resource-usage: LOCAL 0; the STACK of sin/cos
// is their slow path's table). The float32 and float64 kernels are this general path alone: passing
// the vector count from the host instead of `vectorized` made float64 exp's forward 13% slower on
// the H200 (290 against 256 µs at 2^26, the same run), so their code stays as measured.
template <class Fn, class T, int Threads, int Vectors>
__global__ void __launch_bounds__(Threads)
    map_kernel(Fn fn, std::int64_t n, Pointers<const T, Fn::nin> in, Pointers<T, Fn::nout> out,
               bool vectorized) {
  constexpr int V = 16 / sizeof(T);
  constexpr int kIn = Fn::nin > 0 ? Fn::nin : 1;
  constexpr std::int64_t kTile = std::int64_t{Threads} * Vectors;
  using VecT = Vec<T, V>;
  if constexpr (sizeof(T) == 2) {
    const std::int64_t whole = vectorized ? static_cast<std::int64_t>(static_cast<std::uint64_t>(n) / V) : 0;
    if (map_whole_tile16<Fn, T, Threads, Vectors>(fn, n, whole, in, out)) return;
  }
  const std::int64_t nvec = vectorized ? n / V : 0;
  for (std::int64_t base = std::int64_t{blockIdx.x} * kTile; base < nvec; base += std::int64_t{gridDim.x} * kTile) {
    const int in_tile = static_cast<int>(nvec - base < kTile ? nvec - base : kTile);
    VecT xs[Vectors][kIn];
#pragma unroll
    for (int u = 0; u < Vectors; ++u) {
      const int j = static_cast<int>(threadIdx.x) + u * Threads;
      if (j < in_tile) {
#pragma unroll
        for (int k = 0; k < Fn::nin; ++k) xs[u][k] = reinterpret_cast<const VecT*>(in.p[k] + base * V)[j];
      }
    }
#pragma unroll
    for (int u = 0; u < Vectors; ++u) {
      const int j = static_cast<int>(threadIdx.x) + u * Threads;
      if (j < in_tile) {
        VecT ys[Fn::nout];
#pragma unroll
        for (int e = 0; e < V; ++e) {
          T x[kIn];
          T y[Fn::nout];
#pragma unroll
          for (int k = 0; k < Fn::nin; ++k) x[k] = xs[u][k].v[e];
          fn(x, y);
#pragma unroll
          for (int k = 0; k < Fn::nout; ++k) ys[k].v[e] = y[k];
        }
#pragma unroll
        for (int k = 0; k < Fn::nout; ++k) reinterpret_cast<VecT*>(out.p[k] + base * V)[j] = ys[k];
      }
    }
  }
  // Scalar elements: the last n % V when vectorized, all of them when an operand is misaligned.
  const std::int64_t stride = std::int64_t{gridDim.x} * Threads;
  for (std::int64_t i = nvec * V + std::int64_t{blockIdx.x} * Threads + threadIdx.x; i < n; i += stride) {
    T x[kIn];
    T y[Fn::nout];
#pragma unroll
    for (int k = 0; k < Fn::nin; ++k) x[k] = in.p[k][i];
    fn(x, y);
#pragma unroll
    for (int k = 0; k < Fn::nout; ++k) out.p[k][i] = y[k];
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The grid covers the tensor once (one tile per block), so no block count depends on how many
// blocks of this kernel an SM can hold; the error text is built only on failure.
struct KernelLaunch {
  cudaStream_t stream;
  MapShape shape;

  template <class Fn, class T>
  [[nodiscard]] Result<void> run(const Fn& fn, std::int64_t n, const T* const* in, T* const* out,
                   const char* what) {
    if (n == 0) return {};
    Pointers<const T, Fn::nin> ins{};
    Pointers<T, Fn::nout> outs{};
    bool vectorized = true;
    for (int k = 0; k < Fn::nin; ++k) {
      ins.p[k] = in[k];
      vectorized = vectorized && aligned16(in[k]);
    }
    for (int k = 0; k < Fn::nout; ++k) {
      outs.p[k] = out[k];
      vectorized = vectorized && aligned16(out[k]);
    }
    // The 16-bit formats: one shape per kernel (Vectors16), which keeps their build time in bounds;
    // TAPEWISE_MAP_SHAPE does not apply to them.
    if constexpr (sizeof(T) == 2) {
      return launch<Fn, T, 128, Vectors16<Fn>::value>(fn, n, ins, outs, vectorized, what);
    } else {
      switch (shape == MapShape::tuned ? TunedShape<Fn>::value : shape) {
        case MapShape::t128v1: return launch<Fn, T, 128, 1>(fn, n, ins, outs, vectorized, what);
        case MapShape::t128v2: return launch<Fn, T, 128, 2>(fn, n, ins, outs, vectorized, what);
        case MapShape::tuned:  // TunedShape never answers tuned
        case MapShape::t256v4: return launch<Fn, T, 256, 4>(fn, n, ins, outs, vectorized, what);
      }
      return fail(ErrorCode::InvalidArgument, std::string(what) + ": unknown launch shape");
    }
  }

  template <class Fn, class T, int Threads, int Vectors>
  [[nodiscard]] Result<void> launch(const Fn& fn, std::int64_t n, const Pointers<const T, Fn::nin>& ins,
                      const Pointers<T, Fn::nout>& outs, bool vectorized, const char* what) {
    constexpr int V = 16 / sizeof(T);
    const std::int64_t nvec = vectorized ? n / V : 0;
    const std::int64_t scalars = n - nvec * V;
    const std::int64_t blocks = std::clamp<std::int64_t>(
        std::max(ceil_div(nvec, std::int64_t{Threads} * Vectors), ceil_div(scalars, Threads)), 1, kMaxBlocks);
    map_kernel<Fn, T, Threads, Vectors><<<static_cast<unsigned>(blocks), Threads, 0, stream>>>(fn, n, ins, outs, vectorized);
    const cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) return {};
    return cuda_check(err, std::string(what) + " kernel launch");
  }
};

// TAPEWISE_MAP_SHAPE: a launch shape by name (kMapShapes) for every kernel, for benchmarking the
// alternatives; unset or empty: each kernel's tuned shape.
[[nodiscard]] Result<MapShape> map_shape_from_environment() {
  const char* name = std::getenv("TAPEWISE_MAP_SHAPE");
  if (!name || !*name) return kDefaultMapShape;
  std::string known;
  for (const MapShapeInfo& info : kMapShapes) {
    if (info.name == std::string_view(name)) return info.shape;
    known += known.empty() ? info.name : std::string(", ") + info.name;
  }
  return fail(ErrorCode::InvalidArgument, std::string("TAPEWISE_MAP_SHAPE=") + name + " is not a launch shape (" + known + ")");
}

const char* map_shape_name(MapShape shape) {
  for (const MapShapeInfo& info : kMapShapes)
    if (info.shape == shape) return info.name;
  return "?";
}

// Makes `device` current for the guard's scope and puts the caller's current device back after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) cudaSetDevice(device);
    else previous_ = -1;  // nothing to restore
  }
  ~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

class CudaBackend final : public detail::Engine {
 public:
  CudaBackend(int device, cudaStream_t stream, bool owns_stream, cudaMemPool_t pool, int sm_count, std::string name,
              MapShape map_shape, std::optional<detail::CompiledPieceTarget> compiled)
      : device_(device), stream_(stream), owns_stream_(owns_stream), pool_(pool), sm_count_(sm_count),
        name_(std::move(name)), map_shape_(map_shape), compiled_(std::move(compiled)) {}
  ~CudaBackend() override {
    DeviceGuard guard(device_);
    memory_.release_all([&](void* p) { cudaFreeAsync(p, stream_); });
    cudaStreamSynchronize(stream_);
    if (owns_stream_) cudaStreamDestroy(stream_);
    cudaMemPoolDestroy(pool_);
  }

  BackendKind kind() const override { return BackendKind::cuda; }
  std::string describe() const override {
    return "CUDA device " + std::to_string(device_) + ": " + name_ + ", " + std::to_string(sm_count_) + " SMs" +
           (owns_stream_ ? "" : ", caller's stream") +
           (map_shape_ == kDefaultMapShape ? "" : std::string(", launch shape ") + map_shape_name(map_shape_)) +
           (compiled_ ? ", tape programs compiled (TAPEWISE_COMPILED_PIECES)" : "");
  }
  int dlpack_device_type() const override { return 2; }  // kDLCUDA
  int device_id() const override { return device_; }

  [[nodiscard]] Result<void> forward(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                       Buffer& out) override {
    DeviceGuard guard(device_);
    KernelLaunch launch = launcher();
    return detail::run_forward(launch, op, s, inputs, out);
  }
  [[nodiscard]] Result<void> vjp_fused(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                         const Buffer& g, std::span<Buffer* const> grads) override {
    DeviceGuard guard(device_);
    KernelLaunch launch = launcher();
    return detail::run_vjp(launch, op, s, inputs, g, grads);
  }
  [[nodiscard]] Result<void> prim(Prim p, double c, std::span<const Buffer* const> inputs, Buffer& out) override {
    DeviceGuard guard(device_);
    KernelLaunch launch = launcher();
    return detail::run_prim(launch, p, c, inputs, out);
  }
  [[nodiscard]] Result<void> run_sealed_program(const detail::Program& program) override {
    DeviceGuard guard(device_);
    const cudaError_t err = detail::launch_program(stream_, program, compiled_ ? &*compiled_ : nullptr);
    if (err == cudaSuccess) return {};
    return cuda_check(err, "tape program (" + std::to_string(program.steps.size()) + " steps) kernel launch");
  }
  [[nodiscard]] Result<void> synchronize() override {
    DeviceGuard guard(device_);
    return cuda_check(cudaStreamSynchronize(stream_), "synchronize");
  }
  cudaStream_t stream() const { return stream_; }

 protected:
  // Small buffers come from slabs, large ones from the blocks released before (kept_memory.hpp): no
  // CUDA call once a tape's sizes have been seen. Memory is reused in stream order: every kernel of
  // this backend runs on its one stream.
  [[nodiscard]] Result<void*> raw_allocate(std::size_t bytes) override {
    return memory_.allocate(bytes, [&](std::size_t b) { return pool_allocate(b); }, [&](void* p) { pool_release(p); });
  }
  void raw_release(void* p) override {
    memory_.release(p, [&](void* block) { pool_release(block); });
  }
  [[nodiscard]] Result<void> copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    DeviceGuard guard(device_);
    if (auto ok = cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "copy to device"); !ok)
      return ok;
    // The host source may be freed as soon as we return.
    return cuda_check(cudaStreamSynchronize(stream_), "copy to device");
  }
  [[nodiscard]] Result<void> copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    DeviceGuard guard(device_);
    if (auto ok = cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host"); !ok)
      return ok;
    return cuda_check(cudaStreamSynchronize(stream_), "copy to host");
  }
  [[nodiscard]] Result<void> check_caller_memory(const void* data) const override {
    cudaPointerAttributes attributes{};
    if (auto ok = cuda_check(cudaPointerGetAttributes(&attributes, data), "wrap: cudaPointerGetAttributes"); !ok)
      return ok;
    const bool device_memory = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    if (!device_memory)
      return fail(ErrorCode::BackendMismatch, "wrap: pointer is not device memory (the CUDA backend needs memory on device " +
                                                  std::to_string(device_) + ")");
    if (attributes.device != device_)
      return fail(ErrorCode::BackendMismatch, "wrap: pointer is memory of device " + std::to_string(attributes.device) +
                                                  ", this backend runs on device " + std::to_string(device_));
    return {};
  }

 private:
  KernelLaunch launcher() const { return KernelLaunch{stream_, map_shape_}; }
  [[nodiscard]] Result<void*> pool_allocate(std::size_t bytes) {
    DeviceGuard guard(device_);
    void* p = nullptr;
    TAPEWISE_CHECK(cuda_check(cudaMallocFromPoolAsync(&p, bytes, pool_, stream_),
                              "cudaMallocFromPoolAsync of " + std::to_string(bytes) + " bytes"));
    return p;
  }
  void pool_release(void* p) {
    DeviceGuard guard(device_);
    cudaFreeAsync(p, stream_);
  }

  int device_;
  cudaStream_t stream_;
  bool owns_stream_;
  cudaMemPool_t pool_;
  int sm_count_;
  std::string name_;
  MapShape map_shape_;
  std::optional<detail::CompiledPieceTarget> compiled_;  // null: every tape program interpreted
  detail::KeptMemory memory_{/*host_memory=*/false, /*keep_large_blocks=*/true};
};

}  // namespace

void* cuda_stream(const Backend& be) {
  const auto* cuda = dynamic_cast<const CudaBackend*>(&be);
  return cuda ? static_cast<void*>(cuda->stream()) : nullptr;
}

namespace {
// "major.minor" of a CUDA version number (12040 -> "12.4").
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// Why cudaGetDeviceCount failed, in the words a user acts on. The runtime reports a machine with no
// NVIDIA driver at all as cudaErrorInsufficientDriver ("driver version is insufficient"), which
// reads as "update your driver"; cudaDriverGetVersion gives 0 exactly when no driver is installed.
std::string no_device_reason(cudaError_t err) {
  const std::string code = std::string(" (") + cudaGetErrorName(err) + ")";
  if (err != cudaErrorInsufficientDriver) return std::string(cudaGetErrorString(err)) + code;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  if (driver == 0) return "no NVIDIA driver is installed on this machine" + code;
  return "the NVIDIA driver supports CUDA " + cuda_version_text(driver) + ", older than the CUDA " +
         cuda_version_text(runtime) + " runtime this build uses; update the driver" + code;
}
}  // namespace

bool cuda_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = no_device_reason(err);
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  // A device is usable when this build holds a kernel image for it (its compute capability).
  std::string first_reason;
  for (int device = 0; device < count; ++device) {
    auto image = check_kernel_image(device);
    if (image) return true;
    if (device == 0) first_reason = image.error().message;
  }
  if (why) *why = first_reason;
  return false;
}

namespace {
// A pool of the backend's own on `device`, keeping freed blocks (no driver call per allocation).
[[nodiscard]] Result<cudaMemPool_t> create_pool(int device) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool;
  TAPEWISE_CHECK(cuda_check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate"));
  std::uint64_t keep_all = UINT64_MAX;
  if (auto ok = cuda_check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all), "cudaMemPoolSetAttribute");
      !ok) {
    cudaMemPoolDestroy(pool);
    return tl::unexpected(ok.error());
  }
  return pool;
}

// The caller's stream must belong to the backend's device: kernels launched on it run there.
[[nodiscard]] Result<void> check_caller_stream(cudaStream_t stream, int device) {
  int stream_device = -1;
  TAPEWISE_CHECK(cuda_check(cudaStreamGetDevice(stream, &stream_device), "make_cuda_backend: cudaStreamGetDevice"));
  if (stream_device != device)
    return fail(ErrorCode::InvalidArgument, "make_cuda_backend: the caller's stream belongs to device " +
                                                std::to_string(stream_device) + ", not device " + std::to_string(device));
  return {};
}
}  // namespace

[[nodiscard]] Result<std::shared_ptr<Backend>> make_cuda_backend(const CudaOptions& options) {
  std::string why;
  if (!cuda_available(&why)) return fail(ErrorCode::DeviceUnavailable, "no usable CUDA device (" + why + ")");
  int count = 0;
  TAPEWISE_CHECK(cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  const int device = options.device;
  if (device < 0 || device >= count)
    return fail(ErrorCode::InvalidArgument, "make_cuda_backend: device " + std::to_string(device) + " out of range (" +
                                                std::to_string(count) + " CUDA devices)");
  TAPEWISE_CHECK(check_kernel_image(device));
  auto map_shape = map_shape_from_environment();
  if (!map_shape) return tl::unexpected(map_shape.error());
  auto compilation = detail::piece_compilation_from_environment();
  if (!compilation) return tl::unexpected(compilation.error());
  DeviceGuard guard(device);
  cudaDeviceProp prop{};
  TAPEWISE_CHECK(cuda_check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties"));
  auto stream = static_cast<cudaStream_t>(options.stream);
  const bool owns_stream = stream == nullptr;
  if (!owns_stream) {
    TAPEWISE_CHECK(check_caller_stream(stream, device));
  } else {
    TAPEWISE_CHECK(cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  }
  auto pool = create_pool(device);
  if (!pool) {
    if (owns_stream) cudaStreamDestroy(stream);
    return tl::unexpected(pool.error());
  }
  const std::string arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  const std::string name = prop.name + std::string(" (") + arch + ")";
  std::optional<detail::CompiledPieceTarget> compiled;
  if (compilation->enabled) compiled = detail::CompiledPieceTarget{arch, compilation->steps_in_shared};
  return std::shared_ptr<Backend>(std::make_shared<CudaBackend>(device, stream, owns_stream, *pool,
                                                                prop.multiProcessorCount, name, *map_shape, compiled));
}

}  // namespace tapewise

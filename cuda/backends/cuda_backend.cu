// cuda/backends/cuda_backend.cu — the production backend: stream-ordered device memory (small buffers
// carved from slabs, slab.hpp; the rest cudaMallocFromPoolAsync on the backend's stream, from a memory
// pool of the backend's own; both kept for reuse, kept_memory.hpp) and one kernel per node and
// direction in the backend's math mode (cuda_kernels.hpp: the launches of each mode;
// kernels/map_kernels.cuh: the kernels and their shapes).
// Every CUDA call is checked in cuda_check; every entry point that calls CUDA runs under a DeviceGuard,
// so the caller's current device is never changed.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include <cuda_runtime.h>

#include <tapewise/backend.hpp>

#include "backends/block_cache.hpp"
#include "backends/compiled_pieces.hpp"
#include "backends/cuda_check.hpp"
#include "backends/cuda_kernels.hpp"
#include "backends/engine.hpp"
#include "backends/kept_memory.hpp"
#include "backends/kernel_image.hpp"
#include "core/log.hpp"

namespace tapewise {
namespace {

// The map kernels and their shapes (kernels/map_kernels.cuh), named here as before they moved there.
using detail::cuda_check;
using detail::kDefaultMapShape;
using detail::kMapShapes;
using detail::MapShape;
using detail::MapShapeInfo;



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
              MapShape map_shape, std::optional<detail::CompiledPieceTarget> compiled, MathMode math)
      : device_(device), stream_(stream), owns_stream_(owns_stream), pool_(pool), sm_count_(sm_count),
        name_(std::move(name)), map_shape_(map_shape), compiled_(std::move(compiled)), math_(math),
        kernels_(math == MathMode::exact ? detail::cuda_kernels_exact() : detail::cuda_kernels_aten()) {}
  ~CudaBackend() override {
    DeviceGuard guard(device_);
    memory_.release_all([&](void* p) { cudaFreeAsync(p, stream_); });
    cudaStreamSynchronize(stream_);
    if (owns_stream_) cudaStreamDestroy(stream_);
    cudaMemPoolDestroy(pool_);
  }

  BackendKind kind() const override { return BackendKind::cuda; }
  MathMode math() const override { return math_; }
  std::string describe() const override {
    return "CUDA device " + std::to_string(device_) + ": " + name_ + ", " + std::to_string(sm_count_) + " SMs" +
           (owns_stream_ ? "" : ", caller's stream") + (math_ == MathMode::exact ? ", exact math" : "") +
           (map_shape_ == kDefaultMapShape ? "" : std::string(", launch shape ") + map_shape_name(map_shape_)) +
           (compiled_ ? ", tape programs compiled (TAPEWISE_COMPILED_PIECES)" : "");
  }
  int dlpack_device_type() const override { return 2; }  // kDLCUDA
  int device_id() const override { return device_; }

  [[nodiscard]] Result<void> forward(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                       Buffer& out) override {
    DeviceGuard guard(device_);
    return kernels_.forward(stream_, map_shape_, op, s, inputs, out);
  }
  [[nodiscard]] Result<void> vjp_fused(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                         const Buffer& g, std::span<Buffer* const> grads) override {
    DeviceGuard guard(device_);
    return kernels_.vjp(stream_, map_shape_, op, s, inputs, g, grads);
  }
  [[nodiscard]] Result<void> prim(Prim p, double c, std::span<const Buffer* const> inputs, Buffer& out) override {
    DeviceGuard guard(device_);
    return kernels_.prim(stream_, map_shape_, p, c, inputs, out);
  }
  [[nodiscard]] Result<void> run_sealed_program(const detail::Program& program) override {
    DeviceGuard guard(device_);
    const cudaError_t err = kernels_.program(stream_, program, compiled_ ? &*compiled_ : nullptr);
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
  detail::KeptMemory* kept_memory() override { return &memory_; }
  std::size_t release_kept_memory(std::size_t keep_bytes) override {
    return memory_.release_kept(keep_bytes, [&](void* block) { pool_release(block); });
  }
  // The pool keeps what is freed into it (its release threshold is UINT64_MAX, create_pool), and
  // memory freed on the stream is the pool's to give back only once the stream has run past the free.
  void return_unused_memory() override {
    DeviceGuard guard(device_);
    cudaStreamSynchronize(stream_);
    cudaMemPoolTrimTo(pool_, 0);
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
  MathMode math_;
  const detail::CudaKernels& kernels_;  // the launches of math_
  detail::KeptMemory memory_{/*host_memory=*/false};
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
  if (options.math != MathMode::aten && options.math != MathMode::exact)
    return fail(ErrorCode::InvalidArgument, "make_cuda_backend: math mode " +
                                                std::to_string(static_cast<int>(options.math)) + " is neither aten nor exact");
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
  // No limit by default: the chain's slabs and blocks are kept for its next run, as the pool would
  // keep them, and all of it is given back when the device runs out (kept_memory.hpp) or on trim().
  auto kept_limit = detail::kept_memory_limit_from_environment(detail::KeptMemory::kNoLimit);
  if (!kept_limit) return tl::unexpected(kept_limit.error());
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
  if (compilation->enabled)
    compiled = detail::CompiledPieceTarget{arch, compilation->steps_in_shared, options.math == MathMode::exact};
  auto backend = std::make_shared<CudaBackend>(device, stream, owns_stream, *pool, prop.multiProcessorCount, name,
                                               *map_shape, compiled, options.math);
  backend->set_kept_memory_limit(*kept_limit);
  TAPEWISE_LOG(info, "backend: " + backend->describe() +
                         (compiled ? std::string() : std::string("; compiled pieces off (TAPEWISE_COMPILED_PIECES): the interpreter runs every piece")));
  return std::shared_ptr<Backend>(std::move(backend));
}

}  // namespace tapewise

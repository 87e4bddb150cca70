/// tapewise/backend.hpp — device memory and the kernels a tape runs on: a CUDA backend (production)
/// and a CPU backend (the same per-element code compiled for the host). Buffers are move-only
/// RAII handles; every allocation is tagged and counted so that leaks are observable.
///
/// Threads: one backend may be shared by threads that each use their own tapes, buffers and
/// gradients (allocation, release, statistics, trim, the kept memory limit and the kernels are safe
/// to call concurrently; on CUDA the work of all threads queues on the backend's one stream, in the
/// order it is issued). A Tape, a Buffer or a Gradients is not safe to use from two threads at once.
/// \file
#pragma once

#include "requires_cpp20.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core.hpp"
#include "op.hpp"

// DLPack's tensor (dlpack/dlpack.h): callers that exchange tensors include it. A plain comment: a
// Doxygen one after this forward declaration would document the next declaration (namespace tapewise).
struct DLManagedTensor;

namespace tapewise {

/// What an allocation is for: a node's value, a gradient, or a staged VJP's workspace.
enum class AllocTag : std::uint8_t { value, gradient, workspace };
/// The number of AllocTag values.
inline constexpr int kAllocTagCount = 3;
/// The tag's name ("value", "gradient", "workspace").
TAPEWISE_API const char* alloc_tag_name(AllocTag t);

/// Live allocations per AllocTag: how many, and their bytes (borrowed views are not counted); and the
/// memory the backend holds for them (docs/memory.md).
struct MemoryStats {
  /// Live allocations, indexed by AllocTag.
  std::array<std::int64_t, kAllocTagCount> live_count{};
  /// Their bytes, indexed by AllocTag.
  std::array<std::int64_t, kAllocTagCount> live_bytes{};
  /// Bytes the backend holds from the memory underneath (the host heap, the CUDA pool): every slab,
  /// every large buffer, every released block it keeps. At least the live bytes.
  std::int64_t reserved_bytes = 0;
  /// Of reserved_bytes, the slabs' (buffers of up to 256 KiB are carved from slabs).
  std::int64_t slab_bytes = 0;
  /// Of reserved_bytes, those kept for reuse with no buffer in them (empty slabs, released large
  /// blocks): at most Backend::kept_memory_limit(); Backend::trim() gives them back.
  std::int64_t kept_bytes = 0;
  /// live_count of one tag.
  std::int64_t count(AllocTag t) const { return live_count[static_cast<int>(t)]; }
  /// live_bytes of one tag.
  std::int64_t bytes(AllocTag t) const { return live_bytes[static_cast<int>(t)]; }
  /// Every tag's live_bytes.
  std::int64_t total_live_bytes() const { return live_bytes[0] + live_bytes[1] + live_bytes[2]; }
  /// Equal when every live count and byte total is. The held bytes (reserved, slab, kept) are not
  /// compared: they follow the allocator's reuse, not the caller's buffers.
  friend bool operator==(const MemoryStats& a, const MemoryStats& b) {
    return a.live_count == b.live_count && a.live_bytes == b.live_bytes;
  }
};

class Backend;
namespace detail {
class Engine;  ///< what a backend implements (internal to the library)
}  // namespace detail

/// A tensor in a backend's memory: move-only RAII handle, tagged and counted by its backend.
class TAPEWISE_API Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  /// Takes over `other`'s memory; `other` is left empty.
  Buffer(Buffer&& other) noexcept
      : owner_(std::move(other.owner_)), shared_(std::exchange(other.shared_, nullptr)),
        borrowed_(std::exchange(other.borrowed_, false)), keep_alive_(std::move(other.keep_alive_)),
        data_(std::exchange(other.data_, nullptr)), shape_(std::move(other.shape_)), dtype_(other.dtype_),
        numel_(std::exchange(other.numel_, 0)), tag_(other.tag_) {}
  /// Releases this buffer's memory, then takes over `other`'s.
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer() { reset(); }

  /// The shape.
  const Shape& shape() const { return shape_; }
  /// The element type.
  DType dtype() const { return dtype_; }
  /// The element count.
  std::int64_t numel() const { return numel_; }
  /// The size in bytes (numel() elements of dtype()).
  std::size_t bytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }
  /// What the allocation is for.
  AllocTag tag() const { return tag_; }
  /// The elements, in the backend's memory (device memory for CUDA).
  void* data() { return data_; }
  /// The elements, read-only.
  const void* data() const { return data_; }
  /// The backend that owns the memory, or nullptr for an empty buffer.
  const Backend* backend() const { return owner_.get(); }
  /// True unless the buffer is empty (default-constructed, moved from or reset).
  explicit operator bool() const { return owner_ != nullptr; }
  /// A view of memory the buffer does not own (Backend::wrap, Backend::import_dlpack): releasing it
  /// frees nothing of the caller's, and it is not counted in the backend's MemoryStats.
  bool borrowed() const { return borrowed_; }
  void reset();  ///< releases the memory now (a borrowed buffer: drops the view and its keep-alive)

 private:
  friend class Backend;
  struct SharedAllocation;                ///< one allocation several buffers were carved from
  std::shared_ptr<Backend> owner_;
  SharedAllocation* shared_ = nullptr;    ///< set by Backend::allocate_many; else data_ is its own
  bool borrowed_ = false;
  std::shared_ptr<void> keep_alive_;      ///< a borrowed buffer's owner (e.g. the DLPack tensor)
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::float32;
  std::int64_t numel_ = 0;
  AllocTag tag_ = AllocTag::value;
};

/// Which backend: the CPU one or the CUDA one.
enum class BackendKind { cpu, cuda };

/// Which exp, log, sin, cos and tanh a backend's kernels call (spec/conventions.md, "Math modes").
/// `aten`: the libm functions ATen calls (CUDA's on the GPU), bit for bit ATen's results; the CUDA
/// backend's default. `exact`: tapewise's own, float32 correctly rounded on every input and float64
/// one algorithm everywhere, so every backend in exact mode gives the same bits; the CPU backend's
/// only mode.
enum class MathMode : std::uint8_t { aten, exact };
/// "aten" or "exact".
TAPEWISE_API const char* math_mode_name(MathMode mode);
/// The mode named "aten" or "exact"; InvalidArgument naming anything else.
[[nodiscard]] TAPEWISE_API Result<MathMode> math_mode_named(std::string_view name);

/// One part of Backend::allocate_many.
struct BufferSpec {
  /// The part's shape.
  Shape shape;
  /// The part's dtype.
  DType dtype = DType::float32;
};

/// Device memory and the kernels a tape runs on; shared by tapes (and threads) through a shared_ptr.
/// Made by make_cpu_backend and make_cuda_backend: the library's two backends are its only ones (the
/// engine they implement is internal).
class TAPEWISE_API Backend : public std::enable_shared_from_this<Backend> {
 public:
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  /// CPU or CUDA.
  virtual BackendKind kind() const = 0;
  virtual std::string describe() const = 0;  ///< e.g. "CUDA device 0: NVIDIA H200, 132 SMs"

  /// Tagged, counted allocation. Fails with InvalidShape (a shape that is not Shape::valid) or
  /// OutOfMemory; never throws.
  [[nodiscard]] Result<Buffer> allocate(const Shape& shape, DType dtype, AllocTag tag);
  /// One allocation carved into one buffer per part, each 16-byte aligned, tagged and counted as a
  /// buffer of its own; the allocation is freed when the last of them is released. Counts as a
  /// single allocation.
  [[nodiscard]] Result<std::vector<Buffer>> allocate_many(std::span<const BufferSpec> parts, AllocTag tag);
  /// Copies host data into a new buffer of this backend.
  [[nodiscard]] Result<Buffer> upload(const HostArray& host, AllocTag tag = AllocTag::value);
  /// Copies a buffer of this backend to the host.
  [[nodiscard]] Result<HostArray> download(const Buffer& buffer);

  /// A non-owning view of caller memory, usable as a leaf or a seed with no copy: host memory for the
  /// CPU backend, device memory of the backend's device for CUDA (checked), aligned to the dtype's
  /// size, holding shape.numel() elements. Lifetime rule: the caller keeps ownership, and the memory
  /// must stay allocated and unchanged while any tape holds the view as a leaf value, and until a
  /// backward that reads it as a seed has returned. Work is queued on the backend's stream, so on
  /// CUDA synchronize() (or order the caller's stream after it) before freeing or overwriting it.
  /// `keep_alive`, when given, is held by the buffer and dropped when it is released (e.g. a reference
  /// to the framework tensor that owns the memory).
  [[nodiscard]] Result<Buffer> wrap(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> keep_alive = nullptr);
  /// DLPack (v0.6+ DLManagedTensor): a borrowed buffer over `tensor`'s memory, with the checks of
  /// wrap plus the tensor's device (an unknown device_type is BackendMismatch), dtype
  /// (float32/float64, 1 lane), ndim (at most kMaxNdim), strides (C-contiguous; any strides for a
  /// tensor of no elements), data (not NULL when there are elements) and byte_offset (data +
  /// byte_offset + the elements' bytes must not wrap the address space). On success the buffer owns
  /// `tensor` and calls its deleter when released; on failure the caller still owns it.
  [[nodiscard]] Result<Buffer> import_dlpack(DLManagedTensor* tensor);
  /// Moves `buffer` into a DLPack tensor (no copy): its deleter releases the buffer.
  [[nodiscard]] Result<DLManagedTensor*> export_dlpack(Buffer buffer);
  /// A non-owning DLPack view of `buffer` (no copy): valid while `buffer` lives (for a tape's value,
  /// while the tape does); its deleter frees only the DLPack structures.
  [[nodiscard]] Result<DLManagedTensor*> export_dlpack_view(const Buffer& buffer);

  // The virtual calls' [[nodiscard]] comes with gnu::warn_unused_result: GCC 12 does not apply
  // [[nodiscard]] to a virtual call, and these are the kernels whose failures must not be dropped.
  /// y = op(inputs), one kernel. inputs.size() == arity; out pre-allocated with the same shape.
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void> forward(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                               Buffer& out) = 0;
  /// Fused VJP: one kernel reading inputs and g once, writing each gradient once, no workspace.
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void> vjp_fused(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                                 const Buffer& g, std::span<Buffer* const> grads) = 0;
  /// Waits for all queued work; reports any asynchronous failure.
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void> synchronize() = 0;
  /// The device the backend's memory lives on, in DLPack's terms: (kDLCPU = 1, 0) or (kDLCUDA = 2, ordinal).
  virtual int dlpack_device_type() const = 0;
  /// The device ordinal (0 for the CPU backend).
  virtual int device_id() const = 0;

  /// A snapshot of the live allocations and the memory held for them (other threads may be
  /// allocating while it is taken).
  MemoryStats stats() const;
  /// Gives back to the system every empty slab and released block the backend keeps for reuse (as
  /// PyTorch's empty_cache); live buffers are untouched. Returns the bytes given back. A CUDA backend
  /// then waits for its stream and returns its memory pool's unused memory to the device.
  std::size_t trim();
  /// The most bytes kept for reuse with no buffer in them (MemoryStats::kept_bytes): beyond it, a
  /// slab left empty or a released block is given back at once. Starts at TAPEWISE_KEPT_MEMORY_LIMIT
  /// when set, else 256 MiB on the CPU and no limit on CUDA (where kept memory is given back when the
  /// device runs out); SIZE_MAX is no limit.
  std::size_t kept_memory_limit() const;
  /// Sets kept_memory_limit(); what is kept beyond it is given back now.
  void set_kept_memory_limit(std::size_t bytes);

 private:
  friend class Buffer;
  friend class detail::Engine;
  Backend() = default;  // the engine (cuda/backends/engine.hpp) is the one class derived from Backend
  detail::Engine& engine();  ///< this backend as the engine it is
  void release(Buffer& b);
  /// allocate_many's work, into `buffers` (cleared first; its capacity reused).
  [[nodiscard]] Result<void> allocate_parts(std::span<const BufferSpec> parts, AllocTag tag, std::vector<Buffer>& buffers);
  void release_locked(Buffer& b);  ///< release's work (allocation mutex held)
  void release_all(std::span<Buffer* const> buffers);  ///< release, for many buffers under one lock
  bool take_injected_failure();  ///< true when this allocation is the one set to fail (mutex held)
  /// A buffer's fields (owner: this backend, its shared_ptr passed in so that many buffers copy one).
  Buffer adopt(const std::shared_ptr<Backend>& owner, void* data, Buffer::SharedAllocation* shared, const Shape& shape,
               std::int64_t numel, DType dtype, AllocTag tag);
  /// allocate's work, for a shape already checked (numel its element count), owned by `owner` (this backend).
  [[nodiscard]] Result<Buffer> allocate_valid(const std::shared_ptr<Backend>& owner, const Shape& shape, std::int64_t numel,
                                              DType dtype, AllocTag tag);
  /// allocate of like's shape and dtype (a buffer's shape is valid). The owner is copied from `like` when this
  /// backend owns it and `like` counts itself an owner: shared_from_this's compare-and-swap cost more than
  /// the rest of a tape's allocation.
  [[nodiscard]] Result<Buffer> allocate_same(const Buffer& like, AllocTag tag);
  /// allocate_valid's work into `out` (an empty buffer, left empty on failure).
  [[nodiscard]] Result<void> allocate_valid_into(const std::shared_ptr<Backend>& owner, const Shape& shape,
                                                 std::int64_t numel, DType dtype, AllocTag tag, Buffer& out);
  void count_live(const Buffer& b, int sign);  ///< b in (+1) or out (-1) of stats_ (mutex held)
  Buffer adopt_borrowed(void* data, std::shared_ptr<void> keep_alive, const Shape& shape, DType dtype);
  /// Guards what every allocation and release changes: stats_, fail_countdown_, the shared
  /// allocations' counts and the engine's allocator (its raw_allocate, raw_release, kept memory). Held for a
  /// pointer bump or a pool call, never across a kernel.
  mutable std::mutex allocation_mutex_;
  MemoryStats stats_;
  std::int64_t fail_countdown_ = 0;  ///< the engine's test hook: the allocation that fails
};

/// The instruction set the CPU backend's element loops are compiled for. The same code in each, every
/// operation rounded once (no contraction, no fast-math), so results never depend on it (up to NaN
/// payload); x86_64_v3 and x86_64_v4 run fma as one instruction and several elements per vector
/// register (4 and 8 doubles). They exist in optimized builds by GCC for x86-64 without sanitizers;
/// elsewhere baseline only.
enum class CpuIsa {
  automatic,  ///< TAPEWISE_CPU_ISA, else the widest this processor runs
  baseline,   ///< the build's target (x86-64: SSE2)
  x86_64_v3,  ///< AVX2 with FMA (x86-64-v3)
  x86_64_v4,  ///< AVX-512 F, BW, CD, DQ, VL (x86-64-v4), 512-bit vectors
};
/// "automatic", "baseline", "x86-64-v3", "x86-64-v4".
TAPEWISE_API const char* cpu_isa_name(CpuIsa isa);

/// The CPU backend's options.
struct CpuOptions {
  /// Threads for large tensors, the calling thread included (a tensor of at most 2^15 elements runs on
  /// the calling thread alone). 0 takes TAPEWISE_CPU_THREADS, else the CPUs this process may run on (at
  /// most 64); 1 runs everything on the calling thread. At most 256. Results never depend on it.
  int threads = 0;
  /// The element loops' instruction set. Results never depend on it (up to NaN payload).
  CpuIsa isa = CpuIsa::automatic;
};
/// The CPU backend (the production per-element code compiled for the host). InvalidArgument for a
/// thread count outside 0..256, an invalid TAPEWISE_CPU_THREADS when threads is 0, an instruction set
/// this build or processor lacks, or an invalid TAPEWISE_CPU_ISA when isa is automatic.
[[nodiscard]] TAPEWISE_API Result<std::shared_ptr<Backend>> make_cpu_backend(const CpuOptions& options);
/// The CPU backend with the default CpuOptions; where TAPEWISE_CPU_THREADS is invalid it runs on the
/// calling thread alone and its describe() says why (make_cpu_backend(CpuOptions{}) refuses it).
TAPEWISE_API std::shared_ptr<Backend> make_cpu_backend();
/// The threads a CPU backend runs large tensors on (CpuOptions::threads as resolved); 0 for other
/// backends.
TAPEWISE_API int cpu_threads(const Backend& backend);
/// The instruction set a CPU backend's element loops run in (CpuOptions::isa as resolved, never
/// automatic); baseline for other backends.
TAPEWISE_API CpuIsa cpu_isa(const Backend& backend);
/// The math mode the backend's kernels run in: exact for the CPU backend, CudaOptions::math for a
/// CUDA one.
TAPEWISE_API MathMode math_mode(const Backend& backend);

/// A CUDA backend on the caller's device and, optionally, the caller's stream. It never changes the
/// caller's state: the current device is put back after every call, memory comes from a pool of the
/// backend's own (not the device's default pool), and a caller's stream is used, never destroyed.
struct CudaOptions {
  /// The CUDA device ordinal.
  int device = 0;
  void* stream = nullptr;  ///< a cudaStream_t on `device`; nullptr: the backend creates its own
  /// The kernels' exp, log, sin, cos and tanh (MathMode): ATen's by default.
  MathMode math = MathMode::aten;
};
/// Fails with DeviceUnavailable (naming the CUDA error, or saying that this build has no CUDA) where
/// no usable GPU exists, and InvalidArgument for a device ordinal out of range.
[[nodiscard]] TAPEWISE_API Result<std::shared_ptr<Backend>> make_cuda_backend(const CudaOptions& options);
/// A CUDA backend on `device` with a stream of its own (see make_cuda_backend(const CudaOptions&)).
[[nodiscard]] inline Result<std::shared_ptr<Backend>> make_cuda_backend(int device = 0) {
  return make_cuda_backend(CudaOptions{device, nullptr});
}
/// True when a CUDA device can be opened; `why` receives the reason when it cannot.
TAPEWISE_API bool cuda_available(std::string* why = nullptr);
/// The cudaStream_t a CUDA backend queues its work on (as void*); nullptr for other backends.
TAPEWISE_API void* cuda_stream(const Backend& backend);

}  // namespace tapewise

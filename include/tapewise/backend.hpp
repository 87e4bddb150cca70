/// tapewise/backend.hpp — device memory and the kernels a tape runs on: a CUDA backend (production)
/// and a CPU backend (the same per-element code compiled for the host). Buffers are move-only
/// RAII handles; every allocation is tagged and counted so that leaks are observable.
///
/// Threads: one backend may be shared by threads that each use their own tapes, buffers and
/// gradients (allocation, release, statistics, the program threshold and the kernels are safe to
/// call concurrently; on CUDA the work of all threads queues on the backend's one stream, in the
/// order it is issued). A Tape, a Buffer or a Gradients is not safe to use from two threads at once.
/// \file
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core.hpp"
#include "op.hpp"

struct DLManagedTensor;  ///< DLPack (dlpack/dlpack.h): callers that exchange tensors include it

namespace tapewise {

/// What an allocation is for: a node's value, a gradient, or a staged VJP's workspace.
enum class AllocTag : std::uint8_t { value, gradient, workspace };
/// The number of AllocTag values.
inline constexpr int kAllocTagCount = 3;
/// The tag's name ("value", "gradient", "workspace").
const char* alloc_tag_name(AllocTag t);

/// Live allocations per AllocTag: how many, and their bytes (borrowed views are not counted).
struct MemoryStats {
  /// Live allocations, indexed by AllocTag.
  std::array<std::int64_t, kAllocTagCount> live_count{};
  /// Their bytes, indexed by AllocTag.
  std::array<std::int64_t, kAllocTagCount> live_bytes{};
  /// live_count of one tag.
  std::int64_t count(AllocTag t) const { return live_count[static_cast<int>(t)]; }
  /// live_bytes of one tag.
  std::int64_t bytes(AllocTag t) const { return live_bytes[static_cast<int>(t)]; }
  /// Equal when every count and byte total is.
  friend bool operator==(const MemoryStats&, const MemoryStats&) = default;
};

class Backend;
namespace detail {
struct Program;  ///< a tape program (cuda/kernels/program.hpp): internal to the library
}  // namespace detail

/// A tensor in a backend's memory: move-only RAII handle, tagged and counted by its backend.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  /// Takes over `other`'s memory; `other` is left empty.
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
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

/// The primitive buffer ops the staged VJPs are written in: each is one ATen-equivalent op with one
/// rounding per element in the dtype. `c` is the prim's scalar, rounded once to the dtype.
enum class Prim : std::uint8_t {
  // out = f(x)
  copy, neg, abs, sign, exp, log, sin, cos, tanh, sigmoid, sigmoid_split, reciprocal,
  // out = f(x, c)
  mul_scalar, add_scalar, rsub_scalar,
  // out = f(a, b)
  add, sub, mul, div, fmax, fmin,
  // out = c
  fill,
};
int prim_arity(Prim p);  ///< buffer inputs: 0, 1 or 2
/// The prim's name, as the staged column of spec/ops.def writes it.
const char* prim_name(Prim p);

/// Which backend: the CPU one or the CUDA one.
enum class BackendKind { cpu, cuda };

/// One part of Backend::allocate_many.
struct BufferSpec {
  /// The part's shape.
  Shape shape;
  /// The part's dtype.
  DType dtype = DType::float32;
};

/// Tapes defer the forward of nodes of at most this many elements and run them, and backward passes
/// over them, as programs (one kernel per flush instead of one per node); 0 turns that off. 2^20: on
/// an H200 the 1,000-node chain of README's Performance runs faster as programs up to 2^20 elements
/// (6.7 against 12.9 us per node at 2^20) and slower at 2^22 (32.4 against 20.3, measured before the
/// four-lane fast path).
inline constexpr std::int64_t kDefaultProgramThreshold = std::int64_t{1} << 20;

/// Device memory and the kernels a tape runs on; shared by tapes (and threads) through a shared_ptr.
class Backend : public std::enable_shared_from_this<Backend> {
 public:
  virtual ~Backend() = default;
  /// CPU or CUDA.
  virtual BackendKind kind() const = 0;
  virtual std::string describe() const = 0;  ///< e.g. "CUDA device 0: NVIDIA H200, 132 SMs"

  /// Tagged, counted allocation. Fails with InvalidShape (a shape that is not Shape::valid) or
  /// OutOfMemory; never throws.
  [[nodiscard]] Result<Buffer> allocate(const Shape& shape, DType dtype, AllocTag tag);
  /// One allocation carved into one buffer per part, each 16-byte aligned, tagged and counted as a
  /// buffer of its own; the allocation is freed when the last of them is released. Counts as a
  /// single allocation for inject_allocation_failure.
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
  /// One primitive buffer op (the vocabulary of the staged VJPs).
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void> prim(Prim p, double c, std::span<const Buffer* const> inputs,
                            Buffer& out) = 0;
  /// Runs a tape program: every step, in order, at every element (cuda/kernels/program.hpp). Queued like
  /// a kernel: no synchronisation, no allocation.
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void> run_program(const detail::Program& program) = 0;
  /// Waits for all queued work; reports any asynchronous failure.
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void> synchronize() = 0;
  /// The device the backend's memory lives on, in DLPack's terms: (kDLCPU = 1, 0) or (kDLCUDA = 2, ordinal).
  virtual int dlpack_device_type() const = 0;
  /// The device ordinal (0 for the CPU backend).
  virtual int device_id() const = 0;

  /// Element count up to which tapes on this backend use programs (kDefaultProgramThreshold);
  /// 0 runs every node with its own kernels. Read by a tape at each record and backward. A negative
  /// count is InvalidArgument, and the threshold stays as it was.
  std::int64_t program_threshold() const { return program_threshold_.load(std::memory_order_relaxed); }
  /// Sets program_threshold() (see there).
  [[nodiscard]] Result<void> set_program_threshold(std::int64_t numel);

  /// A snapshot of the live allocations (other threads may be allocating while it is taken).
  MemoryStats stats() const;
  /// Test hook: the n-th allocation from now (1 = the next one) fails with OutOfMemory.
  void inject_allocation_failure(std::int64_t nth);

 protected:
  /// Called with allocation_mutex_ held, so an implementation's allocator state needs no lock of its own.
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void*> raw_allocate(std::size_t bytes) = 0;
  /// Frees what raw_allocate returned (allocation_mutex_ held).
  virtual void raw_release(void* p) = 0;
  [[nodiscard, gnu::warn_unused_result]]
  /// Copies host bytes into the backend's memory.
  virtual Result<void> copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
  [[nodiscard, gnu::warn_unused_result]]
  /// Copies bytes of the backend's memory to the host.
  virtual Result<void> copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  /// Whether `data` is memory this backend's kernels can read and write (wrap, import_dlpack).
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void> check_caller_memory(const void* data) const = 0;

 private:
  friend class Buffer;
  void release(Buffer& b);
  bool take_injected_failure();  ///< true when this allocation is the one set to fail (mutex held)
  Buffer adopt(void* data, Buffer::SharedAllocation* shared, const Shape& shape, DType dtype, AllocTag tag);
  Buffer adopt_borrowed(void* data, std::shared_ptr<void> keep_alive, const Shape& shape, DType dtype);
  /// Guards what every allocation and release changes: stats_, fail_countdown_, the shared
  /// allocations' counts and the implementation's allocator (raw_allocate, raw_release). Held for a
  /// pointer bump or a pool call, never across a kernel.
  mutable std::mutex allocation_mutex_;
  MemoryStats stats_;
  std::int64_t fail_countdown_ = 0;
  std::atomic<std::int64_t> program_threshold_{kDefaultProgramThreshold};
};

/// The VJP of one node as the spec stages it (spec/ops.def, `staged`): one prim per stage, workspace
/// buffers released before return. The independent second path beside Backend::vjp_fused.
[[nodiscard]] Result<void> staged_vjp(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                        const Buffer& g, std::span<Buffer* const> grads);

/// The forward of one node as spec/conventions.md stages it (softplus's seven stages, gelu's, ...): one
/// prim per stage, workspace released before return; sqrt and relu (selects) are their one native
/// kernel. What the prover (`tapewise-conform prove`) holds the forward kernel equal to.
[[nodiscard]] Result<void> staged_forward(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                                          Buffer& out);

/// The CPU backend (the production per-element code compiled for the host).
std::shared_ptr<Backend> make_cpu_backend();

/// A CUDA backend on the caller's device and, optionally, the caller's stream. It never changes the
/// caller's state: the current device is put back after every call, memory comes from a pool of the
/// backend's own (not the device's default pool), and a caller's stream is used, never destroyed.
struct CudaOptions {
  /// The CUDA device ordinal.
  int device = 0;
  void* stream = nullptr;  ///< a cudaStream_t on `device`; nullptr: the backend creates its own
};
/// Fails with DeviceUnavailable (naming the CUDA error, or saying that this build has no CUDA) where
/// no usable GPU exists, and InvalidArgument for a device ordinal out of range.
[[nodiscard]] Result<std::shared_ptr<Backend>> make_cuda_backend(const CudaOptions& options);
/// A CUDA backend on `device` with a stream of its own (see make_cuda_backend(const CudaOptions&)).
[[nodiscard]] inline Result<std::shared_ptr<Backend>> make_cuda_backend(int device = 0) {
  return make_cuda_backend(CudaOptions{device, nullptr});
}
/// True when a CUDA device can be opened; `why` receives the reason when it cannot.
bool cuda_available(std::string* why = nullptr);
/// The cudaStream_t a CUDA backend queues its work on (as void*); nullptr for other backends.
void* cuda_stream(const Backend& backend);

}  // namespace tapewise

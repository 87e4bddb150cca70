// cuda/backends/engine.hpp — the execution engine behind the public Backend (internal to the library
// and its in-tree tools and tests, never installed): the interface both backends implement — kernels,
// primitive buffer ops, tape programs, raw memory — the test hook, and the staged forms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <tapewise/backend.hpp>

#include "backends/kept_memory.hpp"
#include "kernels/prim.hpp"

namespace tapewise {
namespace detail {

struct Program;  // a tape program (cuda/kernels/program.hpp)

/// What a backend implements. Every Backend is an Engine (Backend's constructor is private to this
/// class), so engine_of() below is a plain downcast.
class Engine : public Backend {
 public:
  /// The exp, log, sin, cos and tanh its kernels call.
  virtual MathMode math() const = 0;
  /// One primitive buffer op (the vocabulary of the staged forms).
  [[nodiscard]] virtual Result<void> prim(Prim p, double c, std::span<const Buffer* const> inputs, Buffer& out) = 0;
  /// Runs a tape program: every step, in order, at every element (cuda/kernels/program.hpp). Queued like a
  /// kernel: no synchronisation, no allocation. A step appended and never sealed is an InvalidArgument
  /// naming it, and nothing runs (backend.cpp).
  [[nodiscard]] Result<void> run_program(const Program& program);

  /// allocate for a buffer of like's shape and dtype (a shape a buffer holds is valid, so it is not
  /// checked again: the tape allocates one per node).
  [[nodiscard]] Result<Buffer> allocate_like(const Buffer& like, AllocTag tag) { return allocate_same(like, tag); }
  /// A node's value of like's shape and dtype, made in `out` (an empty buffer, left empty on failure),
  /// whose owner pointer is not counted: the tape holding the value holds this backend and releases
  /// its values before letting go (Tape::backend_), so recording and releasing a node touch no shared
  /// count, an atomic instruction each in a multi-threaded process. Only for a tape's own values,
  /// which never leave it (read through const references); a buffer that may outlive its tape, such
  /// as a gradient, is allocated with a counted owner.
  [[nodiscard]] Result<void> allocate_value_into(const Buffer& like, Buffer& out) {
    const std::shared_ptr<Backend> uncounted(std::shared_ptr<Backend>(), this);
    return allocate_valid_into(uncounted, like.shape(), like.numel(), like.dtype(), AllocTag::value, out);
  }
  /// allocate_many into `buffers` (cleared first): a caller that allocates many buffers per call (a
  /// backward's slots) reuses the vector's memory rather than allocating a large one each time.
  [[nodiscard]] Result<void> allocate_many_into(std::span<const BufferSpec> parts, AllocTag tag, std::vector<Buffer>& buffers) {
    return allocate_parts(parts, tag, buffers);
  }
  /// Releases these buffers (each empty after), taking the allocation mutex once for all: what a tape
  /// does with its values and a backward with its slots. Borrowed ones, empty ones and another
  /// backend's are reset as usual.
  void release_buffers(std::span<Buffer* const> buffers) { release_all(buffers); }

  /// What run_program runs once it has checked that every step is sealed.
  [[nodiscard]] virtual Result<void> run_sealed_program(const Program& program) = 0;

  /// wrap without asking the driver where `data` lives (cudaPointerGetAttributes, about a microsecond
  /// a pointer): for a caller that already knows it is this backend's kind of memory on its device,
  /// such as a framework tensor's (tapewise.torch's C++ nodes). Aligned to the dtype, non-null when
  /// numel > 0, numel >= 0: the caller's to ensure.
  Buffer wrap_known_memory(void* data, std::int64_t numel, DType dtype) {
    return adopt_borrowed(numel > 0 ? data : nullptr, nullptr, Shape{numel}, dtype);
  }
  /// Test hook: the n-th allocation from now (1 = the next one) fails with OutOfMemory; 0 disarms it.
  void inject_allocation_failure(std::int64_t nth);

  // Raw memory, called by Backend with its allocation mutex held (so an implementation's allocator
  // state needs no lock of its own).
  [[nodiscard]] virtual Result<void*> raw_allocate(std::size_t bytes) = 0;
  /// Frees what raw_allocate returned (allocation mutex held).
  virtual void raw_release(void* p) = 0;
  /// The allocator behind raw_allocate and raw_release (used with the allocation mutex held);
  /// nullptr for an engine that keeps nothing (the prover's symbolic one).
  virtual KeptMemory* kept_memory() { return nullptr; }
  /// Gives the allocator's kept memory back to the memory underneath until at most keep_bytes are
  /// kept (allocation mutex held). Returns the bytes given back.
  virtual std::size_t release_kept_memory(std::size_t /*keep_bytes*/) { return 0; }
  /// After Backend::trim, without the mutex: hands what the layer underneath holds unused back to
  /// the system (the CUDA pool's memory, once the stream's work is done). Nothing on the CPU.
  virtual void return_unused_memory() {}
  /// Copies host bytes into the backend's memory.
  [[nodiscard]] virtual Result<void> copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
  /// Copies bytes of the backend's memory to the host.
  [[nodiscard]] virtual Result<void> copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  /// Whether `data` is memory this backend's kernels can read and write (wrap, import_dlpack).
  [[nodiscard]] virtual Result<void> check_caller_memory(const void* data) const = 0;

 protected:
  Engine() = default;
};

/// The kept memory limit a backend starts with: TAPEWISE_KEPT_MEMORY_LIMIT when set (bytes, or a
/// whole number with a K, M or G suffix for KiB, MiB, GiB), else `default_bytes`. InvalidArgument
/// naming the variable for anything else.
[[nodiscard]] Result<std::size_t> kept_memory_limit_from_environment(std::size_t default_bytes);

/// The engine behind a backend.
inline Engine& engine_of(Backend& backend) { return static_cast<Engine&>(backend); }
/// The engine behind a backend, read-only.
inline const Engine& engine_of(const Backend& backend) { return static_cast<const Engine&>(backend); }

}  // namespace detail

/// The VJP of one node as the spec stages it (spec/ops.def, `staged`): one prim per stage, workspace
/// buffers released before return. The independent second path beside Backend::vjp_fused (a tape runs
/// it with VjpPath::staged).
[[nodiscard]] Result<void> staged_vjp(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                                      const Buffer& g, std::span<Buffer* const> grads);

/// The forward of one node as spec/conventions.md stages it (softplus's seven stages, gelu's, ...): one
/// prim per stage, workspace released before return; sqrt and relu (selects) are their one native
/// kernel. What the prover (`tapewise-conform prove`) holds the forward kernel equal to.
[[nodiscard]] Result<void> staged_forward(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                                          Buffer& out);

}  // namespace tapewise

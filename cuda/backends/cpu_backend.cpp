// cuda/backends/cpu_backend.cpp — the CPU backend: the production per-element code (op_math.cuh) compiled
// for the host and run in a plain loop, so machines without a GPU (CI) still run the production
// math. Host memory via operator new; the same tagging and counting as the CUDA backend.
#include <cstring>
#include <new>

#include <tapewise/backend.hpp>

#include "backends/engine.hpp"
#include "backends/kept_memory.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/interpreter.hpp"

namespace tapewise {
namespace {

struct HostLoop {
  template <class Fn, class T>
  [[nodiscard]] Result<void> run(const Fn& fn, std::int64_t n, const T* const* in, T* const* out, const char*) {
    T x[Fn::nin > 0 ? Fn::nin : 1];
    T y[Fn::nout];
    for (std::int64_t i = 0; i < n; ++i) {
      for (int k = 0; k < Fn::nin; ++k) x[k] = in[k][i];
      fn(x, y);
      for (int k = 0; k < Fn::nout; ++k) out[k][i] = y[k];
    }
    return {};
  }
};

class CpuBackend final : public detail::Engine {
 public:
  CpuBackend() = default;
  ~CpuBackend() override { memory_.release_all(host_release); }

  BackendKind kind() const override { return BackendKind::cpu; }
  std::string describe() const override { return "CPU (host loop over the production per-element code)"; }

  [[nodiscard]] Result<void> forward(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                       Buffer& out) override {
    HostLoop loop;
    return detail::run_forward(loop, op, s, inputs, out);
  }
  [[nodiscard]] Result<void> vjp_fused(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                         const Buffer& g, std::span<Buffer* const> grads) override {
    HostLoop loop;
    return detail::run_vjp(loop, op, s, inputs, g, grads);
  }
  [[nodiscard]] Result<void> prim(Prim p, double c, std::span<const Buffer* const> inputs, Buffer& out) override {
    HostLoop loop;
    return detail::run_prim(loop, p, c, inputs, out);
  }
  // Each element runs every step in order through the interpreter the CUDA kernel runs, in the
  // same pieces (interpreter.hpp: run_steps_at; program.hpp: piece_at), so CI checks that code on the host: four
  // neighbouring elements at a time, as the CUDA runner's lanes of a large piece (a piece's last
  // elements then leave lanes that a step does not cover, as there).
  [[nodiscard]] Result<void> run_sealed_program(const detail::Program& program) override {
    constexpr int kLanes = 4;
    for (std::size_t first = 0; first < program.steps.size();) {
      const detail::Piece piece = detail::piece_at(program, first, detail::kStepsPerLaunch);
      first += static_cast<std::size_t>(piece.count);
      for (std::int64_t i = 0; i < piece.numel; i += kLanes) {
        const bool every_step_runs = i + kLanes <= piece.covered;
        auto at = [&]<class T>() -> Result<void> {
          if (every_step_runs)
            detail::run_steps_at<T, std::int64_t, kLanes, true>(piece.steps, piece.count, i, 1);
          else
            detail::run_steps_at<T, std::int64_t, kLanes>(piece.steps, piece.count, i, 1);
          return {};
        };
        TAPEWISE_CHECK(detail::with_dtype(piece.dtype, at));
      }
    }
    return {};
  }
  [[nodiscard]] Result<void> synchronize() override { return {}; }
  int dlpack_device_type() const override { return 1; }  // kDLCPU
  int device_id() const override { return 0; }

 protected:
  // Small buffers come from slabs (kept_memory.hpp), as on the CUDA backend; large ones straight from
  // the host.
  [[nodiscard]] Result<void*> raw_allocate(std::size_t bytes) override {
    return memory_.allocate(bytes, host_allocate, host_release);
  }
  void raw_release(void* p) override { memory_.release(p, host_release); }
  [[nodiscard]] Result<void> copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return {};
  }
  [[nodiscard]] Result<void> copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return {};
  }
  // Host memory cannot be told from other memory here: the caller's word is taken (wrap's contract).
  [[nodiscard]] Result<void> check_caller_memory(const void*) const override { return {}; }

 private:
  [[nodiscard]] static Result<void*> host_allocate(std::size_t bytes) {
    void* p = ::operator new(bytes, std::align_val_t{detail::SlabAllocator::kAlign}, std::nothrow);
    if (!p) return fail(ErrorCode::OutOfMemory, "host allocation of " + std::to_string(bytes) + " bytes failed");
    return p;
  }
  static void host_release(void* p) { ::operator delete(p, std::align_val_t{detail::SlabAllocator::kAlign}); }

  detail::KeptMemory memory_{/*host_memory=*/true, /*keep_large_blocks=*/false};
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend() { return std::make_shared<CpuBackend>(); }

}  // namespace tapewise

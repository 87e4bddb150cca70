// cuda/backends/cuda_kernels.cu — the CUDA backend's per-node launches in this translation unit's math
// mode (kernels/math_mode.hpp): one kernel per node and direction, with 16-byte vector loads and
// stores in each kernel's tuned launch shape (kernels/map_kernels.cuh). Compiled once as it is (aten)
// and once by cuda_kernels_exact.cu (exact).
#include <algorithm>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "backends/cuda_check.hpp"
#include "backends/cuda_kernels.hpp"
#include "backends/program_launch.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/map_kernels.cuh"

namespace tapewise::detail {
inline namespace TW_MATH_NS {
namespace {

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

Result<void> forward(cudaStream_t stream, MapShape shape, Op op, const Scalars& s,
                     std::span<const Buffer* const> inputs, Buffer& out) {
  KernelLaunch launch{stream, shape};
  return run_forward(launch, op, s, inputs, out);
}
Result<void> vjp(cudaStream_t stream, MapShape shape, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                 const Buffer& g, std::span<Buffer* const> grads) {
  KernelLaunch launch{stream, shape};
  return run_vjp(launch, op, s, inputs, g, grads);
}
Result<void> prim(cudaStream_t stream, MapShape shape, Prim p, double c, std::span<const Buffer* const> inputs,
                  Buffer& out) {
  KernelLaunch launch{stream, shape};
  return run_prim(launch, p, c, inputs, out);
}

constexpr CudaKernels kKernels{forward, vjp, prim, launch_program};

}  // namespace
}  // inline namespace TW_MATH_NS

#if defined(TAPEWISE_MATH_EXACT)
const CudaKernels& cuda_kernels_exact() { return kKernels; }
#else
const CudaKernels& cuda_kernels_aten() { return kKernels; }
#endif

}  // namespace tapewise::detail

// tools/bench/tuned_kernel.cuh — the map kernel and launch that kernel_tuning.patch proposes for
// cuda/cuda_backend.cu, compiled here so `tapewise-bench --kernel tuned` can time it beside the
// production kernel in the same run. Same per-element functors (cuda/dispatch.hpp), same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include <tapewise/backend.hpp>

namespace tapewise::bench::tuned {

template <class T, int N>
struct Pointers {
  T* p[N > 0 ? N : 1];
};

template <class T, int V>
struct alignas(16) Vec {
  T v[V];
};

constexpr int kThreads = 256;
// 16-byte vectors per operand that each thread loads before computing any of them: kUnroll * nin
// independent loads in flight per thread, whatever the occupancy the op's registers allow.
constexpr int kUnroll = 4;
constexpr std::int64_t kTile = std::int64_t{kThreads} * kUnroll;  // vectors per block and step
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 30;        // grid-stride beyond this

// Block b covers vectors [b * kTile, (b + 1) * kTile): thread t takes vectors b*kTile + t + u*kThreads
// (u < kUnroll), coalesced per u. All loads of a step precede its first store, so in-place calls
// (a prim whose output is its input) stay correct: each element is read, then written, by one thread.
// __launch_bounds__(kThreads, 1): without the 1, ptxas caps some instantiations at 32 registers and
// spills (clamp forward float32: 44 bytes, abs/neg float64: 4); with it, no instantiation spills.
template <class Fn, class T>
__global__ void __launch_bounds__(kThreads, 1)
    map_kernel(Fn fn, std::int64_t n, Pointers<const T, Fn::nin> in, Pointers<T, Fn::nout> out,
               bool vectorized) {
  constexpr int V = 16 / sizeof(T);
  using VecT = Vec<T, V>;
  const std::int64_t nvec = vectorized ? n / V : 0;
  for (std::int64_t first = std::int64_t{blockIdx.x} * kTile + threadIdx.x; first < nvec;
       first += std::int64_t{gridDim.x} * kTile) {
    VecT xs[kUnroll][Fn::nin];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t i = first + u * kThreads;
      if (i < nvec) {
#pragma unroll
        for (int k = 0; k < Fn::nin; ++k) xs[u][k] = reinterpret_cast<const VecT*>(in.p[k])[i];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t i = first + u * kThreads;
      if (i < nvec) {
        VecT ys[Fn::nout];
#pragma unroll
        for (int j = 0; j < V; ++j) {
          T x[Fn::nin];
          T y[Fn::nout];
#pragma unroll
          for (int k = 0; k < Fn::nin; ++k) x[k] = xs[u][k].v[j];
          fn(x, y);
#pragma unroll
          for (int k = 0; k < Fn::nout; ++k) ys[k].v[j] = y[k];
        }
#pragma unroll
        for (int k = 0; k < Fn::nout; ++k) reinterpret_cast<VecT*>(out.p[k])[i] = ys[k];
      }
    }
  }
  // Scalar elements: the last n % V when vectorized, all of them when an operand is misaligned.
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = nvec * V + std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    T x[Fn::nin];
    T y[Fn::nout];
#pragma unroll
    for (int k = 0; k < Fn::nin; ++k) x[k] = in.p[k][i];
    fn(x, y);
#pragma unroll
    for (int k = 0; k < Fn::nout; ++k) out.p[k][i] = y[k];
  }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A dispatch.hpp runner. The grid covers the tensor once (one step per block), so no block count
// depends on how many blocks of this kernel an SM can hold; the error text is built only on failure.
struct KernelLaunch {
  cudaStream_t stream;

  template <class Fn, class T>
  Result<void> run(const Fn& fn, std::int64_t n, const T* const* in, T* const* out, const char* what) {
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
    constexpr int V = 16 / sizeof(T);
    const std::int64_t nvec = vectorized ? n / V : 0;
    const std::int64_t scalars = n - nvec * V;
    const std::int64_t blocks =
        std::clamp<std::int64_t>(std::max(ceil_div(nvec, kTile), ceil_div(scalars, kThreads)), 1, kMaxBlocks);
    map_kernel<Fn, T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(fn, n, ins, outs, vectorized);
    const cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess) return {};
    return fail(ErrorCode::CudaFailure, std::string(what) + " kernel launch: " + cudaGetErrorName(err) + " (" +
                                            cudaGetErrorString(err) + ")");
  }
};

}  // namespace tapewise::bench::tuned

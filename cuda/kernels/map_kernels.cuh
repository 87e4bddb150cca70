// cuda/kernels/map_kernels.cuh — the per-node "map" kernels (each forward, fused VJP and prim, elementwise
// over 16-byte vectors) and the launch shape each is given; cuda/backends/cuda_backend.cu launches them.
#pragma once

#include <cstdint>
#include <type_traits>

#include "dispatch.hpp"
#if defined(TAPEWISE_MATH_EXACT)
#include "speculative.cuh"
#endif

namespace tapewise::detail {

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
// Exact mode's float32 kernels built on exact functions (two passes, map_vector below): their fast paths
// are long in double precision, so a thread's loads are few against its work; more vectors a thread keep
// more bytes in flight. From the four shapes side by side at 2^26 on an H100 (2026-12-05): four vectors
// for the forwards of sin, cos, tanh and the nodes built on exp and tanh but softplus (sin 72% of the copy
// with one, 92% with four), two for softplus and safeLog and for every fused VJP. On the H200
// (2026-12-06) exp's forward ran 89-90% of the copy with two and 93-95% with four: there these kernels
// are bound by instruction issue, and four vectors share a thread's indexing among more elements. log's
// forward takes four for that reason (about 11 instructions an element besides its first pass with two,
// 8 with four; on the H100, which copies at a rate it meets either way, 99.0% of the copy with two and
// 98.1% with four).
constexpr MapShape exact_forward_shape(Op op) {
  switch (op) {
    case Op::exp: case Op::log: case Op::sin: case Op::cos: case Op::tanh: case Op::sigmoid: case Op::silu:
    case Op::gelu:
      return MapShape::t256v4;
    default: return MapShape::t128v2;
  }
}
constexpr MapShape exact_vjp_shape(Op) { return MapShape::t128v2; }

inline namespace TW_MATH_NS {  // the math mode's own symbols (scalar_math.cuh)

template <class Fn>
struct TunedShape {  // prims: copies, fills and single ops of the staged VJPs, memory-bound
  static constexpr MapShape value = MapShape::t128v1;
};
// A float32 or float64 kernel's shape in this translation unit's math mode.
template <class T>
constexpr MapShape tuned_forward_shape(Op op) {
#if defined(TAPEWISE_MATH_EXACT)
  if (std::is_same_v<T, float> && speculative::forward_speculates(op)) return exact_forward_shape(op);
#endif
  return forward_shape(op, sizeof(T) == 8);
}
template <class T>
constexpr MapShape tuned_vjp_shape(Op op) {
#if defined(TAPEWISE_MATH_EXACT)
  if (std::is_same_v<T, float> && speculative::vjp_speculates(op)) return exact_vjp_shape(op);
#endif
  return vjp_shape(op, sizeof(T) == 8);
}
template <Op op, class T>
struct TunedShape<detail::ForwardFn<op, T>> {
  static constexpr MapShape value = tuned_forward_shape<T>(op);
};
template <Op op, class T>
struct TunedShape<detail::VjpFn<op, T>> {
  static constexpr MapShape value = tuned_vjp_shape<T>(op);
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

// Element e of a vector through fn.
template <class Fn, class T, int V, int kIn>
__device__ __forceinline__ void map_vector_element(const Fn& fn, const Vec<T, V> (&xs)[kIn], Vec<T, V> (&ys)[Fn::nout],
                                                   int e) {
  T x[kIn];
  T y[Fn::nout];
#pragma unroll
  for (int k = 0; k < Fn::nin; ++k) x[k] = xs[k].v[e];
  fn(x, y);
#pragma unroll
  for (int k = 0; k < Fn::nout; ++k) ys[k].v[e] = y[k];
}

#if defined(TAPEWISE_MATH_EXACT)
// Exact mode's float32 functors built on exact functions: a vector's elements in two passes
// (speculative.cuh): every element through the branch-free fast paths, then the elements flagged there
// (rare: near a rounding boundary, or a special input) through fn itself, with the same bits. One element
// after another, each exact function's branch to its slow path kept a vector's elements apart; in one
// pass their fast paths interleave, and their constants are loaded once a vector.
template <class Fn, int V, int kIn>
__device__ __forceinline__ void map_vector_two_passes(const Fn& fn, const Vec<float, V> (&xs)[kIn],
                                                      Vec<float, V> (&ys)[Fn::nout]) {
  using speculative::Speculative;
  const auto twin = speculative::Speculating<Fn>::twin(fn);
  bool flagged[V];
  bool any = false;
#pragma unroll
  for (int e = 0; e < V; ++e) {
    Speculative x[kIn];
    Speculative y[Fn::nout];
#pragma unroll
    for (int k = 0; k < Fn::nin; ++k) x[k] = Speculative(xs[k].v[e]);
    twin(x, y);
    flagged[e] = false;
#pragma unroll
    for (int k = 0; k < Fn::nout; ++k) {
      ys[k].v[e] = y[k].v;
      flagged[e] |= y[k].uncertain;
    }
    any |= flagged[e];
  }
  if (!any) return;
#pragma unroll
  for (int e = 0; e < V; ++e) {
    if (flagged[e]) map_vector_element(fn, xs, ys, e);
  }
}
#endif

// One vector's V elements through fn.
template <class Fn, class T, int V, int kIn>
__device__ __forceinline__ void map_vector(const Fn& fn, const Vec<T, V> (&xs)[kIn], Vec<T, V> (&ys)[Fn::nout]) {
#if defined(TAPEWISE_MATH_EXACT)
  if constexpr (std::is_same_v<T, float> && speculative::Speculating<Fn>::value) {
    map_vector_two_passes<Fn, V, kIn>(fn, xs, ys);
  } else
#endif
  {
#pragma unroll
    for (int e = 0; e < V; ++e) map_vector_element(fn, xs, ys, e);
  }
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
        map_vector<Fn, T, V, kIn>(fn, xs[u], ys);
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

}  // inline namespace TW_MATH_NS

}  // namespace tapewise::detail

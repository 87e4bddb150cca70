// pack16.cu — how a 16-bit one-op kernel's final rounding compiles, and what it costs: the same
// grid (128 threads, one 16-byte vector of 8 elements each) with four conversions, timed at 2^26.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <tapewise/float16.hpp>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
using tapewise::bfloat16; using tapewise::float16;

template <class T> struct alignas(16) Vec { T v[8]; };
__device__ __forceinline__ float fn(float x) { return sinf(x); }

// 1. ours: tapewise's conversion (cvt.rn.bf16x2.f32 with +0 high / cvt.rn.f16.f32), element by element
template <class T> __global__ void __launch_bounds__(128) ours(const T* in, T* out) {
  const auto j = std::int64_t{blockIdx.x} * 128 + threadIdx.x;
  Vec<T> x = reinterpret_cast<const Vec<T>*>(in)[j], y;
#pragma unroll
  for (int e = 0; e < 8; ++e) y.v[e] = T(fn(static_cast<float>(x.v[e])));
  reinterpret_cast<Vec<T>*>(out)[j] = y;
}
// 2. cuda_fp16/bf16's single conversion (__float2bfloat16 / __float2half), as c10 does
template <class T> __global__ void __launch_bounds__(128) single(const T* in, T* out) {
  const auto j = std::int64_t{blockIdx.x} * 128 + threadIdx.x;
  Vec<T> x = reinterpret_cast<const Vec<T>*>(in)[j], y;
#pragma unroll
  for (int e = 0; e < 8; ++e) y.v[e] = T(fn(static_cast<float>(x.v[e])));
  reinterpret_cast<Vec<T>*>(out)[j] = y;
}
// 3. pairs: two floats rounded and packed by one cvt.rn.{bf16,f16}x2.f32
template <class T> __global__ void __launch_bounds__(128) pairs(const std::uint32_t* in, std::uint32_t* out) {
  const auto j = std::int64_t{blockIdx.x} * 128 + threadIdx.x;
  uint4 x = reinterpret_cast<const uint4*>(in)[j], y;
  std::uint32_t* xs = &x.x; std::uint32_t* ys = &y.x;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const float lo = fn(static_cast<float>(T::from_bits(static_cast<std::uint16_t>(xs[w]))));
    const float hi = fn(static_cast<float>(T::from_bits(static_cast<std::uint16_t>(xs[w] >> 16))));
    if constexpr (sizeof(T) == 2 && std::is_same_v<T, bfloat16>)
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(ys[w]) : "f"(hi), "f"(lo));
    else
      asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(ys[w]) : "f"(hi), "f"(lo));
  }
  reinterpret_cast<uint4*>(out)[j] = y;
}
template <class T> __global__ void __launch_bounds__(128) copy(const T* in, T* out) {
  const auto j = std::int64_t{blockIdx.x} * 128 + threadIdx.x;
  reinterpret_cast<Vec<T>*>(out)[j] = reinterpret_cast<const Vec<T>*>(in)[j];
}

// c10-like element types for variant 2
struct Bf { std::uint16_t bits; Bf() = default;
  __device__ explicit Bf(float f) : bits(__bfloat16_as_ushort(__float2bfloat16(f))) {}
  __device__ explicit operator float() const { return __bfloat162float(__ushort_as_bfloat16(bits)); } };
struct Hf { std::uint16_t bits; Hf() = default;
  __device__ explicit Hf(float f) : bits(__half_as_ushort(__float2half(f))) {}
  __device__ explicit operator float() const { return __half2float(__ushort_as_half(bits)); } };

template <class K> float time_it(K launch) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  std::vector<float> ms;
  for (int r = 0; r < 25; ++r) {
    cudaEventRecord(a); launch(); cudaEventRecord(b); cudaEventSynchronize(b);
    float t; cudaEventElapsedTime(&t, a, b); if (r >= 5) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end()); return ms[ms.size() / 2] * 1000.f;
}
__global__ void fill(std::uint16_t* p, std::int64_t n, bool bf) {
  for (auto i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u; h ^= h >> 15;
    const float u = (h & 0xffffff) / 16777216.0f * 8.0f - 4.0f;  // [-4, 4)
    p[i] = bf ? tapewise::detail::bfloat16_bits_arithmetic(u) : tapewise::detail::float16_bits_arithmetic(u);
  }
}
int main() {
  const std::int64_t n = std::int64_t{1} << 26; const int blocks = static_cast<int>(n / 1024);
  std::uint16_t *in, *o1, *o2, *o3; cudaMalloc(&in, n * 2); cudaMalloc(&o1, n * 2); cudaMalloc(&o2, n * 2); cudaMalloc(&o3, n * 2);
  for (int bf = 1; bf >= 0; --bf) {
    fill<<<1024, 256>>>(in, n, bf);
    float t1, t2, t3, tc;
    if (bf) {
      t1 = time_it([&] { ours<bfloat16><<<blocks, 128>>>((const bfloat16*)in, (bfloat16*)o1); });
      t2 = time_it([&] { single<Bf><<<blocks, 128>>>((const Bf*)in, (Bf*)o2); });
      t3 = time_it([&] { pairs<bfloat16><<<blocks, 128>>>((const std::uint32_t*)in, (std::uint32_t*)o3); });
    } else {
      t1 = time_it([&] { ours<float16><<<blocks, 128>>>((const float16*)in, (float16*)o1); });
      t2 = time_it([&] { single<Hf><<<blocks, 128>>>((const Hf*)in, (Hf*)o2); });
      t3 = time_it([&] { pairs<float16><<<blocks, 128>>>((const std::uint32_t*)in, (std::uint32_t*)o3); });
    }
    tc = time_it([&] { copy<std::uint16_t><<<blocks, 128>>>(in, o1); });
    if (bf) ours<bfloat16><<<blocks, 128>>>((const bfloat16*)in, (bfloat16*)o1); else ours<float16><<<blocks, 128>>>((const float16*)in, (float16*)o1);
    std::vector<std::uint16_t> h1(n), h2(n), h3(n);
    cudaMemcpy(h1.data(), o1, n * 2, cudaMemcpyDeviceToHost); cudaMemcpy(h2.data(), o2, n * 2, cudaMemcpyDeviceToHost); cudaMemcpy(h3.data(), o3, n * 2, cudaMemcpyDeviceToHost);
    std::int64_t d12 = 0, d13 = 0; for (std::int64_t i = 0; i < n; ++i) { d12 += h1[i] != h2[i]; d13 += h1[i] != h3[i]; }
    std::printf("%s sin 2^26: ours %.1f us, single %.1f, pairs %.1f, copy %.1f; differing bits: single %lld, pairs %lld\n",
                bf ? "bfloat16" : "float16", t1, t2, t3, tc, (long long)d12, (long long)d13);
  }
  return 0;
}

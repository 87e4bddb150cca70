// cuda/kernels/exact/bits.cuh — what tapewise's own math (exact mode) is written in: the bits of a
// float and a double, and fused multiply-add spelled out. The same source compiles for the GPU (nvcc,
// NVRTC) and the host (g++): only IEEE operations, each rounded once, so both give the same bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include <tapewise/float16.hpp>

#if defined(__CUDACC__)
#define TW_EXACT_HD __host__ __device__ __forceinline__
// The rare slow paths: kept out of line on the GPU so that the fast paths keep few registers; inline
// (one definition) because every kernel translation unit includes them.
#define TW_EXACT_HD_NOINLINE __host__ __device__ __noinline__ inline
#else
#define TW_EXACT_HD inline
#define TW_EXACT_HD_NOINLINE inline
#endif

namespace tapewise::exact {

// float's bits: tapewise/float16.hpp's conversions (the GPU's reinterpretation, the host's memcpy).
TW_EXACT_HD std::uint32_t bits_of(float f) { return tapewise::detail::float_bits(f); }
TW_EXACT_HD float float_of(std::uint32_t u) { return tapewise::detail::bits_float(u); }
TW_EXACT_HD std::uint64_t bits_of(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(d));
#else
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}
TW_EXACT_HD double double_of(std::uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
#endif
}

// a * b + c, one rounding: the GPU's DFMA; the host's fma (glibc picks the FMA instruction where the
// processor has one). Written out wherever the algorithm wants one: the build never contracts
// (-fmad=false, -ffp-contract=off), so every other a * b + c is two roundings on both.
TW_EXACT_HD double fma(double a, double b, double c) { return ::fma(a, b, c); }

}  // namespace tapewise::exact

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

// RN(1 / f) for a normal float f whose reciprocal is normal (|f| in [2^-126, 2^126]): IEEE division on the
// host. On the GPU, 1.0f / f (-prec-div=true) is rcp.rn.f32: ptxas emits MUFU.RCP and one Newton step in
// float (the correctly rounded result), behind a test of f's exponent that branches to a slow path for the
// extremes. Written out here without that test: where f is in range the same three instructions, so the
// same bits, and no branch between the elements a thread interleaves.
TW_EXACT_HD float reciprocal_in_range(float f) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(f));
  return __fmaf_rn(r, -__fmaf_rn(f, r, -1.0f), r);
#else
  return 1.0f / f;
#endif
}

}  // namespace tapewise::exact

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

// A table of constants: device memory on the GPU (its reads go through the L1 as LDG.CONSTANT), constexpr
// on the host.
#if defined(__CUDA_ARCH__)
#define TW_EXACT_TABLE static __device__ const
#else
#define TW_EXACT_TABLE inline constexpr
#endif

// A constant a fast path multiplies or adds: on the GPU in the constant bank, loaded by one LDC where a literal
// double takes two instructions to build, again wherever registers run short (not const, or nvcc folds it back
// into a literal); constexpr on the host.
#if defined(__CUDA_ARCH__)
#define TW_EXACT_CONSTANT static __constant__
#else
#define TW_EXACT_CONSTANT inline constexpr
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

// A positive normal float's value as a double, from the float's bits: the exponent rebiased by 1023 - 127, the
// significand's 23 bits moved to the top of the double's 52. Exact, and no conversion instruction.
TW_EXACT_HD double double_of_positive_normal_float(std::uint32_t bits) {
  const std::uint64_t high = (bits >> 3) + 0x38000000u;
  return double_of((high << 32) | static_cast<std::uint64_t>(bits << 29));
}

// a * b + c, one rounding: the GPU's DFMA; the host's fma (glibc picks the FMA instruction where the
// processor has one). Written out wherever the algorithm wants one: the build never contracts
// (-fmad=false, -ffp-contract=off), so every other a * b + c is two roundings on both.
TW_EXACT_HD double fma(double a, double b, double c) { return ::fma(a, b, c); }

// table[index] of a TW_EXACT_TABLE. On the GPU the address is one 32-bit index times the entry's size plus the
// table's base (mad.wide.u32, two instructions), computed once per entry read: left to itself, nvcc folds the
// scaling into the index's own shift and mask, once per table read, and adds the base in two more. Read
// through the read-only path (ld.global.nc), as the table's own reads are.
template <class T>
TW_EXACT_HD T table_read(const T* table, std::uint32_t index) {
#if defined(__CUDA_ARCH__)
  const T* entry;
  asm("mad.wide.u32 %0, %1, %2, %3;" : "=l"(entry) : "r"(index), "n"(static_cast<int>(sizeof(T))), "l"(table));
  return __ldg(entry);
#else
  return table[index];
#endif
}

// A first approximation r0 of 1 / d, for d in [2, 2^29]: |1 - d r0| < 2^-18 (what a Newton step needs to
// start from; the float result it serves is correctly rounded whatever r0's bits). The host: the float
// reciprocal RN32(1 / RN32(d)), within 2^-22.9. The GPU: rcp.approx.ftz.f64 (one MUFU.RCP64H, no float
// conversions), which reads the top 20 bits of d's significand and returns 20 bits of the reciprocal; PTX
// states no bound, so the CUDA test ExactMath.ReciprocalSeedIsWithinBound checks every such significand at
// every exponent of the range, with d's low bits all zero and all one.
TW_EXACT_HD double reciprocal_seed(double d) {
#if defined(__CUDA_ARCH__)
  double r;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(d));
  return r;
#else
  return static_cast<double>(1.0f / static_cast<float>(d));
#endif
}

}  // namespace tapewise::exact

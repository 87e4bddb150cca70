/// tapewise/float16.hpp — the 16-bit element types: bfloat16 (8 significand bits, float32's exponent
/// range) and float16 (IEEE binary16). Each holds its bits; conversions round to nearest even and
/// compile for the host (bit arithmetic) and, under nvcc, for the GPU (one cvt instruction each).
/// Arithmetic on them lives with the kernels: the public API only stores, converts and compares.
/// \file
#pragma once

#if !defined(__CUDACC_RTC__)  // NVRTC (compiled pieces) is always C++20
#include "requires_cpp20.hpp"
#endif

#include <cstdint>
#include <cstring>

/// Marks the conversions host-and-device functions under nvcc, plain inline functions elsewhere.
#if defined(__CUDACC__)
#define TAPEWISE_HD __host__ __device__ __forceinline__
#else
#define TAPEWISE_HD inline
#endif

namespace tapewise {

namespace detail {
TAPEWISE_HD std::uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
TAPEWISE_HD float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// float -> bfloat16 bits in integer arithmetic, round to nearest even; a NaN stays a (quiet) NaN,
// overflow gives ±inf. The host's conversion, and the device's for constants (see bfloat16(double)).
TAPEWISE_HD std::uint16_t bfloat16_bits_arithmetic(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

// float -> bfloat16 bits, round to nearest even; a NaN stays a (quiet) NaN, overflow gives ±inf.
TAPEWISE_HD std::uint16_t bfloat16_bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // The GPU's own conversion (sm_80 on): the same rounding in one instruction instead of about six;
  // a NaN becomes the canonical NaN, which the "up to NaN" comparisons allow. The packing form (f
  // into the low half, +0 into the high) compiles to F2FP on sm_90; the single form's F2F issues on
  // the quarter-rate pipe, which bounded staged bfloat16 nodes (nine conversions per gelu element).
  std::uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(0.0f), "f"(f));
  return static_cast<std::uint16_t>(packed);
#else
  return bfloat16_bits_arithmetic(f);
#endif
}
TAPEWISE_HD float bfloat16_value(std::uint16_t b) { return bits_float(std::uint32_t{b} << 16); }

// float -> IEEE binary16 bits in integer arithmetic, round to nearest even (subnormals included);
// NaN stays a quiet NaN. The host's conversion, and the device's for constants (see float16(double)).
TAPEWISE_HD std::uint16_t float16_bits_arithmetic(float f) {
  const std::uint32_t u = float_bits(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: rounds to inf
  if (a >= 0x38800000u) {                                                   // normal: >= 2^-14
    const std::uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u;
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  // Below 2^-14: the sum rounds |f| (a normal float or zero) to a multiple of 2^-24 in one IEEE add
  // (0.5 has ulp 2^-24 in float32), and its low bits are then the subnormal's significand.
  const float shifted = bits_float(a) + 0.5f;
  return static_cast<std::uint16_t>(sign | (float_bits(shifted) - 0x3f000000u));
}

// float -> IEEE binary16 bits, round to nearest even (subnormals included); NaN stays a quiet NaN.
TAPEWISE_HD std::uint16_t float16_bits(float f) {
#if defined(__CUDA_ARCH__)
  // One instruction on the GPU, subnormals included (no .ftz); a NaN becomes the canonical NaN.
  std::uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  return float16_bits_arithmetic(f);
#endif
}
// IEEE binary16 bits -> float, exactly, in integer arithmetic: the host's conversion, and the
// device's for constants (see float16::operator double).
TAPEWISE_HD float float16_value_arithmetic(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu, significand = h & 0x3ffu;
  if (exponent == 0x1fu) return bits_float(sign | 0x7f800000u | (significand << 13));
  if (exponent != 0) return bits_float(sign | ((exponent + 112u) << 23) | (significand << 13));
  const float magnitude = static_cast<float>(significand) * 5.9604644775390625e-8f;  // * 2^-24, exact
  return sign ? -magnitude : magnitude;
}
TAPEWISE_HD float float16_value(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));  // exact
  return f;
#else
  return float16_value_arithmetic(h);
#endif
}
}  // namespace detail

/// bfloat16: the top 16 bits of a float32 (round to nearest even from float).
struct bfloat16 {
  std::uint16_t bits;  ///< sign, 8 exponent bits, 7 stored significand bits
  bfloat16() = default;
  /// f rounded to nearest even.
  TAPEWISE_HD explicit bfloat16(float f) : bits(detail::bfloat16_bits(f)) {}
  /// d rounded to float32, then to bfloat16 (as c10::BFloat16 converts a double). In integer
  /// arithmetic, the same rounding as the float conversion: the kernels' constants (T(0.5), gelu's)
  /// are doubles and ints, which the compiler folds this way, where the GPU's cvt instruction (inline
  /// assembly, opaque to it) would run for every element.
  TAPEWISE_HD explicit bfloat16(double d) : bits(detail::bfloat16_bits_arithmetic(static_cast<float>(d))) {}
  /// i converted exactly to float32 (|i| < 2^24), then rounded (in integer arithmetic, as a double).
  TAPEWISE_HD explicit bfloat16(int i) : bits(detail::bfloat16_bits_arithmetic(static_cast<float>(i))) {}
  /// The value, exactly.
  TAPEWISE_HD explicit operator float() const { return detail::bfloat16_value(bits); }
  /// The value as a double, exactly.
  TAPEWISE_HD explicit operator double() const { return static_cast<double>(detail::bfloat16_value(bits)); }
  /// The element with these bits.
  TAPEWISE_HD static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 v;
    v.bits = b;
    return v;
  }
};

/// float16: IEEE 754 binary16 (round to nearest even from float, subnormals kept).
struct float16 {
  std::uint16_t bits;  ///< sign, 5 exponent bits, 10 stored significand bits
  float16() = default;
  /// f rounded to nearest even.
  TAPEWISE_HD explicit float16(float f) : bits(detail::float16_bits(f)) {}
  /// d rounded to float32, then to float16 (as c10::Half converts a double). In integer
  /// arithmetic, the same rounding as the float conversion: the kernels' constants (T(0.5), gelu's)
  /// are doubles and ints, which the compiler folds this way, where the GPU's cvt instruction (inline
  /// assembly, opaque to it) would run for every element.
  TAPEWISE_HD explicit float16(double d) : bits(detail::float16_bits_arithmetic(static_cast<float>(d))) {}
  /// i converted exactly to float32 (|i| < 2^24), then rounded (in integer arithmetic, as a double).
  TAPEWISE_HD explicit float16(int i) : bits(detail::float16_bits_arithmetic(static_cast<float>(i))) {}
  /// The value, exactly.
  TAPEWISE_HD explicit operator float() const { return detail::float16_value(bits); }
  /// The value as a double, exactly (in integer arithmetic, for constants: see float16(double)).
  TAPEWISE_HD explicit operator double() const { return static_cast<double>(detail::float16_value_arithmetic(bits)); }
  /// The element with these bits.
  TAPEWISE_HD static float16 from_bits(std::uint16_t b) {
    float16 v;
    v.bits = b;
    return v;
  }
};

static_assert(sizeof(bfloat16) == 2 && sizeof(float16) == 2, "16-bit element types are their bits");

}  // namespace tapewise

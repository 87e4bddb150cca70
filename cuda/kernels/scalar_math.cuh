// cuda/kernels/scalar_math.cuh — the per-element primitives every kernel is built from, compiled for the
// GPU by nvcc and for the host by g++. Each is one IEEE operation (one rounding) or one call of
// the libm function ATen uses (expf/logf/sinf/cosf/tanhf on the GPU), or in exact mode tapewise's own
// (exact_math.cuh; the CPU backend's only mode). On the 16-bit formats each is ATen's: the float32
// operation on the widened operands, rounded once to 16 bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include <tapewise/float16.hpp>

#include "math_mode.hpp"
#if defined(TAPEWISE_MATH_EXACT)
#include "exact_math.cuh"
#endif

#if defined(__CUDACC__)
#define TW_HD __host__ __device__ __forceinline__
#else
#define TW_HD inline
#endif

namespace tapewise {

// The 16-bit formats' arithmetic, found by argument-dependent lookup wherever the kernels' generic
// code writes a + b: each operation is ATen's for Half and BFloat16 (opmath_type is float): widen
// exactly to float, one float32 operation, one rounding to the format.
template <class T>
inline constexpr bool kIs16Bit = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD T operator+(T a, T b) { return T(static_cast<float>(a) + static_cast<float>(b)); }
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD T operator-(T a, T b) { return T(static_cast<float>(a) - static_cast<float>(b)); }
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD T operator*(T a, T b) { return T(static_cast<float>(a) * static_cast<float>(b)); }
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD T operator/(T a, T b) { return T(static_cast<float>(a) / static_cast<float>(b)); }
// Negation flips the sign bit: exact, as -float(x) rounded back is.
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD T operator-(T a) { return T::from_bits(static_cast<std::uint16_t>(a.bits ^ 0x8000u)); }
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD bool operator<(T a, T b) { return static_cast<float>(a) < static_cast<float>(b); }
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD bool operator>(T a, T b) { return static_cast<float>(a) > static_cast<float>(b); }
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD bool operator<=(T a, T b) { return static_cast<float>(a) <= static_cast<float>(b); }
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD bool operator>=(T a, T b) { return static_cast<float>(a) >= static_cast<float>(b); }
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD bool operator==(T a, T b) { return static_cast<float>(a) == static_cast<float>(b); }
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD bool operator!=(T a, T b) { return static_cast<float>(a) != static_cast<float>(b); }

}  // namespace tapewise

namespace tapewise::math {

template <class T>
struct Pair {
  T a, b;
};

// The node's scalars, rounded once to the dtype by the launcher.
template <class T>
struct Params {
  T s0, s1;
};

TW_HD float lm_sqrt(float x) { return ::sqrtf(x); }
TW_HD double lm_sqrt(double x) { return ::sqrt(x); }
TW_HD float lm_fabs(float x) { return ::fabsf(x); }
TW_HD double lm_fabs(double x) { return ::fabs(x); }

// The 16-bit formats: float32's function of the widened value, rounded once (ATen's Half and
// BFloat16 kernels call the float overloads); |x| clears the sign bit.
#define TW_LM_16BIT(name)                                                                 \
  TW_HD bfloat16 name(bfloat16 x) { return bfloat16(name(static_cast<float>(x))); } \
  TW_HD float16 name(float16 x) { return float16(name(static_cast<float>(x))); }
TW_LM_16BIT(lm_sqrt)

inline namespace TW_MATH_NS {
#if defined(TAPEWISE_MATH_EXACT)
// Exact mode: tapewise's own functions (exact_math.cuh), the same bits on every backend.
TW_HD float lm_exp(float x) { return exact::exp(x); }
TW_HD double lm_exp(double x) { return exact::exp(x); }
TW_HD float lm_log(float x) { return exact::log(x); }
TW_HD double lm_log(double x) { return exact::log(x); }
TW_HD float lm_sin(float x) { return exact::sin(x); }
TW_HD double lm_sin(double x) { return exact::sin(x); }
TW_HD float lm_cos(float x) { return exact::cos(x); }
TW_HD double lm_cos(double x) { return exact::cos(x); }
TW_HD float lm_tanh(float x) { return exact::tanh(x); }
TW_HD double lm_tanh(double x) { return exact::tanh(x); }
#else
// ATen mode: libm, float and double overloads, the same entry points ATen's CUDA kernels call.
TW_HD float lm_exp(float x) { return ::expf(x); }
TW_HD double lm_exp(double x) { return ::exp(x); }
TW_HD float lm_log(float x) { return ::logf(x); }
TW_HD double lm_log(double x) { return ::log(x); }
TW_HD float lm_sin(float x) { return ::sinf(x); }
TW_HD double lm_sin(double x) { return ::sin(x); }
TW_HD float lm_cos(float x) { return ::cosf(x); }
TW_HD double lm_cos(double x) { return ::cos(x); }
TW_HD float lm_tanh(float x) { return ::tanhf(x); }
TW_HD double lm_tanh(double x) { return ::tanh(x); }
#endif
TW_LM_16BIT(lm_exp)
TW_LM_16BIT(lm_log)
TW_LM_16BIT(lm_sin)
TW_LM_16BIT(lm_cos)
TW_LM_16BIT(lm_tanh)
}  // inline namespace TW_MATH_NS
#undef TW_LM_16BIT
template <class T, std::enable_if_t<kIs16Bit<T>, int> = 0>
TW_HD T lm_fabs(T x) {
  return T::from_bits(static_cast<std::uint16_t>(x.bits & 0x7fffu));
}

// The sign bit, of every dtype (and of the prover's symbolic values, through std::signbit).
template <class T>
TW_HD bool sign_bit(T x) {
  if constexpr (kIs16Bit<T>) {
    return (x.bits & 0x8000u) != 0;
  } else {
    return std::signbit(x);
  }
}

template <class T>
TW_HD bool is_nan(T x) {
  return x != x;
}

// NaN-ignoring max/min (fmax/fmin). Equal operands (+0 vs -0) return the sign a GPU's max.f32 /
// min.f32 returns — +0 for max, -0 for min — written out so the host agrees with the device.
template <class T>
TW_HD T fmax_(T a, T b) {
#if defined(__CUDA_ARCH__)
  // A 16-bit pair: max.f32 of the widened values is that rule (its result is one of them, so
  // rounding back is exact), in one instruction instead of a chain of widened comparisons.
  if constexpr (kIs16Bit<T>) return T(::fmaxf(static_cast<float>(a), static_cast<float>(b)));
#endif
  if (is_nan(a)) return b;
  if (is_nan(b)) return a;
  if (a == b) return sign_bit(a) ? b : a;
  return a > b ? a : b;
}
template <class T>
TW_HD T fmin_(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (kIs16Bit<T>) return T(::fminf(static_cast<float>(a), static_cast<float>(b)));
#endif
  if (is_nan(a)) return b;
  if (is_nan(b)) return a;
  if (a == b) return sign_bit(a) ? a : b;
  return a < b ? a : b;
}

// ATen's sign: +1, -1, or 0 for ±0 and NaN.
template <class T>
TW_HD T sign(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
}

inline namespace TW_MATH_NS {

// ATen's at::sigmoid: 1 / (1 + exp(-x)), three roundings; saturates to exactly 0 once exp(-x)
// overflows (x < ~-88.7 in float32). One ATen op: on the 16-bit formats the three roundings are
// float32's and the result is rounded once to 16 bits.
template <class T>
TW_HD T sigmoid(T x) {
  if constexpr (kIs16Bit<T>) {
    return T(sigmoid(static_cast<float>(x)));
  } else {
    return T(1) / (T(1) + lm_exp(-x));
  }
}

// The split-exponential sigmoid (TorchLean's sigmoidSpec): x > 0: 1 / (1 + exp(-x)); else
// e / (1 + e) with e = exp(x) — never forms exp of a large positive. Written with one exp call on
// a selected argument and one division of a selected numerator, so a warp whose x straddle 0 does
// not run both branches (same roundings).
template <class T>
TW_HD T sigmoid_split(T x) {
  const bool positive = x > T(0);
  const T e = lm_exp(positive ? -x : x);
  const T d = T(1) + e;
  return (positive ? T(1) : e) / d;
}

// TorchLean's softplusBuf: max(x, 0) + log(1 + exp(-|x|)), log and not log1p, unit beta.
template <class T>
TW_HD T softplus(T x) {
  const T m = fmax_(x, T(0));
  const T na = lm_fabs(x) * T(-1);
  const T e = lm_exp(na);
  const T l = lm_log(T(1) + e);
  return m + l;
}

// gelu's constants, each rounded to the dtype as round_to does: c, k = sqrt(2/pi), and
// c3 = R(3 * R(c)). Functions, not constants: a 16-bit format's conversion is not constexpr.
template <class T>
struct GeluConstants {
  TW_HD static T c() { return static_cast<T>(0.044715); }
  TW_HD static T k() { return static_cast<T>(0.79788456080286535588); }
  TW_HD static T c3() { return static_cast<T>(3.0 * static_cast<double>(static_cast<T>(0.044715))); }
};

// t = tanh((x + ((x*c)*x)*x) * k), each parenthesis one rounding.
template <class T>
TW_HD T gelu_t(T x) {
  using K = GeluConstants<T>;
  const T x3c = ((x * K::c()) * x) * x;
  return lm_tanh((x + x3c) * K::k());
}

}  // inline namespace TW_MATH_NS

}  // namespace tapewise::math

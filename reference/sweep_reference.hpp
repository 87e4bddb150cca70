// reference/sweep_reference.hpp — the sweep's own reference, case generators and per-element
// grading, as inline functions that nvcc (device and host) and g++ both compile. The reference is a
// second transcription of each node's real-valued spec (spec/conventions.md): float64 for float32,
// bfloat16 and float16 outputs, double-double for float64 outputs. It includes neither
// cuda/ nor reference/: the MPFR reference validates it (proptest/sweep_test.cpp, `sweep` itself).
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <tapewise/op.hpp>

#if defined(__CUDACC__)
#define SWEEP_HD __host__ __device__ inline
#else
#define SWEEP_HD inline
#endif

namespace tapewise::conform::sweep {

// ---------------------------------------------------------------------------------------------------
// How accurate this reference is (the argument; the numbers below are what the tests check).
//
// float32 outputs, computed in float64. Inputs are float32 values, exact in double. Every formula is
// written so that no step cancels catastrophically (exp(-|x|) forms for the sigmoid and softplus
// tails, 1 - tanh^2 as 4t/(1+t)^2 with t = exp(-2|x|), s(x) s(-x) for s(1 - s)), so each result is
// a product/quotient/sum-of-same-sign terms of at most ~8 double roundings and library calls.
// CUDA's double exp, log, log1p, sin, cos, tanh are within 2 ulp of double (CUDA Math API, max ulp
// error; sin/cos with full range reduction), glibc's within 1: relative error <= ~16 * 2^-53 =
// 2^-49. A float32 ULP is at least 2^-24 of the value (and the float32 results of interest are
// >= 2^-150, normal in double), so the error is below 2^-25 float32 ULP; gelu's argument
// u = k (x + c x^3) carries ~4 roundings that exp amplifies by |2u| <= 108 (below that the result
// is under float32's range): 2^-44 relative, 2^-20 ULP. Hence kReferenceUlps = 2^-18.
// Where the *function* crosses zero at a non-representable point the relative argument fails and
// the error is absolute instead (~2^-50 of the terms' size, which is ~1): silu' (root x ~ -1.278),
// gelu' (x ~ -0.752), and safeLog's log(den) near den = 1 (x ~ 0.5413 for eps = 1e-6). Those outputs
// have an abs term in spec/bounds.def, so the verdict is unaffected; their ULP readings near the
// root are exact to kReferenceAbsEps * eps (2^-20 of a float32 eps) rather than to 2^-18 ULP.
// sin and cos have no such issue: the library's result is relative-accurate at float inputs
// however close to a multiple of pi (the reduction is exact), so their roots are covered.
//
// bfloat16 and float16 outputs: the same float64 transcription at the 16-bit inputs (exact in
// double), with the dtype's scalars and gelu constants R16(R32(c)) (spec/conventions.md §0.3), rounded
// to 16 bits by round_to_precision (RNE, exact). A 16-bit ULP is at least 2^-11 of the value (2^-8
// for bfloat16), so the same ~2^-44 relative error is below 2^-33 ULP, and the 16-bit results of
// interest (>= 2^-133) are normal in double: kReferenceUlps and kReferenceAbsEps hold a fortiori.
//
// float64 outputs, double-double. The nodes whose float64 spec is IEEE arithmetic (ieee_float64):
// neg, scale, abs, sqrt, clamp, relu, inv, add, sub, mul, max, min, div.
// Exact selects and copies are exact; a + b is a two-sum (exact); products are fma two-products of
// the inputs' significands (exact), quotients and square roots one Newton correction on them
// (relative ~2^-104), all with the exponents taken out by frexp and put back by ldexp at the end,
// so no intermediate under- or overflows. Error <= 2^-47 float64 ULP for a normal result. Below
// 2^-969 the low part cannot be scaled into a double (it would fall under 2^-1022 and round, and a
// subnormal hi rounds too, which double-rounded R(exact) and cost up to ~0.5 ulp): dd_scaled then
// re-rounds hi from the whole value (RNE, so hi = R(exact) holds everywhere) and keeps the
// remainder unscaled (DD::lo_exp), and grading compares |produced - exact| with the bound as an
// exact two-sum. The error there is the same ~2^-100 relative of the remainder (far below
// 2^-1074); kReferenceSubnormalAbs (2^-1074) stays as a floor in the validation, not a need.
// The nodes with libm stagings (exp, sin, cos, log, safeLog, sigmoid, tanh, silu, gelu, softplus):
// double-double elementary functions of ~2^-100 relative error (the argument is beside them, below
// the IEEE nodes' code), rounded once at the end the same way; float64 sin and cos only for
// |x| < 2^20 (kSinCosLimit), which the sweep's cases respect. Error <= 2^-45 float64 ULP, plus
// ~2^-104 absolute near the roots of silu', gelu' and log(den) (abs_root_output); so the same
// kReferenceUlps and kReferenceAbsEps hold for every float64 output.
// ---------------------------------------------------------------------------------------------------
inline constexpr double kReferenceUlps = 0x1p-18;          // of ulp_of(R(exact)) in the graded dtype
inline constexpr double kReferenceAbsEps = 0x1p-20;        // times eps * w, only where abs_root_output
inline constexpr double kReferenceSubnormalAbs = 0x1p-1074;  // absolute floor (see above)

// Outputs of a node: 0 = y, 1 = dx (unary) or da, 2 = db.
enum Output : int { kY = 0, kGradA = 1, kGradB = 2 };

// Whether this output's reference error is absolute near a root (see the argument above).
SWEEP_HD bool abs_root_output(Op op, int output) {
  return (op == Op::silu && output == kGradA) || (op == Op::gelu && output == kGradA) ||
         (op == Op::safeLog && output == kY);
}

// The nodes this file transcribes are those spec/ops.def marks `sweep_reference transcribed`: each
// has its case in the float32 switches (unary_* or binary_*) and in the float64 ones (forward_f64 and
// vjp_f64 where ieee_float64, else libm_*_f64). The switches answer NaN for any other node, which must
// never be graded: `sweep` refuses a node without a transcription by name (spec/bounds.def records it
// as TAPEWISE_NOT_SWEPT), and SweepReference.AnswersExactlyForTheTranscribedNodes checks that every
// switch answers for each node the table marks and for no other.
inline bool has_sweep_reference(Op op) { return op_info(op).sweep_reference == SweepReference::transcribed; }

// The float64 nodes whose exact values are IEEE arithmetic (forward_f64 / vjp_f64 below); the others
// have libm stagings (libm_forward_f64 / libm_vjp_f64).
SWEEP_HD bool ieee_float64(Op op) {
  switch (op) {
    case Op::neg: case Op::scale: case Op::abs: case Op::sqrt: case Op::clamp: case Op::relu:
    case Op::inv: case Op::add: case Op::sub: case Op::mul: case Op::max: case Op::min: case Op::div:
      return true;
    default: return false;
  }
}

// --- bits and classification (no <cmath> predicates: the same code on host and device) -----------
SWEEP_HD float float_from_bits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
SWEEP_HD uint32_t bits_of_float(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
SWEEP_HD double double_from_bits(uint64_t b) { double d; memcpy(&d, &b, 8); return d; }
SWEEP_HD double infinity() { return double_from_bits(0x7FF0000000000000ull); }
SWEEP_HD double quiet_nan() { return double_from_bits(0x7FF8000000000000ull); }
SWEEP_HD bool is_nan(double v) { return v != v; }
SWEEP_HD bool is_finite(double v) { return fabs(v) <= 0x1.fffffffffffffp+1023; }

// --- the dtypes' formats, and the 16-bit values as bits (the sweep's own code: it shares nothing
// with include/tapewise/float16.hpp, whose conversions it grades) ----------------------------------
struct Format {
  int precision, min_exponent, max_exponent;  // significand bits (with the implicit one), emin, emax
  double eps;
};
SWEEP_HD Format format_of(DType d) {
  switch (d) {
    case DType::float64: return {53, -1022, 1023, 0x1p-52};
    case DType::bfloat16: return {8, -126, 127, 0x1p-7};
    case DType::float16: return {11, -14, 15, 0x1p-10};
    default: return {24, -126, 127, 0x1p-23};
  }
}
// Spacing of the format at a value (libm-test convention: subnormal spacing at zero).
SWEEP_HD double ulp_of_value(double v, Format f) {
  if (is_nan(v)) return v;
  if (!is_finite(v)) return ldexp(1.0, f.max_exponent - f.precision + 1);
  int e = v == 0 ? f.min_exponent : ilogb(v);
  if (e < f.min_exponent) e = f.min_exponent;
  return ldexp(1.0, e - f.precision + 1);
}
// v rounded to nearest, ties to even, to a narrower format than double (subnormals kept, overflow to
// +-inf). v / spacing is an exact scaling, and rint rounds it to an integer with ties to even (the
// default rounding mode on the host, rint's on the device); a value that rounds up into the next
// binade lands on its power of two, and one that rounds to 2^(emax+1) is the overflow.
SWEEP_HD double round_to_precision(double v, Format f) {
  if (!is_finite(v) || v == 0) return v;
  const int spacing_log2 = ilogb(ulp_of_value(v, f));
  const double r = ldexp(rint(ldexp(v, -spacing_log2)), spacing_log2);
  return fabs(r) >= ldexp(1.0, f.max_exponent + 1) ? copysign(infinity(), v) : r;
}
// A 16-bit pattern's value, exactly.
SWEEP_HD double bits16_value(DType d, uint16_t bits) {
  if (d == DType::bfloat16) return float_from_bits(static_cast<uint32_t>(bits) << 16);
  const int exponent = (bits >> 10) & 31, mantissa = bits & 1023;
  const double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  if (exponent == 31) return mantissa ? quiet_nan() : sign * infinity();
  if (exponent == 0) return sign * ldexp(static_cast<double>(mantissa), -24);
  return sign * ldexp(static_cast<double>(1024 + mantissa), exponent - 25);
}
// The 16-bit pattern of a value the format holds (a value rounded by round_to_precision; NaN gives
// the quiet NaN 0x7fc0 or 0x7e00).
SWEEP_HD uint16_t bits16_of(DType d, double v) {
  if (d == DType::bfloat16) return static_cast<uint16_t>(bits_of_float(static_cast<float>(v)) >> 16);
  if (is_nan(v)) return 0x7E00u;
  const uint16_t sign = (v < 0 || (v == 0 && 1 / v < 0)) ? 0x8000u : 0u;
  const double m = fabs(v);
  if (m == 0) return sign;
  if (!is_finite(m)) return sign | 0x7C00u;
  if (m < 0x1p-14) return sign | static_cast<uint16_t>(ldexp(m, 24));  // subnormal: m / 2^-24
  const int e = ilogb(m);
  return sign | static_cast<uint16_t>((e + 15) << 10) | static_cast<uint16_t>(ldexp(m, 10 - e) - 1024);
}

SWEEP_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// --- what one sweep of one node is -----------------------------------------------------------------
enum class CaseKind : int {
  float32_exhaustive,  // unary float32: case index = the input's bit pattern
  float32_pairs,       // binary float32: every exponent pair x 2^pair_log2 random mantissas, signs
  float64_random,      // float64: random bit patterns and in-domain values, half each
  bits16_exhaustive,   // bfloat16, float16: every input (unary: index = x's 16 bits, 2^16 cases) or
                       // every pair (binary: index = a's bits << 16 | b's bits, 2^32 cases)
};

struct Job {
  Op op = Op::add;
  DType dtype = DType::float32;
  int arity = 1;
  CaseKind kind = CaseKind::float32_exhaustive;
  double scalar0 = 0, scalar1 = 0;  // R(scalar): already rounded to the dtype
  double scalar0_raw = 0, scalar1_raw = 0;  // as given (the production backend rounds them itself)
  int pair_log2 = 16;
  uint64_t seed = 0;
  int domain_lo = 0, domain_hi = 0;
  bool positive_only = false;
  // Which cases a sweep visits: position p (0, 1, ...) is case case_lo + p * case_stride. Stride 1 is
  // every case of the range; a larger stride samples it evenly (e.g. 256: every exponent, 2^24 cases).
  uint32_t case_lo = 0, case_stride = 1;
};

SWEEP_HD bool is_float64(const Job& job) { return job.dtype == DType::float64; }

// The case index at a position of the sweep (see Job::case_stride).
SWEEP_HD uint32_t case_at(const Job& job, uint64_t position) {
  return static_cast<uint32_t>(job.case_lo + position * job.case_stride);
}

struct Inputs {
  double a = 0, b = 0;  // x is a; values of the dtype widened exactly
};

SWEEP_HD float pattern_float(uint32_t exponent_field, uint64_t h) {
  uint32_t mantissa = static_cast<uint32_t>(h) & 0x7FFFFFu;
  if (exponent_field == 255 && ((h >> 40) & 1)) mantissa = 0;  // infinity half of the time
  if (exponent_field == 0 && ((h >> 41) & 1)) mantissa = 0;    // zero half of the time
  const uint32_t sign = static_cast<uint32_t>((h >> 42) & 1) << 31;
  return float_from_bits(sign | (exponent_field << 23) | mantissa);
}

SWEEP_HD double domain_double(const Job& job, uint64_t h1, uint64_t h2) {
  const int span = job.domain_hi - job.domain_lo;
  const int exponent = job.domain_lo + static_cast<int>(h1 % static_cast<uint64_t>(span));
  const double significand = 1.0 + ldexp(static_cast<double>(h2 >> 12), -52);
  const double v = ldexp(significand, exponent);
  return (!job.positive_only && ((h1 >> 63) & 1)) ? -v : v;
}

SWEEP_HD double random_double(const Job& job, uint64_t h) {
  const uint64_t h1 = splitmix64(h), h2 = splitmix64(h1);
  return (h & 1) ? domain_double(job, h1, h2) : double_from_bits(h1);
}

// The inputs of case `index` as the dtype's values (the same on host and device: a worst case is
// regenerated from its index). float32 values keep their exact bits, signalling NaNs included.
SWEEP_HD void case_floats(const Job& job, uint32_t index, float* a, float* b) {
  if (job.kind == CaseKind::float32_exhaustive) {
    *a = float_from_bits(index);
    *b = 0;
    return;
  }
  const uint32_t pair = index >> job.pair_log2;
  const uint64_t h = splitmix64(splitmix64(job.seed) ^ index);
  *a = pattern_float((pair >> 8) & 255u, h);
  *b = pattern_float(pair & 255u, splitmix64(h));
}
// float64 sin and cos cases stay below kSinCosLimit, where the reference's reduction is valid (see
// dd_sincos): a larger exponent is folded into 0..20 (the mantissa and sign kept).
inline constexpr double kSinCosLimit = 0x1p+20;
SWEEP_HD double within_reference_range(const Job& job, double v) {
  if (!is_float64(job) || (job.op != Op::sin && job.op != Op::cos) || !is_finite(v) || fabs(v) < kSinCosLimit) return v;
  int e = 0;
  const double m = frexp(v, &e);
  return ldexp(m, e % 21);
}
SWEEP_HD void case_doubles(const Job& job, uint32_t index, double* a, double* b) {
  const uint64_t h = splitmix64(splitmix64(job.seed) ^ index);
  *a = within_reference_range(job, random_double(job, h));
  *b = random_double(job, splitmix64(h ^ 0x5851F42D4C957F2Dull));
}
// bfloat16, float16: the input bit patterns of case `index` (every pattern, NaNs included).
SWEEP_HD void case_bits16(const Job& job, uint32_t index, uint16_t* a, uint16_t* b) {
  *a = static_cast<uint16_t>(job.arity == 1 ? index : index >> 16);
  *b = static_cast<uint16_t>(job.arity == 1 ? 0 : index);
}
SWEEP_HD Inputs case_inputs(const Job& job, uint32_t index) {
  Inputs in;
  if (job.kind == CaseKind::bits16_exhaustive) {
    uint16_t a, b;
    case_bits16(job, index, &a, &b);
    in.a = bits16_value(job.dtype, a);
    in.b = bits16_value(job.dtype, b);
  } else if (is_float64(job)) {
    case_doubles(job, index, &in.a, &in.b);
  } else {
    float a, b;
    case_floats(job, index, &a, &b);
    in.a = a;
    in.b = b;
  }
  return in;
}

SWEEP_HD bool in_domain_value(const Job& job, double v) {
  const double m = fabs(v);
  if (!(m >= ldexp(1.0, job.domain_lo) && m < ldexp(1.0, job.domain_hi))) return false;
  return !job.positive_only || v > 0;
}

SWEEP_HD bool in_domain(const Job& job, const Inputs& in) {
  return in_domain_value(job, in.a) && (job.arity == 1 || in_domain_value(job, in.b));
}

SWEEP_HD bool inputs_finite(const Job& job, const Inputs& in) {
  return is_finite(in.a) && (job.arity == 1 || is_finite(in.b));
}

// --- float64 transcription for float32 outputs -----------------------------------------------------
SWEEP_HD double sigmoid_d(double x) {  // exp(-|x|) forms: no overflow, no cancellation
  if (x >= 0) return 1 / (1 + exp(-x));
  const double e = exp(x);
  return e / (1 + e);  // NaN lands here and stays NaN
}
SWEEP_HD double sigmoid_slope_d(double x) { return sigmoid_d(x) * sigmoid_d(-x); }  // s (1 - s)
SWEEP_HD double softplus_d(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
SWEEP_HD double sech2_d(double x) {  // 1 - tanh^2 = 4t / (1 + t)^2, t = exp(-2|x|)
  const double t = exp(-2 * fabs(x));
  return 4 * t / ((1 + t) * (1 + t));
}
// NaN-ignoring max/min (the spec's fmax/fmin); zeros compare equal, which grading does too.
SWEEP_HD double fmax_spec(double a, double b) { return is_nan(a) ? b : is_nan(b) ? a : (b > a ? b : a); }
SWEEP_HD double fmin_spec(double a, double b) { return is_nan(a) ? b : is_nan(b) ? a : (b < a ? b : a); }

// gelu's constants in the dtype (spec/conventions.md §1.22): c = R(0.044715), k = R(sqrt(2/pi)),
// c3 = R(3 R(c)); R of a 16-bit dtype is R16(R32(v)) (§0.3).
struct GeluConstants {
  double c, k, c3;
};
SWEEP_HD double constant_in(DType d, double v) {
  if (d == DType::float64) return v;
  const double v32 = static_cast<float>(v);
  return d == DType::float32 ? v32 : round_to_precision(v32, format_of(d));
}
SWEEP_HD GeluConstants gelu_constants(DType d) {
  const double c = constant_in(d, 0.044715);
  return {c, constant_in(d, 0.79788456080286535588), constant_in(d, 3.0 * c)};
}
SWEEP_HD double gelu_u(DType d, double x) {
  const GeluConstants g = gelu_constants(d);
  return g.k * (x + g.c * x * x * x);
}
// 1 + tanh(u) = 2 s(2u); 1 - tanh(u)^2 = 4 s(2u) s(-2u); d/dx = ((1 + t) + x sech^2 k (1 + c3 x^2)) / 2.
SWEEP_HD double gelu_forward_d(DType d, double x) { return x * sigmoid_d(2 * gelu_u(d, x)); }
SWEEP_HD double gelu_slope_d(DType d, double x) {
  const GeluConstants g = gelu_constants(d);
  const double u2 = 2 * gelu_u(d, x);
  const double sp = sigmoid_d(u2), sm = sigmoid_d(-u2);
  return (2 * sp + x * (4 * sp * sm) * (g.k * (1 + g.c3 * x * x))) / 2;
}
SWEEP_HD double silu_slope_d(double x) { return sigmoid_d(x) * (1 + x * sigmoid_d(-x)); }

SWEEP_HD double sign_times(double x, double g) { return x > 0 ? g : x < 0 ? -g : 0 * g; }

// y of a unary node at a float32, bfloat16 or float16 x of dtype d; s0, s1 are R(scalars).
SWEEP_HD double unary_forward_d(DType d, Op op, double x, double s0, double s1) {
  switch (op) {
    case Op::neg: return -x;
    case Op::scale: return x * s0;  // 24 x 24 bits: exact in double
    case Op::abs: return fabs(x);
    case Op::sqrt: return x <= 0 ? 0.0 : sqrt(x);
    case Op::clamp: return fmin_spec(fmax_spec(x, s0), s1);
    case Op::relu: return x > 0 ? x : 0.0;
    case Op::exp: return exp(x);
    case Op::sin: return sin(x);
    case Op::cos: return cos(x);
    case Op::log: return log(x);
    case Op::inv: return 1 / x;
    case Op::safeLog: return log(softplus_d(x) + s0);
    case Op::sigmoid: return sigmoid_d(x);
    case Op::tanh: return tanh(x);
    case Op::silu: return x * sigmoid_d(x);
    case Op::gelu: return gelu_forward_d(d, x);
    case Op::softplus: return softplus_d(x);
    default: return quiet_nan();
  }
}

// dx of a unary node at x with cotangent g.
SWEEP_HD double unary_vjp_d(DType d, Op op, double x, double g, double s0, double s1) {
  switch (op) {
    case Op::neg: return -g;
    case Op::scale: return g * s0;
    case Op::abs: return sign_times(x, g);
    case Op::sqrt: return x > 0 ? g / (2 * sqrt(x)) : 0.0;
    case Op::clamp: return s0 < x && x < s1 ? g : 0.0;
    case Op::relu: return x > 0 ? g : 0.0;
    case Op::exp: return g * exp(x);
    case Op::sin: return g * cos(x);
    case Op::cos: return -sin(x) * g;
    case Op::log: return g / x;
    case Op::inv: return -(g / (x * x));  // x * x exact in double
    case Op::safeLog: return g * (sigmoid_d(x) / (softplus_d(x) + s0));
    case Op::sigmoid: return g * sigmoid_slope_d(x);
    case Op::tanh: return g * sech2_d(x);
    case Op::silu: return g * silu_slope_d(x);
    case Op::gelu: return g * gelu_slope_d(d, x);
    case Op::softplus: return g * sigmoid_d(x);
    default: return quiet_nan();
  }
}

SWEEP_HD double binary_forward_d(Op op, double a, double b) {
  switch (op) {
    case Op::add: return a + b;
    case Op::sub: return a - b;
    case Op::mul: return a * b;
    case Op::max: return fmax_spec(a, b);
    case Op::min: return fmin_spec(a, b);
    case Op::div: return a / b;
    default: return quiet_nan();
  }
}

// da (output 1) or db (output 2) of a binary node; ties and unordered pairs split g in halves.
SWEEP_HD double binary_vjp_d(Op op, int output, double a, double b, double g) {
  const bool first = output == kGradA;
  switch (op) {
    case Op::add: return g;
    case Op::sub: return first ? g : 0.0 - g;
    case Op::mul: return first ? g * b : g * a;
    case Op::max: return a > b ? (first ? g : 0.0) : b > a ? (first ? 0.0 : g) : g / 2;
    case Op::min: return a < b ? (first ? g : 0.0) : b < a ? (first ? 0.0 : g) : g / 2;
    case Op::div: return first ? g / b : 0.0 - g * (a / (b * b));  // b * b exact in double
    default: return quiet_nan();
  }
}

// --- double-double for float64 outputs ------------------------------------------------------------
// hi + lo * 2^lo_exp, with hi = R(value) (float64 round-to-nearest-even) always. lo_exp is 0 except
// for results below 2^-969, whose low part would lose bits as a double: there lo is kept unscaled
// (dd_scaled), so that the value is still known to ~2^-100 relative of its remainder.
struct DD {
  double hi = 0, lo = 0;
  int lo_exp = 0;
};
SWEEP_HD DD two_sum(double a, double b) {
  const double s = a + b, bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
SWEEP_HD DD two_prod(double a, double b) {
  const double p = a * b;
  return {p, fma(a, b, -p)};
}
SWEEP_HD DD dd_normalize(double hi, double lo) {
  const double s = hi + lo;
  return {s, lo - (s - hi)};
}
// n / d for double-doubles of normal magnitude (significands): one correction step, ~2^-104.
SWEEP_HD DD dd_div(DD n, DD d) {
  const double q1 = n.hi / d.hi;
  const DD p = two_prod(q1, d.hi);
  const double r = (((n.hi - p.hi) - p.lo) + n.lo) - q1 * d.lo;
  return dd_normalize(q1, r / d.hi);
}
SWEEP_HD DD dd_mul(DD a, DD b) {
  const DD p = two_prod(a.hi, b.hi);
  return dd_normalize(p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi));
}
SWEEP_HD DD dd_sqrt(double m) {  // m in [0.5, 2)
  const double s = sqrt(m);
  return dd_normalize(s, fma(-s, s, m) / (2 * s));
}
SWEEP_HD bool is_even_double(double v) {  // the last significand bit of a finite double is 0
  uint64_t b;
  memcpy(&b, &v, 8);
  return (b & 1u) == 0;
}
// v * 2^e for a normalized v (|lo| <= ulp(hi) / 2, hi = RN(hi + lo)). Where both parts scale exactly
// the result is {hi 2^e, lo 2^e}. Below 2^-969 they may not (hi lands on the subnormal grid, lo
// under 2^-1022): then hi is re-rounded from the whole value (RNE, so hi = R(v 2^e) still) and the
// remainder v 2^e - hi is kept unscaled, as lo with lo_exp = e (relative error 2^-53 of a value
// below half the spacing at hi). Overflow: {+-inf, 0}.
SWEEP_HD DD dd_scaled(DD v, int e) {
  double hi = ldexp(v.hi, e);
  if (!is_finite(hi)) return {hi, 0.0};
  const double lo = ldexp(v.lo, e);
  if (ldexp(hi, -e) == v.hi && ldexp(lo, -e) == v.lo) return {hi, lo};
  // Remainder in the scaled-back space: r = v - hi 2^-e (d exact: both are within half a spacing).
  DD r = two_sum(v.hi - ldexp(hi, -e), v.lo);
  for (int step = 0; step < 2; ++step) {  // at most one step moves hi
    const double up = nextafter(hi, infinity()), down = nextafter(hi, -infinity());
    const double half_up = ldexp(up - hi, -e) / 2, half_down = ldexp(hi - down, -e) / 2;
    // r compared with +half_up and -half_down exactly (r.hi first, r.lo breaks a tie of r.hi).
    const bool above = r.hi > half_up || (r.hi == half_up && r.lo > 0);
    const bool below = r.hi < -half_down || (r.hi == -half_down && r.lo < 0);
    const bool tie_up = r.hi == half_up && r.lo == 0 && !is_even_double(hi);
    const bool tie_down = r.hi == -half_down && r.lo == 0 && !is_even_double(hi);
    if (above || tie_up) {
      r = two_sum(r.hi - 2 * half_up, r.lo);  // 2 half_up exact, and so is the difference
      hi = up;
    } else if (below || tie_down) {
      r = two_sum(r.hi + 2 * half_down, r.lo);
      hi = down;
    } else {
      break;
    }
  }
  // Below 2^-1098 (e < -1200: hi is 0 and the value is far from any tie) the remainder's own
  // underflow is harmless; the clamp keeps 2^-lo_exp finite for grading.
  const int lo_exp = e < -1200 ? -1200 : e;
  return {hi, ldexp(r.hi + r.lo, e - lo_exp), lo_exp};
}
SWEEP_HD bool nonzero_finite(double v) { return v != 0 && is_finite(v); }
SWEEP_HD DD dd_exact(double v) { return {v, 0.0}; }

// prod(factors) / prod(divisors) with the exponents taken out: exact to ~2^-100 for nonzero finite
// operands. Up to 2 factors and 2 divisors (pass 1.0 for unused ones).
SWEEP_HD DD dd_ratio(double f1, double f2, double d1, double d2) {
  int e1, e2, e3, e4;
  const double m1 = frexp(f1, &e1), m2 = frexp(f2, &e2), m3 = frexp(d1, &e3), m4 = frexp(d2, &e4);
  const DD q = dd_div(two_prod(m1, m2), two_prod(m3, m4));
  return dd_scaled(q, e1 + e2 - e3 - e4);
}

// The float64 VJP and forward of the device-graded nodes, as double-doubles.
SWEEP_HD DD dd_sqrt_of(double x) {
  int e;
  double m = frexp(x, &e);
  if (e & 1) { m *= 2; e -= 1; }
  return dd_scaled(dd_sqrt(m), e / 2);
}
SWEEP_HD DD dd_half_rsqrt_times(double g, double x) {  // g / (2 sqrt(x)), x > 0
  int e, eg;
  double m = frexp(x, &e);
  if (e & 1) { m *= 2; e -= 1; }
  const double mg = frexp(g, &eg);
  const DD root = dd_sqrt(m);
  return dd_scaled(dd_div(dd_exact(mg), DD{2 * root.hi, 2 * root.lo}), eg - e / 2);
}

SWEEP_HD DD forward_f64(Op op, double a, double b, double s0, double s1) {
  switch (op) {
    case Op::neg: return dd_exact(-a);
    case Op::abs: return dd_exact(fabs(a));
    case Op::relu: return dd_exact(a > 0 ? a : 0.0);
    case Op::clamp: return dd_exact(fmin_spec(fmax_spec(a, s0), s1));
    case Op::max: return dd_exact(fmax_spec(a, b));
    case Op::min: return dd_exact(fmin_spec(a, b));
    case Op::add: return is_finite(a + b) ? two_sum(a, b) : dd_exact(a + b);
    case Op::sub: return is_finite(a - b) ? two_sum(a, -b) : dd_exact(a - b);
    case Op::scale: return nonzero_finite(a) && nonzero_finite(s0) ? dd_ratio(a, s0, 1, 1) : dd_exact(a * s0);
    case Op::mul: return nonzero_finite(a) && nonzero_finite(b) ? dd_ratio(a, b, 1, 1) : dd_exact(a * b);
    case Op::div: return nonzero_finite(a) && nonzero_finite(b) ? dd_ratio(a, 1, b, 1) : dd_exact(a / b);
    case Op::inv: return nonzero_finite(a) ? dd_ratio(1, 1, a, 1) : dd_exact(1 / a);
    case Op::sqrt: return a <= 0 ? dd_exact(0.0) : nonzero_finite(a) ? dd_sqrt_of(a) : dd_exact(sqrt(a));
    default: return dd_exact(quiet_nan());
  }
}

SWEEP_HD DD negated(DD v) { return {-v.hi, -v.lo, v.lo_exp}; }
// With a zero, infinite or NaN operand a product/quotient is 0, inf or NaN whatever the finite
// nonzero operands' magnitudes; replacing those by +-1 keeps a chained formula (g a / b^2) from
// over- or underflowing on the way where the real value does not.
SWEEP_HD double unit_if_finite(double v) { return nonzero_finite(v) ? copysign(1.0, v) : v; }

SWEEP_HD DD vjp_f64(Op op, int output, double a, double b, double g, double s0, double s1) {
  const bool first = output == kGradA;
  const bool finite_ab = nonzero_finite(a) && nonzero_finite(b) && nonzero_finite(g);
  switch (op) {
    case Op::neg: return dd_exact(-g);
    case Op::abs: return dd_exact(sign_times(a, g));
    case Op::relu: return dd_exact(a > 0 ? g : 0.0);
    case Op::clamp: return dd_exact(s0 < a && a < s1 ? g : 0.0);
    case Op::add: return dd_exact(g);
    case Op::sub: return dd_exact(first ? g : 0.0 - g);
    case Op::max: return dd_exact(a > b ? (first ? g : 0.0) : b > a ? (first ? 0.0 : g) : g / 2);
    case Op::min: return dd_exact(a < b ? (first ? g : 0.0) : b < a ? (first ? 0.0 : g) : g / 2);
    case Op::scale: return nonzero_finite(s0) && nonzero_finite(g) ? dd_ratio(g, s0, 1, 1) : dd_exact(g * s0);
    case Op::mul: {
      const double other = first ? b : a;
      return nonzero_finite(other) && nonzero_finite(g) ? dd_ratio(g, other, 1, 1) : dd_exact(g * other);
    }
    case Op::div:
      if (first) return nonzero_finite(b) && nonzero_finite(g) ? dd_ratio(g, 1, b, 1) : dd_exact(g / b);
      // db = 0 - g a / b^2
      if (!finite_ab) return dd_exact(0.0 - unit_if_finite(g) * (unit_if_finite(a) / (unit_if_finite(b) * unit_if_finite(b))));
      return negated(dd_ratio(g, a, b, b));
    case Op::inv:
      if (!(nonzero_finite(a) && nonzero_finite(g))) return dd_exact(-(unit_if_finite(g) / (unit_if_finite(a) * unit_if_finite(a))));
      return negated(dd_ratio(g, 1, a, a));
    case Op::sqrt:
      if (!(a > 0)) return dd_exact(0.0);
      if (!(nonzero_finite(a) && nonzero_finite(g))) return dd_exact(g / (2 * sqrt(a)));
      return dd_half_rsqrt_times(g, a);
    default: return dd_exact(quiet_nan());
  }
}

// --- double-double elementary functions, for the float64 nodes with libm stagings -----------------
// exp, log, sin, cos, safeLog, sigmoid, tanh, silu, gelu, softplus in float64, each from its
// real-valued spec (spec/conventions.md), to ~2^-100 relative: every step is an error-free
// transformation or a double-double operation of relative error <= 3 * 2^-106 (AccurateDWPlusDW and
// its products/quotients), and no step cancels except where noted:
//  - exp(v): v = k ln2 + r with ln2 a triple-double (k < 2^11, k ln2_1 exact by fma), |r| <= 0.35;
//    expm1(r / 2^8) by Taylor to degree 12 (term < 2^-120), then 8 times q -> q (2 + q), which keeps
//    the relative error of expm1 (~2^-100 after the doublings); e^v = (1 + expm1(r)) 2^k.
//  - log(v): v = m 2^e with m in [1/sqrt2, sqrt2), log m = 2 atanh(s), s = (m - 1) / (m + 1) (m - 1
//    exact), |s| <= 0.172, 22 terms (< 2^-112); plus e ln2. log1p(t) = 2 atanh(t / (2 + t)), t <= 1.
//  - sin, cos: x - k pi/2 with pi/2 as four doubles (~2^-216), k = round(2x/pi) < 2^20, each k p_i
//    exact by fma and summed in double-double: valid for |x| < 2^20 (float64 sweep cases of sin and
//    cos are kept below it, see case_doubles; the domain is [2^-8, 2^8)); the closest a double comes
//    to a multiple of pi/2 is ~2^-61 relative, so r keeps ~2^-78 relative error. Taylor degree 29.
//  - the others are compositions, with tails carried as m 2^e (Scaled) so that nothing over- or
//    underflows on the way, and rounded once at the end (dd_scaled: hi = R(value) for subnormal
//    results too). Near the roots of silu' and gelu' (and log(den) = 0 in safeLog) the error is
//    absolute, ~2^-104 of the terms: those outputs have the abs term (abs_root_output).
// Non-finite inputs take the float64 transcription above (unary_forward_f32 / unary_vjp_f32): their
// results are exact (0, ±1, ±inf or NaN).
inline constexpr double kLog2E = 1.4426950408889634074;  // log2(e)
// ln 2 and pi/2 as sums of doubles, each the nearest double to what the ones before leave (scalars,
// not arrays: device code reads constexpr scalars only).
inline constexpr double kLn2_0 = 0x1.62e42fefa39efp-1, kLn2_1 = 0x1.abc9e3b39803fp-56, kLn2_2 = 0x1.7b57a079a1934p-111;
inline constexpr double kPiOver2_0 = 0x1.921fb54442d18p+0, kPiOver2_1 = 0x1.1a62633145c07p-54,
                        kPiOver2_2 = -0x1.f1976b7ed8fbcp-110, kPiOver2_3 = 0x1.4cf98e804177dp-164;
inline constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;

SWEEP_HD DD dd_add(DD a, DD b) {  // AccurateDWPlusDW: relative error <= 3 * 2^-106
  const DD s = two_sum(a.hi, b.hi), t = two_sum(a.lo, b.lo);
  DD u = dd_normalize(s.hi, s.lo + t.hi);
  return dd_normalize(u.hi, u.lo + t.lo);
}
SWEEP_HD DD dd_add_d(DD a, double b) { return dd_add(a, dd_exact(b)); }
SWEEP_HD DD dd_mul_d(DD a, double b) { return dd_mul(a, dd_exact(b)); }
SWEEP_HD DD dd_div_d(DD a, double b) { return dd_div(a, dd_exact(b)); }
SWEEP_HD DD dd_ldexp(DD a, int e) { return {ldexp(a.hi, e), ldexp(a.lo, e)}; }  // exact in range

// m 2^e: a double-double of moderate size and a binary exponent, for values beyond double's range.
struct Scaled {
  DD m;
  int e = 0;
};
SWEEP_HD Scaled scaled(DD v) {  // m.hi in [0.5, 1) (or 0)
  int e = 0;
  frexp(v.hi, &e);
  return {dd_ldexp(v, -e), e};
}
SWEEP_HD Scaled scaled_mul(Scaled a, Scaled b) {
  Scaled p = scaled(dd_mul(a.m, b.m));
  p.e += a.e + b.e;
  return p;
}
SWEEP_HD Scaled scaled_div(Scaled a, Scaled b) {
  Scaled q = scaled(dd_div(a.m, b.m));
  q.e += a.e - b.e;
  return q;
}
// The value as a double-double: hi = R(value); below 2^-969 the remainder kept unscaled (dd_scaled).
SWEEP_HD DD unscaled(Scaled v) {
  if (v.m.hi == 0) return v.m;
  if (v.e < -1200) return dd_exact(copysign(0.0, v.m.hi));  // below 2^-1200: R(value) = ±0
  if (v.e > 1100) return dd_exact(copysign(infinity(), v.m.hi));
  return dd_scaled(v.m, v.e);
}
// The value as an operand of further double-double arithmetic: unscaled's remainder form (lo_exp)
// is for results only, so below 2^-960 the low part is dropped (2^-53 of a value that small).
SWEEP_HD DD plain(Scaled v) {
  if (v.e >= -960) return unscaled(v);
  return dd_exact(v.e < -1200 ? copysign(0.0, v.m.hi) : ldexp(v.m.hi, v.e));
}
// 1 + v for v >= 0, as a double-double (v below 2^-120 leaves 1).
SWEEP_HD DD one_plus(Scaled v) { return v.e < -120 ? dd_exact(1.0) : dd_add_d(plain(v), 1.0); }

// expm1(r) for |r| <= 0.36 (see above).
SWEEP_HD DD dd_expm1_small(DD r) {
  const DD t = dd_ldexp(r, -8);
  DD p = dd_exact(1.0);  // Horner: expm1(t) = t (1 + t/2 (1 + t/3 (...)))
  for (int n = 12; n >= 2; --n) p = dd_add_d(dd_div_d(dd_mul(t, p), n), 1.0);
  DD q = dd_mul(t, p);
  for (int i = 0; i < 8; ++i) q = dd_mul(q, dd_add_d(q, 2.0));
  return q;
}
// e^v for a double-double v, as m 2^k. Beyond ±1100: 2^4000 or an exact 0, which any double factor
// leaves beyond float64's range (e^-1100 = 2^-1587 times up to 2^1024 is a 0 in float64).
SWEEP_HD Scaled dd_exp(DD v) {
  if (v.hi > 1100) return {dd_exact(1.0), 4000};
  if (v.hi < -1100) return {dd_exact(0.0), 0};
  const double k = nearbyint(v.hi * kLog2E);
  DD r = dd_add(v, negated(two_prod(k, kLn2_0)));
  r = dd_add(r, negated(two_prod(k, kLn2_1)));
  r = dd_add_d(r, -k * kLn2_2);
  return {dd_add_d(dd_expm1_small(r), 1.0), static_cast<int>(k)};
}
// 2 atanh(s) = log((1 + s) / (1 - s)) for |s| <= 1/3.
SWEEP_HD DD dd_two_atanh(DD s) {
  const DD z = dd_mul(s, s);
  DD p = dd_div_d(dd_exact(1.0), 71);  // terms to s^70 / 71: < 2^-110 at |s| = 1/3
  for (int n = 34; n >= 0; --n) p = dd_add(dd_div_d(dd_exact(1.0), 2 * n + 1), dd_mul(z, p));
  return dd_ldexp(dd_mul(s, p), 1);
}
SWEEP_HD DD dd_log(DD v) {  // v > 0 finite
  Scaled w = scaled(v);  // w.m in [0.5, 1)
  if (w.m.hi < 0.70710678118654752) {
    w.m = dd_ldexp(w.m, 1);
    w.e -= 1;
  }
  const DD s = dd_div(dd_add_d(w.m, -1.0), dd_add_d(w.m, 1.0));  // m - 1: exact (Sterbenz)
  const double e = w.e;
  DD eln2 = dd_add(two_prod(e, kLn2_0), two_prod(e, kLn2_1));
  eln2 = dd_add_d(eln2, e * kLn2_2);
  return dd_add(eln2, dd_two_atanh(s));
}
// log1p(t) for 0 <= t <= 1; a tiny t (below 2^-60) as t (1 - t/2), in its scale.
SWEEP_HD Scaled dd_log1p(Scaled t) {
  if (t.m.hi == 0) return t;
  if (t.e < -60) return scaled_mul(t, scaled(dd_add_d(negated(dd_ldexp(plain(t), -1)), 1.0)));
  const DD v = plain(t);
  return scaled(dd_two_atanh(dd_div(v, dd_add_d(v, 2.0))));
}

struct SinCos {
  DD sin, cos;
};
SWEEP_HD SinCos dd_sincos(double x) {  // finite |x| < kSinCosLimit
  const double k = nearbyint(x * kTwoOverPi);
  DD r = dd_add(dd_exact(x), negated(two_prod(k, kPiOver2_0)));
  r = dd_add(r, negated(two_prod(k, kPiOver2_1)));
  r = dd_add(r, negated(two_prod(k, kPiOver2_2)));
  r = dd_add_d(r, -k * kPiOver2_3);
  const DD z = dd_mul(r, r);  // |r| <= pi/4: z^15 / 30! < 2^-118
  DD ps = dd_exact(1.0), pc = dd_exact(1.0);
  for (int n = 15; n >= 1; --n) {
    ps = dd_add_d(negated(dd_div_d(dd_mul(z, ps), (2.0 * n) * (2.0 * n + 1))), 1.0);
    pc = dd_add_d(negated(dd_div_d(dd_mul(z, pc), (2.0 * n - 1) * (2.0 * n))), 1.0);
  }
  const DD sr = dd_mul(r, ps), cr = pc;
  switch (static_cast<long long>(k) & 3) {
    case 0: return {sr, cr};
    case 1: return {cr, negated(sr)};
    case 2: return {negated(sr), negated(cr)};
    default: return {negated(cr), sr};
  }
}

SWEEP_HD Scaled dd_sigmoid(DD v) {  // 1 / (1 + e^-v) for v >= 0, e^v / (1 + e^v) below
  const Scaled e = dd_exp(v.hi >= 0 ? negated(v) : v);  // e^-|v| <= 1
  if (v.hi >= 0) return scaled(dd_div(dd_exact(1.0), one_plus(e)));
  return scaled_div(e, scaled(one_plus(e)));
}
SWEEP_HD Scaled dd_sigmoid_slope(DD v) {  // sigmoid(v) sigmoid(-v) = e^-|v| / (1 + e^-|v|)^2
  const Scaled e = dd_exp(v.hi >= 0 ? negated(v) : v);
  const Scaled d = scaled(one_plus(e));
  return scaled_div(e, scaled_mul(d, d));
}
SWEEP_HD Scaled dd_softplus(double x) {  // max(x, 0) + log1p(e^-|x|)
  const Scaled l = dd_log1p(dd_exp(dd_exact(-fabs(x))));
  return x > 0 ? scaled(dd_add_d(plain(l), x)) : l;  // x > 0: l <= ln 2 adds without cancelling
}
SWEEP_HD DD dd_tanh(double x) {
  const double a = fabs(x);
  if (a < 0x1p-30) return two_sum(x, -(x * x * x) / 3);  // the next term, 2x^5/15, is below 2^-150 |x|
  // tanh(a) = -t / (2 + t), t = expm1(-2a): the series for 2a <= 0.36, else e^-2a - 1 (e^-2a <= 0.7)
  const DD t = a <= 0.18 ? dd_expm1_small(dd_exact(-2 * a)) : dd_add_d(plain(dd_exp(dd_exact(-2 * a))), -1.0);
  const DD th = dd_div(negated(t), dd_add_d(t, 2.0));
  return x < 0 ? negated(th) : th;
}
SWEEP_HD Scaled dd_sech2(double x) {  // 1 - tanh^2 = 4 e^-2|x| / (1 + e^-2|x|)^2
  const Scaled e = dd_exp(dd_exact(-2 * fabs(x)));
  const Scaled d = scaled(one_plus(e));
  return scaled_div(scaled_mul(e, scaled(dd_exact(4.0))), scaled_mul(d, d));
}
// gelu with float64's constants: y = x s(2u), dy/dx = s(2u) (1 + 2x s(-2u) k (1 + c3 x^2)),
// u = k (x + c x^3); `slope` gives g dy/dx.
SWEEP_HD DD dd_gelu(double x, bool slope, double g) {
  if (fabs(x) > 0x1p20) {  // s(2u) is 1 or 0 to far below 2^-1075 of the result
    if (!slope) return dd_exact(x > 0 ? x : -0.0);
    return dd_exact(x > 0 ? g : copysign(0.0, -g));
  }
  const GeluConstants c = gelu_constants(DType::float64);
  const DD x2 = two_prod(x, x);
  const DD u2 = dd_ldexp(dd_mul_d(dd_add_d(dd_mul_d(dd_mul_d(x2, x), c.c), x), c.k), 1);
  const Scaled sp = dd_sigmoid(u2);
  if (!slope) return unscaled(scaled_mul(scaled(dd_exact(x)), sp));
  const DD id = dd_mul_d(dd_add_d(dd_mul_d(x2, c.c3), 1.0), c.k);
  const Scaled term = scaled_mul(scaled_mul(scaled(dd_exact(2 * x)), dd_sigmoid(negated(u2))), scaled(id));
  const DD bracket = dd_add_d(plain(term), 1.0);  // crosses 0 near x = -0.752: absolute error there
  return unscaled(scaled_mul(scaled_mul(sp, scaled(bracket)), scaled(dd_exact(g))));
}

// The float64 libm nodes' exact y and dx (finite x and g; see above).
SWEEP_HD DD libm_forward_f64(Op op, double x, double s0) {
  switch (op) {
    case Op::exp: return unscaled(dd_exp(dd_exact(x)));
    case Op::sin: return dd_sincos(x).sin;
    case Op::cos: return dd_sincos(x).cos;
    case Op::log: return x > 0 ? dd_log(dd_exact(x)) : dd_exact(x == 0 ? -infinity() : quiet_nan());
    case Op::safeLog: {
      const DD den = dd_add_d(plain(dd_softplus(x)), s0);
      return den.hi > 0 ? dd_log(den) : dd_exact(den.hi == 0 ? -infinity() : quiet_nan());
    }
    case Op::sigmoid: return unscaled(dd_sigmoid(dd_exact(x)));
    case Op::tanh: return dd_tanh(x);
    case Op::silu: return unscaled(scaled_mul(scaled(dd_exact(x)), dd_sigmoid(dd_exact(x))));
    case Op::gelu: return dd_gelu(x, false, 1.0);
    case Op::softplus: return unscaled(dd_softplus(x));
    default: return dd_exact(quiet_nan());
  }
}
SWEEP_HD DD libm_vjp_f64(Op op, double x, double g, double s0) {
  const Scaled sg = scaled(dd_exact(g));
  switch (op) {
    case Op::exp: return unscaled(scaled_mul(dd_exp(dd_exact(x)), sg));
    case Op::sin: return unscaled(scaled_mul(scaled(dd_sincos(x).cos), sg));
    case Op::cos: return negated(unscaled(scaled_mul(scaled(dd_sincos(x).sin), sg)));  // sin x ~ x: tiny results
    case Op::log: return x != 0 && g != 0 ? dd_ratio(g, 1, x, 1) : dd_exact(g / x);
    case Op::safeLog: {
      const DD den = dd_add_d(plain(dd_softplus(x)), s0);
      if (!(den.hi > 0)) return dd_exact(g * (sigmoid_d(x) / den.hi));
      return unscaled(scaled_mul(scaled_div(dd_sigmoid(dd_exact(x)), scaled(den)), sg));
    }
    case Op::sigmoid: return unscaled(scaled_mul(dd_sigmoid_slope(dd_exact(x)), sg));
    case Op::tanh: return unscaled(scaled_mul(dd_sech2(x), sg));
    case Op::silu: {  // g s(x) (1 + x s(-x))
      const DD bracket = dd_add_d(plain(scaled_mul(scaled(dd_exact(x)), dd_sigmoid(dd_exact(-x)))), 1.0);
      return unscaled(scaled_mul(scaled_mul(dd_sigmoid(dd_exact(x)), scaled(bracket)), sg));
    }
    case Op::gelu: return dd_gelu(x, true, g);
    case Op::softplus: return unscaled(scaled_mul(dd_sigmoid(dd_exact(x)), sg));
    default: return dd_exact(quiet_nan());
  }
}

// The exact value of one output at one case, as a double-double (lo = 0 for float32 outputs).
SWEEP_HD DD exact_value(const Job& job, int output, const Inputs& in, double g) {
  if (is_float64(job) && ieee_float64(job.op)) {
    if (output == kY) return forward_f64(job.op, in.a, in.b, job.scalar0, job.scalar1);
    return vjp_f64(job.op, output, in.a, in.b, g, job.scalar0, job.scalar1);
  }
  if (is_float64(job) && is_finite(in.a) && is_finite(g)) {
    if (output == kY) return libm_forward_f64(job.op, in.a, job.scalar0);
    return libm_vjp_f64(job.op, in.a, g, job.scalar0);
  }
  if (job.arity == 2) {
    if (output == kY) return dd_exact(binary_forward_d(job.op, in.a, in.b));
    return dd_exact(binary_vjp_d(job.op, output, in.a, in.b, g));
  }
  if (output == kY) return dd_exact(unary_forward_d(job.dtype, job.op, in.a, job.scalar0, job.scalar1));
  return dd_exact(unary_vjp_d(job.dtype, job.op, in.a, g, job.scalar0, job.scalar1));
}

// --- grading (spec/bounds.def's rule, as reference/measure.cpp applies it) -------------------------
SWEEP_HD double round_to_format(DType d, DD v) {  // float64: hi is R(value) (see DD)
  if (d == DType::float64) return v.hi;
  if (d == DType::float32) return static_cast<double>(static_cast<float>(v.hi));
  return round_to_precision(v.hi, format_of(d));  // 16-bit outputs are doubles (lo = 0)
}

// The weight w of the abs term: |g| for a VJP (1 forward), times safeLog's amplification
// (reference::abs_weight's rule: den_lo = max(R(eps), den - 2 eps); +inf when R(eps) <= 0).
SWEEP_HD double abs_weight_value(const Job& job, int output, const Inputs& in, double g) {
  const double w = output == kY ? 1.0 : fabs(g);
  if (job.op != Op::safeLog) return w;
  const double eps = format_of(job.dtype).eps, e = job.scalar0;
  const double den = softplus_d(in.a) + e;
  const double den_minus = den - 2 * eps;
  const double den_lo = den_minus > e ? den_minus : e;
  if (!(den_lo > 0)) return infinity();
  const double gain = output == kY ? 1 / den_lo : sigmoid_d(in.a) / (den * den_lo);
  return w * (gain > 1 ? gain : 1.0);
}

// Histogram classes: ULP error of finite results, then the non-finite classes.
enum Bucket : int {
  kUpToHalf, kUpToOne, kUpToTwo, kUpToFour, kUpToEight, kAboveEight,
  kNonfiniteExpected,    // R(exact) is NaN or +-inf and the produced value is the same
  kNonfiniteUnexpected,  // a non-finite value where R(exact) is finite, or the wrong non-finite one
  kBucketCount
};

struct Bound {
  double ulp = 0, abs = 0;
};

struct Graded {
  double error_ulps = 0;  // |produced - exact| / ulp_of(R(exact)); inf for a non-finite mismatch
  double ratio = 0;       // |produced - exact| / allowed; 0 when produced == R(exact)
  bool within = true;
  int bucket = kUpToHalf;
};

SWEEP_HD int bucket_of(double ulps) {
  if (ulps <= 0.5) return kUpToHalf;
  if (ulps <= 1) return kUpToOne;
  if (ulps <= 2) return kUpToTwo;
  if (ulps <= 4) return kUpToFour;
  if (ulps <= 8) return kUpToEight;
  return kAboveEight;
}

SWEEP_HD Graded grade_value(DType dtype, DD exact, double produced, Bound bound, double w) {
  const Format f = format_of(dtype);
  const double rounded = round_to_format(dtype, exact);
  Graded r;
  if (!is_finite(rounded)) {
    const bool same = is_nan(rounded) ? is_nan(produced) : produced == rounded;
    if (same) { r.bucket = kNonfiniteExpected; return r; }
    return {infinity(), infinity(), false, kNonfiniteUnexpected};
  }
  if (!is_finite(produced)) return {infinity(), infinity(), false, kNonfiniteUnexpected};
  const double ulp = ulp_of_value(rounded, f);
  const double allowed = bound.ulp * ulp + bound.abs * f.eps * w;
  // Error, ulp and allowed all in units of 2^s: s = lo_exp where the low part is kept unscaled
  // (results below 2^-969), so that a remainder under the smallest subnormal still counts.
  // The error (produced - hi) - lo is kept as an exact two-sum e, so that a low part below the
  // difference's last bit still decides a verdict at the bound's edge (|e| == allowed).
  const double d = produced - exact.hi;  // exact whenever d is within a few ulps of hi
  int s = exact.lo_exp;
  if (s != 0 && fabs(d) > 0x1p-900) s = 0;  // far off: the remainder (< 2^-1022) cannot matter
  const double lo = exact.lo_exp == 0 || s != 0 ? exact.lo : 0.0;
  const DD e = two_sum(ldexp(d, -s), -lo);
  const double error = fabs(e.hi);
  const double ulp_s = ldexp(ulp, -s), allowed_s = ldexp(allowed, -s);
  r.error_ulps = error / ulp_s;
  r.bucket = bucket_of(r.error_ulps);
  if (produced == rounded) return r;  // correctly rounded: conforms (+0 == -0)
  // |e.hi + e.lo| <= allowed: e.lo (<= half an ulp of e.hi) only matters when |e.hi| == allowed.
  r.within = error < allowed_s || (error == allowed_s && (e.lo == 0 || (e.lo < 0) != (e.hi < 0)));
  r.ratio = allowed_s > 0 ? error / allowed_s : infinity();
  return r;
}

// --- why a value is above its bound: the cause ----------------------------------------------------
// spec/bounds.def promises its bounds inside each node's domain (spec/ops.def's magnitudes). Outside
// it TorchLean's staging may leave the dtype's range where the exact result does not, and the bound
// fails there by the staging's design (spec/conventions.md §4.1). Every value above its bound gets a
// cause, so that none is silent:
//   in domain    the input is inside the domain: a violation, whatever else holds;
//   overflow     one of the node's range-limited stages (below) is, exactly, at or beyond the dtype's
//                overflow threshold, or within the staging's rounding error below it (a relative
//                4 * 2^-p: at most three roundings precede a stage, as div's a / b, / b, * g do): it
//                rounds to ±inf while the exact output is finite;
//   underflow    else, one of them is exactly nonzero and below the smallest normal: it loses bits on
//                the subnormal grid (or becomes 0) that later stages magnify;
//   unexplained  anything else, non-finite inputs included: a failure like a violation in domain.
// spec/bounds.def says which causes each node accepts outside its domain (TAPEWISE_SWEPT).
enum Cause : int { kCauseInDomain, kCauseOverflow, kCauseUnderflow, kCauseUnexplained, kCauseCount };

// The stages are tracked as log2 of their exact magnitudes, so that float64 stagings whose stages
// leave double's range (1 / x^2 in inv, c3 x^2 in gelu) are classified as well.
// log2|v| of an exact zero (a product with a zero input): at or below it a stage is not counted.
inline constexpr double kLog2OfZero = -0x1p+1020;

struct StagingRange {
  double max_log2 = kLog2OfZero, min_log2 = -kLog2OfZero;  // over the exactly nonzero stages
  // The stages are inside one ATen op that computes in float32 and rounds only its result, for a
  // 16-bit dtype (at::sigmoid, spec/conventions.md §0.3): they leave float32's range, not the dtype's.
  bool inside_float32_op = false;
  SWEEP_HD void add(double log2_magnitude) {
    if (log2_magnitude <= kLog2OfZero) return;
    if (log2_magnitude > max_log2) max_log2 = log2_magnitude;
    if (log2_magnitude < min_log2) min_log2 = log2_magnitude;
  }
};

SWEEP_HD double log2_abs(double v) { return v != 0 ? log2(fabs(v)) : kLog2OfZero; }
// log2(1 + 2^l), without overflow for large |l|.
SWEEP_HD double log2_one_plus(double l) { return l > 0 ? l + log1p(exp2(-l)) * kLog2E : log1p(exp2(l)) * kLog2E; }
// log2 sigmoid(v) = -log2(1 + e^-v), v a value (not a log).
SWEEP_HD double log2_sigmoid(double v) { return -log2_one_plus(-v * kLog2E); }

// The range-limited stages of one output: those of its staging (spec/ops.def's `staged` column, the
// forwards of spec/conventions.md §1) whose leaving the dtype's range can put the output above its
// bound, as log2 of their exact magnitudes. A stage that leaves the range harmlessly is not listed
// (gelu's cubic: tanh saturates to R(tanh(u)) = ±1 either way; 1 - t^2 = 0 at saturation, which the
// abs term covers), and a node without such a stage lists none: there every value above its bound
// outside the domain is unexplained.
SWEEP_HD void range_limited_stages(const Job& job, int output, const Inputs& in, double g, StagingRange& r) {
  const double x = in.a, lx = log2_abs(x), lgg = log2_abs(g);
  const bool vjp = output != kY;
  switch (job.op) {
    case Op::exp:  // e = exp(x); dx = g * e
      if (vjp) r.add(x * kLog2E);
      return;
    case Op::log:  // r = 1 / x; dx = g * r
      if (vjp) r.add(-lx);
      return;
    case Op::inv:  // r = 1 / x; r2 = r * r; p = g * r2; dx = p * (-1)
      if (!vjp) return;
      r.add(-lx);
      r.add(-2 * lx);
      r.add(lgg - 2 * lx);
      return;
    case Op::div: {  // db: q1 = a / b; q2 = q1 / b; t = g * q2; db = (+0) - t
      if (output != kGradB || in.a == 0 || in.b == 0) return;  // a zero makes them 0 or inf exactly
      const double la = log2_abs(in.a), lb = log2_abs(in.b);
      r.add(la - lb);
      r.add(la - 2 * lb);
      r.add(lgg + la - 2 * lb);
      return;
    }
    case Op::sigmoid:  // ATen's sigmoid: e = exp(-x), 1 + e, y = 1 / (1 + e)
    case Op::softplus:  // dx = g * sigmoid(x), the same stages (softplus' y has none)
      if (job.op == Op::softplus && !vjp) return;
      r.inside_float32_op = true;
      r.add(-x * kLog2E);
      r.add(log2_one_plus(-x * kLog2E));
      return;
    case Op::silu:  // sigmoid_split, x <= 0: e = exp(x), s = e / (1 + e); y = x * s
      if (x > 0) return;
      r.add(x * kLog2E);
      r.add(log2_sigmoid(x));
      return;
    case Op::gelu: {
      if (x == 0) return;
      const GeluConstants c = gelu_constants(job.dtype);
      if (!vjp) {  // y = (x * (t + 1)) * 0.5, t + 1 = 2 s(2u), u = (x + c x^3) k (u capped: tanh saturates)
        const double lu = lx + log2_one_plus(2 * lx + log2(c.c)) + log2(c.k);
        const double u = copysign(exp2(lu < 1000 ? lu : 1000), x);
        r.add(lx + 1 + log2_sigmoid(2 * u));
        return;
      }
      // dx: q = (x * c3) * x, q + 1, id = (q + 1) * k (then dt = (x * sech) * id)
      r.add(lx + log2(c.c3));
      r.add(2 * lx + log2(c.c3));
      r.add(log2_one_plus(2 * lx + log2(c.c3)));
      r.add(log2_one_plus(2 * lx + log2(c.c3)) + log2(c.k));
      return;
    }
    default:
      return;
  }
}

// The cause of one value above its bound (see Cause).
SWEEP_HD int cause_of(const Job& job, int output, const Inputs& in, double g) {
  if (in_domain(job, in)) return kCauseInDomain;
  if (!inputs_finite(job, in) || !is_finite(g)) return kCauseUnexplained;
  StagingRange r;
  range_limited_stages(job, output, in, g, r);
  const Format f = format_of(is_16bit(job.dtype) && r.inside_float32_op ? DType::float32 : job.dtype);
  // Overflow threshold: 2^(emax+1) (1 - 2^-(p+1)), the midpoint above the largest finite value; the
  // rounding error of the stages before (see Cause) can carry a stage that far from below it.
  const double threshold_log2 = f.max_exponent + 1 + log2(1 - ldexp(1.0, -(f.precision + 1)));
  if (r.max_log2 >= threshold_log2 + log2(1 - 4 * ldexp(1.0, -f.precision))) return kCauseOverflow;
  if (r.min_log2 < f.min_exponent) return kCauseUnderflow;
  return kCauseUnexplained;
}

// --- tallies: plain data, reduced with atomics on the device and added up on the host -------------
inline constexpr int kViolationSlots = 8;

// The binade of the first input (x, or a): its sign and floor(log2 |a|), from the smallest float64
// subnormal's -1074 up to 1023, so that a tally keeps the largest error per binade (error against
// input). Zero, infinities and NaN have no binade (-1).
inline constexpr int kBinadeMinExponent = -1074;
inline constexpr int kBinadeSpan = 1023 - kBinadeMinExponent + 1;
inline constexpr int kBinadeCount = 2 * kBinadeSpan;  // positive, then negative
SWEEP_HD int binade_of(double a) {
  if (a == 0 || !is_finite(a)) return -1;
  return (a < 0 ? kBinadeSpan : 0) + (ilogb(a) - kBinadeMinExponent);
}

struct OutputTally {
  unsigned long long histogram[kBucketCount];
  unsigned long long above_bound;                    // every case of the range
  unsigned long long above_by_cause[kCauseCount];    // the same, by cause (kCauseInDomain: violations)
  unsigned long long cause_example_key[kCauseCount];  // 1 + the largest case index of each cause; 0 = none
  unsigned long long worst_domain_key;               // see worst_key; 0 = none
  unsigned long long worst_finite_key;               // finite inputs with finite results
  unsigned long long worst_ratio_key;                // largest error / allowed (violations first)
  unsigned long long worst_ratio_domain_key;         // the same inside the domain
  unsigned long long violations_recorded;
  uint32_t violation_cases[kViolationSlots];
  unsigned long long worst_domain_by_binade[kBinadeCount];  // worst_domain_key per binade_of(a)
};

// A max-reduction key: the metric's float bits (+1, so that 0 means "none") above the case index.
// Non-negative floats order like their bits; +inf orders above every finite metric.
SWEEP_HD unsigned long long worst_key(double metric, uint32_t index) {
  const float m = static_cast<float>(metric);
  return (static_cast<unsigned long long>(bits_of_float(m) + 1u) << 32) | index;
}
SWEEP_HD bool key_present(unsigned long long key) { return key != 0; }
SWEEP_HD uint32_t key_case(unsigned long long key) { return static_cast<uint32_t>(key); }
SWEEP_HD double key_metric(unsigned long long key) {
  return float_from_bits(static_cast<uint32_t>(key >> 32) - 1u);
}

// One graded element, with what the tally needs.
struct ElementVerdict {
  Graded graded;
  bool domain = false, finite_inputs = false;
  int cause = kCauseInDomain;  // only for a value above its bound
  int binade = -1;             // binade_of the first input
};

SWEEP_HD ElementVerdict grade_element(const Job& job, int output, double g, Bound bound,
                                      const Inputs& in, double produced) {
  const DD exact = exact_value(job, output, in, g);
  const double w = abs_weight_value(job, output, in, g);
  ElementVerdict v;
  v.graded = grade_value(job.dtype, exact, produced, bound, w);
  v.domain = in_domain(job, in);
  v.finite_inputs = inputs_finite(job, in);
  v.binade = binade_of(in.a);
  if (!v.graded.within) v.cause = cause_of(job, output, in, g);
  return v;
}

// One verdict into a tally (the host's loops; the device keeps per-thread shares, sweep_cuda.cu).
inline void add_to_tally(OutputTally& t, const ElementVerdict& v, uint32_t index) {
  const Graded& r = v.graded;
  ++t.histogram[r.bucket];
  if (!r.within) {
    ++t.above_bound;
    ++t.above_by_cause[v.cause];
    const unsigned long long example = static_cast<unsigned long long>(index) + 1;
    if (example > t.cause_example_key[v.cause]) t.cause_example_key[v.cause] = example;
    if (t.violations_recorded < kViolationSlots) t.violation_cases[t.violations_recorded] = index;
    ++t.violations_recorded;
  }
  if (r.bucket < kNonfiniteExpected) {
    const unsigned long long key = worst_key(r.error_ulps, index);
    if (v.finite_inputs && key > t.worst_finite_key) t.worst_finite_key = key;
    if (v.domain && key > t.worst_domain_key) t.worst_domain_key = key;
    if (v.domain && v.binade >= 0 && key > t.worst_domain_by_binade[v.binade]) t.worst_domain_by_binade[v.binade] = key;
  }
  const unsigned long long ratio_key = worst_key(r.ratio, index);
  if (ratio_key > t.worst_ratio_key) t.worst_ratio_key = ratio_key;
  if (v.domain && ratio_key > t.worst_ratio_domain_key) t.worst_ratio_domain_key = ratio_key;
}

}  // namespace tapewise::conform::sweep

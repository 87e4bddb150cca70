// cuda/kernels/exact/exp_tanh.cuh — tapewise's own exp and tanh (exact mode): float32 correctly rounded on
// every input, float64 within 1 ulp; one source for the host (g++) and the GPU (nvcc, NVRTC), the same bits.
//
// All four reduce alike: x = k ln2/64 + r, |r| < 0.005416, e^x = 2^(k>>6) * 2^((k&63)/64) * e^r, with
// 2^(j/64) from a table of hi + lo doubles and e^r - 1 from a short polynomial. float32 computes that in
// double with a known error bound, then tests whether the double is farther than the bound from every
// float32 rounding boundary; the inputs that fail take a double-double slow path (relative error < 2^-95),
// rounded to odd and then to float. Checked on all 2^32 inputs of each against glibc's long double functions
// and, near a boundary, MPFR: every result correctly rounded; 7 (exp) and 32 (tanh) took the slow path.
#pragma once

#include "bits.cuh"

// 2^(j/64) for j = 0..63, each as hi = RN(2^(j/64)), lo = RN(2^(j/64) - hi), so |hi + lo - 2^(j/64)| <
// 2^-106 * 2^(j/64) (mpmath at 400 bits). One list of rows, which the device and the host read as columns.
// clang-format off
#define TW_EXACT_EXP2_64THS_HI_LO \
TW_EXP2_ROW(0x1.0000000000000p+0, 0x0p+0) TW_EXP2_ROW(0x1.02c9a3e778061p+0, -0x1.19083535b085dp-56) \
TW_EXP2_ROW(0x1.059b0d3158574p+0, 0x1.d73e2a475b465p-55) TW_EXP2_ROW(0x1.0874518759bc8p+0, 0x1.186be4bb284ffp-57) \
TW_EXP2_ROW(0x1.0b5586cf9890fp+0, 0x1.8a62e4adc610bp-54) TW_EXP2_ROW(0x1.0e3ec32d3d1a2p+0, 0x1.03a1727c57b53p-59) \
TW_EXP2_ROW(0x1.11301d0125b51p+0, -0x1.6c51039449b3ap-54) TW_EXP2_ROW(0x1.1429aaea92de0p+0, -0x1.32fbf9af1369ep-54) \
TW_EXP2_ROW(0x1.172b83c7d517bp+0, -0x1.19041b9d78a76p-55) TW_EXP2_ROW(0x1.1a35beb6fcb75p+0, 0x1.e5b4c7b4968e4p-55) \
TW_EXP2_ROW(0x1.1d4873168b9aap+0, 0x1.e016e00a2643cp-54) TW_EXP2_ROW(0x1.2063b88628cd6p+0, 0x1.dc775814a8495p-55) \
TW_EXP2_ROW(0x1.2387a6e756238p+0, 0x1.9b07eb6c70573p-54) TW_EXP2_ROW(0x1.26b4565e27cddp+0, 0x1.2bd339940e9d9p-55) \
TW_EXP2_ROW(0x1.29e9df51fdee1p+0, 0x1.612e8afad1255p-55) TW_EXP2_ROW(0x1.2d285a6e4030bp+0, 0x1.0024754db41d5p-54) \
TW_EXP2_ROW(0x1.306fe0a31b715p+0, 0x1.6f46ad23182e4p-55) TW_EXP2_ROW(0x1.33c08b26416ffp+0, 0x1.32721843659a6p-54) \
TW_EXP2_ROW(0x1.371a7373aa9cbp+0, -0x1.63aeabf42eae2p-54) TW_EXP2_ROW(0x1.3a7db34e59ff7p+0, -0x1.5e436d661f5e3p-56) \
TW_EXP2_ROW(0x1.3dea64c123422p+0, 0x1.ada0911f09ebcp-55) TW_EXP2_ROW(0x1.4160a21f72e2ap+0, -0x1.ef3691c309278p-58) \
TW_EXP2_ROW(0x1.44e086061892dp+0, 0x1.89b7a04ef80d0p-59) TW_EXP2_ROW(0x1.486a2b5c13cd0p+0, 0x1.3c1a3b69062f0p-56) \
TW_EXP2_ROW(0x1.4bfdad5362a27p+0, 0x1.d4397afec42e2p-56) TW_EXP2_ROW(0x1.4f9b2769d2ca7p+0, -0x1.4b309d25957e3p-54) \
TW_EXP2_ROW(0x1.5342b569d4f82p+0, -0x1.07abe1db13cadp-55) TW_EXP2_ROW(0x1.56f4736b527dap+0, 0x1.9bb2c011d93adp-54) \
TW_EXP2_ROW(0x1.5ab07dd485429p+0, 0x1.6324c054647adp-54) TW_EXP2_ROW(0x1.5e76f15ad2148p+0, 0x1.ba6f93080e65ep-54) \
TW_EXP2_ROW(0x1.6247eb03a5585p+0, -0x1.383c17e40b497p-54) TW_EXP2_ROW(0x1.6623882552225p+0, -0x1.bb60987591c34p-54) \
TW_EXP2_ROW(0x1.6a09e667f3bcdp+0, -0x1.bdd3413b26456p-54) TW_EXP2_ROW(0x1.6dfb23c651a2fp+0, -0x1.bbe3a683c88abp-57) \
TW_EXP2_ROW(0x1.71f75e8ec5f74p+0, -0x1.16e4786887a99p-55) TW_EXP2_ROW(0x1.75feb564267c9p+0, -0x1.0245957316dd3p-54) \
TW_EXP2_ROW(0x1.7a11473eb0187p+0, -0x1.41577ee04992fp-55) TW_EXP2_ROW(0x1.7e2f336cf4e62p+0, 0x1.05d02ba15797ep-56) \
TW_EXP2_ROW(0x1.82589994cce13p+0, -0x1.d4c1dd41532d8p-54) TW_EXP2_ROW(0x1.868d99b4492edp+0, -0x1.fc6f89bd4f6bap-54) \
TW_EXP2_ROW(0x1.8ace5422aa0dbp+0, 0x1.6e9f156864b27p-54) TW_EXP2_ROW(0x1.8f1ae99157736p+0, 0x1.5cc13a2e3976cp-55) \
TW_EXP2_ROW(0x1.93737b0cdc5e5p+0, -0x1.75fc781b57ebcp-57) TW_EXP2_ROW(0x1.97d829fde4e50p+0, -0x1.d185b7c1b85d1p-54) \
TW_EXP2_ROW(0x1.9c49182a3f090p+0, 0x1.c7c46b071f2bep-56) TW_EXP2_ROW(0x1.a0c667b5de565p+0, -0x1.359495d1cd533p-54) \
TW_EXP2_ROW(0x1.a5503b23e255dp+0, -0x1.d2f6edb8d41e1p-54) TW_EXP2_ROW(0x1.a9e6b5579fdbfp+0, 0x1.0fac90ef7fd31p-54) \
TW_EXP2_ROW(0x1.ae89f995ad3adp+0, 0x1.7a1cd345dcc81p-54) TW_EXP2_ROW(0x1.b33a2b84f15fbp+0, -0x1.2805e3084d708p-57) \
TW_EXP2_ROW(0x1.b7f76f2fb5e47p+0, -0x1.5584f7e54ac3bp-56) TW_EXP2_ROW(0x1.bcc1e904bc1d2p+0, 0x1.23dd07a2d9e84p-55) \
TW_EXP2_ROW(0x1.c199bdd85529cp+0, 0x1.11065895048ddp-55) TW_EXP2_ROW(0x1.c67f12e57d14bp+0, 0x1.2884dff483cadp-54) \
TW_EXP2_ROW(0x1.cb720dcef9069p+0, 0x1.503cbd1e949dbp-56) TW_EXP2_ROW(0x1.d072d4a07897cp+0, -0x1.cbc3743797a9cp-54) \
TW_EXP2_ROW(0x1.d5818dcfba487p+0, 0x1.2ed02d75b3707p-55) TW_EXP2_ROW(0x1.da9e603db3285p+0, 0x1.c2300696db532p-54) \
TW_EXP2_ROW(0x1.dfc97337b9b5fp+0, -0x1.1a5cd4f184b5cp-54) TW_EXP2_ROW(0x1.e502ee78b3ff6p+0, 0x1.39e8980a9cc8fp-55) \
TW_EXP2_ROW(0x1.ea4afa2a490dap+0, -0x1.e9c23179c2893p-54) TW_EXP2_ROW(0x1.efa1bee615a27p+0, 0x1.dc7f486a4b6b0p-54) \
TW_EXP2_ROW(0x1.f50765b6e4540p+0, 0x1.9d3e12dd8a18bp-54) TW_EXP2_ROW(0x1.fa7c1819e90d8p+0, 0x1.74853f3a5931ep-55)
// clang-format on

namespace tapewise::exact {
namespace detail::exp_tanh {

// hi and lo side by side, read together where both are wanted (one 16-byte read), and hi again alone as a
// column: exp's float fast path reads hi alone, and a warp's 32 random indices into 64 doubles touch at
// most four of the L1's 128-byte lines (eight in the pairs). The host reads both from columns: GCC 12 makes
// no vector gather of a pair read, nor of a double read at the pairs' 16-byte stride, and a pair read left
// tanh's first pass unvectorized, at 5x exp's time.
struct alignas(16) Exp2Of64th {
  double hi, lo;
};
#define TW_EXP2_ROW(hi, lo) {hi, lo},
TW_EXACT_TABLE Exp2Of64th kExp2Of64ths[64] = {TW_EXACT_EXP2_64THS_HI_LO};
#undef TW_EXP2_ROW
#define TW_EXP2_ROW(hi, lo) hi,
TW_EXACT_TABLE double kExp2Of64thsHi[64] = {TW_EXACT_EXP2_64THS_HI_LO};
#undef TW_EXP2_ROW
#if !defined(__CUDA_ARCH__)  // the host's (below)
#define TW_EXP2_ROW(hi, lo) lo,
TW_EXACT_TABLE double kExp2Of64thsLo[64] = {TW_EXACT_EXP2_64THS_HI_LO};
#undef TW_EXP2_ROW
#endif
#undef TW_EXACT_EXP2_64THS_HI_LO

// Adding 1.5 * 2^52 rounds a double below 2^51 to the nearest integer, which then sits in the low bits.
constexpr double kShifter = 0x1.8p52;
TW_EXACT_CONSTANT double kInvLn2By64 = 0x1.71547652b82fep+6;  // RN(64/ln2)
// ln2/64 = hi + lo + lo2 to 2^-170, each part the rounding of what the earlier parts leave.
TW_EXACT_CONSTANT double kLn2By64Hi = 0x1.62e42fefa39efp-7;
TW_EXACT_CONSTANT double kLn2By64Lo = 0x1.abc9e3b39803fp-62;
constexpr double kLn2By64Lo2 = 0x1.7b57a079a1934p-117;

// x = k ln2/64 + r. k is the integer nearest x * RN(64/ln2), which for |x| < 2^10 is within 2^-36 of
// x 64/ln2, so |r| <= (1/2 + 2^-36) ln2/64 < 0.005416, the polynomials' interval. r_hi = x - k hi is
// exact: it is below 2^-7 and a multiple of 2^-60 (hi's last bit is 2^-59, and k != 0 needs |x| > 2^-8,
// whose last bit is >= 2^-60), so 53 bits hold it. The rest of r is -k lo - k lo2.
struct Reduced {
  double k;
  std::int32_t k_int;
  double r_hi;
};
TW_EXACT_HD Reduced reduce(double x) {
  const double shifted = exact::fma(x, kInvLn2By64, kShifter);
  Reduced a;
  a.k = shifted - kShifter;
  a.k_int = static_cast<std::int32_t>(static_cast<std::uint32_t>(bits_of(shifted)));
  a.r_hi = exact::fma(a.k, -kLn2By64Hi, x);
  return a;
}

// r to 2^-53 |r| + 2^-99: what the fast paths use.
TW_EXACT_HD double reduced_double(const Reduced& a) { return exact::fma(a.k, -kLn2By64Lo, a.r_hi); }

// 2^e for e in [-1022, 1023], built from its bits; multiplying by it is exact while the product is normal.
TW_EXACT_HD double two_to(int e) { return double_of(static_cast<std::uint64_t>(e + 1023) << 52); }

TW_EXACT_HD Exp2Of64th exp2_64ths(int j) {
#if defined(__CUDA_ARCH__)
  const double2 pair = table_read(reinterpret_cast<const double2*>(kExp2Of64ths), static_cast<std::uint32_t>(j));
  return {pair.x, pair.y};
#else
  return {kExp2Of64thsHi[j], kExp2Of64thsLo[j]};
#endif
}
TW_EXACT_HD double exp2_64ths_hi(int j) { return table_read(kExp2Of64thsHi, static_cast<std::uint32_t>(j)); }

// e^r - 1 ~ r + r^2 (c2 + c3 r + c4 r^2 + c5 r^3), coefficients from Sollya's fpminimax (relative error,
// double coefficients) on [-0.005416, 0.005416]; its supnorm bounds the relative error of the exact
// polynomial by 4.0477e-16 < 2^-51.13. Evaluated in double it adds < 1.03 * 2^-53 |result|.
TW_EXACT_CONSTANT double kExpm1Poly5[4] = {0x1.1111140b17fc7p-7, 0x1.555570ab1948bp-5, 0x1.5555555556261p-3,
                                           0x1.fffffffffe5bdp-2};
TW_EXACT_HD double expm1_poly5(double r) {
  double tail = exact::fma(r, kExpm1Poly5[0], kExpm1Poly5[1]);
  tail = exact::fma(r, tail, kExpm1Poly5[2]);
  tail = exact::fma(r, tail, kExpm1Poly5[3]);
  return exact::fma(r * r, tail, r);
}

// The same at degree 6 for tanh's float64 path; supnorm of the relative error 1.9312e-19 < 2^-62.16. Returns
// the r^2 part alone, so the caller can add r and keep the rounding error of that sum.
TW_EXACT_HD double expm1_poly6_minus_r(double r) {
  double tail = exact::fma(r, 0x1.6c16ced2b322ap-10, 0x1.11112277ad0a6p-7);
  tail = exact::fma(r, tail, 0x1.55555555553e6p-5);
  tail = exact::fma(r, tail, 0x1.5555555554afcp-3);
  tail = exact::fma(r, tail, 0x1p-1);
  return (r * r) * tail;
}

// A float32 rounding boundary (the midpoint of two floats) has, for a double y of float's normal range, the
// 29 bits below float's last bit equal to 1000...0. The rounding of y is certain when its true value is
// within margin_ulps ulps of y and those bits are farther than that from the pattern.
TW_EXACT_HD bool float_rounding_is_certain(double y, std::uint32_t margin_ulps) {
  const std::uint32_t below_float = static_cast<std::uint32_t>(bits_of(y)) & 0x1FFFFFFFu;
  return below_float - (0x10000000u - margin_ulps) > 2u * margin_ulps;
}
// The same for a positive y of any size (subnormal float results): both ends of the interval round alike.
TW_EXACT_HD bool float_rounding_is_certain_anywhere(double y, std::uint64_t margin_ulps) {
  const std::uint64_t u = bits_of(y);
  return static_cast<float>(double_of(u - margin_ulps)) == static_cast<float>(double_of(u + margin_ulps));
}

// ---- The slow path's double-double arithmetic: a value is hi + lo, |lo| <= ulp(hi)/2 after each step.

struct DD {
  double hi;
  double lo;
};
TW_EXACT_HD DD fast_two_sum(double a, double b) {  // exact when a == 0 or |a| >= |b|
  const double s = a + b;
  return {s, b - (s - a)};
}
TW_EXACT_HD DD two_sum(double a, double b) {  // exact
  const double s = a + b;
  const double b_part = s - a;
  return {s, (a - (s - b_part)) + (b - b_part)};
}
TW_EXACT_HD DD two_prod(double a, double b) {  // exact
  const double p = a * b;
  return {p, exact::fma(a, b, -p)};
}
TW_EXACT_HD DD dd_add(DD a, DD b) {  // relative error < 3 * 2^-106, cancellation or not
  const DD s = two_sum(a.hi, b.hi);
  const DD t = two_sum(a.lo, b.lo);
  const DD u = fast_two_sum(s.hi, s.lo + t.hi);
  return fast_two_sum(u.hi, u.lo + t.lo);
}
TW_EXACT_HD DD dd_mul(DD a, DD b) {  // relative error < 2^-103
  const DD p = two_prod(a.hi, b.hi);
  return fast_two_sum(p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi));
}
TW_EXACT_HD DD dd_times_2_to(DD a, int e) { return {a.hi * two_to(e), a.lo * two_to(e)}; }  // exact (normal)

// a / b for positive a, b: a quotient, the remainder a - q1 b in double-double, a second quotient.
TW_EXACT_HD DD dd_div(DD a, DD b) {
  const double q1 = a.hi / b.hi;
  const DD q1_b = dd_mul(b, DD{q1, 0.0});
  const DD remainder = dd_add(a, DD{-q1_b.hi, -q1_b.lo});
  return fast_two_sum(q1, remainder.hi / b.hi);
}

// r = x - k ln2/64 in double-double, to 2^-105 |r| + 2^-150.
TW_EXACT_HD DD reduced_dd(const Reduced& a) {
  const DD k_lo = two_prod(a.k, kLn2By64Lo);
  const DD s = two_sum(a.r_hi, -k_lo.hi);
  return fast_two_sum(s.hi, (s.lo - k_lo.lo) - a.k * kLn2By64Lo2);
}

TW_EXACT_HD DD horner_step(DD acc, DD r, double c_hi, double c_lo) { return dd_add(dd_mul(acc, r), DD{c_hi, c_lo}); }

// e^r - 1 for |r| < 0.005416 by Taylor's series to r^10 (the rest is < |r|^10/11! < 2^-100.5 |result|), the
// coefficients 1/n! as hi + lo (mpmath): relative error < 2^-99.
TW_EXACT_HD DD expm1_dd(DD r) {
  DD acc{0x1.27e4fb7789f5cp-22, 0x1.cbbc05b4fa99ap-76};  // 1/10!
  acc = horner_step(acc, r, 0x1.71de3a556c734p-19, -0x1.c154f8ddc6c00p-73);
  acc = horner_step(acc, r, 0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-76);
  acc = horner_step(acc, r, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-73);
  acc = horner_step(acc, r, 0x1.6c16c16c16c17p-10, -0x1.f49f49f49f49fp-65);
  acc = horner_step(acc, r, 0x1.1111111111111p-7, 0x1.1111111111111p-63);
  acc = horner_step(acc, r, 0x1.5555555555555p-5, 0x1.5555555555555p-59);
  acc = horner_step(acc, r, 0x1.5555555555555p-3, 0x1.5555555555555p-57);
  acc = horner_step(acc, r, 0.5, 0.0);
  return dd_add(r, dd_mul(dd_mul(r, r), acc));
}

// Rounds a positive double-double to float once: rounding hi + lo to odd at 53 bits keeps the information a
// rounding to 24 (or fewer, subnormal) bits needs, so converting that double rounds as the exact sum would.
TW_EXACT_HD float round_to_float(DD y) {
  std::uint64_t u = bits_of(y.hi);
  if (y.lo != 0.0 && (u & 1u) == 0) u = y.lo > 0.0 ? u + 1 : u - 1;
  return static_cast<float>(double_of(u));
}

// 2^(k/64) (k = a.k_int) in double-double, to 2^-106 relative.
TW_EXACT_HD DD exp2_k_by_64_dd(const Reduced& a) {
  const int j = a.k_int & 63;
  const Exp2Of64th entry = exp2_64ths(j);
  return dd_times_2_to(DD{entry.hi, entry.lo}, a.k_int >> 6);
}

// e^x, relative error < 2^-98, for x in [-104, 89].
TW_EXACT_HD_NOINLINE float exp_float_slow(float x) {
  const Reduced a = reduce(x);
  const DD s = exp2_k_by_64_dd(a);
  return round_to_float(dd_add(s, dd_mul(s, expm1_dd(reduced_dd(a)))));
}

// tanh(x) = E / (E + 2), E = e^(2x) - 1 = (S - 1) + S (e^r - 1), S = 2^(k/64) >= 1: relative error < 2^-95
// for x in [2^-12, 10] (S - 1 >= 2^(1/64) - 1 once k > 0, so no cancellation costs more than 2^8).
TW_EXACT_HD_NOINLINE float tanh_float_slow(float x) {
  const Reduced a = reduce(2.0 * static_cast<double>(x));
  const DD s = exp2_k_by_64_dd(a);
  const DD e_minus_1 = dd_add(dd_add(s, DD{-1.0, 0.0}), dd_mul(s, expm1_dd(reduced_dd(a))));
  return round_to_float(dd_div(e_minus_1, dd_add(e_minus_1, DD{2.0, 0.0})));
}

TW_EXACT_HD float exp_float_outside(float x) {  // NaN, and x beyond [-104, 89]: inf or +0 there
  if (x != x) return x + x;
  return x > 0.0f ? float_of(0x7F800000u) : 0.0f;
}

// exp's fast path in double (the scalar function's and the speculative first pass's), x in [-104, 89].
TW_EXACT_HD double exp_of_float_fast(float x) {
  const Reduced a = reduce(static_cast<double>(x));
  const double s = exp2_64ths_hi(a.k_int & 63);  // 2^((k&63)/64) to 2^-53
  return exact::fma(s, expm1_poly5(reduced_double(a)), s) * two_to(a.k_int >> 6);
}

}  // namespace detail::exp_tanh

// Correctly rounded e^x. Fast path error, before the final rounding, in ulps of the double y: the table's
// hi (2^-53 relative) + the polynomial and reduction (< 2^-57.9) + fma's rounding < 1.54 ulp(y); the test
// allows 4. exp(x) < 2^-150 (rounds to +0) below x = -103.98 and >= FLT_MAX + ulp/2 (inf) above 88.73.
TW_EXACT_HD float exp(float x) {
  using namespace detail::exp_tanh;
  if (!(x >= -104.0f && x <= 89.0f)) return exp_float_outside(x);
  const double y = exp_of_float_fast(x);
  const bool certain = y >= 0x1p-126 ? float_rounding_is_certain(y, 4) : float_rounding_is_certain_anywhere(y, 4);
  return certain ? static_cast<float>(y) : exp_float_slow(x);
}

namespace detail::exp_tanh {

// e / d for e > 0 and d = RN(e + 2) in [2, 2^29], without a double division (the division is most of
// tanh's cost in vector lanes, and long on the GPU): r0 = reciprocal_seed(d), delta = 1 - d r0 (by fma,
// exact: |delta| < 2^-18), q0 = RN(e r0), and e / d = q0 (1 + delta + delta^2 + ...) / (1 + eta0) taken to
// delta^2: RN(q0 + q0 RN(delta + delta^2)). Beyond e / d: q0's rounding 2^-53, the dropped delta^3 < 2^-54,
// the inner sum's rounding < 2^-70 and the final rounding's half ulp: < 2^-51.6 relative (a correctly rounded
// division gives the half ulp alone). Four operations, the last three a chain of two. r0 differs between the
// CPU and the GPU, so the two doubles may differ by an ulp; the floats tanh returns do not (each is the
// correctly rounded tanh or goes to the slow path).
TW_EXACT_HD double ratio_to_rounded_sum(double e, double d) {
  const double r0 = reciprocal_seed(d);
  const double delta = exact::fma(-d, r0, 1.0);
  const double q0 = e * r0;
  return exact::fma(q0, exact::fma(delta, delta, delta), q0);
}

// tanh's fast path in double (the scalar function's and the speculative first pass's), |x| = ax in
// [0, 10]. E = S e^r - 1, S = 2^(k/64) = (hi + lo) 2^(k>>6): (S_hi - 1) + 2^(k>>6) (hi (e^r - 1) + lo), with
// S_hi = hi 2^(k>>6) (exact; S_hi - 1 exact by Sterbenz or a power of 2 away) and r = r_hi: the reduction's
// low part |k| lo < 2^-50.4 is left out, which moves E by < 2^-53.7 of itself (at k = 1, E >= 2^-7.53; for
// larger k, S / E falls faster than k grows).
TW_EXACT_HD double tanh_of_float_fast(float ax) {
  const Reduced a = reduce(static_cast<double>(2.0f * ax));  // 2|x| <= 20: exact in float
  const double scale = two_to(a.k_int >> 6);
  const Exp2Of64th entry = exp2_64ths(a.k_int & 63);
  const double s_hi_minus_1 = entry.hi * scale - 1.0;
  const double e_minus_1 = exact::fma(exact::fma(entry.hi, expm1_poly5(a.r_hi), entry.lo), scale, s_hi_minus_1);
  return ratio_to_rounded_sum(e_minus_1, e_minus_1 + 2.0);
}

#if !defined(__CUDA_ARCH__)
// The CPU's first pass for tanh computes without the table, whose two reads are vector gathers there (a
// third of the pass on a Zen 4 core; exp's one read costs it little, and exp keeps the table): z = k ln2 + r,
// k = round(z / ln2), 2^k built from its bits, e^r - 1 from Taylor's series. For z in [0, 20]: k in [0, 29],
// |r| < 0.3467. r = (z - k hi) - k lo, ln2 = hi + lo to 2^-110: each fma is rounded once, < 2^-55 each (|r| <
// 2^-1), so |r's error| < 2^-54 (0 where k = 0). q = e^r - 1 to r^13, |q| >= 0.826 |r|: the rest is < 0.3467^13
// e^0.3467 / (14! 0.826) < 2^-55.4 |q|, and Horner in double adds < 1.56 * 2^-53 |q| (r^2 tail is at most 0.184
// |q|): q within 1.75 * 2^-53 |q|. On every float32 input the CPU's two passes give exact::tanh's bits
// (tapewise_tests with TAPEWISE_VECTOR_MATH_ALL=tanh).
constexpr double kInvLn2 = 0x1.71547652b82fep+0;  // RN(1/ln2)
constexpr double kLn2Hi = 0x1.62e42fefa39efp-1;
constexpr double kLn2Lo = 0x1.abc9e3b39803fp-56;
struct ReducedByLn2 {
  double r;
  int k;
};
inline ReducedByLn2 reduce_by_ln2(double z) {
  const double shifted = exact::fma(z, kInvLn2, kShifter);
  const double k = shifted - kShifter;
  return {exact::fma(k, -kLn2Lo, exact::fma(k, -kLn2Hi, z)),
          static_cast<std::int32_t>(static_cast<std::uint32_t>(bits_of(shifted)))};
}
inline double expm1_taylor13(double r) {
  // 1/13! .. 1/2!, rounded to double; written out, as a loop here keeps GCC 12 from vectorizing the pass.
  double tail = exact::fma(r, 0x1.6124613a86d09p-33, 0x1.1eed8eff8d898p-29);
  tail = exact::fma(r, tail, 0x1.ae64567f544e4p-26);
  tail = exact::fma(r, tail, 0x1.27e4fb7789f5cp-22);
  tail = exact::fma(r, tail, 0x1.71de3a556c734p-19);
  tail = exact::fma(r, tail, 0x1.a01a01a01a01ap-16);
  tail = exact::fma(r, tail, 0x1.a01a01a01a01ap-13);
  tail = exact::fma(r, tail, 0x1.6c16c16c16c17p-10);
  tail = exact::fma(r, tail, 0x1.1111111111111p-7);
  tail = exact::fma(r, tail, 0x1.5555555555555p-5);
  tail = exact::fma(r, tail, 0x1.5555555555555p-3);
  tail = exact::fma(r, tail, 0x1p-1);
  return exact::fma(r * r, tail, r);
}
// tanh|x| = E / (E + 2) for |x| = ax in [0, 10] (k in [0, 29]): E = 2^k q + (2^k - 1) by one fma (2^k - 1
// exact), relative error < 2^-53 (the fma) + 1.415 * 1.75 * 2^-53 (q's, times 2^k |q| / E <= 1.415 at k = 1) +
// 3.42 * 2^-54 (r's, times 2^k e^r / E <= 3.42) < 2^-50.6. With the sum E + 2 (2^-53) and the quotient (<
// 2^-51.6): < 2^-49.8 relative, under the 2^-49.3 that tanh's certainty test (32 ulps) is set for.
inline double tanh_of_float_fast_without_table(float ax) {
  const ReducedByLn2 a = reduce_by_ln2(static_cast<double>(2.0f * ax));  // 2|x| <= 20: exact in float
  const double scale = two_to(a.k);
  const double e_minus_1 = exact::fma(scale, expm1_taylor13(a.r), scale - 1.0);
  return ratio_to_rounded_sum(e_minus_1, e_minus_1 + 2.0);
}
#endif

}  // namespace detail::exp_tanh

// Correctly rounded tanh(x) = sign(x) E / (E + 2), E = e^(2|x|) - 1 computed as (S_hi - 1) + 2^(k>>6) (hi q +
// lo) with S = 2^(k/64) and q = e^r - 1 (tanh_of_float_fast). E's relative error < 2^-49.9 (worst at k = 1,
// q < 0) + 2^-53.7 (r's low part left out) < 2^-49.8, which moves E / (E + 2) by at most as much; the sum
// E + 2 and the quotient (ratio_to_rounded_sum) add 2^-53 + 2^-51.6: < 2^-49.3 relative, < 13 ulps of the
// double; the test allows 32. |x| < 2^-12: tanh(x) = x (x - x^3/3 < tanh x < x,
// x^2/3 < 2^-25.58 of x, under half the gap below x). |x| >= 10 > 13 ln2: 1 - tanh|x| < 2 e^(-2|x|) < 2^-25,
// so +-1.
TW_EXACT_HD float tanh(float x) {
  using namespace detail::exp_tanh;
  const std::uint32_t sign = bits_of(x) & 0x80000000u;
  const float ax = float_of(bits_of(x) ^ sign);
  if (!(ax >= 0x1p-12f)) return ax != ax ? x + x : x;
  if (ax >= 10.0f) return float_of(sign | 0x3F800000u);
  const double y = tanh_of_float_fast(ax);
  const float magnitude = float_rounding_is_certain(y, 32) ? static_cast<float>(y) : tanh_float_slow(ax);
  return float_of(bits_of(magnitude) | sign);
}

namespace detail::exp_tanh {

// (hi + rest) 2^e, rounded once, where one multiplication by 2^e would not do: e > 1022 (2^e itself
// overflows: scale by 2^(e-2) exactly, then by 4) and e <= -1022, where the result may be subnormal and
// rounding hi + rest first would round twice. There: scale to c (hi + rest) < 2.03, c = 2^(e+1022), exactly;
// below 1, add 1, whose binade has the subnormals' quantum 2^-1074 = 2^-52 * 2^-1022, and take it off.
TW_EXACT_HD double exp_double_scaled_far(double hi, double rest, int e) {
  if (e > 1022) return ((hi + rest) * two_to(e - 2)) * 4.0;
  const double c = two_to(e + 1022);
  const double scaled_hi = hi * c;
  const double scaled_rest = rest * c;
  const double sum = scaled_hi + scaled_rest;
  if (sum >= 1.0) return sum * 0x1p-1022;
  const DD one_plus = fast_two_sum(1.0, scaled_hi);
  return ((one_plus.hi + (one_plus.lo + scaled_rest)) - 1.0) * 0x1p-1022;
}

TW_EXACT_HD double exp_double_outside(double x) {  // NaN, and x beyond [-746, 710]: inf or +0 there
  if (x != x) return x + x;
  return x > 0.0 ? double_of(0x7FF0000000000000ull) : 0.0;
}

// e^z - 1 for z in [2^-26, 44] as an unnormalized double-double, relative error < 2^-58.9: q = e^r - 1 to
// 2^-62 (degree 6, r_hi + its square part as a pair, r's low part k lo added as r_lo (1 + r_hi)), then
// (S_hi - 1) + S_hi q_hi exactly and the small terms (S_hi q_lo, S_lo (1 + q)) rounded.
TW_EXACT_HD DD expm1_double_dd(double z) {
  const Reduced a = reduce(z);
  const double r_lo = -a.k * kLn2By64Lo;  // |r_lo| < 2^-48, rounding < 2^-101
  const DD q = fast_two_sum(a.r_hi, expm1_poly6_minus_r(a.r_hi));
  const double q_lo = q.lo + exact::fma(r_lo, a.r_hi, r_lo);
  const double scale = two_to(a.k_int >> 6);
  const Exp2Of64th entry = exp2_64ths(a.k_int & 63);
  const double s_hi = entry.hi * scale;
  const double s_lo = entry.lo * scale;
  const double s_minus_1 = s_hi - 1.0;  // s_hi >= 1: fast_two_sum(s_hi, -1)
  const double s_minus_1_lo = (s_hi - s_minus_1) - 1.0;
  const DD s_q = two_prod(s_hi, q.hi);
  const DD sum = two_sum(s_minus_1, s_q.hi);
  return {sum.hi, sum.lo + ((s_minus_1_lo + s_q.lo) + (s_hi * q_lo + exact::fma(s_lo, q.hi, s_lo)))};
}

// e / (e + 2) for e > 0: a quotient from one reciprocal, then its remainder (exact by fma, plus the low
// parts) times the reciprocal as a correction; beyond the final rounding, the error is < 2^-100 relative.
TW_EXACT_HD double ratio_to_sum_with_2(DD e) {
  const DD d = two_sum(e.hi, 2.0);
  const double d_lo = d.lo + e.lo;
  const double inverse = 1.0 / d.hi;
  const double q0 = e.hi * inverse;
  const double remainder = exact::fma(-q0, d.hi, e.hi) + (e.lo - q0 * d_lo);
  return exact::fma(remainder, inverse, q0);
}

}  // namespace detail::exp_tanh

// e^x within 1 ulp: hi + rest, rest = hi q + lo, errs by < 0.5 ulp (the sum's rounding) + 0.011 ulp (the
// fma's) + 0.07 ulp (q's absolute error < 2^-57.9, times hi < 2): < 0.6 ulp; scaling by 2^e is exact, or is
// that one rounding (subnormal results, overflow).
TW_EXACT_HD double exp(double x) {
  using namespace detail::exp_tanh;
  if (!(x >= -746.0 && x <= 710.0)) return exp_double_outside(x);  // e^-745.14 < 2^-1075, e^709.79 > DBL_MAX
  const Reduced a = reduce(x);
  const Exp2Of64th entry = exp2_64ths(a.k_int & 63);
  const double hi = entry.hi;
  const double rest = exact::fma(hi, expm1_poly5(reduced_double(a)), entry.lo);
  const int e = a.k_int >> 6;
  if (e >= -1021 && e <= 1022) return (hi + rest) * two_to(e);
  return exp_double_scaled_far(hi, rest, e);
}

// tanh(x) within 1 ulp: E = e^(2|x|) - 1 to 2^-58.9, E / (E + 2) rounded once: < 0.52 ulp. |x| < 2^-27:
// tanh(x) rounds to x (x^2/3 < 2^-55.58 of x). |x| >= 22 > 27.5 ln2: 1 - tanh|x| < 2 e^(-2|x|) < 2^-54, so +-1.
TW_EXACT_HD double tanh(double x) {
  using namespace detail::exp_tanh;
  const std::uint64_t sign = bits_of(x) & 0x8000000000000000ull;
  const double ax = double_of(bits_of(x) ^ sign);
  if (!(ax >= 0x1p-27)) return ax != ax ? x + x : x;
  if (ax >= 22.0) return double_of(sign | 0x3FF0000000000000ull);
  const double magnitude = ratio_to_sum_with_2(expm1_double_dd(2.0 * ax));
  return double_of(bits_of(magnitude) | sign);
}

}  // namespace tapewise::exact

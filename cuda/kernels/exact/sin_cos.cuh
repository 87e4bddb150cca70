// cuda/kernels/exact/sin_cos.cuh — tapewise's own sin and cos (exact mode): float32 correctly rounded
// on every input, float64 within 1 ulp, the same bits from g++, nvcc and NVRTC (bits.cuh says how).
#pragma once

#include "bits.cuh"

// How it works. Two reductions of x to x = k*pi/2 + r:
// - |x| < 2^28: Cody-Waite, pi/2 as P1 + P2 + P3 (three doubles, the nearest double to what is left at
//   each step). x - k*P1 is exact (below), so r carries only the roundings of the later steps.
// - larger |x|: Payne-Hanek, the bits of 2/pi that matter for x's exponent, times x's significand in
//   integer arithmetic (exact), k the nearest integer (the quadrant k mod 4) and the fraction to a
//   double-double r, |r| <= pi/4 (relative error < 2^-100 for floats, < 2^-75 for doubles).
// float32: sin x and cos x are both +-sin r of an r in [-pi/2, pi/2]: below 2^28, k is the integer of
// sin's (even) or cos's (odd) parity nearest 2x/pi; above, cos r = sin(pi/2 - |r|) where the quadrant
// asks for a cosine. One polynomial of degree 15 in double then (error < 7.5 * 2^-53 relative, derived
// above kFastPathUlps), and a rounding test: unless the double result lies within 16 double ulps of a
// point halfway between two floats, it rounds to the float the exact value rounds to. Otherwise (158
// of sin's and 164 of cos's 2^32 inputs) the slow path: Payne-Hanek for every |x|, Taylor series in
// double-double (error < 2^-97), rounded once. The exhaustive check (every float32 input against glibc's
// long double sinl/cosl, MPFR where those are not decisive) found no result off.
// float64: x = k*pi/2 + r with |r| <= pi/4 (k mod 4 = the quadrant, giving +-sin r or +-cos r), r as a
// double-double, polynomials of degree 15 (sin) and 14 (cos), error < 0.84 ulp by the analysis at
// sin_kernel and cos_kernel (0.72 ulp the most measured on 10^8 inputs against MPFR and long double).
namespace tapewise::exact {
namespace detail::trig {

struct DoubleDouble {
  double hi, lo;
};

// A reduced argument: x = (quadrant + 4n) * pi/2 + hi + lo, |hi + lo| <= pi/4 (1 + 2^-20).
struct Reduced {
  double hi, lo;
  unsigned quadrant;
};

// Bits of 2/pi after the binary point, 32 to a word, most significant first: word j holds bits
// 32j+1 .. 32j+32. Generated with MPFR: mpfr_const_pi at 2000 bits, 2 / pi, then 37 times: multiply by
// 2^32 and take the integer part (mpfr_get_ui, round toward zero) as the word, keep the fraction. The
// largest double (53-bit significand times 2^971) reads up to word 36: 37 words, 1184 bits.
#define TW_EXACT_TWO_OVER_PI_WORDS                                                                      \
  0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u, 0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u, \
      0xB7246E3Au, 0x424DD2E0u, 0x06492EEAu, 0x09D1921Cu, 0xFE1DEB1Cu, 0xB129A73Eu, 0xE88235F5u,         \
      0x2EBB4484u, 0xE99C7026u, 0xB45F7E41u, 0x3991D639u, 0x835339F4u, 0x9C845F8Bu, 0xBDF9283Bu,         \
      0x1FF897FFu, 0xDE05980Fu, 0xEF2F118Bu, 0x5A0A6D1Fu, 0x6D367ECFu, 0x27CB09B7u, 0x4F463F66u,         \
      0x9E5FEA2Du, 0x7527BAC7u, 0xEBE5F17Bu, 0x3D0739F7u, 0x8A5292EAu, 0x6BFB5FB1u, 0x1F8D5D08u,         \
      0x56033046u
constexpr int kTwoOverPiWordCount = 37;
TW_EXACT_TABLE std::uint32_t kTwoOverPiWords[kTwoOverPiWordCount] = {TW_EXACT_TWO_OVER_PI_WORDS};
#undef TW_EXACT_TWO_OVER_PI_WORDS

// 1/n! for n = 0..27 as double-doubles (hi, lo): the nearest double, then the nearest double to the
// rest (MPFR at 2000 bits). The slow path's Taylor series.
#define TW_EXACT_INVERSE_FACTORIALS                                                                    \
  0x1p+0, 0x0p+0, 0x1p+0, 0x0p+0, 0x1p-1, 0x0p+0, 0x1.5555555555555p-3, 0x1.5555555555555p-57,          \
      0x1.5555555555555p-5, 0x1.5555555555555p-59, 0x1.1111111111111p-7, 0x1.1111111111111p-63,         \
      0x1.6c16c16c16c17p-10, -0x1.f49f49f49f49fp-65, 0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-73,       \
      0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-76, 0x1.71de3a556c734p-19, -0x1.c154f8ddc6cp-73,         \
      0x1.27e4fb7789f5cp-22, 0x1.cbbc05b4fa99ap-76, 0x1.ae64567f544e4p-26, -0x1.c062e06d1f209p-80,       \
      0x1.1eed8eff8d898p-29, -0x1.2aec959e14c06p-83, 0x1.6124613a86d09p-33, 0x1.f28e0cc748ebep-87,       \
      0x1.93974a8c07c9dp-37, 0x1.05d6f8a2efd1fp-92, 0x1.ae7f3e733b81fp-41, 0x1.1d8656b0ee8cbp-97,        \
      0x1.ae7f3e733b81fp-45, 0x1.1d8656b0ee8cbp-101, 0x1.952c77030ad4ap-49, 0x1.ac981465ddc6cp-103,      \
      0x1.6827863b97d97p-53, 0x1.eec01221a8b0bp-107, 0x1.2f49b46814157p-57, 0x1.2650f61dbdcb4p-112,      \
      0x1.e542ba4020225p-62, 0x1.ea72b4afe3c2fp-120, 0x1.71b8ef6dcf572p-66, -0x1.d043ae40c4647p-120,     \
      0x1.0ce396db7f853p-70, -0x1.aebcdbd20331cp-124, 0x1.761b41316381ap-75, -0x1.3423c7d91404fp-130,    \
      0x1.f2cf01972f578p-80, -0x1.9ada5fcc1ab14p-135, 0x1.3f3ccdd165fa9p-84, -0x1.58ddadf344487p-139,    \
      0x1.88e85fc6a4e5ap-89, -0x1.71c37ebd1654p-143, 0x1.d1ab1c2dccea3p-94, 0x1.054d0c78aea14p-149
constexpr int kInverseFactorialCount = 28;
TW_EXACT_TABLE double kInverseFactorials[2 * kInverseFactorialCount] = {TW_EXACT_INVERSE_FACTORIALS};
#undef TW_EXACT_INVERSE_FACTORIALS

// pi/2 = kPio2Part1 + kPio2Part2 + kPio2Part3 + (< 2^-163.6), each the nearest double to what is left
// (MPFR). kPio2Part1 is a multiple of 2^-52.
TW_EXACT_CONSTANT double kPio2Part1 = 0x1.921fb54442d18p+0;
TW_EXACT_CONSTANT double kPio2Part2 = 0x1.1a62633145c07p-54;
TW_EXACT_CONSTANT double kPio2Part3 = -0x1.f1976b7ed8fbcp-110;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;  // nearest double, |error| < 2^-54
// Adding 1.5 * 2^52 to a double below 2^51 in magnitude rounds it to an integer (ties to even), which
// the low bits of the sum then hold in two's complement.
constexpr double kRoundingShifter = 0x1.8p52;

// ---- double-double arithmetic (Dekker, Knuth; fma for the exact product's error)

TW_EXACT_HD DoubleDouble two_sum(double a, double b) {
  const double s = a + b;
  const double b_part = s - a;
  return {s, (a - (s - b_part)) + (b - b_part)};
}
// Needs |a| >= |b| (or a == 0).
TW_EXACT_HD DoubleDouble fast_two_sum(double a, double b) {
  const double s = a + b;
  return {s, b - (s - a)};
}
TW_EXACT_HD DoubleDouble dd_mul(DoubleDouble a, DoubleDouble b) {
  const double p = a.hi * b.hi;
  const double p_error = exact::fma(a.hi, b.hi, -p);
  return fast_two_sum(p, p_error + exact::fma(a.hi, b.lo, a.lo * b.hi));
}
TW_EXACT_HD DoubleDouble dd_add(DoubleDouble a, DoubleDouble b) {
  const DoubleDouble high = two_sum(a.hi, b.hi);
  const DoubleDouble low = two_sum(a.lo, b.lo);
  const DoubleDouble s = fast_two_sum(high.hi, high.lo + low.hi);
  return fast_two_sum(s.hi, s.lo + low.lo);
}

// ---- reductions

// |x| < 2^28, any double (a float's too): k = nearest integer to x * kTwoOverPi (|k| < 2^27.4), r as a
// double-double. x - k * P1 is exact: |x - k * P1| < 1 and both are multiples of 2^-53 where k != 0
// (|x| >= pi/4 > 1/2). p = k * P2 and s = x - k * P1 - p are split exactly (fma, two_sum); what is
// dropped is k * (pi/2 - P1 - P2 - P3) < 2^-135.6 and two roundings of the small low part, each
// < 2^-53 * 2^-52 (|s| + |p|): the absolute error of r is < 2^-104.9 |r| + 2^-130, relative < 2^-69.5
// for doubles (|r| >= 2^-60.49 below 2^28, a continued-fraction bound per binade) and < 2^-100 for
// floats (|r| >= 2^-29.21 for every float, exhaustively: the nearest is 16367173 * 2^72).
TW_EXACT_HD Reduced reduce_moderate(double x) {
  const double shifted = exact::fma(x, kTwoOverPi, kRoundingShifter);
  const double k = shifted - kRoundingShifter;
  const double r1 = exact::fma(-k, kPio2Part1, x);
  const double p = k * kPio2Part2;
  const double p_error = exact::fma(k, kPio2Part2, -p);
  const DoubleDouble s = two_sum(r1, -p);
  const double low = exact::fma(-k, kPio2Part3, s.lo - p_error);
  const DoubleDouble r = fast_two_sum(s.hi, low);
  return {r.hi, r.lo, static_cast<unsigned>(bits_of(shifted)) & 3u};
}

TW_EXACT_HD std::uint32_t two_over_pi_word(int j) { return j < 0 ? 0u : kTwoOverPiWords[j]; }

// 192 bits of 2/pi times 2^e, reduced mod 4: the bits of 2/pi whose weights 2^(e - i) lie in
// [2^-190, 2^1], as six words, most significant first (the two top bits are the integer part).
// Bits of weight >= 4 would only add multiples of 4 to x * 2/pi; those below 2^-190 add less than
// m * 2^-190 to it, under 2^-137 for m < 2^53.
TW_EXACT_HD void two_over_pi_window(int e, std::uint32_t window[6]) {
  const int first_bit = e - 2;  // bit i (from 1) of 2/pi is stream bit i - 1; this one has weight 2^1
  const int word = first_bit >> 5;  // floor division (C++20 shifts signed values arithmetically)
  const int offset = first_bit & 31;
  std::uint32_t words[7];
  for (int n = 0; n < 7; ++n) words[n] = two_over_pi_word(word + n);
  for (int n = 0; n < 6; ++n) {
    const std::uint64_t pair = (static_cast<std::uint64_t>(words[n]) << 32) | words[n + 1];
    window[n] = static_cast<std::uint32_t>((pair << offset) >> 32);
  }
}

// 32 x 32 -> 64-bit product (one wide multiply on the GPU).
TW_EXACT_HD std::uint64_t wide_product(std::uint32_t a, std::uint32_t b) { return static_cast<std::uint64_t>(a) * b; }

// m * window mod 2^192, six 32-bit limbs, least significant first. m < 2^53 as two limbs; each column
// adds five terms < 2^32, so the 64-bit sum cannot overflow.
TW_EXACT_HD void multiply_window(std::uint64_t m, const std::uint32_t window[6], std::uint32_t product[6]) {
  const std::uint32_t m_low = static_cast<std::uint32_t>(m), m_high = static_cast<std::uint32_t>(m >> 32);
  std::uint64_t carry = 0, pending_low_high = 0, pending_high_high = 0, previous_high = 0;
  for (int w = 0; w < 6; ++w) {
    const std::uint32_t a = window[5 - w];
    const std::uint64_t by_low = wide_product(a, m_low);  // weight 2^(32w)
    const std::uint64_t column =
        carry + (by_low & 0xFFFFFFFFu) + pending_low_high + (previous_high & 0xFFFFFFFFu) + pending_high_high;
    product[w] = static_cast<std::uint32_t>(column);
    carry = column >> 32;
    pending_low_high = by_low >> 32;
    pending_high_high = previous_high >> 32;
    previous_high = wide_product(a, m_high);  // weight 2^(32(w+1))
  }
}

// The fraction limbs as a double-double, limb n of weight 2^(-30 - 32n): nonnegative terms summed from
// the smallest, so the result is within 2^-104 of the sum relatively, however many leading zeros.
TW_EXACT_HD DoubleDouble fraction_to_double_double(const std::uint32_t fraction[6]) {
  const double scale[6] = {0x1p-30, 0x1p-62, 0x1p-94, 0x1p-126, 0x1p-158, 0x1p-190};
  DoubleDouble sum{static_cast<double>(fraction[5]) * scale[5], 0.0};
  for (int n = 4; n >= 0; --n) {
    const DoubleDouble s = two_sum(static_cast<double>(fraction[n]) * scale[n], sum.hi);
    sum = {s.hi, sum.lo + s.lo};
  }
  return fast_two_sum(sum.hi, sum.lo);
}

// Payne-Hanek: |x| = m * 2^e, m < 2^53, any e a double or a float has. x * 2/pi mod 4 from the window
// (exact integer product), rounded to the nearest integer k (the quadrant, k mod 4) with the fraction
// f in [-1/2, 1/2] kept as 190 bits, then r = f * pi/2. Errors: the window's 2^-137 absolute, against
// |f| >= 2^-61.5 for doubles (2^-29.9 for floats), plus 2^-103 from the double-double steps: r's
// relative error < 2^-75 for doubles, < 2^-100 for floats.
TW_EXACT_HD_NOINLINE Reduced reduce_large(std::uint64_t m, int e) {
  std::uint32_t window[6], product[6];
  two_over_pi_window(e, window);
  multiply_window(m, window, product);
  const std::uint32_t top = product[5];
  const std::uint32_t round_up = (top >> 29) & 1u;  // fraction >= 1/2: k is one more, f = -(1 - fraction)
  std::uint32_t fraction[6];
  const std::uint32_t flip = 0u - round_up;
  std::uint64_t carry = round_up;  // two's complement: 2^190 - F = ~F + 1 (mod 2^190)
  for (int n = 5; n >= 0; --n) {
    const std::uint64_t limb = static_cast<std::uint64_t>(product[5 - n] ^ flip) + carry;
    fraction[n] = static_cast<std::uint32_t>(limb);
    carry = limb >> 32;
  }
  fraction[0] &= 0x3FFFFFFFu;
  const DoubleDouble f = fraction_to_double_double(fraction);
  const double hi = f.hi * kPio2Part1;
  const double low = exact::fma(f.hi, kPio2Part1, -hi) + exact::fma(f.hi, kPio2Part2, f.lo * kPio2Part1);
  const DoubleDouble r = fast_two_sum(hi, low);
  const double sign = round_up ? -1.0 : 1.0;
  return {sign * r.hi, sign * r.lo, ((top >> 30) + round_up) & 3u};
}

// x = (-quadrant) * pi/2 + (-r) for -x.
TW_EXACT_HD Reduced negated(Reduced a) { return {-a.hi, -a.lo, (4u - a.quadrant) & 3u}; }

TW_EXACT_HD Reduced reduce_large(float x) {
  const std::uint32_t bits = bits_of(x);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;  // a normal float here
  const Reduced r = reduce_large((magnitude & 0x7FFFFFu) | 0x800000u, static_cast<int>(magnitude >> 23) - 150);
  return (bits >> 31) ? negated(r) : r;
}
TW_EXACT_HD Reduced reduce_large(double x) {
  const std::uint64_t bits = bits_of(x);
  const std::uint64_t magnitude = bits & 0x7FFFFFFFFFFFFFFFu;  // a normal double here
  const Reduced r = reduce_large((magnitude & 0xFFFFFFFFFFFFFu) | (1ull << 52), static_cast<int>(magnitude >> 52) - 1075);
  return (bits >> 63) ? negated(r) : r;
}

// ---- float32: the fast path

// c0 + z (c1 + z (c2 + ...)), one fma a step (the coefficients stay constants in the code on the GPU).
TW_EXACT_HD double horner(double, double c) { return c; }
template <class... Rest>
TW_EXACT_HD double horner(double z, double c, Rest... rest) {
  return exact::fma(horner(z, rest...), z, c);
}

// cos r ~ 1 - r^2/2 + r^4 q(r^2) on |r| <= 0.7854 (pi/4 + 1.9e-6: covers k off by one from kTwoOverPi's
// rounding up to |x| = 2^34), degree 14, < 2^-63.93 relative (Sollya's fpminimax and supnorm; float64's
// cos_kernel).
TW_EXACT_HD constexpr double cos_q(int i) {
  constexpr double c[6] = {0x1.555555555554bp-5,  -0x1.6c16c16c15018p-10, 0x1.a01a019c8f942p-16,
                           -0x1.27e4f7f1ee40cp-22, 0x1.1ee9dc126f3cdp-29,  -0x1.8fa6a868179ep-37};
  return c[i];
}
TW_EXACT_HD double cos_poly(double z) {  // q(z)
  return horner(z, cos_q(0), cos_q(1), cos_q(2), cos_q(3), cos_q(4), cos_q(5));
}

// The float fast path's one polynomial: sin r ~ r + r^3 p(r^2) on the wider |r| <= pi/2 + 2^-18, degree 15,
// < 2^-52.47 relative (Sollya: fpminimax of sin on [2^-40, pi/2 + 2^-18], relative error, doubles;
// dirtyinfnorm of p/sin - 1 at 300 bits). cos x is then sin of another reduced argument (below), so every
// element of a GPU warp or a CPU vector runs the same polynomial: no branch, no blend, no selection.
TW_EXACT_CONSTANT double kSinWide[7] = {-0x1.55555555554a8p-3,  0x1.111111110a558p-7, -0x1.a01a019a64b4ap-13,
                                        0x1.71de3806707d4p-19,  -0x1.ae635599c6ae1p-26, 0x1.60e6bc8a786d5p-33,
                                        -0x1.9f14d62a79f9dp-41};
TW_EXACT_HD double sin_wide(double r) {
  const double z = r * r;
  const double p = horner(z, kSinWide[0], kSinWide[1], kSinWide[2], kSinWide[3], kSinWide[4], kSinWide[5], kSinWide[6]);
  return exact::fma(r * z, p, r);
}

TW_EXACT_CONSTANT double kOneOverPi = 0x1.45f306dc9c883p-2;  // nearest double, |error| < 2^-55

// sin x (quadrant_shift 0) or cos x (1) in double for |x| < 2^28, as +-sin r: x = j pi/2 + r with j the
// integer of the parity quadrant_shift nearest 2x/pi (j = 2m + quadrant_shift, m the integer nearest
// x/pi - quadrant_shift/2; t is within 2^-25.8 of that, so |r| <= pi/2 + 2^-24), and
// sin x = (-1)^m sin r, cos x = (-1)^(m+1) sin r. x - j P1 is exact (both multiples of 2^-52, the
// difference below 2 in magnitude: j = 0 leaves x; otherwise |x| >= 2^-12 is a multiple of 2^-35), then
// r2 and r round once each, and what is dropped, j (pi/2 - P1 - P2 - P3), is < 2^-134: r's relative error
// <= 2^-52 (1 + 2^-50), as |r| >= 2^-29.21 at every float's nearest multiple of pi/2.
// The sign is returned apart, as the bit that flips it (0x80000000 for a float, or that shifted up 32 bits
// for a double): the float first pass flips its float with one instruction, where negating the double and
// selecting it took six.
struct SinOfReduced {
  double sin_r;
  std::uint32_t flip;  // 0x80000000 where the result is -sin r, else 0
};
template <unsigned quadrant_shift>
TW_EXACT_HD SinOfReduced sin_or_cos_moderate_parts(double x) {
  const double t = quadrant_shift ? exact::fma(x, kOneOverPi, -0.5) : x * kOneOverPi;
  const double shifted = t + kRoundingShifter;
  const double m = shifted - kRoundingShifter;
  const double j = quadrant_shift ? exact::fma(2.0, m, 1.0) : 2.0 * m;
  const double r1 = exact::fma(-j, kPio2Part1, x);
  const double r2 = exact::fma(-j, kPio2Part2, r1);
  const double y = sin_wide(exact::fma(-j, kPio2Part3, r2));
  return {y, (static_cast<std::uint32_t>(bits_of(shifted)) + quadrant_shift) << 31};
}
template <unsigned quadrant_shift>
TW_EXACT_HD double sin_or_cos_moderate(double x) {
  const SinOfReduced parts = sin_or_cos_moderate_parts<quadrant_shift>(x);
  return double_of(bits_of(parts.sin_r) ^ (static_cast<std::uint64_t>(parts.flip) << 32));
}

// Error of float_fast_path's double, u = 2^-53, r's relative error d <= 2u (sin_or_cos_moderate) or 3u
// (the large path: reduce_large's hi within u |r| <= 0.786u, then P1 - |hi| and + P2 rounded, against
// |r| >= pi/4): z = r^2 and r z round once each, the Horner sum p within 1.5u (its first coefficient
// dominates: |c1 z / c0| <= 0.124), so r^3 p within 3.5u of its value, which is < 0.571 |sin r| (at
// pi/2): 2.0u; the polynomial 1.41u; r's error gives |sin r - sin r_true| <= d |r cos r| <= d |sin r|;
// the last fma u: < u + 2.0u + 1.41u + 3u = 7.41u, under 7.41 of y's double ulps. kFastPathUlps = 16
// leaves twice that.
constexpr std::uint32_t kFastPathUlps = 16;

// True when y, within kFastPathUlps double ulps of the exact value, certainly rounds to the float the
// exact value rounds to: no point halfway between two floats (low 29 bits 0x10000000) lies within
// reach. y is a normal double whose float is normal: |y| > 2^-31 here.
TW_EXACT_HD bool float_rounding_is_certain(double y) {
  const std::uint32_t low = static_cast<std::uint32_t>(bits_of(y)) & 0x1FFFFFFFu;
  return low - (0x10000000u - kFastPathUlps) > 2 * kFastPathUlps;
}

// sin x (quadrant_shift 0) or cos x (1) in double, for 2^-12 <= |x| finite. From reduce_large's
// |r| <= pi/4 and quadrant, cos r = sin(pi/2 - |r|).
template <unsigned quadrant_shift>
TW_EXACT_HD double float_fast_path(float x) {
  if ((bits_of(x) & 0x7FFFFFFFu) < 0x4D800000u) return sin_or_cos_moderate<quadrant_shift>(static_cast<double>(x));
  const Reduced reduced = reduce_large(x);
  const unsigned quadrant = reduced.quadrant + quadrant_shift;
  const double magnitude = reduced.hi < 0.0 ? -reduced.hi : reduced.hi;
  const double y = sin_wide((quadrant & 1u) ? (kPio2Part1 - magnitude) + kPio2Part2 : reduced.hi);
  return (quadrant & 2u) ? -y : y;
}

// ---- float32: the slow path

// sin and cos of r = hi + lo, |r| <= pi/4 (1 + 2^-20), as double-doubles: Taylor series to r^25
// (the first term left out is < 2^-102.2 of sin r) and to r^26 (< 2^-100 of cos r), Horner in
// double-double (each step within ~2^-104; the terms alternate but each is under a tenth of the one
// before, so nothing cancels): error < 2^-97 relative.
TW_EXACT_HD DoubleDouble signed_inverse_factorial(int n, bool negative) {
  const double s = negative ? -1.0 : 1.0;
  return {s * kInverseFactorials[2 * n], s * kInverseFactorials[2 * n + 1]};
}
TW_EXACT_HD DoubleDouble sin_taylor(DoubleDouble r) {
  const DoubleDouble z = dd_mul(r, r);
  DoubleDouble sum = signed_inverse_factorial(25, false);
  for (int n = 11; n >= 0; --n) sum = dd_add(dd_mul(sum, z), signed_inverse_factorial(2 * n + 1, n & 1));
  return dd_mul(sum, r);
}
TW_EXACT_HD DoubleDouble cos_taylor(DoubleDouble r) {
  const DoubleDouble z = dd_mul(r, r);
  DoubleDouble sum = signed_inverse_factorial(26, true);
  for (int n = 12; n >= 0; --n) sum = dd_add(dd_mul(sum, z), signed_inverse_factorial(2 * n, n & 1));
  return sum;
}

// hi + lo rounded to a float once: where hi lies halfway between two floats, lo's sign picks the side
// (hi is moved one double ulp toward it). |hi| > 2^-31: a normal float.
TW_EXACT_HD float round_to_float(DoubleDouble y) {
  std::uint64_t bits = bits_of(y.hi);
  if ((bits & 0x1FFFFFFFu) == 0x10000000u && y.lo != 0.0) bits += ((y.lo > 0.0) == (y.hi > 0.0)) ? 1 : -1;
  return static_cast<float>(double_of(bits));
}

// The inputs whose fast result is too near a rounding boundary: the exact reduction for every |x|,
// the series in double-double. Its error (< 2^-97 relative) is far below the closest any float's sin
// or cos comes to a boundary: 2^-54.2 and 2^-55.9 relative, measured over all 2^32 inputs.
TW_EXACT_HD_NOINLINE float float_slow_path(float x, unsigned quadrant_shift) {
  const Reduced reduced = reduce_large(x);
  const unsigned quadrant = reduced.quadrant + quadrant_shift;
  const DoubleDouble r{reduced.hi, reduced.lo};
  DoubleDouble y = (quadrant & 1u) ? cos_taylor(r) : sin_taylor(r);
  if (quadrant & 2u) y = {-y.hi, -y.lo};
  return round_to_float(y);
}

TW_EXACT_HD float sin_or_cos(float x, unsigned quadrant_shift) {
  const std::uint32_t magnitude = bits_of(x) & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) return x - x;  // NaN stays NaN; sin and cos of +-inf are NaN
  // |x| < 2^-12: sin x = x (1 - e), 0 <= e < x^2/6 < 2^-25.6, nearer x than the halfway point to the
  // float below (>= 2^-25 |x| away); cos x = 1 - e, e < x^2/2 < 2^-25, the halfway point below 1.
  if (magnitude < 0x39800000u) return quadrant_shift ? 1.0f : x;
  const double y = quadrant_shift ? float_fast_path<1>(x) : float_fast_path<0>(x);
  if (float_rounding_is_certain(y)) return static_cast<float>(y);
  return float_slow_path(x, quadrant_shift);
}

// ---- float64

// sin(hi + lo), |lo| <= 2^-53 |hi|: hi + (hi^3 p(hi^2) + lo (1 - hi^2/2)), degree 15, polynomial error
// < 2^-62.86 relative (Sollya's supnorm). The tail is < 0.103 |hi| and computed within 4.1u of itself,
// < 0.33u relative to the result (|sin hi| >= 0.9 |hi|, and where the tail is largest, |y| >= 0.5
// and one ulp is u); with the final rounding's half ulp: < 0.84 ulp.
TW_EXACT_HD double sin_kernel(double hi, double lo) {
  const double z = hi * hi;
  const double p = horner(z, -0x1.5555555555555p-3, 0x1.111111111108bp-7, -0x1.a01a01a006d8cp-13, 0x1.71de3a4019c09p-19,
                          -0x1.ae643d4462f08p-26, 0x1.6114a6532ff18p-33, -0x1.a55ce701c2a51p-41);
  const double lo_times_cos = exact::fma(-0.5 * z, lo, lo);
  return hi + exact::fma(hi * z, p, lo_times_cos);
}

// cos(hi + lo) = 1 - hi^2/2 - hi lo + hi^4 q(hi^2): hi^2 split exactly (z + z_error), w = 1 - z/2 with
// its rounding error recovered exactly ((1 - w) - z/2: Sterbenz), so only terms < 0.016 are rounded
// before the final sum: < 0.6 ulp (polynomial < 2^-63.93 relative).
TW_EXACT_HD double cos_kernel(double hi, double lo) {
  const double z = hi * hi;
  const double z_error = exact::fma(hi, hi, -z);
  const double half_z = 0.5 * z;
  const double w = 1.0 - half_z;
  const double w_error = (1.0 - w) - half_z;
  const double small = w_error - exact::fma(hi, lo, 0.5 * z_error);
  return w + exact::fma(z * z, cos_poly(z), small);
}

TW_EXACT_HD double sin_or_cos(double x, unsigned quadrant_shift) {
  const std::uint64_t magnitude = bits_of(x) & 0x7FFFFFFFFFFFFFFFu;
  if (magnitude >= 0x7FF0000000000000u) return x - x;  // NaN stays NaN; sin and cos of +-inf are NaN
  // |x| < 2^-26: sin x = x (1 - e), e < 2^-54.58, under half an ulp; |x| < 2^-27: cos x = 1 - e,
  // e < 2^-55, under half an ulp of the double below 1.
  if (magnitude < 0x3E50000000000000u) {
    if (quadrant_shift == 0) return x;
    if (magnitude < 0x3E40000000000000u) return 1.0;
  }
  const Reduced reduced = magnitude < 0x41B0000000000000u ? reduce_moderate(x) : reduce_large(x);  // 2^28
  const unsigned quadrant = reduced.quadrant + quadrant_shift;
  const double y = (quadrant & 1u) ? cos_kernel(reduced.hi, reduced.lo) : sin_kernel(reduced.hi, reduced.lo);
  return (quadrant & 2u) ? -y : y;
}

}  // namespace detail::trig

TW_EXACT_HD float sin(float x) { return detail::trig::sin_or_cos(x, 0u); }
TW_EXACT_HD float cos(float x) { return detail::trig::sin_or_cos(x, 1u); }
TW_EXACT_HD double sin(double x) { return detail::trig::sin_or_cos(x, 0u); }
TW_EXACT_HD double cos(double x) { return detail::trig::sin_or_cos(x, 1u); }

}  // namespace tapewise::exact

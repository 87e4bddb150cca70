// proptest/reference_test.cpp — tests of the reference itself: exact values at known points and
// kinks, rounding to the dtype (subnormal midpoints, overflow), ulp_of, the bound check's rules,
// and the DAG evaluator's tape rules. It checks the reference, not the production path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "bounds.hpp"
#include "dag.hpp"
#include "measure.hpp"
#include "reference.hpp"

namespace tapewise::reference {
namespace {

constexpr DType f32 = DType::float32;
constexpr DType f64 = DType::float64;
constexpr DType bf16 = DType::bfloat16;
constexpr DType f16 = DType::float16;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The op at one point, rounded to the dtype. Binary ops take b; unary ops ignore it.
double fwd(Op op, DType d, double a, double b = 0.0, Scalars s = {}) {
  const Real in[2] = {real(a), real(b)};
  return round_to_dtype(forward(op, d, s, std::span<const Real>(in, op_info(op).arity)), d);
}
std::array<double, 2> grad(Op op, DType d, double a, double b, double g, Scalars s = {}) {
  const Real in[2] = {real(a), real(b)};
  const auto dx = vjp(op, d, s, std::span<const Real>(in, op_info(op).arity), real(g));
  return {round_to_dtype(dx[0], d), round_to_dtype(dx[1], d)};
}
double grad1(Op op, DType d, double x, double g, Scalars s = {}) { return grad(op, d, x, 0.0, g, s)[0]; }

// Real values carry at least kPrecisionBits (Boost sets the precision in decimal digits, so a few
// bits more): with p the precision a value reports, 1 + 2^-(p-1) is representable and 1 + 2^-p (the
// midpoint to the next value) rounds to even, 1 — the arithmetic really works at p bits.
TEST(Reference, RealsCarryAtLeastThePrecisionStated) {
  static_assert(kPrecisionBits >= 256, "the bounds' analysis assumes a reference of at least 256 bits");
  const Real one = real(1.0);
  const auto p = static_cast<int>(mpfr_get_prec(one.backend().data()));
  EXPECT_GE(p, kPrecisionBits);
  EXPECT_LT(p, kPrecisionBits + 16) << "the precision is set in decimal digits: a few bits above, not many";
  EXPECT_NE(one + boost::multiprecision::ldexp(one, 1 - p), one);
  EXPECT_EQ(one + boost::multiprecision::ldexp(one, -p), one);
  EXPECT_EQ(mpfr_get_prec((one + boost::multiprecision::ldexp(one, 1 - p)).backend().data()), p);
}

// A hard case for correct rounding: 1 + 2^-53 + 2^-220 lies 2^-220 above the midpoint between two
// doubles. The reference must round it up to 1 + 2^-52; one of fewer than 221 bits sees the midpoint
// itself and rounds to even, 1.
TEST(Reference, RoundsAHardCaseCorrectly) {
  const Real just_above_midpoint = real(1.0) + real(std::ldexp(1.0, -53)) + real(std::ldexp(1.0, -220));
  EXPECT_EQ(round_to_dtype(just_above_midpoint, f64), 1.0 + std::ldexp(1.0, -52));
  EXPECT_EQ(round_to_dtype(real(1.0) + real(std::ldexp(1.0, -53)), f64), 1.0);  // the midpoint itself: to even
  EXPECT_EQ(round_to_dtype(real(1.0) + real(std::ldexp(1.0, -24)) + real(std::ldexp(1.0, -220)), f32),
            1.0 + std::ldexp(1.0, -23));
}

TEST(Reference, KnownExactValues) {
  for (DType d : {f32, f64}) {
    EXPECT_EQ(fwd(Op::exp, d, 0.0), 1.0);
    EXPECT_EQ(fwd(Op::sin, d, 0.0), 0.0);
    EXPECT_EQ(fwd(Op::cos, d, 0.0), 1.0);
    EXPECT_EQ(fwd(Op::log, d, 1.0), 0.0);
    EXPECT_EQ(fwd(Op::sigmoid, d, 0.0), 0.5);
    EXPECT_EQ(fwd(Op::tanh, d, 0.0), 0.0);
    EXPECT_EQ(fwd(Op::gelu, d, 0.0), 0.0);
    EXPECT_EQ(fwd(Op::silu, d, 0.0), 0.0);
    EXPECT_EQ(fwd(Op::softplus, d, 0.0), round_to(d, 0.693147180559945309417232121458));
    EXPECT_EQ(grad1(Op::gelu, d, 0.0, 1.0), 0.5);
    EXPECT_EQ(grad1(Op::silu, d, 0.0, 1.0), 0.5);
    EXPECT_EQ(grad1(Op::sigmoid, d, 0.0, 1.0), 0.25);
    EXPECT_EQ(grad1(Op::tanh, d, 0.0, 3.0), 3.0);
    EXPECT_EQ(grad1(Op::exp, d, 0.0, -2.0), -2.0);
    EXPECT_EQ(grad1(Op::inv, d, 2.0, 1.0), -0.25);
    EXPECT_EQ(grad(Op::div, d, 1.0, 2.0, 1.0)[1], -0.25);
    EXPECT_EQ(fwd(Op::sqrt, d, 4.0), 2.0);
    EXPECT_EQ(grad1(Op::sqrt, d, 4.0, 1.0), 0.25);
  }
}

TEST(Reference, KinksAreExactSelects) {
  for (DType d : {f32, f64}) {
    EXPECT_EQ(grad1(Op::relu, d, 0.0, 1.0), 0.0);
    EXPECT_EQ(grad1(Op::relu, d, -0.0, kInf), 0.0);  // a select: no 0 * inf
    EXPECT_EQ(grad1(Op::relu, d, 0.5, 3.0), 3.0);
    EXPECT_FALSE(std::signbit(fwd(Op::relu, d, -0.0)));
    EXPECT_EQ(fwd(Op::relu, d, kNaN), 0.0);
    EXPECT_EQ(fwd(Op::sqrt, d, -1.0), 0.0);
    EXPECT_EQ(grad1(Op::sqrt, d, 0.0, 1.0), 0.0);
    EXPECT_EQ(grad1(Op::sqrt, d, -1.0, kInf), 0.0);
    EXPECT_EQ(grad1(Op::abs, d, 0.0, 5.0), 0.0);
    EXPECT_TRUE(std::isnan(grad1(Op::abs, d, 0.0, kInf)));  // abs' is a multiply: 0 * inf
    EXPECT_EQ(grad1(Op::abs, d, -2.0, 5.0), -5.0);

    const Scalars bounds{-1.0, 2.0};
    EXPECT_EQ(grad1(Op::clamp, d, -1.0, 1.0, bounds), 0.0);
    EXPECT_EQ(grad1(Op::clamp, d, 2.0, 1.0, bounds), 0.0);
    EXPECT_EQ(grad1(Op::clamp, d, 0.5, 7.0, bounds), 7.0);
    EXPECT_EQ(fwd(Op::clamp, d, 5.0, 0.0, bounds), 2.0);
    EXPECT_EQ(fwd(Op::clamp, d, 0.0, 0.0, Scalars{3.0, 1.0}), 1.0);  // lo > hi gives hi
    EXPECT_EQ(fwd(Op::clamp, d, kNaN, 0.0, bounds), -1.0);           // NaN is ignored

    EXPECT_EQ(grad(Op::max, d, 3.0, 3.0, 1.0), (std::array<double, 2>{0.5, 0.5}));
    EXPECT_EQ(grad(Op::min, d, 3.0, 3.0, 1.0), (std::array<double, 2>{0.5, 0.5}));
    EXPECT_EQ(grad(Op::max, d, 3.0, 2.0, 1.0), (std::array<double, 2>{1.0, 0.0}));
    EXPECT_EQ(grad(Op::min, d, 3.0, 2.0, 1.0), (std::array<double, 2>{0.0, 1.0}));
    EXPECT_EQ(grad(Op::max, d, kNaN, 2.0, 1.0), (std::array<double, 2>{0.5, 0.5}));
    EXPECT_EQ(fwd(Op::max, d, kNaN, 2.0), 2.0);
    EXPECT_FALSE(std::signbit(grad(Op::sub, d, 1.0, 1.0, 0.0)[1]));  // db = 0 - g: +0
  }
}

TEST(Reference, NonFiniteInputs) {
  for (DType d : {f32, f64}) {
    EXPECT_TRUE(std::isnan(fwd(Op::exp, d, kNaN)));
    EXPECT_TRUE(std::isnan(fwd(Op::sigmoid, d, kNaN)));
    EXPECT_EQ(fwd(Op::log, d, 0.0), -kInf);
    EXPECT_EQ(grad1(Op::log, d, 0.0, 1.0), kInf);
    EXPECT_EQ(fwd(Op::sigmoid, d, -kInf), 0.0);
    EXPECT_EQ(fwd(Op::softplus, d, kInf), kInf);
    EXPECT_EQ(fwd(Op::exp, d, 1000.0), kInf);
    EXPECT_EQ(fwd(Op::softplus, d, std::numeric_limits<float>::max()),
              static_cast<double>(std::numeric_limits<float>::max()));
  }
}

// Scalars are rounded once to the dtype: 1 + 2^-24 is 1 in float32, not in float64.
TEST(Reference, ScalarsAreRoundedToTheDtype) {
  const double c = 1.0 + std::ldexp(1.0, -24);
  const double x = 1.0 + std::ldexp(1.0, -23);
  EXPECT_EQ(fwd(Op::scale, f32, x, 0.0, Scalars{c}), x);  // unrounded c would give 1 + 2^-22
  EXPECT_EQ(grad1(Op::scale, f32, 0.0, x, Scalars{c}), x);
  EXPECT_EQ(fwd(Op::scale, f64, x, 0.0, Scalars{c}), x * c);
  // R(eps) = 0 in float32: safeLog at -inf is log(0).
  EXPECT_EQ(fwd(Op::safeLog, f32, -kInf, 0.0, Scalars{1e-50}), -kInf);
  EXPECT_LT(fwd(Op::safeLog, f64, -kInf, 0.0, Scalars{1e-50}), -100.0);
}

// Where the staged form cancels, the reference keeps the tiny real value.
TEST(Reference, TinyValuesSurviveCancellation) {
  const double e700 = fwd(Op::exp, f64, -700.0);
  ASSERT_GT(e700, 0.0);
  EXPECT_EQ(fwd(Op::softplus, f64, -700.0), e700);
  EXPECT_EQ(grad1(Op::sigmoid, f64, 700.0, 1.0), e700);
  EXPECT_EQ(grad1(Op::softplus, f64, -700.0, 1.0), e700);
  EXPECT_EQ(grad1(Op::tanh, f64, 300.0, 1.0), 4.0 * fwd(Op::exp, f64, -600.0));
  EXPECT_LT(fwd(Op::gelu, f64, -20.0), 0.0);  // x (1 + tanh u) / 2 with 1 + tanh u ~ 1e-261
}

TEST(ReferenceRounding, SubnormalMidpointsAndOverflowRoundToEven) {
  const double t32 = std::ldexp(1.0, -149);  // float32's subnormal spacing
  EXPECT_EQ(round_to_dtype(real(0.5 * t32), f32), 0.0);
  EXPECT_EQ(round_to_dtype(real(1.5 * t32), f32), 2 * t32);
  EXPECT_EQ(round_to_dtype(real(2.5 * t32), f32), 2 * t32);
  EXPECT_EQ(round_to_dtype(real(-1.5 * t32), f32), -2 * t32);
  EXPECT_EQ(round_to_dtype(real(0.5 * t32) + real(std::ldexp(1.0, -200)), f32), t32);
  EXPECT_TRUE(std::signbit(round_to_dtype(real(-0.5 * t32), f32)));
  EXPECT_EQ(round_to_dtype(real(1.0 + std::ldexp(1.0, -24)), f32), 1.0);
  EXPECT_EQ(round_to_dtype(real(1.0 + 3 * std::ldexp(1.0, -24)), f32), 1.0 + std::ldexp(1.0, -22));

  const double t64 = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(round_to_dtype(real(t64) / 2, f64), 0.0);
  EXPECT_EQ(round_to_dtype(real(t64) * 3 / 2, f64), 2 * t64);
  EXPECT_EQ(round_to_dtype(real(t64) / 2 + real(t64) / 1024, f64), t64);

  const double fmax = std::numeric_limits<float>::max();
  EXPECT_EQ(round_to_dtype(real(fmax) + real(std::ldexp(1.0, 102)), f32), fmax);
  EXPECT_EQ(round_to_dtype(real(fmax) + real(std::ldexp(1.0, 103)), f32), kInf);
}

// Random float64 bit patterns, and exact float32 ties (a float32 value plus half its spacing).
rc::Gen<double> doubles_and_float32_ties() {
  auto from_bits = [](std::uint64_t bits) {
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  auto tie = [](std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    if (!std::isfinite(f) || std::fabs(f) == std::numeric_limits<float>::max()) return 0.0;
    return static_cast<double>(f) + std::copysign(ulp_of(f, DType::float32) / 2, f);
  };
  return rc::gen::resize(100, rc::gen::oneOf(rc::gen::map(rc::gen::arbitrary<std::uint64_t>(), from_bits),
                                             rc::gen::map(rc::gen::arbitrary<std::uint32_t>(), tie)));
}

// Rounding to float32 agrees with the C++ cast (RNE); rounding to float64 is the identity.
RC_GTEST_PROP(ReferenceRounding, AgreesWithTheHardwareCast, ()) {
  const double v = *doubles_and_float32_ties();
  const double as32 = round_to_dtype(real(v), f32);
  const double as64 = round_to_dtype(real(v), f64);
  if (std::isnan(v)) {
    RC_ASSERT(std::isnan(as32) && std::isnan(as64));
  } else {
    RC_ASSERT(std::memcmp(&as64, &v, sizeof v) == 0);
    const double cast = static_cast<float>(v);
    RC_ASSERT(std::memcmp(&as32, &cast, sizeof v) == 0);
  }
}

TEST(ReferenceUlpOf, ZeroSubnormalNormalAndInfinity) {
  EXPECT_EQ(ulp_of(0.0, f32), std::ldexp(1.0, -149));
  EXPECT_EQ(ulp_of(-0.0, f64), std::ldexp(1.0, -1074));
  EXPECT_EQ(ulp_of(std::ldexp(1.0, -140), f32), std::ldexp(1.0, -149));
  EXPECT_EQ(ulp_of(std::numeric_limits<float>::min(), f32), std::ldexp(1.0, -149));
  EXPECT_EQ(ulp_of(std::numeric_limits<double>::min(), f64), std::ldexp(1.0, -1074));
  EXPECT_EQ(ulp_of(1.0, f32), std::ldexp(1.0, -23));
  EXPECT_EQ(ulp_of(1.75, f32), std::ldexp(1.0, -23));
  EXPECT_EQ(ulp_of(-2.0, f32), std::ldexp(1.0, -22));
  EXPECT_EQ(ulp_of(1.0, f64), std::ldexp(1.0, -52));
  EXPECT_EQ(ulp_of(std::numeric_limits<float>::max(), f32), std::ldexp(1.0, 104));
  EXPECT_EQ(ulp_of(kInf, f32), std::ldexp(1.0, 104));
  EXPECT_EQ(dtype_eps(f32), std::ldexp(1.0, -23));
  EXPECT_EQ(dtype_eps(f64), std::ldexp(1.0, -52));
}

// The 16-bit formats' spacings: bfloat16 has float32's exponent range with 8 significand bits,
// float16 is binary16 (subnormals from 2^-24, largest finite 65504); eps is 2^-7 and 2^-10, the
// eps of spec/bounds.def's formula for those rows.
TEST(ReferenceUlpOf, SixteenBitFormats) {
  EXPECT_EQ(ulp_of(1.0, bf16), std::ldexp(1.0, -7));
  EXPECT_EQ(ulp_of(0.0, bf16), std::ldexp(1.0, -133));
  EXPECT_EQ(ulp_of(std::ldexp(1.0, -130), bf16), std::ldexp(1.0, -133));
  EXPECT_EQ(ulp_of(kInf, bf16), std::ldexp(1.0, 120));
  EXPECT_EQ(ulp_of(1.0, f16), std::ldexp(1.0, -10));
  EXPECT_EQ(ulp_of(0.0, f16), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp_of(std::ldexp(1.0, -14), f16), std::ldexp(1.0, -24));
  EXPECT_EQ(ulp_of(65504.0, f16), 32.0);
  EXPECT_EQ(ulp_of(kInf, f16), 32.0);
  EXPECT_EQ(dtype_eps(bf16), std::ldexp(1.0, -7));
  EXPECT_EQ(dtype_eps(f16), std::ldexp(1.0, -10));
}

TEST(ReferenceCheck, NonFiniteRules) {
  const Bound none{0, 0}, loose{1e6, 1e6};
  const Real nan = real(kNaN), inf = real(kInf);
  EXPECT_TRUE(check(nan, kNaN, f32, none, 1).within);
  EXPECT_FALSE(check(nan, 1.0, f32, loose, 1).within);
  EXPECT_TRUE(check(inf, kInf, f64, none, 1).within);
  EXPECT_FALSE(check(inf, -kInf, f64, loose, 1).within);
  EXPECT_FALSE(check(inf, std::numeric_limits<double>::max(), f64, loose, 1).within);
  EXPECT_FALSE(check(real(1.0), kInf, f32, loose, 1).within);
  EXPECT_FALSE(check(real(1.0), kNaN, f32, loose, 1).within);
  // exact above FLT_MAX that rounds to inf: a finite result is a violation
  EXPECT_FALSE(check(real(std::ldexp(1.0, 128)), std::numeric_limits<float>::max(), f32, loose, 1).within);
}

TEST(ReferenceCheck, UlpsAbsoluteTermAndEquality) {
  const Bound none{0, 0};
  const ErrorCheck same = check(real(0.0), -0.0, f32, none, 1);
  EXPECT_EQ(same.error_ulps, 0.0);
  EXPECT_TRUE(same.within);
  // 1 + 2^-30 rounds to 1 in float32: producing 1 conforms even with a zero bound.
  const ErrorCheck rounded = check(real(1.0 + std::ldexp(1.0, -30)), 1.0, f32, none, 1);
  EXPECT_TRUE(rounded.within);
  EXPECT_EQ(rounded.error_ulps, std::ldexp(1.0, -7));
  const double one_up = 1.0 + std::ldexp(1.0, -23);
  EXPECT_EQ(check(real(1.0), one_up, f32, Bound{1, 0}, 1).error_ulps, 1.0);
  EXPECT_TRUE(check(real(1.0), one_up, f32, Bound{1, 0}, 1).within);
  EXPECT_FALSE(check(real(1.0), one_up, f32, Bound{0.5, 0}, 1).within);
  // 0.25 + 2^-22 is 8 ulps off; the absolute term allows abs * 2^-23 * w.
  const double off = 0.25 + std::ldexp(1.0, -22);
  EXPECT_EQ(check(real(0.25), off, f32, none, 1).error_eps, 2.0);
  EXPECT_FALSE(check(real(0.25), off, f32, Bound{0, 1}, 1).within);
  EXPECT_TRUE(check(real(0.25), off, f32, Bound{0, 1}, 2).within);
  EXPECT_EQ(check(real(0.25), off, f32, Bound{0, 1}, 2).ratio, 1.0);
  // Subnormal allowances are computed in MPFR: 0.7 * 2^-1074 must not round up to 2^-1074.
  const double t = std::numeric_limits<double>::denorm_min();
  const Real exact = real(3 * t) + real(t) / 4;  // R(exact) = 3t; producing 4t is 0.75 ulp off
  EXPECT_TRUE(check(exact, 4 * t, f64, Bound{0.75, 0}, 1).within);
  EXPECT_FALSE(check(exact, 4 * t, f64, Bound{0.7, 0}, 1).within);
}

TEST(ReferenceAbsWeight, SafeLogScalesWithOneOverTheLogArgument) {
  const Scalars eps{1e-6};
  const Real far_left[1] = {real(-40.0)}, right[1] = {real(5.0)};
  EXPECT_GT(abs_weight(Op::safeLog, f64, eps, far_left, real(1.0), false), 9e5);
  EXPECT_EQ(abs_weight(Op::safeLog, f64, eps, right, real(-3.0), true), 3.0);
  EXPECT_EQ(abs_weight(Op::exp, f64, {}, right, real(-3.0), false), 1.0);
  // Where the staged softplus rounds to 0, the VJP divides by R(eps) alone: sigmoid / (den R(eps)).
  const Real saturated[1] = {real(-17.5)};
  EXPECT_GT(abs_weight(Op::safeLog, f32, Scalars{1e-12}, saturated, real(1.0), true), 1e11);
  // R(eps) = 0 is outside safeLog's contract: no finite weight.
  const Real far[1] = {real(-200.0)};
  EXPECT_EQ(abs_weight(Op::safeLog, f32, Scalars{1e-50}, far, real(1.0), false), kInf);
}

// Every bound of spec/bounds.def is one a produced value can meet: finite, an ulp term of 0 (exact) or
// at least 1/2 (a rounded value is within half an ulp at best), abs >= 0. (That each node and dtype
// has exactly one row is a rule of the build, reference/bounds.cpp.)
TEST(ReferenceBounds, EveryBoundIsOneAProducedValueCanMeet) {
  for (MathMode m : {MathMode::aten, MathMode::exact})
    for (const OpInfo& info : kOps)
      for (DType d : kDTypes)
        for (const Bound& b : {forward_bound(info.op, d, m), vjp_bound(info.op, d, m)}) {
          EXPECT_TRUE(std::isfinite(b.ulp) && std::isfinite(b.abs)) << info.name << " " << dtype_name(d);
          EXPECT_TRUE(b.ulp == 0.0 || b.ulp >= 0.5) << info.name << " " << dtype_name(d) << ": ulp " << b.ulp;
          EXPECT_GE(b.abs, 0.0) << info.name << " " << dtype_name(d);
        }
  EXPECT_EQ(forward_bound(Op::add, f32, MathMode::aten).ulp, 0.5);  // one IEEE rounding: the row's numbers
  EXPECT_EQ(vjp_bound(Op::relu, f64, MathMode::aten).ulp, 0.0);     // an exact select
}

// Exact mode only tightens: each node's bound in exact mode is at most its aten-mode bound, the five
// functions' float32 forwards are 0.5 ulp (correct rounding) and their 16-bit ones a double rounding's
// 0.5 + 2^-17 or 2^-14, and a node without an exact-mode row
// (an IEEE-only staging, or sigmoid's, which keeps its measured row) has the same bound in both modes.
TEST(ReferenceBounds, ExactModeRowsTightenTheFiveFunctionsAndNothingElse) {
  const Op five[] = {Op::exp, Op::log, Op::sin, Op::cos, Op::tanh};
  for (const OpInfo& info : kOps)
    for (DType d : kDTypes) {
      const bool libm = std::find(std::begin(five), std::end(five), info.op) != std::end(five);
      const Bound fa = forward_bound(info.op, d, MathMode::aten), fe = forward_bound(info.op, d, MathMode::exact);
      const Bound va = vjp_bound(info.op, d, MathMode::aten), ve = vjp_bound(info.op, d, MathMode::exact);
      EXPECT_LE(fe.ulp, fa.ulp) << info.name << " " << dtype_name(d);
      EXPECT_LE(fe.abs, fa.abs) << info.name << " " << dtype_name(d);
      EXPECT_LE(ve.ulp, va.ulp) << info.name << " " << dtype_name(d);
      EXPECT_LE(ve.abs, va.abs) << info.name << " " << dtype_name(d);
      if (libm) {
        if (d == f32) {
          EXPECT_EQ(fe.ulp, 0.5) << info.name;
          EXPECT_EQ(fe.abs, 0.0) << info.name;
        }
        if (d == bf16 || d == f16) {
          EXPECT_LE(fe.ulp, 0.5001) << info.name << ": R16(R32(f)) is within 0.5 + 2^-14";
        }
      } else {
        EXPECT_EQ(fe.ulp, fa.ulp) << info.name << " " << dtype_name(d);
        EXPECT_EQ(ve.ulp, va.ulp) << info.name << " " << dtype_name(d);
      }
    }
}

// The next value of the 16-bit dtype after v (a value of it), away from zero or toward it.
double step16(double v, DType d, bool away) {
  const std::uint16_t bits = d == bf16 ? bfloat16(v).bits : float16(v).bits;
  const auto next = static_cast<std::uint16_t>(away ? bits + 1 : bits - 1);
  return d == bf16 ? static_cast<double>(bfloat16::from_bits(next)) : static_cast<double>(float16::from_bits(next));
}

// A 16-bit row of 0.5 ulp is as tight as correct rounding: over every bfloat16 and float16 x in
// [1, 2) and a few b, the correctly rounded result conforms and the value one ulp further from the
// exact result (the other neighbour of R(exact) than the one the exact value lies toward) does not:
// it is between 1 and 1.5 ulp off, which a 1.5-ulp bound passes, so the failure is the row's.
TEST(ReferenceBounds, SixteenBitHalfUlpRowsFailAResultOneUlpWorse) {
  int graded = 0;
  for (DType d : {bf16, f16})
    for (Op op : {Op::add, Op::mul, Op::div, Op::sqrt, Op::inv}) {
      ASSERT_EQ(forward_bound(op, d, MathMode::aten).ulp, 0.5) << op_name(op) << " " << dtype_name(d);
      ASSERT_EQ(forward_bound(op, d, MathMode::aten).abs, 0.0) << op_name(op) << " " << dtype_name(d);
      const int mantissa = d == bf16 ? 7 : 10;
      for (int k = 0; k < (1 << mantissa); k += 3) {
        const double x = 1.0 + std::ldexp(static_cast<double>(k), -mantissa), b = 1.59375;  // b: 5 bits
        const Real in[2] = {real(x), real(b)};
        const Real exact = forward(op, d, {}, std::span<const Real>(in, op_info(op).arity));
        const double rounded = round_to_dtype(exact, d);
        if (Real(rounded) == exact) continue;  // exact results have no "one ulp worse" toward a side
        const bool exact_above = exact > Real(rounded);
        const double worse = step16(rounded, d, exact_above == (rounded < 0));  // away from the exact value
        if (std::ilogb(worse) != std::ilogb(rounded)) continue;  // across a binade the ulp halves
        EXPECT_TRUE(check(exact, rounded, d, forward_bound(op, d, MathMode::aten), 1).within) << op_name(op) << " x=" << x;
        const ErrorCheck c = check(exact, worse, d, forward_bound(op, d, MathMode::aten), 1);
        EXPECT_FALSE(c.within) << op_name(op) << " " << dtype_name(d) << " x=" << x << ": " << worse << " is "
                               << c.error_ulps << " ulp from the exact value";
        EXPECT_GT(c.error_ulps, 1.0);
        EXPECT_LE(c.error_ulps, 1.5);  // 1.5 where the exact value is a 16-bit midpoint
        EXPECT_TRUE(check(exact, worse, d, Bound{1.5, 0}, 1).within);  // the check itself passes it
        ++graded;
      }
    }
  EXPECT_GT(graded, 500);
}

TEST(ReferenceArrays, MatchTheScalarForms) {
  const std::vector<double> xs{-2.0, 0.0, 0.5, 3.0}, gs{1.0, -1.0, 2.0, 0.25};
  const Array x = to_real(xs), g = to_real(gs);
  const std::vector<double> y = round_to_dtype(forward(Op::tanh, f32, {}, x), f32);
  const auto dx = vjp(Op::tanh, f32, {}, x, Array(), g);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(y[i], fwd(Op::tanh, f32, xs[i]));
    EXPECT_EQ(round_to_dtype(dx[0][static_cast<Eigen::Index>(i)], f32), grad1(Op::tanh, f32, xs[i], gs[i]));
  }
}

// --- the DAG evaluator's tape rules ----------------------------------------------------------------

DagNode leaf(bool requires_grad = true) { return DagNode{std::nullopt, {}, {-1, -1}, 0, requires_grad}; }
DagNode unary(Op op, std::int64_t x, Scalars s = {}) { return DagNode{op, s, {x, -1}, 1, true}; }
DagNode binary(Op op, std::int64_t a, std::int64_t b) { return DagNode{op, {}, {a, b}, 2, true}; }

std::vector<std::optional<std::vector<double>>> backward(const std::vector<DagNode>& nodes,
                                                         const std::vector<std::vector<double>>& leaves,
                                                         double seed, DType d, bool dense) {
  const NodeValues values = dag_forward(nodes, leaves, d);
  const double s[1] = {seed};
  return dag_backward(nodes, values, static_cast<std::int64_t>(nodes.size()) - 1, s, d, dense);
}

// Element 0 of leaf 0's gradient; a leaf without a slot throws, which fails this test alone.
double leaf0_gradient(const std::vector<std::optional<std::vector<double>>>& slots) {
  if (slots.empty() || !slots[0] || slots[0]->empty()) throw std::runtime_error("leaf 0 got no gradient slot");
  return (*slots[0])[0];
}

TEST(ReferenceDag, ForwardRoundsEachNode) {
  const std::vector<DagNode> nodes{leaf(), unary(Op::scale, 0, Scalars{3.0}), unary(Op::sqrt, 1)};
  const NodeValues v = dag_forward(nodes, std::vector<std::vector<double>>{{12.0}, {}, {}}, f32);
  EXPECT_EQ(v[1][0], 36.0);
  EXPECT_EQ(v[2][0], 6.0);
}

TEST(ReferenceDag, AddOfTheSameParentContributesTwice) {
  const std::vector<DagNode> nodes{leaf(), binary(Op::add, 0, 0)};
  for (bool dense : {false, true}) EXPECT_EQ(leaf0_gradient(backward(nodes, {{1.0}, {}}, 3.0, f32, dense)), 6.0);
  const std::vector<DagNode> squared{leaf(), binary(Op::mul, 0, 0)};
  EXPECT_EQ(leaf0_gradient(backward(squared, {{3.0}, {}}, 1.0, f32, false)), 6.0);
}

// max(a, a) passes g once: with the smallest subnormal g, half + half would be 0 + 0.
TEST(ReferenceDag, MaxOfTheSameParentContributesTheUpstreamOnce) {
  const double tiny = std::ldexp(1.0, -149);
  for (Op op : {Op::max, Op::min}) {
    const std::vector<DagNode> nodes{leaf(), binary(op, 0, 0)};
    for (bool dense : {false, true}) EXPECT_EQ(leaf0_gradient(backward(nodes, {{2.0}, {}}, tiny, f32, dense)), tiny);
  }
}

TEST(ReferenceDag, DenseTurnsAMinusZeroFirstContributionIntoPlusZero) {
  const std::vector<DagNode> nodes{leaf(), unary(Op::neg, 0)};
  EXPECT_TRUE(std::signbit(leaf0_gradient(backward(nodes, {{1.0}, {}}, 0.0, f32, false))));
  EXPECT_FALSE(std::signbit(leaf0_gradient(backward(nodes, {{1.0}, {}}, 0.0, f32, true))));
}

// x feeds out directly (1) and through two scales (2^-24 each); visiting ids descending adds
// 1, then 2^-24, then 2^-24: in float32 each addition ties back to 1.
TEST(ReferenceDag, ContributionsAccumulateLeftToRightInDescendingIdOrder) {
  const double tiny = std::ldexp(1.0, -24);
  const std::vector<DagNode> nodes{leaf(), unary(Op::scale, 0, Scalars{tiny}),
                                   unary(Op::scale, 0, Scalars{tiny}), binary(Op::add, 1, 2),
                                   binary(Op::add, 3, 0)};
  const std::vector<std::vector<double>> leaves{{1.0}, {}, {}, {}, {}};
  EXPECT_EQ(leaf0_gradient(backward(nodes, leaves, 1.0, f32, false)), 1.0);
  EXPECT_EQ(leaf0_gradient(backward(nodes, leaves, 1.0, f64, false)), 1.0 + 2 * tiny);
}

// inv(0) is not reachable from out: it never runs (its VJP would be inf), its dense slot is +0,
// and a node that does not require grad gets no slot.
TEST(ReferenceDag, UnreachableAndConstantNodesNeverRun) {
  const std::vector<DagNode> nodes{leaf(), leaf(false), unary(Op::inv, 0), binary(Op::mul, 0, 1),
                                   unary(Op::scale, 3, Scalars{2.0})};
  const std::vector<std::vector<double>> leaves{{0.0}, {5.0}, {}, {}, {}};
  const auto sparse = backward(nodes, leaves, 1.0, f32, false);
  EXPECT_EQ(leaf0_gradient(sparse), 10.0);
  EXPECT_FALSE(sparse[1].has_value());
  EXPECT_FALSE(sparse[2].has_value());
  const auto dense = backward(nodes, leaves, 1.0, f32, true);
  EXPECT_EQ(leaf0_gradient(dense), 10.0);
  EXPECT_FALSE(dense[1].has_value());
  ASSERT_TRUE(dense[2].has_value());
  EXPECT_EQ((*dense[2])[0], 0.0);
  EXPECT_FALSE(std::signbit((*dense[2])[0]));
}

}  // namespace
}  // namespace tapewise::reference

// reference/measure.hpp — how far a produced dtype value is from the exact (reference) value, in
// ULPs (glibc libm-test convention) and against a Bound. Not the bounds themselves: spec/bounds.def.
#pragma once

#include "bounds.hpp"
#include "reference.hpp"

namespace tapewise::reference {

// Machine epsilon of the dtype: 2^-23 (float32), 2^-52 (float64).
double dtype_eps(DType dtype);

// The spacing of dtype values at `rounded_value` (a dtype value widened to double):
// 2^(exponent - p + 1) for a normal value, the subnormal spacing 2^(emin - p + 1) for subnormals
// and zero, the spacing at the largest finite value for +-inf, NaN for NaN.
double ulp_of(double rounded_value, DType dtype);

struct ErrorCheck {
  double error_ulps;  // |produced - exact| / ulp_of(R(exact)); 0 or inf when R(exact) is not finite
  double error_eps;   // |produced - exact| / (eps * w): the measure of the absolute term
  bool within;        // produced == R(exact), or |produced - exact| <= allowed (rules below)
  double ratio;       // |produced - exact| / allowed (0 when produced == R(exact))
};

// allowed = bound.ulp * ulp_of(R(exact)) + bound.abs * eps(dtype) * w, with w = 1 for a forward and
// |g| (times abs_weight's conditioning factor) for a VJP. Differences are taken in MPFR.
// Non-finite rules: R(exact) NaN => produced must be NaN; R(exact) +-inf => produced must equal it;
// a non-finite produced value where R(exact) is finite is a violation (error and ratio inf).
// A correctly rounded result (produced == R(exact), +0 == -0) always conforms.
ErrorCheck check(const Real& exact, double produced, DType dtype, Bound bound, double w);

}  // namespace tapewise::reference

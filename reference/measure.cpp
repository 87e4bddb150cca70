// reference/measure.cpp — ulp_of and the bound check; every difference is taken in MPFR so that
// subnormal allowances (e.g. 0.5 * 2^-1074) do not underflow.
#include "measure.hpp"

#include <cmath>
#include <limits>

namespace tapewise::reference {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

double dtype_eps(DType d) { return std::ldexp(1.0, 1 - format_of(d).precision); }

double ulp_of(double v, DType d) {
  const FloatFormat f = format_of(d);
  if (std::isnan(v)) return v;
  if (std::isinf(v)) return std::ldexp(1.0, f.max_exponent - f.precision + 1);
  const int exponent = v == 0.0 ? f.min_exponent : std::max(std::ilogb(v), f.min_exponent);
  return std::ldexp(1.0, exponent - f.precision + 1);
}

ErrorCheck check(const Real& exact, double produced, DType d, Bound bound, double w) {
  ensure_precision();
  const double rounded = round_to_dtype(exact, d);
  if (!std::isfinite(rounded)) {
    const bool same = std::isnan(rounded) ? std::isnan(produced) : produced == rounded;
    return same ? ErrorCheck{0, 0, true, 0} : ErrorCheck{kInf, kInf, false, kInf};
  }
  if (!std::isfinite(produced)) return ErrorCheck{kInf, kInf, false, kInf};

  const Real error = abs(Real(produced) - exact);
  const Real ulp = Real(ulp_of(rounded, d));
  const Real eps_w = Real(dtype_eps(d)) * Real(w);
  const Real allowed = Real(bound.ulp) * ulp + Real(bound.abs) * eps_w;
  ErrorCheck out;
  out.error_ulps = (error / ulp).convert_to<double>();
  out.error_eps = eps_w > 0 ? (error / eps_w).convert_to<double>() : (error > 0 ? kInf : 0.0);
  if (produced == rounded) {
    out.within = true;
    out.ratio = 0;
  } else {
    out.within = error <= allowed;
    out.ratio = allowed > 0 ? (error / allowed).convert_to<double>() : kInf;
  }
  return out;
}

}  // namespace tapewise::reference

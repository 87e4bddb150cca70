// reference/reference.hpp — the real-valued spec of every node (forward and VJP), evaluated in MPFR
// at 256 bits and rounded once to the dtype. Written from spec/ and the semantics notes, never from
// cuda/: it is what the production path is measured against, not a copy of it.
#pragma once

#include <array>
#include <span>
#include <vector>

#include <boost/multiprecision/eigen.hpp>
#include <boost/multiprecision/mpfr.hpp>

#include "tapewise/core.hpp"
#include "tapewise/op.hpp"
#include "format.hpp"  // FloatFormat, format_of

namespace tapewise::reference {

using Real = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                           boost::multiprecision::et_off>;
using Array = Eigen::Array<Real, Eigen::Dynamic, 1>;

inline constexpr int kPrecisionBits = 256;

// Sets Real's default precision to kPrecisionBits in the calling thread (Boost 1.74 keeps one
// global default; newer Boost keeps one per thread). Every entry point below calls it; call it
// yourself before constructing Reals of your own, and once on the main thread before spawning.
void ensure_precision();
// MPFR keeps caches per thread (constants such as log 2 and pi); a thread other than the main one
// that used the reference calls this before it ends, or the caches leak with it.
void release_thread_caches();

// Exact conversions (a float or double is always representable at 256 bits).
Real real(double v);

// The value rounded once, to nearest-even, to the dtype (subnormals and overflow included),
// widened back to double.
double round_to_dtype(const Real& v, DType dtype);

// y = op(in) of the real-valued spec. `in` holds arity values; scalars are rounded once to the
// dtype (the spec computes with R(c), R(lo), R(hi), R(eps) and gelu's R(constants)).
Real forward(Op op, DType dtype, const Scalars& s, std::span<const Real> in);
// (da, db) = the spec's VJP at `in` with cotangent g; index 1 is unused (+0) for unary ops.
std::array<Real, 2> vjp(Op op, DType dtype, const Scalars& s, std::span<const Real> in,
                        const Real& g);

// The weight w of the absolute term of a Bound (see measure.hpp): 1 for a forward, |g| for a VJP.
// safeLog's staged form takes log(den) and sigmoid/den of a den = softplus + R(eps) whose softplus
// is off by ~eps absolute (it rounds 1 + e^x), so its weight is also scaled by the amplification:
// max(1, 1/den_lo) forward, max(1, sigmoid/(den den_lo)) VJP, den_lo = max(R(eps), den - 2 eps);
// +inf when R(eps) <= 0 (outside safeLog's contract).
double abs_weight(Op op, DType dtype, const Scalars& s, std::span<const Real> in, const Real& g,
                  bool is_vjp);

// Array forms: elementwise over equal-length arrays (b and its gradient are ignored when unary).
Array forward(Op op, DType dtype, const Scalars& s, const Array& a, const Array& b = Array());
std::array<Array, 2> vjp(Op op, DType dtype, const Scalars& s, const Array& a, const Array& b,
                         const Array& g);
Array to_real(std::span<const double> values);
std::vector<double> round_to_dtype(const Array& v, DType dtype);

}  // namespace tapewise::reference

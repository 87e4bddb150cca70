// reference/reference.cpp — each node's real-valued forward and VJP, side by side, in MPFR.
// Kinks are selects with exact values (relu'(0) = 0, ties 1/2, clamp' = 0 at lo and hi,
// sqrt'(<= 0) = 0). Where the real value has an exact identity that keeps its relative accuracy
// (1 - sigmoid(x) = sigmoid(-x), 1 - tanh^2 = sech^2, 1 + tanh(u) = 2 sigmoid(2u)) we use it, so
// the reference stays exact where the production's staged form cancels.
#include "reference.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace tapewise::reference {

namespace {

constexpr unsigned kDigits10 = (kPrecisionBits * 301u) / 1000u + 1u;  // ≥ kPrecisionBits bits

using MpfrUnary = int (*)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t);
Real mpfr_apply(MpfrUnary f, const Real& x) {
  Real r;
  f(r.backend().data(), x.backend().data(), MPFR_RNDN);
  return r;
}
Real exp(const Real& x) { return mpfr_apply(mpfr_exp, x); }
Real log(const Real& x) { return mpfr_apply(mpfr_log, x); }
Real log1p(const Real& x) { return mpfr_apply(mpfr_log1p, x); }
Real sin(const Real& x) { return mpfr_apply(mpfr_sin, x); }
Real cos(const Real& x) { return mpfr_apply(mpfr_cos, x); }
Real tanh(const Real& x) { return mpfr_apply(mpfr_tanh, x); }
Real cosh(const Real& x) { return mpfr_apply(mpfr_cosh, x); }
Real sqrt(const Real& x) { return mpfr_apply(mpfr_sqrt, x); }
bool isnan(const Real& x) { return mpfr_nan_p(x.backend().data()) != 0; }

Real zero() { return Real(0); }  // +0: the exact value a select writes

// fmax / fmin: a NaN operand is ignored (the spec's max, min and clamp forward).
Real fmax(const Real& a, const Real& b) { return isnan(a) ? b : isnan(b) ? a : (b > a ? b : a); }
Real fmin(const Real& a, const Real& b) { return isnan(a) ? b : isnan(b) ? a : (b < a ? b : a); }

Real sigmoid(const Real& x) { return 1 / (1 + exp(-x)); }
// sigmoid'(x) = s(1 - s) written as s(x) s(-x): no cancellation as s -> 1.
Real sigmoid_slope(const Real& x) { return sigmoid(x) * sigmoid(-x); }
// log(1 + e^x), written so that e^x never overflows MPFR's exponent range.
Real softplus(const Real& x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
// 1 - tanh(x)^2 = 1 / cosh(x)^2.
Real sech2(const Real& x) {
  const Real c = cosh(x);
  return 1 / (c * c);
}

Real scalar(DType d, double v) { return real(round_to(d, v)); }

// gelu's constants, rounded to the dtype as the spec does: c = R(0.044715), k = R(sqrt(2/pi)),
// c3 = R(3 R(c)).
struct GeluConstants {
  Real c, k, c3;
  explicit GeluConstants(DType d)
      : c(scalar(d, 0.044715)),
        k(scalar(d, 0.79788456080286535588)),
        c3(scalar(d, 3.0 * round_to(d, 0.044715))) {}
};
// With u = k (x + c x^3): 1 + tanh(u) = 2 sigmoid(2u) and 1 - tanh(u)^2 = 4 sigmoid(2u) sigmoid(-2u).
Real gelu_forward(DType d, const Real& x) {
  const GeluConstants g(d);
  const Real u = g.k * (x + g.c * x * x * x);
  return x * sigmoid(2 * u);
}
// d/dx = ((1 + t) + x (1 - t^2) k (1 + c3 x^2)) / 2.
Real gelu_slope(DType d, const Real& x) {
  const GeluConstants g(d);
  const Real u = g.k * (x + g.c * x * x * x);
  const Real one_plus_t = 2 * sigmoid(2 * u);
  const Real sech_sq = 4 * sigmoid(2 * u) * sigmoid(-2 * u);
  return (one_plus_t + x * sech_sq * (g.k * (1 + g.c3 * x * x))) / 2;
}

Real silu_slope(const Real& x) { return sigmoid(x) + x * sigmoid_slope(x); }

Real safe_log_den(DType d, const Scalars& s, const Real& x) { return softplus(x) + scalar(d, s.s0); }

}  // namespace

void ensure_precision() {
  if (Real::default_precision() != kDigits10) Real::default_precision(kDigits10);
}

void release_thread_caches() { mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); }

Real real(double v) {
  ensure_precision();
  return Real(v);
}

FloatFormat format_of(DType dtype) {
  switch (dtype) {
    case DType::float32: return {24, -126, 127};
    case DType::float64: return {53, -1022, 1023};
    case DType::bfloat16: return {8, -126, 127};
    case DType::float16: return {11, -14, 15};
  }
  return {53, -1022, 1023};
}

// Rounds to a multiple of the format's quantum at v's binade (the subnormal quantum below the
// normal range): v scaled by a power of two is exact, mpfr_rint rounds it to an integer with ties to
// even, and scaling back is exact. Above the largest finite value the result is ±inf.
double round_to_dtype(const Real& v, DType dtype) {
  ensure_precision();
  const mpfr_srcptr x = v.backend().data();
  if (mpfr_nan_p(x) || mpfr_inf_p(x) || mpfr_zero_p(x)) return mpfr_get_d(x, MPFR_RNDN);
  const FloatFormat f = format_of(dtype);
  const long exponent = std::max<long>(mpfr_get_exp(x) - 1, f.min_exponent);  // v in [2^e, 2^(e+1))
  const long quantum = exponent - (f.precision - 1);
  mpfr_t scaled;
  mpfr_init2(scaled, mpfr_get_prec(x));
  mpfr_mul_2si(scaled, x, -quantum, MPFR_RNDN);
  mpfr_rint(scaled, scaled, MPFR_RNDN);
  const double rounded = std::ldexp(mpfr_get_d(scaled, MPFR_RNDN), static_cast<int>(quantum));
  mpfr_clear(scaled);
  const double largest = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.max_exponent);
  if (std::fabs(rounded) > largest) return std::copysign(std::numeric_limits<double>::infinity(), rounded);
  return rounded;
}

Real forward(Op op, DType d, const Scalars& s, std::span<const Real> in) {
  ensure_precision();
  if (in.size() != static_cast<std::size_t>(op_info(op).arity))
    throw std::invalid_argument(std::string("reference::forward: wrong input count for ") + op_name(op));
  const Real& x = in[0];
  const Real& b = in.size() > 1 ? in[1] : x;
  switch (op) {
    case Op::add: return x + b;
    case Op::sub: return x - b;
    case Op::mul: return x * b;
    case Op::neg: return -x;
    case Op::scale: return x * scalar(d, s.s0);
    case Op::abs: return abs(x);
    case Op::sqrt: return x <= 0 ? zero() : sqrt(x);  // NaN fails the test and stays NaN
    case Op::clamp: return fmin(fmax(x, scalar(d, s.s0)), scalar(d, s.s1));
    case Op::max: return fmax(x, b);
    case Op::min: return fmin(x, b);
    case Op::div: return x / b;
    case Op::relu: return x > 0 ? x : zero();
    case Op::exp: return exp(x);
    case Op::sin: return sin(x);
    case Op::cos: return cos(x);
    case Op::log: return log(x);
    case Op::inv: return 1 / x;
    case Op::safeLog: return log(safe_log_den(d, s, x));
    case Op::sigmoid: return sigmoid(x);
    case Op::tanh: return tanh(x);
    case Op::silu: return x * sigmoid(x);
    case Op::gelu: return gelu_forward(d, x);
    case Op::softplus: return softplus(x);
  }
  throw std::invalid_argument("reference::forward: no MPFR transcription for " + op_label(op));
}

std::array<Real, 2> vjp(Op op, DType d, const Scalars& s, std::span<const Real> in, const Real& g) {
  ensure_precision();
  if (in.size() != static_cast<std::size_t>(op_info(op).arity))
    throw std::invalid_argument(std::string("reference::vjp: wrong input count for ") + op_name(op));
  const Real& x = in[0];
  const Real& b = in.size() > 1 ? in[1] : x;
  auto unary = [](Real dx) { return std::array<Real, 2>{std::move(dx), zero()}; };
  switch (op) {
    // sub and div write db as 0 - (...), as their staged form does: a zero db is +0.
    case Op::add: return {g, g};
    case Op::sub: return {g, zero() - g};
    case Op::mul: return {g * b, g * x};
    case Op::neg: return unary(-g);
    case Op::scale: return unary(g * scalar(d, s.s0));
    case Op::abs: {  // a multiply, not a select: sign(+-0) = sign(NaN) = 0, and 0 * inf = NaN
      const int sign = x > 0 ? 1 : x < 0 ? -1 : 0;
      return unary(Real(sign) * g);
    }
    case Op::sqrt: return unary(x > 0 ? g / (2 * sqrt(x)) : zero());
    case Op::clamp: return unary(scalar(d, s.s0) < x && x < scalar(d, s.s1) ? g : zero());
    case Op::max:
      if (x > b) return {g, zero()};
      if (b > x) return {zero(), g};
      return {g / 2, g / 2};  // tie or unordered (NaN)
    case Op::min:
      if (x < b) return {g, zero()};
      if (b < x) return {zero(), g};
      return {g / 2, g / 2};
    case Op::div: return {g / b, zero() - g * (x / (b * b))};
    case Op::relu: return unary(x > 0 ? g : zero());
    case Op::exp: return unary(g * exp(x));
    case Op::sin: return unary(g * cos(x));
    case Op::cos: return unary(-sin(x) * g);
    case Op::log: return unary(g / x);
    case Op::inv: return unary(-(g / (x * x)));
    case Op::safeLog: return unary(g * (sigmoid(x) / safe_log_den(d, s, x)));
    case Op::sigmoid: return unary(g * sigmoid_slope(x));
    case Op::tanh: return unary(g * sech2(x));
    case Op::silu: return unary(g * silu_slope(x));
    case Op::gelu: return unary(g * gelu_slope(d, x));
    case Op::softplus: return unary(g * sigmoid(x));
  }
  throw std::invalid_argument("reference::vjp: no MPFR transcription for " + op_label(op));
}

double abs_weight(Op op, DType d, const Scalars& s, std::span<const Real> in, const Real& g,
                  bool is_vjp) {
  ensure_precision();
  const double w = is_vjp ? std::fabs(g.convert_to<double>()) : 1.0;
  if (op != Op::safeLog) return w;
  // The staged softplus rounds 1 + e, so it is off by up to ~eps absolute (and never below 0): the
  // denominator it produces is at least den_lo. log(den) and sigmoid/den amplify that by 1/den_lo
  // and sigmoid/(den den_lo).
  const Real den = safe_log_den(d, s, in[0]);
  const Real eps = Real(std::ldexp(1.0, 1 - format_of(d).precision));
  const Real eps_scalar = scalar(d, s.s0), den_minus = den - 2 * eps;
  const Real den_lo = den_minus > eps_scalar ? den_minus : eps_scalar;
  if (!(den_lo > 0)) return std::numeric_limits<double>::infinity();  // R(eps) <= 0: no contract
  const Real gain = is_vjp ? sigmoid(in[0]) / (den * den_lo) : 1 / den_lo;
  return w * std::max(1.0, gain.convert_to<double>());
}

Array forward(Op op, DType d, const Scalars& s, const Array& a, const Array& b) {
  ensure_precision();
  const bool binary = op_info(op).arity == 2;
  Array y(a.size());
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    const Real in[2] = {a[i], binary ? b[i] : Real(0)};
    y[i] = forward(op, d, s, std::span<const Real>(in, binary ? 2 : 1));
  }
  return y;
}

std::array<Array, 2> vjp(Op op, DType d, const Scalars& s, const Array& a, const Array& b,
                         const Array& g) {
  ensure_precision();
  const bool binary = op_info(op).arity == 2;
  std::array<Array, 2> grads{Array(a.size()), Array(binary ? a.size() : 0)};
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    const Real in[2] = {a[i], binary ? b[i] : Real(0)};
    auto [da, db] = vjp(op, d, s, std::span<const Real>(in, binary ? 2 : 1), g[i]);
    grads[0][i] = std::move(da);
    if (binary) grads[1][i] = std::move(db);
  }
  return grads;
}

Array to_real(std::span<const double> values) {
  ensure_precision();
  Array out(static_cast<Eigen::Index>(values.size()));
  for (std::size_t i = 0; i < values.size(); ++i) out[static_cast<Eigen::Index>(i)] = Real(values[i]);
  return out;
}

std::vector<double> round_to_dtype(const Array& v, DType dtype) {
  std::vector<double> out(static_cast<std::size_t>(v.size()));
  for (Eigen::Index i = 0; i < v.size(); ++i) out[static_cast<std::size_t>(i)] = round_to_dtype(v[i], dtype);
  return out;
}

}  // namespace tapewise::reference

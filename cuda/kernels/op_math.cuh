// cuda/kernels/op_math.cuh — each node's forward and fused VJP for one element, side by side, in the
// spec's staging (spec/ops.def): every named intermediate is one rounding, in the same order as
// the staged path's buffer ops, so fused and staged agree up to NaN (equal bits, or both NaN: a
// NaN's sign and payload may differ). Host and device alike.
#pragma once

#include <tapewise/op.hpp>

#include "prim.hpp"
#include "scalar_math.cuh"

namespace tapewise::math {

inline namespace TW_MATH_NS {  // the math mode's own symbols (scalar_math.cuh)

template <Op op>
struct OpMath;

template <>
struct OpMath<Op::add> {
  template <class T> TW_HD static T forward(Params<T>, T a, T b) { return a + b; }
  template <class T> TW_HD static Pair<T> vjp(Params<T>, T, T, T g) { return {g, g}; }
};

template <>
struct OpMath<Op::sub> {
  template <class T> TW_HD static T forward(Params<T>, T a, T b) { return a - b; }
  // db = (+0) - g: a ±0 upstream gives +0 (TorchLean's zerosLike(g) - g).
  template <class T> TW_HD static Pair<T> vjp(Params<T>, T, T, T g) { return {g, T(0) - g}; }
};

template <>
struct OpMath<Op::mul> {
  template <class T> TW_HD static T forward(Params<T>, T a, T b) { return a * b; }
  template <class T> TW_HD static Pair<T> vjp(Params<T>, T a, T b, T g) { return {g * b, g * a}; }
};

template <>
struct OpMath<Op::neg> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return -x; }
  template <class T> TW_HD static T vjp(Params<T>, T, T g) { return -g; }
};

template <>
struct OpMath<Op::scale> {
  template <class T> TW_HD static T forward(Params<T> p, T x) { return x * p.s0; }
  template <class T> TW_HD static T vjp(Params<T> p, T, T g) { return g * p.s0; }
};

template <>
struct OpMath<Op::abs> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return lm_fabs(x); }
  // A multiply, not a select: 0 * inf = NaN and 0 * (-g) = -0 at x = ±0, as ATen's absBwd.
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) { return sign(x) * g; }
};

template <>
struct OpMath<Op::sqrt> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return lm_sqrt(x <= T(0) ? T(0) : x); }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) {
    const bool positive = x > T(0);
    const T root = lm_sqrt(positive ? x : T(1));
    const T factor = T(1) / (root * T(2));
    return positive ? g * factor : T(0);
  }
};

template <>
struct OpMath<Op::clamp> {
  template <class T> TW_HD static T forward(Params<T> p, T x) { return fmin_(fmax_(x, p.s0), p.s1); }
  template <class T> TW_HD static T vjp(Params<T> p, T x, T g) {
    return (p.s0 < x && x < p.s1) ? g : T(0);
  }
};

// max/min: the winner takes g, the loser an exact +0; ties and unordered (NaN) pairs split g * 0.5.
template <class T>
TW_HD Pair<T> split_winner(bool a_wins, bool b_wins, T g) {
  const T half = g * T(0.5);
  return {a_wins ? g : (b_wins ? T(0) : half), b_wins ? g : (a_wins ? T(0) : half)};
}

template <>
struct OpMath<Op::max> {
  template <class T> TW_HD static T forward(Params<T>, T a, T b) { return fmax_(a, b); }
  template <class T> TW_HD static Pair<T> vjp(Params<T>, T a, T b, T g) {
    return split_winner(a > b, b > a, g);
  }
};

template <>
struct OpMath<Op::min> {
  template <class T> TW_HD static T forward(Params<T>, T a, T b) { return fmin_(a, b); }
  template <class T> TW_HD static Pair<T> vjp(Params<T>, T a, T b, T g) {
    return split_winner(b > a, a > b, g);
  }
};

template <>
struct OpMath<Op::div> {
  template <class T> TW_HD static T forward(Params<T>, T a, T b) { return a / b; }
  // (a / b) / b rather than a / (b * b): squaring b first overflows or underflows early.
  template <class T> TW_HD static Pair<T> vjp(Params<T>, T a, T b, T g) {
    const T q1 = a / b;
    const T q2 = q1 / b;
    const T t = g * q2;
    return {g / b, T(0) - t};
  }
};

template <>
struct OpMath<Op::relu> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return x > T(0) ? x : T(0); }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) { return x > T(0) ? g : T(0); }
};

template <>
struct OpMath<Op::exp> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return lm_exp(x); }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) { return g * lm_exp(x); }
};

template <>
struct OpMath<Op::sin> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return lm_sin(x); }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) { return lm_cos(x) * g; }
};

template <>
struct OpMath<Op::cos> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return lm_cos(x); }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) { return (lm_sin(x) * T(-1)) * g; }
};

template <>
struct OpMath<Op::log> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return lm_log(x); }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) { return g * (T(1) / x); }
};

template <>
struct OpMath<Op::inv> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return T(1) / x; }
  // Squares the reciprocal (not 1 / x^2), as TorchLean stages it.
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) {
    const T r = T(1) / x;
    const T r2 = r * r;
    const T p = g * r2;
    return p * T(-1);
  }
};

template <>
struct OpMath<Op::safeLog> {
  template <class T> TW_HD static T forward(Params<T> p, T x) {
    const T den = softplus(x) + p.s0;
    return lm_log(den);
  }
  template <class T> TW_HD static T vjp(Params<T> p, T x, T g) {
    const T den = softplus(x) + p.s0;
    const T dl = sigmoid(x) / den;
    return g * dl;
  }
};

template <>
struct OpMath<Op::sigmoid> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return sigmoid(x); }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) {
    const T y = sigmoid(x);
    const T one_minus_y = T(1) - y;
    return g * (y * one_minus_y);
  }
};

template <>
struct OpMath<Op::tanh> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return lm_tanh(x); }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) {
    const T y = lm_tanh(x);
    const T y2 = y * y;
    return g * (T(1) - y2);
  }
};

template <>
struct OpMath<Op::silu> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return x * sigmoid_split(x); }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) {
    const T s = sigmoid_split(x);
    const T xs = x * s;
    const T t = xs * (T(1) - s);
    return g * (s + t);
  }
};

template <>
struct OpMath<Op::gelu> {
  template <class T> TW_HD static T forward(Params<T>, T x) {
    const T t = gelu_t(x);
    return (x * (t + T(1))) * T(0.5);
  }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) {
    using K = GeluConstants<T>;
    const T t = gelu_t(x);
    const T sech = T(1) - t * t;
    const T q = (x * K::c3()) * x;
    const T inner_derivative = (q + T(1)) * K::k();
    const T dt = (x * sech) * inner_derivative;
    const T num = (t + T(1)) + dt;
    return (num * T(0.5)) * g;
  }
};

template <>
struct OpMath<Op::softplus> {
  template <class T> TW_HD static T forward(Params<T>, T x) { return softplus(x); }
  template <class T> TW_HD static T vjp(Params<T>, T x, T g) { return g * sigmoid(x); }
};

// A primitive buffer op on one element: the staged forms' vocabulary (prim.hpp, spec/stagings.def).
// A comparison's mask is 1 or +0; `where` reads its mask from a, its choices from b and m.
template <class T>
TW_HD T prim_apply(Prim p, T c, T a, T b, T m = T(0)) {
  switch (p) {
    case Prim::copy: return a;
    case Prim::neg: return -a;
    case Prim::abs: return lm_fabs(a);
    case Prim::sign: return sign(a);
    case Prim::exp: return lm_exp(a);
    case Prim::log: return lm_log(a);
    case Prim::sin: return lm_sin(a);
    case Prim::cos: return lm_cos(a);
    case Prim::tanh: return lm_tanh(a);
    case Prim::sigmoid: return sigmoid(a);
    case Prim::sigmoid_split: return sigmoid_split(a);
    case Prim::reciprocal: return T(1) / a;
    case Prim::sqrt: return lm_sqrt(a);
    case Prim::mul_scalar: return a * c;
    case Prim::add_scalar: return a + c;
    case Prim::rsub_scalar: return c - a;
    case Prim::add: return a + b;
    case Prim::sub: return a - b;
    case Prim::mul: return a * b;
    case Prim::div: return a / b;
    case Prim::fmax: return fmax_(a, b);
    case Prim::fmin: return fmin_(a, b);
    case Prim::greater: return a > b ? T(1) : T(0);
    case Prim::less: return a < b ? T(1) : T(0);
    case Prim::less_equal: return a <= b ? T(1) : T(0);
    case Prim::where: return a != T(0) ? b : m;
    case Prim::fill: return c;
  }
  return c;
}

}  // inline namespace TW_MATH_NS

}  // namespace tapewise::math

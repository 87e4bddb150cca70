// cuda/kernels/speculative.cuh — exact mode's float32 math in a branch-free first pass: each exact function's
// fast path run unconditionally, returning its float with a flag, `uncertain`, wherever exact::f would not
// have returned that float; a node's per-element code run on flagged values (Speculative); the few flagged
// elements then recomputed by the scalar code. The CPU backend's loops vectorize this way
// (backends/speculative_math.hpp); the GPU's float32 map kernels run a vector's elements this way, so that
// their fast paths interleave without a branch between them (map_kernels.cuh). Same source for both, but for
// tanh's and log's doubles on the CPU, computed without their tables (exact/exp_tanh.cuh, exact/log.cuh).
//
// Why it gives exact::f's bits: exact::exp and the others test whether their double result is far enough
// from a float rounding boundary and otherwise branch to a slow path (and branch on special inputs). Here
// each fast path runs on a harmless stand-in argument where the input is special, and flags what exact::f
// would have sent elsewhere (a special input, a result too near a boundary). Where nothing is flagged,
// each call returned exact::f's float (the same operations on the same double, each rounded once: no
// build contracts), so the node's result is the scalar node's.
#pragma once

#if !defined(TAPEWISE_MATH_EXACT)
#error "speculative.cuh is exact mode's: define TAPEWISE_MATH_EXACT before including it (kernels/math_mode.hpp)"
#endif

#include <cstdint>

#include "dispatch.hpp"
#include "exact_math.cuh"

namespace tapewise::detail::speculative {

using exact::bits_of;
using exact::float_of;

// ---- the five functions' fast paths, branch-free, with the flag

// A special input is replaced by a harmless one as bits: a selection between floats feeding a conversion
// would become a conditional conversion, which may trap (-ftrapping-math) and so blocks if-conversion.

// exact::exp's fast path; uncertain outside [-104, 89] (and NaN), for a subnormal result (x below
// -87.34, where exact::exp's own test converts twice more) or near a boundary.
TW_EXACT_HD float exp(float x, bool& uncertain) {
  using namespace exact::detail::exp_tanh;
  const bool inside = (x >= -104.0f) & (x <= 89.0f);
  const double y = exp_of_float_fast(float_of(inside ? bits_of(x) : 0u));
  uncertain = !(inside & (y >= 0x1p-126) & float_rounding_is_certain(y, 4));
  return static_cast<float>(y);
}

// exact::tanh: the fast path on every input, run on min(|x|, 10) (10 for NaN), with the sign put back;
// uncertain for NaN or near a boundary. Below 2^-12, where exact::tanh returns x itself, the fast path gives
// it too: tanh_of_float_fast's double (and the CPU's, without the table) is within 2^-49.3 of tanh|x|, which
// is within |x|^3/3 < 2^-25.58 |x| of |x| (and, for a subnormal |x|, far under half its quantum), so it rounds
// to |x| and lies far from a boundary (+-0 give +-0). From 10 on, exact::tanh returns +-1: tanh(10)'s double
// rounds to 1 (1 - tanh 10 < 2^-27.8, under the half ulp 2^-25 below 1) and is certain. So no input needs a
// selection of its own.
TW_EXACT_HD float tanh(float x, bool& uncertain) {
  using namespace exact::detail::exp_tanh;
  const std::uint32_t sign = bits_of(x) & 0x80000000u;
  const float ax = float_of(bits_of(x) ^ sign);
  // min(|x|, 10), NaN giving 10 either way: one FMNMX on the GPU, a comparison and a blend in the CPU's vectors
  // (where fminf would be a call). The CPU's double comes without the table (no gathers), within the same bound.
#if defined(__CUDA_ARCH__)
  const double y = tanh_of_float_fast(::fminf(ax, 10.0f));
#else
  const double y = tanh_of_float_fast_without_table(ax < 10.0f ? ax : 10.0f);
#endif
  uncertain = (ax != ax) | !float_rounding_is_certain(y, 32);
  return float_of(bits_of(static_cast<float>(y)) | sign);
}

// exact::log's fast path, reduced from the float's bits; uncertain for inputs not positive, normal and finite
// (subnormals too: the bits reduction needs a normal float), or near a boundary. On the GPU its double is the
// scalar fast path's (the same m, exponent and index); the CPU's comes without the table, within the same
// 8-ulp margin.
TW_EXACT_HD float log(float x, bool& uncertain) {
  const bool normal = exact::bits_of(x) - 0x00800000u < 0x7f000000u;
  const float reducible = float_of(normal ? bits_of(x) : 0x3F800000u);
#if defined(__CUDA_ARCH__)
  const double y = exact::detail::log_of_reduced_float_fast(exact::detail::log_reduce_normal_float(reducible));
#else
  const double y = exact::detail::log_of_normal_float_without_table(reducible);
#endif
  const std::uint32_t below_float = static_cast<std::uint32_t>(exact::bits_of(y)) & 0x1fffffffu;
  uncertain = !normal | !(below_float - (0x10000000u - 8u) > 16u);
  return static_cast<float>(y);
}

// exact::sin (quadrant_shift 0) and cos (1): the fast path for |x| < 2^28 (one polynomial for both), its sign
// applied to the float; uncertain for |x| >= 2^28 (Payne-Hanek), infinities, NaN, or near a boundary. Below
// 2^-12, where exact::sin returns x and exact::cos 1, the fast path gives those too or flags them. sin: r is
// x itself, and sin_wide(x) is within 7.41 ulps of sin x, itself within x^3/6 < 2^-25.6 |x| of x (for a
// subnormal x, r^3 underflows and y = x; -0 is the one input taken apart, below). cos: r = x -+ pi/2 errs by
// at most 3 ulps of r (the error bound's large-argument case), and cos x > 1 - 2^-25, the halfway point
// below 1, so y rounds to 1 or is flagged.
template <unsigned quadrant_shift>
TW_EXACT_HD float sin_or_cos(float x, bool& uncertain) {
  using namespace exact::detail::trig;
  const bool moderate = (bits_of(x) & 0x7FFFFFFFu) < 0x4D800000u;
  const SinOfReduced y =
      sin_or_cos_moderate_parts<quadrant_shift>(static_cast<double>(float_of(moderate ? bits_of(x) : 0x3F800000u)));
  uncertain = !(moderate & float_rounding_is_certain(y.sin_r));  // the same low bits either sign
  const float result = float_of(bits_of(static_cast<float>(y.sin_r)) ^ y.flip);  // RN(-y) = -RN(y)
  if constexpr (quadrant_shift == 0) return x == 0.0f ? x : result;  // sin(-0) = -0: sin_wide's sum gives +0
  return result;
}

// ---- a float32 value of the first pass, with its flag

// `uncertain`: some exact function on the way to this value may have returned another float than
// exact::f. Arithmetic passes the flag on. A comparison reads the value alone, so a node run on these
// values must compare only its inputs, never a value computed from a function (forward_speculates lists
// the nodes, all of which do).
struct Speculative {
  float v;
  bool uncertain;
  Speculative() = default;
  TW_EXACT_HD explicit Speculative(float f) : v(f), uncertain(false) {}
  TW_EXACT_HD explicit Speculative(double d) : v(static_cast<float>(d)), uncertain(false) {}
  TW_EXACT_HD explicit Speculative(int i) : v(static_cast<float>(i)), uncertain(false) {}
  TW_EXACT_HD explicit operator float() const { return v; }
  TW_EXACT_HD explicit operator double() const { return static_cast<double>(v); }
};
TW_EXACT_HD Speculative with(float v, bool uncertain) {
  Speculative s;
  s.v = v;
  s.uncertain = uncertain;
  return s;
}

TW_EXACT_HD Speculative operator+(Speculative a, Speculative b) { return with(a.v + b.v, a.uncertain | b.uncertain); }
TW_EXACT_HD Speculative operator-(Speculative a, Speculative b) { return with(a.v - b.v, a.uncertain | b.uncertain); }
TW_EXACT_HD Speculative operator*(Speculative a, Speculative b) { return with(a.v * b.v, a.uncertain | b.uncertain); }
TW_EXACT_HD Speculative operator/(Speculative a, Speculative b) { return with(a.v / b.v, a.uncertain | b.uncertain); }
TW_EXACT_HD Speculative operator-(Speculative a) { return with(-a.v, a.uncertain); }
TW_EXACT_HD bool operator<(Speculative a, Speculative b) { return a.v < b.v; }
TW_EXACT_HD bool operator>(Speculative a, Speculative b) { return a.v > b.v; }
TW_EXACT_HD bool operator<=(Speculative a, Speculative b) { return a.v <= b.v; }
TW_EXACT_HD bool operator>=(Speculative a, Speculative b) { return a.v >= b.v; }
TW_EXACT_HD bool operator==(Speculative a, Speculative b) { return a.v == b.v; }
TW_EXACT_HD bool operator!=(Speculative a, Speculative b) { return a.v != b.v; }

// What op_math.cuh calls, found by argument-dependent lookup.
TW_EXACT_HD bool sign_bit(Speculative x) { return (bits_of(x.v) >> 31) != 0; }
TW_EXACT_HD Speculative lm_fabs(Speculative x) { return with(float_of(bits_of(x.v) & 0x7FFFFFFFu), x.uncertain); }
TW_EXACT_HD Speculative lm_sqrt(Speculative x) { return with(math::lm_sqrt(x.v), x.uncertain); }
#define TW_SPECULATIVE_FUNCTION(name, fast)               \
  TW_EXACT_HD Speculative name(Speculative x) {           \
    bool uncertain;                                       \
    const float y = fast(x.v, uncertain);                 \
    return with(y, x.uncertain | uncertain);              \
  }
TW_SPECULATIVE_FUNCTION(lm_exp, speculative::exp)
TW_SPECULATIVE_FUNCTION(lm_log, speculative::log)
TW_SPECULATIVE_FUNCTION(lm_sin, speculative::sin_or_cos<0>)
TW_SPECULATIVE_FUNCTION(lm_cos, speculative::sin_or_cos<1>)
TW_SPECULATIVE_FUNCTION(lm_tanh, speculative::tanh)
#undef TW_SPECULATIVE_FUNCTION

// ---- which per-element functors run in two passes

// The nodes whose forward (and fused VJP) call exact functions; each compares only its input x
// (op_math.cuh). log's VJP calls none. A node not listed runs the scalar loop as before.
constexpr bool forward_speculates(Op op) {
  switch (op) {
    case Op::exp: case Op::sin: case Op::cos: case Op::log: case Op::safeLog: case Op::sigmoid:
    case Op::tanh: case Op::silu: case Op::gelu: case Op::softplus: return true;
    default: return false;
  }
}
constexpr bool vjp_speculates(Op op) { return forward_speculates(op) && op != Op::log; }

// Speculating<Fn>: whether a float32 functor runs in two passes, and its twin on Speculative values.
template <class Fn>
struct Speculating {
  static constexpr bool value = false;
};
template <Op op>
struct Speculating<ForwardFn<op, float>> {
  static constexpr bool value = forward_speculates(op);
  TW_EXACT_HD static ForwardFn<op, Speculative> twin(const ForwardFn<op, float>& fn) {
    return {{Speculative(fn.p.s0), Speculative(fn.p.s1)}};
  }
};
template <Op op>
struct Speculating<VjpFn<op, float>> {
  static constexpr bool value = vjp_speculates(op);
  TW_EXACT_HD static VjpFn<op, Speculative> twin(const VjpFn<op, float>& fn) {
    return {{Speculative(fn.p.s0), Speculative(fn.p.s1)}};
  }
};
template <Prim P>
struct Speculating<FixedPrimFn<P, float>> {
  static constexpr bool value = P == Prim::exp || P == Prim::log || P == Prim::sin || P == Prim::cos ||
                                P == Prim::tanh || P == Prim::sigmoid || P == Prim::sigmoid_split;
  TW_EXACT_HD static FixedPrimFn<P, Speculative> twin(const FixedPrimFn<P, float>& fn) {
    return FixedPrimFn<P, Speculative>{Speculative(fn.c)};
  }
};

}  // namespace tapewise::detail::speculative

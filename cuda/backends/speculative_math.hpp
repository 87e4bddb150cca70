// cuda/backends/speculative_math.hpp — the CPU backend's float32 exact math in a form the compiler
// vectorizes: a branch-free first pass over a block of elements and a scalar second pass over the few
// it could not decide, with the bits of the scalar exact functions (kernels/exact_math.cuh) on every input.
//
// Why two passes: exact::exp and the others test whether their double result is far enough from a float
// rounding boundary and otherwise branch to a slow path (and branch on special inputs); those branches
// keep GCC from vectorizing a loop that calls them. Here each function's fast path runs unconditionally,
// on a harmless stand-in argument where the input is special, and returns the float with a flag,
// `uncertain`, set wherever exact::f would not have returned that float (a special input, a result too
// near a boundary). A node's per-element code (op_math.cuh) runs on Speculative values, which carry the
// flag through its arithmetic; every element whose result is flagged is then recomputed by the scalar
// code. Where nothing is flagged, each function call returned exact::f's float (the same operations on
// the same double, each rounded once: the build never contracts), so the node's result is the scalar
// node's. Host only: the GPU runs the scalar functions, whose code this file leaves as it is.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/dispatch.hpp"
#include "kernels/exact_math.cuh"

namespace tapewise::detail::speculative {

using exact::bits_of;
using exact::float_of;

// ---- the five functions' fast paths, branch-free, with the flag

// A special input is replaced by a harmless one as bits: a selection between floats feeding a conversion
// would become a conditional conversion, which may trap (-ftrapping-math) and so blocks if-conversion.

// exact::exp's fast path; uncertain outside [-104, 89] (and NaN) or near a boundary.
inline float exp(float x, bool& uncertain) {
  using namespace exact::detail::exp_tanh;
  const bool inside = (x >= -104.0f) & (x <= 89.0f);
  const Reduced a = reduce(static_cast<double>(float_of(inside ? bits_of(x) : 0u)));
  const double s = exp2_64ths_hi(a.k_int & 63);
  const double y = exact::fma(s, expm1_poly5(reduced_double(a)), s) * two_to(a.k_int >> 6);
  const bool certain_normal = float_rounding_is_certain(y, 4);
  const bool certain_anywhere = float_rounding_is_certain_anywhere(y, 4);
  const bool normal = y >= 0x1p-126;
  uncertain = (!inside) | (normal & !certain_normal) | (!normal & !certain_anywhere);
  return static_cast<float>(y);
}

// exact::tanh: x itself below 2^-12, +-1 from 10 on, the fast path between; uncertain for NaN or near a
// boundary.
inline float tanh(float x, bool& uncertain) {
  using namespace exact::detail::exp_tanh;
  const std::uint32_t sign = bits_of(x) & 0x80000000u;
  const float ax = float_of(bits_of(x) ^ sign);
  const bool tiny = ax < 0x1p-12f;
  const bool saturated = ax >= 10.0f;
  const bool middle = (ax >= 0x1p-12f) & (ax < 10.0f);
  const Reduced a = reduce(2.0 * static_cast<double>(float_of(middle ? bits_of(ax) : 0x3F800000u)));
  const double scale = two_to(a.k_int >> 6);
  const double s_hi = exp2_64ths_hi(a.k_int & 63) * scale;
  const double s_lo = exp2_64ths_lo(a.k_int & 63) * scale;
  const double e_minus_1 = (s_hi - 1.0) + exact::fma(s_hi, expm1_poly5(reduced_double(a)), s_lo);
  const double y = ratio_to_rounded_sum(e_minus_1, e_minus_1 + 2.0);
  uncertain = !(tiny | saturated | (middle & float_rounding_is_certain(y, 32)));  // NaN: none of the three
  const float middle_result = float_of(bits_of(static_cast<float>(y)) | sign);
  return tiny ? x : (saturated ? float_of(sign | 0x3F800000u) : middle_result);
}

// exact::detail::log_of_float_fast with its table read as two columns of doubles: a lane's entry is then
// two gathers of doubles (a float field of a 16-byte entry is not one the compiler gathers).
struct LogTableColumns {
  double log_c_hi[128];
  double inv_c[128];
};
constexpr LogTableColumns log_table_columns() {
  LogTableColumns columns{};
  for (int i = 0; i < 128; ++i) {
    columns.log_c_hi[i] = exact::detail::kLogTable[i].log_c_hi;
    columns.inv_c[i] = static_cast<double>(exact::detail::kLogTable[i].inv_c);
  }
  return columns;
}
inline constexpr LogTableColumns kLogColumns = log_table_columns();
inline double log_of_float_fast(float x) {
  using namespace exact::detail;
  constexpr double kLn2 = 0x1.62e42fefa39efp-1;
  const LogReduction reduced = log_reduce(static_cast<double>(x));
  const double r = exact::fma(reduced.m, kLogColumns.inv_c[reduced.index], -1.0);
  const double s1 = exact::fma(static_cast<double>(reduced.exponent), kLn2, kLogColumns.log_c_hi[reduced.index]);
  const double t = exact::fma(r * r, log1p_minus_r_over_r2(r), r);
  return s1 + t;
}

// exact::log's fast path; uncertain for inputs not positive and finite, or near a boundary.
inline float log(float x, bool& uncertain) {
  const bool special = exact::bits_of(x) - 1u >= 0x7f7fffffu;
  const double y = log_of_float_fast(float_of(special ? 0x3F800000u : bits_of(x)));
  const std::uint32_t below_float = static_cast<std::uint32_t>(exact::bits_of(y)) & 0x1fffffffu;
  uncertain = special | !(below_float - (0x10000000u - 8u) > 16u);
  return static_cast<float>(y);
}

// exact::sin (quadrant_shift 0) and cos (1): the tiny-argument results, the fast path for |x| < 2^28
// (one polynomial whose coefficients each element chooses); uncertain for |x| >= 2^28 (Payne-Hanek),
// infinities, NaN, or near a boundary.
template <unsigned quadrant_shift>
inline float sin_or_cos(float x, bool& uncertain) {
  using namespace exact::detail::trig;
  const std::uint32_t magnitude = bits_of(x) & 0x7FFFFFFFu;
  const bool tiny = magnitude < 0x39800000u;
  const bool moderate = !tiny & (magnitude < 0x4D800000u);
  unsigned quadrant;
  const double r = reduce_moderate_hi(static_cast<double>(float_of(moderate ? bits_of(x) : 0x3F800000u)), quadrant);
  quadrant += quadrant_shift;
  const double unsigned_y = sin_or_cos_poly_float(r, quadrant & 1u);
  const double y = (quadrant & 2u) ? -unsigned_y : unsigned_y;
  uncertain = !(tiny | (moderate & float_rounding_is_certain(y)));
  const float tiny_result = quadrant_shift ? 1.0f : x;
  return tiny ? tiny_result : static_cast<float>(y);
}

// ---- a float32 value of the first pass, with its flag

// `uncertain`: some exact function on the way to this value may have returned another float than
// exact::f. Arithmetic passes the flag on. A comparison reads the value alone, so a node run on these
// values must compare only its inputs, never a value computed from a function (kSpeculates lists the
// nodes, all of which do).
struct Speculative {
  float v;
  bool uncertain;
  Speculative() = default;
  explicit Speculative(float f) : v(f), uncertain(false) {}
  explicit Speculative(double d) : v(static_cast<float>(d)), uncertain(false) {}
  explicit Speculative(int i) : v(static_cast<float>(i)), uncertain(false) {}
  explicit operator float() const { return v; }
  explicit operator double() const { return static_cast<double>(v); }
};
inline Speculative with(float v, bool uncertain) {
  Speculative s;
  s.v = v;
  s.uncertain = uncertain;
  return s;
}

inline Speculative operator+(Speculative a, Speculative b) { return with(a.v + b.v, a.uncertain | b.uncertain); }
inline Speculative operator-(Speculative a, Speculative b) { return with(a.v - b.v, a.uncertain | b.uncertain); }
inline Speculative operator*(Speculative a, Speculative b) { return with(a.v * b.v, a.uncertain | b.uncertain); }
inline Speculative operator/(Speculative a, Speculative b) { return with(a.v / b.v, a.uncertain | b.uncertain); }
inline Speculative operator-(Speculative a) { return with(-a.v, a.uncertain); }
inline bool operator<(Speculative a, Speculative b) { return a.v < b.v; }
inline bool operator>(Speculative a, Speculative b) { return a.v > b.v; }
inline bool operator<=(Speculative a, Speculative b) { return a.v <= b.v; }
inline bool operator>=(Speculative a, Speculative b) { return a.v >= b.v; }
inline bool operator==(Speculative a, Speculative b) { return a.v == b.v; }
inline bool operator!=(Speculative a, Speculative b) { return a.v != b.v; }

// What op_math.cuh calls, found by argument-dependent lookup.
inline bool sign_bit(Speculative x) { return std::signbit(x.v); }
inline Speculative lm_fabs(Speculative x) { return with(std::fabs(x.v), x.uncertain); }
inline Speculative lm_sqrt(Speculative x) { return with(std::sqrt(x.v), x.uncertain); }
#define TW_SPECULATIVE_FUNCTION(name, fast)               \
  inline Speculative name(Speculative x) {                \
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

// Calls body(scalar_fn, speculative_fn) when fn is a float32 functor that runs in two passes and
// returns true; false (nothing called) otherwise.
template <class Fn, class Body>
bool with_speculative(const Fn&, Body&&) {
  return false;
}
template <Op op, class Body>
bool with_speculative(const ForwardFn<op, float>& fn, Body&& body) {
  if constexpr (forward_speculates(op)) {
    body(fn, ForwardFn<op, Speculative>{{Speculative(fn.p.s0), Speculative(fn.p.s1)}});
    return true;
  }
  return false;
}
template <Op op, class Body>
bool with_speculative(const VjpFn<op, float>& fn, Body&& body) {
  if constexpr (vjp_speculates(op)) {
    body(fn, VjpFn<op, Speculative>{{Speculative(fn.p.s0), Speculative(fn.p.s1)}});
    return true;
  }
  return false;
}
template <Prim P, class Body>
bool with_speculative(const FixedPrimFn<P, float>& fn, Body&& body) {
  if constexpr (P == Prim::exp || P == Prim::log || P == Prim::sin || P == Prim::cos || P == Prim::tanh ||
                P == Prim::sigmoid || P == Prim::sigmoid_split) {
    body(fn, FixedPrimFn<P, Speculative>{Speculative(fn.c)});
    return true;
  }
  return false;
}

// The second pass over one block: every flagged element recomputed by the scalar functor.
template <class Fn, int kBlock>
void redo_flagged(const Fn& fn, const float* const* in, std::int64_t first, int count, const unsigned char* uncertain,
                  float (&results)[Fn::nout][kBlock]) {
  for (int word = 0; word < count; word += 8) {
    std::uint64_t flags = 0;
    std::memcpy(&flags, uncertain + word, std::min(8, count - word));
    if (flags == 0) continue;
    for (int i = word; i < std::min(word + 8, count); ++i) {
      if (!uncertain[i]) continue;
      float x[Fn::nin > 0 ? Fn::nin : 1];
      float y[Fn::nout];
      for (int k = 0; k < Fn::nin; ++k) x[k] = in[k][first + i];
      fn(x, y);
      for (int k = 0; k < Fn::nout; ++k) results[k][i] = y[k];
    }
  }
}

// Elements [lo, hi) in blocks: the first pass over a block (the loop the compiler vectorizes) keeps
// the results and flags on the stack, the second recomputes the flagged elements with the scalar
// functor, then the block is stored. Every input of a block is read before any output of it is
// written, so an output may be its own input.
template <class Fn, class SpeculativeFn>
void run_two_passes(const Fn& fn, const SpeculativeFn& speculative_fn, std::int64_t lo, std::int64_t hi,
                    const float* const* in, float* const* out) {
  constexpr int kBlock = 512;
  constexpr int nin = Fn::nin, nout = Fn::nout;
  static_assert(SpeculativeFn::nin == nin && SpeculativeFn::nout == nout);
  float results[nout][kBlock];
  unsigned char uncertain[kBlock];
  for (std::int64_t first = lo; first < hi; first += kBlock) {
    const int count = static_cast<int>(std::min<std::int64_t>(kBlock, hi - first));
    unsigned char any_in_block = 0;
    for (int i = 0; i < count; ++i) {
      Speculative x[nin];
      Speculative y[nout];
      for (int k = 0; k < nin; ++k) x[k] = Speculative(in[k][first + i]);
      speculative_fn(x, y);
      bool any = false;
      for (int k = 0; k < nout; ++k) {
        results[k][i] = y[k].v;
        any |= y[k].uncertain;
      }
      uncertain[i] = any;
      any_in_block |= static_cast<unsigned char>(any);
    }
    // Most blocks flag nothing; elsewhere the flags are read eight at a time (a byte-by-byte scan took
    // a sixth of log's forward at 2^22, perf).
    if (any_in_block) redo_flagged(fn, in, first, count, uncertain, results);
    for (int k = 0; k < nout; ++k) std::copy_n(results[k], count, out[k] + first);
  }
}

}  // namespace tapewise::detail::speculative

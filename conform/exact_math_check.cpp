// conform/exact_math_check.cpp — tapewise-exact-check: exact mode's float32 exp, log, sin, cos, tanh
// against the correctly rounded result (every one of the 2^32 inputs with --all), and the float64 ones'
// error in ulps, on threads. Built by CMake as tapewise-exact-check (conform/CMakeLists.txt).
//
// Run:  tapewise-exact-check [--functions exp,log,sin,cos,tanh] [--dtype float32|float64]
//                            [--all [--shard I/N] | --samples N [--seed S]] [--threads T] [--json FILE]
//                            [--reference filter|mpfr] [--against-libm | --plant-misses | --self-test]
// Exit: 0 no float32 miss / every float64 error <= 1 ulp; 1 a miss (or an error over 1 ulp);
//       2 bad usage or an error (named on stderr). --self-test: 0 when exactly the planted misses were
//       found (and the run's own status was 1), 1 otherwise.
//
// Why the reference can be trusted, and is independent of the code under test:
//  * It never calls tapewise::exact. Special inputs (NaN of any payload, ±inf, ±0, log of negatives and
//    of 1) have their IEEE 754 results written out below (defined_value); every other input is decided
//    by glibc's long double functions (expl, logl, sinl, cosl, tanhl: 64-bit significand on x86-64)
//    or, failing that, by MPFR.
//  * float32 filter: y = the long double function at x. If y lies farther than 2^-56 |y| from both
//    rounding boundaries (the midpoints between the float nearest y and its two neighbours; for the
//    largest float the overflow threshold 2^128 - 2^103), the exact value is on the same side of both
//    whenever |y - f(x)| < 2^-56 |y|, i.e. whenever the long double result is within 2^7 = 128 of its
//    own ulps (2^-63 relative, at worst 2^-64 times its binade). glibc's manual ("Errors in Math
//    Functions") lists single-digit ulps for these long double functions on x86-64, far below 128;
//    --reference mpfr measures it (longdouble_max_rel_error, in units of 2^-63) and counts any input
//    the filter would have decided differently from MPFR (filter_disagreements: must be 0). The test
//    "y is strictly inside the float's rounding interval" also makes the filter independent of how
//    the long double -> float conversion rounds.
//  * Everything else goes to MPFR with binary32's exponent range (emin -148, emax 128), precision 24,
//    mpfr_subnormalize and round-to-nearest-even: the correctly rounded float, subnormals and
//    overflow included (MPFR's documented emulation of IEEE formats).
//  * float64: the error |got - f(x)| / ulp(E), E the correctly rounded double of f(x) (ulp(E) the
//    spacing above |E|; 2^-1074 for subnormals and zero), is first estimated from the long double
//    value y, E taken as y rounded to double: off by at most k 2^-63 |f| / ulp(E) < k 2^-10 ulp for a
//    k-ulp long double error, provided E has the right ulp (f(x) and y may round to neighbours, whose
//    ulps differ only across a power of two: there, unless y certainly rounds to E, MPFR decides).
//    MPFR (128 bits) recomputes every input whose estimate is over 0.9 ulp or within 1/64 of 0.5 ulp,
//    so the maximum, the count over 1 ulp and the count over 0.5 ulp are exact. Wrong kinds of value
//    (NaN where a number is due or the reverse, a zero of the wrong sign, a finite value for an
//    infinite one) are an infinite error.
//  * --self-test checks the checker: it plants misses (the MPFR result nudged on about 1 input in 37)
//    in an implementation that is otherwise MPFR's correctly rounded result, and passes only if every
//    planted input, and no other, is reported.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <gmp.h>
#include <mpfr.h>
#include <nlohmann/json.hpp>

#include "core/whole_number.hpp"
#include "kernels/exact_math.cuh"

namespace {

constexpr int kPassed = 0, kMissed = 1, kUsageError = 2;

// ---------------------------------------------------------------------------------------------------
// The functions under test: one row per function, so plugging another implementation in is one table.

enum class Fn { exp, log, sin, cos, tanh };
constexpr Fn kAllFunctions[] = {Fn::exp, Fn::log, Fn::sin, Fn::cos, Fn::tanh};

const char* name_of(Fn fn) {
  switch (fn) {
    case Fn::exp: return "exp";
    case Fn::log: return "log";
    case Fn::sin: return "sin";
    case Fn::cos: return "cos";
    case Fn::tanh: return "tanh";
  }
  return "?";
}

struct Implementation {
  Fn fn;
  float (*f32)(float);
  double (*f64)(double);
};

using F32 = float (*)(float);
using F64 = double (*)(double);
namespace ex = tapewise::exact;

// tapewise's exact mode: what this program is for.
const Implementation kExact[] = {
    {Fn::exp, static_cast<F32>(&ex::exp), static_cast<F64>(&ex::exp)},
    {Fn::log, static_cast<F32>(&ex::log), static_cast<F64>(&ex::log)},
    {Fn::sin, static_cast<F32>(&ex::sin), static_cast<F64>(&ex::sin)},
    {Fn::cos, static_cast<F32>(&ex::cos), static_cast<F64>(&ex::cos)},
    {Fn::tanh, static_cast<F32>(&ex::tanh), static_cast<F64>(&ex::tanh)},
};

// glibc's float and double functions (--against-libm): not correctly rounded (glibc 2.36), so a run
// over a real implementation that finds misses.
const Implementation kLibm[] = {
    {Fn::exp, [](float x) { return ::expf(x); }, [](double x) { return ::exp(x); }},
    {Fn::log, [](float x) { return ::logf(x); }, [](double x) { return ::log(x); }},
    {Fn::sin, [](float x) { return ::sinf(x); }, [](double x) { return ::sin(x); }},
    {Fn::cos, [](float x) { return ::cosf(x); }, [](double x) { return ::cos(x); }},
    {Fn::tanh, [](float x) { return ::tanhf(x); }, [](double x) { return ::tanh(x); }},
};

// ---------------------------------------------------------------------------------------------------
// Bits.

std::uint32_t bits32(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
std::uint64_t bits64(double d) {
  std::uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}
float float_from(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
double double_from(std::uint64_t u) {
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
}

// Equal as results: the same bits, or both NaN (any payload, either sign).
bool same_result(float a, float b) { return bits32(a) == bits32(b) || (std::isnan(a) && std::isnan(b)); }

std::uint64_t mix64(std::uint64_t z) {  // SplitMix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// ---------------------------------------------------------------------------------------------------
// The reference: IEEE 754's fixed results, then glibc's long double functions, then MPFR.

// The result the definition fixes, for the inputs that have one (exact, so any rounding of it is
// correct); nullopt for every other input.
std::optional<long double> defined_value(Fn fn, long double x) {
  constexpr long double inf = std::numeric_limits<long double>::infinity();
  constexpr long double nan = std::numeric_limits<long double>::quiet_NaN();
  if (std::isnan(x)) return nan;
  switch (fn) {
    case Fn::exp:
      if (std::isinf(x)) return x > 0 ? inf : 0.0L;
      if (x == 0) return 1.0L;
      break;
    case Fn::log:
      if (x == 0) return -inf;  // either sign of zero
      if (x < 0) return nan;
      if (std::isinf(x)) return inf;
      if (x == 1) return 0.0L;
      break;
    case Fn::sin:
      if (std::isinf(x)) return nan;
      if (x == 0) return x;  // keeps the sign
      break;
    case Fn::cos:
      if (std::isinf(x)) return nan;
      if (x == 0) return 1.0L;
      break;
    case Fn::tanh:
      if (std::isinf(x)) return std::copysign(1.0L, x);
      if (x == 0) return x;
      break;
  }
  return std::nullopt;
}

long double long_double_value(Fn fn, long double x) {
  switch (fn) {
    case Fn::exp: return expl(x);
    case Fn::log: return logl(x);
    case Fn::sin: return sinl(x);
    case Fn::cos: return cosl(x);
    case Fn::tanh: return tanhl(x);
  }
  return std::numeric_limits<long double>::quiet_NaN();
}

using MpfrFunction = int (*)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t);
MpfrFunction mpfr_function(Fn fn) {
  switch (fn) {
    case Fn::exp: return mpfr_exp;
    case Fn::log: return mpfr_log;
    case Fn::sin: return mpfr_sin;
    case Fn::cos: return mpfr_cos;
    case Fn::tanh: return mpfr_tanh;
  }
  return nullptr;
}

// One thread's MPFR variables. MPFR's exponent range is per thread when it is built thread-safe
// (main checks mpfr_buildopt_tls_p), and every call sets the range it needs.
class Mpfr {
 public:
  Mpfr() {
    mpfr_inits2(24, in24_, out24_, static_cast<mpfr_ptr>(nullptr));
    mpfr_init2(in53_, 53);
    mpfr_init2(got53_, 53);
    mpfr_init2(wide_, 128);
    mpfr_init2(difference_, 256);
  }
  ~Mpfr() {
    mpfr_clears(in24_, out24_, in53_, got53_, wide_, difference_, static_cast<mpfr_ptr>(nullptr));
    mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
  }
  Mpfr(const Mpfr&) = delete;
  Mpfr& operator=(const Mpfr&) = delete;

  // f(x) correctly rounded to binary32 (round to nearest even), subnormals and overflow as IEEE says.
  float correctly_rounded32(Fn fn, float x) {
    mpfr_set_emin(-148);  // 2^-149 = 0.5 * 2^-148, the least subnormal
    mpfr_set_emax(128);   // below 2^128
    mpfr_set_flt(in24_, x, MPFR_RNDN);
    const int ternary = mpfr_function(fn)(out24_, in24_, MPFR_RNDN);
    mpfr_subnormalize(out24_, ternary, MPFR_RNDN);
    return mpfr_get_flt(out24_, MPFR_RNDN);
  }

  // f(x) to 128 bits, kept for the calls below; x is a float or a double.
  void evaluate_wide(Fn fn, double x) {
    wide_range();
    mpfr_set_d(in53_, x, MPFR_RNDN);
    mpfr_function(fn)(wide_, in53_, MPFR_RNDN);
  }
  double wide_correctly_rounded64() const { return mpfr_get_d(wide_, MPFR_RNDN); }

  // |got - f(x)| / 2^ulp_exponent, rounded up; an infinite `got` counts as ±2^1024 (the value the
  // overflow threshold is measured from).
  double wide_error_in(double got, int ulp_exponent) {
    wide_range();
    if (std::isinf(got))
      mpfr_set_si_2exp(got53_, got > 0 ? 1 : -1, 1024, MPFR_RNDN);
    else
      mpfr_set_d(got53_, got, MPFR_RNDN);
    mpfr_sub(difference_, got53_, wide_, MPFR_RNDN);
    mpfr_abs(difference_, difference_, MPFR_RNDN);
    mpfr_mul_2si(difference_, difference_, -ulp_exponent, MPFR_RNDN);
    return mpfr_get_d(difference_, MPFR_RNDU);
  }

  // |y - f(x)| / |f(x)| in units of 2^-63 (about the long double's ulps); 0 where f(x) is 0 or y is
  // out of long double's normal range (there the filter's absolute margin decides).
  double wide_relative_error_of(long double y) {
    wide_range();
    if (mpfr_zero_p(wide_) || !mpfr_number_p(wide_)) return 0;
    if (!std::isfinite(y) || std::fabs(y) < std::numeric_limits<long double>::min()) return 0;
    mpfr_set_ld(difference_, y, MPFR_RNDN);
    mpfr_sub(difference_, difference_, wide_, MPFR_RNDN);
    mpfr_div(difference_, difference_, wide_, MPFR_RNDN);
    mpfr_abs(difference_, difference_, MPFR_RNDN);
    mpfr_mul_2si(difference_, difference_, 63, MPFR_RNDN);
    return mpfr_get_d(difference_, MPFR_RNDU);
  }

 private:
  static void wide_range() {
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
  }
  mpfr_t in24_, out24_, in53_, got53_, wide_, difference_;
};

Mpfr& thread_mpfr() {
  thread_local Mpfr mpfr;
  return mpfr;
}

// The rounding interval of r in T (float or double): the midpoints to its neighbours (beyond the
// largest finite value, the overflow threshold max + ulp/2, then ±inf), exact in long double.
struct Interval {
  long double low, high;
};
template <class T>
Interval rounding_interval(T r) {
  constexpr T kMax = std::numeric_limits<T>::max();
  const long double overflow = kMax + (kMax - static_cast<long double>(std::nextafter(kMax, T(0)))) / 2;
  constexpr long double inf = std::numeric_limits<long double>::infinity();
  if (std::isinf(r)) return r > 0 ? Interval{overflow, inf} : Interval{-inf, -overflow};
  const T below = std::nextafter(r, -std::numeric_limits<T>::infinity());
  const T above = std::nextafter(r, std::numeric_limits<T>::infinity());
  const long double low = std::isinf(below) ? -overflow : (static_cast<long double>(r) + below) / 2;
  const long double high = std::isinf(above) ? overflow : (static_cast<long double>(r) + above) / 2;
  return {low, high};
}

// Whether f(x), known as y within 2^-56 |y| (see the comment at the top), certainly rounds in T to
// the value nearest y: y is farther than that from both boundaries of that value's rounding interval.
template <class T>
bool rounds_certainly(long double y) {
  if (std::isnan(y)) return false;
  if (std::isinf(y)) return true;  // |f(x)| beyond long double's 2^16384
  const Interval interval = rounding_interval(static_cast<T>(y));
  const long double margin = std::ldexp(std::fabs(y), -56) + 0x1p-16000L;  // 0x1p-16000: y underflowed
  return y - interval.low > margin && interval.high - y > margin;
}

// RN32(f(x)) from y = the long double value where that is certain; nullopt elsewhere.
std::optional<float> filter32(long double y) {
  if (rounds_certainly<float>(y)) return static_cast<float>(y);
  return std::nullopt;
}

// What the reference says of one float32 input, and how it got there.
struct Expected32 {
  float value;
  bool by_mpfr = false;
  bool filter_disagreed = false;   // --reference mpfr: the filter decided, and differently
  double longdouble_error = 0;     // --reference mpfr: |y - f| / |f| in units of 2^-63
};

Expected32 expected32(Fn fn, float x, bool always_mpfr) {
  if (auto v = defined_value(fn, x)) return {static_cast<float>(*v)};
  const long double y = long_double_value(fn, x);
  const std::optional<float> decided = filter32(y);
  if (!always_mpfr) {
    if (decided) return {*decided};
    return {thread_mpfr().correctly_rounded32(fn, x), true};
  }
  Mpfr& mpfr = thread_mpfr();
  Expected32 e{mpfr.correctly_rounded32(fn, x), true};
  e.filter_disagreed = decided && !same_result(*decided, e.value);
  mpfr.evaluate_wide(fn, x);
  e.longdouble_error = mpfr.wide_relative_error_of(y);
  return e;
}

// The exponent k of ulp(E) = 2^k, E the correctly rounded double: the spacing above |E|.
int ulp_exponent64(double expected) {
  if (std::isinf(expected)) return 1023 - 52;
  if (expected == 0) return -1074;
  return std::max(std::ilogb(expected), -1022) - 52;
}

// A float64 result's error against the exact value, in ulps of the correctly rounded double
// `expected`; `numeric(got, k)` measures |got - f(x)| / 2^k. Infinite for a wrong kind of value.
template <class Numeric>
double ulp_error64(double expected, double got, Numeric numeric) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (std::isnan(expected) || std::isnan(got)) return std::isnan(expected) && std::isnan(got) ? 0 : inf;
  if (expected == 0 && got == 0) return std::signbit(expected) == std::signbit(got) ? 0 : inf;
  if (std::isinf(expected) && got == expected) return 0;
  return numeric(got, ulp_exponent64(expected));
}

double long_double_error64(long double exact, double expected, double got) {
  return ulp_error64(expected, got, [&](double g, int k) -> double {
    if (std::isinf(exact)) return std::numeric_limits<double>::infinity();
    const long double g_value = std::isinf(g) ? std::copysign(0x1p1024L, g) : g;
    return static_cast<double>(std::ldexp(std::fabs(g_value - exact), -k));
  });
}

// What the reference says of one float64 result.
struct Measured64 {
  double ulps;
  double expected;
  bool by_mpfr = false;
  bool filter_disagreed = false;   // --reference mpfr: a trusted estimate on the other side of 0.5 or 1
  double estimate_deviation = 0;   // --reference mpfr: |trusted estimate - MPFR's|, in ulps
  double longdouble_error = 0;    // --reference mpfr: |y - f| / |f| in units of 2^-63
};

bool estimate_needs_mpfr(double ulps) { return !(ulps <= 0.9) || std::fabs(ulps - 0.5) < 1.0 / 64; }

// Whether ulp(RN64(f(x))) is certainly ulp(e), e = y rounded to double. f(x) and y could round to
// neighbours, whose ulps differ only when e or the double above |e| is a power of two; there y must be
// far from the boundary between them.
bool ulp_certain(long double y, double e) {
  if (!std::isfinite(e) || e == 0) return true;
  const std::uint64_t mantissa = bits64(e) & ((1ull << 52) - 1);
  const bool at_binade_edge = mantissa == 0 || mantissa == (1ull << 52) - 1;
  return !at_binade_edge || rounds_certainly<double>(y);
}

Measured64 measure64(Fn fn, double x, double got, bool always_mpfr) {
  if (auto v = defined_value(fn, x)) {
    const double expected = static_cast<double>(*v);
    return {long_double_error64(*v, expected, got), expected};
  }
  const long double y = long_double_value(fn, x);
  const double rounded = static_cast<double>(y);
  const double estimate = long_double_error64(y, rounded, got);
  const bool trusted = !estimate_needs_mpfr(estimate) && ulp_certain(y, rounded);
  if (!always_mpfr && trusted) return {estimate, rounded};
  Mpfr& mpfr = thread_mpfr();
  mpfr.evaluate_wide(fn, x);
  const double expected = mpfr.wide_correctly_rounded64();
  Measured64 m{ulp_error64(expected, got, [&](double g, int k) { return mpfr.wide_error_in(g, k); }),
               expected, true};
  if (always_mpfr && trusted) {  // what the filter would have said
    m.estimate_deviation = std::fabs(estimate - m.ulps);
    m.filter_disagreed = (estimate > 0.5) != (m.ulps > 0.5) || (estimate > 1) != (m.ulps > 1);
  }
  if (always_mpfr) m.longdouble_error = mpfr.wide_relative_error_of(y);
  return m;
}

// ---------------------------------------------------------------------------------------------------
// Planted misses (--plant-misses, --self-test): MPFR's correctly rounded result, nudged where
// `planted` says, so that the checker's report can be compared with a known answer.

bool planted(std::uint64_t input_bits) { return mix64(input_bits ^ 0x5eed) % 37 == 0; }

float planted32_at(Fn fn, float x) {
  const auto v = defined_value(fn, x);
  const float r = v ? static_cast<float>(*v) : thread_mpfr().correctly_rounded32(fn, x);
  if (!planted(bits32(x))) return r;
  if (std::isnan(r)) return 1.0f;
  if (r == 0) return -r;                                        // the other zero
  if (std::isinf(r)) return std::copysign(FLT_MAX, r);
  return std::nextafterf(r, std::copysign(INFINITY, r));      // one ulp away from zero
}

double correctly_rounded64(Fn fn, double x) {
  if (auto v = defined_value(fn, x)) return static_cast<double>(*v);
  Mpfr& mpfr = thread_mpfr();
  mpfr.evaluate_wide(fn, x);
  return mpfr.wide_correctly_rounded64();
}

// Whether the float64 plant changes x's result: not where the nudge would run into infinity (there it
// could land within 1 ulp of the overflow threshold).
bool planted64(Fn fn, double x) {
  if (!planted(bits64(x))) return false;
  const double r = correctly_rounded64(fn, x);
  return std::isnan(r) || r == 0 || (std::isfinite(r) && std::fabs(r) < 0x1p1020);
}

double planted64_at(Fn fn, double x) {
  const double r = correctly_rounded64(fn, x);
  if (!planted64(fn, x)) return r;
  if (std::isnan(r)) return 1.0;
  if (r == 0) return -r;
  const double away = std::copysign(INFINITY, r);
  return std::nextafter(std::nextafter(r, away), away);  // two ulps away from zero: over 1.5 ulp off
}

template <Fn fn>
float planted32_of(float x) {
  return planted32_at(fn, x);
}
template <Fn fn>
double planted64_of(double x) {
  return planted64_at(fn, x);
}
const Implementation kPlanted[] = {
    {Fn::exp, planted32_of<Fn::exp>, planted64_of<Fn::exp>},
    {Fn::log, planted32_of<Fn::log>, planted64_of<Fn::log>},
    {Fn::sin, planted32_of<Fn::sin>, planted64_of<Fn::sin>},
    {Fn::cos, planted32_of<Fn::cos>, planted64_of<Fn::cos>},
    {Fn::tanh, planted32_of<Fn::tanh>, planted64_of<Fn::tanh>},
};

// ---------------------------------------------------------------------------------------------------
// Inputs: a fixed list of special and hard ones, then random ones.

template <class T>
struct Format;
template <>
struct Format<float> {
  using Bits = std::uint32_t;
  static constexpr int precision = 24;
  static float from(Bits b) { return float_from(b); }
  static constexpr Bits kNaNs[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                   0x7fbfffffu, 0x7fc12345u, 0xffffffffu};
  static constexpr long double kHardReduction = 0x1p72L * 16367173;  // close to a multiple of pi/2
};
template <>
struct Format<double> {
  using Bits = std::uint64_t;
  static constexpr int precision = 53;
  static double from(Bits b) { return double_from(b); }
  static constexpr Bits kNaNs[] = {0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull,
                                   0xfff0000000000001ull, 0x7ff7ffffffffffffull, 0x7ff8000000012345ull,
                                   0xffffffffffffffffull};
  static constexpr long double kHardReduction = 0x1p797L * 6381956970095103;
};

template <class T>
class InputList {
 public:
  // RN(x) in T and `count` neighbours on each side, with both signs when `both_signs`.
  void add_around(long double x, int count, bool both_signs = false) {
    const T v = static_cast<T>(x);
    add(v, both_signs);
    T below = v, above = v;
    for (int i = 0; i < count; ++i) {
      below = std::nextafter(below, -std::numeric_limits<T>::infinity());
      above = std::nextafter(above, std::numeric_limits<T>::infinity());
      add(below, both_signs);
      add(above, both_signs);
    }
  }
  void add(T v, bool both_signs) {
    values.push_back(v);
    if (both_signs) values.push_back(-v);
  }
  std::vector<T> values;
};

// What every function gets: zeros, subnormals, the extremes, infinities, NaNs, small integers, every
// power of two with its neighbours (tiny values included).
template <class T>
void add_common_inputs(InputList<T>& in) {
  using L = std::numeric_limits<T>;
  for (T v : {T(0), L::denorm_min(), std::nextafter(L::min(), T(0)), L::min(), L::max(), L::infinity(), T(1),
              T(2), T(0.5), T(3), T(10), T(100), T(1000), T(1e6)})
    in.add(v, true);
  for (auto nan : Format<T>::kNaNs) in.add(Format<T>::from(nan), false);
  for (int k = L::min_exponent - Format<T>::precision; k < L::max_exponent; ++k)
    in.add_around(std::ldexp(1.0L, k), 1, true);
}

// Where each function's rounding changes behaviour: overflow and underflow thresholds, the edges of
// the ranges where the result rounds to 1 or to x, multiples of pi/2 and ln 2, tanh's saturation.
template <class T>
void add_hard_inputs(Fn fn, InputList<T>& in) {
  using L = std::numeric_limits<T>;
  constexpr int p = Format<T>::precision;
  const long double half_ulp_of_one = std::ldexp(1.0L, -p), ln2 = logl(2.0L), pi_2 = acosl(0.0L);
  switch (fn) {
    case Fn::exp:
      in.add_around(logl(L::max()), 32);                      // overflow
      in.add_around(logl(L::denorm_min()) - ln2, 32);         // underflow to zero
      in.add_around(logl(L::min()), 8);                       // subnormal results
      in.add_around(half_ulp_of_one, 8);                      // exp(x) leaves 1, above (1 + 2^-p)
      in.add_around(-half_ulp_of_one / 2, 8);                 // and below (1 - 2^-(p+1))
      for (int k = L::min_exponent - p - 1; k <= L::max_exponent; ++k) in.add_around(k * ln2, 1);
      break;
    case Fn::log:
      in.add_around(1.0L, 64);
      for (long double v : {expl(1.0L), expl(-1.0L), 10.0L, 0.1L}) in.add_around(v, 4);
      break;
    case Fn::sin:
    case Fn::cos:
      for (int k = 1; k <= 512; ++k) in.add_around(k * pi_2, 2, true);
      in.add_around(Format<T>::kHardReduction, 2, true);
      in.add_around(sqrtl(6 * half_ulp_of_one), 16, true);    // sin(x) rounds to x below about here
      in.add_around(sqrtl(3 * half_ulp_of_one), 16, true);
      in.add_around(sqrtl(half_ulp_of_one), 16, true);        // cos(x) rounds to 1 below about here
      break;
    case Fn::tanh: {
      const long double e = half_ulp_of_one / 2;              // 1 - e: the midpoint below 1
      in.add_around(0.5L * logl((2 - e) / e), 32, true);      // saturation: atanh(1 - e)
      in.add_around(sqrtl(3 * half_ulp_of_one), 16, true);    // tanh(x) rounds to x below about here
      in.add_around(sqrtl(1.5L * half_ulp_of_one), 16, true);
      in.add_around(0.55L, 4, true);
      break;
    }
  }
}

template <class T>
std::vector<T> special_inputs(Fn fn) {
  InputList<T> in;
  add_common_inputs(in);
  add_hard_inputs(fn, in);
  return in.values;
}

// The i-th random float64 of a function: a quarter raw bit patterns (mostly huge or tiny), the rest
// where the function does its work (|x| < 2^10 for exp, 2^40 for sin and cos, 2^5 for tanh; for log
// every positive binade and values near 1).
double random64(Fn fn, std::uint64_t r, std::uint64_t r2) {
  const std::uint64_t mantissa = r & ((1ull << 52) - 1), sign = r >> 63;
  if (r2 % 4 == 0) return double_from(r);
  auto in_binades = [&](int low, int high) {
    const int e = low + static_cast<int>((r2 >> 8) % static_cast<std::uint64_t>(high - low + 1));
    return double_from(sign << 63 | static_cast<std::uint64_t>(e + 1023) << 52 | mantissa);
  };
  switch (fn) {
    case Fn::exp: return in_binades(-60, 9);
    case Fn::log:
      if (r2 % 4 == 1) return double_from(r & ~(1ull << 63));
      return 1 + (sign ? -1 : 1) * std::ldexp(1 + std::ldexp(static_cast<double>(mantissa), -52),
                                              -1 - static_cast<int>((r2 >> 8) % 60));
    case Fn::sin:
    case Fn::cos: return in_binades(-30, 40);
    case Fn::tanh: return in_binades(-30, 5);
  }
  return 0;
}

// One function's run: which inputs (by index) and what to compare.
struct Job {
  Fn fn = Fn::exp;
  const Implementation* implementation = nullptr;
  bool all = false;  // float32 only: the input's bits are shard + index * shards
  std::uint64_t shard = 0, shards = 1;
  std::vector<float> special32;
  std::vector<double> special64;
  std::uint64_t samples = 0, key = 0;  // key: mix64 of the seed
  bool always_mpfr = false, plants = false;

  std::uint64_t count(bool float64) const {
    if (all) return ((1ull << 32) - shard + shards - 1) / shards;
    return (float64 ? special64.size() : special32.size()) + samples;
  }
  float input32(std::uint64_t i) const {
    if (all) return float_from(static_cast<std::uint32_t>(shard + i * shards));
    if (i < special32.size()) return special32[i];
    return float_from(static_cast<std::uint32_t>(mix64(key + i)));
  }
  double input64(std::uint64_t i) const {
    if (i < special64.size()) return special64[i];
    return random64(fn, mix64(key + i), mix64(~key + i));
  }
};

// ---------------------------------------------------------------------------------------------------
// Checking: the tallies, one input, a run on threads.

struct Miss {
  std::uint64_t index = 0, input = 0, got = 0, expected = 0;
  double ulps = 0;  // float64
};

struct Tally {
  std::uint64_t inputs = 0, misses = 0, by_mpfr = 0;
  std::uint64_t planted = 0, planted_unreported = 0, unplanted_reported = 0;  // --plant-misses
  std::uint64_t filter_disagreements = 0;                                     // --reference mpfr
  double longdouble_max_error = 0, estimate_max_deviation = 0;                // --reference mpfr
  double max_ulps = -1;                                                       // float64
  Miss worst;
  std::uint64_t over_half = 0, over_one = 0, wrong_kind = 0;
  std::vector<Miss> first_misses;  // the lowest indices, at most `keep`

  void note_miss(const Miss& miss, std::size_t keep) {
    ++misses;
    if (first_misses.size() < keep) first_misses.push_back(miss);
  }
  void note_error(const Miss& at) {
    if (at.ulps > max_ulps || (at.ulps == max_ulps && at.index < worst.index)) {
      max_ulps = at.ulps;
      worst = at;
    }
  }
  void merge(const Tally& o, std::size_t keep) {
    inputs += o.inputs, misses += o.misses, by_mpfr += o.by_mpfr;
    planted += o.planted, planted_unreported += o.planted_unreported, unplanted_reported += o.unplanted_reported;
    filter_disagreements += o.filter_disagreements;
    longdouble_max_error = std::max(longdouble_max_error, o.longdouble_max_error);
    estimate_max_deviation = std::max(estimate_max_deviation, o.estimate_max_deviation);
    if (o.max_ulps >= 0) note_error(o.worst);
    over_half += o.over_half, over_one += o.over_one, wrong_kind += o.wrong_kind;
    first_misses.insert(first_misses.end(), o.first_misses.begin(), o.first_misses.end());
    std::sort(first_misses.begin(), first_misses.end(), [](const Miss& a, const Miss& b) { return a.index < b.index; });
    if (first_misses.size() > keep) first_misses.resize(keep);
  }
};

void check32(const Job& job, std::uint64_t index, Tally& t, std::size_t keep) {
  const float x = job.input32(index);
  const float got = job.implementation->f32(x);
  const Expected32 e = expected32(job.fn, x, job.always_mpfr);
  ++t.inputs;
  t.by_mpfr += e.by_mpfr;
  t.filter_disagreements += e.filter_disagreed;
  t.longdouble_max_error = std::max(t.longdouble_max_error, e.longdouble_error);
  const bool miss = !same_result(got, e.value);
  if (miss) t.note_miss({index, bits32(x), bits32(got), bits32(e.value)}, keep);
  if (job.plants) {
    const bool p = planted(bits32(x));
    t.planted += p;
    t.planted_unreported += p && !miss;
    t.unplanted_reported += !p && miss;
  }
}

void check64(const Job& job, std::uint64_t index, Tally& t, std::size_t keep) {
  const double x = job.input64(index);
  const double got = job.implementation->f64(x);
  const Measured64 m = measure64(job.fn, x, got, job.always_mpfr);
  ++t.inputs;
  t.by_mpfr += m.by_mpfr;
  t.filter_disagreements += m.filter_disagreed;
  t.longdouble_max_error = std::max(t.longdouble_max_error, m.longdouble_error);
  t.estimate_max_deviation = std::max(t.estimate_max_deviation, m.estimate_deviation);
  const Miss at{index, bits64(x), bits64(got), bits64(m.expected), m.ulps};
  t.note_error(at);
  t.over_half += m.ulps > 0.5;
  t.over_one += m.ulps > 1;
  t.wrong_kind += std::isinf(m.ulps);
  if (m.ulps > 1) t.note_miss(at, keep);
  if (job.plants) {
    const bool p = planted64(job.fn, x);
    t.planted += p;
    t.planted_unreported += p && !(m.ulps > 1);
    t.unplanted_reported += !p && m.ulps > 0.5;  // the rest is MPFR's correctly rounded double
  }
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f s", s);
  return text;
}

// Prints where a long run stands every 10 s until `done` reaches `count`.
void report_progress(const char* what, std::uint64_t count, const std::atomic<std::uint64_t>& done,
                     const std::atomic<std::uint64_t>& misses) {
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  while (done.load() < count) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(10)) continue;
    last = now;
    const double elapsed = std::chrono::duration<double>(now - start).count();
    const double fraction = static_cast<double>(done.load()) / static_cast<double>(count);
    std::fprintf(stderr, "tapewise-exact-check: %s: %.1f%% of %" PRIu64 " inputs, %" PRIu64 " misses, %s, about %s left\n",
                 what, 100 * fraction, count, misses.load(), seconds_text(elapsed).c_str(),
                 seconds_text(fraction > 0 ? elapsed * (1 - fraction) / fraction : 0).c_str());
  }
}

// Runs every input of the job on `threads` threads, in chunks taken in turn.
Tally run_job(const Job& job, bool float64, int threads, std::size_t keep, bool progress) {
  constexpr std::uint64_t kChunk = 1 << 14;
  const std::uint64_t count = job.count(float64);
  std::atomic<std::uint64_t> next{0}, done{0}, misses{0};
  std::mutex merging;
  Tally total;
  auto work = [&] {
    Tally local;
    for (std::uint64_t begin; (begin = next.fetch_add(kChunk)) < count;) {
      const std::uint64_t end = std::min(begin + kChunk, count), misses_before = local.misses;
      for (std::uint64_t i = begin; i < end; ++i) float64 ? check64(job, i, local, keep) : check32(job, i, local, keep);
      misses += local.misses - misses_before;
      done += end - begin;
    }
    std::lock_guard lock(merging);
    total.merge(local, keep);
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  if (progress) {
    const std::string what = std::string(name_of(job.fn)) + (float64 ? " float64" : " float32");
    report_progress(what.c_str(), count, done, misses);
  }
  for (std::thread& t : pool) t.join();
  return total;
}

// ---------------------------------------------------------------------------------------------------
// Reporting: a summary on stdout, the JSON file (schema tapewise-exact-check/1).

std::string hex_bits(std::uint64_t bits, bool float64) {
  char text[24];
  std::snprintf(text, sizeof text, float64 ? "0x%016" PRIx64 : "0x%08" PRIx64, bits);
  return text;
}
std::string value_text(std::uint64_t bits, bool float64) {
  char text[40];
  if (float64)
    std::snprintf(text, sizeof text, "%.17g", double_from(bits));
  else
    std::snprintf(text, sizeof text, "%.9g", static_cast<double>(float_from(static_cast<std::uint32_t>(bits))));
  return text;
}
std::string bits_and_value(std::uint64_t bits, bool float64) {
  return hex_bits(bits, float64) + " (" + value_text(bits, float64) + ")";
}

nlohmann::json miss_json(const Miss& m, bool float64) {
  nlohmann::json j = {{"index", m.index},
                      {"input", hex_bits(m.input, float64)},
                      {"input_value", value_text(m.input, float64)},
                      {"got", hex_bits(m.got, float64)},
                      {"got_value", value_text(m.got, float64)},
                      {"expected", hex_bits(m.expected, float64)},
                      {"expected_value", value_text(m.expected, float64)}};
  if (float64) j["ulp_error"] = std::isfinite(m.ulps) ? nlohmann::json(m.ulps) : nlohmann::json(nullptr);
  return j;
}

struct Outcome {
  Fn fn;
  Tally tally;
  std::uint64_t special_inputs;
  double seconds;
};

nlohmann::json function_json(const Outcome& o, bool float64, bool always_mpfr, bool plants) {
  const Tally& t = o.tally;
  nlohmann::json j = {{"name", name_of(o.fn)},         {"inputs", t.inputs},
                      {"special_inputs", o.special_inputs}, {"misses", t.misses},
                      {"by_mpfr", t.by_mpfr},           {"seconds", o.seconds}};
  if (float64 && t.max_ulps >= 0) {
    j["max_ulp_error"] = std::isfinite(t.max_ulps) ? nlohmann::json(t.max_ulps) : nlohmann::json(nullptr);
    j["max_ulp_input"] = hex_bits(t.worst.input, true);
    j["max_ulp_input_value"] = value_text(t.worst.input, true);
    j["max_ulp_got"] = hex_bits(t.worst.got, true);
    j["max_ulp_expected"] = hex_bits(t.worst.expected, true);
    j["over_half_ulp"] = t.over_half;
    j["over_one_ulp"] = t.over_one;
    j["wrong_kind"] = t.wrong_kind;
  }
  if (always_mpfr) {
    j["filter_disagreements"] = t.filter_disagreements;
    if (float64) j["estimate_max_deviation_ulps"] = t.estimate_max_deviation;
    j["longdouble_max_rel_error"] = t.longdouble_max_error;
  }
  if (plants) {
    j["planted"] = t.planted;
    j["planted_unreported"] = t.planted_unreported;
    j["unplanted_reported"] = t.unplanted_reported;
  }
  nlohmann::json misses = nlohmann::json::array();
  for (const Miss& m : t.first_misses) misses.push_back(miss_json(m, float64));
  j["first_misses"] = misses;
  return j;
}

void print_summary(const Outcome& o, bool float64, bool always_mpfr, bool plants) {
  const Tally& t = o.tally;
  std::printf("%-4s %s  %" PRIu64 " inputs  ", name_of(o.fn), float64 ? "float64" : "float32", t.inputs);
  if (float64) {
    std::printf("max %.6g ulp at x = %s  over 0.5 ulp: %" PRIu64 "  over 1 ulp: %" PRIu64 "  wrong kind: %" PRIu64,
                t.max_ulps, bits_and_value(t.worst.input, true).c_str(), t.over_half, t.over_one, t.wrong_kind);
  } else {
    std::printf("%" PRIu64 " misses", t.misses);
  }
  std::printf("  (%" PRIu64 " by MPFR)  %.1f s\n", t.by_mpfr, o.seconds);
  if (always_mpfr) {
    std::printf("     audit: filter disagreements %" PRIu64 ", long double max error %.3g x 2^-63 relative",
                t.filter_disagreements, t.longdouble_max_error);
    if (float64) std::printf(", trusted estimates off by at most %.3g ulp", t.estimate_max_deviation);
    std::printf("\n");
  }
  for (const Miss& m : t.first_misses) {
    std::printf("     miss: x = %s  got %s  correctly rounded %s", bits_and_value(m.input, float64).c_str(),
                bits_and_value(m.got, float64).c_str(), bits_and_value(m.expected, float64).c_str());
    if (float64) std::printf("  (%.6g ulp)", m.ulps);
    std::printf("\n");
  }
  if (plants)
    std::printf("     planted %" PRIu64 ": %" PRIu64 " not reported, %" PRIu64 " reported that were not planted\n",
                t.planted, t.planted_unreported, t.unplanted_reported);
}

// ---------------------------------------------------------------------------------------------------
// The command line.

enum class Under { exact, libm, planted };

struct Options {
  std::vector<Fn> functions;
  bool float64 = false, all = false, always_mpfr = false, self_test = false;
  std::uint64_t samples = 1ull << 20, seed = 1;
  std::uint64_t shard = 0, shards = 1;  // --all --shard I/N
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string json;
  std::size_t first_misses = 10;
  Under under = Under::exact;
};

struct UsageError {
  std::string message;
};

// A whole number written in digits or as 2^k; nullopt for anything else or past 2^64 - 1.
std::optional<std::uint64_t> parse_count(const std::string& text) {
  if (text.size() > 2 && text.compare(0, 2, "2^") == 0) {
    const auto k = parse_count(text.substr(2));
    if (!k || *k > 63) return std::nullopt;  // 2^64 and beyond
    return 1ull << *k;
  }
  return tapewise::detail::whole_number(text);
}

std::uint64_t parse_count_or_throw(const std::string& option, const std::string& text, std::uint64_t low,
                                   std::uint64_t high) {
  const auto v = parse_count(text);
  if (!v) throw UsageError{option + ": '" + text + "' is not a whole number below 2^64 (digits, or 2^k)"};
  if (*v < low || *v > high)
    throw UsageError{option + ": " + text + " is out of range (" + std::to_string(low) + " to " +
                     std::to_string(high) + ")"};
  return *v;
}

// --shard I/N: 0 <= I < N <= 2^16.
void parse_shard(const std::string& text, Options& o) {
  const std::size_t slash = text.find('/');
  if (slash == std::string::npos) throw UsageError{"--shard: '" + text + "' is not I/N"};
  o.shards = parse_count_or_throw("--shard (N)", text.substr(slash + 1), 1, 1 << 16);
  o.shard = parse_count_or_throw("--shard (I)", text.substr(0, slash), 0, o.shards - 1);
}

std::vector<Fn> parse_functions(const std::string& text) {
  std::vector<Fn> functions;
  std::stringstream list(text);
  for (std::string name; std::getline(list, name, ',');) {
    const auto* found = std::find_if(std::begin(kAllFunctions), std::end(kAllFunctions),
                                     [&](Fn fn) { return name == name_of(fn); });
    if (found == std::end(kAllFunctions))
      throw UsageError{"--functions: unknown function '" + name + "' (known: exp, log, sin, cos, tanh)"};
    if (std::find(functions.begin(), functions.end(), *found) == functions.end()) functions.push_back(*found);
  }
  if (functions.empty()) throw UsageError{"--functions: no function named"};
  return functions;
}

// Checks the combinations the options do not allow, after CLI11 has read them.
void check_combinations(const Options& o, bool samples_given) {
  if (o.all && o.float64) throw UsageError{"--all covers float32 only (2^64 float64 inputs are out of reach): use --samples"};
  if (o.all && samples_given) throw UsageError{"--all and --samples exclude each other"};
  if (o.shards > 1 && !o.all) throw UsageError{"--shard splits --all: give --all with it"};
  if (o.all && o.under == Under::planted)
    throw UsageError{"--plant-misses and --self-test run on samples (every planted input costs an MPFR call), not --all"};
}

Options parse_options(int argc, char** argv) {
  CLI::App app{"tapewise-exact-check: exact mode's exp, log, sin, cos, tanh against the correctly rounded "
               "result (float32: every input with --all) and their float64 error in ulps"};
  std::string functions = "exp,log,sin,cos,tanh", dtype = "float32", samples, seed = "1", threads, reference = "filter";
  std::string first_misses = "10", shard;
  Options o;
  bool libm = false, plant = false;
  app.add_option("--functions", functions, "comma-separated: exp,log,sin,cos,tanh (default: all five)")
      ->type_name("LIST");
  app.add_option("--dtype", dtype, "float32 (default) or float64")->type_name("DTYPE");
  app.add_flag("--all", o.all, "every one of the 2^32 float32 inputs");
  app.add_option("--shard", shard, "with --all, only the inputs whose bits are I modulo N (runs split over processes)")
      ->type_name("I/N");
  app.add_option("--samples", samples, "random inputs per function, besides the special list (default 2^20)")
      ->type_name("N");
  app.add_option("--seed", seed, "seed of the random inputs (default 1)")->type_name("S");
  app.add_option("--threads", threads, "threads (default: the hardware's)")->type_name("T");
  app.add_option("--json", o.json, "write the report to FILE (schema tapewise-exact-check/1)")->type_name("FILE");
  app.add_option("--reference", reference,
                 "filter (default: long double, MPFR where undecided) or mpfr (MPFR for every input, auditing the filter)")
      ->type_name("KIND");
  app.add_option("--first-misses", first_misses, "how many misses to list per function (default 10)")->type_name("N");
  auto* libm_flag = app.add_flag("--against-libm", libm, "check glibc's expf, logf... instead of tapewise::exact");
  auto* plant_flag = app.add_flag("--plant-misses", plant, "check MPFR's correctly rounded result with misses planted");
  app.add_flag("--self-test", o.self_test, "--plant-misses, passing (exit 0) only if exactly the planted misses are reported")
      ->excludes(libm_flag)
      ->excludes(plant_flag);
  libm_flag->excludes(plant_flag);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    std::exit(status == 0 ? kPassed : kUsageError);
  }
  o.functions = parse_functions(functions);
  if (dtype != "float32" && dtype != "float64") throw UsageError{"--dtype: '" + dtype + "' is neither float32 nor float64"};
  o.float64 = dtype == "float64";
  if (reference != "filter" && reference != "mpfr") throw UsageError{"--reference: '" + reference + "' is neither filter nor mpfr"};
  o.always_mpfr = reference == "mpfr";
  if (!samples.empty()) o.samples = parse_count_or_throw("--samples", samples, 0, 1ull << 40);
  o.seed = parse_count_or_throw("--seed", seed, 0, ~0ull);
  if (!threads.empty()) o.threads = static_cast<int>(parse_count_or_throw("--threads", threads, 1, 1024));
  o.first_misses = parse_count_or_throw("--first-misses", first_misses, 0, 100000);
  if (!shard.empty()) parse_shard(shard, o);
  o.under = libm ? Under::libm : plant || o.self_test ? Under::planted : Under::exact;
  check_combinations(o, !samples.empty());
  return o;
}

const Implementation& implementation_of(Under under, Fn fn) {
  const Implementation* table = under == Under::exact ? kExact : under == Under::libm ? kLibm : kPlanted;
  return *std::find_if(table, table + std::size(kAllFunctions), [&](const Implementation& row) { return row.fn == fn; });
}

const char* under_name(Under under) {
  switch (under) {
    case Under::exact: return "tapewise::exact";
    case Under::libm: return "libm";
    case Under::planted: return "planted";
  }
  return "?";
}

Outcome run_function(const Options& o, Fn fn) {
  Job job;
  job.fn = fn;
  job.implementation = &implementation_of(o.under, fn);
  job.all = o.all;
  job.shard = o.shard;
  job.shards = o.shards;
  if (!o.all) {
    if (o.float64)
      job.special64 = special_inputs<double>(fn);
    else
      job.special32 = special_inputs<float>(fn);
    job.samples = o.samples;
    job.key = mix64(o.seed);
  }
  job.always_mpfr = o.always_mpfr;
  job.plants = o.under == Under::planted;
  const auto start = std::chrono::steady_clock::now();
  Tally tally = run_job(job, o.float64, o.threads, o.first_misses, o.all);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {fn, std::move(tally), o.float64 ? job.special64.size() : job.special32.size(), seconds};
}

bool function_passed(const Tally& t, bool float64) { return float64 ? !(t.max_ulps > 1) : t.misses == 0; }

// --self-test: the plants were all reported, nothing else was, and there were plants to find.
bool self_test_passed(const Tally& t) { return t.planted > 0 && t.planted_unreported == 0 && t.unplanted_reported == 0; }

int run(const Options& o) {
  std::ofstream json_file;
  if (!o.json.empty()) {
    json_file.open(o.json);
    if (!json_file) throw UsageError{"--json: cannot write '" + o.json + "': " + std::strerror(errno)};
  }
  nlohmann::json functions = nlohmann::json::array();
  bool passed = true, self_test_ok = true;
  for (Fn fn : o.functions) {
    const Outcome outcome = run_function(o, fn);
    print_summary(outcome, o.float64, o.always_mpfr, o.under == Under::planted);
    std::fflush(stdout);
    functions.push_back(function_json(outcome, o.float64, o.always_mpfr, o.under == Under::planted));
    passed = passed && function_passed(outcome.tally, o.float64);
    self_test_ok = self_test_ok && self_test_passed(outcome.tally);
  }
  const int verdict = passed ? kPassed : kMissed;
  if (o.self_test) {
    self_test_ok = self_test_ok && verdict == kMissed;
    std::printf("self-test: %s\n", self_test_ok ? "the checker reported exactly the planted misses (exit status 1)"
                                                : "FAILED: the report differs from the planted misses");
  }
  const int exit_status = o.self_test ? (self_test_ok ? kPassed : kMissed) : verdict;
  if (!o.json.empty()) {
    nlohmann::json report = {{"schema", "tapewise-exact-check/1"},
                             {"dtype", o.float64 ? "float64" : "float32"},
                             {"implementation", under_name(o.under)},
                             {"inputs", o.all ? "all" : "samples"},
                             {"reference", o.always_mpfr ? "mpfr" : "filter"},
                             {"threads", o.threads},
                             {"functions", functions},
                             {"passed", passed},
                             {"exit_status", exit_status}};
    if (!o.all) report["samples"] = o.samples, report["seed"] = o.seed;
    if (o.all) report["shard"] = std::to_string(o.shard) + "/" + std::to_string(o.shards);
    if (o.self_test) report["self_test_passed"] = self_test_ok;
    json_file << report.dump(2) << "\n";
    json_file.close();
    if (!json_file) throw UsageError{"--json: writing '" + o.json + "' failed"};
  }
  return exit_status;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options options = parse_options(argc, argv);
    if (options.threads > 1 && !mpfr_buildopt_tls_p()) {
      std::fprintf(stderr, "tapewise-exact-check: this MPFR is not thread-safe: running on one thread\n");
      options.threads = 1;
    }
    return run(options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "tapewise-exact-check: %s\n", e.message.c_str());
    return kUsageError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tapewise-exact-check: %s\n", e.what());
    return kUsageError;
  }
}

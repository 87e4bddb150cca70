// conform/measure_bounds.cpp — measures each op's error on a production backend against the
// reference, to set spec/bounds.def: float32 and float64 on random inputs in each op's domain with
// its run and graded scalar sets, plus its kink (all from spec/ops.def); bfloat16 and float16
// exhaustively (every 16-bit input in the domain; see measure_16bit). Prints the max ULP error, the
// max absolute error / (eps w), and what the current bounds leave over. A one-off tool, not a test
// (no pass/fail logic beyond the exit code). Built by CMake as tapewise-measure-bounds
// (conform/CMakeLists.txt).
//
// Run:  build/bin/tapewise-measure-bounds [--backend cpu|cuda] [--samples N] [--threads T] [--seed S]
//                                         [--op NAME] [--dtype float32|float64|bfloat16|float16]
//                                         [--g-per-x N] [--b-per-a N]
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <tapewise/tapewise.hpp>

#include "bounds.hpp"
#include "measure.hpp"
#include "reference.hpp"

using namespace tapewise;
using namespace tapewise::reference;

namespace {

struct Options {
  std::string backend = "cpu";
  std::int64_t samples = 20000;  // per op, dtype
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::uint64_t seed = 1;
  std::string op, dtype;
  int g_per_x = 4096;  // 16-bit unary VJPs: cotangents per input
  int b_per_a = 256;   // 16-bit binary nodes: second inputs per first input
};

// One batch: inputs (a, b), cotangent g and the scalars, all dtype values widened to double.
struct Batch {
  Scalars s;
  std::vector<double> a, b, g;
};

// Where a maximum was reached: inputs a, b (0 when unary), cotangent g, first scalar.
struct Where {
  double a = 0, b = 0, g = 0, s0 = 0;
};

constexpr std::array<double, 5> kUlpCandidates{1, 2, 4, 8, 16};

// What one direction (forward, or VJP over both gradients) left over.
struct Stats {
  std::int64_t count = 0, violations = 0;
  double max_ulp = 0, max_eps = 0, need_abs = 0, need_ulp = 0, max_ratio = 0;
  std::array<double, 5> need_abs_at{};  // the abs term needed with ulp = kUlpCandidates[i]
  Where at_max_ulp, at_need_abs;
  void add(const ErrorCheck& c, Bound bound, const Where& where) {
    ++count;
    if (!c.within) ++violations;
    max_eps = std::max(max_eps, c.error_eps);
    max_ratio = std::max(max_ratio, c.ratio);
    // The abs term this sample needs on top of the ulp bound.
    const double need = c.error_ulps > bound.ulp && c.ratio > 0 ? c.error_eps * (1 - bound.ulp / c.error_ulps) : 0;
    if (need > need_abs) need_abs = need, at_need_abs = where;
    // The ulp term this sample needs on top of the abs bound.
    if (c.error_eps > bound.abs && c.ratio > 0)
      need_ulp = std::max(need_ulp, c.error_ulps * (1 - bound.abs / c.error_eps));
    if (c.error_ulps > max_ulp) max_ulp = c.error_ulps, at_max_ulp = where;
    for (std::size_t i = 0; i < kUlpCandidates.size(); ++i)
      if (c.error_ulps > kUlpCandidates[i] && c.ratio > 0)
        need_abs_at[i] = std::max(need_abs_at[i], c.error_eps * (1 - kUlpCandidates[i] / c.error_ulps));
  }
  void merge(const Stats& o) {
    count += o.count, violations += o.violations;
    max_eps = std::max(max_eps, o.max_eps), max_ratio = std::max(max_ratio, o.max_ratio);
    need_ulp = std::max(need_ulp, o.need_ulp);
    if (o.need_abs > need_abs) need_abs = o.need_abs, at_need_abs = o.at_need_abs;
    if (o.max_ulp > max_ulp) max_ulp = o.max_ulp, at_max_ulp = o.at_max_ulp;
    for (std::size_t i = 0; i < kUlpCandidates.size(); ++i) need_abs_at[i] = std::max(need_abs_at[i], o.need_abs_at[i]);
  }
};

class Sampler {
 public:
  Sampler(const OpInfo& info, DType d, std::uint64_t seed) : info_(info), d_(d), rng_(seed) {}

  // A dtype value with magnitude in the op's domain [2^lo, 2^hi): an exponent from lo .. hi-1, then
  // a significand of the dtype's mantissa bits; both signs unless positive_only.
  double in_domain() {
    const int bits = format_of(d_).precision - 1;
    const DomainLog2 domain = bounds_domain(info_, d_);
    const int e = std::uniform_int_distribution<int>(domain.lo, domain.hi - 1)(rng_);
    const double significand = 1.0 + std::ldexp(static_cast<double>(rng_() >> (64 - bits)), -bits);
    const double v = std::ldexp(significand, e);
    return info_.positive_only || coin(0.5) ? v : -v;
  }
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  std::mt19937_64& rng() { return rng_; }

  // One of the op's run and graded scalar sets (spec/ops.def): the sets its bounds are stated for.
  Scalars scalars() {
    const ScalarSetList sets = graded_scalar_sets(info_);
    return sets.sets[std::uniform_int_distribution<int>(0, sets.count - 1)(rng_)];
  }

  Batch batch(std::int64_t n) {
    Batch bt{scalars(), {}, {}, {}};
    for (std::int64_t i = 0; i < n; ++i) {
      double a = in_domain(), b = in_domain();
      // The op's kink (spec/ops.def), now and then.
      if (info_.kink == Kink::tie && coin(0.1)) b = a;
      if (info_.kink == Kink::bounds && coin(0.05)) a = round_to(d_, coin(0.5) ? bt.s.s0 : bt.s.s1);
      if (info_.kink == Kink::zero && coin(0.02)) a = coin(0.5) ? 0.0 : -0.0;
      bt.a.push_back(a), bt.b.push_back(b), bt.g.push_back(in_domain());
    }
    return bt;
  }

 private:
  const OpInfo& info_;
  DType d_;
  std::mt19937_64 rng_;
};

// The values (each already a value of d) as a HostArray of d.
template <class T>
HostArray host_as(const std::vector<double>& v) {
  std::vector<T> out;
  out.reserve(v.size());
  for (double x : v) out.push_back(static_cast<T>(x));
  return HostArray::of<T>(Shape{static_cast<std::int64_t>(v.size())}, out);
}
HostArray host(const std::vector<double>& v, DType d) {
  switch (d) {
    case DType::float32: return host_as<float>(v);
    case DType::float64: return HostArray::of<double>(Shape{static_cast<std::int64_t>(v.size())}, v);
    case DType::bfloat16: return host_as<bfloat16>(v);
    case DType::float16: return host_as<float16>(v);
  }
  return {};
}

std::vector<double> widen(const HostArray& h) {
  std::vector<double> v(static_cast<std::size_t>(h.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = h.as_double(static_cast<std::int64_t>(i));
  return v;
}

template <class T>
T must(Result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "%s: %s\n", what, r.error().str().c_str());
    std::exit(2);
  }
  return std::move(*r);
}
void must(Result<void> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "%s: %s\n", what, r.error().str().c_str());
    std::exit(2);
  }
}

// Runs forward and fused VJP of one batch on the backend; returns y, da, db (db empty if unary).
std::array<std::vector<double>, 3> produce(Backend& be, const OpInfo& info, DType d, const Batch& bt) {
  const Shape shape{static_cast<std::int64_t>(bt.a.size())};
  Buffer a = must(be.upload(host(bt.a, d)), "upload a");
  Buffer b = must(be.upload(host(bt.b, d)), "upload b");
  Buffer g = must(be.upload(host(bt.g, d)), "upload g");
  Buffer y = must(be.allocate(shape, d, AllocTag::value), "allocate y");
  Buffer da = must(be.allocate(shape, d, AllocTag::gradient), "allocate da");
  Buffer db = must(be.allocate(shape, d, AllocTag::gradient), "allocate db");
  const Buffer* inputs[2] = {&a, &b};
  Buffer* grads[2] = {&da, &db};
  const auto n_in = static_cast<std::size_t>(info.arity);
  must(be.forward(info.op, bt.s, std::span<const Buffer* const>(inputs, n_in), y), "forward");
  must(be.vjp_fused(info.op, bt.s, std::span<const Buffer* const>(inputs, n_in), g,
                    std::span<Buffer* const>(grads, n_in)),
       "vjp_fused");
  must(be.synchronize(), "synchronize");
  return {widen(must(be.download(y), "download")), widen(must(be.download(da), "download")),
          info.arity == 2 ? widen(must(be.download(db), "download")) : std::vector<double>()};
}

// Checks elements [begin, end) of a batch against the reference.
void check_range(const OpInfo& info, DType d, MathMode math, const Batch& bt, const std::array<std::vector<double>, 3>& out,
                 std::size_t begin, std::size_t end, Stats& fwd, Stats& vjp_stats) {
  ensure_precision();
  const Bound fb = forward_bound(info.op, d, math), vb = vjp_bound(info.op, d, math);
  const auto n_in = static_cast<std::size_t>(info.arity);
  for (std::size_t i = begin; i < end; ++i) {
    const Real in[2] = {real(bt.a[i]), real(bt.b[i])};
    const Real g = real(bt.g[i]);
    const std::span<const Real> args(in, n_in);
    const Where where{bt.a[i], n_in == 2 ? bt.b[i] : 0.0, bt.g[i], bt.s.s0};
    fwd.add(check(forward(info.op, d, bt.s, args), out[0][i], d, fb,
                  abs_weight(info.op, d, bt.s, args, g, false)),
            fb, where);
    const auto exact = vjp(info.op, d, bt.s, args, g);
    const double w = abs_weight(info.op, d, bt.s, args, g, true);
    for (std::size_t k = 0; k < n_in; ++k) vjp_stats.add(check(exact[k], out[1 + k][i], d, vb, w), vb, where);
  }
}

// float32 and float64: random batches of the node's domain, kDTypes' scalars one per batch.
void measure_random(Backend& be, const OpInfo& info, DType d, const Options& opt, Sampler& sampler, Stats& fwd,
                    Stats& vjp_stats) {
  constexpr int kBatches = 16;  // distinct scalars per op
  for (int bi = 0; bi < kBatches; ++bi) {
    const Batch bt = sampler.batch(std::max<std::int64_t>(1, opt.samples / kBatches));
    const auto out = produce(be, info, d, bt);
    std::vector<Stats> f(static_cast<std::size_t>(opt.threads)), v(f.size());
    std::vector<std::thread> pool;
    const std::size_t n = bt.a.size(), chunk = (n + f.size() - 1) / f.size();
    for (std::size_t t = 0; t < f.size(); ++t)
      pool.emplace_back(check_range, std::cref(info), d, math_mode(be), std::cref(bt), std::cref(out), std::min(n, t * chunk),
                        std::min(n, (t + 1) * chunk), std::ref(f[t]), std::ref(v[t]));
    for (std::size_t t = 0; t < pool.size(); ++t) pool[t].join(), fwd.merge(f[t]), vjp_stats.merge(v[t]);
  }
}

// --- bfloat16 and float16: every input -----------------------------------------------------------
// A 16-bit dtype has 2^16 values, so the forward is measured on every one of them in the node's
// domain (the magnitudes [2^lo, 2^hi) of bounds_domain: spec/ops.def's, narrowed for float16;
// finite, both signs unless positive-only, +-0 at a zero kink) with each graded scalar set; a unary VJP on every such x times --g-per-x cotangents
// drawn from the domain (split over the scalar sets, at least 256 each); a binary node on every a
// times --b-per-a second inputs b drawn from the domain values (b = a one time in ten at a tie
// kink), each pair with one cotangent, forward and VJP.

double value_of_bits(DType d, std::uint16_t bits) {
  return d == DType::bfloat16 ? static_cast<double>(bfloat16::from_bits(bits))
                              : static_cast<double>(float16::from_bits(bits));
}

bool in_node_domain(const OpInfo& info, DType d, double v) {
  if (!std::isfinite(v)) return false;
  if (v == 0) return info.kink == Kink::zero;
  if (info.positive_only && v < 0) return false;
  const int e = std::ilogb(v);
  const DomainLog2 domain = bounds_domain(info, d);
  return e >= domain.lo && e < domain.hi;
}

std::vector<double> domain_values_16bit(const OpInfo& info, DType d) {
  std::vector<double> out;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const double v = value_of_bits(d, static_cast<std::uint16_t>(b));
    if (in_node_domain(info, d, v)) out.push_back(v);
  }
  return out;
}

// v rounded to nearest even on d's grid, in double arithmetic: exact for a 16-bit format, whose
// quanta (2^-133 and up) and values are doubles, as v's scaling by a power of two is.
double round_in_double(double v, DType d) {
  if (!std::isfinite(v) || v == 0) return v;
  const FloatFormat f = format_of(d);
  const int quantum = std::max(std::ilogb(v), f.min_exponent) - (f.precision - 1);
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(v, -quantum)), quantum);
  const double largest = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.max_exponent);
  return std::fabs(rounded) > largest ? std::copysign(HUGE_VAL, rounded) : rounded;
}

// reference::check in double arithmetic, for the 16-bit unary VJPs' g loop: the exact value is the
// MPFR derivative at g = 1 times g, taken in double (relative error 2^-53, below 2^-42 of a 16-bit
// ulp). The loop compares it with reference::check on each input's first cotangent (agree()).
ErrorCheck check_in_double(double exact, double produced, DType d, Bound bound, double w) {
  const double rounded = round_in_double(exact, d);
  if (!std::isfinite(rounded)) {
    const bool same = std::isnan(rounded) ? std::isnan(produced) : produced == rounded;
    return same ? ErrorCheck{0, 0, true, 0} : ErrorCheck{HUGE_VAL, HUGE_VAL, false, HUGE_VAL};
  }
  if (!std::isfinite(produced)) return ErrorCheck{HUGE_VAL, HUGE_VAL, false, HUGE_VAL};
  const double error = std::fabs(produced - exact), ulp = ulp_of(rounded, d), eps_w = dtype_eps(d) * w;
  const double allowed = bound.ulp * ulp + bound.abs * eps_w;
  ErrorCheck out{error / ulp, eps_w > 0 ? error / eps_w : (error > 0 ? HUGE_VAL : 0.0), true, 0};
  if (produced != rounded) out.within = error <= allowed, out.ratio = allowed > 0 ? error / allowed : HUGE_VAL;
  return out;
}

bool agree(const ErrorCheck& fast, const ErrorCheck& slow) {
  if (std::isinf(slow.error_ulps)) return std::isinf(fast.error_ulps);
  return std::fabs(fast.error_ulps - slow.error_ulps) <= 1e-6 * std::max(1.0, slow.error_ulps) &&
         (fast.within == slow.within || std::fabs(slow.ratio - 1) < 1e-6);
}

// What the reference gives each x of a unary node under one scalar set: the forward, its weight,
// and the derivative (the VJP at g = 1) with its weight at |g| = 1.
struct UnaryExact {
  std::vector<Real> y, dx;
  std::vector<double> w_fwd, w_vjp1;
};

UnaryExact unary_exact(const OpInfo& info, DType d, const Scalars& s, const std::vector<double>& xs, int threads) {
  UnaryExact e;
  e.y.resize(xs.size()), e.dx.resize(xs.size()), e.w_fwd.resize(xs.size()), e.w_vjp1.resize(xs.size());
  auto work = [&](std::size_t begin, std::size_t end) {
    ensure_precision();
    for (std::size_t i = begin; i < end; ++i) {
      const Real in[1] = {real(xs[i])};
      const std::span<const Real> args(in, 1);
      e.y[i] = forward(info.op, d, s, args);
      e.dx[i] = vjp(info.op, d, s, args, real(1.0))[0];
      e.w_fwd[i] = abs_weight(info.op, d, s, args, real(1.0), false);
      e.w_vjp1[i] = abs_weight(info.op, d, s, args, real(1.0), true);
    }
    release_thread_caches();
  };
  std::vector<std::thread> pool;
  const std::size_t n = xs.size(), chunk = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work, std::min(n, t * chunk), std::min(n, (t + 1) * chunk));
  for (auto& t : pool) t.join();
  return e;
}

// Grades one batch of a unary node: x = xs[i] with cotangent g[i]; the forward only when asked.
void grade_unary(const OpInfo& info, DType d, MathMode math, const Scalars& s, const std::vector<double>& xs, const UnaryExact& e,
                 const Batch& bt, const std::array<std::vector<double>, 3>& out, bool forward_too, std::size_t begin,
                 std::size_t end, Stats& fwd, Stats& vjp_stats, std::int64_t& disagreements) {
  ensure_precision();
  const Bound fb = forward_bound(info.op, d, math), vb = vjp_bound(info.op, d, math);
  for (std::size_t i = begin; i < end; ++i) {
    const Where where{xs[i], 0.0, bt.g[i], s.s0};
    if (forward_too) fwd.add(check(e.y[i], out[0][i], d, fb, e.w_fwd[i]), fb, where);
    const double exact = e.dx[i].convert_to<double>() * bt.g[i];
    const ErrorCheck fast = check_in_double(exact, out[1][i], d, vb, e.w_vjp1[i] * std::fabs(bt.g[i]));
    if (forward_too) {  // each x's first cotangent: the MPFR check too
      const Real in[1] = {real(xs[i])};
      const ErrorCheck slow = check(vjp(info.op, d, s, std::span<const Real>(in, 1), real(bt.g[i]))[0], out[1][i], d, vb,
                                    abs_weight(info.op, d, s, std::span<const Real>(in, 1), real(bt.g[i]), true));
      if (!agree(fast, slow)) ++disagreements;
    }
    vjp_stats.add(fast, vb, where);
  }
  release_thread_caches();
}

// A finite cotangent of d from the node's domain.
double cotangent(Sampler& sampler, DType d) {
  for (;;) {
    const double g = round_to(d, sampler.in_domain());
    if (std::isfinite(g) && g != 0) return g;
  }
}

void measure_unary_16bit(Backend& be, const OpInfo& info, DType d, const Options& opt, Sampler& sampler, Stats& fwd,
                         Stats& vjp_stats, std::int64_t& disagreements) {
  const std::vector<double> xs = domain_values_16bit(info, d);
  const ScalarSetList sets = graded_scalar_sets(info);
  const int g_per_set = std::max(256, opt.g_per_x / sets.count);
  for (const Scalars& s : sets) {
    // safeLog's contract needs R(eps) > 0 (reference::abs_weight): float16 rounds a graded eps of
    // 1e-12 to 0, where log(0 + 0) = -inf is the staging's answer and no bound applies.
    if (info.op == Op::safeLog && !(round_to(d, s.s0) > 0)) continue;
    const UnaryExact e = unary_exact(info, d, s, xs, opt.threads);
    for (int j = 0; j < g_per_set; ++j) {
      Batch bt{s, xs, xs, {}};  // b unused: a unary node reads one input
      for (std::size_t i = 0; i < xs.size(); ++i) bt.g.push_back(cotangent(sampler, d));
      const auto out = produce(be, info, d, bt);
      std::vector<Stats> f(static_cast<std::size_t>(opt.threads)), v(f.size());
      std::vector<std::int64_t> dis(f.size());
      std::vector<std::thread> pool;
      const std::size_t n = xs.size(), chunk = (n + f.size() - 1) / f.size();
      for (std::size_t t = 0; t < f.size(); ++t)
        pool.emplace_back(grade_unary, std::cref(info), d, math_mode(be), std::cref(s), std::cref(xs), std::cref(e), std::cref(bt),
                          std::cref(out), j == 0, std::min(n, t * chunk), std::min(n, (t + 1) * chunk), std::ref(f[t]),
                          std::ref(v[t]), std::ref(dis[t]));
      for (std::size_t t = 0; t < pool.size(); ++t) pool[t].join(), fwd.merge(f[t]), vjp_stats.merge(v[t]), disagreements += dis[t];
    }
  }
}

void measure_binary_16bit(Backend& be, const OpInfo& info, DType d, const Options& opt, Sampler& sampler, Stats& fwd,
                          Stats& vjp_stats) {
  const std::vector<double> as = domain_values_16bit(info, d);
  const ScalarSetList sets = graded_scalar_sets(info);
  for (int j = 0; j < opt.b_per_a; ++j) {
    Batch bt{sets.sets[j % sets.count], as, {}, {}};
    for (std::size_t i = 0; i < as.size(); ++i) {
      const bool tie = info.kink == Kink::tie && sampler.coin(0.1);
      bt.b.push_back(tie ? as[i] : as[std::uniform_int_distribution<std::size_t>(0, as.size() - 1)(sampler.rng())]);
      bt.g.push_back(cotangent(sampler, d));
    }
    const auto out = produce(be, info, d, bt);
    std::vector<Stats> f(static_cast<std::size_t>(opt.threads)), v(f.size());
    std::vector<std::thread> pool;
    const std::size_t n = as.size(), chunk = (n + f.size() - 1) / f.size();
    for (std::size_t t = 0; t < f.size(); ++t)
      pool.emplace_back(check_range, std::cref(info), d, math_mode(be), std::cref(bt), std::cref(out), std::min(n, t * chunk),
                        std::min(n, (t + 1) * chunk), std::ref(f[t]), std::ref(v[t]));
    for (std::size_t t = 0; t < pool.size(); ++t) pool[t].join(), fwd.merge(f[t]), vjp_stats.merge(v[t]);
  }
}

void report(const char* op, DType d, const char* dir, const Stats& s, Bound b) {
  auto at = [](const Where& w) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "(a=%.17g b=%.17g g=%.17g s0=%.17g)", w.a, w.b, w.g, w.s0);
    return std::string(buf);
  };
  std::printf("%-9s %-8s %-3s n=%-8lld max_ulp=%-9.4g max_abs/eps.w=%-9.4g need_abs@%gulp=%-8.4g need_ulp@%gabs=%-8.4g ratio=%-7.4g "
              "bound={%g,%g} violations=%lld | need_abs@1,2,4,8,16ulp=%.3g,%.3g,%.3g,%.3g,%.3g | max_ulp at %s | "
              "need_abs at %s\n",
              op, dtype_name(d), dir, static_cast<long long>(s.count), s.max_ulp, s.max_eps, b.ulp, s.need_abs, b.abs, s.need_ulp,
              s.max_ratio, b.ulp, b.abs, static_cast<long long>(s.violations), s.need_abs_at[0], s.need_abs_at[1], s.need_abs_at[2],
              s.need_abs_at[3], s.need_abs_at[4], at(s.at_max_ulp).c_str(),
              at(s.at_need_abs).c_str());
}

[[noreturn]] void usage(const std::string& problem) {
  if (!problem.empty()) std::fprintf(stderr, "tapewise-measure-bounds: %s\n", problem.c_str());
  std::fprintf(stderr, "usage: tapewise-measure-bounds [--backend cpu|cuda] [--samples N] [--threads T] [--seed S]\n"
                       "                               [--op NAME] [--dtype float32|float64|bfloat16|float16]\n"
                       "                               [--g-per-x N] [--b-per-a N]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") usage("");
    if (i + 1 == argc) usage(k + " needs a value");
    const std::string v = argv[i + 1];
    try {
      if (k == "--backend" && (v == "cpu" || v == "cuda")) o.backend = v;
      else if (k == "--samples") o.samples = std::stoll(v);
      else if (k == "--threads") o.threads = std::stoi(v);
      else if (k == "--seed") o.seed = std::stoull(v);
      else if (k == "--op" && op_from_name(v)) o.op = v;
      else if (k == "--dtype" && (v == "float32" || v == "float64" || v == "bfloat16" || v == "float16")) o.dtype = v;
      else if (k == "--g-per-x") o.g_per_x = std::stoi(v);
      else if (k == "--b-per-a") o.b_per_a = std::stoi(v);
      else usage("bad option or value: " + k + " " + v);
    } catch (const std::exception&) {  // std::stoll and friends on text that is not a number
      usage(k + ": '" + v + "' is not a number");
    }
  }
  if (o.samples < 1 || o.threads < 1 || o.g_per_x < 1 || o.b_per_a < 1)
    usage("--samples, --threads, --g-per-x and --b-per-a must be at least 1");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  ensure_precision();  // once on the main thread before any worker starts
  std::shared_ptr<Backend> be = opt.backend == "cuda" ? must(make_cuda_backend(), "cuda backend") : make_cpu_backend();
  std::printf("# backend: %s; samples per op and dtype: %lld; seed %llu\n", be->describe().c_str(),
              static_cast<long long>(opt.samples), static_cast<unsigned long long>(opt.seed));
  std::int64_t violations = 0;
  for (const OpInfo& info : kOps) {
    if (!opt.op.empty() && opt.op != info.name) continue;
    for (DType d : kDTypes) {
      if (!opt.dtype.empty() && opt.dtype != dtype_name(d)) continue;
      // float32 and float64 keep the streams that set their rows; the 16-bit dtypes get their own.
      const unsigned stream = static_cast<unsigned>(info.op) * 2 + (d == DType::float64 || d == DType::float16 ? 1u : 0u) +
                              (is_16bit(d) ? 1000u : 0u);
      Sampler sampler(info, d, opt.seed * 1000003u + stream);
      Stats fwd, vjp_stats;
      std::int64_t disagreements = 0;
      if (is_16bit(d) && info.arity == 1) measure_unary_16bit(*be, info, d, opt, sampler, fwd, vjp_stats, disagreements);
      else if (is_16bit(d)) measure_binary_16bit(*be, info, d, opt, sampler, fwd, vjp_stats);
      else measure_random(*be, info, d, opt, sampler, fwd, vjp_stats);
      report(info.name, d, "fwd", fwd, forward_bound(info.op, d, math_mode(*be)));
      report(info.name, d, "vjp", vjp_stats, vjp_bound(info.op, d, math_mode(*be)));
      if (disagreements != 0)
        std::printf("# %s %s: the double-arithmetic check disagreed with reference::check %lld times\n", info.name,
                    dtype_name(d), static_cast<long long>(disagreements));
      std::fflush(stdout);
      violations += fwd.violations + vjp_stats.violations + disagreements;
    }
  }
  std::printf("# total violations of spec/bounds.def: %lld\n", static_cast<long long>(violations));
  return violations == 0 ? 0 : 1;
}

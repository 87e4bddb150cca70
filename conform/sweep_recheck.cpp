// conform/sweep_recheck.cpp — the sweep's MPFR side, on the host: its worst and violating cases re-checked,
// the float64 libm nodes graded under --float64-mpfr, and the sweep's own reference validated.
#include "sweep_internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "cases.hpp"
#include "measure.hpp"
#include "reference.hpp"

namespace tapewise::conform::sweep_internal {

// --- MPFR on the host ---------------------------------------------------------------------------------

namespace {

template <class Fn>
void parallel_for(std::int64_t n, Fn fn) {
  const auto threads = static_cast<std::int64_t>(std::clamp(std::thread::hardware_concurrency(), 1u, 32u));
  std::vector<std::thread> pool;
  for (std::int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      reference::ensure_precision();
      for (std::int64_t i = t; i < n; i += threads) fn(i);
      reference::release_thread_caches();
    });
  for (auto& th : pool) th.join();
}

std::vector<reference::Real> real_inputs(const Plan& p, const Inputs& in) {
  std::vector<reference::Real> r{reference::real(in.a)};
  if (p.job.arity == 2) r.push_back(reference::real(in.b));
  return r;
}

reference::Real mpfr_exact(const Plan& p, int output, const Inputs& in, double g) {
  const auto x = real_inputs(p, in);
  if (output == kY) return reference::forward(p.op, p.dtype, p.scalars, x);
  return reference::vjp(p.op, p.dtype, p.scalars, x, reference::real(g))[static_cast<std::size_t>(output - 1)];
}

reference::ErrorCheck mpfr_check(const Plan& p, const OutputRequest& request, const Inputs& in, double produced) {
  const auto x = real_inputs(p, in);
  const reference::Real exact = mpfr_exact(p, request.output, in, request.g);
  const reference::Real g = reference::real(request.g);
  const double w = reference::abs_weight(p.op, p.dtype, p.scalars, x, g, request.output != kY);
  return reference::check(exact, produced, p.dtype, reference::Bound{request.bound.ulp, request.bound.abs}, w);
}

// The production's outputs at a few cases (a small batch through the same backend): per slot.
[[nodiscard]] Result<std::vector<std::vector<double>>> production_at(Backend& backend, const Plan& p,
                                                                     const std::vector<Inputs>& cases) {
  std::vector<double> a, b;
  for (const Inputs& in : cases) {
    a.push_back(in.a);
    b.push_back(in.b);
  }
  std::vector<HostArray> inputs{host_array(p.dtype, a)};
  if (p.job.arity == 2) inputs.push_back(host_array(p.dtype, b));
  std::vector<std::vector<double>> out(p.outputs.size());
  for (std::size_t slot = 1; slot < p.outputs.size(); slot += static_cast<std::size_t>(p.job.arity)) {
    const HostArray g = host_array(p.dtype, std::vector<double>(cases.size(), p.outputs[slot].g));
    TAPEWISE_TRY(run, run_node(backend, p.op, p.scalars, inputs, &g, VjpPath::fused));
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (slot == 1) out[0].push_back(run.y.as_double(static_cast<std::int64_t>(i)));
      for (int k = 0; k < p.job.arity; ++k)
        out[slot + static_cast<std::size_t>(k)].push_back(run.grads[static_cast<std::size_t>(k)].as_double(static_cast<std::int64_t>(i)));
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::uint32_t>> recheck_cases(const OutputTally& t) {
  std::vector<std::pair<std::string, std::uint32_t>> cases;
  auto add = [&](const char* why, unsigned long long key) {
    if (key_present(key)) cases.emplace_back(why, key_case(key));
  };
  add("worst in domain", t.worst_domain_key);
  add("worst finite", t.worst_finite_key);
  add("worst ratio", t.worst_ratio_key);
  add("worst ratio in domain", t.worst_ratio_domain_key);
  for (int c = 0; c < kCauseCount; ++c)
    if (t.cause_example_key[c] > 0)
      cases.emplace_back(std::string(cause_name(c)) + " example", static_cast<std::uint32_t>(t.cause_example_key[c] - 1));
  for (unsigned long long k = 0; k < std::min<unsigned long long>(t.violations_recorded, kViolationSlots); ++k)
    cases.emplace_back("above bound", t.violation_cases[k]);
  return cases;
}

}  // namespace

[[nodiscard]] Result<void> recheck_with_mpfr(Backend& backend, NodeResult& node) {
  const Plan& p = node.plan;
  std::vector<Inputs> inputs;
  for (OutputResult& o : node.outputs)
    for (const auto& [why, index] : recheck_cases(o.tally)) {
      Recheck r;
      r.why = why;
      r.index = index;
      r.in = case_inputs(p.job, index);
      o.rechecks.push_back(r);
      inputs.push_back(r.in);
    }
  if (inputs.empty()) return {};
  TAPEWISE_TRY(produced, production_at(backend, p, inputs));
  std::size_t next = 0;
  for (std::size_t slot = 0; slot < node.outputs.size(); ++slot)
    for (Recheck& r : node.outputs[slot].rechecks) {
      const OutputRequest& request = node.outputs[slot].request;
      r.produced = produced[slot][next++];  // rechecks were listed in this order
      const reference::ErrorCheck c = mpfr_check(p, request, r.in, r.produced);
      r.expected = reference::round_to_dtype(mpfr_exact(p, request.output, r.in, request.g), p.dtype);
      r.mpfr_ulps = c.error_ulps;
      r.mpfr_ratio = c.ratio;
      r.mpfr_within = c.within;
      const ElementVerdict v = grade_element(p.job, request.output, request.g, request.bound, r.in, r.produced);
      r.sweep_ulps = v.graded.error_ulps;
      r.sweep_within = v.graded.within;
      r.cause = cause_of(p.job, request.output, r.in, request.g);
      if (p.method == Method::host_mpfr) {  // MPFR graded these: its verdict is the sweep's
        r.sweep_ulps = r.mpfr_ulps;
        r.sweep_within = r.mpfr_within;
      }
      r.agrees = r.sweep_within == r.mpfr_within;
    }
  return {};
}

// float64 nodes with libm stagings: a random subset, every value graded with MPFR (slow, exact).
[[nodiscard]] Result<std::vector<OutputTally>> grade_on_host_with_mpfr(Backend& backend, const Plan& p) {
  std::vector<Inputs> cases;
  for (std::uint64_t i = p.lo; i < p.hi; ++i) cases.push_back(case_inputs(p.job, static_cast<std::uint32_t>(i)));
  TAPEWISE_TRY(produced, production_at(backend, p, cases));
  std::vector<OutputTally> tallies(p.outputs.size());
  std::vector<std::mutex> locks(p.outputs.size());
  for (OutputTally& t : tallies) std::memset(&t, 0, sizeof t);
  parallel_for(static_cast<std::int64_t>(cases.size() * p.outputs.size()), [&](std::int64_t k) {
    const auto slot = static_cast<std::size_t>(k) % p.outputs.size(), i = static_cast<std::size_t>(k) / p.outputs.size();
    const OutputRequest& request = p.outputs[slot];
    const reference::ErrorCheck c = mpfr_check(p, request, cases[i], produced[slot][i]);
    const double rounded = reference::round_to_dtype(mpfr_exact(p, request.output, cases[i], request.g), p.dtype);
    Graded g;
    g.error_ulps = c.error_ulps;
    g.ratio = c.ratio;
    g.within = c.within;
    g.bucket = std::isfinite(rounded) ? (std::isfinite(c.error_ulps) ? bucket_of(c.error_ulps) : kNonfiniteUnexpected)
                                      : (c.within ? kNonfiniteExpected : kNonfiniteUnexpected);
    ElementVerdict v{g, in_domain(p.job, cases[i]), inputs_finite(p.job, cases[i]), kCauseInDomain};
    if (!g.within) v.cause = cause_of(p.job, request.output, cases[i], request.g);
    std::lock_guard<std::mutex> lock(locks[slot]);
    add_to_tally(tallies[slot], v, static_cast<std::uint32_t>(p.lo + i));
  });
  return tallies;
}

// --- validation of the sweep's reference against MPFR --------------------------------------------------

namespace {

// Inputs for validation: random bits and in-domain values, as values of the dtype.
Inputs validation_inputs(const Plan& p, std::uint64_t k) {
  const auto index = static_cast<std::uint32_t>(splitmix64(p.job.seed ^ k));
  if (p.dtype == DType::float64 || p.job.kind == CaseKind::float32_pairs) return case_inputs(p.job, index);
  if (p.job.kind == CaseKind::bits16_exhaustive && (k & 1)) return case_inputs(p.job, index);  // every pattern
  Inputs in;
  double a, b;
  case_doubles(p.job, index, &a, &b);
  in.a = round_to_format(p.dtype, dd_exact(a));
  in.b = round_to_format(p.dtype, dd_exact(b));
  return in;
}

// Whether `value` (the sweep reference) is within the reference's stated bound of MPFR's exact.
bool reference_within(const Plan& p, int output, const Inputs& in, double g, DD value, double* error_ulps) {
  const reference::Real exact = mpfr_exact(p, output, in, g);
  const double rounded = reference::round_to_dtype(exact, p.dtype);
  const double mine = round_to_format(p.job.dtype, value);
  *error_ulps = 0;
  if (!std::isfinite(rounded)) return std::isnan(rounded) ? std::isnan(mine) : mine == rounded;
  if (!std::isfinite(mine)) return false;
  const reference::Real error = abs((reference::real(value.hi) - exact) + ldexp(reference::real(value.lo), value.lo_exp));
  const double ulp = reference::ulp_of(rounded, p.dtype);
  const double w = abs_weight_value(p.job, output, in, g);
  double allowed = kReferenceUlps * ulp + kReferenceSubnormalAbs;
  if (abs_root_output(p.op, output)) allowed += kReferenceAbsEps * reference::dtype_eps(p.dtype) * w;
  *error_ulps = (error / reference::real(ulp)).convert_to<double>();
  return error <= reference::real(allowed);
}

}  // namespace

[[nodiscard]] Result<Validation> validate_reference(const std::vector<Plan>& plans, const SweepOptions& o,
                                                    bool on_device) {
  Validation v;
  std::vector<const Plan*> graded;
  for (const Plan& p : plans)
    if (p.method != Method::host_mpfr) graded.push_back(&p);
  if (graded.empty() || o.validate <= 0) return v;
  const std::int64_t per_plan = std::max<std::int64_t>(1, (o.validate + static_cast<std::int64_t>(graded.size()) - 1) /
                                                              static_cast<std::int64_t>(graded.size()));
  std::mutex lock;
  for (const Plan* p : graded) {
    for (const OutputRequest& request : p->outputs) {
      const std::int64_t n = per_plan / static_cast<std::int64_t>(p->outputs.size()) + 1;
      std::vector<Inputs> inputs;
      for (std::int64_t k = 0; k < n; ++k)
        inputs.push_back(validation_inputs(*p, static_cast<std::uint64_t>(k) * 8 + static_cast<std::uint64_t>(request.output) +
                                                   (request.g == 1.0 ? 0 : 4)));
      std::vector<DD> device_values;
#ifdef TAPEWISE_HAS_CUDA
      if (on_device) {
        TAPEWISE_TRY(values, device_reference_values(0, p->job, request.output, request.g, inputs));
        device_values = std::move(values);
        v.device_checked = true;
      }
#else
      (void)on_device;
#endif
      parallel_for(n, [&](std::int64_t k) {
        const Inputs& in = inputs[static_cast<std::size_t>(k)];
        double host_ulps = 0, device_ulps = 0;
        bool ok = reference_within(*p, request.output, in, request.g, exact_value(p->job, request.output, in, request.g), &host_ulps);
        if (!device_values.empty())
          ok = reference_within(*p, request.output, in, request.g, device_values[static_cast<std::size_t>(k)], &device_ulps) && ok;
        std::lock_guard<std::mutex> guard(lock);
        ++v.values;
        v.max_error_ulps = std::max(v.max_error_ulps, host_ulps);
        v.max_device_error_ulps = std::max(v.max_device_error_ulps, device_ulps);
        if (ok) return;
        ++v.failures;
        if (v.examples.size() < 8)
          v.examples.push_back(node_label(*p) + " " + dtype_name(p->dtype) + " " + output_name(p->op, request.output) +
                               " a=" + hex(in.a) + (p->job.arity == 2 ? " b=" + hex(in.b) : "") +
                               " g=" + hex(request.g));
      });
    }
  }
  return v;
}

}  // namespace tapewise::conform::sweep_internal

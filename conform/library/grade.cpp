// conform/library/grade.cpp — grading against the reference (reference/measure.hpp does each
// comparison in MPFR) and against the spec's special points (reference/special_points.hpp).
#include "grade.hpp"

#include <cmath>
#include <cstring>

#include "bounds.hpp"  // accepted_outside_domain, bounds_domain
#include "measure.hpp"
#include "reference.hpp"
#include "sweep_reference.hpp"  // cause_of

namespace tapewise::conform {

namespace {

constexpr std::size_t kKeptExamples = 5;

std::string inputs_text(Op op, const std::vector<double>& inputs, double g, DType dtype) {
  const std::vector<std::string> names = input_names(op);
  std::string s;
  for (std::size_t i = 0; i < inputs.size(); ++i) s += names[i] + " = " + format_value(inputs[i], dtype) + ", ";
  return s + "g = " + format_value(g, dtype);
}

}  // namespace

void Accuracy::add(const Sample& s, bool within) {
  ++values;
  if (!within) {
    ++violations;
    if (violating.size() < kKeptExamples) violating.push_back(s);
  }
  // NaN ratios (none expected) count as worst so that they are seen.
  const bool worse = !worst || s.ratio > worst->ratio || std::isnan(s.ratio) ||
                     (s.ratio == worst->ratio && s.error_ulps > worst->error_ulps);
  if (worse) worst = s;
  if (s.error_ulps > max_ulps || std::isnan(s.error_ulps)) max_ulps = s.error_ulps;
  if (s.ratio > max_ratio || std::isnan(s.ratio)) max_ratio = s.ratio;
}

std::vector<std::string> Row::failed_checks() const {
  std::vector<std::string> failed;
  if (forward.violations > 0) failed.push_back("forward");
  if (vjp.violations > 0) failed.push_back("vjp");
  if (special.passed != special.total) failed.push_back("special");
  if (fused_vs_staged && fused_vs_staged->mismatches > 0) failed.push_back("fused!=staged");
  if (leaks && leaks->leaking_calls > 0) failed.push_back("workspace");
  if (!errors.empty()) failed.push_back("errors");
  return failed;
}

std::string Row::missing_evidence(bool special_points_graded) const {
  if (!unanswered.empty()) {
    std::string ids;
    for (std::size_t i = 0; i < unanswered.size() && i < 3; ++i) ids += (i ? ", " : "") + unanswered[i];
    if (unanswered.size() > 3) ids += " and " + std::to_string(unanswered.size() - 3) + " more";
    return "not answered: no out_*.npy in " + ids;
  }
  if (forward.values == 0) return "no forward value graded against the reference";
  if (vjp.values == 0) return "no gradient graded against the reference";
  if (special_points_graded && special.total == 0) return "no special point graded";
  return "";
}

int cause_above_bound(Op op, DType dtype, int output, double a, double b, double g) {
  const OpInfo& info = op_info(op);
  const reference::DomainLog2 domain = reference::bounds_domain(info, dtype);
  sweep::Job job;  // what cause_of reads of a sweep's job: the node, its dtype and its domain
  job.op = op;
  job.dtype = dtype;
  job.arity = info.arity;
  job.domain_lo = domain.lo;
  job.domain_hi = domain.hi;
  job.positive_only = info.positive_only;
  sweep::Inputs in;
  in.a = a;
  in.b = info.arity == 2 ? b : 0.0;
  return sweep::cause_of(job, output, in, g);
}

bool cause_accepted(Op op, DType dtype, int cause) {
  const reference::OutsideDomain outside = reference::accepted_outside_domain(op, dtype);
  if (cause == sweep::kCauseOverflow) return reference::accepts_overflow(outside);
  if (cause == sweep::kCauseUnderflow) return reference::accepts_underflow(outside);
  return false;  // in the domain, or unexplained
}

bool accepted_above_bound(Op op, DType dtype, int output, double a, double b, double g) {
  return cause_accepted(op, dtype, cause_above_bound(op, dtype, output, a, b, g));
}

Row make_row(Op op, DType dtype, MathMode math) {
  Row row;
  row.op = op;
  row.dtype = dtype;
  row.forward.bound = reference::forward_bound(op, dtype, math);
  row.vjp.bound = reference::vjp_bound(op, dtype, math);
  return row;
}

void grade_against_reference(const Batch& batch, const NodeOutputs& produced, Row& row) {
  using reference::Real;
  reference::ensure_precision();
  const Op op = batch.op;
  const DType d = batch.dtype;
  const int arity = op_info(op).arity;
  const std::vector<std::string> grads = grad_names(op);
  const bool with_vjp = !produced.grads.empty();
  for (std::int64_t i = 0; i < batch.size(); ++i) {
    Sample s;
    s.scalars = batch.scalars;
    s.g = batch.g.as_double(i);
    Real in[2];
    for (int k = 0; k < arity; ++k) {
      s.inputs.push_back(batch.inputs[static_cast<std::size_t>(k)].as_double(i));
      in[k] = reference::real(s.inputs.back());
    }
    const std::span<const Real> in_span(in, static_cast<std::size_t>(arity));

    const Real y = reference::forward(op, d, batch.scalars, in_span);
    s.output = "y";
    s.produced = produced.y.as_double(i);
    s.expected = reference::round_to_dtype(y, d);
    const double w_forward = reference::abs_weight(op, d, batch.scalars, in_span, Real(0), false);
    const reference::ErrorCheck fc = reference::check(y, s.produced, d, row.forward.bound, w_forward);
    s.error_ulps = fc.error_ulps;
    s.ratio = fc.ratio;
    row.forward.add(s, fc.within);

    if (with_vjp) {
      const Real g = reference::real(s.g);
      const std::array<Real, 2> exact = reference::vjp(op, d, batch.scalars, in_span, g);
      const double w_vjp = reference::abs_weight(op, d, batch.scalars, in_span, g, true);
      for (int k = 0; k < arity; ++k) {
        s.output = grads[static_cast<std::size_t>(k)];
        s.produced = produced.grads[static_cast<std::size_t>(k)].as_double(i);
        s.expected = reference::round_to_dtype(exact[static_cast<std::size_t>(k)], d);
        const reference::ErrorCheck vc =
            reference::check(exact[static_cast<std::size_t>(k)], s.produced, d, row.vjp.bound, w_vjp);
        s.error_ulps = vc.error_ulps;
        s.ratio = vc.ratio;
        row.vjp.add(s, vc.within);
      }
    }
    ++row.cases;
  }
}

// a and b are values of the dtype widened exactly, so the doubles compare as the dtype's bits would
// (every dtype's value maps to one double; the sign tells the zeros apart).
bool same_bits(double a, double b, DType /*dtype*/) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::signbit(a) == std::signbit(b) && a == b;
}

void compare_paths(const Batch& batch, const NodeOutputs& fused, const NodeOutputs& staged,
                   PathAgreement& agreement) {
  const std::vector<std::string> names = grad_names(batch.op);
  for (std::size_t k = 0; k < fused.grads.size(); ++k) {
    const HostArray& f = fused.grads[k];
    const HostArray& s = staged.grads[k];
    for (std::int64_t i = 0; i < f.numel(); ++i) {
      ++agreement.compared;
      if (same_bits(f.as_double(i), s.as_double(i), batch.dtype)) continue;
      ++agreement.mismatches;
      if (agreement.examples.size() >= kKeptExamples) continue;
      std::vector<double> inputs;
      for (const HostArray& in : batch.inputs) inputs.push_back(in.as_double(i));
      agreement.examples.push_back(names[k] + " at " + inputs_text(batch.op, inputs, batch.g.as_double(i), batch.dtype) +
                                   ": fused " + format_value(f.as_double(i), batch.dtype) + ", staged " +
                                   format_value(s.as_double(i), batch.dtype));
    }
  }
}

bool PointVerdict::passes() const {
  if (!y_matches) return false;
  for (bool m : grad_matches)
    if (!m) return false;
  return true;
}

std::string PointVerdict::mismatch_text(const SpecialPoint& p, const NodeOutputs& produced,
                                       std::int64_t index) const {
  std::string s;
  auto add = [&](const std::string& name, double expected, double got) {
    s += (s.empty() ? "" : "; ") + name + ": spec " + format_value(expected, p.dtype) + ", got " + format_value(got, p.dtype);
  };
  if (!y_matches) add("y", p.y, produced.y.as_double(index));
  const std::vector<std::string> names = grad_names(p.op, p.same);
  for (std::size_t k = 0; k < grad_matches.size(); ++k)
    if (!grad_matches[k]) add(names[k], p.grads[k], k < produced.grads.size() ? produced.grads[k].as_double(index) : NAN);
  return s;
}

PointVerdict grade_special_point(const SpecialPoint& point, const NodeOutputs& produced,
                                 std::int64_t index) {
  PointVerdict v;
  v.y_matches = produced.y.numel() > index && bits_match(point.y, produced.y.as_double(index), point.dtype);
  for (std::size_t k = 0; k < point.grads.size(); ++k) {
    const bool have = k < produced.grads.size() && produced.grads[k].numel() > index;
    v.grad_matches.push_back(have && bits_match(point.grads[k], produced.grads[k].as_double(index), point.dtype));
  }
  return v;
}

std::vector<std::string> grad_names(Op op, bool same) {
  if (op_info(op).arity == 1) return {"dx"};
  if (same) return {"da"};
  return {"da", "db"};
}

std::vector<std::string> input_names(Op op) {
  if (op_info(op).arity == 1) return {"x"};
  return {"a", "b"};
}

}  // namespace tapewise::conform

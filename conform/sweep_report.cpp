// conform/sweep_report.cpp — how the sweep reports: its plans, table, re-checks, causes and verdict as
// text, and its JSON and JUnit reports.
#include "sweep_internal.hpp"

#include <algorithm>
#include <cstring>
#include <ostream>

#include <tapewise/version.hpp>

#include "cases.hpp"
#include "measure.hpp"

namespace tapewise::conform::sweep_internal {

// --- output ------------------------------------------------------------------------------------------

namespace {

const char* method_name(Method m) {
  switch (m) {
    case Method::device_exhaustive: return "every bit pattern";
    case Method::device_every_pair: return "every pair of bit patterns";
    case Method::device_pairs: return "every exponent pair x random mantissas, signs";
    case Method::device_random: return "random bit patterns + in-domain values, double-double reference";
    case Method::host_mpfr: return "random subset, graded with MPFR on the host";
  }
  return "";
}

std::string op_names(const std::vector<Op>& ops) {
  std::string names;
  for (Op op : ops) names += (names.empty() ? "" : ", ") + std::string(op_name(op));
  return names;
}

std::string format_ulps(unsigned long long key) {
  if (!key_present(key)) return "-";
  return text("%.3g", key_metric(key));
}

std::string input_text(const Plan& p, const Inputs& in, std::uint32_t index) {
  if (p.job.kind == CaseKind::float32_exhaustive) return text("0x%08x", index);
  if (p.job.kind == CaseKind::bits16_exhaustive && p.job.arity == 1) return text("0x%04x", index);
  auto bits = [&](double v) {
    if (p.dtype == DType::float32) return text("0x%08x", bits_of_float(static_cast<float>(v)));
    if (is_16bit(p.dtype)) return text("0x%04x", static_cast<unsigned>(bits16_of(p.dtype, v)));
    std::uint64_t b;
    std::memcpy(&b, &v, 8);
    return text("0x%016llx", static_cast<unsigned long long>(b));
  };
  return "(" + bits(in.a) + ", " + bits(in.b) + ")";
}

std::string bound_text(const Bound& b) {
  std::string t = text("%g ulp", b.ulp);
  if (b.abs > 0) t += text(" + %g eps", b.abs);
  return t;
}

// The values above the bound by cause, e.g. "overflow 46751", "in_domain 3!": a '!' marks a cause the
// node's row in spec/bounds.def does not accept (a failure).
std::string causes_text(const Plan& p, const OutputTally& t) {
  std::string out;
  for (int c = 0; c < kCauseCount; ++c) {
    if (t.above_by_cause[c] == 0) continue;
    if (!out.empty()) out += ", ";
    out += text("%s %llu", cause_name(c), t.above_by_cause[c]) + (cause_accepted(p.op, p.dtype, c) ? "" : "!");
  }
  return out.empty() ? "-" : out;
}

const char* bucket_name(int b) {
  static const char* names[kBucketCount] = {"le_0.5", "le_1",      "le_2", "le_4", "le_8", "gt_8", "nonfinite_expected",
                                            "nonfinite_unexpected"};
  return names[b];
}

// An output conforms when every value above its bound has a cause its row accepts outside the domain
// (none inside it, none unexplained) and every re-checked case agrees with MPFR.
bool output_conforms(const Plan& p, const OutputResult& o) {
  for (int c = 0; c < kCauseCount; ++c)
    if (o.tally.above_by_cause[c] > 0 && !cause_accepted(p.op, p.dtype, c)) return false;
  for (const Recheck& r : o.rechecks)
    if (!r.agrees) return false;
  return true;
}

bool node_conforms(const NodeResult& n) {
  if (!n.error.empty()) return false;
  for (const OutputResult& o : n.outputs)
    if (!output_conforms(n.plan, o)) return false;
  return true;
}

Json recheck_json(const Plan& p, const Recheck& r) {
  Json j;
  j["why"] = r.why;
  j["case"] = r.index;
  j["inputs"] = p.job.arity == 1 ? Json::array({hex(r.in.a)}) : Json::array({hex(r.in.a), hex(r.in.b)});
  j["input_bits"] = input_text(p, r.in, r.index);
  j["produced"] = hex(r.produced);
  j["expected"] = hex(r.expected);
  j["error_ulps_mpfr"] = number_json(r.mpfr_ulps);
  j["ratio_mpfr"] = number_json(r.mpfr_ratio);
  j["within_mpfr"] = r.mpfr_within;
  j["error_ulps_sweep"] = number_json(r.sweep_ulps);
  j["within_sweep"] = r.sweep_within;
  j["reference_agrees"] = r.agrees;
  if (!r.mpfr_within) j["cause"] = cause_name(r.cause);
  return j;
}

// The largest error inside the domain per binade of the first input (error against input):
// {"min_exponent": e0, "positive": [...], "negative": [...]}, entry k for floor(log2 |a|) = e0 + k,
// null where no input of that sign and binade was in the domain; null when there is none at all.
Json binade_maxima_json(const OutputTally& t) {
  int lo = kBinadeSpan, hi = -1;
  for (int k = 0; k < kBinadeCount; ++k)
    if (key_present(t.worst_domain_by_binade[k])) {
      lo = std::min(lo, k % kBinadeSpan);
      hi = std::max(hi, k % kBinadeSpan);
    }
  if (hi < 0) return Json(nullptr);
  Json positive = Json::array(), negative = Json::array();
  for (int e = lo; e <= hi; ++e) {
    for (auto [slot, into] : {std::pair{e, &positive}, std::pair{kBinadeSpan + e, &negative}}) {
      const unsigned long long key = t.worst_domain_by_binade[slot];
      into->push_back(key_present(key) ? number_json(key_metric(key)) : Json(nullptr));
    }
  }
  return {{"min_exponent", lo + kBinadeMinExponent}, {"positive", positive}, {"negative", negative}};
}

Json node_json(const NodeResult& n) {
  const Plan& p = n.plan;
  Json j;
  j["op"] = op_name(p.op);
  j["dtype"] = dtype_name(p.dtype);
  j["scalars"] = scalars_text(p.op, p.scalars);
  j["scalar_values"] = Json::array({p.scalars.s0, p.scalars.s1});  // as given; the kernels use R(each)
  j["method"] = method_name(p.method);
  j["range"] = Json::array({p.lo, p.hi});
  j["stride"] = p.job.case_stride;
  j["cases"] = p.cases();
  j["seconds"] = n.seconds;
  j["outside_domain_accepted"] = reference::outside_domain_name(reference::accepted_outside_domain(p.op, p.dtype));
  j["conforms"] = node_conforms(n);
  if (!n.error.empty()) j["error"] = n.error;
  j["outputs"] = Json::array();
  for (const OutputResult& o : n.outputs) {
    const OutputTally& t = o.tally;
    Json oj;
    oj["output"] = output_name(p.op, o.request.output);
    oj["g"] = o.request.output == kY ? Json(nullptr) : Json(o.request.g);
    oj["bound"] = {{"ulp", o.request.bound.ulp}, {"abs", o.request.bound.abs}};
    oj["max_ulp_domain"] = key_present(t.worst_domain_key) ? number_json(key_metric(t.worst_domain_key)) : Json(nullptr);
    oj["max_ulp_finite"] = key_present(t.worst_finite_key) ? number_json(key_metric(t.worst_finite_key)) : Json(nullptr);
    oj["max_ratio"] = key_present(t.worst_ratio_key) ? number_json(key_metric(t.worst_ratio_key)) : Json(nullptr);
    oj["max_ratio_domain"] =
        key_present(t.worst_ratio_domain_key) ? number_json(key_metric(t.worst_ratio_domain_key)) : Json(nullptr);
    oj["above_bound"] = t.above_bound;
    oj["above_bound_domain"] = t.above_by_cause[kCauseInDomain];
    Json causes;
    for (int c = 0; c < kCauseCount; ++c) causes[cause_name(c)] = t.above_by_cause[c];
    oj["above_bound_by_cause"] = causes;
    oj["causes_conform"] = output_conforms(p, o);
    oj["nonfinite_expected"] = t.histogram[kNonfiniteExpected];
    oj["nonfinite_unexpected"] = t.histogram[kNonfiniteUnexpected];
    Json h;
    for (int b = 0; b < kBucketCount; ++b) h[bucket_name(b)] = t.histogram[b];
    oj["histogram"] = h;
    oj["max_ulp_domain_by_binade"] = binade_maxima_json(t);
    oj["worst"] = Json::array();
    for (const Recheck& r : o.rechecks) oj["worst"].push_back(recheck_json(p, r));
    j["outputs"].push_back(oj);
  }
  return j;
}

Json validation_json(const Validation& v) {
  return {{"values", v.values},
          {"failures", v.failures},
          {"max_error_ulps_host", v.max_error_ulps},
          {"max_error_ulps_device", v.device_checked ? Json(v.max_device_error_ulps) : Json(nullptr)},
          {"stated_bound", {{"ulps", kReferenceUlps}, {"abs_eps_near_roots", kReferenceAbsEps}, {"subnormal_abs", kReferenceSubnormalAbs}}},
          {"examples", v.examples}};
}

}  // namespace

const char* output_name(Op op, int output) {
  if (output == kY) return "y";
  if (op_info(op).arity == 1) return "dx";
  return output == kGradA ? "da" : "db";
}

// The node as the report names it: "scale(c=0.37)", "exp" (a node can be swept at several scalar sets).
std::string node_label(const Plan& p) {
  const std::string scalars = scalars_text(p.op, p.scalars);
  return scalars.empty() ? std::string(op_name(p.op)) : std::string(op_name(p.op)) + "(" + scalars + ")";
}

// "42 s", "3.5 min", "14.2 h".
std::string duration_text(double seconds) {
  if (seconds < 90) return text("%.0f s", seconds);
  if (seconds < 5400) return text("%.1f min", seconds / 60);
  return text("%.1f h", seconds / 3600);
}

const char* cause_name(int cause) {
  static const char* names[kCauseCount] = {"in_domain", "overflow", "underflow", "unexplained"};
  return names[cause];
}

void print_table(std::ostream& out, const std::vector<NodeResult>& nodes) {
  out << text("%-9s %-8s %-3s %-9s %12s %10s %10s %10s %-16s %10s %10s  %s\n", "node", "dtype", "out", "g", "cases",
               "ulp(dom)", "ulp(fin)", "used(dom)", "bound", "above", "nonfin!", "worst input (ulp, MPFR)");
  for (const NodeResult& n : nodes) {
    const Plan& p = n.plan;
    if (!n.error.empty()) {
      out << text("%-9s %-8s error: ", node_label(p).c_str(), dtype_name(p.dtype)) << n.error << "\n";
      continue;
    }
    for (const OutputResult& o : n.outputs) {
      const OutputTally& t = o.tally;
      // The worst ratio when some value is not correctly rounded (ratio > 0), else the worst in domain.
      std::string worst = "-";
      for (const Recheck& r : o.rechecks)
        if ((r.why == "worst ratio" && r.mpfr_ratio > 0) || (r.why == "worst in domain" && worst == "-") ||
            (r.why == "worst finite" && worst == "-"))
          worst = input_text(p, r.in, r.index) + text(" (%.3g)", r.mpfr_ulps);
      out << text("%-9s %-8s %-3s %-9s %12llu %10s %10s %10s %-16s %10llu %10llu  ", node_label(p).c_str(), dtype_name(p.dtype),
                   output_name(p.op, o.request.output), o.request.output == kY ? "-" : text("%.3g", o.request.g).c_str(),
                   static_cast<unsigned long long>(p.cases()), format_ulps(t.worst_domain_key).c_str(),
                   format_ulps(t.worst_finite_key).c_str(), format_ulps(t.worst_ratio_domain_key).c_str(),
                   bound_text(o.request.bound).c_str(), t.above_bound, t.histogram[kNonfiniteUnexpected])
          << worst << "\n";
    }
  }
}

// Every output with values above its bound: how many of each cause, whether spec/bounds.def accepts
// the cause (outside the domain only), and one example of each, re-checked with MPFR.
void print_causes(std::ostream& out, const std::vector<NodeResult>& nodes) {
  out << "\nvalues above their bound, by cause (in_domain and unexplained always fail; overflow and underflow\n"
         "outside the domain pass where spec/bounds.def's TAPEWISE_SWEPT row accepts them):\n";
  bool any = false;
  for (const NodeResult& n : nodes)
    for (const OutputResult& o : n.outputs) {
      if (o.tally.above_bound == 0) continue;
      any = true;
      out << text("  %-9s %-8s %-3s g=%-6s ", node_label(n.plan).c_str(), dtype_name(n.plan.dtype),
                   output_name(n.plan.op, o.request.output), short_value(o.request.g, n.plan.dtype).c_str())
          << causes_text(n.plan, o.tally) << " (accepted outside: "
          << reference::outside_domain_name(reference::accepted_outside_domain(n.plan.op, n.plan.dtype)) << ")\n";
      for (const Recheck& r : o.rechecks)
        if (r.why.ends_with(" example"))
          out << "      " << r.why << ": " << input_text(n.plan, r.in, r.index) << "  "
              << short_value(r.produced, n.plan.dtype) << " vs " << short_value(r.expected, n.plan.dtype)
              << text("  %.4g ulp (MPFR)", r.mpfr_ulps) << "\n";
    }
  if (!any) out << "  none\n";
}

void print_rechecks(std::ostream& out, const std::vector<NodeResult>& nodes) {
  out << "\nworst and violating cases, re-checked with MPFR (produced, R(exact), ulp by MPFR | by the sweep):\n";
  for (const NodeResult& n : nodes)
    for (const OutputResult& o : n.outputs)
      for (const Recheck& r : o.rechecks) {
        // Violations and disagreements always; else the worst in domain, and the worst ratio when it
        // is not a correctly rounded value (ratio 0 picks an arbitrary case). The cause examples are
        // print_causes' (unless they disagree).
        if (r.why.ends_with(" example") && r.agrees) continue;
        const bool notable = r.why == "above bound" || !r.mpfr_within || !r.agrees;
        const bool same_as_domain = std::any_of(o.rechecks.begin(), o.rechecks.end(), [&](const Recheck& q) {
          return q.why == "worst in domain" && q.index == r.index;
        });
        if (r.why == "worst ratio" && same_as_domain && !notable) continue;
        if (!notable && r.why != "worst in domain" && !(r.why == "worst ratio" && r.mpfr_ratio > 0)) continue;
        out << text("  %-9s %-8s %-3s %-16s ", node_label(n.plan).c_str(), dtype_name(n.plan.dtype),
                     output_name(n.plan.op, o.request.output), r.why.c_str())
            << input_text(n.plan, r.in, r.index) << " g=" << short_value(o.request.g, n.plan.dtype) << "  "
            << short_value(r.produced, n.plan.dtype) << " vs " << short_value(r.expected, n.plan.dtype)
            << text("  %.4g | %.4g ulp  ", r.mpfr_ulps, r.sweep_ulps)
            << (r.mpfr_within ? "within" : std::string("ABOVE BOUND (") + cause_name(r.cause) + ")")
            << (r.agrees ? "" : "  REFERENCE DISAGREES WITH MPFR") << "\n";
      }
}

// The run's settings, the nodes left out, and one line per planned sweep.
void print_plans(std::ostream& out, const Workers& w, const SweepOptions& o, std::int64_t chunk,
                 const std::vector<Plan>& plans) {
  out << "backend: " << w.name << " (" << w.why << "), " << w.backends.size() << " device(s): "
      << w.backends.front()->describe() << "; math " << math_mode_name(math_mode(*w.backends.front())) << "\n";
  out << "seed " << o.seed << "; second g = R(0.7); chunk " << chunk << "; binary float32 pairs 2^" << o.pair_log2
      << " per exponent pair; float64 2^" << o.float64_log2 << " cases; bfloat16 and float16 every input"
      << (o.float64_mpfr ? text(" (IEEE nodes), %lld graded by MPFR (libm nodes)", static_cast<long long>(o.host_cases))
                         : std::string())
      << "\n";
  if (!o.not_swept.empty()) out << "not swept (no sweep reference yet): " << op_names(o.not_swept) << "\n";
  for (const Plan& p : plans)
    out << text("  %-9s %-8s %-40s ", op_name(p.op), dtype_name(p.dtype), scalars_text(p.op, p.scalars).c_str())
        << method_name(p.method)
        << text(", cases [%llu, %llu)", static_cast<unsigned long long>(p.lo), static_cast<unsigned long long>(p.hi))
        << (p.job.case_stride > 1
                ? text(" every %u-th: %llu", p.job.case_stride, static_cast<unsigned long long>(p.cases()))
                : std::string())
        << "\n";
}

void print_validation(std::ostream& out, const Validation& v) {
  out << text("\nreference vs MPFR: %lld values, %lld outside the reference's stated bound, max %.3g ulp (host)",
              static_cast<long long>(v.values), static_cast<long long>(v.failures), v.max_error_ulps);
  if (v.device_checked) out << text(", %.3g ulp (device)", v.max_device_error_ulps);
  out << "\n";
  for (const std::string& e : v.examples) out << "  reference outside its bound: " << e << "\n";
}

// The closing line; whether the run conforms (every node sweep, and the reference's validation).
bool print_verdict(std::ostream& out, const std::vector<NodeResult>& nodes, const Validation& v) {
  int conforming = 0;
  for (const NodeResult& n : nodes) conforming += node_conforms(n) ? 1 : 0;
  out << conforming << "/" << nodes.size()
      << " node sweeps conform (inside their domains within their bounds; outside them, every value above\n"
         "its bound has a cause spec/bounds.def accepts)"
      << (v.failures ? "; the reference failed its validation" : "") << "\n";
  return conforming == static_cast<int>(nodes.size()) && v.failures == 0;
}

Json sweep_report_json(const Workers& w, const SweepOptions& o, const std::vector<NodeResult>& nodes,
                       const Validation& v, bool conforms) {
  Json j;
  j["schema"] = "tapewise-conform.sweep/2";
  j["tapewise_version"] = kVersion;
  j["spec_sha256"] = kSpecSha256;
  j["backend"] = w.name;
  j["math"] = math_mode_name(math_mode(*w.backends.front()));
  j["devices"] = w.backends.size();
  j["seed"] = o.seed;
  j["second_g"] = kSecondG;
  j["nodes"] = Json::array();
  for (const NodeResult& n : nodes) j["nodes"].push_back(node_json(n));
  j["not_swept"] = Json::array();
  for (Op op : o.not_swept) j["not_swept"].push_back(op_name(op));
  j["validation"] = validation_json(v);
  j["conforms"] = conforms;
  return j;
}

}  // namespace tapewise::conform::sweep_internal

namespace tapewise::conform {

// Why a swept node does not conform: its error, or each output with values above the bound for a
// cause its row does not accept, or a re-check that disagrees with MPFR.
std::string node_failure(const NodeResult& n) {
  if (!n.error.empty()) return n.error;
  std::vector<std::string> details;  // one per output that fails, naming a failing case
  for (const OutputResult& o : n.outputs) {
    if (output_conforms(n.plan, o)) continue;
    std::string text = std::string(output_name(n.plan.op, o.request.output)) + " at g=" + std::to_string(o.request.g) + ":";
    for (int c = 0; c < kCauseCount; ++c)
      if (o.tally.above_by_cause[c] > 0 && !cause_accepted(n.plan.op, n.plan.dtype, c)) {
        text += " " + std::to_string(o.tally.above_by_cause[c]) + " above the bound (" + cause_name(c) + ")";
        if (const unsigned long long key = o.tally.cause_example_key[c]; key > 0) {  // 1 + a case's index
          const auto index = static_cast<std::uint32_t>(key - 1);
          text += ", e.g. case " + input_text(n.plan, case_inputs(n.plan.job, index), index);
        }
      }
    for (const Recheck& r : o.rechecks)
      if (!r.agrees) text += " the sweep's reference disagrees with MPFR at case " + input_text(n.plan, r.in, r.index);
    details.push_back(text);
  }
  std::string failure = "does not conform" + (details.empty() ? std::string() : ": " + details.front());
  for (const std::string& d : details) failure += "\n" + d;
  return failure;
}

// One test case per node (with its scalars where it is swept at several) and dtype swept, or skipped
// (no sweep reference), and one for the reference's validation against MPFR, on which every verdict rests.
std::vector<JunitCase> sweep_junit_cases(const SweepOptions& o, const std::vector<NodeResult>& nodes, const Validation& v) {
  std::vector<JunitCase> cases;
  for (const NodeResult& n : nodes)
    cases.push_back({std::string("tapewise.sweep.") + dtype_name(n.plan.dtype), node_label(n.plan),
                     node_conforms(n) ? "" : node_failure(n), "", n.seconds});
  for (Op op : o.not_swept)
    for (DType dtype : o.dtypes)
      cases.push_back({std::string("tapewise.sweep.") + dtype_name(dtype), op_name(op), "",
                       "no sweep reference (spec/bounds.def: TAPEWISE_NOT_SWEPT)", 0.0});
  std::string validation_failure;
  if (v.failures > 0) {
    validation_failure = std::to_string(v.failures) + " of " + std::to_string(v.values) + " reference values disagree with MPFR";
    for (const std::string& e : v.examples) validation_failure += "\n" + e;
  }
  cases.push_back({"tapewise.sweep", "reference-validation", validation_failure, "", 0.0});
  return cases;
}

}  // namespace tapewise::conform

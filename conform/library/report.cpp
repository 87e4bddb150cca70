// conform/library/report.cpp — the table, the summary, violation details, JSON and the progress line.
#include "report.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

namespace tapewise::conform {

namespace {

std::string fixed(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

Json sample_json(const Sample& s, Op op) {
  Json inputs = Json::object();
  const std::vector<std::string> names = input_names(op);
  for (std::size_t i = 0; i < s.inputs.size(); ++i) inputs[names[i]] = hex(s.inputs[i]);
  return Json{{"inputs", inputs},         {"g", hex(s.g)},
              {"scalars", scalars_json(op, s.scalars)}, {"output", s.output},
              {"produced", hex(s.produced)}, {"expected", hex(s.expected)},
              {"error_ulps", number_json(s.error_ulps)}, {"ratio", number_json(s.ratio)}};
}

Json accuracy_json(const Accuracy& a, Op op) {
  Json violating = Json::array();
  for (const Sample& s : a.violating) violating.push_back(sample_json(s, op));
  return Json{{"values", a.values},
              {"violations", a.violations},
              {"max_ulps", number_json(a.max_ulps)},
              {"max_ratio", number_json(a.max_ratio)},
              {"bound", Json{{"ulp", a.bound.ulp}, {"abs", a.bound.abs}}},
              {"worst", a.worst ? sample_json(*a.worst, op) : Json(nullptr)},
              {"violating", violating}};
}

std::string sample_text(const Sample& s, Op op, DType dtype) {
  std::string t;
  const std::vector<std::string> names = input_names(op);
  for (std::size_t i = 0; i < s.inputs.size(); ++i) t += names[i] + " = " + format_value(s.inputs[i], dtype) + ", ";
  t += "g = " + format_value(s.g, dtype);
  const std::string scalars = scalars_text(op, s.scalars);
  if (!scalars.empty()) t += ", " + scalars;
  t += "\n        " + s.output + ": produced " + format_value(s.produced, dtype) + ", reference " +
       format_value(s.expected, dtype) + " — " + ulps_text(s.error_ulps) + " ulp, " +
       (std::isfinite(s.ratio) ? fixed("%.4g", s.ratio) + "x the allowed error" : "not within any bound");
  return t;
}

}  // namespace

// An error in ULPs: two decimals while small, scientific once large, "inf"/"nan" as such.
std::string ulps_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return "inf";
  return v < 1000 ? fixed("%.2f", v) : fixed("%.1e", v);
}

namespace {
std::string trim_number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
}  // namespace

std::string bound_text(const reference::Bound& b) {
  std::string s = trim_number(b.ulp);
  if (b.abs > 0) s += "+" + trim_number(b.abs) + "eps*w";
  return s;
}

std::string pad(const std::string& s, std::size_t width, bool right) {
  if (s.size() >= width) return s;
  const std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

TableLayout table_layout(std::int64_t largest_cases) {
  TableLayout layout;
  layout.cases_width = std::max(layout.cases_width, std::to_string(std::max<std::int64_t>(largest_cases, 0)).size() + 1);
  return layout;
}

void print_table_header(std::ostream& out, const TableLayout& layout) {
  out << pad("node", 9, false) << pad("dtype", 8, false) << pad("cases", layout.cases_width, true) << pad("fwd ulp", 10, true)
      << "  " << pad("bound", 12, false) << pad("vjp ulp", 9, true) << "  " << pad("bound", 12, false)
      << pad("used", 5, true) << pad("special", 9, true) << pad("fused!=staged", 15, true)
      << pad("leaks", 7, true) << pad("Melem/s fwd/vjp", 17, true) << "  verdict\n";
}

void print_table_row(std::ostream& out, const Row& row, bool first_of_node, const TableLayout& layout) {
  const double used = std::max(row.forward.max_ratio, row.vjp.max_ratio);
  std::string used_text = std::isfinite(used) ? fixed("%.0f%%", used * 100) : "inf";
  const bool graded = row.forward.values > 0;
  std::string special = std::to_string(row.special.passed) + "/" + std::to_string(row.special.total);
  std::string fvs = row.fused_vs_staged ? std::to_string(row.fused_vs_staged->mismatches) : "-";
  std::string leaks = row.leaks ? std::to_string(row.leaks->leaking_calls) : "-";
  std::string speed = "-";
  if (row.throughput && row.throughput->forward_elements_per_s > 0)
    speed = fixed("%.0f", row.throughput->forward_elements_per_s / 1e6) + " / " +
            fixed("%.0f", row.throughput->vjp_elements_per_s / 1e6);
  std::string verdict = row.missing_evidence(true).empty() ? "conforms" : "no verdict";
  const std::vector<std::string> failed = row.failed_checks();
  if (!failed.empty()) {
    verdict = "VIOLATES:";
    for (const std::string& f : failed) verdict += " " + f;
  }
  out << pad(first_of_node ? op_name(row.op) : "", 9, false) << pad(dtype_name(row.dtype), 8, false)
      << pad(std::to_string(row.cases), layout.cases_width, true)
      << pad(graded ? ulps_text(row.forward.max_ulps) : "-", 10, true) << "  " << pad(bound_text(row.forward.bound), 12, false)
      << pad(graded && row.vjp.values > 0 ? ulps_text(row.vjp.max_ulps) : "-", 9, true) << "  "
      << pad(bound_text(row.vjp.bound), 12, false) << pad(graded ? used_text : "-", 5, true) << pad(special, 9, true)
      << pad(fvs, 15, true) << pad(leaks, 7, true) << pad(speed, 17, true) << "  " << verdict << "\n";
}

void print_table_legend(std::ostream& out, bool with_backend) {
  out << "fwd/vjp ulp: the largest error against the MPFR reference, in ULPs of the correctly rounded value;\n"
         "bound: spec/bounds.def (in exact mode its exact-mode rows), N ulp [+ M eps*w] with w = 1 (forward)\n"
         "or |g| (VJP); used: the worst error over forward and VJP as a share of its allowance (<= 100%\n"
         "conforms); special: spec/special_points\n";
  if (with_backend) {
    out << "rows matching bit for bit on both VJP paths; fused!=staged: bitwise mismatches of the two paths\n"
           "(NaN matches NaN) on domain, bit-pattern and special inputs; leaks: staged VJPs that left workspace\n"
           "live; Melem/s: forward and fused VJP throughput.\n";
  } else {
    out << "rows matching bit for bit (NaN matches NaN); fused!=staged, leaks and throughput concern a backend\n"
           "and are not graded from outputs (-).\n";
  }
}

std::string Summary::line() const {
  std::string text = std::to_string(nodes_conforming) + "/" + std::to_string(nodes) + " nodes conform";
  if (nodes_without_verdict > 0)
    text += "; no verdict for " + std::to_string(nodes_without_verdict) + " (" + std::to_string(rows_without_verdict) +
            (rows_without_verdict == 1 ? " row" : " rows") + " with nothing graded)";
  return text;
}

Summary summarize(const std::vector<Row>& rows) {
  enum class State { conforms, no_verdict, violates };  // a node takes the worst state of its rows
  std::map<int, State> node_state;                       // by op index, in op-table order
  Summary s;
  for (const Row& r : rows) {
    ++s.rows;
    State state = State::violates;
    if (r.conforms()) state = r.missing_evidence(true).empty() ? State::conforms : State::no_verdict;
    if (state == State::conforms) ++s.rows_conforming;
    if (state == State::no_verdict) ++s.rows_without_verdict;
    auto [it, inserted] = node_state.emplace(static_cast<int>(r.op), state);
    if (!inserted) it->second = std::max(it->second, state);
  }
  s.nodes = static_cast<int>(node_state.size());
  for (const auto& [op, state] : node_state) {
    s.nodes_conforming += state == State::conforms ? 1 : 0;
    s.nodes_without_verdict += state == State::no_verdict ? 1 : 0;
  }
  return s;
}

std::vector<std::string> missing_evidence(const std::vector<Row>& rows, bool special_points_graded) {
  std::vector<std::string> lines;
  for (const Row& r : rows)
    if (const std::string why = r.missing_evidence(special_points_graded); !why.empty())
      lines.push_back(std::string(op_name(r.op)) + " " + dtype_name(r.dtype) + ": " + why);
  return lines;
}

void print_violations(std::ostream& out, const std::vector<Row>& rows) {
  for (const Row& r : rows) {
    if (r.conforms()) continue;
    out << "\n" << op_name(r.op) << " " << dtype_name(r.dtype) << ":\n";
    for (const auto* acc : {&r.forward, &r.vjp}) {
      if (acc->violations == 0) continue;
      out << "  " << (acc == &r.forward ? "forward" : "vjp") << ": " << acc->violations << " of " << acc->values
          << " values outside the bound " << bound_text(acc->bound) << "\n";
      for (const Sample& s : acc->violating) out << "      " << sample_text(s, r.op, r.dtype) << "\n";
    }
    if (r.special.passed != r.special.total) {
      out << "  special points: " << r.special.total - r.special.passed << " of " << r.special.total << " fail\n";
      for (const std::string& f : r.special.failures) out << "      " << f << "\n";
    }
    if (r.fused_vs_staged && r.fused_vs_staged->mismatches > 0) {
      out << "  fused != staged: " << r.fused_vs_staged->mismatches << " of " << r.fused_vs_staged->compared << " values\n";
      for (const std::string& e : r.fused_vs_staged->examples) out << "      " << e << "\n";
    }
    if (r.leaks && r.leaks->leaking_calls > 0)
      out << "  workspace: " << r.leaks->leaking_calls << " of " << r.leaks->staged_calls
          << " staged VJPs left workspace buffers live\n";
    for (const std::string& e : r.errors) out << "  error: " << e << "\n";
  }
}

namespace {

// The points that failed, one line each (the few each check keeps): forward, vjp, special points,
// fused != staged, then errors.
std::vector<std::string> failing_points(const Row& row) {
  std::vector<std::string> points;
  for (const auto* acc : {&row.forward, &row.vjp})
    for (const Sample& s : acc->violating) {
      std::string text = sample_text(s, row.op, row.dtype);
      if (const std::size_t wrap = text.find("\n        "); wrap != std::string::npos) text.replace(wrap, 9, ": ");
      points.push_back(std::string(acc == &row.forward ? "forward" : "vjp") + " at " + text);
    }
  for (const std::string& f : row.special.failures) points.push_back("special point " + f);
  if (row.fused_vs_staged)
    for (const std::string& e : row.fused_vs_staged->examples) points.push_back("fused != staged: " + e);
  for (const std::string& error : row.errors) points.push_back(error);
  return points;
}

// A JUnit failure: the first line names the checks and the first failing point, the rest the counts
// and every failing point kept.
std::string row_failure(const Row& row) {
  std::string checks;
  for (const std::string& check : row.failed_checks()) checks += " " + check;
  const std::vector<std::string> points = failing_points(row);
  std::string text = "fails:" + checks + (points.empty() ? "" : "; first: " + points.front());
  text += "\nforward: " + std::to_string(row.forward.violations) + " values above the bound; vjp: " +
          std::to_string(row.vjp.violations) + " values above the bound; special points " +
          std::to_string(row.special.passed) + "/" + std::to_string(row.special.total) + " hold";
  if (row.leaks && row.leaks->leaking_calls > 0)
    text += "; " + std::to_string(row.leaks->leaking_calls) + " staged VJPs left workspace live";
  for (const std::string& point : points) text += "\n" + point;
  return text;
}

}  // namespace

std::vector<JunitCase> junit_cases(const std::vector<Row>& rows, const std::string& command) {
  std::vector<JunitCase> cases;
  for (const Row& row : rows) {
    JunitCase c{"tapewise." + command + "." + dtype_name(row.dtype), op_name(row.op), "", "", row.seconds};
    if (!row.conforms()) c.failure = row_failure(row);
    else c.skipped = row.missing_evidence(true);
    cases.push_back(std::move(c));
  }
  return cases;
}

Json row_json(const Row& row) {
  Json failed = Json::array();
  for (const std::string& f : row.failed_checks()) failed.push_back(f);
  Json special{{"passed", row.special.passed}, {"total", row.special.total}, {"failures", row.special.failures}};
  Json fvs = nullptr;
  if (row.fused_vs_staged)
    fvs = Json{{"compared", row.fused_vs_staged->compared},
               {"mismatches", row.fused_vs_staged->mismatches},
               {"examples", row.fused_vs_staged->examples}};
  Json leaks = nullptr;
  if (row.leaks) leaks = Json{{"staged_calls", row.leaks->staged_calls}, {"leaking_calls", row.leaks->leaking_calls}};
  Json speed = nullptr;
  if (row.throughput)
    speed = Json{{"elements", row.throughput->elements},
                 {"forward_elements_per_s", number_json(row.throughput->forward_elements_per_s)},
                 {"vjp_elements_per_s", number_json(row.throughput->vjp_elements_per_s)}};
  return Json{{"op", op_name(row.op)},
              {"dtype", dtype_name(row.dtype)},
              {"conforms", row.conforms()},
              {"failed_checks", failed},
              {"cases", row.cases},
              {"forward", accuracy_json(row.forward, row.op)},
              {"vjp", accuracy_json(row.vjp, row.op)},
              {"special_points", special},
              {"fused_vs_staged", fvs},
              {"workspace", leaks},
              {"throughput", speed},
              {"errors", row.errors}};
}

Json summary_json(const Summary& s, double elapsed_s) {
  return Json{{"nodes", s.nodes},
              {"nodes_conforming", s.nodes_conforming},
              {"rows", s.rows},
              {"rows_conforming", s.rows_conforming},
              {"nodes_without_verdict", s.nodes_without_verdict},
              {"rows_without_verdict", s.rows_without_verdict},
              {"conforms", s.conforms()},
              {"line", s.line()},
              {"elapsed_s", elapsed_s}};
}

Json number_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

Json scalars_json(Op op, const Scalars& scalars) {
  Json out = Json::object();
  const OpInfo& info = op_info(op);
  const double values[2] = {scalars.s0, scalars.s1};
  for (int i = 0; i < info.scalar_count(); ++i) out[info.scalar_names[i]] = number_json(values[i]);
  return out;
}

std::string short_value(double v, DType dtype) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // The shortest text that reads back as the value: float's for float32 and the 16-bit dtypes (whose
  // values are floats, read back through float as R16(R32(text)) is), double's for float64.
  const auto r = dtype != DType::float64 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v))
                                         : std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

Progress::Progress(std::int64_t total_units, bool enabled)
    : total_(total_units > 0 ? total_units : 1), enabled_(enabled && ::isatty(STDOUT_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void Progress::set_label(std::string label) {
  label_ = std::move(label);
  draw();
}

void Progress::advance(std::int64_t units) {
  done_ += units;
  draw();
}

void Progress::draw() {
  if (!enabled_) return;
  using namespace std::chrono;
  const auto now = steady_clock::now();
  const double elapsed = duration<double>(now - start_).count();
  if (elapsed < 2.0) return;  // short runs show nothing
  if (shown_ && now - last_draw_ < milliseconds(100)) return;
  last_draw_ = now;
  const double fraction = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
  std::string eta;
  if (fraction > 0.02) eta = fixed(", about %.0f s left", elapsed * (1 - fraction) / fraction);
  std::cout << "\r\033[K  " << fixed("%3.0f%%", fraction * 100) << "  " << label_ << eta << std::flush;
  shown_ = true;
}

void Progress::clear() {
  if (!shown_) return;
  std::cout << "\r\033[K" << std::flush;
  shown_ = false;
}

}  // namespace tapewise::conform

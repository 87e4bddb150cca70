// conform/library/grade.hpp — the verdict logic that `run` and `check` share: produced values against
// the MPFR reference within spec/bounds.def (forward weight 1, VJP weight |g|), produced values at
// special points against the spec's exact bits, and what makes a row conform. No tolerance here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bounds.hpp"
#include "cases.hpp"
#include "exec.hpp"
#include "special_points.hpp"

namespace tapewise::conform {

// One produced value, with where it came from, kept for the report.
struct Sample {
  std::vector<double> inputs;
  double g = 0.0;
  std::string output;  // "y", "dx", "da", "db"
  Scalars scalars;
  double produced = 0.0;
  double expected = 0.0;  // R(exact)
  double error_ulps = 0.0;
  double ratio = 0.0;  // error / allowed; <= 1 conforms
};

// Accuracy of one output kind (forward or VJP) over many values.
struct Accuracy {
  reference::Bound bound;
  std::int64_t values = 0;
  std::int64_t violations = 0;
  double max_ulps = 0.0;
  double max_ratio = 0.0;
  std::optional<Sample> worst;      // the largest ratio (then error) seen
  std::vector<Sample> violating;    // the first few violations
  void add(const Sample& s, bool within);
};

// Special points of one (op, dtype): each passes when every value matches the spec's bits on
// every path run.
struct SpecialTally {
  int passed = 0;
  int total = 0;
  std::vector<std::string> failures;  // one line per failing point
};

// fused == staged, bitwise (NaN matches NaN).
struct PathAgreement {
  std::int64_t compared = 0;
  std::int64_t mismatches = 0;
  std::vector<std::string> examples;  // the first few mismatches
};

struct Throughput {
  std::int64_t elements = 0;
  double forward_elements_per_s = 0.0;
  double vjp_elements_per_s = 0.0;
};

// One row of the report: one node in one dtype. `run` fills every field; `check` leaves the
// backend-only ones (fused vs staged, leaks, throughput) empty.
struct Row {
  Op op = Op::add;
  DType dtype = DType::float32;
  std::int64_t cases = 0;
  Accuracy forward;
  Accuracy vjp;
  SpecialTally special;
  std::optional<PathAgreement> fused_vs_staged;
  std::optional<WorkspaceLeaks> leaks;
  std::optional<Throughput> throughput;
  std::vector<std::string> errors;  // what kept a part from being graded (missing output, ...)
  // check: the suites with none of their out_*.npy files. Not answered is no verdict, not a
  // violation: a folder the implementation never touched says nothing of it.
  std::vector<std::string> unanswered;
  double seconds = 0;  // what producing and grading the row took (JUnit's time)

  // The names of the checks that failed: "forward", "vjp", "special", "fused!=staged",
  // "workspace", "errors". Empty when the row conforms.
  std::vector<std::string> failed_checks() const;
  bool conforms() const { return failed_checks().empty(); }
  // Why this row cannot support a "conforms": a suite not answered (check), no forward value or no
  // gradient graded against the reference, or (when the run grades special points) no special
  // point. Empty when it can.
  std::string missing_evidence(bool special_points_graded) const;
};

// An empty row of a node and dtype, with the bounds of spec/bounds.def for that math mode.
Row make_row(Op op, DType dtype, MathMode math);

// Grades a batch's produced forward values and gradients against the reference and the bounds
// of spec/bounds.def, adding to row.forward, row.vjp and row.cases. `produced.grads` may be
// empty (forward only).
void grade_against_reference(const Batch& batch, const NodeOutputs& produced, Row& row);

// Compares two paths' outputs bitwise (NaN matches NaN), adding to `agreement`.
void compare_paths(const Batch& batch, const NodeOutputs& fused, const NodeOutputs& staged,
                   PathAgreement& agreement);

// One special point against produced values: element `index` of each produced array.
struct PointVerdict {
  bool y_matches = false;
  std::vector<bool> grad_matches;
  bool passes() const;
  std::string mismatch_text(const SpecialPoint& p, const NodeOutputs& produced, std::int64_t index = 0) const;
};
PointVerdict grade_special_point(const SpecialPoint& point, const NodeOutputs& produced,
                                 std::int64_t index = 0);

// The one rule for a value above its bound, which `sweep` and `graph` share (spec/bounds.def,
// TAPEWISE_SWEPT's `outside`): inside the node's domain (reference::bounds_domain) it is a
// violation; outside it, it is accepted only for a cause (reference/sweep_reference.hpp, cause_of: an
// intermediate of TorchLean's staging that overflows or underflows while the exact result does not)
// that the node's row accepts there. `output`: 0 y, 1 dx or da, 2 db; `b` is unused for a unary node.
int cause_above_bound(Op op, DType dtype, int output, double a, double b, double g);
bool cause_accepted(Op op, DType dtype, int cause);
bool accepted_above_bound(Op op, DType dtype, int output, double a, double b, double g);

// "dx" or "da"/"db": the gradient names of an op (and of a `same` row: just "da").
std::vector<std::string> grad_names(Op op, bool same = false);
// The input names: "x" or "a", "b".
std::vector<std::string> input_names(Op op);

// Bitwise equality in the dtype where any NaN matches any NaN.
bool same_bits(double a, double b, DType dtype);

}  // namespace tapewise::conform

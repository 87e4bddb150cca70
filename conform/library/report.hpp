// conform/library/report.hpp — how rows are shown: the table `run` and `check` print, the summary
// line, the details of each violation, the JSON report (schema in README), and the progress line
// shown on a terminal during long runs. Presentation only; verdicts come from grade.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grade.hpp"
#include "graph.hpp"
#include "json_io.hpp"  // write_json_output: every report goes through it
#include "junit.hpp"

namespace tapewise::conform {

using Json = nlohmann::ordered_json;  // keys in the order written: the schema reads top-down

// The JSON report of `run --json` and `check --json` (README: "JSON report"). Top level, in order:
// schema, command, tapewise_version (kVersion), spec_sha256 (kSpecSha256, the spec this binary was
// built with), special_points_file (run: the file graded), backend (run) | implementation (check),
// seed, cases, ops and dtypes (run), rows, summary.
inline constexpr const char* kReportSchema = "tapewise-conform.report/1";
inline constexpr const char* kAuditSchema = "tapewise-conform.audit/1";  // audit --json

// The table: a header, then one line per row (the node's name on its first dtype only). The cases
// column is as wide as the largest count it shows (`largest_cases`: run knows it before its rows,
// check after), with a space before it, so that "bfloat16" and 100,000 never run together.
struct TableLayout {
  std::size_t cases_width = 6;
};
TableLayout table_layout(std::int64_t largest_cases);
void print_table_header(std::ostream& out, const TableLayout& layout);
void print_table_row(std::ostream& out, const Row& row, bool first_of_node, const TableLayout& layout);
// `with_backend`: the legend of `run` (fused vs staged, leaks, throughput); else that of `check`.
void print_table_legend(std::ostream& out, bool with_backend);

// Nodes that conform in every dtype run, e.g. "23/23 nodes conform". A row conforms when it has
// no failed check and its evidence supports a verdict (missing_evidence below); a row without a
// failed check but with nothing graded (a suite not answered, --cases 0) has no verdict, and so
// has its node unless another of its rows violates.
struct Summary {
  int nodes = 0;
  int nodes_conforming = 0;
  int nodes_without_verdict = 0;
  int rows = 0;
  int rows_conforming = 0;
  int rows_without_verdict = 0;
  bool conforms() const { return nodes_conforming == nodes; }
  bool violates() const { return rows_conforming + rows_without_verdict < rows; }
  std::string line() const;
};
Summary summarize(const std::vector<Row>& rows);
// One line per row that cannot support a verdict (Row::missing_evidence), e.g. "relu float32: no
// special point graded". A command that would say "conforms" exits 2 with these instead: a pass
// needs something graded for every node, output and (where graded) special points.
std::vector<std::string> missing_evidence(const std::vector<Row>& rows, bool special_points_graded);

// The first few failing values of every row that does not conform, with inputs and expected bits.
void print_violations(std::ostream& out, const std::vector<Row>& rows);

Json row_json(const Row& row);
// One JUnit test case per row (classname tapewise.<command>.<dtype>, name the node): a failure that
// names each failed check, or skipped with why the row cannot support a verdict.
std::vector<JunitCase> junit_cases(const std::vector<Row>& rows, const std::string& command);
Json summary_json(const Summary& s, double elapsed_s);
// A double as JSON: a number when finite, else the string "inf", "-inf" or "nan".
Json number_json(double v);
// A node's scalars as every report writes them: {name: number_json(value)}, e.g. {"lo": -1, "hi": "inf"}.
Json scalars_json(Op op, const Scalars& scalars);
// Shortest decimal that reads back to the same value in the dtype ("0.1", "-0", "1e-45", "inf").
std::string short_value(double v, DType dtype);
// The report's cells, shared by every table the runner prints: an error in ULPs (two decimals while
// small, scientific once large, "inf"/"nan"), a bound as "ULP+ABSeps*w", a cell padded to a width.
std::string ulps_text(double v);
std::string bound_text(const reference::Bound& b);
std::string pad(const std::string& s, std::size_t width, bool right = false);

// A one-line progress display on stdout, only when stdout is a terminal and only once the run has
// taken longer than a couple of seconds; erased before anything else is printed.
class Progress {
 public:
  Progress(std::int64_t total_units, bool enabled);
  ~Progress() { clear(); }
  void set_label(std::string label);
  void advance(std::int64_t units);
  void clear();  // erases the line (call before printing)

 private:
  void draw();
  std::int64_t total_;
  std::int64_t done_ = 0;
  bool enabled_;
  bool shown_ = false;
  std::string label_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tapewise::conform

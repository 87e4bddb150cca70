// reference/special_points.hpp — the reader of spec/special_points: hand-written, bit-exact expected
// forward values and VJPs at kinks, ties, signed zeros, NaN and infinities. Shared by the tests and
// the conformance runner. It parses and compares; it computes no op (the rows are the spec).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <tapewise/core.hpp>
#include <tapewise/op.hpp>

namespace tapewise {

// One row of spec/special_points. Values are held as doubles; each is exactly representable in
// `dtype` (scalars excepted: they are host doubles that the op rounds once, R(·)).
struct SpecialPoint {
  Op op;
  DType dtype;
  Scalars scalars;             // c | lo, hi | eps (as written; zeros where the op takes none)
  bool same = false;           // binary op recorded with the same parent twice: op(a, a)
  std::vector<double> inputs;  // {x} | {a, b} | {a} when same
  double g = 0.0;              // upstream gradient (the backward seed)
  double y = 0.0;              // expected forward value
  std::vector<double> grads;   // expected {dx} | {da, db} | {da} (the node's TOTAL) when same
  std::string note;            // the text after '#', if any
  int line = 0;                // 1-based line in the file
};

struct SpecialPoints {
  std::vector<SpecialPoint> points;
  std::map<std::string, std::string> why;  // op name -> rationale (the `why <op>: ...` lines)
};

// Reads and validates the file. Strict: an unknown op or key, a malformed token, a value that is not
// exactly representable in the row's dtype, a missing or duplicated key, or inputs/gradients that do
// not fit the op's arity fail with ErrorCode::InvalidArgument naming "<path>:<line>".
[[nodiscard]] Result<SpecialPoints> load_special_points(const std::string& path);
// The same, from text already in memory; `origin` names it in messages.
[[nodiscard]] Result<SpecialPoints> parse_special_points(const std::string& text, const std::string& origin);

// Expected NaN matches any NaN; otherwise the bits in the dtype must be equal (so +0 != -0).
bool bits_match(double expected, double produced, DType dtype);

// "0x1.8p+1 (3, bits 0x40400000)" — hex float, decimal (9 or 17 significant digits) and the raw
// bits in the dtype, for failure messages.
std::string format_value(double v, DType dtype);

// "f32" / "f64", as the file writes dtypes.
const char* special_dtype_name(DType dtype);

}  // namespace tapewise

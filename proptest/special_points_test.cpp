// proptest/special_points_test.cpp — every row of spec/special_points, checked bit for bit on the CPU
// backend and (where a GPU exists) the CUDA backend, forward and both VJP paths; plus the strictness
// of the reader, and a section per node in spec/conventions.md, which the rows are derived from. It
// holds no expected value of its own: the rows are the spec.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <tapewise/tapewise.hpp>

#include "cases.hpp"  // host_array
#include "special_points.hpp"
#include "test_support.hpp"

namespace tapewise {

// Parameters print as their row, not as raw bytes (found by ADL from the test's tuple printer).
void PrintTo(const SpecialPoint& p, std::ostream* os) {
  *os << op_name(p.op) << " " << special_dtype_name(p.dtype) << " line " << p.line;
}

namespace {

const std::string& special_points_path() {
  static const std::string path = std::string(TAPEWISE_SPECIAL_POINTS);
  return path;
}

// Loaded once; a load error is kept and reported by SpecialPointsFile.LoadsAndCoversEveryOp.
const Result<SpecialPoints>& table() {
  static const Result<SpecialPoints> t = load_special_points(special_points_path());
  return t;
}

std::vector<SpecialPoint> rows() { return table() ? table()->points : std::vector<SpecialPoint>{}; }

// One element of the row's dtype (the runner's own conversion: the values are already the dtype's).
HostArray scalar_array(double v, DType dtype) { return conform::host_array(dtype, {v}); }

std::string describe_row(const SpecialPoint& p) {
  const OpInfo& info = op_info(p.op);
  std::ostringstream s;
  s << special_points_path() << ":" << p.line << ": " << info.name << " "
    << special_dtype_name(p.dtype);
  for (int k = 0; k < info.scalar_count(); ++k) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s=%a", info.scalar_names[k],
                  k == 0 ? p.scalars.s0 : p.scalars.s1);
    s << buf;
  }
  const char* in_names[2] = {info.arity == 1 ? "x" : "a", "b"};
  for (std::size_t i = 0; i < p.inputs.size(); ++i)
    s << " " << in_names[i] << "=" << format_value(p.inputs[i], p.dtype);
  if (p.same) s << " same=1";
  s << " g=" << format_value(p.g, p.dtype);
  if (!p.note.empty()) s << "  [" << p.note << "]";
  return s.str();
}

// Checks one row on one backend; every mismatch is reported with the row's line, op, dtype, inputs,
// and the expected and produced bits.
void check_row(const SpecialPoint& p, const std::shared_ptr<Backend>& be) {
  const std::string where = describe_row(p) + " on " + be->describe();
  Tape tape(be);
  std::vector<NodeId> leaves;
  for (double v : p.inputs) {
    auto id = tape.leaf(scalar_array(v, p.dtype));
    ASSERT_TRUE(id) << where << ": leaf failed: " << id.error().str();
    leaves.push_back(*id);
  }
  std::vector<NodeId> parents = leaves;
  if (p.same) parents.push_back(leaves[0]);  // op(a, a): one node as both parents

  auto y = tape.apply(p.op, parents, p.scalars);
  ASSERT_TRUE(y) << where << ": apply failed: " << y.error().str();
  auto value = tape.value(*y);
  ASSERT_TRUE(value) << where << ": value failed: " << value.error().str();
  const double produced_y = value->as_double(0);
  EXPECT_TRUE(bits_match(p.y, produced_y, p.dtype))
      << where << ": forward y expected " << format_value(p.y, p.dtype) << ", produced "
      << format_value(produced_y, p.dtype);

  const HostArray seed = scalar_array(p.g, p.dtype);
  const char* grad_names[2] = {op_info(p.op).arity == 1 ? "dx" : "da", "db"};
  for (VjpPath path : {VjpPath::fused, VjpPath::staged}) {
    const char* path_name = path == VjpPath::fused ? "fused" : "staged";
    auto grads = tape.backward(*y, seed, path);
    ASSERT_TRUE(grads) << where << ": backward (" << path_name << ") failed: "
                       << grads.error().str();
    for (std::size_t i = 0; i < p.grads.size(); ++i) {
      auto h = grads->host(leaves[i]);
      if (!h) {
        ADD_FAILURE() << where << ": " << path_name << " " << grad_names[i]
                      << ": no gradient: " << h.error().str();
        continue;
      }
      const double produced = h->as_double(0);
      EXPECT_TRUE(bits_match(p.grads[i], produced, p.dtype))
          << where << ": " << path_name << " " << grad_names[i] << (p.same ? " (total)" : "")
          << " expected " << format_value(p.grads[i], p.dtype) << ", produced "
          << format_value(produced, p.dtype);
    }
  }
}

// ---- one test per (row, backend) ----------------------------------------------------------------

class Row : public ::testing::TestWithParam<std::tuple<SpecialPoint, BackendKind>> {};

TEST_P(Row, BitExact) {
  const auto& [point, kind] = GetParam();
  TW_BACKEND_OR_SKIP(backend, kind);
  check_row(point, backend);
}

std::string row_name(const ::testing::TestParamInfo<std::tuple<SpecialPoint, BackendKind>>& info) {
  const auto& [p, kind] = info.param;
  return std::string(testing::backend_name(kind)) + "_" + op_name(p.op) + "_" +
         special_dtype_name(p.dtype) + "_line" + std::to_string(p.line);
}

INSTANTIATE_TEST_SUITE_P(SpecialPoints, Row,
                         ::testing::Combine(::testing::ValuesIn(rows()), testing::kEveryBackend),
                         row_name);

// ---- the file as a whole ------------------------------------------------------------------------

TEST(SpecialPointsFile, LoadsAndCoversEveryOp) {
  const auto& t = table();
  ASSERT_TRUE(t) << t.error().str();
  EXPECT_GE(t->points.size(), 150u);
  for (const OpInfo& info : kOps) {
    for (DType dtype : kDTypes) {
      const bool has_row = std::any_of(t->points.begin(), t->points.end(),
                                       [&](const SpecialPoint& p) { return p.op == info.op && p.dtype == dtype; });
      EXPECT_TRUE(has_row) << info.name << " has no " << dtype_name(dtype) << " row";
    }
    EXPECT_TRUE(t->why.count(info.name)) << info.name << " has no `why` line";
  }
}

// spec/conventions.md states each node's conventions in words in its §1, one section per node in the
// op table's order, headed "### 1.<k> <name>" (then its formula or form).
TEST(ConventionsFile, HasASectionForEveryNodeInTableOrder) {
  const std::filesystem::path path = std::filesystem::path(special_points_path()).parent_path() / "conventions.md";
  std::ifstream doc(path);
  ASSERT_TRUE(doc) << path << " cannot be read";
  std::vector<std::string> sections;  // "1.<k> <name>"
  for (std::string line; std::getline(doc, line);) {
    if (!line.starts_with("### 1.")) continue;
    const std::size_t number_end = std::min(line.find(' ', 4), line.size());
    std::size_t name_end = number_end + 1;
    while (name_end < line.size() && (std::isalnum(static_cast<unsigned char>(line[name_end])) || line[name_end] == '_'))
      ++name_end;
    sections.push_back(line.substr(4, name_end - 4));
  }
  std::vector<std::string> expected;
  for (const OpInfo& info : kOps) expected.push_back("1." + std::to_string(static_cast<int>(info.op) + 1) + " " + info.name);
  EXPECT_EQ(sections, expected) << path << ": the node sections of §1 differ from the op table's nodes";
}

// ---- the reader's strictness ------------------------------------------------------------------

// Parses `text` and expects a failure naming line `line`.
void expect_rejected(const std::string& text, int line, const std::string& what) {
  auto r = parse_special_points(text, "test");
  ASSERT_FALSE(r) << "accepted: " << text;
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(r.error().message.find("test:" + std::to_string(line) + ":"), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
}

const std::string kGood = "# comment\n\nop=relu dtype=f32 x=1 g=2 y=1 dx=2\n";

TEST(SpecialPointsParser, AcceptsAWellFormedFile) {
  const std::string text =
      "# header\n"
      "why relu: first part\n"
      "why relu: second part\n"
      "op=relu dtype=f32 x=-0 g=2 y=+0 dx=+0   # relu'(0) = 0\n"
      "\n"
      "op=clamp dtype=f64 lo=-1 hi=0x1p+0 x=nan g=3 y=-1 dx=+0\n"
      "op=max dtype=f32 a=2 same=1 g=0x1p-149 y=2 da=0x1p-149\n"
      "op=scale dtype=f32 c=0x1.000001p+0 x=3 g=-inf y=3 dx=-inf\n"
      "op=div dtype=f64 a=1 b=0x1p70 g=0.5 y=0x1p-70 da=0x1p-71 db=-0x1p-141\n";
  auto r = parse_special_points(text, "test");
  ASSERT_TRUE(r) << r.error().str();
  ASSERT_EQ(r->points.size(), 5u);
  EXPECT_EQ(r->why.at("relu"), "first part second part");

  const SpecialPoint& relu = r->points[0];
  EXPECT_EQ(relu.op, Op::relu);
  EXPECT_EQ(relu.dtype, DType::float32);
  EXPECT_EQ(relu.line, 4);
  ASSERT_EQ(relu.inputs.size(), 1u);
  EXPECT_TRUE(std::signbit(relu.inputs[0]) && relu.inputs[0] == 0.0);  // -0 kept
  EXPECT_FALSE(std::signbit(relu.y));
  EXPECT_EQ(relu.note, "relu'(0) = 0");

  const SpecialPoint& clamp = r->points[1];
  EXPECT_EQ(clamp.scalars.s0, -1.0);
  EXPECT_EQ(clamp.scalars.s1, 1.0);
  EXPECT_TRUE(std::isnan(clamp.inputs[0]));

  const SpecialPoint& mx = r->points[2];
  EXPECT_TRUE(mx.same);
  EXPECT_EQ(mx.inputs.size(), 1u);
  EXPECT_EQ(mx.grads.size(), 1u);
  EXPECT_EQ(mx.grads[0], 0x1p-149);

  // A scalar need not be representable in the dtype: it is rounded by the op.
  EXPECT_EQ(r->points[3].scalars.s0, 0x1.000001p+0);
  EXPECT_EQ(r->points[3].g, -HUGE_VAL);

  const SpecialPoint& dv = r->points[4];
  ASSERT_EQ(dv.grads.size(), 2u);
  EXPECT_EQ(dv.grads[1], -0x1p-141);
}

TEST(SpecialPointsParser, RejectsUnknownOp) {
  expect_rejected(kGood + "op=frobnicate dtype=f32 x=1 g=1 y=1 dx=1\n", 4, "unknown op");
}

TEST(SpecialPointsParser, RejectsUnknownDtypeAndKey) {
  expect_rejected("op=relu dtype=f8 x=1 g=1 y=1 dx=1\n", 1, "unknown dtype");
  expect_rejected(kGood + "op=relu dtype=f32 x=1 g=1 y=1 dx=1 z=3\n", 4, "unknown key");
}

TEST(SpecialPointsParser, RejectsInexactValues) {
  expect_rejected(kGood + "op=relu dtype=f64 x=0.1 g=1 y=1 dx=1\n", 4, "not exactly representable");
  expect_rejected(kGood + "op=relu dtype=bf16 x=0x1.01p+0 g=1 y=1 dx=1\n", 4, "not exactly representable");
  expect_rejected(kGood + "op=relu dtype=f16 x=0x1.002p+0 g=1 y=1 dx=1\n", 4, "not exactly representable");
  expect_rejected(kGood + "op=relu dtype=f32 x=0x1.000001p+0 g=1 y=1 dx=1\n", 4,
                  "not exactly representable in float32");
  expect_rejected(kGood + "op=relu dtype=f32 x=1 g=0x1p-150 y=1 dx=1\n", 4, "float32");
  expect_rejected(kGood + "op=relu dtype=f32 x=1 g=1 y=0x1p+128 dx=1\n", 4, "float32");
  expect_rejected(kGood + "op=relu dtype=f64 x=1e400 g=1 y=1 dx=1\n", 4, "float64");
}

TEST(SpecialPointsParser, RejectsWrongArity) {
  expect_rejected(kGood + "op=relu dtype=f32 a=1 b=2 g=1 y=1 dx=1\n", 4, "missing key 'x'");
  expect_rejected(kGood + "op=add dtype=f32 x=1 g=1 y=1 da=1 db=1\n", 4, "missing key 'a'");
  expect_rejected(kGood + "op=add dtype=f32 a=1 b=1 g=1 y=2 da=1\n", 4, "missing key 'db'");
  expect_rejected(kGood + "op=relu dtype=f32 x=1 g=1 y=1 dx=1 da=1\n", 4, "does not apply");
  expect_rejected(kGood + "op=max dtype=f32 a=1 same=1 b=1 g=1 y=1 da=1\n", 4, "same=1");
  expect_rejected(kGood + "op=relu dtype=f32 x=1 same=1 g=1 y=1 dx=1\n", 4, "binary op");
}

TEST(SpecialPointsParser, RejectsMissingOrMisplacedScalars) {
  expect_rejected(kGood + "op=clamp dtype=f32 lo=0 x=1 g=1 y=1 dx=1\n", 4, "missing key 'hi'");
  expect_rejected(kGood + "op=relu dtype=f32 c=2 x=1 g=1 y=1 dx=1\n", 4, "'c'");
  expect_rejected(kGood + "op=scale dtype=f32 c=two x=1 g=1 y=1 dx=1\n", 4, "not a number");
}

TEST(SpecialPointsParser, RejectsBadTokens) {
  expect_rejected(kGood + "op=relu dtype=f32 x=1 g=1 y=1 dx\n", 4, "bad token");
  expect_rejected(kGood + "op=relu dtype=f32 x=1 g=1 y=abc dx=1\n", 4, "not a number");
  expect_rejected(kGood + "op=relu dtype=f32 x=1 g=1 y=1 dx=1 dx=1\n", 4, "duplicate key");
  expect_rejected(kGood + "op=relu dtype=f32 x= g=1 y=1 dx=1\n", 4, "empty value");
  expect_rejected(kGood + "op=relu dtype=f32 x=1 g=1 dx=1\n", 4, "missing key 'y'");
  expect_rejected(kGood + "why nothing: text\n", 4, "unknown op");
}

TEST(SpecialPointsParser, MissingFileIsAnError) {
  auto r = load_special_points("/nonexistent/special_points");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
}

TEST(SpecialPointsCompare, BitsMatch) {
  EXPECT_TRUE(bits_match(std::nan(""), -std::nan(""), DType::float32));
  EXPECT_FALSE(bits_match(std::nan(""), 0.0, DType::float64));
  EXPECT_FALSE(bits_match(0.0, std::nan(""), DType::float64));
  EXPECT_FALSE(bits_match(0.0, -0.0, DType::float32));
  EXPECT_FALSE(bits_match(-0.0, 0.0, DType::float64));
  EXPECT_TRUE(bits_match(-0.0, -0.0, DType::float64));
  EXPECT_TRUE(bits_match(0x1p-149, 0x1p-149, DType::float32));
  EXPECT_FALSE(bits_match(1.0, 0x1.0000000000001p+0, DType::float64));
  EXPECT_FALSE(bits_match(1.0, 0x1.0000000000001p+0, DType::float32));  // not a float32 value
  EXPECT_TRUE(bits_match(HUGE_VAL, HUGE_VAL, DType::float32));
}

TEST(SpecialPointsCompare, FormatValueShowsHexDecimalAndBits) {
  EXPECT_EQ(format_value(3.0, DType::float32), "0x1.8p+1 (3, bits 0x40400000)");
  EXPECT_EQ(format_value(-0.0, DType::float32), "-0x0p+0 (-0, bits 0x80000000)");
  EXPECT_EQ(format_value(0.5, DType::float64), "0x1p-1 (0.5, bits 0x3fe0000000000000)");
}

}  // namespace
}  // namespace tapewise

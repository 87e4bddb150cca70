// proptest/stagings_test.cpp — spec/stagings.def, the one text of every node's staging: it parses for
// every node and pass, its reader refuses a malformed stage naming what is wrong, and the two other
// places that quote it (spec/ops.def's `staged` column, spec/conventions.md) quote it exactly.
#include <fstream>
#include <regex>
#include <sstream>

#include "tape/staging.hpp"
#include "test_support.hpp"

namespace tapewise::testing {
namespace {

using staging::Pass;

const staging::Staging& must_stage(Op op, Pass pass) {
  auto st = staging::staging_of(op, pass);
  if (!st) throw std::runtime_error(st.error().message);
  return **st;
}

TEST(StagingsFile, EveryNodeHasAForwardAndAVjpThatParse) {
  for (const OpInfo& info : kOps)
    for (Pass pass : {Pass::forward, Pass::vjp}) {
      auto st = staging::staging_of(info.op, pass);
      ASSERT_TRUE(st) << info.name << ": " << st.error().message;
      EXPECT_FALSE((*st)->stages.empty()) << info.name;
    }
}

// The kinks are written out as TorchLean stages them: selects on comparison masks, not a kernel.
TEST(StagingsFile, TheNativeRowsAreStagesNotKernels) {
  EXPECT_EQ(must_stage(Op::relu, Pass::vjp).text, "ws z = full(+0); ws p = x > z; dx = where(p, g, z)");
  const staging::Staging& max = must_stage(Op::max, Pass::vjp);
  EXPECT_EQ(max.workspace, 6);  // z, aw, bw, half, ha, hb
  EXPECT_EQ(max.stages.back().prim, Prim::where);
  const staging::Staging& sqrt = must_stage(Op::sqrt, Pass::vjp);
  EXPECT_NE(std::find_if(sqrt.stages.begin(), sqrt.stages.end(), [](const auto& s) { return s.prim == Prim::sqrt; }),
            sqrt.stages.end());
}

TEST(StagingsFile, OpsDefStagedColumnIsTheVjpStaging) {
  for (const OpInfo& info : kOps)
    EXPECT_EQ(std::string(info.staged), must_stage(info.op, Pass::vjp).text)
        << info.name << ": spec/ops.def's staged column differs from spec/stagings.def";
}

// Each node's section of spec/conventions.md quotes its forward and VJP staging in backticks (line
// breaks inside a quote count as spaces, as Markdown renders them).
TEST(StagingsFile, ConventionsQuoteEveryStaging) {
  // TAPEWISE_SPECIAL_POINTS: the source tree's spec/special_points (proptest/CMakeLists.txt).
  const std::filesystem::path path = std::filesystem::path(TAPEWISE_SPECIAL_POINTS).parent_path() / "conventions.md";
  std::ifstream doc(path);
  ASSERT_TRUE(doc) << path << " cannot be read";
  std::map<std::string, std::string> sections;  // node name -> its section, whitespace collapsed
  std::string current;
  for (std::string line; std::getline(doc, line);) {
    if (line.starts_with("## ")) current.clear();
    if (line.starts_with("### 1.")) {
      std::smatch m;
      current = std::regex_search(line, m, std::regex(R"(^### 1\.\d+ (\w+))")) ? m[1].str() : "";
    }
    if (!current.empty()) sections[current] += " " + line;
  }
  for (auto& [name, text] : sections) text = std::regex_replace(text, std::regex(R"(\s+)"), " ");
  for (const OpInfo& info : kOps)
    for (Pass pass : {Pass::forward, Pass::vjp}) {
      const std::string quoted = "`" + must_stage(info.op, pass).text + "`";
      EXPECT_NE(sections[info.name].find(quoted), std::string::npos)
          << path << ": the section of " << info.name << " does not quote its " << (pass == Pass::forward ? "forward" : "vjp")
          << " staging " << quoted;
    }
}

void expect_refused(Op op, Pass pass, const std::string& text, const std::string& what) {
  auto st = staging::parse_staging(op, pass, text);
  ASSERT_FALSE(st) << "accepted: " << text;
  EXPECT_EQ(st.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(st.error().message.find(what), std::string::npos) << st.error().message;
}

TEST(StagingsFile, TheReaderRefusesAMalformedStageNamingIt) {
  expect_refused(Op::relu, Pass::vjp, "dx = where(p, g, x)", "reads p");
  expect_refused(Op::relu, Pass::vjp, "ws p = x > x; dx = copy(g); dx = copy(p)", "dx is written twice");
  expect_refused(Op::relu, Pass::vjp, "ws p = x > x", "never writes dx");
  expect_refused(Op::relu, Pass::vjp, "p = x > x; dx = copy(g)", "p is not an output");
  expect_refused(Op::relu, Pass::vjp, "ws x = copy(g); dx = copy(g)", "x is already a name");
  expect_refused(Op::relu, Pass::vjp, "dx = g * 0.1", "'0.1' is not a constant");
  expect_refused(Op::relu, Pass::vjp, "dx = g * R(lo)", "no scalar of that name");
  expect_refused(Op::relu, Pass::vjp, "dx = (g * x) * x", "is not one operation");
  expect_refused(Op::relu, Pass::vjp, "dx = erf(g)", "no function erf");
  expect_refused(Op::relu, Pass::vjp, "dx = where(g, x)", "where takes 3 operands");
  expect_refused(Op::relu, Pass::vjp, "dx := g", "not 'NAME = operation'");
  EXPECT_TRUE(staging::parse_staging(Op::clamp, Pass::vjp, "dx = g * R(hi)"));
}

}  // namespace
}  // namespace tapewise::testing

// proptest/graph_test.cpp — the graph checker (conform/library/graph.hpp): a random 50-node graph over
// every op passes on every backend; each kind of bad graph is rejected with its reason; planted
// faults (a wrong gradient slot, a wrong contribution, a wrong value) are caught at the node that
// made them; `tapewise-conform graph` on examples/graphs; and the values that spec/conventions.md's
// "Tensions between nodes' conventions" states, read from the document itself.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

#include "graph.hpp"
#include "reference.hpp"

namespace tapewise::testing {
namespace {

namespace fs = std::filesystem;
namespace ref = tapewise::reference;
using conform::check_graph;
using conform::GraphCheckOptions;
using conform::GraphReport;
using conform::Production;
using conform::VjpRun;
using Json = nlohmann::json;

// The source tree, found from the special points' path the build gives the tests.
fs::path source_root() { return fs::path(TAPEWISE_SPECIAL_POINTS).parent_path().parent_path(); }
fs::path examples_dir() { return source_root() / "examples" / "graphs"; }

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string hex_text(double v) { return conform::hex(v); }

// ---- a random graph over every op ------------------------------------------------------------------

// Deterministic on every standard library: only the engine's raw output is used (std's
// distributions are implementation-defined).
struct Rng {
  std::mt19937_64 engine;
  std::uint64_t below(std::uint64_t n) { return engine() % n; }
};

bool in_domain(double v, const OpInfo& info) {
  const double m = std::fabs(v);
  return std::isfinite(v) && m >= std::ldexp(1.0, info.domain_log2_lo) && m < std::ldexp(1.0, info.domain_log2_hi) &&
         (!info.positive_only || v > 0);
}

// A value with magnitude in [2^lo, 2^hi), exact in the dtype (a significand of its mantissa bits).
double domain_value(Rng& rng, int lo, int hi, bool positive_only, DType dtype) {
  const int bits = dtype == DType::float32 ? 23 : 52;
  const int exponent = lo + static_cast<int>(rng.below(static_cast<std::uint64_t>(hi - lo)));
  const double significand = 1.0 + std::ldexp(static_cast<double>(rng.below(std::uint64_t{1} << bits)), -bits);
  const double v = std::ldexp(significand, exponent);
  return positive_only || rng.below(2) ? v : -v;
}

// A value in the op's random-test domain (spec/ops.def).
double domain_value(Rng& rng, const OpInfo& info, DType dtype) {
  return domain_value(rng, info.domain_log2_lo, info.domain_log2_hi, info.positive_only, dtype);
}

// One of the node's run and graded scalar sets (spec/ops.def); {} without scalars.
Scalars scalars_for(Rng& rng, Op op) {
  const ScalarSetList sets = graded_scalar_sets(op_info(op));
  return sets.sets[rng.below(static_cast<std::uint64_t>(sets.count))];
}

// The graph being generated: its JSON and, to choose in-domain parents, the reference's values.
struct RandomGraph {
  DType dtype = DType::float32;
  std::size_t width = 8;
  Json leaves = Json::array(), nodes = Json::array();
  std::vector<std::string> names;
  std::vector<std::vector<double>> values;
  std::vector<int> children;
  bool coalesced = false;  // a max(a, a) was recorded
};

// A leaf of g.width values from `make` (the rng and the graph's dtype in, a value out).
template <class Make>
void add_leaf(RandomGraph& g, Make&& make) {
  std::vector<double> v;
  Json list = Json::array();
  for (std::size_t e = 0; e < g.width; ++e) {
    v.push_back(make());
    list.push_back(hex_text(v.back()));  // hex strings: exact in either dtype
  }
  g.names.push_back("leaf" + std::to_string(g.leaves.size()));
  g.leaves.push_back({{"name", g.names.back()}, {"values", list}, {"shape", {2, g.width / 2}}});
  g.values.push_back(v);
  g.children.push_back(0);
}

// An in-domain parent for `info`, preferring one nothing uses yet (so most nodes stay reachable);
// a fresh in-domain leaf when there is none.
std::size_t pick_parent(RandomGraph& g, Rng& rng, const OpInfo& info) {
  std::vector<std::size_t> unused, used;
  for (std::size_t id = 0; id < g.values.size(); ++id) {
    if (!std::all_of(g.values[id].begin(), g.values[id].end(), [&](double v) { return in_domain(v, info); })) continue;
    (g.children[id] == 0 ? unused : used).push_back(id);
  }
  if (unused.empty() && used.empty()) {
    add_leaf(g, [&] { return domain_value(rng, info, g.dtype); });
    return g.values.size() - 1;
  }
  const auto& from = !unused.empty() && (used.empty() || rng.below(8) != 0) ? unused : used;
  return from[rng.below(from.size())];
}

// Appends op(parents); returns nothing: the node's name is "n<k>".
void append_node(RandomGraph& g, Op op, std::array<std::size_t, 2> parents, const Scalars& s) {
  const OpInfo& info = op_info(op);
  std::vector<double> y;
  for (std::size_t e = 0; e < g.width; ++e) {
    const ref::Real in[2] = {ref::real(g.values[parents[0]][e]), ref::real(g.values[parents[info.arity - 1]][e])};
    y.push_back(ref::round_to_dtype(ref::forward(op, g.dtype, s, std::span<const ref::Real>(in, info.arity)), g.dtype));
  }
  Json node = {{"name", "n" + std::to_string(g.nodes.size())}, {"op", info.name}, {"parents", Json::array()}};
  for (int k = 0; k < info.arity; ++k) {
    node["parents"].push_back(g.names[parents[static_cast<std::size_t>(k)]]);
    ++g.children[parents[static_cast<std::size_t>(k)]];
  }
  if (info.scalar_count() > 0) node["scalars"][info.scalar_names[0]] = s.s0;
  if (info.scalar_count() > 1) node["scalars"][info.scalar_names[1]] = s.s1;
  g.names.push_back(node["name"]);
  g.nodes.push_back(node);
  g.values.push_back(y);
  g.children.push_back(0);
}

void add_random_node(RandomGraph& g, Rng& rng, Op op) {
  const OpInfo& info = op_info(op);
  std::array<std::size_t, 2> parents{pick_parent(g, rng, info), 0};
  if (info.arity == 2) {
    // A same_parent = once node as op(a, a) at least once (the coalesced-contribution rule), and now
    // and then any op's op(a, a).
    const bool once = info.same_parent == SameParent::once;
    const bool repeat = (once && !g.coalesced) || rng.below(once ? 3 : 10) == 0;
    g.coalesced = g.coalesced || (repeat && once);
    parents[1] = repeat ? parents[0] : pick_parent(g, rng, info);
  }
  append_node(g, op, parents, scalars_for(rng, op));
}

// The nodes nothing uses yet (leaves aside): the sinks that joining makes reachable.
std::vector<std::size_t> dangling_nodes(const RandomGraph& g) {
  std::vector<std::size_t> ids;
  for (std::size_t id = g.leaves.size(); id < g.values.size(); ++id)
    if (g.children[id] == 0) ids.push_back(id);
  return ids;
}

// `node_count` nodes of 8 elements: every op of the table once (shuffled), then random ones, then
// joins (add, sub, max, min: exact on any finite values) of the dangling nodes into one output,
// so that every node is reachable from it.
std::string random_graph_json(DType dtype, std::uint64_t seed, std::size_t node_count = 50) {
  Rng rng{std::mt19937_64(seed)};
  RandomGraph g;
  g.dtype = dtype;
  for (int i = 0; i < 3; ++i) add_leaf(g, [&] { return domain_value(rng, -4, 2, false, dtype); });
  std::vector<Op> ops;
  for (const OpInfo& info : kOps) ops.push_back(info.op);
  for (std::size_t i = ops.size(); i > 1; --i) std::swap(ops[i - 1], ops[rng.below(i)]);
  for (Op op : ops) add_random_node(g, rng, op);
  // Nodes plus the joins still to come. A random node adds one or two to it (two when it leaves a new
  // sink); the last one is a neg of a sink, which adds exactly one, so the count is node_count.
  auto planned = [&] { return g.nodes.size() + dangling_nodes(g).size() - 1; };
  while (planned() + 1 < node_count) add_random_node(g, rng, kOps[rng.below(kOpCount)].op);
  if (planned() < node_count) append_node(g, Op::neg, {dangling_nodes(g).back(), 0}, {});
  for (auto sinks = dangling_nodes(g); sinks.size() > 1; sinks = dangling_nodes(g)) {
    const Op join = std::array<Op, 4>{Op::add, Op::sub, Op::max, Op::min}[rng.below(4)];
    append_node(g, join, {sinks[0], sinks[1]}, {});
  }
  Json seed_values = Json::array();
  for (std::size_t e = 0; e < g.width; ++e) seed_values.push_back(hex_text(domain_value(rng, op_info(Op::tanh), dtype)));
  return Json{{"schema", conform::kGraphSchema}, {"dtype", dtype_name(dtype)}, {"leaves", g.leaves},
              {"nodes", g.nodes}, {"output", g.names.back()},
              {"seed", {{"values", seed_values}, {"shape", {2, g.width / 2}}}}}
      .dump(1);
}

std::string failing_rows(const GraphReport& r) {
  std::string text;
  for (const auto& n : r.nodes)
    if (!n.passes())
      for (const std::string& line : n.violations) text += n.name + ": " + line + "\n";
  return text;
}

std::set<std::int64_t> failing_ids(const GraphReport& r) {
  std::set<std::int64_t> ids;
  for (const auto& n : r.nodes)
    if (!n.passes()) ids.insert(n.id);
  return ids;
}

class GraphCheck : public PerBackend {};

TEST_P(GraphCheck, RandomFiftyNodeGraphOverAllOpsPasses) {
  for (DType dtype : {DType::float32, DType::float64}) {
    const std::string text = random_graph_json(dtype, 20261130);
    for (const auto& [path, dense] : {std::pair{VjpPath::fused, false}, std::pair{VjpPath::staged, true}}) {
      GraphCheckOptions options;
      options.path = path;
      options.dense = dense;
      auto report = check_graph(text, *backend, options);
      ASSERT_TRUE(report.has_value()) << report.error().str();
      EXPECT_TRUE(report->passes()) << dtype_name(dtype) << (dense ? " staged dense" : " fused sparse") << "\n"
                                    << failing_rows(*report);
      // The graph exercises what it claims: 50 nodes, every op, repeated parents, every node's VJP.
      std::set<Op> ops;
      int kernels = 0, passes_once = 0, repeated = 0;
      for (const auto& n : report->nodes) {
        if (n.op) ops.insert(*n.op);
        kernels += n.vjp_run == VjpRun::kernel;
        passes_once += n.vjp_run == VjpRun::pass_once;
      }
      const auto graph = conform::parse_graph(text);
      for (const auto& n : graph->nodes) repeated += n.arity == 2 && n.parents[0] == n.parents[1];
      EXPECT_EQ(std::count_if(report->nodes.begin(), report->nodes.end(), [](const auto& n) { return n.op.has_value(); }), 50);
      EXPECT_EQ(ops.size(), static_cast<std::size_t>(kOpCount));
      EXPECT_EQ(kernels + passes_once, 50) << "every node is reachable from the output";
      EXPECT_GE(passes_once, 1);
      EXPECT_GE(repeated, 2);
    }
  }
}

// examples/graphs/random_50_nodes.json, the example for the command line, was written by the
// generator above (TAPEWISE_REGENERATE_EXAMPLES=1 rewrites it from the current one). It is checked
// to pass on both paths, not to equal the current generator's output: a change of the generator or
// a new node in the table then does not force rewriting the example.
TEST(GraphFile, TheFiftyNodeExamplePasses) {
  const fs::path file = examples_dir() / "random_50_nodes.json";
  if (std::getenv("TAPEWISE_REGENERATE_EXAMPLES")) std::ofstream(file) << random_graph_json(DType::float32, 20261130) << "\n";
  const std::string text = slurp(file);
  for (const auto& [path, dense] : {std::pair{VjpPath::fused, false}, std::pair{VjpPath::staged, true}}) {
    GraphCheckOptions options;
    options.path = path;
    options.dense = dense;
    auto report = check_graph(text, *make_cpu_backend(), options);
    ASSERT_TRUE(report.has_value()) << file << ": " << report.error().str();
    EXPECT_EQ(std::count_if(report->nodes.begin(), report->nodes.end(), [](const auto& n) { return n.op.has_value(); }), 50)
        << file;
    EXPECT_TRUE(report->passes()) << file << "\n" << failing_rows(*report);
  }
}

// ---- bad graphs ----------------------------------------------------------------------------------

const char* kGoodGraph = R"({
  "schema": "tapewise-conform.graph/1", "dtype": "float32",
  "leaves": [{"name": "x", "values": [1, 2, 3]}, {"name": "y", "values": [0.5, "-0x1p-2", "inf"]}],
  "nodes": [{"name": "p", "op": "mul", "parents": ["x", "y"]},
            {"name": "q", "op": "scale", "parents": ["p"], "scalars": {"c": 3}},
            {"name": "r", "op": "sin", "parents": ["x"]}],
  "output": "q", "seed": [1, 1, 1]
})";

Json good() { return Json::parse(kGoodGraph); }

// The message check_graph gives for `doc`, which must be rejected.
std::string rejection(const std::string& text) {
  auto report = check_graph(text, *make_cpu_backend());
  if (report) return "(accepted)";
  EXPECT_EQ(report.error().code, ErrorCode::InvalidArgument);
  return report.error().message;
}
std::string rejection(const Json& doc) { return rejection(doc.dump()); }

void expect_message(const std::string& message, const std::string& text) {
  EXPECT_NE(message.find(text), std::string::npos) << "message: " << message << "\nexpected to contain: " << text;
}
#define EXPECT_REJECTED(doc, text)       \
  do {                                   \
    SCOPED_TRACE(text);                  \
    expect_message(rejection(doc), text); \
  } while (0)

TEST(GraphFile, TheGoodGraphPasses) {
  auto report = check_graph(kGoodGraph, *make_cpu_backend());
  ASSERT_TRUE(report.has_value()) << report.error().str();
  EXPECT_TRUE(report->passes()) << failing_rows(*report);
}

// The same graph as bfloat16 and as float16: its leaves are values of both (3 as a scale scalar, too),
// and each node is graded with spec/bounds.def's 16-bit rows.
TEST(GraphFile, TheGoodGraphPassesInBfloat16AndFloat16) {
  for (const char* dtype : {"bfloat16", "float16"}) {
    Json doc = good();
    doc["dtype"] = dtype;
    auto report = check_graph(doc.dump(), *make_cpu_backend());
    ASSERT_TRUE(report.has_value()) << dtype << ": " << report.error().str();
    EXPECT_TRUE(report->passes()) << dtype << ": " << failing_rows(*report);
  }
}

TEST(GraphFile, CyclesAndForwardReferencesAreRejected) {
  Json self = good();
  self["nodes"][0]["parents"] = {"x", "p"};
  EXPECT_REJECTED(self, "node 'p' (#2, mul): cycle: 'p' is its own parent");
  Json cycle = good();
  cycle["nodes"][0]["parents"] = {"x", "q"};  // p needs q, q needs p
  EXPECT_REJECTED(cycle, "node 'p' (#2, mul): cycle: p -> q -> p");
  Json forward = good();
  forward["nodes"][0]["parents"] = {"x", "r"};  // r does not depend on p: only defined later
  EXPECT_REJECTED(forward, "node 'p' (#2, mul): parent 'r' (#4) is defined after it (a forward reference");
  Json unknown = good();
  unknown["nodes"][1]["parents"] = {"nope"};
  EXPECT_REJECTED(unknown, "node 'q' (#3, scale): parent 'nope' is not a leaf or node of this graph");
}

TEST(GraphFile, OpsArityAndScalarsAreChecked) {
  Json op = good();
  op["nodes"][2]["op"] = "frobnicate";
  EXPECT_REJECTED(op, "node 'r' (#4): unknown op 'frobnicate' (ops: add, sub,");
  Json arity = good();
  arity["nodes"][2]["parents"] = {"x", "y"};
  EXPECT_REJECTED(arity, "node 'r' (#4, sin): wrong arity: sin takes 1 parent, got 2");
  Json missing = good();
  missing["nodes"][1].erase("scalars");
  EXPECT_REJECTED(missing, "node 'q' (#3, scale): missing scalar 'c' (scale takes c)");
  Json extra = good();
  extra["nodes"][0]["scalars"] = {{"c", 1}};
  EXPECT_REJECTED(extra, "node 'p' (#2, mul): unknown scalar 'c' (mul takes no scalars)");
  Json clamp = good();
  clamp["nodes"][2] = {{"name", "r"}, {"op", "clamp"}, {"parents", {"x"}}, {"scalars", {{"lo", 0}, {"eps", 1}}}};
  EXPECT_REJECTED(clamp, "node 'r' (#4, clamp): unknown scalar 'eps' (clamp takes lo, hi)");
  clamp["nodes"][2]["scalars"] = {{"lo", 0}};
  EXPECT_REJECTED(clamp, "node 'r' (#4, clamp): missing scalar 'hi' (clamp takes lo, hi)");
}

TEST(GraphFile, NonFiniteScalarsAreRejectedWhereTheOpNeedsFiniteOnes) {
  Json c = good();
  c["nodes"][1]["scalars"]["c"] = "inf";
  EXPECT_REJECTED(c, "node 'q' (#3, scale): scalar 'c' rounds to inf in float32; scale needs a finite c");
  c["nodes"][1]["scalars"]["c"] = 1e300;  // finite as a double, inf once rounded to float32
  EXPECT_REJECTED(c, "scalar 'c' rounds to inf in float32");
  c["nodes"][1]["scalars"]["c"] = "nan";
  EXPECT_REJECTED(c, "node 'q' (#3, scale): scalar 'c' is NaN");
  c["nodes"][1]["scalars"]["c"] = "three";
  EXPECT_REJECTED(c, "node 'q' (#3, scale): scalar 'c' ('three') is not a number");
  Json eps = good();
  eps["nodes"][2] = {{"name", "r"}, {"op", "safeLog"}, {"parents", {"x"}}, {"scalars", {{"eps", 1e-50}}}};
  EXPECT_REJECTED(eps, "node 'r' (#4, safeLog): scalar 'eps' ");
  EXPECT_REJECTED(eps, "rounds to 0 in float32; safeLog needs eps to round to a positive value");
  eps["nodes"][2]["scalars"]["eps"] = -0.5;
  EXPECT_REJECTED(eps, "scalar 'eps' '-0.5' rounds to -0.5 in float32");
  // A one-sided clamp is a meaningful graph: infinite bounds are accepted.
  Json clamp = good();
  clamp["nodes"][2] = {{"name", "r"}, {"op", "clamp"}, {"parents", {"x"}}, {"scalars", {{"lo", 0}, {"hi", "inf"}}}};
  EXPECT_EQ(rejection(clamp), "(accepted)");
}

TEST(GraphFile, ShapesValuesAndSeedsAreChecked) {
  Json shapes = good();
  shapes["leaves"][1]["values"] = {1, 2, 3, 4};
  shapes["leaves"][1]["shape"] = {2, 2};
  EXPECT_REJECTED(shapes, "node 'p' (#2, mul): shape mismatch: parents 'x' [3] and 'y' [2, 2] differ");
  Json count = good();
  count["leaves"][0]["shape"] = {2, 2};
  EXPECT_REJECTED(count, "leaf 'x' (#0): 3 values for shape [2, 2] (4 elements)");
  Json dim = good();
  dim["leaves"][0]["shape"] = {-3};
  EXPECT_REJECTED(dim, "leaf 'x' (#0): shape dim '-3' is not a non-negative integer");
  Json seed = good();
  seed["seed"] = {1, 1};
  EXPECT_REJECTED(seed, "seed shape mismatch: 2 seed values, output 'q' has shape [3] (3 elements)");
  seed["seed"] = {{"values", {1, 1, 1}}, {"shape", {3, 1}}};
  EXPECT_REJECTED(seed, "seed shape mismatch: seed shape [3, 1], output 'q' has shape [3]");
  Json number = good();
  number["leaves"][1]["values"][1] = "0x1.8q-1";
  EXPECT_REJECTED(number, "leaf 'y' (#1): value 1 ('0x1.8q-1') is not a number");
  number["leaves"][1]["values"][1] = true;
  EXPECT_REJECTED(number, "leaf 'y' (#1): value 1 ('true') is not a number");
  number["leaves"][1]["values"][1] = " 1";
  EXPECT_REJECTED(number, "is not a number");
}

TEST(GraphFile, NamesOutputDtypeAndTheDocumentAreChecked) {
  Json dup = good();
  dup["nodes"][2]["name"] = "x";
  EXPECT_REJECTED(dup, "node #4: duplicate name 'x' (also #0)");
  Json name = good();
  name["nodes"][2]["name"] = "r 1";
  EXPECT_REJECTED(name, "node #4: name 'r 1' must be 1 to 64 characters");
  Json empty = good();
  empty["leaves"] = Json::array();
  EXPECT_REJECTED(empty, "empty graph: 'leaves' is empty");
  empty = good();
  empty["nodes"] = Json::array();
  EXPECT_REJECTED(empty, "empty graph: 'nodes' is empty");
  Json out = good();
  out["output"] = "s";
  EXPECT_REJECTED(out, "output 's' is not a leaf or node of this graph");
  out["output"] = 7;
  EXPECT_REJECTED(out, "'output' must be the name of a leaf or node");
  Json dtype = good();
  dtype["dtype"] = "float8";
  EXPECT_REJECTED(dtype, "dtype 'float8' is not float32, float64, bfloat16 or float16");
  Json schema = good();
  schema["schema"] = "tapewise-conform.graph/2";
  EXPECT_REJECTED(schema, "schema 'tapewise-conform.graph/2' is not \"tapewise-conform.graph/1\"");
  Json key = good();
  key["nodes"][0]["parent"] = {"x", "y"};
  EXPECT_REJECTED(key, "node 'p' (#2): unknown key 'parent' (allowed: name, op, parents, scalars)");
  expect_message(rejection(std::string(R"({"schema": "tapewise-conform.graph/1", "dtype": "float32", "dtype": "float64"})")),
                 "duplicate key 'dtype'");
  expect_message(rejection(std::string("{\"schema\": ")), "not valid JSON");
}

TEST(GraphFile, ValuesAreRoundedOnceFromTheirText) {
  // 1 + 2^-24 + 2^-56: above the float32 midpoint 1 + 2^-24, so it rounds up to 1 + 2^-23; through
  // double it would first become the midpoint 1 + 2^-24 (2^-56 is below half a double ulp), then 1.
  Json doc = good();
  doc["leaves"][0]["values"][0] = "0x1.00000100000001p+0";
  auto graph = conform::parse_graph(doc.dump());
  ASSERT_TRUE(graph.has_value()) << graph.error().str();
  EXPECT_EQ(graph->nodes[0].values[0], 1.0 + 0x1p-23);
  // "-0" is negative zero, as a JSON number and as a string.
  const std::string text = std::string(kGoodGraph).replace(std::string(kGoodGraph).find("[1, 2, 3]"), 9, "[-0, \"-0\", -0.0]");
  graph = conform::parse_graph(text);
  ASSERT_TRUE(graph.has_value()) << graph.error().str();
  for (double v : graph->nodes[0].values) EXPECT_TRUE(v == 0 && std::signbit(v));
}

// ---- planted faults are caught at the node that made them ------------------------------------------

// The random graph's first node (in backward order) whose VJP ran as a kernel, with a binary op.
std::int64_t kernel_node(const GraphReport& r) {
  for (auto it = r.nodes.rbegin(); it != r.nodes.rend(); ++it)
    if (it->vjp_run == VjpRun::kernel && op_info(*it->op).arity == 2) return it->id;
  return -1;
}

// Far outside any bound (1% off; a zero becomes 1), whatever the node.
void off_by_a_percent(double& v) { v = v == 0 ? 1.0 : v * 1.01; }

TEST_P(GraphCheck, APlantedWrongGradientIsCaughtAtItsNode) {
  const std::string text = random_graph_json(DType::float64, 7);
  auto clean = check_graph(text, *backend);
  ASSERT_TRUE(clean.has_value()) << clean.error().str();
  ASSERT_TRUE(clean->passes()) << failing_rows(*clean);
  const std::int64_t target = kernel_node(*clean);
  ASSERT_GE(target, 0);

  // A slot one ulp off, as if the tape had accumulated it wrongly: that node's slot check fails
  // (and its VJP, graded at the wrong g); nothing else.
  GraphCheckOptions slot_fault;
  slot_fault.tamper = [&](Production& p) {
    double& v = (*p.slots[static_cast<std::size_t>(target)])[3];
    v = std::nextafter(v, INFINITY);
  };
  auto caught = check_graph(text, *backend, slot_fault);
  ASSERT_TRUE(caught.has_value());
  EXPECT_EQ(failing_ids(*caught), std::set<std::int64_t>{target});
  EXPECT_EQ(caught->nodes[static_cast<std::size_t>(target)].slot_mismatches, 1);

  // A contribution 1% off (the node's VJP is wrong): its VJP check fails.
  GraphCheckOptions vjp_fault;
  vjp_fault.tamper = [&](Production& p) { off_by_a_percent(p.contributions[static_cast<std::size_t>(target)][0][0]); };
  caught = check_graph(text, *backend, vjp_fault);
  ASSERT_TRUE(caught.has_value());
  EXPECT_GT(caught->nodes[static_cast<std::size_t>(target)].vjp->violations, 0);

  // A value 1% off (the node's forward is wrong): its forward check fails.
  GraphCheckOptions value_fault;
  value_fault.tamper = [&](Production& p) { off_by_a_percent(p.values[static_cast<std::size_t>(target)][0]); };
  caught = check_graph(text, *backend, value_fault);
  ASSERT_TRUE(caught.has_value());
  EXPECT_GT(caught->nodes[static_cast<std::size_t>(target)].forward->violations, 0);

  // A leaf's gradient with its sign flipped (what a wrong seed would give): that leaf fails.
  std::int64_t leaf = 0;
  while (!clean->production.slots[static_cast<std::size_t>(leaf)]) ++leaf;
  ASSERT_FALSE(clean->nodes[static_cast<std::size_t>(leaf)].op.has_value());
  GraphCheckOptions leaf_fault;
  leaf_fault.tamper = [&](Production& p) {
    for (double& v : *p.slots[static_cast<std::size_t>(leaf)]) v = -v;
  };
  caught = check_graph(text, *backend, leaf_fault);
  ASSERT_TRUE(caught.has_value());
  EXPECT_EQ(failing_ids(*caught), std::set<std::int64_t>{leaf});
}

// ---- spec/conventions.md, "Tensions between nodes' conventions" -------------------------------------

// One row of the section's tables: `file.json` | `slot` | values.
struct StatedValues {
  std::string file, slot, values;
};

std::string strip(std::string s) {
  const auto b = s.find_first_not_of(" `");
  const auto e = s.find_last_not_of(" `");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<StatedValues> stated_values() {
  std::istringstream doc(slurp(source_root() / "spec" / "conventions.md"));
  std::vector<StatedValues> rows;
  bool in_section = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line.find("Tensions between nodes' conventions") != std::string::npos;
    if (!in_section || line.rfind("| `", 0) != 0 || line.find(".json`") == std::string::npos) continue;
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
    if (cells.size() >= 3) rows.push_back({strip(cells[0]), strip(cells[1]), strip(cells[2])});
  }
  return rows;
}

// "dNAME": NAME's gradient slot; "NAME": its value.
std::vector<double> slot_values(const GraphReport& r, const std::string& slot) {
  if (auto id = r.id_of(slot)) return r.production.values[static_cast<std::size_t>(*id)];
  if (auto id = r.id_of(slot.substr(1)); id && slot[0] == 'd') {
    const auto& s = r.production.slots[static_cast<std::size_t>(*id)];
    return s ? *s : std::vector<double>{};
  }
  ADD_FAILURE() << "no value or gradient named " << slot;
  return {};
}

// A stated element: a C literal (exact bits; "nan" any NaN) or "*" (a libm result: not pinned).
void expect_element(const std::string& stated, double got, DType dtype, const std::string& where) {
  if (stated == "*") return;
  const auto want = conform::read_literal(stated[0] == '+' ? stated.substr(1) : stated, dtype);
  ASSERT_TRUE(want.has_value()) << where << ": '" << stated << "' is not a number";
  EXPECT_TRUE(conform::identical(got, *want, dtype)) << where << ": the doc says " << stated << ", the tape gives " << hex_text(got);
}

TEST_P(GraphCheck, TheTensionsSectionStatesWhatTheTapeGives) {
  const auto rows = stated_values();
  ASSERT_GE(rows.size(), 20u) << "the Tensions section's tables were not found in spec/conventions.md";
  std::map<std::string, GraphReport> reports;
  for (const StatedValues& row : rows) {
    if (!reports.count(row.file)) {
      auto report = check_graph(slurp(examples_dir() / row.file), *backend);
      ASSERT_TRUE(report.has_value()) << row.file << ": " << report.error().str();
      EXPECT_TRUE(report->passes()) << row.file << "\n" << failing_rows(*report);
      reports.emplace(row.file, std::move(*report));
    }
    const GraphReport& r = reports.at(row.file);
    const std::string where = row.file + " " + row.slot;
    const std::vector<double> got = slot_values(r, row.slot);
    if (row.values.rfind("same bits as", 0) == 0) {
      const std::vector<double> other = slot_values(r, strip(row.values.substr(12)));
      ASSERT_EQ(got.size(), other.size()) << where;
      for (std::size_t e = 0; e < got.size(); ++e)
        EXPECT_TRUE(conform::identical(got[e], other[e], r.dtype)) << where << " element " << e;
      continue;
    }
    std::vector<std::string> stated;
    std::istringstream list(row.values);
    for (std::string v; std::getline(list, v, ',');) stated.push_back(strip(v));
    ASSERT_EQ(stated.size(), got.size()) << where << ": the doc gives " << stated.size() << " values";
    for (std::size_t e = 0; e < got.size(); ++e) expect_element(stated[e], got[e], r.dtype, where + " element " + std::to_string(e));
  }
}

TW_INSTANTIATE_PER_BACKEND(GraphCheck);

// ---- the command ---------------------------------------------------------------------------------

#ifdef TAPEWISE_CONFORM_BIN

struct Ran {
  int status = -1;
  std::string out, err;
};

Ran conform_graph(const fs::path& file, const std::string& extra = "") {
  // Named by process: ctest runs the tests of this binary in parallel processes.
  const std::string stem = "tapewise_graph_test_" + std::to_string(::getpid());
  const fs::path out = fs::temp_directory_path() / (stem + ".out");
  const fs::path err = fs::temp_directory_path() / (stem + ".err");
  const std::string command = "timeout 300 '" + conform_binary() + "' graph '" + file.string() +
                              "' --backend cpu " + extra + " >'" + out.string() + "' 2>'" + err.string() + "' </dev/null";
  const int raw = std::system(command.c_str());
  Ran r{WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(out), slurp(err)};
  fs::remove(out);
  fs::remove(err);
  return r;
}

TEST(GraphCommand, TheGoodExamplePassesAndWritesItsReport) {
  const fs::path json = fs::temp_directory_path() / ("tapewise_graph_test_" + std::to_string(::getpid()) + ".json");
  const Ran r = conform_graph(examples_dir() / "composite.json", "--json '" + json.string() + "'");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("slot  node"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("leaves and nodes pass"), std::string::npos) << r.out;
  const Json report = Json::parse(slurp(json));
  fs::remove(json);
  EXPECT_EQ(report["schema"], conform::kGraphReportSchema);
  EXPECT_EQ(report["summary"]["passes"], true);
  EXPECT_EQ(report["nodes"].size(), 15u);
}

TEST(GraphCommand, TheBadExampleIsRejectedWithItsReason) {
  const Ran r = conform_graph(examples_dir() / "bad_forward_reference.json");
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("node 'h' (#1, mul): parent 'later' (#2) is defined after it"), std::string::npos) << r.err;
}

TEST(GraphCommand, EveryExampleGraphGivesItsExitStatus) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(examples_dir())) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const bool bad = entry.path().filename().string().rfind("bad_", 0) == 0;
    const Ran r = conform_graph(entry.path(), "--path staged --dense");
    EXPECT_EQ(r.status, bad ? 2 : 0) << entry.path() << "\n" << r.out << r.err;
  }
  EXPECT_GE(files, 10);
}

#endif  // TAPEWISE_CONFORM_BIN

}  // namespace
}  // namespace tapewise::testing

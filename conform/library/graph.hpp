// conform/library/graph.hpp — `tapewise-conform graph`: a composite function (a DAG of tape nodes, read
// from JSON) recorded on a Tape, run backward, and checked node by node against the MPFR reference.
//
// Why node by node. spec/bounds.def bounds one node at a time; over a graph the errors compose
// through each node's conditioning, so no per-slot tolerance for the whole graph follows from it.
// Each node is therefore graded *locally*, with the production's own inputs:
//  - forward: the tape's value of the node against the reference's op at the tape's own parent
//    values, within the node's forward bound;
//  - VJP: the node's contributions — its VJP re-run alone on the backend (same path) at the tape's own
//    parent values and the tape's own upstream slot g — against the reference's VJP at those same
//    values, within the node's VJP bound (`max(a, a)`/`min(a, a)` pass g on once: nothing to grade);
//  - slot: every gradient slot the tape returned must equal, bit for bit (NaN matches NaN), the
//    tape's accumulation rules (spec/conventions.md §2: descending ids, parent order, first
//    contribution kept or added to +0, later ones `existing + c`) replayed over those contributions;
//    and exactly the slots those rules create must be present.
// Together these say: the tape computed this graph as a chain of steps each within its own spec.
// A fault is reported at the node that made it. The distance of each slot and value from the
// reference's own DAG evaluation (reference/dag.hpp: every step correctly rounded from the exact
// leaves) is reported as information (end-to-end ULPs): it depends on the graph's conditioning.
//
// Signs of zeros: the slot check is bitwise; the forward and VJP checks use reference/measure.hpp,
// where a correctly rounded zero of either sign conforms (spec/special_points pins the signs).
//
// ---- The graph file: schema "tapewise-conform.graph/1" -------------------------------------------
// {
//   "schema": "tapewise-conform.graph/1",          required, exactly this
//   "description": "text",                          optional, ignored
//   "dtype": "float32" | "float64" | "bfloat16" | "float16",  required, the dtype of every leaf, node and seed
//   "leaves": [                                     required, at least one
//     {"name": "x", "values": [NUMBER, ...],        values: C order, count = the shape's element count
//      "shape": [2, 3],                             optional; default [len(values)]
//      "requires_grad": true}                       optional; default true
//   ],
//   "nodes": [                                      required, at least one, in recording order
//     {"name": "y", "op": "clamp",                  op: a name of spec/ops.def
//      "parents": ["x"],                            names of EARLIER leaves or nodes: the op's arity
//      "scalars": {"lo": 0, "hi": "inf"}}           exactly the op's scalar names (c, lo, hi, eps);
//   ],                                              omitted or {} when it takes none
//   "output": "y",                                  the name of the leaf or node to differentiate
//   "seed": [NUMBER, ...]                           the output's cotangent: its element count, or
//         | {"values": [NUMBER, ...], "shape": [..]}  with a shape, which must be the output's
// }
// Names: 1 to 64 characters of A-Z a-z 0-9 _ . -, unique over leaves and nodes. References are by
// name only; a node's id on the tape (and in the report) is its position: leaves first, then nodes.
// NUMBER: a JSON number, or a string holding a C decimal or hex-float literal ("0x1.8p-1", "-0",
// "1e-3"), "inf", "-inf" or "nan". A leaf or seed value is rounded ONCE, to nearest even, from its
// text to the dtype (strtof/strtod: float32 values are never rounded through double). A scalar is a
// host double (strtod), rounded once to the dtype by the node as the spec says: R(v).
// Scalars must be numbers, never NaN. Where the op needs a finite one, R(v) must be finite:
// scale's c; safeLog's eps must also round to a positive value (TorchLean's contract: outside it
// the spec promises no accuracy, so there is nothing to check). clamp's lo and hi may be ±inf (a
// one-sided clamp), and lo > hi is allowed (the spec defines it).
// Keys not listed here are rejected, as are duplicate keys: a misspelt key must not pass silently.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <tapewise/tapewise.hpp>

#include "bounds.hpp"
#include "exec.hpp"

namespace tapewise::conform {

inline constexpr const char* kGraphSchema = "tapewise-conform.graph/1";
inline constexpr const char* kGraphReportSchema = "tapewise-conform.graph-report/1";
// The largest graph file the command reads (a 2^20-element graph is a few MB of JSON).
inline constexpr std::uint64_t kMaxGraphFileBytes = std::uint64_t{64} << 20;
// What the checker takes, checked while the file is read, before any tape is built: its memory
// grows with the JSON values held while reading (tens of bytes each), with the leaves and nodes
// (~1.4 KB each on the tape and in the report) and with their elements (~160 B each, summed over
// every leaf and node: the tape's values, slots, contributions and the MPFR reference's values).
// A file near the 64 MiB cap can hold 1.2 million nodes or 30 million values; at the limits the
// peak measured was 1.1 GB (2^19 nodes of 16 elements), and 1.0 GB for 64 MiB of nodes refused.
inline constexpr std::int64_t kMaxGraphJsonValues = std::int64_t{1} << 23;
inline constexpr std::int64_t kMaxGraphEntries = std::int64_t{1} << 19;   // leaves and nodes
inline constexpr std::int64_t kMaxGraphElements = std::int64_t{1} << 23;  // summed over them

// One leaf or node of a validated graph; its index in Graph::nodes is its tape id.
struct GraphNode {
  std::string name;
  std::optional<Op> op;  // nullopt for a leaf
  int arity = 0;
  std::array<std::int64_t, 2> parents{-1, -1};
  Scalars scalars;
  bool requires_grad = true;  // leaves: as given; nodes: any parent's (the tape's rule)
  Shape shape;
  std::vector<double> values;  // leaves only: the values, already rounded to the dtype
};

struct Graph {
  DType dtype = DType::float32;
  std::vector<GraphNode> nodes;  // leaves first, then nodes in the file's order
  std::int64_t output = -1;
  std::vector<double> seed;  // rounded to the dtype; the output's shape
};

// Parses and validates a graph file. Errors (ErrorCode::InvalidArgument) say what is wrong and
// name the leaf or node, e.g. "node 'h' (#4, mul): parents 'a' [3] and 'b' [2] differ in shape".
[[nodiscard]] Result<Graph> parse_graph(const std::string& json_text);

// What the production returned, widened to double: the values and gradient slots of the tape, and
// each node's contributions (its VJP re-run alone at the tape's own inputs and slot).
struct Production {
  std::vector<std::vector<double>> values;                     // per node
  std::vector<std::optional<std::vector<double>>> slots;       // per node; nullopt: no slot
  std::vector<std::vector<std::vector<double>>> contributions; // per node, per parent; empty if not run
  MathMode math = MathMode::aten;  // the producing backend's: which rows of spec/bounds.def grade it
};

struct GraphCheckOptions {
  VjpPath path = VjpPath::fused;
  bool dense = false;  // Tape::backward_dense instead of Tape::backward
  // Test hook: sees (and may change) the production's results before they are graded, so that a
  // test can plant a wrong value, slot or contribution and watch the check catch it.
  std::function<void(Production&)> tamper;
};

// One kind of local check over a node's elements (the forward, or the contributions it sent).
struct LocalCheck {
  reference::Bound bound;
  std::int64_t values = 0;
  std::int64_t violations = 0;
  double max_ulps = 0.0;   // largest |produced - exact| / ulp(R(exact)), of the values not accepted below
  double max_ratio = 0.0;  // largest |produced - exact| / allowed; <= 1 passes
  // Values above the bound outside the node's domain for a cause spec/bounds.def accepts there (an
  // intermediate of the staging overflows or underflows; grade.hpp, accepted_above_bound): conformant,
  // as `sweep` grades them, and left out of max_ulps and max_ratio.
  std::int64_t accepted_outside_domain = 0;
};

// How a node's VJP took part in the backward pass.
enum class VjpRun {
  none,       // a leaf, not reached from the output, or not requiring grad
  kernel,     // ran: its contributions are graded
  pass_once,  // max(a, a) / min(a, a): g passed on once, as is (checked by the slot check)
  no_slot,    // should have run, but the production gave the node no slot to run it with
};

struct NodeCheck {
  std::int64_t id = 0;
  std::string name;
  std::optional<Op> op;
  Shape shape;
  std::optional<LocalCheck> forward;  // nodes only
  VjpRun vjp_run = VjpRun::none;
  std::optional<LocalCheck> vjp;      // when vjp_run == kernel
  bool slot_expected = false;         // the tape's rules give this node a gradient slot
  bool slot_present = false;          // the production returned one
  bool slot_replayable = true;        // false when a child's contributions are unknown
  std::int64_t slot_mismatches = 0;   // elements whose bits differ from the replayed accumulation
  double value_end_to_end_ulps = 0.0;                 // against the reference DAG (information)
  std::optional<double> gradient_end_to_end_ulps;     // idem, when both have a slot
  std::vector<std::string> violations;                // the first few, one line each

  bool slot_ok() const { return slot_expected == slot_present && slot_replayable && slot_mismatches == 0; }
  bool passes() const;
};

struct GraphReport {
  DType dtype = DType::float32;
  VjpPath path = VjpPath::fused;
  bool dense = false;
  std::string backend;  // Backend::describe()
  std::int64_t output = -1;
  std::vector<NodeCheck> nodes;  // one per leaf and node, by id
  Production production;         // the tape's own results (tests read exact values here)

  int nodes_passing() const;
  bool passes() const { return nodes_passing() == static_cast<int>(nodes.size()); }
  std::optional<std::int64_t> id_of(const std::string& name) const;
};

// Records the graph on a Tape over `backend`, runs backward and grades it (see the top of this
// file). A bad graph, or a backend failure, is an Error; a violation is a report that does not pass.
[[nodiscard]] Result<GraphReport> check_graph(const std::string& json_text, Backend& backend,
                                              const GraphCheckOptions& options = {});
[[nodiscard]] Result<GraphReport> check_graph(const Graph& graph, Backend& backend,
                                              const GraphCheckOptions& options = {});

// `tapewise-conform graph FILE.json [--backend ..] [--path fused|staged] [--dense] [--json OUT]`:
// prints the table (slot, node, op, local errors with bounds, slot check, verdict) and the
// end-to-end ULPs of each leaf's gradient. Exit 0 when every check passes, 1 on a violation, 2 on
// a bad graph or usage error.
struct GraphCommandOptions {
  std::string file;
  BackendChoice backend = BackendChoice::automatic;
  std::optional<MathMode> math;  // --math; none: the backend's default (CUDA aten, CPU exact)
  VjpPath path = VjpPath::fused;
  bool dense = false;
  std::string json_path;  // empty: no JSON report
};
int graph_command(const GraphCommandOptions& options);

// Text of values in reports and messages: exact (C's %a, "inf", "-inf", "nan"), and in a few digits.
std::string hex(double v);
std::string number(double v);
// `text` read whole as a C literal (decimal, hex-float, inf, nan) rounded once to `dtype`.
std::optional<double> read_literal(const std::string& text, DType dtype);
// Equal bits in `dtype` (+0 and -0 differ), any NaN matching any NaN.
bool identical(double a, double b, DType dtype);

}  // namespace tapewise::conform

// reference/dag.hpp — the reference's own evaluation of a DAG of nodes, forward and reverse mode,
// following the tape's rules (visit order, reachability, accumulation order, dense/sparse slots,
// the repeated-reference rule of max/min). Each node's step is the correctly rounded exact op.
// It is not the tape: it shares no code with it, only the rules written in spec/conventions.md.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tapewise/core.hpp"
#include "tapewise/op.hpp"

namespace tapewise::reference {

struct DagNode {
  std::optional<Op> op;  // nullopt for a leaf
  Scalars s;
  std::array<std::int64_t, 2> parents{-1, -1};
  int arity = 0;
  bool requires_grad = true;
};

using NodeValues = std::vector<std::vector<double>>;  // per node, its elements (dtype values)

// Each node's value: the correctly rounded exact op of its (already rounded) parent values.
// leaf_values is indexed by node id; entries of non-leaf nodes are ignored (may be empty).
NodeValues dag_forward(std::span<const DagNode> nodes, std::span<const std::vector<double>> leaf_values,
                       DType dtype);

// Reverse mode from `out` with cotangent `seed`, at the given node values (any dtype values, e.g.
// the production's own). Returns one slot per node:
//  - ids are visited descending; only nodes reachable from `out` that require grad run their VJP;
//  - each contribution is the correctly rounded exact VJP at the node's parent values and its slot;
//  - contributions go in parent order (a, b) and accumulate as existing + g, rounded in the dtype;
//    a parent that does not require grad drops its contribution;
//  - sparse: a slot's first contribution is kept bit-exact; dense: every requires-grad slot starts
//    at +0 and the first contribution is +0 + g (so -0 becomes +0), unreached slots stay +0;
//  - the slot of `out` holds the seed as given (in both modes);
//  - max(a, a) / min(a, a) contribute g once (a copy); any other op with the same parent twice
//    contributes twice.
std::vector<std::optional<std::vector<double>>> dag_backward(std::span<const DagNode> nodes,
                                                             const NodeValues& values,
                                                             std::int64_t out,
                                                             std::span<const double> seed,
                                                             DType dtype, bool dense);

}  // namespace tapewise::reference

// reference/dag.cpp — forward and reverse evaluation of a node DAG with the reference's ops.
#include "dag.hpp"

#include <stdexcept>

#include "reference.hpp"

namespace tapewise::reference {

namespace {

// IEEE addition in the dtype is correctly rounded, which is what the tape's accumulation does; the
// 16-bit formats add in float32 and round once (ATen's), which is also correctly rounded.
double add_in_dtype(double existing, double g, DType d) {
  switch (d) {
    case DType::float32: return static_cast<float>(existing) + static_cast<float>(g);
    case DType::float64: return existing + g;
    case DType::bfloat16:
    case DType::float16: return round_to(d, static_cast<double>(static_cast<float>(existing) + static_cast<float>(g)));
  }
  return existing + g;
}

std::vector<double> add_in_dtype(const std::vector<double>& existing, const std::vector<double>& g,
                                 DType d) {
  std::vector<double> sum(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) sum[i] = add_in_dtype(existing[i], g[i], d);
  return sum;
}

void check_parents(std::span<const DagNode> nodes, std::int64_t id) {
  const DagNode& n = nodes[static_cast<std::size_t>(id)];
  for (int k = 0; k < n.arity; ++k)
    if (n.parents[k] < 0 || n.parents[k] >= id)
      throw std::invalid_argument("reference dag: node " + std::to_string(id) +
                                  " has a parent that is not an earlier node");
}

}  // namespace

NodeValues dag_forward(std::span<const DagNode> nodes, std::span<const std::vector<double>> leaf_values,
                       DType d) {
  NodeValues values(nodes.size());
  for (std::size_t id = 0; id < nodes.size(); ++id) {
    const DagNode& n = nodes[id];
    if (!n.op) {
      for (double v : leaf_values[id]) values[id].push_back(round_to(d, v));
      continue;
    }
    check_parents(nodes, static_cast<std::int64_t>(id));
    const std::vector<double>& a = values[static_cast<std::size_t>(n.parents[0])];
    const std::vector<double>* b = n.arity == 2 ? &values[static_cast<std::size_t>(n.parents[1])] : nullptr;
    values[id].resize(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      const Real in[2] = {real(a[i]), real(b ? (*b)[i] : 0.0)};
      values[id][i] = round_to_dtype(forward(*n.op, d, n.s, std::span<const Real>(in, n.arity)), d);
    }
  }
  return values;
}

std::vector<std::optional<std::vector<double>>> dag_backward(std::span<const DagNode> nodes,
                                                             const NodeValues& values,
                                                             std::int64_t out,
                                                             std::span<const double> seed,
                                                             DType d, bool dense) {
  const std::size_t n = nodes.size();
  if (out < 0 || static_cast<std::size_t>(out) >= n)
    throw std::invalid_argument("reference dag: invalid output id");
  std::vector<std::optional<std::vector<double>>> slots(n);
  std::vector<bool> reached(n, false);
  if (dense)
    for (std::size_t id = 0; id < n; ++id)
      if (nodes[id].requires_grad) slots[id] = std::vector<double>(seed.size(), +0.0);
  slots[static_cast<std::size_t>(out)] = std::vector<double>(seed.begin(), seed.end());
  reached[static_cast<std::size_t>(out)] = true;

  auto contribute = [&](std::int64_t parent, std::vector<double> g) {
    const auto p = static_cast<std::size_t>(parent);
    if (!nodes[p].requires_grad) return;
    reached[p] = true;
    if (slots[p]) slots[p] = add_in_dtype(*slots[p], g, d);  // dense slots start at +0
    else slots[p] = std::move(g);                            // sparse: first one kept as is
  };

  for (std::int64_t id = static_cast<std::int64_t>(n) - 1; id >= 0; --id) {
    const DagNode& node = nodes[static_cast<std::size_t>(id)];
    if (!reached[static_cast<std::size_t>(id)] || !node.requires_grad || !node.op) continue;
    check_parents(nodes, id);
    const std::vector<double>& g = *slots[static_cast<std::size_t>(id)];
    const bool repeated = node.arity == 2 && node.parents[0] == node.parents[1];
    if (repeated && op_info(*node.op).same_parent == SameParent::once) {
      contribute(node.parents[0], g);  // the upstream value once, before graph accumulation
      continue;
    }
    const std::vector<double>& a = values[static_cast<std::size_t>(node.parents[0])];
    const std::vector<double>* b =
        node.arity == 2 ? &values[static_cast<std::size_t>(node.parents[1])] : nullptr;
    std::array<std::vector<double>, 2> grads{std::vector<double>(g.size()),
                                             std::vector<double>(g.size())};
    for (std::size_t i = 0; i < g.size(); ++i) {
      const Real in[2] = {real(a[i]), real(b ? (*b)[i] : 0.0)};
      const auto dx = vjp(*node.op, d, node.s, std::span<const Real>(in, node.arity), real(g[i]));
      for (int k = 0; k < node.arity; ++k) grads[k][i] = round_to_dtype(dx[k], d);
    }
    for (int k = 0; k < node.arity; ++k) contribute(node.parents[k], std::move(grads[k]));
  }
  return slots;
}

}  // namespace tapewise::reference

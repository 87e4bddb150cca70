// proptest/dag_test.cpp — gradients of random DAGs against the reference's own evaluation
// (reference/dag.hpp). DAGs of the five linear nodes round once per step on both sides, so values
// and gradients must agree bit for bit. DAGs of every node are checked step by step: every
// gradient slot the tape returns must equal the reference's accumulation of the contributions of
// its children, each within that child's VJP bound, computed from the tape's own values and slots.
#include <dag.hpp>
#include <measure.hpp>

#include "test_support.hpp"

namespace tapewise::testing {
namespace {

namespace ref = tapewise::reference;

struct RandomDag {
  std::vector<ref::DagNode> nodes;
  std::vector<std::vector<double>> leaf_values;
};

// A DAG of `leaves` leaves and then random nodes over earlier ids (repeated parents included).
template <class T>
RandomDag random_dag(const std::vector<Op>& ops, std::size_t width, int lo, int hi) {
  RandomDag d;
  const int leaves = *rc::gen::inRange(1, 4);
  const int inner = *rc::gen::inRange(1, 12);
  for (int i = 0; i < leaves; ++i) {
    ref::DagNode n;
    n.requires_grad = *rc::gen::weightedElement<bool>({{4, true}, {1, false}});
    d.nodes.push_back(n);
    const auto v = *rc::gen::container<std::vector<T>>(width, in_domain<T>(lo, hi, false));
    d.leaf_values.emplace_back(v.begin(), v.end());
  }
  for (int i = 0; i < inner; ++i) {
    ref::DagNode n;
    n.op = *rc::gen::elementOf(ops);
    n.arity = op_info(*n.op).arity;
    n.s = pick_graded_scalars(*n.op);
    const auto last = static_cast<std::int64_t>(d.nodes.size() - 1);
    for (int k = 0; k < n.arity; ++k) n.parents[static_cast<std::size_t>(k)] = *rc::gen::inRange<std::int64_t>(0, last + 1);
    if (n.arity == 2 && *rc::gen::inRange(0, 5) == 0) n.parents[1] = n.parents[0];
    bool rg = false;
    for (int k = 0; k < n.arity; ++k) rg = rg || d.nodes[static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)])].requires_grad;
    n.requires_grad = rg;
    d.nodes.push_back(n);
    d.leaf_values.emplace_back();
  }
  return d;
}

template <class T>
std::vector<double> widen(const HostArray& h) {
  const auto v = h.to_vector<T>();
  return {v.begin(), v.end()};
}

// Records the DAG on a tape: the DAG's node i is the tape's node at position i (t.id_at(i)).
template <class T>
Tape record(const RandomDag& d, std::shared_ptr<Backend> be) {
  Tape t(std::move(be));
  for (std::size_t i = 0; i < d.nodes.size(); ++i) {
    const ref::DagNode& n = d.nodes[i];
    if (!n.op) {
      const std::vector<T> v(d.leaf_values[i].begin(), d.leaf_values[i].end());
      RC_ASSERT(t.leaf(host(v), n.requires_grad) == t.id_at(i));
    } else {
      const NodeId ids[2] = {t.id_at(static_cast<std::size_t>(n.parents[0])), t.id_at(static_cast<std::size_t>(n.parents[1]))};
      RC_ASSERT(t.apply(*n.op, {ids, static_cast<std::size_t>(n.arity)}, n.s) == t.id_at(i));
    }
  }
  return t;
}

template <class T>
void linear_dag_matches_bit_for_bit(std::shared_ptr<Backend> be, bool dense) {
  const std::size_t width = *rc::gen::inRange<std::size_t>(1, 8);
  const RandomDag d = random_dag<T>({Op::add, Op::sub, Op::mul, Op::neg, Op::scale}, width, -6, 6);
  const DType dtype = dtype_of<T>::value;
  Tape t = record<T>(d, be);
  const auto expected_values = ref::dag_forward(d.nodes, d.leaf_values, dtype);
  for (std::size_t i = 0; i < d.nodes.size(); ++i)
    RC_ASSERT(widen<T>(must(t.value(t.id_at(i)))) == expected_values[i]);
  const auto out = static_cast<NodeId>(d.nodes.size() - 1);
  const auto seed_t = *rc::gen::container<std::vector<T>>(width, any_float<T>());
  const std::vector<double> seed(seed_t.begin(), seed_t.end());
  const auto expected = ref::dag_backward(d.nodes, expected_values, out, seed, dtype, dense);
  for (VjpPath path : {VjpPath::fused, VjpPath::staged}) {
    const NodeId out_id = t.id_at(static_cast<std::size_t>(out));
    auto grads = dense ? t.backward_dense(out_id, host(seed_t), path) : t.backward(out_id, host(seed_t), path);
    RC_ASSERT(grads.has_value());
    for (std::size_t i = 0; i < d.nodes.size(); ++i) {
      RC_ASSERT(grads->has(t.id_at(i)) == expected[i].has_value());
      if (!expected[i]) continue;
      const auto got = widen<T>(must(grads->host(t.id_at(i))));
      for (std::size_t e = 0; e < width; ++e)
        if (!same_bits(static_cast<T>(got[e]), static_cast<T>((*expected[i])[e]))) {
          RC_LOG() << "node " << i << " element " << e << ": tape " << got[e] << ", reference " << (*expected[i])[e];
          RC_FAIL("linear DAG gradient differs from the reference");
        }
    }
  }
}

class Dag : public PerBackend {};

TEST_P(Dag, LinearNodeDagsMatchTheReferenceBitForBit) {
  for (bool dense : {false, true}) {
    EXPECT_TRUE(rc::check("float32", [&] { linear_dag_matches_bit_for_bit<float>(backend, dense); }));
    EXPECT_TRUE(rc::check("float64", [&] { linear_dag_matches_bit_for_bit<double>(backend, dense); }));
  }
}

bool tame(const std::vector<double>& v) {
  for (double x : v)
    if (!std::isfinite(x) || (x != 0 && (std::fabs(x) < 0x1p-40 || std::fabs(x) > 0x1p40))) return false;
  return true;
}

// Every slot = sum, in the tape's order, of the reference VJPs of the node's children taken at the
// tape's values and the children's slots; allowed error = the children's VJP bounds + the rounding
// of each accumulation step (half an ulp of each partial sum).
void all_node_dag_is_consistent_with_reference(std::shared_ptr<Backend> be) {
  using T = float;
  const DType dtype = DType::float32;
  std::vector<Op> all;
  for (const OpInfo& info : kOps) all.push_back(info.op);
  const std::size_t width = *rc::gen::inRange<std::size_t>(1, 6);
  const RandomDag d = random_dag<T>(all, width, -2, 2);
  Tape t = record<T>(d, be);
  const auto out = static_cast<NodeId>(d.nodes.size() - 1);
  const auto seed_t = *rc::gen::container<std::vector<T>>(width, in_domain<T>(-2, 2, false));
  auto grads = t.backward(t.id_at(static_cast<std::size_t>(out)), host(seed_t));
  RC_ASSERT(grads.has_value());
  std::vector<std::vector<double>> values, slots(d.nodes.size());
  for (std::size_t i = 0; i < d.nodes.size(); ++i) {
    values.push_back(widen<T>(must(t.value(t.id_at(i)))));
    RC_PRE(tame(values.back()));
    if (grads->has(t.id_at(i))) {
      slots[i] = widen<T>(must(grads->host(t.id_at(i))));
      RC_PRE(tame(slots[i]));
    }
  }
  for (std::size_t e = 0; e < width; ++e) {
    // exact[i] accumulates the reference's contributions; allowed[i] their bounds.
    std::vector<ref::Real> exact(d.nodes.size(), ref::real(0));
    std::vector<double> allowed(d.nodes.size(), 0.0);
    std::vector<int> count(d.nodes.size(), 0);
    for (auto id = static_cast<std::int64_t>(out); id >= 0; --id) {
      const ref::DagNode& n = d.nodes[static_cast<std::size_t>(id)];
      if (!n.op || !n.requires_grad || slots[static_cast<std::size_t>(id)].empty()) continue;
      const ref::Real g = ref::real(slots[static_cast<std::size_t>(id)][e]);
      ref::Real in[2];
      for (int k = 0; k < n.arity; ++k) in[k] = ref::real(values[static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)])][e]);
      const std::span<const ref::Real> in_span(in, static_cast<std::size_t>(n.arity));
      const bool once = n.arity == 2 && n.parents[0] == n.parents[1] && op_info(*n.op).same_parent == SameParent::once;
      const auto contributions = once ? std::array<ref::Real, 2>{g, ref::real(0)} : ref::vjp(*n.op, dtype, n.s, in_span, g);
      const ref::Bound bound = once ? ref::Bound{} : ref::vjp_bound(*n.op, dtype, math_mode(*be));
      const double w = ref::abs_weight(*n.op, dtype, n.s, in_span, g, true);
      for (int k = 0; k < (once ? 1 : n.arity); ++k) {
        const auto p = static_cast<std::size_t>(n.parents[static_cast<std::size_t>(k)]);
        if (!d.nodes[p].requires_grad) continue;
        const ref::Real& c = contributions[static_cast<std::size_t>(k)];
        const double c_rounded = ref::round_to_dtype(c, dtype);
        allowed[p] += bound.ulp * ref::ulp_of(c_rounded, dtype) + bound.abs * ref::dtype_eps(dtype) * w;
        exact[p] += c;
        if (count[p]++ > 0) allowed[p] += 0.5 * ref::ulp_of(ref::round_to_dtype(exact[p], dtype), dtype) * 2;
      }
    }
    for (std::size_t i = 0; i + 1 < d.nodes.size(); ++i) {
      if (slots[i].empty()) {
        RC_ASSERT(count[i] == 0);
        continue;
      }
      const double got = slots[i][e];
      const ref::Real error = abs(ref::real(got) - exact[i]);
      if (got != ref::round_to_dtype(exact[i], dtype) && error > ref::real(allowed[i])) {
        RC_LOG() << "node " << i << " element " << e << ": tape " << got << ", reference "
                 << ref::round_to_dtype(exact[i], dtype) << ", allowed " << allowed[i];
        RC_FAIL("DAG gradient slot outside the reference's accumulation bound");
      }
    }
  }
}

TEST_P(Dag, AllNodeDagsAgreeWithTheReferenceStepByStep) {
  EXPECT_TRUE(rc::check("float32, all " + std::to_string(kOpCount) + " nodes", [&] { all_node_dag_is_consistent_with_reference(backend); }));
}

TW_INSTANTIATE_PER_BACKEND(Dag);

}  // namespace
}  // namespace tapewise::testing

// proptest/tape_semantics_test.cpp — the tape's reverse-mode rules, exactly: accumulation order,
// the first contribution kept bit-exact (sparse) or added to +0 (dense), repeated parents,
// reachability, ownership of returned gradients, and random command sequences that must either
// append one node or leave the tape untouched. Runs on every backend present.
#include "test_support.hpp"

namespace tapewise::testing {
namespace {

template <class T>
std::vector<T> grad_of(const Gradients& g, NodeId id) {
  auto h = g.host(id);
  EXPECT_TRUE(h) << h.error().str();
  return h ? h->to_vector<T>() : std::vector<T>{};
}

class TapeSemantics : public PerBackend {};

TEST_P(TapeSemantics, RepeatedParents) {
  const float odd_subnormal = 0x1p-149f * 3;  // g * 0.5 + g * 0.5 != g here: exposes the rule
  const std::vector<float> g{1.0f, -3.0f, odd_subnormal, -0.0f};
  Tape t(backend);
  const NodeId x = must(t.leaf(host(std::vector<float>{2.0f, -1.0f, 0.5f, 7.0f})));
  const NodeId sum = must(t.add(x, x));
  const NodeId mx = must(t.max(x, x));
  const NodeId mn = must(t.min(x, x));
  for (VjpPath path : {VjpPath::fused, VjpPath::staged}) {
    const Gradients gs = must(t.backward(sum, host(g), path));
    EXPECT_EQ(grad_of<float>(gs, x), (std::vector<float>{2.0f, -6.0f, odd_subnormal * 2, -0.0f}));
    for (NodeId node : {mx, mn}) {
      const Gradients gm = must(t.backward(node, host(g), path));
      const auto dx = grad_of<float>(gm, x);
      for (std::size_t i = 0; i < g.size(); ++i) EXPECT_EQ(bits_of(dx[i]), bits_of(g[i])) << i;
    }
  }
  // Distinct parents with equal values split the tie: each side gets g * 0.5.
  const NodeId y = must(t.leaf(host(std::vector<float>{2.0f, -1.0f, 0.5f, 7.0f})));
  const NodeId tie = must(t.max(x, y));
  const Gradients gt = must(t.backward(tie, host(g)));
  for (NodeId side : {x, y}) {
    const auto d = grad_of<float>(gt, side);
    for (std::size_t i = 0; i < g.size(); ++i) EXPECT_EQ(bits_of(d[i]), bits_of(g[i] * 0.5f)) << i;
  }
}

// Contributions arrive in descending node id and fold left: slot = (g3 + g2) + g1.
TEST_P(TapeSemantics, AccumulationOrderIsDescendingIdsLeftToRight) {
  Tape t(backend);
  const NodeId x = must(t.leaf(host(std::vector<float>{1.0f})));
  const NodeId n1 = must(t.scale(x, 1.0));
  const NodeId n2 = must(t.scale(x, 0x1p-24));
  const NodeId n3 = must(t.scale(x, 0x1p-24));
  const NodeId s12 = must(t.add(n1, n2));
  const NodeId out = must(t.add(s12, n3));
  const Gradients g = must(t.backward(out, host(std::vector<float>{1.0f})));
  // (2^-24 + 2^-24) + 1 = 1 + 2^-23, whereas (1 + 2^-24) + 2^-24 would round to 1.
  EXPECT_EQ(grad_of<float>(g, x)[0], 1.0f + 0x1p-23f);
}

TEST_P(TapeSemantics, SparseKeepsFirstContributionDenseStartsAtPositiveZero) {
  Tape t(backend);
  const NodeId x = must(t.leaf(host(std::vector<float>{3.0f, -2.0f})));
  const NodeId y = must(t.neg(x));
  const HostArray seed = host(std::vector<float>{0.0f, -0.0f});
  const Gradients sparse = must(t.backward(y, seed));
  const Gradients dense = must(t.backward_dense(y, seed));
  const auto s = grad_of<float>(sparse, x), d = grad_of<float>(dense, x);
  EXPECT_TRUE(std::signbit(s[0]));   // -(+0) kept as is
  EXPECT_FALSE(std::signbit(s[1]));  // -(-0) = +0
  EXPECT_FALSE(std::signbit(d[0]));  // (+0) + (-0) = +0
  EXPECT_FALSE(std::signbit(d[1]));
}

TEST_P(TapeSemantics, OnlyReachableNodesThatRequireGradRunTheirVjp) {
  Tape t(backend);
  const NodeId x = must(t.leaf(host(std::vector<float>{0.0f, 2.0f})));
  const NodeId c = must(t.leaf(host(std::vector<float>{0.0f, 4.0f}), /*requires_grad=*/false));
  const NodeId disconnected = must(t.inv(x));  // VJP at 0 would give -inf / NaN if it ran
  const NodeId constant_branch = must(t.log(c));
  const NodeId out = must(t.mul(x, constant_branch));
  EXPECT_FALSE(must(t.node(constant_branch))->requires_grad);
  EXPECT_TRUE(must(t.node(out))->requires_grad);
  auto dense = t.backward_dense(out, host(std::vector<float>{1.0f, 1.0f}));
  ASSERT_TRUE(dense) << dense.error().str();
  EXPECT_EQ(grad_of<float>(*dense, disconnected), (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(dense->get(c), nullptr);
  EXPECT_EQ(dense->get(constant_branch), nullptr);
  const auto dx = grad_of<float>(*dense, x);
  EXPECT_EQ(dx[1], must(t.value(constant_branch)).at<float>(1));  // d(x * log c)/dx = log c, as computed
  const Gradients sparse = must(t.backward(out, host(std::vector<float>{1.0f, 1.0f})));
  EXPECT_FALSE(sparse.has(disconnected));
  EXPECT_TRUE(sparse.has(x));
}

// The output's gradient is the seed's values in a buffer of its own; a caller's seed is read, never
// handed out nor written, whether the output's gradient is wanted or not (node by node, where backward
// takes a seed it uploaded itself instead of copying it, and reads a caller's in place when nobody gets
// the output's gradient back).
TEST_P(TapeSemantics, TheOutputsGradientIsTheSeedsValuesInABufferOfItsOwn) {
  Tape t(backend);
  must(t.set_options(TapeOptions{.program_threshold = 0}));
  const NodeId x = must(t.leaf(host(std::vector<float>{1.0f, -2.0f, 0.5f})));
  const NodeId y = must(t.scale(x, 3.0f));
  const std::vector<float> seed_values{0.25f, -1.0f, 2.0f};
  const Buffer seed = must(backend->upload(host(seed_values)));
  const std::vector<float> dx{0.75f, -3.0f, 6.0f};

  const Gradients all = must(t.backward(y, seed));
  ASSERT_NE(all.get(y), nullptr);
  EXPECT_NE(all.get(y)->data(), seed.data()) << "the output's gradient is not the caller's seed";
  EXPECT_EQ(grad_of<float>(all, y), seed_values);
  EXPECT_EQ(grad_of<float>(all, x), dx);

  const NodeId only_x[] = {x};
  const Gradients leaf_only = must(t.backward(y, seed, only_x));
  EXPECT_EQ(leaf_only.get(y), nullptr);
  EXPECT_EQ(grad_of<float>(leaf_only, x), dx);
  EXPECT_EQ(must(backend->download(seed)).to_vector<float>(), seed_values) << "the caller's seed is unchanged";

  const Gradients from_host = must(t.backward(y, host(seed_values)));
  EXPECT_EQ(grad_of<float>(from_host, y), seed_values);
  EXPECT_EQ(grad_of<float>(from_host, x), dx);
}

TEST_P(TapeSemantics, ReturnedGradientsOutliveTheTape) {
  std::optional<Gradients> kept;
  NodeId x;
  {
    Tape t(backend);
    x = must(t.leaf(host(std::vector<double>{0.5, 1.5})));
    const NodeId y = must(t.mul(x, must(t.exp(x))));
    kept.emplace(std::move(must(t.backward(y, host(std::vector<double>{1.0, 1.0})))));
  }
  const auto dx = grad_of<double>(*kept, x);
  EXPECT_EQ(dx.size(), 2u);
  EXPECT_GT(dx[0], 0.0);
  EXPECT_EQ(backend->stats().count(AllocTag::value), 0);
  kept.reset();
  EXPECT_EQ(backend->stats(), MemoryStats{});
}

// Random commands, some with bad ids or mismatched shapes/dtypes: each either appends exactly one
// node or fails and leaves the node count, every value's bits and the memory counters as they were.
TEST_P(TapeSemantics, RandomCommandSequencesSucceedOrChangeNothing) {
  EXPECT_TRUE(rc::check("random command sequences", [&] {
    Tape t(backend);
    const std::vector<HostArray> leaves{host(std::vector<float>{1, -2, 3}), host(std::vector<float>{0.5f, 4}),
                                        host(std::vector<double>{1, 2, 3}), host(std::vector<float>{-1, 0, 2})};
    for (const HostArray& h : leaves) RC_ASSERT(t.leaf(h).has_value());
    const int steps = *rc::gen::inRange(1, 25);
    for (int i = 0; i < steps; ++i) {
      const OpInfo& info = kOps[*rc::gen::inRange(0, kOpCount)];
      const auto n = static_cast<NodeId>(t.size());
      // Positions from -2 to past the end: a negative one stays a bare number, which no tape handed out.
      auto id_of = [&](NodeId position) { return position < 0 ? position : t.id_at(static_cast<std::size_t>(position)); };
      const NodeId ids[2] = {id_of(*rc::gen::inRange<NodeId>(-2, n + 2)), id_of(*rc::gen::inRange<NodeId>(-2, n + 2))};
      std::vector<HostArray> values_before;
      for (NodeId id = 0; id < n; ++id) values_before.push_back(must(t.value(t.id_at(static_cast<std::size_t>(id)))));
      const Snapshot before = snapshot(t);
      auto r = t.apply(info.op, {ids, static_cast<std::size_t>(info.arity)}, pick_any_table_scalars(info.op));
      if (r) {
        RC_ASSERT(*r == t.id_at(static_cast<std::size_t>(n)));
        RC_ASSERT(t.size() == static_cast<std::size_t>(n + 1));
      } else {
        RC_ASSERT(snapshot(t) == before);  // no node added, no memory kept
        for (NodeId id = 0; id < n; ++id)
          RC_ASSERT(must(t.value(t.id_at(static_cast<std::size_t>(id)))).bytes == values_before[static_cast<std::size_t>(id)].bytes);
        const ErrorCode c = r.error().code;
        RC_ASSERT(c == ErrorCode::InvalidNodeId || c == ErrorCode::ShapeMismatch || c == ErrorCode::DTypeMismatch);
      }
    }
  }));
}

TW_INSTANTIATE_PER_BACKEND(TapeSemantics);

// Arithmetic-only nodes (no libm call) must give the same bits on the GPU as on the host.
TEST(CrossBackend, ArithmeticNodesAreBitIdenticalOnCpuAndCuda) {
  TW_REQUIRE_CUDA(cuda);
  auto cpu = make_cpu_backend();
  EXPECT_TRUE(rc::check("cpu == cuda for IEEE-exact nodes", [&] {
    const Op op = *rc::gen::elementOf(std::vector<Op>{Op::add, Op::sub, Op::mul, Op::neg, Op::scale, Op::abs, Op::sqrt,
                                                       Op::clamp, Op::max, Op::min, Op::div, Op::relu, Op::inv});
    const auto n = *rc::gen::inRange<std::size_t>(1, 300);
    const auto a = *rc::gen::container<std::vector<float>>(n, any_float<float>());
    const auto b = *rc::gen::container<std::vector<float>>(n, any_float<float>());
    const auto g = *rc::gen::container<std::vector<float>>(n, any_float<float>());
    const Scalars s = pick_any_table_scalars(op);
    std::vector<HostArray> results[2];
    for (int side = 0; side < 2; ++side) {
      Tape t(side == 0 ? cpu : cuda);
      const NodeId ids[2] = {must(t.leaf(host(a))), must(t.leaf(host(b)))};
      const NodeId y = must(t.apply(op, {ids, static_cast<std::size_t>(op_info(op).arity)}, s));
      auto grads = t.backward(y, host(g));
      RC_ASSERT(grads.has_value());
      results[side].push_back(must(t.value(y)));
      for (int k = 0; k < op_info(op).arity; ++k) results[side].push_back(must(grads->host(ids[k])));
    }
    for (std::size_t k = 0; k < results[0].size(); ++k)
      for (std::size_t i = 0; i < n; ++i)
        RC_ASSERT(same_bits(results[0][k].at<float>(static_cast<std::int64_t>(i)), results[1][k].at<float>(static_cast<std::int64_t>(i))));
  }));
}

}  // namespace
}  // namespace tapewise::testing

// proptest/program_test.cpp — tape programs: small nodes' forwards deferred and run as one program,
// fused backward passes over small outputs run as one program with their slots carved from one
// allocation. They must give the per-node path's bits on random DAGs of every node, flush before
// every read, change nothing on error and leak nothing. Runs on every backend present.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/piece_source.hpp"
#include "kernels/program.hpp"
#include "tape/backward_program.hpp"
#include "test_support.hpp"

namespace tapewise::testing {
namespace {

// The default limit of pending nodes (TapeOptions).
constexpr std::size_t kPendingLimit = static_cast<std::size_t>(TapeOptions{}.max_pending_nodes);

// A tape on `be` that runs nodes of at most `threshold` elements as programs (0: none).
Tape tape_with_threshold(std::shared_ptr<Backend> be, std::int64_t threshold) {
  Tape t(std::move(be));
  TapeOptions options;
  options.program_threshold = threshold;
  must(t.set_options(options));
  return t;
}

// The threshold the random DAGs run under: small enough that a "large" node costs nothing.
constexpr std::int64_t kSmall = 8;

// detail::recompute_from for a scope, then each backend's own again: 0 has every program backward
// compute single-use values again, kNeverRecompute none.
constexpr std::int64_t kNeverRecompute = INT64_MAX;
class RecomputeFrom {
 public:
  explicit RecomputeFrom(std::int64_t elements) { detail::set_recompute_from(elements); }
  ~RecomputeFrom() { detail::set_recompute_from(-1); }
  RecomputeFrom(const RecomputeFrom&) = delete;
  RecomputeFrom& operator=(const RecomputeFrom&) = delete;
};

struct TensorType {
  Shape shape;
  DType dtype;
};

// Sizes around kSmall: a scalar, empty, at and above the threshold, every dtype.
const std::vector<TensorType>& tensor_types() {
  static const std::vector<TensorType> types{
      {Shape{5}, DType::float32}, {Shape{2, 3}, DType::float32}, {Shape{}, DType::float32},
      {Shape{0}, DType::float32}, {Shape{3}, DType::float64},    {Shape{kSmall}, DType::float64},
      {Shape{kSmall + 3}, DType::float32}, {Shape{7}, DType::bfloat16}, {Shape{kSmall + 1}, DType::float16},
  };
  return types;
}

// Any float (bit patterns, specials), or mostly moderate values with full mantissas: sums of those
// round differently when added in another order, which exposes any change of accumulation order.
template <class T>
rc::Gen<T> tape_value() {
  if constexpr (kIs16BitType<T>) {
    return rc::gen::weightedOneOf<T>({{1, any_float<T>()}, {2, rc::gen::map(in_domain<float>(-3, 3, false), [](float f) { return T(f); })}});
  } else {
    return rc::gen::weightedOneOf<T>({{1, any_float<T>()}, {2, in_domain<T>(-3, 3, false)}});
  }
}

// Moderate values: magnitudes in [2^-2, 2^2) with full mantissas (a 16-bit format's rounded from float32's).
template <class T>
rc::Gen<T> moderate_value() {
  if constexpr (kIs16BitType<T>) {
    return rc::gen::map(in_domain<float>(-2, 2, false), [](float f) { return T(f); });
  } else {
    return in_domain<T>(-2, 2, false);
  }
}

// (if / else, not ?: — a generator throws to stop a case, and g++ 12 then destroys the ?:'s
// temporaries that were never constructed.)
template <class Make>
HostArray values_of(const TensorType& type, Make&& make) {
  const auto n = static_cast<std::size_t>(type.shape.numel());
  if (type.dtype == DType::float32) return HostArray::of<float>(type.shape, *rc::gen::container<std::vector<float>>(n, make.template operator()<float>()));
  if (type.dtype == DType::bfloat16) return HostArray::of<bfloat16>(type.shape, *rc::gen::container<std::vector<bfloat16>>(n, make.template operator()<bfloat16>()));
  if (type.dtype == DType::float16) return HostArray::of<float16>(type.shape, *rc::gen::container<std::vector<float16>>(n, make.template operator()<float16>()));
  return HostArray::of<double>(type.shape, *rc::gen::container<std::vector<double>>(n, make.template operator()<double>()));
}

HostArray random_values(const TensorType& type) {
  return values_of(type, []<class T>() { return tape_value<T>(); });
}

HostArray moderate_values(const TensorType& type) {
  return values_of(type, []<class T>() { return moderate_value<T>(); });
}

struct DagNode {
  std::optional<Op> op;
  std::array<NodeId, 2> parents{-1, -1};
  Scalars scalars;
  bool requires_grad = true;
  HostArray leaf;  // leaves only
  std::size_t type = 0;
};

// Leaves of random types, then nodes of every op over earlier nodes of one type (a binary node's
// second parent has the first's type; sometimes it is the first: repeated parents). Half the first
// parents are the node just before, so that chains form, whose values pass in registers. Half the DAGs
// have a single type, so that slots receive many contributions; half use only arithmetic nodes,
// whose values stay finite, so that a change in the order of additions shows in the bits.
std::vector<DagNode> random_dag() {
  static const std::vector<Op> arithmetic{Op::add, Op::sub, Op::mul, Op::neg, Op::scale, Op::max, Op::min, Op::div};
  std::vector<Op> all;
  for (const OpInfo& info : kOps) all.push_back(info.op);
  const std::vector<Op>& ops = *rc::gen::arbitrary<bool>() ? arithmetic : all;
  std::vector<DagNode> dag;
  const int leaves = *rc::gen::inRange(1, 6);
  const int inner = *rc::gen::inRange(1, 30);
  const bool one_type = *rc::gen::arbitrary<bool>();
  const auto first_type = *rc::gen::inRange<std::size_t>(0, tensor_types().size());
  for (int i = 0; i < leaves; ++i) {
    DagNode n;
    n.type = one_type ? first_type : *rc::gen::inRange<std::size_t>(0, tensor_types().size());
    n.requires_grad = *rc::gen::weightedElement<bool>({{4, true}, {1, false}});
    n.leaf = random_values(tensor_types()[n.type]);
    dag.push_back(std::move(n));
  }
  for (int i = 0; i < inner; ++i) {
    DagNode n;
    n.op = *rc::gen::elementOf(ops);
    n.scalars = pick_any_table_scalars(*n.op);
    const auto size = static_cast<NodeId>(dag.size());
    n.parents[0] = *rc::gen::weightedOneOf<NodeId>({{1, rc::gen::just(size - 1)}, {1, rc::gen::inRange<NodeId>(0, size)}});
    n.type = dag[static_cast<std::size_t>(n.parents[0])].type;
    n.requires_grad = dag[static_cast<std::size_t>(n.parents[0])].requires_grad;
    if (op_info(*n.op).arity == 2) {
      std::vector<NodeId> same_type;
      for (std::size_t j = 0; j < dag.size(); ++j)
        if (dag[j].type == n.type) same_type.push_back(static_cast<NodeId>(j));
      n.parents[1] = *rc::gen::weightedOneOf<NodeId>({{1, rc::gen::just(n.parents[0])}, {3, rc::gen::elementOf(same_type)}});
      n.requires_grad = n.requires_grad || dag[static_cast<std::size_t>(n.parents[1])].requires_grad;
    }
    dag.push_back(std::move(n));
  }
  return dag;
}

// One line per node, for failure logs: "#3 = mul(#1, #1) [5] float32 rg" (types: tensor_types()).
std::string describe(const std::vector<DagNode>& dag, bool with_types = true) {
  std::string text;
  for (std::size_t i = 0; i < dag.size(); ++i) {
    const DagNode& n = dag[i];
    const TensorType& type = tensor_types()[n.type];
    text += "#" + std::to_string(i) + " = ";
    if (n.op) {
      text += std::string(op_name(*n.op)) + "(#" + std::to_string(n.parents[0]);
      if (op_info(*n.op).arity == 2) text += ", #" + std::to_string(n.parents[1]);
      text += ")";
    } else {
      text += "leaf";
    }
    if (with_types) text += " " + type.shape.str() + " " + dtype_name(type.dtype);
    text += n.requires_grad ? " rg\n" : "\n";
  }
  return text;
}

bool is_small(const DagNode& n, std::int64_t threshold) {
  return threshold > 0 && tensor_types()[n.type].shape.numel() <= threshold;
}

// The DAG's node i (its parents named by position) becomes the tape's node at position i, t.id_at(i).
void record(Tape& t, const std::vector<DagNode>& dag) {
  for (std::size_t i = 0; i < dag.size(); ++i) {
    const DagNode& n = dag[i];
    const NodeId parents[2] = {t.id_at(static_cast<std::size_t>(n.parents[0])), t.id_at(static_cast<std::size_t>(n.parents[1]))};
    auto id = n.op ? t.apply(*n.op, {parents, static_cast<std::size_t>(op_info(*n.op).arity)}, n.scalars)
                   : t.leaf(n.leaf, n.requires_grad);
    RC_ASSERT(id == t.id_at(i));
    RC_ASSERT(must(t.node(*id))->requires_grad == n.requires_grad);
  }
}

// Nodes deferred after recording `dag` under `threshold`: the small ones since the last large one.
std::size_t expected_pending(const std::vector<DagNode>& dag, std::int64_t threshold) {
  std::size_t pending = 0;
  for (const DagNode& n : dag)
    if (n.op) pending = is_small(n, threshold) ? pending + 1 : 0;
  return pending;
}

MemoryStats difference(const MemoryStats& after, const MemoryStats& before) {
  MemoryStats d;
  for (int t = 0; t < kAllocTagCount; ++t) {
    d.live_count[t] = after.live_count[t] - before.live_count[t];
    d.live_bytes[t] = after.live_bytes[t] - before.live_bytes[t];
  }
  return d;
}

enum BackwardKind { sparse_fused, dense_fused, sparse_staged, dense_staged };
constexpr std::array<BackwardKind, 4> kBackwardKinds{sparse_fused, dense_fused, sparse_staged, dense_staged};

// What a tape gave: every value, and each backward's gradients and what it left allocated; and every
// value read only after a fused backward (which leaves the forwards it does not read pending).
struct Outcome {
  std::vector<HostArray> values;
  std::vector<HostArray> values_after_backward;
  std::array<std::vector<std::optional<HostArray>>, 4> grads;
  std::array<MemoryStats, 4> left_allocated;
};

// The backward from the node at position `out`.
Result<Gradients> run(const Tape& t, BackwardKind kind, NodeId out_position, const HostArray& seed) {
  const NodeId out = t.id_at(static_cast<std::size_t>(out_position));
  const VjpPath path = kind == sparse_fused || kind == dense_fused ? VjpPath::fused : VjpPath::staged;
  return kind == sparse_fused || kind == sparse_staged ? t.backward(out, seed, path) : t.backward_dense(out, seed, path);
}

// Records the DAG under `threshold`, runs every backward before reading any value (so the
// backward itself must flush what it reads), then reads the values. Again on a fresh tape with the
// fused backward alone, so that the values it left pending are read afterwards.
Outcome record_and_differentiate(const std::shared_ptr<Backend>& be, std::int64_t threshold,
                                 const std::vector<DagNode>& dag, NodeId out, const HostArray& seed) {
  Outcome o;
  Tape t = tape_with_threshold(be, threshold);
  record(t, dag);
  RC_ASSERT(t.pending() == expected_pending(dag, threshold));
  for (BackwardKind kind : kBackwardKinds) {
    const MemoryStats before = be->stats();
    const std::size_t pending_before = t.pending();
    auto grads = run(t, kind, out, seed);
    RC_ASSERT(grads.has_value());
    // Staged runs node by node after a whole flush; fused as a program leaves what it does not read.
    RC_ASSERT(t.pending() <= (kind == sparse_fused || kind == dense_fused ? pending_before : 0u));
    o.left_allocated[kind] = difference(be->stats(), before);
    RC_ASSERT(o.left_allocated[kind].count(AllocTag::workspace) == 0);
    for (std::size_t id = 0; id < dag.size(); ++id)
      o.grads[kind].push_back(grads->has(t.id_at(id)) ? std::optional<HostArray>(must(grads->host(t.id_at(id))))
                                                                  : std::nullopt);
  }
  for (std::size_t id = 0; id < dag.size(); ++id) o.values.push_back(must(t.value(t.id_at(id))));
  Tape fresh = tape_with_threshold(be, threshold);
  record(fresh, dag);
  RC_ASSERT(run(fresh, sparse_fused, out, seed).has_value());
  for (std::size_t id = 0; id < dag.size(); ++id) o.values_after_backward.push_back(must(fresh.value(fresh.id_at(id))));
  return o;
}

class Programs : public PerBackend {};

// The central property: programs give the per-node path's bits (values, gradients sparse and dense)
// and leave the same buffers allocated; and staged still equals fused with programs on.
TEST_P(Programs, RandomDagsGiveThePerNodeBitsExactly) {
  EXPECT_TRUE(rc::check("programs == per-node", [&] {
    const std::vector<DagNode> dag = random_dag();
    const auto last = static_cast<NodeId>(dag.size() - 1);  // mostly: the widest backward
    const NodeId out = *rc::gen::weightedOneOf<NodeId>({{2, rc::gen::just(last)}, {1, rc::gen::inRange<NodeId>(0, last + 1)}});
    const HostArray seed = random_values(tensor_types()[dag[static_cast<std::size_t>(out)].type]);
    RC_LOG() << describe(dag) << "out #" << out << "\n";
    const bool recompute = *rc::gen::arbitrary<bool>();
    RC_LOG() << (recompute ? "backward programs compute single-use values again\n" : "");
    const Outcome per_node = record_and_differentiate(backend, 0, dag, out, seed);
    const Outcome programs = [&] {
      RecomputeFrom scope(recompute ? 0 : kNeverRecompute);
      return record_and_differentiate(backend, kSmall, dag, out, seed);
    }();
    for (std::size_t id = 0; id < dag.size(); ++id) {
      for (const auto* values : {&programs.values, &programs.values_after_backward}) {
        if (agree((*values)[id], per_node.values[id])) continue;
        RC_LOG() << "value of node " << id << " (" << (dag[id].op ? op_name(*dag[id].op) : "leaf") << ")"
                 << (values == &programs.values ? "" : ", read after a fused backward,") << " program vs per-node "
                 << first_difference((*values)[id], per_node.values[id]);
        RC_FAIL("a program's value differs from the per-node forward");
      }
    }
    for (BackwardKind kind : kBackwardKinds) {
      RC_ASSERT(programs.left_allocated[kind] == per_node.left_allocated[kind]);
      for (std::size_t id = 0; id < dag.size(); ++id) {
        const auto& p = programs.grads[kind][id];
        const auto& q = per_node.grads[kind][id];
        RC_ASSERT(p.has_value() == q.has_value());
        if (p && !agree(*p, *q)) {
          RC_LOG() << "backward kind " << kind << ", gradient of node " << id << " (out " << out
                   << "), program vs per-node " << first_difference(*p, *q);
          RC_FAIL("a program's gradient differs from the per-node backward");
        }
      }
    }
    // Staged (per node, after a flush) against fused (a program where the output is small).
    for (auto [staged, fused] : {std::pair{sparse_staged, sparse_fused}, std::pair{dense_staged, dense_fused}}) {
      for (std::size_t id = 0; id < dag.size(); ++id) {
        const auto& s = programs.grads[staged][id];
        const auto& f = programs.grads[fused][id];
        RC_ASSERT(s.has_value() == f.has_value());
        if (s) RC_ASSERT(agree(*s, *f));
      }
    }
  }));
}

// Backward with `wanted`: exactly the wanted gradients the full backward has, the same bits, on every
// path (programs, per node, staged; sparse and dense), and nothing else left allocated.
TEST_P(Programs, WantedGradientsAreTheFullBackwardsBits) {
  EXPECT_TRUE(rc::check("wanted == full", [&] {
    const std::vector<DagNode> dag = random_dag();
    const auto last = static_cast<NodeId>(dag.size() - 1);
    const NodeId out = *rc::gen::weightedOneOf<NodeId>({{2, rc::gen::just(last)}, {1, rc::gen::inRange<NodeId>(0, last + 1)}});
    const HostArray seed = random_values(tensor_types()[dag[static_cast<std::size_t>(out)].type]);
    std::vector<NodeId> wanted;
    for (NodeId id = 0; id <= last; ++id)
      if (*rc::gen::inRange(0, 3) == 0) wanted.push_back(id);
    const bool recompute = *rc::gen::arbitrary<bool>();
    RC_LOG() << describe(dag) << "out #" << out << ", wanted " << wanted.size() << " nodes"
             << (recompute ? ", single-use values computed again" : "") << "\n";
    RecomputeFrom scope(recompute ? 0 : kNeverRecompute);
    for (std::int64_t threshold : {std::int64_t{0}, kSmall}) {
      Tape t = tape_with_threshold(backend, threshold);
      record(t, dag);
      for (BackwardKind kind : kBackwardKinds) {
        const bool dense = kind == dense_fused || kind == dense_staged;
        const VjpPath path = kind == sparse_fused || kind == dense_fused ? VjpPath::fused : VjpPath::staged;
        const Gradients full = must(run(t, kind, out, seed));
        const MemoryStats before = backend->stats();
        std::vector<NodeId> wanted_ids;
        for (NodeId position : wanted) wanted_ids.push_back(t.id_at(static_cast<std::size_t>(position)));
        const NodeId out_id = t.id_at(static_cast<std::size_t>(out));
        std::optional<Gradients> only = must(dense ? t.backward_dense(out_id, seed, wanted_ids, path)
                                                   : t.backward(out_id, seed, wanted_ids, path));
        std::int64_t returned = 0;
        for (NodeId position = 0; position <= last; ++position) {
          const NodeId id = t.id_at(static_cast<std::size_t>(position));
          const bool is_wanted = std::find(wanted_ids.begin(), wanted_ids.end(), id) != wanted_ids.end();
          RC_ASSERT(only->has(id) == (is_wanted && full.has(id)));
          if (!only->has(id)) continue;
          ++returned;
          const HostArray a = must(only->host(id)), b = must(full.host(id));
          if (!agree(a, b)) {
            RC_LOG() << "threshold " << threshold << ", backward kind " << kind << ", node " << id << ": "
                     << first_difference(a, b);
            RC_FAIL("a wanted gradient differs from the full backward's");
          }
        }
        RC_ASSERT(difference(backend->stats(), before).count(AllocTag::gradient) == returned);
        only.reset();
        RC_ASSERT(backend->stats() == before);
      }
    }
  }));
}

// An id that is not on the tape is refused by name before anything runs.
TEST_P(Programs, AWantedIdOffTheTapeIsRefused) {
  Tape t = tape_with_threshold(backend, kSmall);
  const NodeId x = must(t.leaf(host(std::vector<float>{0.5f, 2.0f})));
  const NodeId y = must(t.sin(x));
  const MemoryStats before = backend->stats();
  const NodeId of_another_tape = t.id_at(0) ^ (NodeId{1} << 40);  // another serial, the same position
  const std::pair<NodeId, std::string> refused[] = {
      {-1, "wanted id -1"},
      {2, "wanted id 2"},
      {of_another_tape, "of tape " + std::to_string(node_tape(of_another_tape)) + " used on tape " + std::to_string(t.serial())},
      {t.id_at(2), "wanted id #2"}};
  for (const auto& [bad, named] : refused) {
    const NodeId ids[2] = {x, bad};
    auto r = t.backward(y, host(std::vector<float>{1, 1}), ids);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::InvalidNodeId);
    EXPECT_NE(r.error().message.find(named), std::string::npos) << r.error().message;
    EXPECT_EQ(backend->stats(), before);
  }
}

// Step::sources: an operand one of the kHistory steps before (in the piece) wrote comes from that
// step's register, the nearest write counting; further back, or from a step of another numel two or
// more back, or across a piece's start, from memory.
TEST(StepSources, RegistersReachThreeStepsBackWithinAPiece) {
  float buffers[8] = {};
  auto forward = [&](Op op, int in0, int in1, int out, std::int64_t numel = 4, DType dtype = DType::float32) {
    detail::Step step{};
    step.kind = detail::StepKind::forward;
    step.op = op;
    step.dtype = dtype;
    step.numel = numel;
    step.in[0] = &buffers[in0];
    step.in[1] = in1 >= 0 ? &buffers[in1] : nullptr;
    step.out[0] = &buffers[out];
    return step;
  };
  auto code = [](const detail::Step& step, int operand) { return detail::source_code(step.sources, operand); };
  detail::Program p;
  p.add(forward(Op::sin, 0, -1, 1));        // 0: b1 = sin(b0)
  p.add(forward(Op::tanh, 1, -1, 2));       // 1: b2 = tanh(b1)
  p.add(forward(Op::exp, 1, -1, 3));        // 2: b3 = exp(b1)
  p.add(forward(Op::add, 2, 3, 4));         // 3: b4 = b2 + b3
  p.add(forward(Op::add, 1, 4, 5));         // 4: b5 = b1 + b4
  p.add(forward(Op::mul, 2, 1, 6, 8));      // 5: b6 = b2 * b1, another numel
  p.add(forward(Op::mul, 4, 5, 7, 8));      // 6: b7 = b4 * b5
  EXPECT_EQ(code(p.steps[0], detail::kIn0), detail::kFromMemory) << "a piece's first step";
  EXPECT_EQ(code(p.steps[0], detail::kIn1), detail::kNotRead);
  EXPECT_EQ(code(p.steps[1], detail::kIn0), detail::register_source(1, 0));
  EXPECT_EQ(code(p.steps[2], detail::kIn0), detail::register_source(2, 0));
  EXPECT_EQ(code(p.steps[3], detail::kIn0), detail::register_source(2, 0));
  EXPECT_EQ(code(p.steps[3], detail::kIn1), detail::register_source(1, 0));
  EXPECT_EQ(code(p.steps[4], detail::kIn0), detail::kFromMemory) << "four steps back";
  EXPECT_EQ(code(p.steps[4], detail::kIn1), detail::register_source(1, 0));
  EXPECT_EQ(code(p.steps[5], detail::kIn0), detail::kFromMemory) << "another numel, three back";
  EXPECT_EQ(code(p.steps[6], detail::kIn0), detail::kFromMemory) << "another numel, three back";
  EXPECT_EQ(code(p.steps[6], detail::kIn1), detail::kFromMemory) << "another numel, two back";
  p.add(forward(Op::neg, 7, -1, 1));        // 7: one back holds whatever its numel (memory has it where it did not run)
  EXPECT_EQ(code(p.steps[7], detail::kIn0), detail::register_source(1, 0));

  // A piece's start: the step after kStepsPerLaunch steps, or a dtype change.
  detail::Program chain;
  for (int i = 0; i < detail::kStepsPerLaunch + 2; ++i) chain.add(forward(Op::sin, i % 2, -1, (i + 1) % 2));
  chain.add(forward(Op::add, 0, 1, 2));
  EXPECT_EQ(code(chain.steps[detail::kStepsPerLaunch - 1], detail::kIn0), detail::register_source(1, 0));
  EXPECT_EQ(code(chain.steps[detail::kStepsPerLaunch], detail::kIn0), detail::kFromMemory);
  EXPECT_EQ(code(chain.steps[detail::kStepsPerLaunch + 1], detail::kIn0), detail::register_source(1, 0));
  EXPECT_EQ(code(chain.steps.back(), detail::kIn0), detail::register_source(1, 0)) << "the nearest write of buffer 0";
  EXPECT_EQ(code(chain.steps.back(), detail::kIn1), detail::register_source(2, 0));
  chain.add(forward(Op::sin, 2, -1, 3, 4, DType::float64));
  EXPECT_EQ(code(chain.steps.back(), detail::kIn0), detail::kFromMemory) << "another dtype";
}

// The register pass on a chain: the gradients only the next step reads never reach memory (their
// buffers keep a sentinel), the returned one does, and the results are the unmarked program's. A
// chain longer than one launch keeps the store at each piece's boundary. As the backward's builder
// does, the program is built over stand-in addresses for the slots in between (a byte each), which the
// pass knows them by, and then given the buffers' addresses (nullptr where the pass dropped a store).
TEST(RegisterPass, UnwantedChainGradientsNeverReachMemory) {
  const std::shared_ptr<Backend> be = make_cpu_backend();
  constexpr int kNodes = 1000;  // more than two launches of steps
  const std::vector<double> x0{0.5, -1.25, 2.0};
  std::vector<Buffer> values, slots;
  for (int i = 0; i <= kNodes; ++i) values.push_back(must(be->upload(host(std::vector<double>{x0[0] + i * 1e-3, x0[1], x0[2]}))));
  const double sentinel = -12345.0;
  for (int i = 0; i <= kNodes + 1; ++i) slots.push_back(must(be->upload(host(std::vector<double>(3, sentinel)))));
  std::vector<std::byte> stand_ins(kNodes + 2);  // slot i's is &stand_ins[i]; slot 1 is returned: its own
  auto slot = [&](int i, bool kept) -> void* { return kept && i != 1 ? &stand_ins[static_cast<std::size_t>(i)] : slots[static_cast<std::size_t>(i)].data(); };
  // slot[kNodes + 1] = seed copy; node i's VJP (sin at values[i]) reads slot[i + 1], writes slot[i].
  auto chain = [&](bool kept) {
    detail::Program program;
    detail::Step pass{};
    pass.kind = detail::StepKind::pass;
    pass.dtype = DType::float64;
    pass.numel = 3;
    pass.in[0] = values[kNodes].data();
    pass.out[0] = slot(kNodes + 1, kept);
    pass.write[0] = detail::SlotWrite::store;
    program.add(pass);
    for (int i = kNodes; i >= 1; --i) {
      detail::Step vjp = pass;
      vjp.kind = detail::StepKind::vjp;
      vjp.op = Op::sin;
      vjp.in[0] = values[i - 1].data();
      vjp.g = slot(i + 1, kept);
      vjp.out[0] = slot(i, kept);
      program.add(vjp);
    }
    return program;
  };
  detail::Program plain = chain(false);
  ASSERT_TRUE(detail::engine_of(*be).run_program(plain));
  std::vector<HostArray> expected;
  for (const Buffer& s : slots) expected.push_back(must(be->download(s)));

  for (Buffer& s : slots) s = must(be->upload(host(std::vector<double>(3, sentinel))));
  detail::Program kept = chain(true);
  detail::RegisterPass().run(kept, stand_ins);
  auto placed = [&](const void* p) -> void* {
    const std::int64_t i = detail::stand_in_index(stand_ins, p);
    return i >= 0 ? slots[static_cast<std::size_t>(i)].data() : const_cast<void*>(p);
  };
  for (detail::Step& step : kept.steps) {
    step.g = placed(step.g);
    for (void*& out : step.out) out = placed(out);
  }
  ASSERT_TRUE(detail::engine_of(*be).run_program(kept));
  EXPECT_EQ(must(be->download(slots[1])).bytes, expected[1].bytes);
  int stored = 0;
  for (int i = 2; i <= kNodes + 1; ++i) {
    const HostArray s = must(be->download(slots[static_cast<std::size_t>(i)]));
    if (s.at<double>(0) == sentinel) continue;
    ++stored;  // a store kept: the step that reads it starts a piece (448 steps a launch)
    const std::size_t step = static_cast<std::size_t>(kNodes + 1 - i);  // the step writing slot i
    EXPECT_EQ((step + 1) % static_cast<std::size_t>(detail::kStepsPerLaunch), 0u) << "slot " << i;
    EXPECT_EQ(s.bytes, expected[static_cast<std::size_t>(i)].bytes) << "slot " << i;
  }
  EXPECT_EQ(stored, kNodes / detail::kStepsPerLaunch);
}

// A backward program's slots in between get memory only where a step stores to them: a 1,000-node graph
// whose gradients pass in registers holds the returned slot and the stores at its pieces' boundaries
// (at most `live` slots each), not a slot per node (a chain past L2 would otherwise hold a gradient per
// node, where node by node holds one or two). The program's gradients are the per-node path's, bit for bit.
using RecordGraph = NodeId (*)(Tape&, NodeId x, int nodes);
void expect_internal_slots_only_at_piece_boundaries(RecordGraph record, int nodes_wanted, int live) {
  const std::shared_ptr<Backend> be = make_cpu_backend();
  constexpr std::int64_t kElements = 4096;
  constexpr std::int64_t kSlotBytes = kElements * 4;
  Tape tape(be);
  must(tape.set_options(TapeOptions{.program_threshold = kElements}));
  const NodeId x = must(tape.leaf(host(std::vector<float>(kElements, 0.5f))));
  const NodeId y = record(tape, x, nodes_wanted);
  must(tape.flush());
  const std::span<const Node> nodes(must(tape.node(x)), tape.size());
  const auto out = static_cast<NodeId>(node_position(y));
  detail::BackwardPlan plan;
  plan.wanted.assign(nodes.size(), 0);
  plan.wanted[0] = 1;
  detail::plan_backward(nodes, out, false, plan);
  const Buffer seed = must(be->upload(host(std::vector<float>(kElements, 1.0f))));
  detail::BackwardProgram builder;
  detail::Engine& engine = detail::engine_of(*be);
  const std::int64_t before = be->stats().bytes(AllocTag::gradient);
  ASSERT_TRUE(builder.allocate_slots(engine, plan, nodes, out, false));
  const detail::Program& program = builder.build(plan, nodes, out, seed, kElements);
  ASSERT_TRUE(builder.allocate_internal_slots(engine, "backward"));
  const std::int64_t held = be->stats().bytes(AllocTag::gradient) - before;
  const auto steps = static_cast<std::int64_t>(program.steps.size());
  const std::int64_t pieces = (steps + detail::kStepsPerLaunch - 1) / detail::kStepsPerLaunch;
  EXPECT_GE(held, kSlotBytes) << "the returned slot";
  EXPECT_LE(held, (1 + live * pieces) * kSlotBytes)
      << "the returned slot and " << live << " stores per piece boundary, not a slot per node of " << nodes.size();
  ASSERT_TRUE(engine.run_program(program));
  HostArray got;
  builder.hand_out([&](NodeId, Buffer slot) { got = must(be->download(slot)); });
  builder.release();
  EXPECT_EQ(be->stats().bytes(AllocTag::gradient), before) << "the internal slots go with the builder";

  Tape per_node(be);
  must(per_node.set_options(TapeOptions{.program_threshold = 0}));
  const NodeId x2 = must(per_node.leaf(host(std::vector<float>(kElements, 0.5f))));
  const NodeId y2 = record(per_node, x2, nodes_wanted);
  const Gradients expected = must(per_node.backward(y2, host(std::vector<float>(kElements, 1.0f)), std::vector<NodeId>{x2}));
  EXPECT_EQ(got.bytes, must(expected.host(x2)).bytes);
}

TEST(BackwardProgram, AChainsInternalSlotsTakeMemoryOnlyWhereAStepStoresThem) {
  expect_internal_slots_only_at_piece_boundaries(
      [](Tape& tape, NodeId y, int nodes) {
        for (int i = 0; i < nodes; ++i) y = must(i % 2 ? tape.sin(y) : tape.tanh(y));
        return y;
      },
      1000, 1);
}

// A fan-out: h feeds sin, tanh and sigmoid, whose VJPs accumulate into h's slot, and the sum's VJPs
// write the three slots two and three steps before their readers. Those gradients pass in the
// registers of the steps before (kHistory), so they never reach memory either.
TEST(BackwardProgram, AFanOutsInternalSlotsTakeMemoryOnlyWhereAStepStoresThem) {
  expect_internal_slots_only_at_piece_boundaries(
      [](Tape& tape, NodeId h, int nodes) {
        for (int i = 0; i + 6 <= nodes; i += 6) {
          const NodeId s = must(tape.sin(h)), t = must(tape.tanh(h)), g = must(tape.sigmoid(h));
          h = must(tape.scale(must(tape.add(must(tape.add(s, t)), g)), 0.5));
        }
        return h;
      },
      996, 4);
}

// Where backward programs compute values again by default: CUDA, float32, from 2^20 elements (the
// sizes and the dtype where an H100 measured it faster); set_recompute_from overrides every backend and
// dtype, and -1 gives the defaults back.
TEST(BackwardProgram, RecomputingIsCudasFloat32FromTwoToTheTwentyByDefault) {
  constexpr std::int64_t kNever = INT64_MAX;
  EXPECT_EQ(detail::recompute_from(BackendKind::cuda, DType::float32), std::int64_t{1} << 20);
  for (DType dtype : {DType::float64, DType::bfloat16, DType::float16})
    EXPECT_EQ(detail::recompute_from(BackendKind::cuda, dtype), kNever) << dtype_name(dtype);
  for (DType dtype : kDTypes) EXPECT_EQ(detail::recompute_from(BackendKind::cpu, dtype), kNever) << dtype_name(dtype);
  {
    const RecomputeFrom scope(7);
    EXPECT_EQ(detail::recompute_from(BackendKind::cpu, DType::bfloat16), 7);
    EXPECT_EQ(detail::recompute_from(BackendKind::cuda, DType::float32), 7);
  }
  EXPECT_EQ(detail::recompute_from(BackendKind::cuda, DType::float32), std::int64_t{1} << 20);
}

// Node i of the unary chain (sin, tanh, sigmoid, scale 0.9, relu, repeated), on h.
NodeId unary_chain_node(Tape& t, NodeId h, int i) {
  switch (i % 5) {
    case 0: return must(t.sin(h));
    case 1: return must(t.tanh(h));
    case 2: return must(t.sigmoid(h));
    case 3: return must(t.scale(h, 0.9));
    default: return must(t.relu(h));
  }
}

// A recomputing backward of the 1,000-node unary chain still repeats a short block of steps (forward
// steps join the VJPs: nine steps a cycle of five nodes), so each of its full pieces has a compiled
// form (piece_source: blocks of at most kMaxBlockLength steps, kMaxWrittenSteps written out) rather
// than running in the CUDA interpreter.
TEST(BackwardProgram, ARecomputingChainsPiecesCompile) {
  const RecomputeFrom scope(0);
  const std::shared_ptr<Backend> be = make_cpu_backend();
  constexpr std::int64_t kElements = 4096;
  Tape tape(be);
  must(tape.set_options(TapeOptions{.program_threshold = kElements}));
  const NodeId x = must(tape.leaf(host(std::vector<float>(kElements, 0.5f))));
  NodeId h = x;
  for (int i = 0; i < 1000; ++i) h = unary_chain_node(tape, h, i);
  const std::span<const Node> nodes(must(tape.node(x)), tape.size());
  const auto out = static_cast<NodeId>(node_position(h));
  detail::BackwardPlan plan;
  detail::plan_backward(nodes, out, false, plan);
  const Buffer seed = must(be->upload(host(std::vector<float>(kElements, 1.0f))));
  detail::BackwardProgram builder;
  const std::vector<std::uint8_t> pending(nodes.size(), 1);
  ASSERT_TRUE(builder.allocate_slots(detail::engine_of(*be), plan, nodes, out, false));
  const detail::Program& program = builder.build(plan, nodes, out, seed, kElements, pending);
  std::size_t forwards = 0;
  for (const detail::Step& step : program.steps) forwards += step.kind == detail::StepKind::forward;
  EXPECT_EQ(forwards, 799u) << "four forward steps a cycle of five nodes, but the leaf's value is its own";
  int compiled = 0;
  for (std::size_t first = 0; first < program.steps.size();) {
    const detail::Piece piece = detail::piece_at(program, first, detail::kStepsPerLaunch);
    const std::span<const detail::Step> steps(piece.steps, static_cast<std::size_t>(piece.count));
    const bool has_source = detail::piece_source(steps, piece.numel, piece.covered,
                                                 detail::PieceLaunch{DType::float32, 1, detail::kStepsPerLaunch, false, true})
                                .has_value();
    EXPECT_EQ(has_source, detail::piece_long_enough(steps.size())) << "the piece of " << piece.count << " steps at step " << first;
    compiled += has_source;
    first += static_cast<std::size_t>(piece.count);
  }
  EXPECT_EQ(compiled, 4) << "1,800 steps: four full pieces of 448 and one of 8";
  builder.release();
}

// A step the builder appended and never sealed is refused, naming it, on every backend, and nothing
// runs: before, its code was 0 and it ran as add's forward.
TEST_P(Programs, AnUnsealedStepIsRefusedAndNothingRuns) {
  const std::shared_ptr<Backend> be = backend;
  const double sentinel = -12345.0;
  const Buffer x = must(be->upload(host(std::vector<double>{0.5, -1.25})));
  const Buffer out = must(be->upload(host(std::vector<double>(2, sentinel))));
  detail::Program program;
  program.steps.reserve(2);  // the steps stay where append put them
  detail::Step& sealed = program.append();
  sealed.kind = detail::StepKind::forward;
  sealed.op = Op::sin;
  sealed.dtype = DType::float64;
  sealed.numel = 2;
  sealed.in[0] = x.data();
  sealed.out[0] = const_cast<void*>(out.data());
  program.seal_last();
  const detail::Step first = program.steps[0];
  detail::Step& unsealed = program.append();
  unsealed = first;
  unsealed.op = Op::cos;
  unsealed.code = detail::kCodeUnsealed;
  const auto ran = detail::engine_of(*be).run_program(program);
  ASSERT_FALSE(ran);
  EXPECT_EQ(ran.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(ran.error().message.find("step 1 of 2 was appended and never sealed"), std::string::npos) << ran.error().message;
  EXPECT_EQ(must(be->download(out)).at<double>(0), sentinel);
  program.seal_last();
  ASSERT_TRUE(detail::engine_of(*be).run_program(program));
  EXPECT_NE(must(be->download(out)).at<double>(0), sentinel);
}

// Many contributions into one slot: children of x (and y) summed in a random tree. Their order of
// accumulation (descending ids, existing + g) decides the low bits of dx, and so does max(x, x)
// passing g once (not g * 0.5 twice) into a slot that holds other contributions.
TEST_P(Programs, ManyContributionsAccumulateInTheTapesOrder) {
  EXPECT_TRUE(rc::check("fan-in", [&] {
    const TensorType type{Shape{*rc::gen::inRange<std::int64_t>(1, 6)}, *rc::gen::elementOf(std::vector<DType>(std::begin(kDTypes), std::end(kDTypes)))};
    std::vector<DagNode> dag(2);
    for (DagNode& leaf : dag) leaf.leaf = moderate_values(type);
    std::vector<NodeId> unsummed;
    const int children = *rc::gen::inRange(3, 16);
    for (int i = 0; i < children; ++i) {
      DagNode c;
      c.op = *rc::gen::elementOf(std::vector<Op>{Op::scale, Op::mul, Op::sin, Op::div, Op::sub, Op::max, Op::min});
      c.parents = {*rc::gen::inRange<NodeId>(0, 2), *rc::gen::inRange<NodeId>(0, 2)};
      c.scalars = {*rc::gen::elementOf(std::vector<double>{0.1, -3.7, 1.0 / 3.0, 1e-3}), 0};
      unsummed.push_back(static_cast<NodeId>(dag.size()));
      dag.push_back(c);
    }
    while (unsummed.size() > 1) {  // add two random partial sums until one is left
      const auto i = *rc::gen::inRange<std::size_t>(0, unsummed.size());
      const NodeId a = unsummed[i];
      unsummed.erase(unsummed.begin() + static_cast<std::ptrdiff_t>(i));
      const auto j = *rc::gen::inRange<std::size_t>(0, unsummed.size());
      DagNode sum;
      sum.op = Op::add;
      sum.parents = {a, unsummed[j]};
      unsummed[j] = static_cast<NodeId>(dag.size());
      dag.push_back(sum);
    }
    const NodeId out = static_cast<NodeId>(dag.size() - 1);
    const HostArray seed = moderate_values(type);
    // [programs][dense][leaf]: the leaves' gradients (a leaf no child uses has none when sparse).
    std::array<std::array<std::array<std::optional<HostArray>, 2>, 2>, 2> grads;
    for (int programs : {0, 1}) {
      Tape t = tape_with_threshold(backend, programs ? TapeOptions{}.program_threshold : 0);
      record(t, dag);
      for (int dense : {0, 1}) {
        auto g = dense ? t.backward_dense(t.id_at(static_cast<std::size_t>(out)), seed) : t.backward(t.id_at(static_cast<std::size_t>(out)), seed);
        RC_ASSERT(g.has_value());
        for (NodeId leaf : {0, 1})
          if (g->has(t.id_at(static_cast<std::size_t>(leaf)))) grads[programs][dense][leaf] = must(g->host(t.id_at(static_cast<std::size_t>(leaf))));
      }
    }
    for (int dense : {0, 1}) {
      for (NodeId leaf : {0, 1}) {
        const auto& p = grads[1][dense][leaf];
        const auto& q = grads[0][dense][leaf];
        RC_ASSERT(p.has_value() == q.has_value());
        if (!p || agree(*p, *q)) continue;
        RC_LOG() << describe(dag, false) << type.shape.str() << " " << dtype_name(type.dtype) << ", "
                 << (dense ? "dense" : "sparse") << ": d#" << leaf << ", program vs per-node "
                 << first_difference(*p, *q);
        RC_FAIL("fan-in: the program accumulated a leaf's gradient differently");
      }
    }
  }));
}

// Each read flushes; leaves do not; a large node flushes before its own kernel; the list never
// grows past max_pending_nodes.
TEST_P(Programs, PendingNodesAreFlushedBeforeAnyRead) {
  const std::vector<float> xs{0.5f, -1.25f, 3.0f};
  Tape t = tape_with_threshold(backend, kSmall);
  const NodeId x = must(t.leaf(host(xs)));
  const NodeId s = must(t.sin(x));
  const NodeId e = must(t.exp(s));
  EXPECT_EQ(t.pending(), 2u);
  const NodeId c = must(t.leaf(host(std::vector<float>{1, 2, 3})));
  EXPECT_EQ(t.pending(), 2u);  // a leaf reads nothing
  auto v = t.value(e);
  ASSERT_TRUE(v) << v.error().str();
  EXPECT_EQ(t.pending(), 0u);
  // The per-node kernels of the same backend (its libm, not the host's) give the expected bits.
  std::vector<float> per_node;
  {
    Tape u = tape_with_threshold(backend, 0);
    const NodeId ue = must(u.exp(must(u.sin(must(u.leaf(host(xs)))))));
    per_node = must(u.value(ue)).to_vector<float>();
  }
  for (std::size_t i = 0; i < xs.size(); ++i)
    EXPECT_EQ(bits_of(v->at<float>(static_cast<std::int64_t>(i))), bits_of(per_node[i])) << i;

  const NodeId m = must(t.mul(e, c));
  EXPECT_EQ(t.pending(), 1u);
  ASSERT_TRUE(t.value_buffer(m));
  EXPECT_EQ(t.pending(), 0u);
  EXPECT_EQ(must(t.value(m)).at<float>(1), v->at<float>(1) * 2.0f);

  const NodeId r = must(t.relu(m));
  EXPECT_EQ(t.pending(), 1u);
  ASSERT_TRUE(t.backward(r, host(std::vector<float>{1, 1, 1})));
  EXPECT_EQ(t.pending(), 0u);

  ASSERT_TRUE(t.neg(r));
  EXPECT_EQ(t.pending(), 1u);
  ASSERT_TRUE(t.flush());
  EXPECT_EQ(t.pending(), 0u);

  const NodeId big = must(t.leaf(host(std::vector<float>(kSmall + 1, 0.25f))));
  ASSERT_TRUE(t.neg(r));
  EXPECT_EQ(t.pending(), 1u);
  const NodeId big_neg = must(t.neg(big));  // runs its own kernel, after the pending node
  EXPECT_EQ(t.pending(), 0u);
  EXPECT_EQ(must(t.value(big_neg)).at<float>(kSmall), -0.25f);

  // A full list flushes as the next small node is recorded.
  NodeId h = x;
  for (std::size_t i = 0; i < kPendingLimit; ++i) h = must(t.scale(h, 1.0));
  EXPECT_EQ(t.pending(), kPendingLimit);
  h = must(t.scale(h, 2.0));
  EXPECT_EQ(t.pending(), 1u);
  EXPECT_EQ(must(t.value(h)).at<float>(2), 6.0f);
}

// A fused program backward stores the forwards it reads and leaves the rest pending: in a fan-out
// chain (h feeds sin, tanh and sigmoid, summed by two adds and scaled), only each h reaches memory,
// the value every VJP of sin, tanh and sigmoid reads, and the output. The others run in registers,
// stay pending, and a later read computes them with the per-node path's bits; the leaf's gradient
// has its bits too, and is all the backward leaves allocated.
TEST_P(Programs, AFusedBackwardLeavesTheValuesItDoesNotReadPending) {
  constexpr int kCycles = 4;
  const std::vector<float> xs{0.5f, -1.25f, 3.0f, 0.0f, -0.0f, 7.5f};
  auto record_chain = [&](Tape& t) {
    std::vector<NodeId> ids{must(t.leaf(host(xs)))};
    for (int c = 0; c < kCycles; ++c) {
      const NodeId h = ids.back();
      const NodeId s = must(t.sin(h)), th = must(t.tanh(h)), sg = must(t.sigmoid(h));
      const NodeId a = must(t.add(s, th));
      const NodeId b = must(t.add(a, sg));
      ids.insert(ids.end(), {s, th, sg, a, b, must(t.scale(b, 0.5))});
    }
    return ids;
  };
  const HostArray seed = host(std::vector<float>(xs.size(), 1.0f));
  Tape per_node = tape_with_threshold(backend, 0);
  const std::vector<NodeId> q = record_chain(per_node);
  const NodeId per_node_leaf[1] = {q[0]};
  const Gradients expected = must(per_node.backward(q.back(), seed, per_node_leaf));

  Tape t = tape_with_threshold(backend, kSmall);
  const std::vector<NodeId> ids = record_chain(t);
  ASSERT_EQ(t.pending(), static_cast<std::size_t>(6 * kCycles));
  const MemoryStats before = backend->stats();
  const NodeId leaf[1] = {ids[0]};
  const Gradients grads = must(t.backward(ids.back(), seed, leaf));
  EXPECT_EQ(t.pending(), static_cast<std::size_t>(5 * kCycles)) << "every h stored, the sums' inputs left pending";
  EXPECT_EQ(backend->stats().count(AllocTag::gradient) - before.count(AllocTag::gradient), 1) << "the leaf's gradient";
  EXPECT_EQ(backend->stats().count(AllocTag::value), before.count(AllocTag::value));
  const std::vector<float> got = must(grads.host(ids[0])).to_vector<float>();
  const std::vector<float> want = must(expected.host(q[0])).to_vector<float>();
  for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(bits_of(got[i]), bits_of(want[i])) << "gradient at " << i;
  // A second backward finds what it reads stored already; then a read computes the rest.
  ASSERT_TRUE(t.backward(ids.back(), seed, leaf));
  EXPECT_EQ(t.pending(), static_cast<std::size_t>(5 * kCycles));
  for (std::size_t k = 1; k < ids.size(); ++k) {
    const std::vector<float> v = must(t.value(ids[k])).to_vector<float>();
    EXPECT_EQ(t.pending(), 0u);
    const std::vector<float> w = must(per_node.value(q[k])).to_vector<float>();
    for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(bits_of(v[i]), bits_of(w[i])) << "node " << k << " at " << i;
  }
}

// A tape starts at its backend's program threshold: 16 elements on the CPU backend, where a node's own
// loop wins from about 2^5 elements up, and TapeOptions' 2^20 on CUDA. On the CPU a 16-element node is
// deferred and a 17-element one runs at once.
TEST_P(Programs, ATapeStartsAtItsBackendsThreshold) {
  Tape t(backend);
  const bool cpu = backend->kind() == BackendKind::cpu;
  EXPECT_EQ(t.options().program_threshold, cpu ? kCpuProgramThreshold : TapeOptions{}.program_threshold);
  EXPECT_EQ(t.options().max_pending_nodes, TapeOptions{}.max_pending_nodes);
  const NodeId at = must(t.leaf(host(std::vector<float>(static_cast<std::size_t>(kCpuProgramThreshold), 0.5f))));
  const NodeId above = must(t.leaf(host(std::vector<float>(static_cast<std::size_t>(kCpuProgramThreshold) + 1, 0.5f))));
  ASSERT_TRUE(t.sin(at));
  EXPECT_EQ(t.pending(), 1u);
  ASSERT_TRUE(t.flush());
  ASSERT_TRUE(t.sin(above));
  EXPECT_EQ(t.pending(), cpu ? 0u : 1u);
}

// TapeOptions: each tape has its own threshold and pending limit; a limit above one launch's steps
// flushes as several launches with the same bits; an option out of range is refused by name and
// changes nothing.
TEST_P(Programs, TapeOptionsAreTheTapesOwn) {
  const std::vector<float> xs{0.5f, -1.25f, 3.0f};
  Tape small = tape_with_threshold(backend, kSmall);
  Tape none = tape_with_threshold(backend, 0);
  TapeOptions three{kSmall, 3};
  ASSERT_TRUE(small.set_options(three));
  EXPECT_EQ(small.options(), three);
  EXPECT_EQ(none.options().program_threshold, 0);
  NodeId h = must(small.leaf(host(xs))), k = must(none.leaf(host(xs)));
  for (int i = 0; i < 3; ++i) h = must(small.sin(h)), k = must(none.sin(k));
  EXPECT_EQ(small.pending(), 3u);
  EXPECT_EQ(none.pending(), 0u);
  h = must(small.sin(h));
  EXPECT_EQ(small.pending(), 1u);  // the full list flushed first

  ASSERT_TRUE(small.set_options(TapeOptions{kSmall, 1000}));
  for (int i = 0; i < 999; ++i) h = must(small.sin(h)), k = must(none.sin(k));
  k = must(none.sin(k));
  EXPECT_EQ(small.pending(), 1000u);
  const HostArray program = must(small.value(h)), per_node = must(none.value(k));
  EXPECT_EQ(program.bytes, per_node.bytes);

  const TapeOptions before = small.options();
  const std::pair<TapeOptions, const char*> refused[] = {{{-1, 448}, "program_threshold -1"},
                                                          {{kSmall, 0}, "max_pending_nodes 0"},
                                                          {{kSmall, 65537}, "max_pending_nodes 65537"}};
  for (const auto& [options, named] : refused) {
    auto r = small.set_options(options);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(r.error().str().find(named), std::string::npos) << r.error().str();
    EXPECT_EQ(small.options(), before);
  }
}

// A node recorded small, then the threshold lowered: its child is no longer small, so recording the
// child must compute the pending parent first.
TEST_P(Programs, LoweringTheThresholdMidTapeStillComputesPendingParentsFirst) {
  Tape t = tape_with_threshold(backend, kSmall);
  const NodeId x = must(t.leaf(host(std::vector<double>{0.25, 2.0})));
  const NodeId y = must(t.scale(x, 3.0));
  EXPECT_EQ(t.pending(), 1u);
  must(t.set_options(TapeOptions{0, TapeOptions{}.max_pending_nodes}));
  const NodeId z = must(t.sqrt(y));  // IEEE-exact ops only: the same bits on every backend
  EXPECT_EQ(t.pending(), 0u);
  const HostArray v = must(t.value(z));
  EXPECT_EQ(v.at<double>(0), std::sqrt(0.25 * 3.0));
  EXPECT_EQ(v.at<double>(1), std::sqrt(2.0 * 3.0));
}

// A failed command while nodes are pending leaves the pending list as it was too.
struct PendingSnapshot {
  Snapshot tape;
  std::size_t pending;
  friend bool operator==(const PendingSnapshot&, const PendingSnapshot&) = default;
};
PendingSnapshot pending_snapshot(const Tape& t) { return {snapshot(t), t.pending()}; }

// Random commands (bad ids, mismatched shapes and dtypes, failed allocations) while nodes are
// pending: each appends one node or changes nothing, the pending list included; in the end every
// value equals a per-node tape's replay of the commands that succeeded.
TEST_P(Programs, ErrorsWhileNodesArePendingChangeNothing) {
  Backend& be = *backend;
  EXPECT_TRUE(rc::check("commands while pending", [&] {
    Tape t = tape_with_threshold(backend, kSmall);
    std::vector<DagNode> replay;
    const std::vector<TensorType> leaf_types{{Shape{3}, DType::float32}, {Shape{2}, DType::float32},
                                             {Shape{3}, DType::float64}, {Shape{kSmall + 1}, DType::float32}};
    for (std::size_t k = 0; k < leaf_types.size(); ++k) {
      DagNode n;
      n.leaf = random_values(leaf_types[k]);
      RC_ASSERT(t.leaf(n.leaf).has_value());
      replay.push_back(std::move(n));
    }
    const int steps = *rc::gen::inRange(1, 40);
    for (int i = 0; i < steps; ++i) {
      const OpInfo& info = kOps[*rc::gen::inRange(0, kOpCount)];
      const auto n = static_cast<NodeId>(t.size());
      const std::array<NodeId, 2> positions{*rc::gen::inRange<NodeId>(-2, n + 2), *rc::gen::inRange<NodeId>(-2, n + 2)};
      auto id_of = [&](NodeId position) { return position < 0 ? position : t.id_at(static_cast<std::size_t>(position)); };
      const std::array<NodeId, 2> ids{id_of(positions[0]), id_of(positions[1])};
      const bool out_of_memory = *rc::gen::weightedElement<bool>({{6, false}, {1, true}});
      const PendingSnapshot before = pending_snapshot(t);
      if (out_of_memory) inject_allocation_failure(be, 1);
      const Scalars scalars = pick_any_table_scalars(info.op);
      auto r = t.apply(info.op, {ids.data(), static_cast<std::size_t>(info.arity)}, scalars);
      inject_allocation_failure(be, 0);
      if (r) {
        RC_ASSERT(*r == t.id_at(static_cast<std::size_t>(n)));
        RC_ASSERT(t.size() == before.tape.size + 1);
        RC_ASSERT(t.pending() <= kPendingLimit);
        DagNode node;
        node.op = info.op;
        node.parents = positions;
        node.scalars = scalars;
        replay.push_back(std::move(node));
      } else {
        RC_ASSERT(pending_snapshot(t) == before);
        const ErrorCode c = r.error().code;
        RC_ASSERT(c == ErrorCode::InvalidNodeId || c == ErrorCode::ShapeMismatch || c == ErrorCode::DTypeMismatch ||
                  (out_of_memory && c == ErrorCode::OutOfMemory));
      }
    }
    Tape per_node = tape_with_threshold(backend, 0);
    record(per_node, replay);
    for (std::size_t at = 0; at < t.size(); ++at) RC_ASSERT(agree(must(t.value(t.id_at(at))), must(per_node.value(per_node.id_at(at)))));
  }));
}

// A fused backward over a small output allocates twice — the seed's upload and all slots at once —
// and, asked for some gradients only, three times: the slots in between that reach memory are one more
// allocation. Each failing changes nothing (pending forwards included) and leaks nothing.
TEST_P(Programs, InjectedAllocationFailuresInBackwardChangeNothing) {
  for (bool dense : {false, true}) {
    for (bool only_a : {false, true}) {
      Tape t = tape_with_threshold(backend, kSmall);
      const NodeId a = must(t.leaf(host<float>({0.5f, 2.0f, -3.0f})));
      const NodeId b = must(t.leaf(host<float>({1.5f, -2.0f, 4.0f})));
      const NodeId unrelated = must(t.leaf(host(std::vector<float>(kSmall + 4, 1.0f))));  // dense: a large +0 slot
      ASSERT_TRUE(t.sin(unrelated));
      const NodeId q = must(t.div(a, b));
      const NodeId m = must(t.max(q, q));
      // q's gradient gathers two contributions (mul's, then max's, four steps apart, past the registers
      // of kHistory steps): the one slot in between that reaches memory, so an only-a backward
      // allocates the seed, the returned slots and the internal slots.
      const NodeId z = must(t.mul(must(t.gelu(must(t.sin(must(t.tanh(m)))))), q));
      const PendingSnapshot before = pending_snapshot(t);
      EXPECT_EQ(before.pending, 6u);
      const HostArray seed = host<float>({1, -1, 2});
      const NodeId wanted[] = {a};
      int failures = 0;
      for (int nth = 1;; ++nth) {
        inject_allocation_failure(*backend, nth);
        auto grads = only_a ? (dense ? t.backward_dense(z, seed, wanted) : t.backward(z, seed, wanted))
                            : (dense ? t.backward_dense(z, seed) : t.backward(z, seed));
        inject_allocation_failure(*backend, 0);
        if (grads) {
          EXPECT_TRUE(grads->has(a));
          EXPECT_EQ(grads->has(b), !only_a);
          break;
        }
        ++failures;
        EXPECT_EQ(grads.error().code, ErrorCode::OutOfMemory) << grads.error().str();
        EXPECT_EQ(pending_snapshot(t), before) << "failing allocation " << nth;
      }
      EXPECT_EQ(failures, only_a ? 3 : 2) << "dense " << dense << ", only_a " << only_a;
      EXPECT_EQ(t.pending(), 0u);
      EXPECT_EQ(snapshot(t).stats, before.tape.stats);
    }
  }
}

// The whole issue's workload in miniature: a 1,000-node chain (sin, tanh, sigmoid, scale 0.9, relu)
// records and back-propagates through programs, several flushes deep, to the per-node bits, whether
// its backward reads the values it needs stored or computes the single-use ones again.
TEST_P(Programs, ChainOfAThousandNodes) {
  constexpr int kNodes = 1000;
  std::vector<float> xs(256);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(static_cast<int>(i) - 128) / 32.0f;
  // Node by node; as programs storing what the VJPs read; as programs computing single-use values again.
  struct Side {
    std::int64_t threshold, recompute_from;
  };
  constexpr std::int64_t kPrograms = TapeOptions{}.program_threshold;
  constexpr std::array<Side, 3> kSides{Side{0, kNeverRecompute}, Side{kPrograms, kNeverRecompute}, Side{kPrograms, 0}};
  std::array<std::vector<HostArray>, kSides.size()> values, grads;
  std::array<std::size_t, kSides.size()> left_pending{};
  for (std::size_t side = 0; side < kSides.size(); ++side) {
    const RecomputeFrom scope(kSides[side].recompute_from);
    Tape t = tape_with_threshold(backend, kSides[side].threshold);
    NodeId h = must(t.leaf(host(xs)));
    for (int i = 0; i < kNodes; ++i) {
      h = unary_chain_node(t, h, i);
      ASSERT_LE(t.pending(), kPendingLimit);
    }
    EXPECT_EQ(t.pending(), side == 0 ? 0u : kNodes % kPendingLimit);
    const MemoryStats before = backend->stats();
    auto g = t.backward(h, host(std::vector<float>(xs.size(), 1.0f)));
    ASSERT_TRUE(g) << g.error().str();
    EXPECT_EQ(backend->stats().count(AllocTag::gradient) - before.count(AllocTag::gradient), kNodes + 1);
    left_pending[side] = t.pending();
    for (std::size_t at = 0; at <= kNodes; ++at) {
      values[side].push_back(must(t.value(t.id_at(at))));
      grads[side].push_back(must(g->host(t.id_at(at))));
    }
  }
  for (std::size_t side = 1; side < kSides.size(); ++side) {
    for (std::size_t id = 0; id <= kNodes; ++id) {  // no NaN arises in this chain: the bytes themselves
      ASSERT_EQ(values[side][id].bytes, values[0][id].bytes) << "side " << side << ", value of node " << id;
      ASSERT_EQ(grads[side][id].bytes, grads[0][id].bytes) << "side " << side << ", gradient of node " << id;
    }
  }
  EXPECT_NE(grads[1][kNodes - 7].at<float>(200), 0.0f);  // the gradients compared are not all zero
  // Storing, the backward's flush keeps every value a VJP of sin, tanh, sigmoid or relu reads: four of
  // five. Computing again, it keeps two of five (402 with the output), and the VJPs find the others in
  // the registers of forward steps just before them; the flush's piece boundaries store a few more.
  EXPECT_LE(left_pending[1], static_cast<std::size_t>(kNodes / 5));
  EXPECT_GE(left_pending[2], 590u);
  EXPECT_LE(left_pending[2], 598u);
}

// Pending nodes of both dtypes, interleaved: a flush runs as pieces of one dtype each (interpreter.hpp:
// piece_at), and a piece's first step reads from memory what the step before it (of the other dtype,
// in another piece) would have handed over in a register. Values and gradients keep the per-node bits.
TEST_P(Programs, InterleavedDtypesRunAsPiecesWithThePerNodeBits) {
  constexpr int kNodesPerChain = 300;  // 600 pending: more than one launch of steps
  std::vector<float> xs(64);
  std::vector<double> ys(64);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    xs[i] = static_cast<float>(static_cast<int>(i) - 32) / 16.0f;
    ys[i] = static_cast<double>(static_cast<int>(i) - 31) / 8.0;
  }
  std::array<std::vector<HostArray>, 2> results;
  for (std::int64_t threshold : {std::int64_t{0}, TapeOptions{}.program_threshold}) {
    std::vector<HostArray>& out = results[threshold == 0 ? 0 : 1];
    Tape t = tape_with_threshold(backend, threshold);
    NodeId f = must(t.leaf(host(xs)));
    NodeId d = must(t.leaf(HostArray::of<double>(Shape{static_cast<std::int64_t>(ys.size())}, ys)));
    for (int i = 0; i < kNodesPerChain; ++i) {
      f = i % 2 ? must(t.add(f, f)) : must(t.sin(f));  // sin(2 x): stays in [-1, 1], never settles
      switch (i % 3) {  // x^2, tanh, 2 x: a cycle that neither vanishes nor grows
        case 0: d = must(t.mul(d, d)); break;
        case 1: d = must(t.tanh(d)); break;
        default: d = must(t.add(d, d)); break;
      }
    }
    auto gf = t.backward(f, host(std::vector<float>(xs.size(), 1.0f)));
    ASSERT_TRUE(gf) << gf.error().str();
    auto gd = t.backward(d, HostArray::of<double>(Shape{static_cast<std::int64_t>(ys.size())},
                                                  std::vector<double>(ys.size(), 0.5)));
    ASSERT_TRUE(gd) << gd.error().str();
    for (std::size_t at = 0; at < t.size(); ++at) {
      const NodeId id = t.id_at(at);
      out.push_back(must(t.value(id)));
      if (gf->has(id)) out.push_back(must(gf->host(id)));
      if (gd->has(id)) out.push_back(must(gd->host(id)));
    }
  }
  ASSERT_EQ(results[1].size(), results[0].size());
  ASSERT_NE(results[0][1].at<float>(5), 0.0f);  // the f32 leaf's gradient: the chain did not vanish
  for (std::size_t k = 0; k < results[0].size(); ++k)
    ASSERT_TRUE(agree(results[1][k], results[0][k])) << "array " << k << ": " << first_difference(results[1][k], results[0][k]);
}

// Large pieces: past 2^16 elements the CUDA runner gives each thread four elements (lanes) that
// share each step's decode (cuda/kernels/interpreter.hpp, program_lanes). Two float32 chains of different
// sizes in one piece (lanes that some steps do not cover), a float64 chain of its own, sizes that are
// not a multiple of a tile: values and gradients keep the per-node bits.
TEST_P(Programs, LargePiecesWithLanesGiveThePerNodeBits) {
  constexpr std::int64_t kLarge = (std::int64_t{1} << 16) + 389, kShort = 300;
  constexpr int kNodesPerChain = 40;
  auto ramp = [](std::int64_t n, double scale) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int>(i % 509) - 254) * scale;
    return v;
  };
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  std::array<std::vector<HostArray>, 2> results;
  for (std::int64_t threshold : {std::int64_t{0}, std::int64_t{1} << 20}) {
    std::vector<HostArray>& out = results[threshold == 0 ? 0 : 1];
    Tape t = tape_with_threshold(backend, threshold);
    NodeId big = must(t.leaf(host(as_float(ramp(kLarge, 1.0 / 64)))));
    NodeId little = must(t.leaf(host(as_float(ramp(kShort, 1.0 / 32)))));
    NodeId wide = must(t.leaf(HostArray::of<double>(Shape{kLarge}, ramp(kLarge, 1.0 / 128))));
    for (int i = 0; i < kNodesPerChain; ++i) {
      big = i % 2 ? must(t.add(big, big)) : must(t.sin(big));
      little = i % 3 ? must(t.tanh(little)) : must(t.mul(little, little));
      wide = i % 2 ? must(t.sigmoid(wide)) : must(t.scale(wide, 3.0));
    }
    for (NodeId out_id : {big, little, wide}) {
      const Buffer& v = *must(t.value_buffer(out_id));
      auto g = t.backward(out_id, must(backend->upload(must(backend->download(v)))));
      ASSERT_TRUE(g) << g.error().str();
      for (NodeId id = t.id_at(0); id < t.id_at(t.size()); ++id)
        if (g->has(id)) out.push_back(must(g->host(id)));
    }
    for (NodeId id = t.id_at(0); id < t.id_at(t.size()); ++id) out.push_back(must(t.value(id)));
  }
  ASSERT_EQ(results[1].size(), results[0].size());
  for (std::size_t k = 0; k < results[0].size(); ++k)
    ASSERT_TRUE(agree(results[1][k], results[0][k])) << "array " << k << ": " << first_difference(results[1][k], results[0][k]);
}

// Slots carved from one allocation: each counted on its own, 16-byte aligned, disjoint; the
// allocation lives while any of them does; a failure is one failed allocation.
TEST_P(Programs, AllocateManyCountsEachBufferAndFreesWithTheLast) {
  const MemoryStats empty = backend->stats();
  const std::vector<BufferSpec> specs{{Shape{3}, DType::float32}, {Shape{0}, DType::float32},
                                      {Shape{5}, DType::float64}, {Shape{}, DType::float32},
                                      {Shape{7}, DType::float32}};
  inject_allocation_failure(*backend, 1);
  auto failed = backend->allocate_many(specs, AllocTag::gradient);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::OutOfMemory);
  EXPECT_EQ(backend->stats(), empty);
  inject_allocation_failure(*backend, 2);  // allocate_many is one allocation: the next one fails
  auto parts = backend->allocate_many(specs, AllocTag::gradient);
  ASSERT_TRUE(parts) << parts.error().str();
  EXPECT_FALSE(backend->allocate(Shape{1}, DType::float32, AllocTag::value));
  ASSERT_EQ(parts->size(), specs.size());
  EXPECT_EQ(backend->stats().count(AllocTag::gradient), empty.count(AllocTag::gradient) + 5);
  EXPECT_EQ(backend->stats().bytes(AllocTag::gradient), empty.bytes(AllocTag::gradient) + 12 + 0 + 40 + 4 + 28);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    Buffer& b = (*parts)[i];
    EXPECT_EQ(b.shape(), specs[i].shape);
    EXPECT_EQ(b.dtype(), specs[i].dtype);
    EXPECT_EQ(b.tag(), AllocTag::gradient);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 16, 0u) << i;
    if (b.numel() > 0) {
      ASSERT_TRUE(detail::engine_of(*backend).prim(Prim::fill, static_cast<double>(i + 1), {}, b));
    }
  }
  // Release all but the last, in a scrambled order: the last still holds its own values.
  for (std::size_t i : {2, 0, 3, 1}) (*parts)[i].reset();
  EXPECT_EQ(backend->stats().count(AllocTag::gradient), empty.count(AllocTag::gradient) + 1);
  EXPECT_EQ(must(backend->download((*parts)[4])).to_vector<float>(), std::vector<float>(7, 5.0f));
  parts->clear();
  EXPECT_EQ(backend->stats(), empty);
}

// Gradients from a program outlive the tape, and a slot taken out of them outlives the rest.
TEST_P(Programs, ProgramGradientsOutliveTheTapeAndEachOther) {
  const MemoryStats empty = backend->stats();
  std::optional<Gradients> kept;
  NodeId x, y;
  HostArray dy_expected;
  {
    Tape t = tape_with_threshold(backend, kSmall);
    x = must(t.leaf(host(std::vector<double>{0.5, 1.5})));
    y = must(t.exp(x));
    const NodeId z = must(t.mul(y, must(t.sin(x))));
    kept.emplace(std::move(must(t.backward(z, host(std::vector<double>{1.0, 1.0})))));
    dy_expected = must(kept->host(y));
  }
  EXPECT_EQ(backend->stats().count(AllocTag::value), empty.count(AllocTag::value));
  Buffer dy = kept->take(y);
  EXPECT_GT(must(kept->host(x)).at<double>(1), 0.0);
  kept.reset();
  EXPECT_EQ(backend->stats().count(AllocTag::gradient), empty.count(AllocTag::gradient) + 1);
  EXPECT_EQ(must(backend->download(dy)).bytes, dy_expected.bytes);
  dy.reset();
  EXPECT_EQ(backend->stats(), empty);
}

TW_INSTANTIATE_PER_BACKEND(Programs);

}  // namespace
}  // namespace tapewise::testing

// bench/chain.cpp — the chain benchmark: a graph shape recorded, run backward and released per
// run, timed on the host as bench_torch.py times PyTorch, and on CUDA the same run's device time alone
// (the whole run queued behind a closed gate first). One harness; a shape is a function that records
// its graph and names the output and the leaves whose gradients backward returns.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "backends/compiled_pieces.hpp"

namespace tapewise::bench {
namespace {

struct RunTimes {
  double record_s = 0, backward_s = 0, teardown_s = 0;
};

// What a shape's recording hands the harness: the node backward starts from, and the leaves whose
// gradients it returns (as PyTorch's chain asks autograd.grad for them).
struct Recorded {
  NodeId output = -1;
  std::vector<NodeId> leaves;
};

// A graph shape. A run's leaves are x (leaves[0]) and then `fresh_leaves(nodes)` more, in the order
// the recording takes them; `tape_nodes(nodes)` is how many nodes other than leaves it records when
// asked for `nodes` (the per-node cost divides by it).
struct GraphShape {
  const char* name;
  const char* ops;
  int (*fresh_leaves)(int nodes);
  int (*tape_nodes)(int nodes);
  Result<Recorded> (*record)(Tape& tape, std::vector<Buffer>& leaves, int nodes);
};

int no_fresh_leaves(int) { return 0; }
int one_fresh_leaf_per_node(int nodes) { return nodes; }
int every_node(int nodes) { return nodes; }

// A failed recording step's error, naming the step ("chain: node 7: ..."); the text is built only on
// failure, so that it costs the timed recording nothing.
template <class T>
Result<T> at_step(Result<T> r, const char* step, int index) {
  if (!r) return fail(r.error().code, std::string("chain: ") + step + " " + std::to_string(index) + ": " + r.error().message);
  return r;
}

// unary: sin, tanh, sigmoid, scale 0.9, relu repeated on one value: the first chain. Its error text
// is built only on failure, as the other shapes' (until 2026-12-06 it was built for every node, about
// 0.015 us of each node's recording here: record times before then include it).
Result<Recorded> record_unary(Tape& tape, std::vector<Buffer>& leaves, int nodes) {
  TAPEWISE_TRY(h, in_context(tape.leaf(std::move(leaves[0])), "chain: leaf"));
  const NodeId x = h;
  for (int i = 0; i < nodes; ++i) {
    Result<NodeId> next = i % 5 == 0   ? tape.sin(h)
                          : i % 5 == 1 ? tape.tanh(h)
                          : i % 5 == 2 ? tape.sigmoid(h)
                          : i % 5 == 3 ? tape.scale(h, 0.9)
                                       : tape.relu(h);
    TAPEWISE_TRY(id, at_step(std::move(next), "node", i + 1));
    h = id;
  }
  return Recorded{h, {x}};
}

// binary: node i is op(h, leaf i) with op = mul, add, max, sub repeated, so h <- max(h*a + b, c) - d
// every four nodes. With leaves uniform in [-2, 2) the product's log shrinks on average (E log|a| =
// log 2 - 1 < 0) while b, c and d keep putting O(1) back, so values stay finite and nonzero over
// 1,000 nodes; max cuts the gradient where c wins, so only the last few dozen leaves get nonzero
// gradients (their VJPs run all the same).
Result<Recorded> record_binary(Tape& tape, std::vector<Buffer>& leaves, int nodes) {
  TAPEWISE_TRY(h, in_context(tape.leaf(std::move(leaves[0])), "chain: leaf"));
  Recorded r;
  r.leaves.reserve(static_cast<std::size_t>(nodes) + 1);
  r.leaves.push_back(h);
  for (int i = 0; i < nodes; ++i) {
    TAPEWISE_TRY(fresh, at_step(tape.leaf(std::move(leaves[static_cast<std::size_t>(i) + 1])), "leaf", i + 1));
    r.leaves.push_back(fresh);
    Result<NodeId> next = i % 4 == 0   ? tape.mul(h, fresh)
                          : i % 4 == 1 ? tape.add(h, fresh)
                          : i % 4 == 2 ? tape.max(h, fresh)
                                       : tape.sub(h, fresh);
    TAPEWISE_CHECK(at_step(next, "node", i + 1));
    h = *next;
  }
  r.output = h;
  return r;
}

// fanout: h -> sin(h), tanh(h), sigmoid(h) -> add(add(sin, tanh), sigmoid) -> scale 0.5, six tape
// nodes a cycle, whole cycles only (996 nodes for 1,000). h stays in (-1, 1.5); each h feeds three
// nodes, so backward accumulates three contributions into its gradient.
constexpr int kFanoutCycle = 6;
int whole_fanout_cycles(int nodes) { return nodes / kFanoutCycle * kFanoutCycle; }

Result<Recorded> record_fanout(Tape& tape, std::vector<Buffer>& leaves, int nodes) {
  TAPEWISE_TRY(h, in_context(tape.leaf(std::move(leaves[0])), "chain: leaf"));
  const NodeId x = h;
  for (int i = 0; i + kFanoutCycle <= nodes; i += kFanoutCycle) {
    TAPEWISE_TRY(s, at_step(tape.sin(h), "node", i + 1));
    TAPEWISE_TRY(t, at_step(tape.tanh(h), "node", i + 2));
    TAPEWISE_TRY(g, at_step(tape.sigmoid(h), "node", i + 3));
    TAPEWISE_TRY(st, at_step(tape.add(s, t), "node", i + 4));
    TAPEWISE_TRY(sum, at_step(tape.add(st, g), "node", i + 5));
    TAPEWISE_TRY(next, at_step(tape.scale(sum, 0.5), "node", i + 6));
    h = next;
  }
  return Recorded{h, {x}};
}

constexpr GraphShape kShapes[] = {
    {"unary", "sin, tanh, sigmoid, scale 0.9, relu", no_fresh_leaves, every_node, record_unary},
    {"binary", "mul, add, max, sub, each with a fresh leaf", one_fresh_leaf_per_node, every_node, record_binary},
    {"fanout", "sin, tanh, sigmoid of h; add, add; scale 0.5", no_fresh_leaves, whole_fanout_cycles, record_fanout},
};

const GraphShape* find_shape(const std::string& name) {
  for (const GraphShape& s : kShapes)
    if (name == s.name) return &s;
  return nullptr;
}

// The first kChainValuesElements elements of a host array, as numbers (float32 widened exactly).
json first_elements(const HostArray& a) {
  json out = json::array();
  for (std::int64_t i = 0; i < std::min(a.numel(), kChainValuesElements); ++i) out.push_back(a.as_double(i));
  return out;
}

// What --chain-values keeps of a run: every leaf's values, the output's, and each returned leaf gradient.
Result<json> run_values(const Tape& tape, const Recorded& rec, const Gradients& grads) {
  json leaves = json::array(), gradients = json::array();
  for (const NodeId id : rec.leaves) {
    TAPEWISE_TRY(value, in_context(tape.value(id), "chain values: leaf"));
    leaves.push_back(first_elements(value));
    if (!grads.has(id)) {  // reached by no contribution: no gradient, as PyTorch's None
      gradients.push_back(nullptr);
      continue;
    }
    TAPEWISE_TRY(grad, in_context(grads.host(id), "chain values: leaf gradient"));
    gradients.push_back(first_elements(grad));
  }
  TAPEWISE_TRY(output, in_context(tape.value(rec.output), "chain values: output"));
  return json{{"leaves", leaves}, {"output", first_elements(output)}, {"gradients", gradients}};
}

// One run: a tape on the run's leaves, the shape recorded, backward from its output with a seed of
// ones (PyTorch's torch.ones_like inside its timed region: an allocation and a fill kernel here), then
// everything dropped, as PyTorch frees its graph and gradients when its chain() returns. `values`
// (an untimed warm-up run only) receives run_values.
Result<RunTimes> chain_once(const std::shared_ptr<Backend>& be, const ChainSetup& setup, const GraphShape& graph,
                            std::vector<Buffer> leaves, json* values = nullptr) {
  using clock = std::chrono::steady_clock;
  const Shape shape = leaves.front().shape();
  const auto t0 = clock::now();
  auto tape = std::make_unique<Tape>(be);
  TAPEWISE_CHECK(in_context(tape->set_options(setup.tape), "chain: tape options"));
  TAPEWISE_TRY(rec, graph.record(*tape, leaves, setup.nodes));
  const auto t1 = clock::now();
  TAPEWISE_TRY(ones, in_context(be->allocate(shape, leaves.front().dtype(), AllocTag::gradient), "chain: seed"));
  TAPEWISE_CHECK(in_context(detail::engine_of(*be).prim(Prim::fill, 1.0, {}, ones), "chain: seed fill"));
  // As PyTorch's chain: the leaves' gradients (x.grad), or, with --chain-gradients all, every node's.
  TAPEWISE_TRY(gradients, in_context(setup.every_gradient ? tape->backward(rec.output, ones)
                                                          : tape->backward(rec.output, ones, rec.leaves),
                                     "chain: backward"));
  auto grads = std::make_unique<Gradients>(std::move(gradients));
  const auto t2 = clock::now();
  if (values) {
    TAPEWISE_TRY(kept, run_values(*tape, rec, *grads));
    *values = std::move(kept);
  }
  const auto t2_after_values = clock::now();
  grads.reset();
  ones.reset();
  tape.reset();
  const auto t3 = clock::now();
  return RunTimes{std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
                  std::chrono::duration<double>(t3 - t2_after_values).count()};
}

// Holds a stream at a host function until opened: work queued behind it waits, so a run queued
// whole and then released shows the device's time alone between two events. Only for runs of a few
// launches (programs): a closed gate with more launches queued than the stream holds would block
// the host that is to open it.
class StreamGate {
 public:
  [[nodiscard]] Result<void> close(cudaStream_t stream) {
    open_.store(false);
    return cuda_ok(cudaLaunchHostFunc(stream, &StreamGate::wait, this), "cudaLaunchHostFunc (gate)");
  }
  void open() { open_.store(true); }

 private:
  static void CUDART_CB wait(void* self) {
    while (!static_cast<StreamGate*>(self)->open_.load()) std::this_thread::yield();
  }
  std::atomic<bool> open_{true};
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The run's device time alone on `stream`, in us per node: the whole run queued behind a closed gate,
// then released between two events.
Result<double> gated_us_per_node(const std::shared_ptr<Backend>& be, const ChainSetup& setup, const GraphShape& graph,
                                 cudaStream_t stream, std::vector<Buffer> leaves, int nodes) {
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Events() {
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
    }
  } events;
  TAPEWISE_CHECK(cuda_ok(cudaEventCreate(&events.start), "cudaEventCreate"));
  TAPEWISE_CHECK(cuda_ok(cudaEventCreate(&events.stop), "cudaEventCreate"));
  StreamGate gate;
  TAPEWISE_CHECK(gate.close(stream));
  Result<void> queued = cuda_ok(cudaEventRecord(events.start, stream), "cudaEventRecord");
  if (queued) queued = chain_once(be, setup, graph, std::move(leaves)).map([](const RunTimes&) {});
  if (queued) queued = cuda_ok(cudaEventRecord(events.stop, stream), "cudaEventRecord");
  gate.open();  // before any return: the stream waits on it
  TAPEWISE_CHECK(queued);
  TAPEWISE_CHECK(cuda_ok(cudaEventSynchronize(events.stop), "chain: synchronize (gated run)"));
  float ms = 0;
  TAPEWISE_CHECK(cuda_ok(cudaEventElapsedTime(&ms, events.start, events.stop), "cudaEventElapsedTime"));
  return 1e3 * ms / nodes;
}

// Random values in [-2, 2), never zero, from `state` (a linear congruential generator, advanced).
std::vector<float> random_values(std::int64_t n, std::uint64_t& state) {
  std::vector<float> xs(static_cast<std::size_t>(n));
  for (float& x : xs) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<std::int64_t>(state >> 40) - (std::int64_t{1} << 23)) * 0x1p-22f + 0x1p-30f;
  }
  return xs;
}

// The inputs of every run, made before any clock starts: x, and the shape's fresh leaves. Each run
// takes x as a fresh copy of its own (the tape owns it and frees it at teardown, as the first chain
// did) and the fresh leaves as views of buffers kept across runs, as PyTorch's leaves are tensors made
// once (a copy per run of 1,000 leaves would not fit at 2^20 elements).
// The values rounded to the dtype (float32's are themselves; a 16-bit value that rounds to zero
// stays zero: the chain's math never divides).
HostArray values_in(DType d, const Shape& shape, const std::vector<float>& xs) {
  auto as = [&]<class T>() {
    std::vector<T> t(xs.size());
    for (std::size_t i = 0; i < xs.size(); ++i) t[i] = static_cast<T>(xs[i]);
    return HostArray::of<T>(shape, t);
  };
  switch (d) {
    case DType::float64: return as.template operator()<double>();
    case DType::bfloat16: return as.template operator()<bfloat16>();
    case DType::float16: return as.template operator()<float16>();
    case DType::float32: break;
  }
  return HostArray::of<float>(shape, xs);
}

class RunInputs {
 public:
  [[nodiscard]] Result<void> make(Backend& be, DType dtype, const Shape& shape, int fresh_leaves, int runs,
                                  std::uint64_t seed) {
    std::uint64_t state = seed;
    TAPEWISE_TRY(x, in_context(be.upload(values_in(dtype, shape, random_values(shape.numel(), state))),
                               "chain: upload x"));
    for (int k = 0; k < fresh_leaves; ++k) {
      TAPEWISE_TRY(leaf, in_context(be.upload(values_in(dtype, shape, random_values(shape.numel(), state))),
                                    "chain: upload leaf " + std::to_string(k + 1)));
      fresh_.push_back(std::move(leaf));
    }
    for (int r = 0; r < runs; ++r) {
      std::vector<Buffer> leaves;
      TAPEWISE_TRY(copy, in_context(be.allocate(shape, dtype, AllocTag::value), "chain: allocate leaf"));
      const Buffer* in[1] = {&x};
      TAPEWISE_CHECK(in_context(detail::engine_of(be).prim(Prim::copy, 0.0, in, copy), "chain: copy leaf"));
      leaves.push_back(std::move(copy));
      for (Buffer& f : fresh_) {
        TAPEWISE_TRY(view, in_context(be.wrap(f.data(), shape, dtype), "chain: view of a leaf"));
        leaves.push_back(std::move(view));
      }
      runs_.push_back(std::move(leaves));
    }
    return in_context(be.synchronize(), "chain: synchronize");
  }
  // The next run's leaves (each run's once).
  std::vector<Buffer> next() { return std::move(runs_[next_++]); }

 private:
  std::vector<Buffer> fresh_;  // before runs_: destroyed after the views over them
  std::vector<std::vector<Buffer>> runs_;
  std::size_t next_ = 0;
};

}  // namespace

const std::vector<std::string>& chain_shape_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const GraphShape& s : kShapes) out.push_back(s.name);
    return out;
  }();
  return names;
}

Result<ChainResult> run_chain(const std::shared_ptr<Backend>& be, const ChainSetup& setup, const std::string& shape_name,
                              int log2n, std::uint64_t seed, json* values) {
  const GraphShape* graph = find_shape(shape_name);
  if (!graph) return fail(ErrorCode::InvalidArgument, "chain: unknown shape '" + shape_name + "'");
  ChainResult c;
  c.shape = graph->name;
  c.dtype = setup.dtype;
  c.ops = graph->ops;
  c.nodes = graph->tape_nodes(setup.nodes);
  c.leaves = 1 + graph->fresh_leaves(setup.nodes);
  c.log2n = log2n;
  c.n = std::int64_t{1} << log2n;
  if (c.nodes < 1) return fail(ErrorCode::InvalidArgument, "chain " + c.shape + ": fewer nodes than one cycle");
  const auto stream = static_cast<cudaStream_t>(cuda_stream(*be));
  const bool gated = stream && c.n <= setup.tape.program_threshold;
  constexpr int kGatedRuns = 3;
  RunInputs inputs;
  const int run_count = c.warmup + c.runs * setup.calls + (gated ? kGatedRuns : 0);
  TAPEWISE_CHECK(inputs.make(*be, setup.dtype, Shape{c.n}, graph->fresh_leaves(setup.nodes), run_count, seed));

  for (int r = 0; r < c.warmup; ++r) {
    TAPEWISE_CHECK(chain_once(be, setup, *graph, inputs.next(), r == 0 ? values : nullptr));
    // The first run queued the tape programs' long pieces for compilation (the interpreter ran them
    // meanwhile): what is timed is the compiled kernels, as in any run after the first.
    if (r == 0) detail::wait_for_compiled_pieces();
  }
  TAPEWISE_CHECK(in_context(be->synchronize(), "chain: synchronize"));
  // Each block of c.runs runs is timed alone; its runs queue back to back, as a training loop's steps do.
  c.calls = setup.calls;
  RunTimes sum;
  for (int call = 0; call < c.calls; ++call) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < c.runs; ++r) {
      TAPEWISE_TRY(t, chain_once(be, setup, *graph, inputs.next()));
      sum.record_s += t.record_s;
      sum.backward_s += t.backward_s;
      sum.teardown_s += t.teardown_s;
    }
    TAPEWISE_CHECK(in_context(be->synchronize(), "chain: synchronize"));
    const double block_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    c.us_per_node_calls.push_back(block_s * 1e6 / (static_cast<double>(c.runs) * c.nodes));
  }
  c.us_per_node = median(c.us_per_node_calls);
  const double per = 1e6 / (static_cast<double>(c.runs) * c.calls * c.nodes);
  c.record_host_us_per_node = sum.record_s * per;
  c.backward_host_us_per_node = sum.backward_s * per;
  c.teardown_host_us_per_node = sum.teardown_s * per;

  if (gated) {
    std::vector<double> device_us;
    for (int r = 0; r < kGatedRuns; ++r) {
      TAPEWISE_TRY(us, gated_us_per_node(be, setup, *graph, stream, inputs.next(), c.nodes));
      device_us.push_back(us);
    }
    c.device_us_per_node = median(device_us);
  }
  return c;
}

}  // namespace tapewise::bench

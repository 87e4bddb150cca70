// tools/bench/chain.cpp — the 1,000-node chain (sin, tanh, sigmoid, scale 0.9, relu repeated) at one
// size: record + backward + release per run, timed on the host as bench_torch.py times PyTorch, and
// on CUDA the same run's device time alone (the whole run queued behind a closed gate first).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "bench.hpp"

namespace tapewise::bench {
namespace {

struct RunTimes {
  double record_s = 0, backward_s = 0, teardown_s = 0;
};

// One run: a tape on `leaf`, `nodes` nodes, backward from the last with a seed of ones (PyTorch's
// torch.ones_like inside its timed region: an allocation and a fill kernel here), then everything
// dropped, as PyTorch frees its graph and gradients when its chain() returns.
Result<RunTimes> chain_once(const std::shared_ptr<Backend>& be, const ChainSetup& setup, Buffer leaf, int nodes) {
  using clock = std::chrono::steady_clock;
  const Shape shape = leaf.shape();
  const auto t0 = clock::now();
  auto tape = std::make_unique<Tape>(be);
  TAPEWISE_CHECK(in_context(tape->set_options(setup.tape), "chain: tape options"));
  TAPEWISE_TRY(h, in_context(tape->leaf(std::move(leaf)), "chain: leaf"));
  const NodeId leaf_id = h;
  for (int i = 0; i < nodes; ++i) {
    Result<NodeId> next = i % 5 == 0   ? tape->sin(h)
                          : i % 5 == 1 ? tape->tanh(h)
                          : i % 5 == 2 ? tape->sigmoid(h)
                          : i % 5 == 3 ? tape->scale(h, 0.9)
                                       : tape->relu(h);
    TAPEWISE_CHECK(in_context(next, "chain: node " + std::to_string(i + 1)));
    h = *next;
  }
  const auto t1 = clock::now();
  TAPEWISE_TRY(ones, in_context(be->allocate(shape, DType::float32, AllocTag::gradient), "chain: seed"));
  TAPEWISE_CHECK(in_context(detail::engine_of(*be).prim(Prim::fill, 1.0, {}, ones), "chain: seed fill"));
  // As PyTorch's chain: the leaf's gradient (x.grad), or, with --chain-gradients all, every node's.
  const NodeId wanted[1] = {leaf_id};
  TAPEWISE_TRY(gradients, in_context(setup.every_gradient ? tape->backward(h, ones) : tape->backward(h, ones, wanted),
                                     "chain: backward"));
  auto grads = std::make_unique<Gradients>(std::move(gradients));
  const auto t2 = clock::now();
  grads.reset();
  ones.reset();
  tape.reset();
  const auto t3 = clock::now();
  return RunTimes{std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
                  std::chrono::duration<double>(t3 - t2).count()};
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
Result<double> gated_us_per_node(const std::shared_ptr<Backend>& be, const ChainSetup& setup, cudaStream_t stream,
                                 Buffer leaf, int nodes) {
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
  if (queued) queued = chain_once(be, setup, std::move(leaf), nodes).map([](const RunTimes&) {});
  if (queued) queued = cuda_ok(cudaEventRecord(events.stop, stream), "cudaEventRecord");
  gate.open();  // before any return: the stream waits on it
  TAPEWISE_CHECK(queued);
  TAPEWISE_CHECK(cuda_ok(cudaEventSynchronize(events.stop), "chain: synchronize (gated run)"));
  float ms = 0;
  TAPEWISE_CHECK(cuda_ok(cudaEventElapsedTime(&ms, events.start, events.stop), "cudaEventElapsedTime"));
  return 1e3 * ms / nodes;
}

}  // namespace

Result<ChainResult> run_chain(const std::shared_ptr<Backend>& be, const ChainSetup& setup, int log2n,
                              std::uint64_t seed) {
  ChainResult c;
  c.log2n = log2n;
  c.n = std::int64_t{1} << log2n;
  const auto stream = static_cast<cudaStream_t>(cuda_stream(*be));
  const bool gated = stream && c.n <= setup.tape.program_threshold;
  constexpr int kGatedRuns = 3;
  const Shape shape{c.n};
  // Random inputs (never zeros); one fresh leaf per run, made before any clock starts.
  std::vector<float> xs(static_cast<std::size_t>(c.n));
  std::uint64_t state = seed;
  for (float& x : xs) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<std::int64_t>(state >> 40) - (std::int64_t{1} << 23)) * 0x1p-22f + 0x1p-30f;
  }
  TAPEWISE_TRY(x, in_context(be->upload(HostArray::of<float>(shape, xs)), "chain: upload x"));
  std::vector<Buffer> leaves;
  for (int r = 0; r < c.warmup + c.runs + (gated ? kGatedRuns : 0); ++r) {
    TAPEWISE_TRY(leaf, in_context(be->allocate(shape, DType::float32, AllocTag::value), "chain: allocate leaf"));
    const Buffer* in[1] = {&x};
    TAPEWISE_CHECK(in_context(detail::engine_of(*be).prim(Prim::copy, 0.0, in, leaf), "chain: copy leaf"));
    leaves.push_back(std::move(leaf));
  }
  TAPEWISE_CHECK(in_context(be->synchronize(), "chain: synchronize"));
  std::size_t next_leaf = 0;

  for (int r = 0; r < c.warmup; ++r) TAPEWISE_CHECK(chain_once(be, setup, std::move(leaves[next_leaf++]), c.nodes));
  TAPEWISE_CHECK(in_context(be->synchronize(), "chain: synchronize"));
  RunTimes sum;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < c.runs; ++r) {
    TAPEWISE_TRY(t, chain_once(be, setup, std::move(leaves[next_leaf++]), c.nodes));
    sum.record_s += t.record_s;
    sum.backward_s += t.backward_s;
    sum.teardown_s += t.teardown_s;
  }
  TAPEWISE_CHECK(in_context(be->synchronize(), "chain: synchronize"));
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double per = 1e6 / (static_cast<double>(c.runs) * c.nodes);
  c.us_per_node = total_s * per;
  c.record_host_us_per_node = sum.record_s * per;
  c.backward_host_us_per_node = sum.backward_s * per;
  c.teardown_host_us_per_node = sum.teardown_s * per;

  if (gated) {
    std::vector<double> device_us;
    for (int r = 0; r < kGatedRuns; ++r) {
      TAPEWISE_TRY(us, gated_us_per_node(be, setup, stream, std::move(leaves[next_leaf++]), c.nodes));
      device_us.push_back(us);
    }
    c.device_us_per_node = median(device_us);
  }
  return c;
}

}  // namespace tapewise::bench

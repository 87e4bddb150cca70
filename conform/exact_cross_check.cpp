// conform/exact_cross_check.cpp — tapewise-cross-check: the CPU backend against a CUDA backend in exact
// mode, bit for bit (any NaN matches any NaN), on float32 inputs through whole tapes: each node's forward
// and, with --vjp, its fused and staged VJPs at a fixed g. A unary node runs float32 bit patterns
// (--stride 1: every one of the 2^32); a binary node runs 2^--pairs random pairs of bit patterns. The
// chunks of inputs run on --jobs threads at once (both backends are shared by threads; the CPU backend
// spreads each chunk over its own pool too). Exit 0: no difference; 1: a difference (the first few
// printed); 2: bad usage, or no CUDA device.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <tapewise/tapewise.hpp>

namespace {

using namespace tapewise;

constexpr std::uint64_t kChunk = std::uint64_t{1} << 22;
constexpr std::uint64_t kUnaryInputs = std::uint64_t{1} << 32;

struct Options {
  std::vector<Op> ops;
  std::uint64_t stride = 1;
  int pairs_log2 = 28;
  int jobs = 0;
  bool vjp = false;
  float g = 0.75f;
};

int usage(const std::string& why) {
  std::fprintf(stderr,
               "tapewise-cross-check: %s\nusage: tapewise-cross-check [--ops a,b|unary|binary|all] [--stride N] "
               "[--pairs LOG2] [--jobs N] [--vjp]\n",
               why.c_str());
  return 2;
}

bool parse_count(const std::string& v, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out) {
  char* end = nullptr;
  if (v.empty() || v[0] == '-') return false;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (*end || n < lo || n > hi) return false;
  out = n;
  return true;
}

bool parse(int argc, char** argv, Options& o, std::string& why) {
  std::string ops = "unary";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--vjp") { o.vjp = true; continue; }
    if (a != "--ops" && a != "--stride" && a != "--pairs" && a != "--jobs") { why = "unknown option " + a; return false; }
    if (i + 1 >= argc) { why = a + " needs a value"; return false; }
    const std::string v = argv[++i];
    std::uint64_t n = 0;
    if (a == "--ops") {
      ops = v;
    } else if (a == "--stride") {
      if (!parse_count(v, 1, kUnaryInputs, n)) { why = "--stride: '" + v + "' is not 1..2^32"; return false; }
      o.stride = n;
    } else if (a == "--pairs") {
      if (!parse_count(v, 10, 40, n)) { why = "--pairs: '" + v + "' is not a log2 count 10..40"; return false; }
      o.pairs_log2 = static_cast<int>(n);
    } else {
      if (!parse_count(v, 1, 256, n)) { why = "--jobs: '" + v + "' is not 1..256"; return false; }
      o.jobs = static_cast<int>(n);
    }
  }
  for (const OpInfo& info : kOps) {
    const bool named = ("," + ops + ",").find("," + std::string(info.name) + ",") != std::string::npos;
    const bool in_group = ops == "all" || (ops == "unary" && info.arity == 1) || (ops == "binary" && info.arity == 2);
    if (in_group || named) o.ops.push_back(info.op);
  }
  if (o.ops.empty()) { why = "--ops: '" + ops + "' names no node"; return false; }
  return true;
}

// Every result of one chunk: the forward, then (with --vjp) the fused and the staged dx of each input.
std::vector<HostArray> results(const std::shared_ptr<Backend>& backend, Op op, const std::vector<HostArray>& inputs,
                               const HostArray& g, bool vjp) {
  Tape tape(backend);
  std::vector<NodeId> leaves;
  for (const HostArray& x : inputs) leaves.push_back(tape.leaf(x).value());
  const NodeId y = tape.apply(op, leaves, default_scalars(kOps[static_cast<int>(op)])).value();
  std::vector<HostArray> out{tape.value(y).value()};
  if (vjp)
    for (VjpPath path : {VjpPath::fused, VjpPath::staged}) {
      const Gradients grads = tape.backward(y, g, path).value();
      for (NodeId leaf : leaves) out.push_back(grads.host(leaf).value());
    }
  return out;
}

bool same(float a, float b) {
  std::uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub || (a != a && b != b);
}

float from_bits(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// The inputs of chunk `index` of a node: unary, bit patterns index*kChunk*stride + k*stride; binary,
// pairs from a generator seeded by the chunk's index (so a run is reproducible and chunks independent).
std::vector<std::vector<float>> chunk_inputs(int arity, std::uint64_t index, const Options& o) {
  std::vector<std::vector<float>> xs(static_cast<std::size_t>(arity));
  if (arity == 1) {
    const std::uint64_t first = index * kChunk * o.stride;
    const std::uint64_t n = std::min(kChunk, (kUnaryInputs - first + o.stride - 1) / o.stride);
    xs[0].resize(n);
    for (std::uint64_t k = 0; k < n; ++k) xs[0][k] = from_bits(static_cast<std::uint32_t>(first + k * o.stride));
    return xs;
  }
  std::mt19937_64 rng(0x7a9e5e1dULL + index);
  for (auto& x : xs) {
    x.resize(kChunk);
    for (float& v : x) v = from_bits(static_cast<std::uint32_t>(rng()));
  }
  return xs;
}

std::uint64_t chunks_of(int arity, const Options& o) {
  if (arity == 2) return (std::uint64_t{1} << o.pairs_log2) / kChunk + ((std::uint64_t{1} << o.pairs_log2) % kChunk != 0);
  const std::uint64_t inputs = (kUnaryInputs + o.stride - 1) / o.stride;
  return (inputs + kChunk - 1) / kChunk;
}

struct NodeTally {
  std::atomic<std::uint64_t> inputs{0}, differences{0}, chunks_left{0};
};

struct Task {
  std::size_t node;
  std::uint64_t chunk;
};

void report_node(Op op, const NodeTally& tally, const Options& o) {
  const std::string inputs = kOps[static_cast<int>(op)].arity == 1 ? "inputs (every " + std::to_string(o.stride) + ")" : "random pairs";
  std::printf("%-8s float32: %llu %s; %s, %llu results differ\n", op_name(op), static_cast<unsigned long long>(tally.inputs.load()),
              inputs.c_str(), o.vjp ? "forward, fused and staged dx at g = 0.75" : "forward",
              static_cast<unsigned long long>(tally.differences.load()));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string why;
  if (!parse(argc, argv, o, why)) return usage(why);
  CudaOptions exact;
  exact.math = MathMode::exact;
  auto cuda = make_cuda_backend(exact);
  if (!cuda) return usage("no CUDA backend: " + cuda.error().str());
  const std::shared_ptr<Backend> cpu = make_cpu_backend();
  const int jobs = o.jobs > 0 ? o.jobs : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);

  std::vector<Task> tasks;
  std::vector<NodeTally> tallies(o.ops.size());
  for (std::size_t n = 0; n < o.ops.size(); ++n) {
    tallies[n].chunks_left = chunks_of(kOps[static_cast<int>(o.ops[n])].arity, o);
    for (std::uint64_t c = 0; c < tallies[n].chunks_left; ++c) tasks.push_back({n, c});
  }
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> printed{0};
  std::mutex print_lock;

  const auto work = [&] {
    for (std::size_t t; (t = next.fetch_add(1)) < tasks.size();) {
      const Op op = o.ops[tasks[t].node];
      const int arity = kOps[static_cast<int>(op)].arity;
      const std::vector<std::vector<float>> xs = chunk_inputs(arity, tasks[t].chunk, o);
      const Shape shape{static_cast<std::int64_t>(xs[0].size())};
      std::vector<HostArray> inputs;
      for (const auto& x : xs) inputs.push_back(HostArray::of(shape, x));
      const HostArray g = HostArray::of(shape, std::vector<float>(xs[0].size(), o.g));
      const std::vector<HostArray> want = results(cpu, op, inputs, g, o.vjp), got = results(*cuda, op, inputs, g, o.vjp);
      std::uint64_t differ = 0;
      for (std::size_t r = 0; r < want.size(); ++r) {
        if (want[r].bytes == got[r].bytes) continue;
        for (std::int64_t i = 0; i < want[r].numel(); ++i) {
          if (same(got[r].at<float>(i), want[r].at<float>(i))) continue;
          ++differ;
          if (printed.fetch_add(1) >= 10) continue;
          const std::string what = r == 0 ? "forward" : std::string((r - 1) / arity == 0 ? "fused" : "staged") + " d" +
                                                            (arity == 1 ? "x" : (r - 1) % arity == 0 ? "a" : "b");
          const std::lock_guard<std::mutex> lock(print_lock);
          std::printf("DIFFERENT %s %s at x = %a%s: cuda %a, cpu %a\n", op_name(op), what.c_str(), xs[0][static_cast<std::size_t>(i)],
                      arity == 2 ? (", y = " + std::to_string(xs[1][static_cast<std::size_t>(i)])).c_str() : "",
                      got[r].at<float>(i), want[r].at<float>(i));
        }
      }
      NodeTally& tally = tallies[tasks[t].node];
      tally.inputs += xs[0].size();
      tally.differences += differ;
      // A node's line as soon as its last chunk is done, so a run cut short by a time limit still says
      // which nodes it finished.
      if (--tally.chunks_left == 0) {
        const std::lock_guard<std::mutex> lock(print_lock);
        report_node(op, tally, o);
      }
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j) threads.emplace_back(work);
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::uint64_t differences = 0, checked = 0;
  for (const NodeTally& tally : tallies) {
    differences += tally.differences;
    checked += tally.inputs;
  }
  std::printf("%s: %llu inputs over %zu nodes, %llu differences, %.1f s on %d jobs (CPU backend: %s; CUDA: %s)\n",
              differences ? "DIFFER" : "IDENTICAL", static_cast<unsigned long long>(checked), o.ops.size(),
              static_cast<unsigned long long>(differences), seconds, jobs, cpu->describe().c_str(), (*cuda)->describe().c_str());
  return differences ? 1 : 0;
}

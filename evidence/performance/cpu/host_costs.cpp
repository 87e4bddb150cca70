// evidence/performance/cpu/host_costs.cpp — the tape's host costs per node on the CPU backend:
// bench/chain.cpp's unary chain (sin, tanh, sigmoid, scale 0.9, relu; backward returning the leaf's
// gradient) recorded, run backward and released as tapewise-bench times it, then the same work in
// parts through the library's internals: recording without running a forward, the forwards, the
// backward's plan, slot allocation, program build, program run and hand-out, and the release.
// tapewise-bench needs CUDA to build; this needs only a CPU build's static library:
//   c++ -O3 -std=c++20 -Icuda -Iinclude -Ibuild-cpu/include -o build-cpu/host_costs
//       evidence/performance/cpu/host_costs.cpp build-cpu/libtapewise.a    (one command, from the root)
//   build-cpu/host_costs [--per-node] [log2n ...]
// (sizes 2^0 and 2^12 by default; --per-node times the chain with program_threshold 0, node by node).
// One thread unless TAPEWISE_CPU_THREADS is set (with a pool the process is multi-threaded, and
// shared_ptr counts take atomic instructions). Prints, per size, each phase's median over the runs in
// microseconds of the thread's CPU time per node, and the chain total's 10th and 90th percentiles.
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <tapewise/tapewise.hpp>

#include "backends/engine.hpp"
#include "tape/backward_plan.hpp"
#include "tape/backward_program.hpp"

using namespace tapewise;

// The calling thread's CPU time, not the wall clock: on a machine shared with other work the thread
// is often off the CPU, and a wall clock would count that (a call costs well under a microsecond, a
// thousandth of a microsecond per node).
struct clock_type {
  using time_point = double;
  static double now() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
};

namespace {

constexpr int kNodes = 1000;
bool chain_per_node = false;  // --per-node: the chain with program_threshold 0 (its parts still as programs)

double seconds(double a, double b) { return b - a; }

void die(const Error& e) {
  std::fprintf(stderr, "host_costs: %s\n", e.message.c_str());
  std::exit(1);
}
template <class T>
T ok(Result<T> r) {
  if (!r) die(r.error());
  return std::move(*r);
}
void ok(Result<void> r) {
  if (!r) die(r.error());
}

NodeId record_chain(Tape& tape, Buffer x) {
  NodeId h = ok(tape.leaf(std::move(x)));
  for (int i = 0; i < kNodes; ++i)
    h = ok(i % 5 == 0   ? tape.sin(h)
           : i % 5 == 1 ? tape.tanh(h)
           : i % 5 == 2 ? tape.sigmoid(h)
           : i % 5 == 3 ? tape.scale(h, 0.9)
                        : tape.relu(h));
  return h;
}

struct Phases {
  double record = 0, backward = 0, teardown = 0;               // the chain as tapewise-bench times it
  double record_alone = 0, forwards = 0;                         // recording without its forwards; they
  double plan = 0, slots = 0, build = 0, run = 0, hand_out = 0;  // the backward's parts, run separately
  double release = 0;                                            // the gradient and the tape released
};

Buffer fresh_x(const std::shared_ptr<Backend>& be, std::int64_t n) {
  Buffer x = ok(be->allocate(Shape{n}, DType::float32, AllocTag::value));
  ok(detail::engine_of(*be).prim(Prim::fill, 0.5, {}, x));
  return x;
}

Phases one_run(const std::shared_ptr<Backend>& be, std::int64_t n) {
  Phases p;
  Buffer x = fresh_x(be, n);
  Buffer ones = ok(be->allocate(Shape{n}, DType::float32, AllocTag::gradient));
  ok(detail::engine_of(*be).prim(Prim::fill, 1.0, {}, ones));
  // The chain as bench/chain.cpp's chain_once runs it (the seed made outside the clock here).
  auto t0 = clock_type::now();
  auto tape = std::make_unique<Tape>(be);
  if (chain_per_node) {
    TapeOptions per_node = tape->options();
    per_node.program_threshold = 0;
    ok(tape->set_options(per_node));
  }
  const NodeId out = record_chain(*tape, std::move(x));
  const NodeId leaf = tape->id_at(0);
  auto t1 = clock_type::now();
  auto grads = std::make_unique<Gradients>(ok(tape->backward(out, ones, std::span<const NodeId>(&leaf, 1))));
  auto t2 = clock_type::now();
  grads.reset();
  tape.reset();
  auto t3 = clock_type::now();
  p.record = seconds(t0, t1);
  p.backward = seconds(t1, t2);
  p.teardown = seconds(t2, t3);

  // The same work in parts, each timed alone: recording with no flush (max_pending_nodes above the
  // chain's length, so no forward runs), the deferred forwards as one flush, the backward's parts as
  // Tape::run_plan_as_program runs them, the gradient's and the tape's release.
  auto again = std::make_unique<Tape>(be);
  TapeOptions no_flush = again->options();
  no_flush.max_pending_nodes = 65536;
  ok(again->set_options(no_flush));
  Buffer x2 = fresh_x(be, n);
  auto r0 = clock_type::now();
  const NodeId out2 = record_chain(*again, std::move(x2));
  auto r1 = clock_type::now();
  ok(again->flush());
  auto r2 = clock_type::now();
  const std::span<const Node> nodes(ok(again->node(again->id_at(0))), again->size());
  const auto out_at = static_cast<NodeId>(node_position(out2));
  detail::BackwardPlan plan;
  detail::BackwardProgram builder;
  detail::Engine& engine = detail::engine_of(*be);
  auto b0 = clock_type::now();
  plan.wanted.assign(nodes.size(), 0);
  plan.wanted[0] = 1;
  detail::plan_backward(nodes, out_at, false, plan);
  auto b1 = clock_type::now();
  ok(builder.allocate_slots(engine, plan, nodes, out_at, false));
  auto b2 = clock_type::now();
  const detail::Program& program = builder.build(plan, nodes, out_at, ones, again->options().program_threshold);
  ok(builder.allocate_internal_slots(engine, "backward"));
  auto b3 = clock_type::now();
  ok(engine.run_program(program));
  auto b4 = clock_type::now();
  std::vector<Buffer> returned;
  builder.hand_out([&](NodeId, Buffer slot) { returned.push_back(std::move(slot)); });
  builder.release();
  auto b5 = clock_type::now();
  returned.clear();
  again.reset();
  auto b6 = clock_type::now();
  p.record_alone = seconds(r0, r1);
  p.forwards = seconds(r1, r2);
  p.plan = seconds(b0, b1);
  p.slots = seconds(b1, b2);
  p.build = seconds(b2, b3);
  p.run = seconds(b3, b4);
  p.hand_out = seconds(b4, b5);
  p.release = seconds(b5, b6);
  return p;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--per-node") chain_per_node = true;
    else sizes.push_back(std::atoi(argv[i]));
  }
  if (sizes.empty()) sizes = {0, 12};
  CpuOptions options;
  options.threads = std::getenv("TAPEWISE_CPU_THREADS") ? 0 : 1;  // the variable's count when set
  const std::shared_ptr<Backend> be = ok(make_cpu_backend(options));
  for (int log2n : sizes) {
    const std::int64_t n = std::int64_t{1} << log2n;
    const int runs = log2n <= 4 ? 200 : 40;
    for (int w = 0; w < 3; ++w) one_run(be, n);
    std::vector<Phases> all;
    for (int r = 0; r < runs; ++r) all.push_back(one_run(be, n));
    auto med = [&](double Phases::*f) {
      std::vector<double> v;
      for (const Phases& p : all) v.push_back(p.*f * 1e6 / kNodes);
      return quantile(v, 0.5);
    };
    std::vector<double> totals;
    for (const Phases& p : all) totals.push_back((p.record + p.backward + p.teardown) * 1e6 / kNodes);
    std::printf("2^%d elements, %d runs, us/node (median): chain%s %.4f [p10 %.4f, p90 %.4f] = record %.4f + backward %.4f + "
                "teardown %.4f\n  in parts: recording alone %.4f, its forwards %.4f; backward: plan %.4f, slots %.4f, "
                "build %.4f, run %.4f, hand-out %.4f; release %.4f\n",
                log2n, runs, chain_per_node ? " (node by node)" : "", quantile(totals, 0.5), quantile(totals, 0.1), quantile(totals, 0.9), med(&Phases::record),
                med(&Phases::backward), med(&Phases::teardown), med(&Phases::record_alone), med(&Phases::forwards),
                med(&Phases::plan), med(&Phases::slots), med(&Phases::build), med(&Phases::run), med(&Phases::hand_out),
                med(&Phases::release));
  }
  return 0;
}

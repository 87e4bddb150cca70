// conform/exact_cross_check.cpp — tapewise-cross-check: the CPU backend against a CUDA backend in exact
// mode, bit for bit (any NaN matches any NaN), on float32 bit patterns through whole tapes: each unary
// node's forward and, with --vjp, its fused and staged VJPs at a fixed g. --stride 1 runs every one of
// the 2^32 inputs. Exit 0: no difference; 1: a difference (the first few printed); 2: bad usage, or no
// CUDA device.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <tapewise/tapewise.hpp>

namespace {

using namespace tapewise;

struct Options {
  std::vector<Op> ops;
  std::uint64_t stride = 1;
  bool vjp = false;
  float g = 0.75f;
};

int usage(const std::string& why) {
  std::fprintf(stderr,
               "tapewise-cross-check: %s\nusage: tapewise-cross-check [--ops a,b|unary] [--stride N] [--vjp]\n",
               why.c_str());
  return 2;
}

bool parse(int argc, char** argv, Options& o, std::string& why) {
  std::string ops = "unary";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--vjp") { o.vjp = true; continue; }
    if (i + 1 >= argc) {
      why = a == "--ops" || a == "--stride" ? a + " needs a value" : "unknown option " + a;
      return false;
    }
    const std::string v = argv[++i];
    if (a == "--ops") {
      ops = v;
    } else if (a == "--stride") {
      char* end = nullptr;
      const unsigned long long s = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end || s == 0 || s > (1ull << 32) || v[0] == '-') { why = "--stride: '" + v + "' is not 1..2^32"; return false; }
      o.stride = s;
    } else {
      why = "unknown option " + a;
      return false;
    }
  }
  for (const OpInfo& info : kOps) {
    const bool named = ("," + ops + ",").find("," + std::string(info.name) + ",") != std::string::npos;
    if ((ops == "unary" && info.arity == 1) || named) o.ops.push_back(info.op);
  }
  if (o.ops.empty()) { why = "--ops: '" + ops + "' names no unary node"; return false; }
  for (Op op : o.ops)
    if (kOps[static_cast<int>(op)].arity != 1) { why = std::string("--ops: ") + op_name(op) + " is not unary"; return false; }
  return true;
}

// Every result of one chunk of inputs: the forward, then (with --vjp) the fused and staged dx.
std::vector<HostArray> results(const std::shared_ptr<Backend>& backend, Op op, const HostArray& x, const HostArray& g,
                               bool vjp) {
  Tape tape(backend);
  const NodeId leaf = tape.leaf(x).value();
  const NodeId y = tape.apply(op, {&leaf, 1}, default_scalars(kOps[static_cast<int>(op)])).value();
  std::vector<HostArray> out{tape.value(y).value()};
  if (vjp)
    for (VjpPath path : {VjpPath::fused, VjpPath::staged}) out.push_back(tape.backward(y, g, path).value().host(leaf).value());
  return out;
}

bool same(float a, float b) {
  std::uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub || (a != a && b != b);
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
  constexpr std::uint64_t kChunk = std::uint64_t{1} << 24;
  const char* kWhat[] = {"forward", "fused dx", "staged dx"};
  std::uint64_t differences = 0, checked = 0;
  const auto start = std::chrono::steady_clock::now();
  for (Op op : o.ops) {
    std::uint64_t node_differences = 0, node_inputs = 0;
    for (std::uint64_t first = 0; first < (std::uint64_t{1} << 32); first += kChunk * o.stride) {
      std::vector<float> xs, gs;
      for (std::uint64_t k = 0; k < kChunk && first + k * o.stride < (std::uint64_t{1} << 32); ++k) {
        const auto bits = static_cast<std::uint32_t>(first + k * o.stride);
        float x;
        std::memcpy(&x, &bits, 4);
        xs.push_back(x);
      }
      gs.assign(xs.size(), o.g);
      const Shape shape{static_cast<std::int64_t>(xs.size())};
      const HostArray x = HostArray::of(shape, xs), g = HostArray::of(shape, gs);
      const std::vector<HostArray> want = results(cpu, op, x, g, o.vjp), got = results(*cuda, op, x, g, o.vjp);
      for (std::size_t r = 0; r < want.size(); ++r)
        for (std::int64_t i = 0; i < want[r].numel(); ++i) {
          if (same(got[r].at<float>(i), want[r].at<float>(i))) continue;
          if (differences++ < 10)
            std::printf("DIFFERENT %s %s at x = %a: cuda %a, cpu %a\n", op_name(op), kWhat[r], xs[static_cast<std::size_t>(i)],
                        got[r].at<float>(i), want[r].at<float>(i));
          ++node_differences;
        }
      node_inputs += xs.size();
    }
    checked += node_inputs;
    std::printf("%-8s float32: %llu inputs (every %llu%s), %llu results differ\n", op_name(op),
                static_cast<unsigned long long>(node_inputs), static_cast<unsigned long long>(o.stride),
                o.vjp ? "; forward, fused and staged dx at g = 0.75" : "; forward", static_cast<unsigned long long>(node_differences));
    std::fflush(stdout);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %llu inputs over %zu nodes, %llu differences, %.1f s (CPU backend: %s; CUDA: %s)\n",
              differences ? "DIFFER" : "IDENTICAL", static_cast<unsigned long long>(checked), o.ops.size(),
              static_cast<unsigned long long>(differences), seconds, cpu->describe().c_str(), (*cuda)->describe().c_str());
  return differences ? 1 : 0;
}

// proptest/cpu_threads_test.cpp — the CPU backend's threads: every node's forward, fused and staged VJP,
// and a tape's programs give the same bits on 1, 2 and 7 threads and when several callers share one
// backend; the thread count is checked and reported through the C++ door (the C ABI's and Python's
// are in c_api_test.cpp and test_stats.py).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <tapewise/tapewise.hpp>

#include "test_support.hpp"

namespace tapewise::testing {
namespace {

// More than two chunks of the pool (2^15 elements each), and not a multiple of the program's lanes.
constexpr std::int64_t kElements = 3 * (std::int64_t{1} << 15) + 7;

std::shared_ptr<Backend> cpu_with(int threads) { return must(make_cpu_backend(CpuOptions{threads})); }

template <class T>
HostArray inputs(std::uint64_t seed, bool positive) {
  std::vector<T> v(static_cast<std::size_t>(kElements));
  std::uint64_t state = seed;
  for (T& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0;  // [0, 1)
    x = static_cast<T>(positive ? 0.25 + 4 * u : 8 * u - 4);
  }
  return host(v);
}

// Every node's value and both VJP paths' gradients, as bytes, on `backend`.
template <class T>
std::vector<std::vector<std::byte>> every_node(const std::shared_ptr<Backend>& backend) {
  std::vector<std::vector<std::byte>> out;
  for (const OpInfo& info : kOps) {
    Tape tape(backend);
    must(tape.set_options(TapeOptions{.program_threshold = 0}));  // node by node: the per-node kernels
    const bool positive = info.bench_inputs == BenchInputs::positive;
    const NodeId a = must(tape.leaf(inputs<T>(1, positive)));
    const NodeId b = must(tape.leaf(inputs<T>(2, positive)));
    const NodeId ids[2] = {a, b};
    const NodeId y = must(tape.apply(info.op, {ids, static_cast<std::size_t>(info.arity)}, default_scalars(info)));
    out.push_back(must(tape.value(y)).bytes);
    for (VjpPath path : {VjpPath::fused, VjpPath::staged}) {
      const Gradients g = must(tape.backward(y, inputs<T>(3, false), path));
      out.push_back(must(g.host(a)).bytes);
    }
  }
  return out;
}

// A chain run as tape programs (forward flushes and one backward program), as bytes.
std::vector<std::vector<std::byte>> chain_as_programs(const std::shared_ptr<Backend>& backend) {
  Tape tape(backend);
  NodeId x = must(tape.leaf(inputs<float>(4, false)));
  const NodeId leaf = x;
  for (int i = 0; i < 30; ++i) {
    x = must(tape.sin(x));
    x = must(tape.tanh(x));
    x = must(tape.scale(x, 0.9));
    x = must(tape.relu(x));
  }
  const Gradients g = must(tape.backward(x, inputs<float>(5, false)));
  return {must(tape.value(x)).bytes, must(g.host(leaf)).bytes};
}

TEST(CpuThreads, EveryNodeGivesTheSameBitsOnAnyThreadCount) {
  const auto one32 = every_node<float>(cpu_with(1));
  const auto one64 = every_node<double>(cpu_with(1));
  for (int threads : {2, 7}) {
    const std::shared_ptr<Backend> be = cpu_with(threads);
    ASSERT_EQ(cpu_threads(*be), threads);
    EXPECT_EQ(every_node<float>(be), one32) << threads << " threads, float32";
    EXPECT_EQ(every_node<double>(be), one64) << threads << " threads, float64";
  }
}

TEST(CpuThreads, ProgramsGiveTheSameBitsOnAnyThreadCount) {
  const auto one = chain_as_programs(cpu_with(1));
  for (int threads : {2, 7}) EXPECT_EQ(chain_as_programs(cpu_with(threads)), one) << threads << " threads";
}

// Callers that share one backend take its pool in turn or run alone, with the same bits.
TEST(CpuThreads, CallersSharingOneBackendGetTheSameBits) {
  const auto expected = chain_as_programs(cpu_with(1));
  const std::shared_ptr<Backend> shared = cpu_with(3);
  std::vector<std::vector<std::vector<std::byte>>> got(4);
  std::vector<std::thread> callers;
  for (std::size_t t = 0; t < got.size(); ++t) callers.emplace_back([&, t] { got[t] = chain_as_programs(shared); });
  for (std::thread& c : callers) c.join();
  for (const auto& g : got) EXPECT_EQ(g, expected);
}

TEST(CpuThreads, TheCountIsCheckedAndReported) {
  for (int bad : {-1, 257}) {
    const auto be = make_cpu_backend(CpuOptions{bad});
    ASSERT_FALSE(be);
    EXPECT_EQ(be.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(be.error().message.find("threads " + std::to_string(bad) + " is outside 0..256"), std::string::npos);
  }
  const std::shared_ptr<Backend> three = cpu_with(3);
  EXPECT_EQ(cpu_threads(*three), 3);
  EXPECT_NE(three->describe().find("3 threads"), std::string::npos) << three->describe();
  EXPECT_EQ(cpu_threads(*cpu_with(1)), 1);
  EXPECT_GE(cpu_threads(*cpu_with(0)), 1);
}

// TAPEWISE_CPU_THREADS sets the default; an invalid value is refused by name, or, where no error can
// be returned (make_cpu_backend()), gives one thread and says why. (Each test is a process of its own
// under ctest, so the variable changes nothing else.)
TEST(CpuThreads, TheEnvironmentVariableSetsTheDefault) {
  ASSERT_EQ(setenv("TAPEWISE_CPU_THREADS", "5", 1), 0);
  EXPECT_EQ(cpu_threads(*cpu_with(0)), 5);
  EXPECT_EQ(cpu_threads(*make_cpu_backend()), 5);
  EXPECT_EQ(cpu_threads(*cpu_with(2)), 2);  // an explicit count wins
  for (const char* bad : {"abc", "0", "-2", "3x", " 4", "300", "99999999999999999999"}) {
    ASSERT_EQ(setenv("TAPEWISE_CPU_THREADS", bad, 1), 0);
    const auto be = make_cpu_backend(CpuOptions{});
    ASSERT_FALSE(be) << bad;
    EXPECT_NE(be.error().message.find(std::string("TAPEWISE_CPU_THREADS='") + bad + "' is not a whole number from 1 to 256"),
              std::string::npos)
        << be.error().message;
    const std::shared_ptr<Backend> fallback = make_cpu_backend();
    EXPECT_EQ(cpu_threads(*fallback), 1);
    EXPECT_NE(fallback->describe().find("TAPEWISE_CPU_THREADS"), std::string::npos) << fallback->describe();
  }
  unsetenv("TAPEWISE_CPU_THREADS");
}

}  // namespace
}  // namespace tapewise::testing

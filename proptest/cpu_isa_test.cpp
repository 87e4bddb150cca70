// proptest/cpu_isa_test.cpp — the CPU backend's instruction sets: the element loops compiled for
// x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512) give the baseline build's bits (up to NaN payload) on every node, forward
// and both VJP paths, float32 and float64, over float32 bit patterns spread across all 2^32 (every
// TAPEWISE_ISA_STRIDE-th, default 4099: about a million inputs a node) and random pairs of bit patterns, and as
// tape programs; the choice is checked and reported.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <tapewise/tapewise.hpp>

#include "test_support.hpp"

namespace tapewise::testing {
namespace {

std::shared_ptr<Backend> cpu_in(CpuIsa isa) { return must(make_cpu_backend(CpuOptions{.threads = 0, .isa = isa})); }

// The instruction sets beyond baseline that this build and processor run.
std::vector<CpuIsa> wider_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::x86_64_v3, CpuIsa::x86_64_v4})
    if (make_cpu_backend(CpuOptions{.threads = 0, .isa = isa})) out.push_back(isa);
  return out;
}

std::uint64_t stride() { return static_cast<std::uint64_t>(env_count("TAPEWISE_ISA_STRIDE", 4099)); }

template <class T>
T from_bits32(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return static_cast<T>(f);
}

// Inputs of a node of `arity`: unary, float32 bit patterns 0, s, 2s, ... (every class of float32:
// zeros, subnormals, normals, infinities, NaNs); binary, as many random pairs of bit patterns.
template <class T>
std::vector<HostArray> inputs_for(int arity) {
  const std::uint64_t s = stride();
  std::vector<std::vector<T>> v(static_cast<std::size_t>(arity));
  std::uint64_t state = 0x5eed;
  for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += s) {
    if (arity == 1) {
      v[0].push_back(from_bits32<T>(static_cast<std::uint32_t>(bits)));
      continue;
    }
    for (auto& operand : v) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      operand.push_back(from_bits32<T>(static_cast<std::uint32_t>(state >> 32)));
    }
  }
  std::vector<HostArray> out;
  for (const auto& operand : v) out.push_back(host(operand));
  return out;
}

// Every node's value and its inputs' gradients on both VJP paths (g = 0.75 everywhere), node by node.
template <class T>
std::vector<HostArray> every_node(const std::shared_ptr<Backend>& backend) {
  std::vector<HostArray> out;
  for (const OpInfo& info : kOps) {
    Tape tape(backend);
    must(tape.set_options(TapeOptions{.program_threshold = 0}));
    std::vector<NodeId> leaves;
    for (const HostArray& x : inputs_for<T>(info.arity)) leaves.push_back(must(tape.leaf(x)));
    const NodeId y = must(tape.apply(info.op, leaves, default_scalars(info)));
    out.push_back(must(tape.value(y)));
    const HostArray g = host(std::vector<T>(static_cast<std::size_t>(out.back().numel()), T(0.75)));
    for (VjpPath path : {VjpPath::fused, VjpPath::staged}) {
      const Gradients grads = must(tape.backward(y, g, path));
      for (NodeId leaf : leaves) out.push_back(must(grads.host(leaf)));
    }
  }
  return out;
}

// A chain of every unary node run as tape programs (forward and backward), its value and gradient.
std::vector<HostArray> chain_as_programs(const std::shared_ptr<Backend>& backend) {
  Tape tape(backend);
  const NodeId leaf = must(tape.leaf(inputs_for<float>(1)[0]));
  NodeId x = leaf;
  for (const OpInfo& info : kOps)
    if (info.arity == 1 && info.op != Op::exp) x = must(tape.apply(info.op, {&x, 1}, default_scalars(info)));
  const Gradients g = must(tape.backward(x, host(std::vector<float>(static_cast<std::size_t>(must(tape.value(x)).numel()), 0.5f))));
  return {must(tape.value(x)), must(g.host(leaf))};
}

void expect_same(const std::vector<HostArray>& got, const std::vector<HostArray>& want, CpuIsa isa, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  // Up to NaN payload: which NaN operand an instruction passes on depends on the operand order the
  // compiler chose, and the two copies are compiled apart.
  for (std::size_t r = 0; r < got.size(); ++r)
    EXPECT_EQ(first_difference(got[r], want[r]), "no difference") << cpu_isa_name(isa) << " against baseline, " << what << ", result " << r;
}

TEST(CpuIsa, WiderInstructionSetsGiveTheBaselineBits) {
  const std::vector<CpuIsa> wider = wider_isas();
  if (wider.empty()) GTEST_SKIP() << "this build or processor runs the baseline instruction set only";
  const std::shared_ptr<Backend> baseline = cpu_in(CpuIsa::baseline);
  const auto want32 = every_node<float>(baseline), want64 = every_node<double>(baseline);
  const auto want_programs = chain_as_programs(baseline);
  for (CpuIsa isa : wider) {
    const std::shared_ptr<Backend> be = cpu_in(isa);
    ASSERT_EQ(cpu_isa(*be), isa);
    expect_same(every_node<float>(be), want32, isa, "float32 nodes");
    expect_same(every_node<double>(be), want64, isa, "float64 nodes");
    expect_same(chain_as_programs(be), want_programs, isa, "tape programs");
  }
}

TEST(CpuIsa, TheChoiceIsCheckedAndReported) {
  const std::shared_ptr<Backend> baseline = cpu_in(CpuIsa::baseline);
  EXPECT_EQ(cpu_isa(*baseline), CpuIsa::baseline);
  EXPECT_NE(baseline->describe().find("baseline"), std::string::npos) << baseline->describe();
  const CpuIsa chosen = cpu_isa(*cpu_in(CpuIsa::automatic));
  EXPECT_NE(chosen, CpuIsa::automatic);
  EXPECT_NE(cpu_in(CpuIsa::automatic)->describe().find(cpu_isa_name(chosen)), std::string::npos);
  for (CpuIsa isa : {CpuIsa::x86_64_v3, CpuIsa::x86_64_v4}) {
    const auto be = make_cpu_backend(CpuOptions{.threads = 0, .isa = isa});
    if (be) continue;
    EXPECT_EQ(be.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(be.error().message.find("cannot run it"), std::string::npos) << be.error().message;
  }
}

// TAPEWISE_CPU_ISA sets the automatic choice; an invalid one is refused by name, or, where no error can
// be returned (make_cpu_backend()), gives baseline and says why. (Each test is a process of its own
// under ctest.)
TEST(CpuIsa, TheEnvironmentVariableSetsTheAutomaticChoice) {
  ASSERT_EQ(setenv("TAPEWISE_CPU_ISA", "baseline", 1), 0);
  EXPECT_EQ(cpu_isa(*cpu_in(CpuIsa::automatic)), CpuIsa::baseline);
  EXPECT_EQ(cpu_isa(*make_cpu_backend()), CpuIsa::baseline);
  ASSERT_EQ(setenv("TAPEWISE_CPU_ISA", "avx9", 1), 0);
  const auto refused = make_cpu_backend(CpuOptions{});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("TAPEWISE_CPU_ISA 'avx9' is not baseline, x86-64-v3 or x86-64-v4"), std::string::npos)
      << refused.error().message;
  const std::shared_ptr<Backend> fallback = make_cpu_backend();
  EXPECT_EQ(cpu_isa(*fallback), CpuIsa::baseline);
  EXPECT_NE(fallback->describe().find("TAPEWISE_CPU_ISA"), std::string::npos) << fallback->describe();
  EXPECT_EQ(cpu_isa(*cpu_in(CpuIsa::baseline)), CpuIsa::baseline);  // an explicit choice wins
  unsetenv("TAPEWISE_CPU_ISA");
}

// The stride and case counts the sweeps read from the environment: unset or empty gives the default,
// a whole number is taken, and anything else stops the test with the variable's name.
TEST(TestSettings, CountsFromTheEnvironmentRefuseWhatIsNotACount) {
  const char* name = "TAPEWISE_TEST_SETTINGS_COUNT";
  unsetenv(name);
  EXPECT_EQ(env_count(name, 4099), 4099);
  setenv(name, "", 1);
  EXPECT_EQ(env_count(name, 4099), 4099);
  setenv(name, "65537", 1);
  EXPECT_EQ(env_count(name, 4099), 65537);
  for (const char* bad : {"-5", "+5", "0", "1", "5x", "x", " 5", "99999999999999999999"}) {
    setenv(name, bad, 1);
    try {
      env_count(name, 4099, 2);
      ADD_FAILURE() << bad << " was taken";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(name) + "=" + bad), std::string::npos) << e.what();
    }
  }
  unsetenv(name);
}

}  // namespace
}  // namespace tapewise::testing

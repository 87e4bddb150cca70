// proptest/math_mode_test.cpp — the math modes (MathMode): the CPU backend runs exact mode, whose
// float32 exp, log, sin, cos and tanh nodes are correctly rounded (checked here against MPFR through
// the nodes themselves); a CUDA backend in exact mode gives the CPU backend's bits on every node,
// dtype and VJP path and on tape programs (GPU only); bad modes are refused through the C++ door (the
// C ABI's and Python's: c_api_test.cpp, test_math_mode.py).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gmp.h>
#include <mpfr.h>

#include <gtest/gtest.h>
#include <tapewise/tapewise.hpp>

#include "test_support.hpp"

namespace tapewise::testing {
namespace {

TEST(MathMode, NamesRoundTripAndAnUnknownNameIsNamed) {
  for (MathMode mode : {MathMode::aten, MathMode::exact}) EXPECT_EQ(must(math_mode_named(math_mode_name(mode))), mode);
  auto bad = math_mode_named("fast");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(bad.error().message.find("'fast'"), std::string::npos) << bad.error().message;
}

TEST(MathMode, TheCpuBackendIsExact) {
  EXPECT_EQ(math_mode(*make_cpu_backend()), MathMode::exact);
  EXPECT_EQ(math_mode(*must(make_cpu_backend(CpuOptions{2}))), MathMode::exact);
}

TEST(MathMode, AModeThatIsNeitherIsRefusedBeforeAnyDeviceIsOpened) {
  CudaOptions options;
  options.math = static_cast<MathMode>(7);
  auto be = make_cuda_backend(options);
  ASSERT_FALSE(be);
#ifdef TAPEWISE_HAS_CUDA
  EXPECT_EQ(be.error().code, ErrorCode::InvalidArgument);
  EXPECT_NE(be.error().message.find("math mode 7"), std::string::npos) << be.error().message;
#else
  EXPECT_EQ(be.error().code, ErrorCode::DeviceUnavailable);
#endif
}

// R32(f(x)) by MPFR: binary32's exponent range and subnormals, round to nearest even.
float correctly_rounded(Op op, float x) {
  mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  mpfr_set_emin(-148);
  mpfr_set_emax(128);
  mpfr_t v;
  mpfr_init2(v, 24);
  mpfr_set_flt(v, x, MPFR_RNDN);
  int inexact = 0;
  switch (op) {
    case Op::exp: inexact = mpfr_exp(v, v, MPFR_RNDN); break;
    case Op::log: inexact = mpfr_log(v, v, MPFR_RNDN); break;
    case Op::sin: inexact = mpfr_sin(v, v, MPFR_RNDN); break;
    case Op::cos: inexact = mpfr_cos(v, v, MPFR_RNDN); break;
    case Op::tanh: inexact = mpfr_tanh(v, v, MPFR_RNDN); break;
    default: ADD_FAILURE() << "no MPFR function for " << op_name(op);
  }
  inexact = mpfr_check_range(v, inexact, MPFR_RNDN);
  mpfr_subnormalize(v, inexact, MPFR_RNDN);
  const float r = mpfr_get_flt(v, MPFR_RNDN);
  mpfr_clear(v);
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  return r;
}

// Random bit patterns (every sign, exponent and NaN), and the values every op is tested at.
std::vector<float> float32_patterns(std::uint64_t seed, int count) {
  std::vector<float> v = special_values<float>();
  std::uint64_t state = seed;
  for (int i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v.push_back(from_bits<float>(static_cast<std::uint32_t>(state >> 32)));
  }
  return v;
}

// Through the node (Tape::apply on the CPU backend), not the function alone: the CPU backend's
// forwards are tapewise's own math. glibc's tanhf, sinf and cosf miss on 0.6-4% of random patterns
// and would fail this at once.
TEST(MathMode, CpuFloat32ForwardsOfTheFiveFunctionsAreCorrectlyRounded) {
  const std::vector<float> x = float32_patterns(20261205, 1 << 16);
  for (Op op : {Op::exp, Op::log, Op::sin, Op::cos, Op::tanh}) {
    Tape tape(make_cpu_backend());
    const NodeId leaf = must(tape.leaf(host(x)));
    const NodeId y = must(tape.apply(op, {&leaf, 1}, Scalars{}));
    const HostArray got = must(tape.value(y));
    int misses = 0;
    std::string first;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float want = correctly_rounded(op, x[i]);
      if (same_bits(got.at<float>(static_cast<std::int64_t>(i)), want)) continue;
      if (misses++ == 0)
        first = "x bits " + std::to_string(bits_of(x[i])) + ": got " + std::to_string(bits_of(got.at<float>(static_cast<std::int64_t>(i)))) +
                ", correctly rounded " + std::to_string(bits_of(want));
    }
    EXPECT_EQ(misses, 0) << op_name(op) << " over " << x.size() << " inputs; first: " << first;
  }
}

template <class T>
HostArray host_as(const std::vector<double>& values) {
  std::vector<T> v;
  for (double d : values) v.push_back(static_cast<T>(d));
  return host(v);
}

// Inputs of `dtype` for a node: moderate values of both signs (positive where the node wants them),
// and the special values, so that NaN, infinities and signed zeros cross both backends too.
HostArray node_inputs(DType dtype, std::uint64_t seed, bool positive) {
  std::vector<double> v;
  std::uint64_t state = seed;
  for (int i = 0; i < 4099; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0;
    v.push_back(positive ? 0.25 + 30 * u : 60 * u - 30);
  }
  for (double s : special_values<double>()) v.push_back(s);
  switch (dtype) {
    case DType::float32: return host_as<float>(v);
    case DType::float64: return host_as<double>(v);
    case DType::bfloat16: return host_as<bfloat16>(v);
    case DType::float16: return host_as<float16>(v);
  }
  return host_as<double>(v);
}

// Every node's value and both VJP paths' gradients on `backend`: node by node (program_threshold 0),
// or as tape programs (2^20: these inputs' sizes run as programs).
std::vector<HostArray> every_result(const std::shared_ptr<Backend>& backend, DType dtype, std::int64_t threshold) {
  std::vector<HostArray> out;
  for (const OpInfo& info : kOps) {
    Tape tape(backend);
    must(tape.set_options(TapeOptions{.program_threshold = threshold}));
    const bool positive = info.bench_inputs == BenchInputs::positive;
    const NodeId a = must(tape.leaf(node_inputs(dtype, 1, positive)));
    const NodeId b = must(tape.leaf(node_inputs(dtype, 2, positive)));
    const NodeId ids[2] = {a, b};
    const NodeId y = must(tape.apply(info.op, {ids, static_cast<std::size_t>(info.arity)}, default_scalars(info)));
    out.push_back(must(tape.value(y)));
    for (VjpPath path : {VjpPath::fused, VjpPath::staged}) {
      const Gradients g = must(tape.backward(y, node_inputs(dtype, 3, false), path));
      out.push_back(must(g.host(a)));
    }
  }
  return out;
}

TEST(MathMode, CudaInExactModeGivesTheCpuBackendsBits) {
  std::string why;
  if (!cuda_backend_or_null(&why)) GTEST_SKIP() << "no CUDA device (" << why << "), GPU test skipped";
  CudaOptions options;
  options.math = MathMode::exact;
  const std::shared_ptr<Backend> cuda = must(make_cuda_backend(options));
  ASSERT_EQ(math_mode(*cuda), MathMode::exact);
  const std::shared_ptr<Backend> cpu = make_cpu_backend();
  for (DType dtype : kDTypes)
    for (std::int64_t threshold : {std::int64_t{0}, std::int64_t{1} << 20}) {
      const std::vector<HostArray> want = every_result(cpu, dtype, threshold);
      const std::vector<HostArray> got = every_result(cuda, dtype, threshold);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t k = 0; k < got.size(); ++k)
        EXPECT_TRUE(agree(got[k], want[k])) << dtype_name(dtype) << ", program threshold " << threshold << ", "
                                            << op_name(kOps[k / 3].op) << (k % 3 == 0 ? " forward" : k % 3 == 1 ? " fused VJP" : " staged VJP")
                                            << ": " << first_difference(got[k], want[k]);
    }
}

}  // namespace
}  // namespace tapewise::testing

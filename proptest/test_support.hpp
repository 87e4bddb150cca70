// proptest/test_support.hpp — what the tests share: the backends to run on (CPU always, CUDA
// where a device exists), RapidCheck generators for floats that matter (bit patterns, ±0,
// subnormals, ±inf, NaN, ties, the op table's domains and scalar sets), `must` for Results, and
// small host-array helpers. No tolerances and no per-node values live here.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <tapewise/tapewise.hpp>

namespace tapewise::testing {

// The CUDA backend, created once per process; nullptr (with the reason) where there is no device.
inline std::shared_ptr<Backend> cuda_backend_or_null(std::string* why = nullptr) {
  static std::string reason;
  static std::shared_ptr<Backend> backend = [] {
    auto be = make_cuda_backend();
    if (!be) {
      reason = be.error().str();
      return std::shared_ptr<Backend>();
    }
    return *be;
  }();
  if (why) *why = reason;
  return backend;
}

// Skips the current test with a clear message where no CUDA device exists.
#define TW_REQUIRE_CUDA(var)                                                  \
  std::string var##_why;                                                      \
  auto var = ::tapewise::testing::cuda_backend_or_null(&var##_why);           \
  if (!var) GTEST_SKIP() << "GPU test skipped: " << var##_why

#ifdef TAPEWISE_CONFORM_BIN
// The tapewise-conform the CLI tests run: the one beside this test binary (so a copied bin/ folder,
// e.g. on the GPU machine, tests its own runner), else the one this build made.
inline std::string conform_binary() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(self.parent_path() / "tapewise-conform", ec))
    return (self.parent_path() / "tapewise-conform").string();
  return TAPEWISE_CONFORM_BIN;
}
#endif

// Every backend available here, CPU first.
inline std::vector<std::shared_ptr<Backend>> all_backends() {
  std::vector<std::shared_ptr<Backend>> v{make_cpu_backend()};
  if (auto cuda = cuda_backend_or_null()) v.push_back(cuda);
  return v;
}

// A test run once per backend: parameter 0 is the CPU, 1 is CUDA (skipped where absent).
class PerBackend : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    auto backends = all_backends();
    std::string why;
    cuda_backend_or_null(&why);
    if (static_cast<std::size_t>(GetParam()) >= backends.size()) GTEST_SKIP() << "GPU test skipped: " << why;
    backend = backends[static_cast<std::size_t>(GetParam())];
  }
  std::shared_ptr<Backend> backend;
};

#define TW_INSTANTIATE_PER_BACKEND(Suite)                               \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::Values(0, 1),    \
                           [](const auto& info) { return std::string(info.param == 0 ? "cpu" : "cuda"); })

inline const char* backend_name(const Backend& be) { return be.kind() == BackendKind::cpu ? "cpu" : "cuda"; }

template <class T>
using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

template <class T>
Bits<T> bits_of(T v) {
  Bits<T> b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

template <class T>
T from_bits(Bits<T> b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// Bitwise equality where any NaN matches any NaN (TorchLean's AgreeUpToNaN).
template <class T>
bool same_bits(T a, T b) {
  return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b);
}

// Values worth testing at any op: signed zeros, subnormals, extremes, infinities, NaN, small ints.
template <class T>
std::vector<T> special_values() {
  using L = std::numeric_limits<T>;
  return {T(0), -T(0), L::denorm_min(), -L::denorm_min(), L::min(), -L::min(), L::max(), -L::max(),
          L::infinity(), -L::infinity(), L::quiet_NaN(), T(1), T(-1), T(0.5), T(-0.5), T(2), T(-2),
          T(3), T(-3), T(20), T(-20), T(100), T(-100), T(1e-30), T(-1e-30)};
}

// Any bit pattern (NaNs and subnormals included), or a special value, or a moderate number.
template <class T>
rc::Gen<T> any_float() {
  return rc::gen::weightedOneOf<T>({
      {4, rc::gen::map(rc::gen::resize(100, rc::gen::arbitrary<Bits<T>>()), [](Bits<T> b) { return from_bits<T>(b); })},
      {2, rc::gen::elementOf(special_values<T>())},
      {3, rc::gen::map(rc::gen::inRange(-4000, 4000), [](int i) { return static_cast<T>(i) / T(64); })},
  });
}

// A finite value with magnitude in [2^lo, 2^hi) (spec/ops.def's domains are half-open): an exponent
// from lo .. hi-1 and a significand of exactly the dtype's mantissa bits (no rounding up to 2^hi);
// sign random unless positive_only.
template <class T>
rc::Gen<T> in_domain(int lo, int hi, bool positive_only) {
  constexpr int kMantissaBits = std::numeric_limits<T>::digits - 1;
  return rc::gen::map(
      rc::gen::tuple(rc::gen::inRange(lo, hi), rc::gen::resize(100, rc::gen::arbitrary<std::uint64_t>()), rc::gen::arbitrary<bool>()),
      [=](const std::tuple<int, std::uint64_t, bool>& t) {
        const T fraction = std::ldexp(static_cast<T>(std::get<1>(t) >> (64 - kMantissaBits)), -kMantissaBits);
        const T v = std::ldexp(T(1) + fraction, std::get<0>(t));
        return (positive_only || std::get<2>(t)) ? v : -v;
      });
}

// A scalar set of the node's run and graded sets (spec/ops.def): inside its contract, for tests
// graded against the reference. {} for a node without scalars. Call inside a property.
inline Scalars pick_graded_scalars(Op op) {
  const ScalarSetList sets = graded_scalar_sets(op_info(op));
  return sets.sets[*rc::gen::inRange(0, sets.count)];
}

// Scalars for tests that compare bits only: each scalar picked independently from all the node's
// sets (run, graded and edge), so 0, huge values, lo > hi and R(eps) = 0 come up. Call inside a property.
inline Scalars pick_any_table_scalars(Op op) {
  std::vector<double> first, second;
  const OpInfo& info = op_info(op);
  for (const ScalarSets* column : {&info.run_scalars, &info.graded_scalars, &info.edge_scalars})
    for (const Scalars& s : *column) {
      first.push_back(s.s0);
      second.push_back(s.s1);
    }
  if (first.empty()) return {};
  return {*rc::gen::elementOf(first), *rc::gen::elementOf(second)};
}

// The value of a Result the test needs in order to go on. An error throws, which fails this test
// alone (GoogleTest and RapidCheck report the exception with the error's text), where reading the
// value of an error would be undefined behaviour that can take the whole binary down.
template <class T>
T must(Result<T> r) {
  if (!r) throw std::runtime_error("unexpected error from tapewise: " + r.error().str());
  return std::move(*r);
}
inline void must(Result<void> r) {
  if (!r) throw std::runtime_error("unexpected error from tapewise: " + r.error().str());
}

template <class T>
HostArray host(const std::vector<T>& v) {
  return HostArray::of<T>(Shape{static_cast<std::int64_t>(v.size())}, v);
}

}  // namespace tapewise::testing

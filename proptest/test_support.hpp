// proptest/test_support.hpp — what the tests share: the backends to run on (CPU always, CUDA
// where a device exists), RapidCheck generators for floats that matter (bit patterns, ±0,
// subnormals, ±inf, NaN, ties, the op table's domains and scalar sets), `must` for Results, and
// small host-array helpers. No tolerances and no per-node values live here.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

#include "backends/engine.hpp"  // the engine behind Backend: prims, the allocation-failure hook
#include "core/whole_number.hpp"

namespace tapewise {
// A 16-bit element's NaN test and its value in a failure message, where argument-dependent lookup
// finds them (the element types' namespace).
inline bool isnan(bfloat16 v) { return std::isnan(static_cast<float>(v)); }
inline bool isnan(float16 v) { return std::isnan(static_cast<float>(v)); }
inline std::ostream& operator<<(std::ostream& os, bfloat16 v) { return os << static_cast<float>(v); }
inline std::ostream& operator<<(std::ostream& os, float16 v) { return os << static_cast<float>(v); }
}  // namespace tapewise

namespace tapewise::testing {

// The CUDA backend, created once per process; nullptr (with the reason) where there is no device.
// The engine's test hook: the nth allocation of `be` from now fails with OutOfMemory (0 disarms it).
inline void inject_allocation_failure(Backend& be, std::int64_t nth) {
  detail::engine_of(be).inject_allocation_failure(nth);
}

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

// Skips the current test with a clear message where no CUDA device exists (a test of CUDA alone).
#define TW_REQUIRE_CUDA(var) TW_BACKEND_OR_SKIP(var, ::tapewise::BackendKind::cuda)

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

// The one way a test runs on every backend: a BackendKind parameter (kEveryBackend, alone through
// PerBackend and TW_INSTANTIATE_PER_BACKEND, or combined with others), turned into the backend by
// TW_BACKEND_OR_SKIP, which skips the CUDA case where no device exists.
inline const auto kEveryBackend = ::testing::Values(BackendKind::cpu, BackendKind::cuda);
inline const char* backend_name(BackendKind kind) { return kind == BackendKind::cpu ? "cpu" : "cuda"; }
inline const char* backend_name(const Backend& be) { return backend_name(be.kind()); }

// The backend of `kind`; nullptr (with the reason) where there is none.
inline std::shared_ptr<Backend> backend_of(BackendKind kind, std::string* why = nullptr) {
  return kind == BackendKind::cpu ? make_cpu_backend() : cuda_backend_or_null(why);
}

// Declares `var`, the backend of `kind`, or skips the current test naming why there is none.
#define TW_BACKEND_OR_SKIP(var, kind)                                          \
  std::string var##_why;                                                       \
  const auto var = ::tapewise::testing::backend_of((kind), &var##_why);        \
  if (!var) GTEST_SKIP() << "GPU test skipped: " << var##_why

// A test run once per backend (the fixture's `backend`).
class PerBackend : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    TW_BACKEND_OR_SKIP(available, GetParam());
    backend = available;
  }
  std::shared_ptr<Backend> backend;
};

#define TW_INSTANTIATE_PER_BACKEND(Suite)                                      \
  INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::tapewise::testing::kEveryBackend, \
                           [](const auto& info) { return std::string(::tapewise::testing::backend_name(info.param)); })

template <class T>
using Bits = std::conditional_t<sizeof(T) == 2, std::uint16_t, std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;

template <class T>
inline constexpr bool kIs16BitType = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;


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
  using std::isnan;
  return (isnan(a) && isnan(b)) || bits_of(a) == bits_of(b);
}

// Two arrays element by element: same_at, and the tapes' and programs' tests' verdicts built on it.
// Bit for bit, where any NaN matches any NaN (the project's AgreeUpToNaN): which NaN an IEEE
// operation returns when both operands are NaN is the operand order the compiler happened to pick
// on x86 (it treats + and * as commutative), so NaN payloads and signs are not part of the promise.
inline bool same_at(const HostArray& a, const HostArray& b, std::int64_t i) {
  switch (a.dtype) {
    case DType::float32: return same_bits(a.at<float>(i), b.at<float>(i));
    case DType::float64: return same_bits(a.at<double>(i), b.at<double>(i));
    case DType::bfloat16: return same_bits(a.at<bfloat16>(i), b.at<bfloat16>(i));
    case DType::float16: return same_bits(a.at<float16>(i), b.at<float16>(i));
  }
  return false;
}

inline bool agree(const HostArray& a, const HostArray& b) {
  if (a.shape != b.shape || a.dtype != b.dtype || a.bytes.size() != b.bytes.size()) return false;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    if (!same_at(a, b, i)) return false;
  return true;
}

// "element i: <bits> vs <bits>" for the first element where two arrays disagree.
inline std::string first_difference(const HostArray& a, const HostArray& b) {
  if (a.shape != b.shape || a.dtype != b.dtype) return "shapes or dtypes differ";
  const std::size_t width = dtype_size(a.dtype);
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (same_at(a, b, i)) continue;
    auto hex = [&](const HostArray& h) {
      std::uint64_t v = 0;
      std::memcpy(&v, &h.bytes[static_cast<std::size_t>(i) * width], width);
      char text[24];
      std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
      return std::string(text);
    };
    return "element " + std::to_string(i) + ": " + hex(a) + " vs " + hex(b);
  }
  return "no difference";
}

// Values worth testing at any op: signed zeros, subnormals, extremes, infinities, NaN, small ints.
template <class T>
std::vector<T> special_values() {
  if constexpr (kIs16BitType<T>) {
    // The 16-bit formats' zeros, smallest subnormal and normal, largest finite, infinities and NaN
    // by their bits, then the rest of the list as the dtype rounds it.
    const bool bf = std::is_same_v<T, bfloat16>;
    std::vector<T> out;
    for (std::uint16_t b : {0x0000, 0x8000, 0x0001, 0x8001}) out.push_back(T::from_bits(b));
    for (std::uint16_t b : bf ? std::vector<std::uint16_t>{0x0080, 0x8080, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0}
                              : std::vector<std::uint16_t>{0x0400, 0x8400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00})
      out.push_back(T::from_bits(b));
    for (double v : {1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 20.0, -20.0, 100.0, -100.0, 1e-30, -1e-30})
      out.push_back(T(v));
    return out;
  } else {
  using L = std::numeric_limits<T>;
  return {T(0), -T(0), L::denorm_min(), -L::denorm_min(), L::min(), -L::min(), L::max(), -L::max(),
          L::infinity(), -L::infinity(), L::quiet_NaN(), T(1), T(-1), T(0.5), T(-0.5), T(2), T(-2),
          T(3), T(-3), T(20), T(-20), T(100), T(-100), T(1e-30), T(-1e-30)};
  }
}

// Any bit pattern (NaNs and subnormals included), or a special value, or a moderate number.
template <class T>
rc::Gen<T> any_float() {
  if constexpr (kIs16BitType<T>) {
    return rc::gen::weightedOneOf<T>({
        {4, rc::gen::map(rc::gen::resize(100, rc::gen::arbitrary<std::uint16_t>()), [](std::uint16_t b) { return T::from_bits(b); })},
        {2, rc::gen::elementOf(special_values<T>())},
        {3, rc::gen::map(rc::gen::inRange(-4000, 4000), [](int i) { return T(static_cast<float>(i) / 64.0f); })},
    });
  } else
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

// A count a test reads from the environment (a stride, a number of cases): `fallback` where the
// variable is unset or empty; a whole number from `least` up otherwise. Anything else (a sign, a
// space, a suffix, too large) throws naming the variable, so that a mistyped setting fails the test
// instead of running a different sweep than the one asked for.
inline std::int64_t env_count(const char* name, std::int64_t fallback, std::int64_t least = 1) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  const auto n = detail::whole_number(text, INT64_MAX);
  if (!n || static_cast<std::int64_t>(*n) < least)
    throw std::runtime_error(std::string(name) + "=" + text + " is not a whole number from " +
                             std::to_string(least) + " up");
  return static_cast<std::int64_t>(*n);
}

// What a failed command must leave as it was: the tape's nodes and the backend's memory. (A failed
// backward may have run the pending nodes' forwards: their values are the same, now computed.)
struct Snapshot {
  std::size_t size;
  MemoryStats stats;
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};
inline Snapshot snapshot(const Tape& t) { return {t.size(), t.backend().stats()}; }

template <class T>
HostArray host(const std::vector<T>& v) {
  return HostArray::of<T>(Shape{static_cast<std::int64_t>(v.size())}, v);
}

}  // namespace tapewise::testing

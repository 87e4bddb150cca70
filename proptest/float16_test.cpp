// proptest/float16_test.cpp — the 16-bit formats: conversions and arithmetic against MPFR's correctly
// rounded values, scalars rounded as ATen rounds them, the one-op nodes equal to float32's result
// rounded once, and every input of every unary node (all 2^16 bit patterns) through both forwards
// and both VJP paths, bit for bit, on every backend.
#include <random>

#include "kernels/scalar_math.cuh"
#include "reference.hpp"
#include "test_support.hpp"

namespace tapewise::testing {
namespace {

namespace ref = reference;

template <class T>
constexpr DType kDType = dtype_of<T>::value;

// Floats whose low bits sit at and around the 16-bit formats' rounding points (bfloat16 rounds at
// bit 16, float16 at bit 13), under every sign, exponent and high significand: ties, either side
// of them, and random low bits.
std::vector<float> rounding_probes() {
  std::vector<float> out;
  std::mt19937 rng(20261202);
  const std::uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x3000};
  for (std::uint32_t high = 0; high < 0x10000; ++high) {
    for (std::uint32_t low : lows) out.push_back(detail::bits_float((high << 16) | low));
    out.push_back(detail::bits_float((high << 16) | (rng() & 0xffffu)));
  }
  return out;
}

template <class T>
void expect_conversion_rounds_like_mpfr() {
  std::int64_t checked = 0;
  for (float f : rounding_probes()) {
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(T(f))));
      continue;
    }
    const double expected = ref::round_to_dtype(ref::real(f), kDType<T>);
    const double got = static_cast<double>(T(f));
    ASSERT_EQ(std::bit_cast<std::uint64_t>(got), std::bit_cast<std::uint64_t>(expected))
        << dtype_name(kDType<T>) << " of " << std::hexfloat << f << ": " << got << ", MPFR " << expected;
    ++checked;
  }
  EXPECT_GT(checked, 700000);
}

TEST(Float16Formats, FloatToBfloat16RoundsToNearestEvenAsMpfrDoes) { expect_conversion_rounds_like_mpfr<bfloat16>(); }
TEST(Float16Formats, FloatToFloat16RoundsToNearestEvenAsMpfrDoes) { expect_conversion_rounds_like_mpfr<float16>(); }

template <class T>
void expect_every_pattern_round_trips() {
  int nans = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const T v = T::from_bits(static_cast<std::uint16_t>(b));
    const float f = static_cast<float>(v);
    if (std::isnan(f)) {
      ++nans;
      EXPECT_TRUE(std::isnan(static_cast<float>(T(f))));
      continue;
    }
    ASSERT_EQ(T(f).bits, b) << dtype_name(kDType<T>) << " bits 0x" << std::hex << b;
    ASSERT_EQ(round_to(kDType<T>, static_cast<double>(v)), static_cast<double>(v));
  }
  const int expected_nans = std::is_same_v<T, bfloat16> ? 2 * 127 : 2 * 1023;
  EXPECT_EQ(nans, expected_nans);
}

TEST(Float16Formats, EveryBfloat16PatternWidensAndRoundsBackToItself) { expect_every_pattern_round_trips<bfloat16>(); }
TEST(Float16Formats, EveryFloat16PatternWidensAndRoundsBackToItself) { expect_every_pattern_round_trips<float16>(); }

TEST(Float16Formats, TheFormatsLimitsAreIeeeS) {
  EXPECT_EQ(static_cast<float>(float16::from_bits(0x7bff)), 65504.0f);
  EXPECT_EQ(static_cast<float>(float16::from_bits(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(float16(65519.99f).bits, 0x7bff);
  EXPECT_EQ(float16(65520.0f).bits, 0x7c00);  // the tie above the largest finite rounds to inf
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::max()).bits, 0x7f80);
  EXPECT_EQ(static_cast<float>(bfloat16::from_bits(0x0001)), std::ldexp(1.0f, -133));
}

// A double scalar reaches a 16-bit dtype through float32, as c10::BFloat16 / c10::Half convert it:
// it differs from rounding once exactly where the float32 value is a 16-bit tie.
TEST(Float16Formats, ScalarsRoundThroughFloat32AsAtenConvertsThem) {
  const double v = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(round_to(DType::bfloat16, v), 1.0);
  EXPECT_EQ(ref::round_to_dtype(ref::real(v), DType::bfloat16), 1.0 + std::ldexp(1.0, -7));
  const double h = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30);
  EXPECT_EQ(round_to(DType::float16, h), 1.0);
  EXPECT_EQ(ref::round_to_dtype(ref::real(h), DType::float16), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(round_to(DType::float16, 1e6), std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_to(DType::bfloat16, 1e300), std::numeric_limits<double>::infinity());
}

// The kernels' 16-bit arithmetic (scalar_math.cuh), on the host as the CPU backend runs it: + - * /
// and sqrt give the correctly rounded result (float32 is wide enough that rounding twice is innocuous).
template <class T>
void check_arithmetic_is_correctly_rounded(const std::string& what) {
  const T a = *any_float<T>(), b = *any_float<T>();
  const ref::Real ra = ref::real(static_cast<double>(a)), rb = ref::real(static_cast<double>(b));
  struct Case {
    const char* name;
    T got;
    ref::Real exact;
    bool defined;
  };
  const float fa = static_cast<float>(a), fb = static_cast<float>(b);
  const bool finite = std::isfinite(fa) && std::isfinite(fb);
  const Case cases[] = {
      {"+", a + b, ra + rb, finite},
      {"-", a - b, ra - rb, finite},
      {"*", a * b, ra * rb, finite},
      {"/", a / b, ra / rb, finite && fb != 0.0f},
      {"sqrt", math::lm_sqrt(a), sqrt(ra), std::isfinite(fa) && fa >= 0.0f},
  };
  for (const Case& c : cases) {
    if (!c.defined) continue;
    const double expected = ref::round_to_dtype(c.exact, kDType<T>);
    const double got = static_cast<double>(c.got);
    if (std::bit_cast<std::uint64_t>(got) != std::bit_cast<std::uint64_t>(expected)) {
      RC_LOG() << what << " " << fa << " " << c.name << " " << fb << ": " << got << ", correctly rounded " << expected;
      RC_FAIL("not the correctly rounded 16-bit result");
    }
  }
}

RC_GTEST_PROP(Float16Formats, ArithmeticThroughFloat32IsCorrectlyRoundedInBfloat16, ()) {
  check_arithmetic_is_correctly_rounded<bfloat16>("bfloat16");
}
RC_GTEST_PROP(Float16Formats, ArithmeticThroughFloat32IsCorrectlyRoundedInFloat16, ()) {
  check_arithmetic_is_correctly_rounded<float16>("float16");
}

// --- every input of every unary node --------------------------------------------------------------

// All 2^16 bit patterns, in order.
template <class T>
std::vector<T> every_pattern() {
  std::vector<T> out(0x10000);
  for (std::uint32_t b = 0; b < 0x10000; ++b) out[b] = T::from_bits(static_cast<std::uint16_t>(b));
  return out;
}

// Upstream gradients for the exhaustive runs: a random pattern per element (NaNs, infinities and
// subnormals among them), or every element 1.
template <class T>
std::vector<T> gradients(bool random, std::uint32_t seed) {
  std::vector<T> g(0x10000, T(1));
  std::mt19937 rng(seed);
  if (random)
    for (T& v : g) v = T::from_bits(static_cast<std::uint16_t>(rng()));
  return g;
}

Buffer upload(Backend& be, const HostArray& h) { return must(be.upload(h)); }

HostArray run_forward(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> in, bool staged) {
  Buffer out = must(be.allocate(in[0]->shape(), in[0]->dtype(), AllocTag::value));
  must(staged ? staged_forward(be, op, s, in, out) : be.forward(op, s, in, out));
  return must(be.download(out));
}

std::vector<HostArray> run_vjp(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> in, const Buffer& g,
                               bool staged) {
  std::vector<Buffer> grads;
  Buffer* outs[2] = {};
  for (std::size_t k = 0; k < in.size(); ++k) grads.push_back(must(be.allocate(g.shape(), g.dtype(), AllocTag::gradient)));
  for (std::size_t k = 0; k < in.size(); ++k) outs[k] = &grads[k];
  const std::span<Buffer* const> out_span(outs, in.size());
  must(staged ? staged_vjp(be, op, s, in, g, out_span) : be.vjp_fused(op, s, in, g, out_span));
  std::vector<HostArray> host_grads;
  for (const Buffer& b : grads) host_grads.push_back(must(be.download(b)));
  return host_grads;
}

// Counts the elements whose bits differ (any NaN matching any NaN), naming the first.
template <class T>
std::int64_t differences(const HostArray& a, const HostArray& b, const std::string& what, const std::vector<T>& x) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const T u = a.at<T>(i), v = b.at<T>(i);
    if (same_bits(u, v)) continue;
    if (n++ == 0)
      ADD_FAILURE() << what << ": first difference at x bits 0x" << std::hex << x[static_cast<std::size_t>(i)].bits << ": "
                    << u << " (0x" << u.bits << ") against " << v << " (0x" << v.bits << ")";
  }
  return n;
}

template <class T>
void check_every_unary_input(Backend& be, const OpInfo& info) {
  const std::vector<T> x = every_pattern<T>();
  const Buffer xb = upload(be, host(x));
  const Buffer* in[1] = {&xb};
  const ScalarSetList sets = info.scalar_count() == 0 ? ScalarSetList{} : graded_scalar_sets(info);
  const int set_count = info.scalar_count() == 0 ? 1 : sets.count;
  std::int64_t compared = 0;
  for (int k = 0; k < set_count; ++k) {
    const Scalars s = info.scalar_count() == 0 ? Scalars{} : sets.sets[k];
    const std::string what = std::string(info.name) + " " + dtype_name(kDType<T>) + " scalars {" +
                             std::to_string(s.s0) + ", " + std::to_string(s.s1) + "}";
    EXPECT_EQ(differences<T>(run_forward(be, info.op, s, in, false), run_forward(be, info.op, s, in, true),
                             what + " forward kernel against staged forward", x), 0);
    for (bool random : {false, true}) {
      const Buffer gb = upload(be, host(gradients<T>(random, 7u + static_cast<std::uint32_t>(k))));
      const auto fused = run_vjp(be, info.op, s, in, gb, false), staged = run_vjp(be, info.op, s, in, gb, true);
      EXPECT_EQ(differences<T>(fused[0], staged[0], what + (random ? " random g" : " g = 1") + " fused against staged", x), 0);
      compared += 0x10000;
    }
  }
  EXPECT_GE(compared, 2 * 0x10000);
}

class EveryUnaryInput : public ::testing::TestWithParam<std::tuple<int, BackendKind>> {};

TEST_P(EveryUnaryInput, InBothFormatsFusedEqualsStagedAndTheForwardKernelItsStaging) {
  const auto [op_index, kind] = GetParam();
  const OpInfo& info = kOps[op_index];
  if (info.arity != 1) GTEST_SKIP() << info.name << " is binary: its pairs are sampled (vjp_paths_test.cpp)";
  TW_BACKEND_OR_SKIP(backend, kind);
  check_every_unary_input<bfloat16>(*backend, info);
  check_every_unary_input<float16>(*backend, info);
}

INSTANTIATE_TEST_SUITE_P(AllOps, EveryUnaryInput, ::testing::Combine(::testing::Range(0, kOpCount), kEveryBackend),
                         [](const auto& info) {
                           return std::string(kOps[std::get<0>(info.param)].name) + "_" +
                                  backend_name(std::get<1>(info.param));
                         });

// --- a node that is one ATen op: float32's result rounded once -------------------------------------

// The nodes whose forward TorchLean runs as one ATen op (spec/conventions.md 0.3): on a 16-bit
// dtype their forward is the float32 forward of the widened input, with the scalars' 16-bit values,
// rounded once. The staged forwards (silu, gelu, softplus, safeLog) round each stage instead.
bool forward_is_one_aten_op(Op op) {
  switch (op) {
    case Op::silu:
    case Op::gelu:
    case Op::softplus:
    case Op::safeLog: return false;
    default: return true;
  }
}

template <class T>
void check_one_op_forward_rounds_float32_once(Backend& be, const OpInfo& info) {
  const std::vector<T> x = every_pattern<T>();
  std::vector<T> b(x.size());
  std::mt19937 rng(11);
  for (T& v : b) v = T::from_bits(static_cast<std::uint16_t>(rng()));
  std::vector<float> x32(x.size()), b32(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x32[i] = static_cast<float>(x[i]), b32[i] = static_cast<float>(b[i]);
  const Scalars s = info.scalar_count() == 0 ? Scalars{} : graded_scalar_sets(info).sets[0];
  const Scalars s16{round_to(kDType<T>, s.s0), round_to(kDType<T>, s.s1)};
  const Buffer x16b = upload(be, host(x)), b16b = upload(be, host(b));
  const Buffer x32b = upload(be, host(x32)), b32b = upload(be, host(b32));
  const Buffer* in16[2] = {&x16b, &b16b};
  const Buffer* in32[2] = {&x32b, &b32b};
  const auto n = static_cast<std::size_t>(info.arity);
  const HostArray y16 = run_forward(be, info.op, s, {in16, n}, false);
  const HostArray y32 = run_forward(be, info.op, s16, {in32, n}, false);
  std::vector<T> rounded(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) rounded[i] = T(y32.at<float>(static_cast<std::int64_t>(i)));
  EXPECT_EQ(differences<T>(y16, host(rounded), std::string(info.name) + " " + dtype_name(kDType<T>) +
                                                   " forward against R16(float32 forward)", x), 0);
}

class OneOpForward : public ::testing::TestWithParam<std::tuple<int, BackendKind>> {};

TEST_P(OneOpForward, OnEvery16BitInputIsTheFloat32ResultRoundedOnce) {
  const auto [op_index, kind] = GetParam();
  const OpInfo& info = kOps[op_index];
  if (!forward_is_one_aten_op(info.op)) GTEST_SKIP() << info.name << "'s forward is staged: every stage rounds";
  TW_BACKEND_OR_SKIP(backend, kind);
  check_one_op_forward_rounds_float32_once<bfloat16>(*backend, info);
  check_one_op_forward_rounds_float32_once<float16>(*backend, info);
}

INSTANTIATE_TEST_SUITE_P(AllOps, OneOpForward, ::testing::Combine(::testing::Range(0, kOpCount), kEveryBackend),
                         [](const auto& info) {
                           return std::string(kOps[std::get<0>(info.param)].name) + "_" +
                                  backend_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace tapewise::testing

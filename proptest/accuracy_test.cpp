// proptest/accuracy_test.cpp — production vs the MPFR reference: every node's forward and VJP, on
// every backend present, both dtypes, over each op's domain (spec/ops.def) plus ±0, ties and its
// kink, with its run and graded scalar sets, within the bound spec/bounds.def states. No tolerance
// and no per-node value is written here.
#include <measure.hpp>

#include "test_support.hpp"

namespace tapewise::testing {
namespace {

namespace ref = tapewise::reference;

// Inputs for one case: the op's domain, with ±0 (where the domain has both signs) and the op's kink
// (spec/ops.def) mixed in (ties between a and b are made by the caller).
template <class T>
std::vector<T> inputs_for(const OpInfo& info, std::size_t n, const Scalars& s) {
  auto v = *rc::gen::container<std::vector<T>>(n, in_domain<T>(info.domain_log2_lo, info.domain_log2_hi, info.positive_only));
  for (T& x : v) {
    const int pick = *rc::gen::inRange(0, 10);
    if (pick == 0 && !info.positive_only) x = *rc::gen::elementOf(std::vector<T>{T(0), -T(0)});
    if (pick == 1 && info.kink == Kink::bounds) x = static_cast<T>(*rc::gen::elementOf(std::vector<double>{s.s0, s.s1}));
  }
  return v;
}

template <class T>
void check_against_reference(Backend& be, Op op) {
  const OpInfo& info = op_info(op);
  const DType dtype = dtype_of<T>::value;
  const Scalars s = pick_graded_scalars(op);
  const auto n = *rc::gen::inRange<std::size_t>(1, 40);
  const auto a = inputs_for<T>(info, n, s);
  auto b = inputs_for<T>(info, n, s);
  if (info.arity == 2)
    for (std::size_t i = 0; i < n; ++i)
      if (*rc::gen::inRange(0, 4) == 0) b[i] = a[i];  // exact ties
  const auto g = *rc::gen::container<std::vector<T>>(n, in_domain<T>(info.domain_log2_lo, info.domain_log2_hi, false));

  Tape t(be.shared_from_this());
  const NodeId ids[2] = {must(t.leaf(host(a))), must(t.leaf(host(b)))};
  const NodeId y = must(t.apply(op, {ids, static_cast<std::size_t>(info.arity)}, s));
  const Gradients grads = must(t.backward(y, host(g)));
  const HostArray value = must(t.value(y));
  const HostArray da = must(grads.host(ids[0]));
  const HostArray db = info.arity == 2 ? must(grads.host(ids[1])) : HostArray{};

  for (std::size_t i = 0; i < n; ++i) {
    const auto at = static_cast<std::int64_t>(i);
    const ref::Real in[2] = {ref::real(a[i]), ref::real(b[i])};
    const std::span<const ref::Real> in_span(in, static_cast<std::size_t>(info.arity));
    const ref::Real gi = ref::real(g[i]);
    const ref::Real y_exact = ref::forward(op, dtype, s, in_span);
    const auto fwd = ref::check(y_exact, value.at<T>(at), dtype, ref::forward_bound(op, dtype, math_mode(be)),
                                ref::abs_weight(op, dtype, s, in_span, gi, false));
    if (!fwd.within) {
      RC_LOG() << op_name(op) << " forward at x=" << a[i] << " b=" << b[i] << ": produced " << value.at<T>(at)
               << ", exact " << ref::round_to_dtype(y_exact, dtype) << ", " << fwd.error_ulps << " ulp, "
               << fwd.ratio << " of the bound";
      RC_FAIL("forward outside the spec's bound");
    }
    const auto d_exact = ref::vjp(op, dtype, s, in_span, gi);
    const double w = ref::abs_weight(op, dtype, s, in_span, gi, true);
    for (int k = 0; k < info.arity; ++k) {
      const T produced = (k == 0 ? da : db).template at<T>(at);
      const auto c = ref::check(d_exact[static_cast<std::size_t>(k)], produced, dtype, ref::vjp_bound(op, dtype, math_mode(be)), w);
      if (!c.within) {
        RC_LOG() << op_name(op) << " vjp " << k << " at x=" << a[i] << " b=" << b[i] << " g=" << g[i] << ": produced "
                 << produced << ", exact " << ref::round_to_dtype(d_exact[static_cast<std::size_t>(k)], dtype) << ", "
                 << c.error_ulps << " ulp, " << c.ratio << " of the bound";
        RC_FAIL("VJP outside the spec's bound");
      }
    }
  }
}

class Accuracy : public ::testing::TestWithParam<std::tuple<int, BackendKind>> {};

TEST_P(Accuracy, WithinSpecBoundOfTheReference) {
  const auto [op_index, kind] = GetParam();
  TW_BACKEND_OR_SKIP(backend, kind);
  Backend& be = *backend;
  const Op op = kOps[op_index].op;
  EXPECT_TRUE(rc::check(std::string(op_name(op)) + " float32", [&] { check_against_reference<float>(be, op); }));
  EXPECT_TRUE(rc::check(std::string(op_name(op)) + " float64", [&] { check_against_reference<double>(be, op); }));
}

INSTANTIATE_TEST_SUITE_P(AllOps, Accuracy, ::testing::Combine(::testing::Range(0, kOpCount), kEveryBackend),
                         [](const auto& info) {
                           return std::string(kOps[std::get<0>(info.param)].name) + "_" + backend_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace tapewise::testing

// proptest/vjp_paths_test.cpp — the two paths give one answer: for every node, dtype and backend, the
// fused VJP kernel and the spec's staged form (and the forward kernel and the staged forward) agree
// bit for bit on any input (bit patterns, ±0, subnormals, ±inf, NaN), up to NaN, and every staged
// form returns its workspace.
#include "test_support.hpp"

namespace tapewise::testing {
namespace {

// A test's name for an (op index, backend) parameter: "sin_cpu".
std::string op_and_backend_name(const ::testing::TestParamInfo<std::tuple<int, BackendKind>>& info) {
  return std::string(kOps[std::get<0>(info.param)].name) + "_" + backend_name(std::get<1>(info.param));
}

struct VjpRun {
  std::vector<HostArray> fused, staged;
  MemoryStats before, after_staged;
};

// Runs both VJP paths of one node directly on the backend, on the same inputs.
Result<VjpRun> run_both(Backend& be, Op op, const Scalars& s, const std::vector<HostArray>& inputs,
                        const HostArray& g) {
  std::vector<Buffer> in;
  for (const HostArray& h : inputs) {
    auto b = be.upload(h);
    if (!b) return tl::unexpected(b.error());
    in.push_back(std::move(*b));
  }
  auto gb = be.upload(g, AllocTag::gradient);
  if (!gb) return tl::unexpected(gb.error());
  const Buffer* in_ptrs[2] = {&in[0], &in[in.size() - 1]};
  const std::span<const Buffer* const> in_span(in_ptrs, in.size());
  VjpRun run;
  for (VjpPath path : {VjpPath::fused, VjpPath::staged}) {
    Buffer grads[2];
    Buffer* outs[2] = {&grads[0], &grads[1]};
    for (std::size_t k = 0; k < in.size(); ++k) {
      auto b = be.allocate(g.shape, g.dtype, AllocTag::gradient);
      if (!b) return tl::unexpected(b.error());
      grads[k] = std::move(*b);
    }
    const std::span<Buffer* const> out_span(outs, in.size());
    if (path == VjpPath::staged) run.before = be.stats();
    auto ok = path == VjpPath::fused ? be.vjp_fused(op, s, in_span, *gb, out_span)
                                     : staged_vjp(be, op, s, in_span, *gb, out_span);
    if (!ok) return tl::unexpected(ok.error());
    if (path == VjpPath::staged) run.after_staged = be.stats();
    for (std::size_t k = 0; k < in.size(); ++k) {
      auto h = be.download(grads[k]);
      if (!h) return tl::unexpected(h.error());
      (path == VjpPath::fused ? run.fused : run.staged).push_back(std::move(*h));
    }
  }
  return run;
}

template <class T>
void check_paths_agree(Backend& be, Op op) {
  const int arity = op_info(op).arity;
  const auto n = *rc::gen::inRange<std::size_t>(1, 70);
  std::vector<T> a = *rc::gen::container<std::vector<T>>(n, any_float<T>());
  std::vector<T> b = *rc::gen::container<std::vector<T>>(n, any_float<T>());
  const std::vector<T> g = *rc::gen::container<std::vector<T>>(n, any_float<T>());
  if (arity == 2 && *rc::gen::arbitrary<bool>()) b = a;  // exact ties everywhere
  const Scalars s = pick_any_table_scalars(op);
  std::vector<HostArray> inputs{host(a)};
  if (arity == 2) inputs.push_back(host(b));
  auto run = run_both(be, op, s, inputs, host(g));
  RC_ASSERT(run.has_value());
  RC_ASSERT(run->after_staged == run->before);  // every workspace buffer was released
  for (int k = 0; k < arity; ++k)
    for (std::size_t i = 0; i < n; ++i) {
      const T f = run->fused[k].template at<T>(static_cast<std::int64_t>(i));
      const T st = run->staged[k].template at<T>(static_cast<std::int64_t>(i));
      if (!same_bits(f, st)) {
        RC_LOG() << op_name(op) << " grad " << k << " at x=" << a[i] << " b=" << b[i] << " g=" << g[i]
                 << ": fused " << f << " staged " << st;
        RC_FAIL("fused and staged VJPs differ");
      }
    }
}

class VjpPaths : public ::testing::TestWithParam<std::tuple<int, BackendKind>> {};

TEST_P(VjpPaths, FusedEqualsStagedBitForBit) {
  const auto [op_index, kind] = GetParam();
  TW_BACKEND_OR_SKIP(backend, kind);
  Backend& be = *backend;
  const Op op = kOps[op_index].op;
  EXPECT_TRUE(rc::check(std::string(op_name(op)) + " float32", [&] { check_paths_agree<float>(be, op); }));
  EXPECT_TRUE(rc::check(std::string(op_name(op)) + " float64", [&] { check_paths_agree<double>(be, op); }));
  EXPECT_TRUE(rc::check(std::string(op_name(op)) + " bfloat16", [&] { check_paths_agree<bfloat16>(be, op); }));
  EXPECT_TRUE(rc::check(std::string(op_name(op)) + " float16", [&] { check_paths_agree<float16>(be, op); }));
}

INSTANTIATE_TEST_SUITE_P(AllOps, VjpPaths, ::testing::Combine(::testing::Range(0, kOpCount), kEveryBackend),
                         op_and_backend_name);

// The forward kernel and the forward as spec/conventions.md stages it (staged_forward, what the prover
// holds the kernel equal to) agree on any input, run on the real backends; the staged forward
// returns its workspace.
template <class T>
void check_forwards_agree(Backend& be, Op op) {
  const int arity = op_info(op).arity;
  const auto n = *rc::gen::inRange<std::size_t>(1, 70);
  const std::vector<T> a = *rc::gen::container<std::vector<T>>(n, any_float<T>());
  std::vector<T> b = *rc::gen::container<std::vector<T>>(n, any_float<T>());
  if (arity == 2 && *rc::gen::arbitrary<bool>()) b = a;  // exact ties everywhere
  const Scalars s = pick_any_table_scalars(op);
  auto ua = be.upload(host(a));
  auto ub = be.upload(host(b));
  RC_ASSERT(ua.has_value() && ub.has_value());
  const Buffer* in_ptrs[2] = {&*ua, &*ub};
  const std::span<const Buffer* const> in(in_ptrs, static_cast<std::size_t>(arity));
  auto kernel_out = be.allocate(ua->shape(), ua->dtype(), AllocTag::value);
  auto staged_out = be.allocate(ua->shape(), ua->dtype(), AllocTag::value);
  RC_ASSERT(kernel_out.has_value() && staged_out.has_value());
  RC_ASSERT(be.forward(op, s, in, *kernel_out).has_value());
  const MemoryStats before = be.stats();
  RC_ASSERT(staged_forward(be, op, s, in, *staged_out).has_value());
  RC_ASSERT(be.stats() == before);  // every workspace buffer was released
  auto kernel = be.download(*kernel_out);
  auto staged = be.download(*staged_out);
  RC_ASSERT(kernel.has_value() && staged.has_value());
  for (std::size_t i = 0; i < n; ++i) {
    const T k = kernel->template at<T>(static_cast<std::int64_t>(i));
    const T st = staged->template at<T>(static_cast<std::int64_t>(i));
    if (!same_bits(k, st)) {
      RC_LOG() << op_name(op) << " at x=" << a[i] << " b=" << b[i] << ": kernel " << k << " staged " << st;
      RC_FAIL("the forward kernel and the staged forward differ");
    }
  }
}

class ForwardPaths : public ::testing::TestWithParam<std::tuple<int, BackendKind>> {};

TEST_P(ForwardPaths, KernelEqualsStagedForward) {
  const auto [op_index, kind] = GetParam();
  TW_BACKEND_OR_SKIP(backend, kind);
  const Op op = kOps[op_index].op;
  EXPECT_TRUE(rc::check(std::string(op_name(op)) + " float32", [&] { check_forwards_agree<float>(*backend, op); }));
  EXPECT_TRUE(rc::check(std::string(op_name(op)) + " float64", [&] { check_forwards_agree<double>(*backend, op); }));
  EXPECT_TRUE(rc::check(std::string(op_name(op)) + " bfloat16", [&] { check_forwards_agree<bfloat16>(*backend, op); }));
  EXPECT_TRUE(rc::check(std::string(op_name(op)) + " float16", [&] { check_forwards_agree<float16>(*backend, op); }));
}

INSTANTIATE_TEST_SUITE_P(AllOps, ForwardPaths, ::testing::Combine(::testing::Range(0, kOpCount), kEveryBackend),
                         op_and_backend_name);

// spec/ops.def's vjp_reads column, held to the kernels: a `g` node's gradients (fused and staged) are
// the same bits when its inputs are NaN; an `inputs` node's are not (the benchmark counts its bytes).
class VjpReadsColumn : public ::testing::TestWithParam<std::tuple<int, BackendKind>> {};

TEST_P(VjpReadsColumn, GradientsDependOnTheInputsExactlyWhenTheTableSays) {
  const auto [op_index, kind] = GetParam();
  TW_BACKEND_OR_SKIP(backend, kind);
  const OpInfo& info = kOps[op_index];
  const std::vector<double> x{-2.5, -1.0, -0.0, 0.0, 0.3, 1.5, 3.0, 0.75};
  const std::vector<double> b{1.5, -1.0, 0.5, 0.0, 0.25, 2.0, -3.0, 0.5};
  const std::vector<double> nan(x.size(), std::numeric_limits<double>::quiet_NaN());
  const std::vector<double> g{1.0, -0.5, 2.0, 0.7, -1.25, 3.0, 0.125, -2.0};
  auto run_on = [&](const std::vector<double>& a_values, const std::vector<double>& b_values) {
    std::vector<HostArray> inputs{host(a_values)};
    if (info.arity == 2) inputs.push_back(host(b_values));
    auto run = run_both(*backend, info.op, default_scalars(info), inputs, host(g));
    EXPECT_TRUE(run.has_value()) << info.name << ": " << (run ? "" : run.error().str());
    return run ? *run : VjpRun{};
  };
  const VjpRun finite = run_on(x, b), from_nan = run_on(nan, nan);
  ASSERT_EQ(finite.fused.size(), static_cast<std::size_t>(info.arity));
  ASSERT_EQ(from_nan.fused.size(), static_cast<std::size_t>(info.arity));
  bool same = true;
  for (int k = 0; k < info.arity; ++k)
    same = same && finite.fused[k].bytes == from_nan.fused[k].bytes && finite.staged[k].bytes == from_nan.staged[k].bytes;
  EXPECT_EQ(same, info.vjp_reads == VjpReads::g)
      << info.name << ": spec/ops.def says vjp_reads " << vjp_reads_name(info.vjp_reads) << ", but its gradients "
      << (same ? "do not depend on the inputs" : "change when the inputs are NaN");
}

INSTANTIATE_TEST_SUITE_P(AllOps, VjpReadsColumn, ::testing::Combine(::testing::Range(0, kOpCount), kEveryBackend),
                         op_and_backend_name);

// The tape's own backward, both paths, on a graph using every node: identical gradients.
class TapeVjpPaths : public PerBackend {};
TW_INSTANTIATE_PER_BACKEND(TapeVjpPaths);

TEST_P(TapeVjpPaths, BackwardFusedEqualsStagedOnEveryNode) {
  Tape t(backend);
  const std::vector<float> xs{-2.5f, -1.0f, -0.0f, 0.0f, 0.25f, 1.5f, 3.0f, 40.0f};
  const NodeId x = must(t.leaf(host(xs)));
  const NodeId y = must(t.leaf(host(std::vector<float>{1.5f, -1.0f, 0.5f, 0.0f, 0.25f, 2.0f, -3.0f, 0.5f})));
  std::vector<NodeId> outs;
  for (const OpInfo& info : kOps) {
    const NodeId ids[2] = {x, y};
    auto r = t.apply(info.op, {ids, static_cast<std::size_t>(info.arity)}, default_scalars(info));
    ASSERT_TRUE(r) << r.error().str();
    outs.push_back(*r);
  }
  NodeId total = outs[0];
  for (std::size_t i = 1; i < outs.size(); ++i) total = must(t.add(total, outs[i]));
  const HostArray seed = host(std::vector<float>(xs.size(), 1.0f));
  auto fused = t.backward(total, seed, VjpPath::fused);
  auto staged = t.backward(total, seed, VjpPath::staged);
  ASSERT_TRUE(fused && staged);
  for (NodeId id : {x, y}) {
    const HostArray f = must(fused->host(id)), s = must(staged->host(id));
    EXPECT_EQ(f.bytes, s.bytes) << backend_name(*backend) << " node " << id;
  }
}

}  // namespace
}  // namespace tapewise::testing

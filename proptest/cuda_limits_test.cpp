// proptest/cuda_limits_test.cpp — the CUDA backend at its limits: tensors of more than 2^31 elements
// (64-bit indexing; a unary and a binary node, forward and fused VJP, float32 and float64, checked
// at both ends and in the middle against the same kernels on a small tensor), and an allocation
// beyond the GPU's memory (OutOfMemory, after which the tape keeps working). GPU only.
#include "test_support.hpp"

#ifdef TAPEWISE_HAS_CUDA
#include <cuda_runtime.h>

namespace tapewise::testing {
namespace {

constexpr std::int64_t kHuge = (std::int64_t{1} << 31) + 5;

// Positions worth checking: both ends, around 2^31 (where 32-bit indexing would wrap) and the middle.
std::vector<std::int64_t> probe_positions(std::int64_t n) {
  return {0, 1, 2, n / 2, (std::int64_t{1} << 31) - 1, std::int64_t{1} << 31, n - 2, n - 1};
}

// A huge buffer holding `fill` everywhere but distinct values at the probe positions.
template <class T>
Result<Buffer> huge_input(Backend& be, T fill, std::int64_t salt) {
  auto buffer = be.allocate(Shape{kHuge}, dtype_of<T>::value, AllocTag::value);
  if (!buffer) return buffer;
  if (auto ok = detail::engine_of(be).prim(Prim::fill, static_cast<double>(fill), {}, *buffer); !ok) return tl::unexpected(ok.error());
  // The copies below run on the default stream, which does not wait for the backend's stream: the
  // fill must be done before they write (or it could overwrite them).
  if (auto ok = be.synchronize(); !ok) return tl::unexpected(ok.error());
  std::int64_t k = 0;
  for (std::int64_t i : probe_positions(kHuge)) {
    const T v = static_cast<T>(0.375 + 0.25 * static_cast<double>(++k + salt));
    cudaMemcpy(static_cast<T*>(buffer->data()) + i, &v, sizeof(T), cudaMemcpyHostToDevice);
  }
  return buffer;
}

// The probe positions' elements of a huge buffer, and the same elements gathered into a small one.
template <class T>
std::vector<T> at_probes(const Buffer& b) {
  std::vector<T> out;
  for (std::int64_t i : probe_positions(kHuge)) {
    T v;
    cudaMemcpy(&v, static_cast<const T*>(b.data()) + i, sizeof(T), cudaMemcpyDeviceToHost);
    out.push_back(v);
  }
  return out;
}

template <class T>
bool enough_memory(int buffers) {
  std::size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  return free_bytes > static_cast<std::size_t>(buffers) * kHuge * sizeof(T) + (std::size_t{1} << 30);
}

// op over kHuge elements, forward and fused VJP, against the same op over the probes' values alone.
template <class T>
void check_huge(Backend& be, Op op) {
  const int arity = op_info(op).arity;
  // A GPU too small for the buffers cannot run this (float64 on an 80 GB H100: six of 16 GiB): it says
  // so and skips, where a larger one (the H200's 141 GB) runs it.
  if (!enough_memory<T>(2 * arity + 2))
    GTEST_SKIP() << "needs " << (2 * arity + 2) << " buffers of " << (kHuge * sizeof(T) >> 30)
                 << " GiB and 1 GiB spare of free GPU memory for " << dtype_name(dtype_of<T>::value)
                 << "; this GPU has less";
  std::vector<Buffer> inputs;
  for (int k = 0; k <= arity; ++k) {  // the inputs, then g
    auto b = huge_input<T>(be, static_cast<T>(0.5 + k), 10 * k);
    ASSERT_TRUE(b) << b.error().str();
    inputs.push_back(std::move(*b));
  }
  std::vector<Buffer> outputs;
  for (int k = 0; k <= arity; ++k) {  // y, then the gradients
    auto b = be.allocate(Shape{kHuge}, dtype_of<T>::value, AllocTag::gradient);
    ASSERT_TRUE(b) << b.error().str();
    ASSERT_TRUE(detail::engine_of(be).prim(Prim::fill, std::numeric_limits<double>::quiet_NaN(), {}, *b));  // poison
    outputs.push_back(std::move(*b));
  }
  const Buffer* in[2] = {&inputs[0], arity == 2 ? &inputs[1] : nullptr};
  Buffer* grads[2] = {&outputs[1], arity == 2 ? &outputs[2] : nullptr};
  ASSERT_TRUE(be.forward(op, {}, {in, static_cast<std::size_t>(arity)}, outputs[0]));
  ASSERT_TRUE(be.vjp_fused(op, {}, {in, static_cast<std::size_t>(arity)}, inputs[arity], {grads, static_cast<std::size_t>(arity)}));
  ASSERT_TRUE(be.synchronize());

  std::vector<Buffer> small;
  for (const Buffer& b : inputs) small.push_back(must(be.upload(host(at_probes<T>(b)))));
  std::vector<Buffer> small_out;
  for (int k = 0; k <= arity; ++k) small_out.push_back(must(be.allocate(small[0].shape(), small[0].dtype(), AllocTag::gradient)));
  const Buffer* sin_[2] = {&small[0], arity == 2 ? &small[1] : nullptr};
  Buffer* sgrads[2] = {&small_out[1], arity == 2 ? &small_out[2] : nullptr};
  ASSERT_TRUE(be.forward(op, {}, {sin_, static_cast<std::size_t>(arity)}, small_out[0]));
  ASSERT_TRUE(be.vjp_fused(op, {}, {sin_, static_cast<std::size_t>(arity)}, small[arity], {sgrads, static_cast<std::size_t>(arity)}));
  for (int k = 0; k <= arity; ++k) {
    const std::vector<T> huge_values = at_probes<T>(outputs[k]);
    const std::vector<T> small_values = must(be.download(small_out[k])).template to_vector<T>();
    for (std::size_t i = 0; i < huge_values.size(); ++i)
      EXPECT_TRUE(same_bits(huge_values[i], small_values[i]))
          << op_name(op) << " output " << k << " at element " << probe_positions(kHuge)[i] << ": " << huge_values[i]
          << " != " << small_values[i];
  }
}

// A backend of the test's own: its pool keeps freed blocks, and destroying it gives them back.
std::shared_ptr<Backend> own_cuda_backend() {
  auto be = make_cuda_backend();
  return be ? *be : nullptr;
}

TEST(CudaLimits, TensorsPast2To31ElementsFloat32) {
  TW_REQUIRE_CUDA(shared);
  for (Op op : {Op::sin, Op::max}) check_huge<float>(*own_cuda_backend(), op);
}

TEST(CudaLimits, TensorsPast2To31ElementsFloat64) {
  TW_REQUIRE_CUDA(shared);
  for (Op op : {Op::sin, Op::max}) check_huge<double>(*own_cuda_backend(), op);
}

// sin recorded and differentiated as programs (the threshold raised past kHuge): the interpreter's
// 64-bit index path, which smaller programs never take, against the per-node kernels on the probes.
TEST(CudaLimits, ProgramsPast2To31Elements) {
  TW_REQUIRE_CUDA(shared);
  const std::shared_ptr<Backend> be = own_cuda_backend();
  ASSERT_TRUE(enough_memory<float>(5)) << "not enough free GPU memory";
  std::array<std::vector<float>, 2> values, grads;  // [0]: the programs on kHuge elements, [1]: per node
  for (int side = 0; side < 2; ++side) {
    Buffer x = must(huge_input<float>(*be, 0.5f, 0));
    Buffer seed = must(huge_input<float>(*be, 1.5f, 10));
    if (side == 1) {  // the probes alone
      x = must(be->upload(host(at_probes<float>(x))));
      seed = must(be->upload(host(at_probes<float>(seed))));
    }
    Tape t(be);
    must(t.set_options(TapeOptions{side == 0 ? kHuge : 0, TapeOptions{}.max_pending_nodes}));
    const NodeId leaf = must(t.leaf(std::move(x)));
    const NodeId y = must(t.sin(leaf));
    auto g = t.backward(y, seed);
    ASSERT_TRUE(g) << g.error().str();
    const Buffer gx = g->take(leaf);
    const Buffer* vy = must(t.value_buffer(y));
    ASSERT_TRUE(be->synchronize());  // at_probes copies on the default stream, which does not wait for the backend's
    values[side] = side == 0 ? at_probes<float>(*vy) : must(be->download(*vy)).to_vector<float>();
    grads[side] = side == 0 ? at_probes<float>(gx) : must(be->download(gx)).to_vector<float>();
  }
  for (std::size_t i = 0; i < values[0].size(); ++i) {
    EXPECT_TRUE(same_bits(values[0][i], values[1][i]))
        << "sin at element " << probe_positions(kHuge)[i] << ": " << values[0][i] << " != " << values[1][i];
    EXPECT_TRUE(same_bits(grads[0][i], grads[1][i]))
        << "sin's gradient at element " << probe_positions(kHuge)[i] << ": " << grads[0][i] << " != " << grads[1][i];
  }
}

TEST(CudaLimits, AnAllocationBeyondTheGpuIsOutOfMemoryAndTheTapeGoesOn) {
  TW_REQUIRE_CUDA(be);
  std::size_t free_bytes = 0, total = 0;
  cudaMemGetInfo(&free_bytes, &total);
  Tape t(be);
  const NodeId x = must(t.leaf(host<float>({1, 2, 3})));
  const MemoryStats before = be->stats();
  auto too_big = be->allocate(Shape{static_cast<std::int64_t>(total / sizeof(float)) * 2}, DType::float32, AllocTag::value);
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.error().code, ErrorCode::OutOfMemory) << too_big.error().str();
  EXPECT_EQ(be->stats(), before);
  const NodeId y = must(t.sin(x));
  auto grads = t.backward(y, host<float>({1, 1, 1}));
  ASSERT_TRUE(grads) << grads.error().str();
  EXPECT_TRUE(grads->has(x));
}

}  // namespace
}  // namespace tapewise::testing
#endif

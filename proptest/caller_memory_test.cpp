// proptest/caller_memory_test.cpp — memory the caller owns: non-owning views (Backend::wrap) as
// leaves and seeds with no copy and the same gradient bits as uploaded data, DLPack import and
// export (views and ownership, every rejected tensor left with its caller), and the CUDA backend
// on a caller's stream without touching the caller's current device or default memory pool.
#include <dlpack/dlpack.h>

#include "test_support.hpp"

#ifdef TAPEWISE_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace tapewise::testing {
namespace {

class CallerMemory : public PerBackend {};

// A small graph over a and b; its gradients by the tape, for any way the leaves and seed arrive.
struct Graph {
  static Result<Gradients> run(Tape& t, NodeId a, NodeId b, const Buffer& seed) {
    auto y = t.max(must(t.mul(must(t.sin(a)), b)), must(t.div(a, b)));
    if (!y) return tl::unexpected(y.error());
    return t.backward(*y, seed);
  }
};

const std::vector<float> kA = {0.5f, -2.0f, 3.0f, 1.0f, -0.25f, 7.0f};
const std::vector<float> kB = {1.5f, 4.0f, -3.0f, 1.0f, 0.75f, -2.0f};
const std::vector<float> kSeed = {1.0f, -1.0f, 0.5f, 2.0f, 3.0f, -0.125f};

// Device or host memory holding `values`, as the backend's kernels address it.
struct CallerArray {
  std::shared_ptr<Backend> backend;
  void* data = nullptr;
  std::size_t bytes = 0;
  template <class T>
  CallerArray(std::shared_ptr<Backend> be, const std::vector<T>& values) : backend(std::move(be)) {
    bytes = values.size() * sizeof(T);
#ifdef TAPEWISE_HAS_CUDA
    if (backend->kind() == BackendKind::cuda) {
      cudaMalloc(&data, bytes);
      cudaMemcpy(data, values.data(), bytes, cudaMemcpyHostToDevice);
      return;
    }
#endif
    data = std::malloc(bytes);
    std::memcpy(data, values.data(), bytes);
  }
  ~CallerArray() {
#ifdef TAPEWISE_HAS_CUDA
    if (backend->kind() == BackendKind::cuda) {
      cudaFree(data);
      return;
    }
#endif
    std::free(data);
  }
};

Shape shape_of(const std::vector<float>& v) { return Shape{static_cast<std::int64_t>(v.size())}; }


TEST_P(CallerMemory, WrappedLeavesAndSeedsGiveTheSameBitsWithNoCopy) {
  Tape uploaded(backend);
  const NodeId ua = must(uploaded.leaf(host(kA)));
  const NodeId ub = must(uploaded.leaf(host(kB)));
  auto useed = backend->upload(host(kSeed), AllocTag::gradient);
  ASSERT_TRUE(useed) << useed.error().str();
  auto expected = Graph::run(uploaded, ua, ub, *useed);
  ASSERT_TRUE(expected) << expected.error().str();

  CallerArray a(backend, kA), b(backend, kB), seed(backend, kSeed);
  const MemoryStats before = backend->stats();
  Tape t(backend);
  auto va = backend->wrap(a.data, shape_of(kA), DType::float32);
  auto vb = backend->wrap(b.data, shape_of(kB), DType::float32);
  auto vseed = backend->wrap(seed.data, shape_of(kSeed), DType::float32);
  ASSERT_TRUE(va && vb && vseed);
  EXPECT_TRUE(va->borrowed());
  EXPECT_EQ(backend->stats(), before) << "views are not allocations";
  const NodeId la = must(t.leaf(std::move(*va)));
  const NodeId lb = must(t.leaf(std::move(*vb)));
  EXPECT_EQ(must(t.value_buffer(la))->data(), a.data) << "the leaf is the caller's memory, not a copy";
  auto got = Graph::run(t, la, lb, *vseed);
  ASSERT_TRUE(got) << got.error().str();
  for (NodeId id : {la, lb}) EXPECT_EQ(must(got->host(id)).bytes, must(expected->host(id == la ? ua : ub)).bytes);
}

TEST_P(CallerMemory, WrapRejectsNullAndMisalignedMemory) {
  auto null_view = backend->wrap(nullptr, Shape{4}, DType::float32);
  ASSERT_FALSE(null_view);
  EXPECT_EQ(null_view.error().code, ErrorCode::InvalidArgument);
  EXPECT_TRUE(backend->wrap(nullptr, Shape{0}, DType::float32)) << "an empty view needs no memory";
  CallerArray a(backend, kA);
  auto odd = backend->wrap(static_cast<std::byte*>(a.data) + 2, Shape{2}, DType::float32);
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message.find("aligned"), std::string::npos) << odd.error().message;
  auto bad_shape = backend->wrap(a.data, Shape{-1}, DType::float32);
  ASSERT_FALSE(bad_shape);
  EXPECT_EQ(bad_shape.error().code, ErrorCode::InvalidShape);
}

// A DLManagedTensor of the caller's, counting its deleter's calls.
struct CallerTensor {
  DLManagedTensor managed{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  int deleted = 0;
  CallerTensor(const Backend& be, void* data, std::vector<std::int64_t> dims) : shape(std::move(dims)) {
    managed.dl_tensor.data = data;
    managed.dl_tensor.device = {static_cast<DLDeviceType>(be.dlpack_device_type()), be.device_id()};
    managed.dl_tensor.ndim = static_cast<int>(shape.size());
    managed.dl_tensor.dtype = {kDLFloat, 32, 1};
    managed.dl_tensor.shape = shape.data();
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) { static_cast<CallerTensor*>(self->manager_ctx)->deleted += 1; };
  }
};

TEST_P(CallerMemory, DlpackImportIsZeroCopyAndCallsTheDeleterOnce) {
  CallerArray a(backend, kA);
  CallerTensor tensor(*backend, a.data, {2, 3});
  {
    Tape t(backend);
    auto buffer = backend->import_dlpack(&tensor.managed);
    ASSERT_TRUE(buffer) << buffer.error().str();
    EXPECT_EQ(buffer->shape(), (Shape{2, 3}));
    const NodeId x = must(t.leaf(std::move(*buffer)));
    EXPECT_EQ(must(t.value_buffer(x))->data(), a.data);
    EXPECT_EQ(tensor.deleted, 0);
  }
  EXPECT_EQ(tensor.deleted, 1) << "released with the tape that held it";
}

TEST_P(CallerMemory, RejectedDlpackTensorsStayWithTheirCaller) {
  CallerArray a(backend, kA);
  auto expect_rejected = [&](CallerTensor& t, ErrorCode code, const std::string& words) {
    auto r = backend->import_dlpack(&t.managed);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, code) << r.error().str();
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
    EXPECT_EQ(t.deleted, 0);
  };
  CallerTensor ints(*backend, a.data, {6});
  ints.managed.dl_tensor.dtype = {kDLInt, 32, 1};
  expect_rejected(ints, ErrorCode::DTypeMismatch, "not float32, float64, bfloat16 or float16");
  CallerTensor strided(*backend, a.data, {3, 2});
  strided.strides = {1, 3};
  strided.managed.dl_tensor.strides = strided.strides.data();
  expect_rejected(strided, ErrorCode::InvalidArgument, "C-contiguous");
  CallerTensor elsewhere(*backend, a.data, {6});
  elsewhere.managed.dl_tensor.device = {kDLROCM, 0};
  expect_rejected(elsewhere, ErrorCode::BackendMismatch, "rocm");
  CallerTensor negative(*backend, a.data, {-6});
  expect_rejected(negative, ErrorCode::InvalidShape, "[-6]");
  auto null = backend->import_dlpack(nullptr);
  ASSERT_FALSE(null);
}

// Fields a producer can get wrong that the checks above do not see: each is refused with an error
// naming the field, before any element is read, and the tensor stays with its caller.
TEST_P(CallerMemory, MalformedDlpackTensorsAreRefusedNamingTheField) {
  CallerArray a(backend, kA);
  auto expect_rejected = [&](CallerTensor& t, ErrorCode code, const std::string& words) {
    auto r = backend->import_dlpack(&t.managed);
    ASSERT_FALSE(r) << "accepted: " << words;
    EXPECT_EQ(r.error().code, code) << r.error().str();
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
    EXPECT_EQ(t.deleted, 0);
  };
  CallerTensor null_data(*backend, nullptr, {6});
  null_data.managed.dl_tensor.byte_offset = 4096;  // a non-NULL first element, but no memory
  expect_rejected(null_data, ErrorCode::InvalidArgument, "data is NULL");
  CallerTensor wrapping(*backend, a.data, {6});
  wrapping.managed.dl_tensor.byte_offset = std::uint64_t{1} << 63;
  expect_rejected(wrapping, ErrorCode::InvalidArgument, "byte_offset 9223372036854775808");
  CallerTensor too_many_dims(*backend, a.data, std::vector<std::int64_t>(kMaxNdim + 1, 1));
  expect_rejected(too_many_dims, ErrorCode::InvalidShape, "ndim 33");
  CallerTensor unknown_device(*backend, a.data, {6});
  const std::int32_t device_type = 99;  // not a DLDeviceType: written as the int a producer stores
  std::memcpy(&unknown_device.managed.dl_tensor.device.device_type, &device_type, sizeof device_type);
  expect_rejected(unknown_device, ErrorCode::BackendMismatch, "device_type 99");
}

// No elements: nothing is laid out, so any strides (and NULL data) describe the tensor.
TEST_P(CallerMemory, EmptyDlpackTensorsTakeAnyStrides) {
  CallerTensor empty(*backend, nullptr, {0, 3});
  empty.strides = {1, 1};
  empty.managed.dl_tensor.strides = empty.strides.data();
  auto buffer = backend->import_dlpack(&empty.managed);
  ASSERT_TRUE(buffer) << buffer.error().str();
  EXPECT_EQ(buffer->shape(), (Shape{0, 3}));
  EXPECT_EQ(buffer->bytes(), 0u);
}

// Every way a shape comes in refuses more than kMaxNdim dims, so a shape always fits a buffer of
// kMaxNdim dims when it is read back (the C ABI's TW_MAX_NDIM).
TEST_P(CallerMemory, ShapesOfMoreThanMaxNdimDimsAreRefused) {
  const Shape too_many(std::vector<std::int64_t>(kMaxNdim + 1, 1));
  const Shape most(std::vector<std::int64_t>(kMaxNdim, 1));
  const MemoryStats before = backend->stats();
  EXPECT_FALSE(too_many.valid());
  EXPECT_TRUE(most.valid());
  auto allocated = backend->allocate(too_many, DType::float32, AllocTag::value);
  ASSERT_FALSE(allocated);
  EXPECT_EQ(allocated.error().code, ErrorCode::InvalidShape);
  EXPECT_NE(allocated.error().message.find("33 dims, more than the 32 allowed"), std::string::npos)
      << allocated.error().message;
  CallerArray a(backend, kA);
  auto wrapped = backend->wrap(a.data, too_many, DType::float32);
  ASSERT_FALSE(wrapped);
  EXPECT_EQ(wrapped.error().code, ErrorCode::InvalidShape);
  Tape t(backend);
  auto leaf = t.leaf(HostArray::of<float>(too_many, std::vector<float>{1.f}));
  ASSERT_FALSE(leaf);
  EXPECT_EQ(leaf.error().code, ErrorCode::InvalidShape);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_TRUE(backend->allocate(most, DType::float32, AllocTag::value));
  EXPECT_EQ(backend->stats(), before);
}

TEST_P(CallerMemory, GradientsExportWithTheirMemoryAndValuesAsViews) {
  Tape t(backend);
  const NodeId x = must(t.leaf(host(kA)));
  const NodeId y = must(t.sin(x));
  auto grads = t.backward(y, host(kSeed));
  ASSERT_TRUE(grads) << grads.error().str();
  Buffer dx = grads->take(x);
  const void* dx_data = dx.data();
  const MemoryStats with_gradient = backend->stats();
  auto exported = backend->export_dlpack(std::move(dx));
  ASSERT_TRUE(exported) << exported.error().str();
  EXPECT_EQ((*exported)->dl_tensor.data, dx_data);
  EXPECT_EQ((*exported)->dl_tensor.ndim, 1);
  EXPECT_EQ((*exported)->dl_tensor.shape[0], 6);
  EXPECT_EQ(backend->stats(), with_gradient) << "the tensor owns the gradient now";
  auto back = backend->import_dlpack(*exported);  // the round trip, still no copy
  ASSERT_TRUE(back) << back.error().str();
  EXPECT_EQ(back->data(), dx_data);
  back->reset();
  EXPECT_EQ(backend->stats().count(AllocTag::gradient), with_gradient.count(AllocTag::gradient) - 1);

  auto view = backend->export_dlpack_view(*must(t.value_buffer(y)));
  ASSERT_TRUE(view) << view.error().str();
  EXPECT_EQ((*view)->dl_tensor.data, must(t.value_buffer(y))->data());
  (*view)->deleter(*view);
  EXPECT_TRUE(t.value(y)) << "a view's deleter leaves the value to the tape";
}

TW_INSTANTIATE_PER_BACKEND(CallerMemory);

#ifdef TAPEWISE_HAS_CUDA
// The CUDA elementwise kernels' 16-bit frames against the CPU backend, bit for bit up to NaN, for a
// one-input node, a two-input node and a two-output VJP: at the sizes where a frame changes (a tile
// is 1,024 elements, 128 threads x 8, for mul and max, and 2,048 for sin, two vectors a thread; whole
// tiles take the straight path, a partial last tile and the elements past the last whole vector the
// general one), and one element off 16-byte alignment, where every element is a scalar one. Inputs
// are every kind of bit pattern, NaNs included.
template <class T>
void expect_16bit_frames_match_cpu(const std::shared_ptr<Backend>& cuda_backend) {
  Backend& cuda = *cuda_backend;
  auto cpu = make_cpu_backend();
  for (const std::int64_t n : {1, 7, 8, 9, 1023, 1024, 1025, 1031, 2047, 2048, 2049, 2048 + 9, 4096, 5 * 1024 + 3,
                                3 * 2048 + 5}) {
    std::vector<std::vector<T>> values(3, std::vector<T>(static_cast<std::size_t>(n) + 1));
    std::uint32_t state = static_cast<std::uint32_t>(n) * 2654435761u;
    for (auto& v : values)
      for (T& x : v) x = T::from_bits(static_cast<std::uint16_t>((state = state * 1664525u + 1013904223u) >> 16));
    for (const std::int64_t offset : {0, 1}) {
      const std::string where = std::string(dtype_name(dtype_of<T>::value)) + " n=" + std::to_string(n) +
                                " offset=" + std::to_string(offset);
      std::vector<std::unique_ptr<CallerArray>> device;  // cudaMalloc'd: data + 1 element is misaligned
      std::vector<Buffer> on_cuda, on_cpu;
      for (const auto& v : values) {
        device.push_back(std::make_unique<CallerArray>(cuda_backend, v));
        on_cuda.push_back(must(cuda.wrap(static_cast<T*>(device.back()->data) + offset, Shape{n}, dtype_of<T>::value)));
        on_cpu.push_back(must(cpu->upload(host(std::vector<T>(v.begin() + offset, v.begin() + offset + n)))));
      }
      for (const Op op : {Op::sin, Op::mul, Op::max}) {
        const int arity = op_info(op).arity;
        const Buffer* cuda_in[2] = {&on_cuda[0], &on_cuda[1]};
        const Buffer* cpu_in[2] = {&on_cpu[0], &on_cpu[1]};
        const auto inputs = [&](const Buffer* const* in) { return std::span<const Buffer* const>(in, static_cast<std::size_t>(arity)); };
        std::vector<Buffer> cuda_out, cpu_out;
        for (int k = 0; k < 3; ++k) {
          cuda_out.push_back(must(cuda.allocate(Shape{n}, dtype_of<T>::value, AllocTag::workspace)));
          cpu_out.push_back(must(cpu->allocate(Shape{n}, dtype_of<T>::value, AllocTag::workspace)));
        }
        ASSERT_TRUE(cuda.forward(op, Scalars{}, inputs(cuda_in), cuda_out[0])) << where;
        ASSERT_TRUE(cpu->forward(op, Scalars{}, inputs(cpu_in), cpu_out[0])) << where;
        Buffer* cuda_grads[2] = {&cuda_out[1], &cuda_out[2]};
        Buffer* cpu_grads[2] = {&cpu_out[1], &cpu_out[2]};
        ASSERT_TRUE(cuda.vjp_fused(op, Scalars{}, inputs(cuda_in), on_cuda[2], std::span<Buffer* const>(cuda_grads, arity))) << where;
        ASSERT_TRUE(cpu->vjp_fused(op, Scalars{}, inputs(cpu_in), on_cpu[2], std::span<Buffer* const>(cpu_grads, arity))) << where;
        for (int k = 0; k <= arity; ++k) {
          const HostArray got = must(cuda.download(cuda_out[static_cast<std::size_t>(k)]));
          const HostArray want = must(cpu->download(cpu_out[static_cast<std::size_t>(k)]));
          for (std::int64_t i = 0; i < n; ++i)
            ASSERT_TRUE(same_bits(got.at<T>(i), want.at<T>(i)))
                << where << " " << op_name(op) << " output " << k << " element " << i;
        }
      }
    }
  }
}

TEST(CudaMapKernel, SixteenBitFramesMatchTheCpuAtTileEdgesAndOffsets) {
  TW_REQUIRE_CUDA(cuda);
  expect_16bit_frames_match_cpu<bfloat16>(cuda);
  expect_16bit_frames_match_cpu<float16>(cuda);
}

// The caller's process state: the current device and the default pool's release threshold.
TEST(CudaCallerState, BackendOnACallersStreamLeavesTheCallersStateAlone) {
  TW_REQUIRE_CUDA(shared);
  cudaMemPool_t default_pool;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&default_pool, 0), cudaSuccess);
  std::uint64_t threshold_before = 0, threshold_after = 0;
  cudaMemPoolGetAttribute(default_pool, cudaMemPoolAttrReleaseThreshold, &threshold_before);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    auto be = make_cuda_backend(CudaOptions{0, stream});
    ASSERT_TRUE(be) << be.error().str();
    EXPECT_EQ(cuda_stream(**be), static_cast<void*>(stream));
    Tape t(*be);
    const NodeId x = must(t.leaf(host(kA)));
    auto grads = t.backward(must(t.tanh(x)), host(kSeed));
    ASSERT_TRUE(grads) << grads.error().str();
    Tape reference(shared);
    const NodeId rx = must(reference.leaf(host(kA)));
    auto expected = reference.backward(must(reference.tanh(rx)), host(kSeed));
    ASSERT_TRUE(expected) << expected.error().str();
    EXPECT_EQ(must(grads->host(x)).bytes, must(expected->host(rx)).bytes);
  }
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess) << "the caller's stream outlives the backend";
  cudaStreamDestroy(stream);
  cudaMemPoolGetAttribute(default_pool, cudaMemPoolAttrReleaseThreshold, &threshold_after);
  EXPECT_EQ(threshold_after, threshold_before);
  int device = -1;
  cudaGetDevice(&device);
  EXPECT_EQ(device, 0);
  auto out_of_range = make_cuda_backend(CudaOptions{1 << 20, nullptr});
  ASSERT_FALSE(out_of_range);
  EXPECT_EQ(out_of_range.error().code, ErrorCode::InvalidArgument);
}

TEST(CudaCallerState, HostMemoryCannotBeWrappedOnTheGpu) {
  TW_REQUIRE_CUDA(be);
  std::vector<float> on_host(kA);
  auto view = be->wrap(on_host.data(), shape_of(kA), DType::float32);
  ASSERT_FALSE(view);
  EXPECT_EQ(view.error().code, ErrorCode::BackendMismatch) << view.error().str();
}
#endif

}  // namespace
}  // namespace tapewise::testing

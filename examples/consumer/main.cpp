// examples/consumer/main.cpp — records y = max(sin(x) * relu(x), x / 4) and differentiates it, on the
// CPU backend or (--cuda) on a CUDA backend bound to a stream this program created, with the leaf
// and the seed wrapped zero-copy from device memory this program owns. Prints the gradient, and on
// CUDA checks its bits against the same graph fed through uploads.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <tapewise/tapewise.hpp>
#include <tapewise/version.hpp>
#ifdef TAPEWISE_HAS_CUDA
#include <cuda_runtime.h>
#endif

using namespace tapewise;

namespace {

const std::vector<float> kX = {-1.0f, 0.0f, 0.5f, 2.0f, 3.0f};
const std::vector<float> kSeed = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f};

Result<NodeId> record(Tape& tape, NodeId x) {
  auto sine = tape.sin(x);
  if (!sine) return sine;
  auto ramp = tape.relu(x);
  if (!ramp) return ramp;
  auto product = tape.mul(*sine, *ramp);
  if (!product) return product;
  auto quarter = tape.scale(x, 0.25);
  if (!quarter) return quarter;
  return tape.max(*product, *quarter);
}

// The gradient of the graph at kX, with the leaf and seed uploaded from host vectors.
Result<HostArray> gradient_by_upload(std::shared_ptr<Backend> backend) {
  Tape tape(std::move(backend));
  auto x = tape.leaf(HostArray::of<float>(Shape{5}, kX));
  if (!x) return tl::unexpected(x.error());
  auto y = record(tape, *x);
  if (!y) return tl::unexpected(y.error());
  auto grads = tape.backward(*y, HostArray::of<float>(Shape{5}, kSeed));
  if (!grads) return tl::unexpected(grads.error());
  return grads->host(*x);
}

void print(const char* label, const HostArray& a) {
  std::printf("%s:", label);
  for (float v : a.to_vector<float>()) std::printf(" %g", v);
  std::printf("\n");
}

int fail(const Error& e) {
  std::fprintf(stderr, "consumer: %s\n", e.str().c_str());
  return 1;
}

#ifdef TAPEWISE_HAS_CUDA
// The leaf and the seed in device memory of the program's own, on a stream of its own.
int run_on_callers_stream() {
  cudaStream_t stream;
  if (cudaError_t err = cudaStreamCreate(&stream); err != cudaSuccess)
    return std::fprintf(stderr, "consumer: cannot create a CUDA stream: %s\n", cudaGetErrorString(err)), 1;
  float* x_dev = nullptr;
  float* seed_dev = nullptr;
  cudaMalloc(&x_dev, sizeof(float) * kX.size());
  cudaMalloc(&seed_dev, sizeof(float) * kSeed.size());
  cudaMemcpyAsync(x_dev, kX.data(), sizeof(float) * kX.size(), cudaMemcpyHostToDevice, stream);
  cudaMemcpyAsync(seed_dev, kSeed.data(), sizeof(float) * kSeed.size(), cudaMemcpyHostToDevice, stream);
  int status = 0;
  {
    auto backend = make_cuda_backend(CudaOptions{0, stream});
    if (!backend) return fail(backend.error());
    std::printf("backend: %s\n", (*backend)->describe().c_str());
    Tape tape(*backend);
    auto x_view = (*backend)->wrap(x_dev, Shape{5}, DType::float32);
    auto seed_view = (*backend)->wrap(seed_dev, Shape{5}, DType::float32);
    if (!x_view || !seed_view) return fail(x_view ? seed_view.error() : x_view.error());
    const NodeId x = tape.leaf(std::move(*x_view)).value();
    const void* leaf_data = tape.value_buffer(x).value()->data();
    std::printf("leaf value at %p, caller memory at %p: %s\n", leaf_data, static_cast<void*>(x_dev),
                leaf_data == x_dev ? "zero-copy" : "COPIED");
    auto y = record(tape, x);
    auto grads = y ? tape.backward(*y, *seed_view) : Result<Gradients>(tl::unexpected(y.error()));
    if (!grads) return fail(grads.error());
    HostArray wrapped = grads->host(x).value();
    auto uploaded = gradient_by_upload(*backend);
    if (!uploaded) return fail(uploaded.error());
    print("dx (caller memory, caller stream)", wrapped);
    const bool same = wrapped.bytes == uploaded->bytes;
    std::printf("dx bits equal the upload path's: %s\n", same ? "yes" : "NO");
    status = same ? 0 : 1;
  }
  cudaFree(x_dev);
  cudaFree(seed_dev);
  cudaStreamDestroy(stream);
  return status;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const bool cuda = argc > 1 && std::strcmp(argv[1], "--cuda") == 0;
  std::printf("tapewise %s (spec sha256 %.12s...)\n", kVersion, kSpecSha256);
  if (cuda) {
#ifdef TAPEWISE_HAS_CUDA
    return run_on_callers_stream();
#else
    std::fprintf(stderr, "consumer: this tapewise was built without CUDA\n");
    return 1;
#endif
  }
  auto backend = make_cpu_backend();
  std::printf("backend: %s\n", backend->describe().c_str());
  auto dx = gradient_by_upload(backend);
  if (!dx) return fail(dx.error());
  print("dx", *dx);
  return 0;
}

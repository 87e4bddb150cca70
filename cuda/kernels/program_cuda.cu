// cuda/kernels/program_cuda.cu — the CUDA runner of a tape program: one thread per element runs every step
// in order (run_steps_at); the steps travel in the kernel's parameters, so a launch needs no
// allocation, no copy and no synchronisation. Programs longer than one launch run as several.
#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "program.hpp"

namespace tapewise::detail {
namespace {

// One thread does all of a program's steps for its elements, latency-bound rather than
// memory-bound: small blocks spread a small tensor over more SMs.
constexpr int kProgramThreads = 128;
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 30;  // grid-stride beyond this
// Short programs (a value read right after a few records) get a small parameter block.
constexpr int kShortLaunch = 16;

template <int Capacity>
struct StepBlock {
  Step steps[Capacity];
  int count;
};
// The CUDA limit on kernel parameters (CUDA 12.1+, sm_70+): 32,764 bytes.
static_assert(sizeof(StepBlock<kStepsPerLaunch>) + sizeof(std::int64_t) <= 32764);

// __grid_constant__: the steps are read where they are, in the constant bank, the same step by every
// thread of a warp at once; without it an indexed parameter array is copied to local memory.
template <int Capacity>
__global__ void __launch_bounds__(kProgramThreads)
    program_kernel(const __grid_constant__ StepBlock<Capacity> block, std::int64_t n) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    run_steps_at(block.steps, block.count, i);
}

template <int Capacity>
cudaError_t launch_block(cudaStream_t stream, const Step* steps, int count) {
  StepBlock<Capacity> block;  // trivially constructible: only the `count` steps used are written
  std::copy(steps, steps + count, block.steps);
  block.count = count;
  std::int64_t n = 0;
  for (int k = 0; k < count; ++k) n = std::max(n, steps[k].numel);
  if (n == 0) return cudaSuccess;
  const std::int64_t blocks = std::clamp<std::int64_t>((n + kProgramThreads - 1) / kProgramThreads, 1, kMaxBlocks);
  program_kernel<Capacity><<<static_cast<unsigned>(blocks), kProgramThreads, 0, stream>>>(block, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_program(cudaStream_t stream, const Program& program) {
  const std::size_t total = program.steps.size();
  for (std::size_t first = 0; first < total; first += kStepsPerLaunch) {
    const int count = static_cast<int>(std::min<std::size_t>(kStepsPerLaunch, total - first));
    const Step* steps = program.steps.data() + first;
    const cudaError_t err = count <= kShortLaunch ? launch_block<kShortLaunch>(stream, steps, count)
                                                  : launch_block<kStepsPerLaunch>(stream, steps, count);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace tapewise::detail

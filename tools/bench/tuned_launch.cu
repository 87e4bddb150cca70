// tools/bench/tuned_launch.cu — runs the proposed kernel (tuned_kernel.cuh) through the production
// dispatch (cuda/dispatch.hpp), so the only difference from the backend is the launch itself.
#include "tuned_launch.hpp"

#include <dispatch.hpp>

#include "tuned_kernel.cuh"

namespace tapewise::bench {

Result<void> tuned_forward(cudaStream_t stream, Op op, const Scalars& s,
                           std::span<const Buffer* const> inputs, Buffer& out) {
  tuned::KernelLaunch launch{stream};
  return detail::run_forward(launch, op, s, inputs, out);
}

Result<void> tuned_vjp(cudaStream_t stream, Op op, const Scalars& s,
                       std::span<const Buffer* const> inputs, const Buffer& g,
                       std::span<Buffer* const> grads) {
  tuned::KernelLaunch launch{stream};
  return detail::run_vjp(launch, op, s, inputs, g, grads);
}

const char* tuned_description() {
  return "tuned: 256 threads, 4 x 16-byte vectors per operand per thread loaded before use, grid covers the tensor once";
}

}  // namespace tapewise::bench

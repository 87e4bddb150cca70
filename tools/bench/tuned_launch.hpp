// tools/bench/tuned_launch.hpp — entry points into the proposed kernel (tuned_kernel.cuh) for the
// benchmark's `--kernel tuned` mode: the backend's forward and fused VJP, on the backend's stream.
#pragma once

#include <span>

#include <cuda_runtime.h>

#include <tapewise/tapewise.hpp>

namespace tapewise::bench {

Result<void> tuned_forward(cudaStream_t stream, Op op, const Scalars& s,
                           std::span<const Buffer* const> inputs, Buffer& out);
Result<void> tuned_vjp(cudaStream_t stream, Op op, const Scalars& s,
                       std::span<const Buffer* const> inputs, const Buffer& g,
                       std::span<Buffer* const> grads);
const char* tuned_description();

}  // namespace tapewise::bench

// cuda/backends/cuda_kernels.hpp — the CUDA backend's kernel launches, one set per math mode:
// cuda_kernels.cu compiled as it is (aten: the libm functions ATen calls) and again by
// cuda_kernels_exact.cu (exact: tapewise's own math); a backend takes one set when it is made.
#pragma once

#include <span>

#include <cuda_runtime.h>

#include <tapewise/backend.hpp>

#include "backends/compiled_pieces.hpp"
#include "kernels/map_kernels.cuh"
#include "kernels/program.hpp"

namespace tapewise::detail {

struct CudaKernels {
  Result<void> (*forward)(cudaStream_t stream, MapShape shape, Op op, const Scalars& s,
                          std::span<const Buffer* const> inputs, Buffer& out);
  Result<void> (*vjp)(cudaStream_t stream, MapShape shape, Op op, const Scalars& s,
                      std::span<const Buffer* const> inputs, const Buffer& g, std::span<Buffer* const> grads);
  Result<void> (*prim)(cudaStream_t stream, MapShape shape, Prim p, double c, std::span<const Buffer* const> inputs,
                       Buffer& out);
  // The tape program's runner (program_launch.cu) of the same mode.
  cudaError_t (*program)(cudaStream_t stream, const Program& program, const CompiledPieceTarget* compiled);
};
const CudaKernels& cuda_kernels_aten();
const CudaKernels& cuda_kernels_exact();

}  // namespace tapewise::detail

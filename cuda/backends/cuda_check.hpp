// cuda/backends/cuda_check.hpp — a CUDA runtime error as the library's error: the code a caller acts
// on (OutOfMemory, DeviceUnavailable, else CudaFailure) and a message naming the call and the error.
#pragma once

#include <string>

#include <cuda_runtime.h>

#include <tapewise/core.hpp>

namespace tapewise::detail {

[[nodiscard]] inline Result<void> cuda_check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return {};
  cudaGetLastError();  // clear the sticky-free error state so later calls are not blamed
  const ErrorCode code = err == cudaErrorMemoryAllocation ? ErrorCode::OutOfMemory
                         : (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
                             ? ErrorCode::DeviceUnavailable
                             : ErrorCode::CudaFailure;
  return fail(code, what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace tapewise::detail

// cuda/backends/kernel_image.cu — whether this build's kernels run on a device: a GPU whose compute
// capability the build compiled no machine code (and no usable PTX) for would otherwise fail at the
// first launch with cudaErrorNoKernelImageForDevice. Every kernel of the library is compiled with the
// same CMAKE_CUDA_ARCHITECTURES, so an empty kernel here answers for all of them.
#include <algorithm>
#include <string>

#include <cuda_runtime.h>

#include <tapewise/backend.hpp>

#include "backends/cuda_architectures.hpp"
#include "backends/kernel_image.hpp"

namespace tapewise {
namespace {
__global__ void kernel_image_probe() {}
}  // namespace

Result<void> check_kernel_image(int device) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess || cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return fail(ErrorCode::DeviceUnavailable, "CUDA device " + std::to_string(device) + " cannot be selected");
  }
  cudaFuncAttributes attributes{};
  const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel_image_probe);
  cudaGetLastError();
  cudaSetDevice(previous);
  if (err == cudaSuccess) return {};
  // CMake's list, passed with commas for its semicolons (see CMakeLists.txt).
  std::string architectures = TAPEWISE_CUDA_ARCHITECTURES;
  std::replace(architectures.begin(), architectures.end(), ',', ';');
  cudaDeviceProp prop{};
  const bool named = cudaGetDeviceProperties(&prop, device) == cudaSuccess;
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction)
    return fail(ErrorCode::DeviceUnavailable,
                detail::no_kernel_image_message(device, named ? prop.name : "unnamed", named ? prop.major : 0,
                                                named ? prop.minor : 0, architectures));
  return fail(ErrorCode::DeviceUnavailable, "CUDA device " + std::to_string(device) + ": the kernels cannot be loaded: " +
                                                cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace tapewise

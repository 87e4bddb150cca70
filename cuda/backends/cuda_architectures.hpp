// cuda/backends/cuda_architectures.hpp — what GPUs a build's kernels run on, from its
// CMAKE_CUDA_ARCHITECTURES list, and the error a GPU outside them gets. Plain C++ (no CUDA), so the
// wording is unit-tested on machines without a GPU (proptest/cuda_architectures_test.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tapewise::detail {

// The code a CUDA build carries: machine code (SASS, "80-real") per sm_XY and PTX ("80-virtual") per
// compute_XY; a plain "80" is both. Values are major*10+minor. `symbolic` holds a list CMake expands
// itself (all, all-major, native), which names no architecture here.
struct CudaArchitectures {
  std::vector<int> sass;
  std::vector<int> ptx;
  std::string symbolic;
};

// Parses CMake's list ("80-real;86-real;90"); entries it cannot read are kept in `symbolic`.
CudaArchitectures parse_cuda_architectures(std::string_view cmake_list);

// "machine code for sm_80, sm_90 and PTX for compute_90", for the messages below.
std::string describe_cuda_architectures(const CudaArchitectures& archs);

// The error for a device with no kernel image in the build: names the device, its compute
// capability, what the build holds, and the configure option that adds the device's architecture.
std::string no_kernel_image_message(int device, std::string_view device_name, int major, int minor,
                                    std::string_view cmake_list);

}  // namespace tapewise::detail

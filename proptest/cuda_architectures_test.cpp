// proptest/cuda_architectures_test.cpp — the error a GPU gets when the build holds no kernel image for
// it, and the reading of CMAKE_CUDA_ARCHITECTURES behind it (cuda/backends/cuda_architectures.hpp).
// Plain C++: runs on every machine; the GPU side (kernel_image.cu's probe) is checked on the H200 with
// a build that holds only sm_80 machine code.
#include <string>

#include <gtest/gtest.h>

#include <tapewise/tapewise.h>
#include <tapewise/tapewise.hpp>

#include "backends/cuda_architectures.hpp"

namespace tapewise::detail {
namespace {

TEST(CudaArchitectures, ReadsRealVirtualAndPlainEntries) {
  const auto archs = parse_cuda_architectures("90;80-real;86-real;120-virtual;89-real");
  EXPECT_EQ(archs.sass, (std::vector<int>{80, 86, 89, 90}));
  EXPECT_EQ(archs.ptx, (std::vector<int>{90, 120}));
  EXPECT_TRUE(archs.symbolic.empty());
}

TEST(CudaArchitectures, KeepsWhatItCannotReadAsCMakeWroteIt) {
  const auto archs = parse_cuda_architectures("native;100a-real;;sm_90");
  EXPECT_EQ(archs.sass, (std::vector<int>{100}));
  EXPECT_TRUE(archs.ptx.empty());
  EXPECT_EQ(archs.symbolic, "native;sm_90");
}

TEST(CudaArchitectures, DescribesMachineCodeAndPtx) {
  EXPECT_EQ(describe_cuda_architectures(parse_cuda_architectures("80-real;86-real;89-real;90")),
            "machine code for sm_80, sm_86, sm_89, sm_90 and PTX for compute_90");
  EXPECT_EQ(describe_cuda_architectures(parse_cuda_architectures("80-real")), "machine code for sm_80");
  EXPECT_EQ(describe_cuda_architectures(parse_cuda_architectures("75-virtual")), "PTX for compute_75");
  EXPECT_EQ(describe_cuda_architectures(parse_cuda_architectures("all")), "CMake's 'all'");
  EXPECT_EQ(describe_cuda_architectures(parse_cuda_architectures("")), "no CUDA architecture");
}

TEST(CudaArchitectures, TheNoKernelImageErrorNamesTheDeviceAndTheBuild) {
  const std::string message = no_kernel_image_message(1, "NVIDIA H200", 9, 0, "80-real");
  EXPECT_NE(message.find("CUDA device 1 (NVIDIA H200, compute capability 9.0)"), std::string::npos) << message;
  EXPECT_NE(message.find("has no kernel image in this build of tapewise"), std::string::npos) << message;
  EXPECT_NE(message.find("holds machine code for sm_80 (CMAKE_CUDA_ARCHITECTURES=80-real)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("-DCMAKE_CUDA_ARCHITECTURES=\"80-real;90\""), std::string::npos) << message;
  EXPECT_NE(message.find("-Ccmake.define.CMAKE_CUDA_ARCHITECTURES=\"80-real;90\""), std::string::npos) << message;
}

// On a GPU the build holds no kernel image for (e.g. a build with CMAKE_CUDA_ARCHITECTURES=80-real on
// an H200), every door says so with the device's compute capability: cuda_available's reason (the
// runner's "why no CUDA", Python's cuda_unavailable_reason), make_cuda_backend and the C ABI.
// Elsewhere it skips, saying why.
TEST(CudaArchitectures, AGpuOutsideTheBuildIsToldItsComputeCapabilityThroughEveryDoor) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "this build holds a kernel image for the GPU here";
  if (why.find("has no kernel image") == std::string::npos) GTEST_SKIP() << "no GPU to probe: " << why;
  EXPECT_NE(why.find("compute capability "), std::string::npos) << why;
  EXPECT_NE(why.find("CMAKE_CUDA_ARCHITECTURES="), std::string::npos) << why;
  auto backend = make_cuda_backend();
  ASSERT_FALSE(backend);
  EXPECT_EQ(backend.error().code, ErrorCode::DeviceUnavailable);
  EXPECT_NE(backend.error().message.find("has no kernel image in this build of tapewise"), std::string::npos)
      << backend.error().message;
  tw_backend* c_backend = nullptr;
  EXPECT_EQ(tw_backend_create_cuda(0, nullptr, &c_backend), TW_DEVICE_UNAVAILABLE);
  EXPECT_EQ(c_backend, nullptr);
  EXPECT_NE(std::string(tw_last_error()).find("compute capability "), std::string::npos) << tw_last_error();
}

}  // namespace
}  // namespace tapewise::detail

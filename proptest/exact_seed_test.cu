// proptest/exact_seed_test.cu — the GPU's reciprocal seed (exact::reciprocal_seed, rcp.approx.ftz.f64) within
// the bound exact tanh's division rests on, for every significand it reads at every exponent tanh gives it.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <tapewise/tapewise.hpp>

#include "kernels/exact/bits.cuh"

namespace {

using tapewise::exact::bits_of;
using tapewise::exact::double_of;

// d = 2^exponent * (1 + significand / 2^20 + low / 2^52) for the 2^20 significands rcp.approx.ftz.f64 reads,
// low the 32 bits it ignores, all zero or all one; the largest |1 - d r0| over them, as the bits of a
// nonnegative double (ordered as integers).
__global__ void largest_seed_error(int exponent, std::uint64_t* largest) {
  const std::uint64_t significand = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  if (significand >= (1u << 20)) return;
  const std::uint64_t lows[2] = {0, 0xFFFFFFFFu};
  for (const std::uint64_t low : lows) {
    const double d = double_of((static_cast<std::uint64_t>(1023 + exponent) << 52) | (significand << 32) | low);
    const double error = std::fabs(tapewise::exact::fma(-d, tapewise::exact::reciprocal_seed(d), 1.0));
    atomicMax(reinterpret_cast<unsigned long long*>(largest), static_cast<unsigned long long>(bits_of(error)));
  }
}

TEST(ExactMath, ReciprocalSeedIsWithinBound) {
  // The library's own test of a usable device (a driver, a GPU this build has code for), as every GPU test.
  if (const auto backend = tapewise::make_cuda_backend(); !backend)
    GTEST_SKIP() << "GPU test skipped: " << backend.error().str();
  std::uint64_t* largest = nullptr;
  ASSERT_EQ(cudaMalloc(&largest, sizeof *largest), cudaSuccess);
  double worst = 0.0;
  for (int exponent = 1; exponent <= 29; ++exponent) {  // d in [2, 2^30): tanh's d = RN(E + 2) in [2, 2^29]
    ASSERT_EQ(cudaMemset(largest, 0, sizeof *largest), cudaSuccess);
    largest_seed_error<<<(1u << 20) / 256, 256>>>(exponent, largest);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    std::uint64_t bits = 0;
    ASSERT_EQ(cudaMemcpy(&bits, largest, sizeof bits, cudaMemcpyDeviceToHost), cudaSuccess);
    worst = std::fmax(worst, double_of(bits));
  }
  cudaFree(largest);
  RecordProperty("largest_seed_error_log2", std::to_string(std::log2(worst)));
  std::printf("rcp.approx.ftz.f64: |1 - d r0| <= 2^%.3f over every significand read, d in [2, 2^30)\n", std::log2(worst));
  EXPECT_LT(worst, 0x1p-18);
  EXPECT_GT(worst, 0.0);  // a seed that came back exact everywhere would mean the kernel did not run
}

}  // namespace

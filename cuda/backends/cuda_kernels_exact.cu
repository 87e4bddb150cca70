// cuda/backends/cuda_kernels_exact.cu — the CUDA backend's launches in exact mode: cuda_kernels.cu
// compiled with tapewise's own exp, log, sin, cos and tanh (kernels/exact_math.cuh).
#define TAPEWISE_MATH_EXACT 1
#include "cuda_kernels.cu"

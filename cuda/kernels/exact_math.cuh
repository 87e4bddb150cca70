// cuda/kernels/exact_math.cuh — tapewise's own exp, log, sin, cos and tanh (exact mode): float32
// correctly rounded on every input, float64 within 1 ulp by one algorithm on every backend.
#pragma once

#include "exact/exp_tanh.cuh"
#include "exact/log.cuh"
#include "exact/sin_cos.cuh"

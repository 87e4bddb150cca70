// cuda/backends/program_launch_exact.cu — the tape program's runner in exact mode: program_launch.cu
// compiled with tapewise's own exp, log, sin, cos and tanh (kernels/exact_math.cuh).
#define TAPEWISE_MATH_EXACT 1
#include "program_launch.cu"

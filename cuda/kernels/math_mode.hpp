// cuda/kernels/math_mode.hpp — the math mode a translation unit is compiled in. TAPEWISE_MATH_EXACT
// takes tapewise's own exp, log, sin, cos and tanh (exact_math.cuh: float32 correctly rounded, the
// same bits on host and device); otherwise the libm functions ATen calls. Every function and kernel
// whose code depends on it lives in an inline namespace named after the mode, so the two modes'
// instantiations are different symbols and one is never linked in place of the other.
#pragma once

#if defined(TAPEWISE_MATH_EXACT)
#define TW_MATH_NS exact_mode
#else
#define TW_MATH_NS aten_mode
#endif

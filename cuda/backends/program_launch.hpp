// cuda/backends/program_launch.hpp — the CUDA runner of a tape program (program_launch.cu), which the
// CUDA backend calls: the interpreter's kernel or a compiled piece per launch.
#pragma once

#include <cuda_runtime.h>

#include "backends/compiled_pieces.hpp"
#include "kernels/math_mode.hpp"
#include "kernels/program.hpp"

namespace tapewise::detail {
inline namespace TW_MATH_NS {  // one runner per math mode (program_launch_exact.cu)

// Queues the program on `stream`, a launch per piece (piece_at, at most kStepsPerLaunch steps), each a
// compiled piece where `compiled` (null: none) gives one, else the interpreter; returns the first
// launch error.
cudaError_t launch_program(cudaStream_t stream, const Program& program, const CompiledPieceTarget* compiled);

}  // inline namespace TW_MATH_NS
}  // namespace tapewise::detail

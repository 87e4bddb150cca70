// cuda/cuda_stream.hpp — internal: the CUDA stream a backend's work is queued on, for tools that
// time kernels with CUDA events (the benchmark). Not part of the public API.
#pragma once

#include <cuda_runtime.h>

#include <tapewise/backend.hpp>

namespace tapewise::detail {

// The backend's stream, or nullptr when `be` is not a CUDA backend.
cudaStream_t cuda_stream_of(const Backend& be);

}  // namespace tapewise::detail

// cuda/kernels/program_cuda.cu — the CUDA runner of a tape program: one thread per element runs every
// step of a piece in order (interpreter.hpp: run_steps_at; program.hpp: piece_at); the steps travel in the kernel's
// parameters, so a launch needs no allocation, no copy and no synchronisation. A program of several
// pieces (more steps than one launch holds, or steps of both dtypes) runs as several launches.
#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "interpreter.hpp"

namespace tapewise::detail {
namespace {

// One thread does all of a piece's steps for its elements, latency-bound rather than
// memory-bound: small blocks spread a small tensor over more SMs.
constexpr int kProgramThreads = 128;
constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 30;  // grid-stride beyond this
// Short pieces (a value read right after a few records) get a small parameter block.
constexpr int kShortLaunch = 16;

template <int Capacity>
struct StepBlock {
  Step steps[Capacity];
  int count;
};
// The CUDA limit on kernel parameters (CUDA 12.1+, sm_70+): 32,764 bytes.
static_assert(sizeof(StepBlock<kStepsPerLaunch>) + 2 * sizeof(std::int64_t) <= 32764);  // block, n, covered
static_assert(sizeof(Step) % sizeof(std::uint64_t) == 0);

// The block first copies the steps from the parameters to shared memory, where the loop reads each
// step's fields: the design measured on the H200 (results/2026-12-01_H200_chain_interpreter/). A block
// covers tiles of kProgramThreads * Lanes elements; thread t takes t, t + kProgramThreads, ... of each.
template <int Capacity, class T, class Index, int Lanes>
__global__ void __launch_bounds__(kProgramThreads)
    program_kernel(const __grid_constant__ StepBlock<Capacity> block, Index n, Index covered) {
  __shared__ Step steps[Capacity];
  const auto* from = reinterpret_cast<const std::uint64_t*>(block.steps);
  auto* to = reinterpret_cast<std::uint64_t*>(steps);
  const int words = block.count * static_cast<int>(sizeof(Step) / sizeof(std::uint64_t));
  for (int w = threadIdx.x; w < words; w += blockDim.x) to[w] = from[w];
  __syncthreads();
  constexpr Index kTile = static_cast<Index>(kProgramThreads) * Lanes;
  const Index stride = static_cast<Index>(gridDim.x) * kTile;
  const Index thread = static_cast<Index>(threadIdx.x);
  // Either loop covers the same elements; each is the faster for its lane count on the H200 (one
  // lane, bounded by the thread's element: 0.648 against 0.678 us/node at 2^12; four, bounded by the
  // tile: 8.66 against 9.45 at 2^20).
  if constexpr (Lanes == 1) {
    for (Index first = static_cast<Index>(blockIdx.x) * kTile + thread; first < n; first += stride)
      run_steps_at<T, Index, Lanes>(steps, block.count, first, kProgramThreads);
  } else {
    constexpr Index kLastLane = static_cast<Index>(kProgramThreads) * (Lanes - 1);
    for (Index base = static_cast<Index>(blockIdx.x) * kTile; base < n; base += stride) {
      if (base + thread + kLastLane < covered)  // all of the thread's lanes in every step
        run_steps_at<T, Index, Lanes, true>(steps, block.count, base + thread, kProgramThreads);
      else
        run_steps_at<T, Index, Lanes, false>(steps, block.count, base + thread, kProgramThreads);
    }
  }
}

template <int Capacity, class T, class Index, int Lanes>
void launch_kernel(cudaStream_t stream, const StepBlock<Capacity>& block, std::int64_t numel, std::int64_t covered) {
  constexpr std::int64_t kTile = std::int64_t{kProgramThreads} * Lanes;
  const auto blocks = static_cast<unsigned>(std::clamp<std::int64_t>((numel + kTile - 1) / kTile, 1, kMaxBlocks));
  program_kernel<Capacity, T, Index, Lanes><<<blocks, kProgramThreads, 0, stream>>>(block, static_cast<Index>(numel),
                                                                                  static_cast<Index>(covered));
}

template <int Capacity, class T>
void launch_typed(cudaStream_t stream, const StepBlock<Capacity>& block, const Piece& piece, bool narrow, bool one_lane) {
  if (!narrow) launch_kernel<Capacity, T, std::int64_t, 1>(stream, block, piece.numel, piece.covered);
  else if (one_lane) launch_kernel<Capacity, T, std::int32_t, 1>(stream, block, piece.numel, piece.covered);
  else launch_kernel<Capacity, T, std::int32_t, 4>(stream, block, piece.numel, piece.covered);
}

template <int Capacity>
cudaError_t launch_piece(cudaStream_t stream, const Piece& piece) {
  StepBlock<Capacity> block;  // trivially constructible: only the `count` steps used are written
  std::copy(piece.steps, piece.steps + piece.count, block.steps);
  block.count = piece.count;
  if (piece.numel == 0) return cudaSuccess;
  // 32-bit indices while i + stride cannot overflow them (below 2^30 elements, one pass of the grid).
  const bool narrow = piece.numel < (std::int64_t{1} << 30);
  const bool one_lane = program_lanes(piece.numel) == 1;
  switch (piece.dtype) {
    case DType::float32: launch_typed<Capacity, float>(stream, block, piece, narrow, one_lane); break;
    case DType::float64: launch_typed<Capacity, double>(stream, block, piece, narrow, one_lane); break;
    case DType::bfloat16: launch_typed<Capacity, bfloat16>(stream, block, piece, narrow, one_lane); break;
    case DType::float16: launch_typed<Capacity, float16>(stream, block, piece, narrow, one_lane); break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_program(cudaStream_t stream, const Program& program) {
  for (std::size_t first = 0; first < program.steps.size();) {
    const Piece piece = piece_at(program, first, kStepsPerLaunch);
    first += static_cast<std::size_t>(piece.count);
    const cudaError_t err = piece.count <= kShortLaunch ? launch_piece<kShortLaunch>(stream, piece)
                                                        : launch_piece<kStepsPerLaunch>(stream, piece);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace tapewise::detail

// cuda/backends/program_launch.cu — the CUDA runner of a tape program: one thread per element runs every
// step of a piece in order (interpreter.hpp: run_steps_at; program.hpp: piece_at); the steps travel in the kernel's
// parameters, so a launch needs no allocation, no copy and no synchronisation. A program of several
// pieces (more steps than one launch holds, or steps of both dtypes) runs as several launches, each
// the piece's compiled kernel where the backend compiles pieces and one is ready
// (backends/compiled_pieces.hpp), else the interpreter's.
#include <algorithm>
#include <cstdint>
#include <span>

#include <cuda_runtime.h>

#include "backends/program_launch.hpp"
#include "kernels/program_kernel.cuh"

namespace tapewise::detail {
inline namespace TW_MATH_NS {
namespace {

constexpr std::int64_t kMaxBlocks = std::int64_t{1} << 30;  // grid-stride beyond this
// Short pieces (a value read right after a few records) get a small parameter block.
constexpr int kShortLaunch = 16;

// The CUDA limit on kernel parameters (CUDA 12.1+, sm_70+): 32,764 bytes.
static_assert(sizeof(StepBlock<kStepsPerLaunch>) + 2 * sizeof(std::int64_t) <= 32764);  // block, n, covered
static_assert(sizeof(Step) % sizeof(std::uint64_t) == 0);

template <int Capacity, class T, class Index, int Lanes>
__global__ void __launch_bounds__(kProgramThreads)
    program_kernel(const __grid_constant__ StepBlock<Capacity> block, Index n, Index covered) {
  run_piece_kernel<Capacity, T, Index, Lanes, true, InterpretedSteps>(block, n, covered);
}

// Blocks of a piece's launch, interpreted or compiled: one tile of kProgramThreads * lanes elements
// each, grid-stride past kMaxBlocks.
unsigned program_blocks(std::int64_t numel, int lanes) {
  const std::int64_t tile = std::int64_t{kProgramThreads} * lanes;
  return static_cast<unsigned>(std::clamp<std::int64_t>((numel + tile - 1) / tile, 1, kMaxBlocks));
}

template <int Capacity, class T, class Index, int Lanes>
void launch_kernel(cudaStream_t stream, const StepBlock<Capacity>& block, std::int64_t numel, std::int64_t covered) {
  program_kernel<Capacity, T, Index, Lanes><<<program_blocks(numel, Lanes), kProgramThreads, 0, stream>>>(
      block, static_cast<Index>(numel), static_cast<Index>(covered));
}

template <int Capacity, class T>
void launch_typed(cudaStream_t stream, const StepBlock<Capacity>& block, const Piece& piece, bool narrow, bool one_lane) {
  if (!narrow) launch_kernel<Capacity, T, std::int64_t, 1>(stream, block, piece.numel, piece.covered);
  else if (one_lane) launch_kernel<Capacity, T, std::int32_t, 1>(stream, block, piece.numel, piece.covered);
  else launch_kernel<Capacity, T, std::int32_t, 4>(stream, block, piece.numel, piece.covered);
}

// The piece as a compiled kernel (compiled_pieces.hpp), where it has one: true when launched (or the
// launch failed: `err`), false when the interpreter is to run it.
template <int Capacity>
bool launch_compiled(cudaStream_t stream, StepBlock<Capacity>& block, const Piece& piece,
                     const CompiledPieceTarget& target, cudaError_t& err) {
  const int lanes = program_lanes(piece.numel);
  int n = static_cast<int>(piece.numel), covered = static_cast<int>(piece.covered);  // unused past 2^30 (piece_even)
  void* args[] = {&block, &n, &covered};
  const PieceLaunch launch{piece.dtype, lanes, Capacity, target.steps_in_shared, piece_prefetches(lanes, piece.numel)};
  return launch_compiled_piece(std::span<const Step>(piece.steps, static_cast<std::size_t>(piece.count)), piece.numel,
                               piece.covered, launch, target, program_blocks(piece.numel, lanes), args, stream, err);
}

template <int Capacity>
cudaError_t launch_piece(cudaStream_t stream, const Piece& piece, const CompiledPieceTarget* compiled) {
  StepBlock<Capacity> block;  // trivially constructible: only the `count` steps used are written
  std::copy(piece.steps, piece.steps + piece.count, block.steps);
  block.count = piece.count;
  if (piece.numel == 0) return cudaSuccess;
  if (cudaError_t err = cudaSuccess; compiled && launch_compiled(stream, block, piece, *compiled, err)) return err;
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

cudaError_t launch_program(cudaStream_t stream, const Program& program, const CompiledPieceTarget* compiled) {
  for (std::size_t first = 0; first < program.steps.size();) {
    const Piece piece = piece_at(program, first, kStepsPerLaunch);
    first += static_cast<std::size_t>(piece.count);
    const cudaError_t err = piece.count <= kShortLaunch ? launch_piece<kShortLaunch>(stream, piece, compiled)
                                                        : launch_piece<kStepsPerLaunch>(stream, piece, compiled);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // inline namespace TW_MATH_NS
}  // namespace tapewise::detail

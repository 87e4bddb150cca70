// cuda/backends/compiled_pieces.hpp — tape programs' pieces compiled at run time. A long piece that
// repeats a block of steps (a chain's forwards, its backward) is written out as CUDA source with each
// step's code and sources as constants (kernels/piece_source.hpp), compiled once by NVRTC from the
// kernels' own headers under nvcc's floating-point flags, and cached for the process by its source.
// A piece runs in the interpreter while it compiles (in the background: no call waits for NVRTC), and
// for good where it is irregular or NVRTC is absent or fails: same steps, same functors, same bits.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <tapewise/core.hpp>

#include "kernels/piece_source.hpp"

namespace tapewise::detail {

// NVRTC's CUBIN of `source` (which includes kRtcHeaders by name) for `arch` ("sm_90"); an error says
// why not: NVRTC not found (it is loaded at run time: TAPEWISE_NVRTC, else libnvrtc.so.13 / .12 /
// libnvrtc.so), or its compile log. Needs no GPU.
[[nodiscard]] Result<std::vector<char>> compile_piece_source(const std::string& source, const std::string& arch);

// What the process's compiled pieces have done, for tests and benchmarks: distinct pieces compiled or
// refused, and launches by how they ran.
struct CompiledPieceStats {
  std::int64_t compiled = 0;   // distinct pieces compiled and loaded
  std::int64_t failed = 0;     // distinct pieces NVRTC or the loader refused (the interpreter runs them)
  std::int64_t launches = 0;   // launches of compiled pieces
  std::int64_t interpreted_short = 0;      // launches left to the interpreter: below kMinCompiledSteps,
  std::int64_t interpreted_uneven = 0;     // steps of different lengths (or past 32-bit indices),
  std::int64_t interpreted_compiling = 0;  // the piece still compiling,
  std::int64_t interpreted_irregular = 0;  // too few repeats (kMaxWrittenSteps),
  std::int64_t interpreted_failed = 0;     // the piece did not compile or load
  double compile_ms = 0;       // total time in NVRTC and the loader
  double launch_host_us = 0;   // host time in launch_compiled_piece for the compiled launches (lookup and launch)
  double driver_launch_us = 0; // of which in the launch call itself
  std::string last_error;      // the latest refusal, "" when none
};
CompiledPieceStats compiled_piece_stats();

// Whether and how a backend compiles pieces: TAPEWISE_COMPILED_PIECES ("1"/"on", the default, or
// "0"/"off": every piece interpreted) and TAPEWISE_PIECE_STEPS
// ("parameter", the default, or "shared": where a compiled piece's kernel reads its steps). Any other
// value is an error naming it.
struct PieceCompilation {
  bool enabled = true;
  bool steps_in_shared = false;
};
[[nodiscard]] Result<PieceCompilation> piece_compilation_from_environment();

// What a backend compiles pieces for: its device's architecture ("sm_90") and PieceCompilation.
struct CompiledPieceTarget {
  std::string arch;
  bool steps_in_shared = false;
  bool exact_math = false;  // the pieces' source defines TAPEWISE_MATH_EXACT (kernels/math_mode.hpp)
};

// Launches a piece (its steps, numel and covered, piece_at) compiled, `blocks` blocks of
// kProgramThreads on `stream` with `args` (the StepBlock, n and covered, as the interpreter's kernel
// takes them): true when launched (err: the launch's error), false where the interpreter is to run it:
// piece_source gives no source, the piece is compiling (the first sight of it queues it for a worker
// thread, which runs NVRTC only; the first launch after it loads the CUBIN), or it did not compile or load (compiled_piece_stats().last_error says why). Thread-safe.
bool launch_compiled_piece(std::span<const Step> steps, std::int64_t numel, std::int64_t covered,
                           const PieceLaunch& launch, const CompiledPieceTarget& target, unsigned blocks, void** args,
                           cudaStream_t stream, cudaError_t& err);

// Why NVRTC cannot be used, "" when it can: loads it (once for the process) and compiles nothing.
std::string nvrtc_unavailable_reason();

// Queues `source` for the worker thread under a cache entry of its own, as the first sight of a piece
// queues its source, and returns at once (wait_for_compiled_pieces waits for it). For the tests of the
// worker's life, such as a process that exits while it compiles. Needs no GPU.
void compile_in_background(const std::string& source, const std::string& arch);

// Blocks until every piece queued has compiled (or failed): for benchmarks and tests that measure or
// check the compiled kernels rather than the interpreter running meanwhile.
void wait_for_compiled_pieces();

}  // namespace tapewise::detail

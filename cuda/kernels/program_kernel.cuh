// cuda/kernels/program_kernel.cuh — the CUDA kernel of a tape program's piece, around either way of
// running its steps at a thread's elements: the interpreter (InterpretedSteps: run_steps_at, every
// step dispatched on its code at run time), or a compiled piece (piece_source.hpp writes the steps'
// codes and sources out as constants, compiled by NVRTC at run time: compiled_pieces.cpp). Both run
// each step through StepPipeline::advance and run_code (interpreter.hpp), so a compiled piece does
// what the interpreter does, step for step, with its dispatch decided at compile time.
#pragma once

#include "interpreter.hpp"

namespace tapewise::detail {

inline namespace TW_MATH_NS {  // the math mode's own symbols (scalar_math.cuh)

// A Steps class runs a piece's steps at one thread's elements (run<T, Index, Lanes, EveryStepRuns>).
// kOneLaneEveryStepRuns: whether every step covers every element below the launch's n, so that a
// thread of one lane needs no check per step (a compiled piece's steps all have one length).
struct InterpretedSteps {
  static constexpr bool kOneLaneEveryStepRuns = false;
  template <class T, class Index, int Lanes, bool EveryStepRuns>
  static __device__ __forceinline__ void run(const Step* steps, int count, Index first, Index stride) {
    run_steps_at<T, Index, Lanes, EveryStepRuns>(steps, count, first, stride);
  }
};

// What a compiled piece's code calls for step `step` of dispatch number Code, sources Sources and
// slot writes Writes, with AheadSources the sources of the step whose memory operands load while it
// runs, `ahead` (the pipeline's Ahead steps after it): the interpreter's loop body for it.
template <int Code, unsigned Sources, unsigned Writes, unsigned AheadSources, class Pipeline>
__device__ __forceinline__ void step(Pipeline& pipeline, const Step& step, const Step& ahead) {
  pipeline.advance(step, Sources, load_plan<typename Pipeline::IndexType>(ahead, AheadSources), true, RunCode<Code, Writes>{});
}
// One of the piece's last Ahead steps: no step that far after it to load for.
template <int Code, unsigned Sources, unsigned Writes, class Pipeline>
__device__ __forceinline__ void tail_step(Pipeline& pipeline, const Step& step) {
  pipeline.advance(step, Sources, LoadPlan<typename Pipeline::IndexType>{}, false, RunCode<Code, Writes>{});
}

// A block covers tiles of kProgramThreads * Lanes elements; thread t takes t, t + kProgramThreads, ...
// of each. StepsInShared: the block first copies the steps from the parameter to shared memory, where
// the interpreter reads each step's fields (the design measured on the H200,
// evidence/performance/history/2026-12-01_chain_interpreter.md); else they are read from the parameter.
template <int Capacity, class T, class Index, int Lanes, bool StepsInShared, class Steps>
__device__ __forceinline__ void run_piece_kernel(const StepBlock<Capacity>& block, Index n, Index covered) {
  const Step* steps = block.steps;
  if constexpr (StepsInShared) {
    __shared__ Step shared_steps[Capacity];
    const auto* from = reinterpret_cast<const std::uint64_t*>(block.steps);
    auto* to = reinterpret_cast<std::uint64_t*>(shared_steps);
    const int words = block.count * static_cast<int>(sizeof(Step) / sizeof(std::uint64_t));
    for (int w = threadIdx.x; w < words; w += blockDim.x) to[w] = from[w];
    __syncthreads();
    steps = shared_steps;
  }
  constexpr Index kTile = static_cast<Index>(kProgramThreads) * Lanes;
  const Index stride = static_cast<Index>(gridDim.x) * kTile;
  const Index thread = static_cast<Index>(threadIdx.x);
  // Either loop covers the same elements; each is the faster for its lane count on the H200 (one
  // lane, bounded by the thread's element: 0.648 against 0.678 us/node at 2^12; four, bounded by the
  // tile: 8.66 against 9.45 at 2^20).
  if constexpr (Lanes == 1) {
    for (Index first = static_cast<Index>(blockIdx.x) * kTile + thread; first < n; first += stride)
      Steps::template run<T, Index, Lanes, Steps::kOneLaneEveryStepRuns>(steps, block.count, first, kProgramThreads);
  } else {
    constexpr Index kLastLane = static_cast<Index>(kProgramThreads) * (Lanes - 1);
    for (Index base = static_cast<Index>(blockIdx.x) * kTile; base < n; base += stride) {
      if (base + thread + kLastLane < covered)  // all of the thread's lanes in every step
        Steps::template run<T, Index, Lanes, true>(steps, block.count, base + thread, kProgramThreads);
      else
        Steps::template run<T, Index, Lanes, false>(steps, block.count, base + thread, kProgramThreads);
    }
  }
}

}  // inline namespace TW_MATH_NS

}  // namespace tapewise::detail

// cuda/kernels/piece_source.hpp — a piece of a tape program (program.hpp) written as CUDA source for
// runtime compilation (compiled_pieces.cpp): its steps cut into runs of a repeated block of steps,
// each step named by the two things the interpreter dispatches on at run time, its code and its
// sources, now constants of the generated code. The kernel is program_kernel.cuh's, which runs every
// step through the interpreter's own StepPipeline::advance and run_code. Host only: plain strings.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "program.hpp"

namespace tapewise::detail {

// What a compiled piece fixes of a step: everything else (addresses, scalars, numel) it reads from the
// step at run time, as the interpreter does.
struct StepKey {
  std::uint8_t code;
  std::uint16_t sources;
  std::uint8_t writes;  // writes_of
  friend bool operator==(const StepKey&, const StepKey&) = default;
};
inline StepKey key_of(const Step& step) { return {step.code, step.sources, writes_of(step)}; }

// Steps [first, first + length * repeats): one block of `length` steps, `repeats` times over.
struct PieceRun {
  int first;
  int length;
  int repeats;
};

// The longest block a run repeats, and the most steps a compiled piece's code may write out: each
// run writes its block once as a loop, then the repeats whose steps would reach ahead past the run
// (written_steps), and a piece above this falls back to the interpreter. Compile time grows with the
// code (the chain benchmark's 17 pieces on the H100's host: 10.3 s of NVRTC loading one step ahead, 14.5 s
// loading three ahead and prefetching).
inline constexpr int kMaxBlockLength = 16;
inline constexpr int kMaxWrittenSteps = 64;
// Shorter pieces stay with the interpreter: a compilation (0.4-1.3 s on the H200's host) pays only
// where a piece runs many steps, the tape programs of long chains and deep graphs.
inline constexpr int kMinCompiledSteps = 32;

// The piece's steps as runs, greedily from the front: at each step, the block length (at most
// kMaxBlockLength) whose repeats cover the most steps, the shorter on a tie; a step that starts no
// repeat is a run of its own. Step 0 is always a run of its own (it loads every operand from
// memory). The runs cover the steps in order, each exactly once.
inline std::vector<PieceRun> compress_piece(std::span<const Step> steps) {
  const int count = static_cast<int>(steps.size());
  std::vector<StepKey> keys;
  keys.reserve(steps.size());
  for (const Step& s : steps) keys.push_back(key_of(s));
  std::vector<PieceRun> runs;
  if (count > 0) runs.push_back({0, 1, 1});
  for (int at = 1; at < count;) {
    PieceRun best{at, 1, 1};
    for (int length = 1; length <= kMaxBlockLength && at + 2 * length <= count; ++length) {
      int repeats = 1;
      while (at + (repeats + 1) * length <= count) {
        bool same = true;
        for (int j = 0; j < length && same; ++j) same = keys[at + repeats * length + j] == keys[at + j];
        if (!same) break;
        ++repeats;
      }
      if (repeats > 1 && length * repeats > best.length * best.repeats) best = {at, length, repeats};
    }
    runs.push_back(best);
    at += best.length * best.repeats;
  }
  return runs;
}

// How far ahead a compiled piece reaches for memory operands: it loads them `load` steps ahead
// (StepPipeline's Ahead) and, where `prefetch` is not 0, brings them into L1 that many steps ahead
// (StepPipeline::prefetch).
struct Lookahead {
  int load;
  int prefetch;
  int reach() const { return std::max(load, prefetch); }
};
inline constexpr int kOneLanePrefetchAhead = 8;

// The repeats of a run its code loops over: those whose steps reach ahead (`reach`, Lookahead) inside
// the run, so that each step of the loop's block loads for the same step of the block every time. The
// rest are written out.
inline int looped_repeats(const PieceRun& run, int reach) {
  if (run.repeats < 2) return 0;
  return std::max(0, run.repeats - (reach + run.length - 1) / run.length);
}

// The steps a piece's code writes out: a run's looped block once, and each step after its loop.
inline int written_steps(std::span<const PieceRun> runs, int reach) {
  int total = 0;
  for (const PieceRun& run : runs) {
    const int looped = looped_repeats(run, reach);
    total += (looped > 0 ? run.length : 0) + run.length * (run.repeats - looped);
  }
  return total;
}

// How a compiled piece is launched: the element type and index, the lanes per thread, the kernel
// parameter's step capacity (backends/program_launch.cu), and where the steps are read from.
struct PieceLaunch {
  DType dtype;
  int lanes;          // 1 or 4 (program_lanes)
  int capacity;       // kShortLaunch or kStepsPerLaunch
  bool steps_in_shared;  // copied to shared memory first, as the interpreter does; else read from the parameter
  bool prefetch = false;  // with one lane: L1 prefetches kOneLanePrefetchAhead steps ahead (piece_prefetches)
};

// With one lane a small tensor gives each scheduler one warp, and a step's math is short beside a
// load's latency: a piece loads kHistory steps ahead, the most a value's last write allows
// (StepPipeline). From kPrefetchFrom elements it also prefetches into L1, further ahead: on the H100
// (2026-12-06) the 1,000-node chains at 2^16, whose values come from DRAM, ran up to 27% faster for it,
// while at 2^12, whose values stay in L2, the prefetches' instructions cost more than they saved in
// three of six rows (unary float32: 0.159 against 0.176 us/node). With four lanes other warps cover
// the latency, and a lane past a step's numel must not be prefetched for: one step ahead.
inline constexpr std::int64_t kPrefetchFrom = std::int64_t{1} << 13;
inline bool piece_prefetches(int lanes, std::int64_t numel) { return lanes == 1 && numel >= kPrefetchFrom; }
inline Lookahead lookahead(const PieceLaunch& launch) {
  if (launch.lanes != 1) return {1, 0};
  return {kHistory, launch.prefetch ? kOneLanePrefetchAhead : 0};
}

// The name of the kernel a piece's source defines.
inline constexpr const char* kPieceKernelName = "tapewise_compiled_piece";

// The CUDA source of `piece` (its runs, compress_piece), or nullopt where the interpreter runs it:
// too short (kMinCompiledSteps), too irregular (kMaxWrittenSteps), too large for 32-bit indices, or
// with steps of different lengths (a compiled piece runs every step at every element it covers).
// The quick part of that test, before anything is built: long enough, and every step of one length
// below 2^30 elements (32-bit indices).
inline bool piece_long_enough(std::size_t count) { return count >= static_cast<std::size_t>(kMinCompiledSteps); }
inline bool piece_even(std::int64_t numel, std::int64_t covered) { return covered == numel && numel < (std::int64_t{1} << 30); }

inline std::optional<std::string> piece_source(std::span<const Step> steps, std::int64_t numel, std::int64_t covered,
                                               const PieceLaunch& launch) {
  const int count = static_cast<int>(steps.size());
  if (!piece_long_enough(steps.size()) || !piece_even(numel, covered)) return std::nullopt;
  const std::vector<PieceRun> runs = compress_piece(steps);
  const Lookahead ahead = lookahead(launch);
  if (written_steps(runs, ahead.reach()) > kMaxWrittenSteps) return std::nullopt;

  auto sources = [&](int k) { return std::to_string(steps[static_cast<std::size_t>(k)].sources) + "u"; };
  // Step k, reached as base[j]: its prefetch for the step ahead.prefetch after it (none past the
  // piece's end), then the step, loading for the step ahead.load after it (none: one of the last).
  auto step_lines = [&](int k, const char* base, int j, const std::string& indent) {
    const Step& s = steps[static_cast<std::size_t>(k)];
    auto at = [&](int d) { return std::string(base) + "[" + std::to_string(j + d) + "]"; };
    std::string lines;
    if (ahead.prefetch > 0 && k + ahead.prefetch < count)
      lines += indent + "p.prefetch(load_plan<Index>(" + at(ahead.prefetch) + ", " + sources(k + ahead.prefetch) + "));\n";
    const std::string fixed = std::to_string(s.code) + ", " + sources(k) + ", " + std::to_string(writes_of(s)) + "u";
    if (k + ahead.load >= count) return lines + indent + "tail_step<" + fixed + ">(p, " + at(0) + ");\n";
    return lines + indent + "step<" + fixed + ", " + sources(k + ahead.load) + ">(p, " + at(0) + ", " + at(ahead.load) + ");\n";
  };
  std::string body;
  for (const PieceRun& run : runs) {
    // A looped step reaches ahead within its run, whose keys are the same every time round.
    const int looped = looped_repeats(run, ahead.reach());
    if (looped > 0) {
      body += "    for (int r = 0; r < " + std::to_string(looped) + "; ++r) {\n";
      body += "      const Step* b = s + " + std::to_string(run.first) + " + " + std::to_string(run.length) + " * r;\n";
      for (int j = 0; j < run.length; ++j) body += step_lines(run.first + j, "b", j, "      ");
      body += "    }\n";
    }
    for (int k = run.first + run.length * looped; k < run.first + run.length * run.repeats; ++k)
      body += step_lines(k, "s", k, "    ");
  }

  const char* type = launch.dtype == DType::float32    ? "float"
                     : launch.dtype == DType::float64  ? "double"
                     : launch.dtype == DType::bfloat16 ? "tapewise::bfloat16"
                                                       : "tapewise::float16";
  std::string src;
  src += "// A tape program's piece of " + std::to_string(count) + " steps, generated by tapewise (piece_source.hpp).\n";
  src += "#include \"program_kernel.cuh\"\n";
  src += "namespace tapewise::detail {\n";
  src += "struct GeneratedSteps {\n";
  src += "  static constexpr bool kOneLaneEveryStepRuns = true;  // every step covers all n elements\n";
  src += "  template <class T, class Index, int Lanes, bool EveryStepRuns>\n";
  src += "  static __device__ __forceinline__ void run(const Step* s, int, Index first, Index stride) {\n";
  src += "    StepPipeline<T, Index, Lanes, EveryStepRuns, " + std::to_string(ahead.load) + "> p(first, stride);\n";
  src += "    p.load_first(load_plan<Index>(s[0], " + sources(0) + "));\n";
  for (int d = 1; d < ahead.load && d < count; ++d)
    src += "    p.load_ahead(" + std::to_string(d) + ", load_plan<Index>(s[" + std::to_string(d) + "], " + sources(d) + "));\n";
  src += body;
  src += "  }\n};\n}  // namespace tapewise::detail\n";
  src += "extern \"C\" __global__ void __launch_bounds__(tapewise::detail::kProgramThreads)\n";
  src += std::string(kPieceKernelName) + "(const __grid_constant__ tapewise::detail::StepBlock<" +
         std::to_string(launch.capacity) + "> block, int n, int covered) {\n";
  src += "  tapewise::detail::run_piece_kernel<" + std::to_string(launch.capacity) + ", " + std::string(type) + ", int" + ", " + std::to_string(launch.lanes) + ", " +
         (launch.steps_in_shared ? "true" : "false") + ", tapewise::detail::GeneratedSteps>(block, n, covered);\n";
  src += "}\n";
  return src;
}

}  // namespace tapewise::detail

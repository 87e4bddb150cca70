// cuda/kernels/program.hpp — the format of a tape program: a flat list of steps (the deferred forwards
// of small nodes, or a whole backward pass) that the tape builds and a runner executes (interpreter.hpp:
// a host loop on the CPU backend, one kernel per piece on CUDA). Plain data and the host-side work of
// building it; no node's math, so the tape compiles none. Also the one meaning of a slot write, which
// both executors of a backward (the per-node path and the interpreter) land contributions through.
#pragma once

#include <cstdint>
// Kernels compiled at run time (NVRTC, which has no C++ standard library) see the step format, not
// the host-side building.
#if !defined(__CUDACC_RTC__)
#include <algorithm>
#include <span>
#include <vector>
#endif

#include <tapewise/core.hpp>
#include <tapewise/op.hpp>

namespace tapewise::detail {

enum class StepKind : std::uint8_t {
  forward,  // out[0] = op(in[0], in[1])
  vjp,      // contributions of op at (in[0], in[1]) with upstream g, written to out[0], out[1]
  pass,     // in[0] as is, written to out[0] (the seed copy; max(a, a) / min(a, a) passing g on)
  zero,     // out[0] = +0 (dense backward's slots that receive nothing)
};

// How a contribution reaches a gradient slot: when each applies (backward_plan.hpp decides which);
// land_contribution says what each does.
enum class SlotWrite : std::uint8_t {
  none,         // the parent does not require grad
  store,        // the slot's first contribution, sparse backward
  store_dense,  // the slot's first contribution, dense backward
  accumulate,   // the slot's later contributions
};

// What a slot write means, written once for both executors: the sum that lands contribution c in its
// parent's slot. `sums` holds c and the slot and does the arithmetic: the dtype's + at one element in
// the interpreter (interpreter.hpp: ElementSums), the backend's prims on whole buffers in the tape's
// per-node path (tape.cpp: BufferSums). Selects rather than branches: at one element the sums are
// cheap, and a branch costs a warp that runs alone on its scheduler more than they do.
template <class Sums>
constexpr auto land_contribution(SlotWrite how, Sums& sums) {
  return how == SlotWrite::accumulate    ? sums.onto_existing()  // existing + c, existing on the left
         : how == SlotWrite::store_dense ? sums.plus_zero()      // c + (+0), as prim add_scalar(c, 0)
         : how == SlotWrite::store       ? sums.as_is()          // c, bit-exact
                                         : sums.dropped();       // nowhere
}

// One step at one element. Plain data (a kernel parameter on CUDA): 72 bytes. The builder (tape.cpp)
// sets the fields up to `op`; Program::add derives `code` and `sources` from them.
struct Step {
  const void* in[2];  // forward, vjp: the node's input values (a, b); pass: in[0], the source
  const void* g;      // vjp: the node's gradient slot
  void* out[2];       // forward: out[0], the node's value; vjp: the slots of parents a, b; pass, zero: out[0]
  double s0, s1;      // the node's scalars as given; rounded to the dtype as params_of does
  std::int64_t numel;  // the step applies to elements [0, numel)
  StepKind kind;
  DType dtype;
  SlotWrite write[2];  // vjp: for out[0], out[1]; pass: for out[0]
  Op op : 8;           // a byte: the step stays 72 bytes
  std::uint8_t code;      // kind and op as one dense number: the interpreter's one dispatch
  std::uint16_t sources;  // where each Operand comes from: the bits of sources_of
};
static_assert(sizeof(Step) == 72, "kStepsPerLaunch below is computed from this size");

// The values a step reads at one element, by position, and the pointer each is read from.
enum Operand : int { kIn0, kIn1, kGrad, kSlot0, kSlot1, kOperandCount };
#if !defined(__CUDACC_RTC__)
inline const void* operand_address(const Step& step, int operand) {
  switch (operand) {
    case kIn0: return step.in[0];
    case kIn1: return step.in[1];
    case kGrad: return step.g;
    case kSlot0: return step.out[0];
    default: return step.out[1];
  }
}
#endif  // !defined(__CUDACC_RTC__)

// Where a step takes each operand from at an element, a bit per Operand k in Step::sources: bit k,
// memory; bit kFromWritten0 + k or kFromWritten1 + k, the register holding what the step before
// wrote (Written::value[0] or [1]) when that step ran at the element, else memory.
inline constexpr int kFromWritten0 = kOperandCount, kFromWritten1 = 2 * kOperandCount;
inline constexpr unsigned kOperandBits = (1u << kOperandCount) - 1;

// The dense dispatch number: forwards 0..kOpCount-1, VJPs kOpCount..2 kOpCount-1, then pass, zero.
// kCodeUnsealed marks a step Program::append made and seal_last has not yet given its code: an engine
// refuses a program holding one (Engine::run_program), rather than run it as code 0, add's forward.
inline constexpr int kCodePass = 2 * kOpCount, kCodeZero = 2 * kOpCount + 1;
inline constexpr std::uint8_t kCodeUnsealed = 0xFF;
static_assert(kCodeZero < kCodeUnsealed, "the dispatch numbers fit below the unsealed mark");
#if !defined(__CUDACC_RTC__)
inline std::uint8_t code_of(StepKind kind, Op op) {
  switch (kind) {
    case StepKind::forward: return static_cast<std::uint8_t>(static_cast<int>(op));
    case StepKind::vjp: return static_cast<std::uint8_t>(kOpCount + static_cast<int>(op));
    case StepKind::pass: return kCodePass;
    case StepKind::zero: break;
  }
  return kCodeZero;
}

// The buffers `step` writes at an element it runs at, in Written's order (a slot written `none` is not).
struct Overwritten {
  const void* at[2] = {nullptr, nullptr};
};
inline Overwritten overwritten_by(const Step& step) {
  Overwritten o;
  switch (step.kind) {
    case StepKind::forward:
    case StepKind::zero: o.at[0] = step.out[0]; break;
    case StepKind::pass:
      if (step.write[0] != SlotWrite::none) o.at[0] = step.out[0];
      break;
    case StepKind::vjp:
      for (int k = 0; k < (step.in[1] ? 2 : 1); ++k)
        if (step.write[k] != SlotWrite::none) o.at[k] = step.out[k];
      break;
  }
  return o;
}

// Whether `step` reads `operand`: forward, vjp: the inputs (in[1] for two); vjp: g; pass: in[0];
// a slot it accumulates into. Slot 1 of a VJP whose inputs are one node (out[1] == out[0])
// accumulates onto what slot 0 has just received, which the interpreter has in hand: it is not read.
inline bool reads(const Step& step, int operand) {
  const bool vjp = step.kind == StepKind::vjp, pass = step.kind == StepKind::pass;
  switch (operand) {
    case kIn0: return step.kind != StepKind::zero;
    case kIn1: return (vjp || step.kind == StepKind::forward) && step.in[1];
    case kGrad: return vjp;
    case kSlot0: return (vjp || pass) && step.write[0] == SlotWrite::accumulate;
    default:
      return vjp && step.write[1] == SlotWrite::accumulate &&
             !(step.out[1] == step.out[0] && step.write[0] != SlotWrite::none);
  }
}

// `step`'s sources, given the step before it in the program (null for the first). An operand the
// previous step writes comes from that step's register, never from memory: a chain of nodes passes
// its values in registers, and no load reads memory before its first write (compute-sanitizer's
// initcheck holds the program to that). Of two writes to one buffer the later (slot 1) counts.
inline std::uint16_t sources_of(const Step& step, const Step* previous) {
  const Overwritten written = previous ? overwritten_by(*previous) : Overwritten{};
  unsigned sources = 0;
  for (int operand = 0; operand < kOperandCount; ++operand) {
    if (!reads(step, operand)) continue;
    const void* p = operand_address(step, operand);
    int bit = operand;  // memory
    if (written.at[1] && p == written.at[1])
      bit += kFromWritten1;
    else if (written.at[0] && p == written.at[0])
      bit += kFromWritten0;
    sources |= 1u << bit;
  }
  return static_cast<std::uint16_t>(sources);
}

struct Program {
  std::vector<Step> steps;

  void add(Step step) {
    steps.push_back(step);
    seal_last();
  }
  // A new last step, zeroed but marked unsealed, for the builder to fill where it lies and then
  // seal_last(): the tape builds a
  // step per node this way, since a step filled field by field on the stack and then copied stalls on
  // the copy's wide loads of the narrow stores (a fifth of a backward's host time before).
  Step& append() {
    Step& step = steps.emplace_back();
    step.code = kCodeUnsealed;
    return step;
  }
  // Derives the last step's code and sources from its fields (and the step before it).
  void seal_last() {
    Step& step = steps.back();
    step.code = code_of(step.kind, step.op);
    step.sources = sources_of(step, steps.size() > 1 ? &steps[steps.size() - 2] : nullptr);
  }
};
// The index of the program's first step that was appended and never sealed, or -1 when every step is.
inline std::int64_t first_unsealed_step(const Program& program) {
  for (std::size_t j = 0; j < program.steps.size(); ++j)
    if (program.steps[j].code == kCodeUnsealed) return static_cast<std::int64_t>(j);
  return -1;
}
#endif  // !defined(__CUDACC_RTC__)

// Steps per CUDA launch: the steps travel as one __grid_constant__ kernel parameter, and CUDA 12.1+
// allows 32,764 bytes of parameters (448 steps x 72 bytes, the count, and the piece's two element
// counts: 32,280). Longer programs run as several launches in order, which keeps each element's order
// of steps.
inline constexpr int kStepsPerLaunch = 448;

// A launch's steps, one kernel parameter (__grid_constant__): the interpreter's kernel
// (backends/program_launch.cu) and a compiled piece's (program_kernel.cuh, piece_source.hpp) take the same.
template <int Capacity>
struct StepBlock {
  Step steps[Capacity];
  int count;
};
// Threads per block of either kernel. One thread does all of a piece's steps for its elements,
// latency-bound rather than memory-bound: small blocks spread a small tensor over more SMs.
inline constexpr int kProgramThreads = 128;

#if !defined(__CUDACC_RTC__)
// A program runs as pieces, one after another over all elements (which keeps every element's order
// of steps): runs of steps of one dtype T, each through run_steps_at<T>, at most max_steps long (one
// CUDA launch). A piece's first step loads all its operands from memory.
struct Piece {
  const Step* steps;
  int count;
  DType dtype;
  std::int64_t numel;    // the elements it covers: its largest step's
  std::int64_t covered;  // the elements every step of it covers: its smallest step's
};
// The piece starting at step `first` (< program.steps.size()).
inline Piece piece_at(const Program& program, std::size_t first, int max_steps) {
  const std::size_t total = program.steps.size();
  Piece piece{program.steps.data() + first, 0, program.steps[first].dtype, 0, program.steps[first].numel};
  while (first + piece.count < total && piece.count < max_steps && piece.steps[piece.count].dtype == piece.dtype) {
    piece.numel = std::max(piece.numel, piece.steps[piece.count].numel);
    piece.covered = std::min(piece.covered, piece.steps[piece.count].numel);
    ++piece.count;
  }
  return piece;
}

#endif  // !defined(__CUDACC_RTC__)

}  // namespace tapewise::detail


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

// Where a step takes each operand from at an element: a field of kSourceBits per Operand k in
// Step::sources (source_code): kNotRead; kFromMemory; or register_source(d, w), the register holding
// what the step d back in the same piece wrote (Written::value[w]; d <= kHistory). A register source
// one step back holds when that step ran at the element, else memory does (it stored the value); one
// further back is only given where that step has the reader's numel, so it ran wherever the reader runs.
inline constexpr int kHistory = 3;
inline constexpr int kSourceBits = 3;
inline constexpr unsigned kSourceMask = (1u << kSourceBits) - 1;
inline constexpr unsigned kNotRead = 0, kFromMemory = 1;
constexpr unsigned register_source(int back, int which) { return 2u + 2u * static_cast<unsigned>(back - 1) + static_cast<unsigned>(which); }
constexpr unsigned source_code(unsigned sources, int operand) { return (sources >> (kSourceBits * operand)) & kSourceMask; }
// The field of `operand` holding `code`, for or-ing into a Step::sources.
constexpr unsigned source_field(int operand, unsigned code) { return code << (kSourceBits * operand); }
static_assert(register_source(kHistory, 1) <= kSourceMask && kSourceBits * kOperandCount <= 16, "sources fit Step::sources");
// `sources` where the step before did not run at the element: what it would have handed over in a
// register (codes 01x), memory (001) holds. Six operations rather than a loop over the fields.
constexpr unsigned without_previous_step(unsigned sources) {
  constexpr unsigned kBit0 = 0x1249, kBit1 = kBit0 << 1, kBit2 = kBit0 << 2;  // bit 0, 1, 2 of every field
  const unsigned previous = sources & kBit1 & ~((sources & kBit2) >> 1);      // bit 1 of the 01x fields
  return (sources & ~(previous | (previous >> 1))) | (previous >> 1);
}
static_assert(without_previous_step(register_source(1, 0) | register_source(1, 1) << 3 | register_source(2, 0) << 6 |
                                    kFromMemory << 9 | register_source(3, 1) << 12) ==
              (kFromMemory | kFromMemory << 3 | register_source(2, 0) << 6 | kFromMemory << 9 | register_source(3, 1) << 12));

// A step's slot writes as one number: Step::write[k] in bits 2k..2k+1, and bit 4 + k where out[k]
// has a buffer. A compiled piece passes it as a constant (writes_of, below), so that landing
// and storing a contribution takes no decision at run time; the interpreter reads the step
// (kWritesAtRunTime).
inline constexpr unsigned kWritesAtRunTime = 0xFFu;
constexpr SlotWrite slot_write(unsigned writes, int k) { return static_cast<SlotWrite>((writes >> (2 * k)) & 3u); }
constexpr bool slot_has_buffer(unsigned writes, int k) { return (writes >> (4 + k)) & 1u; }

// The dense dispatch number: forwards 0..kOpCount-1, VJPs kOpCount..2 kOpCount-1, then pass, zero.
// kCodeUnsealed marks a step Program::append made and seal_last has not yet given its code: an engine
// refuses a program holding one (Engine::run_program), rather than run it as code 0, add's forward.
inline constexpr int kCodePass = 2 * kOpCount, kCodeZero = 2 * kOpCount + 1;
inline constexpr std::uint8_t kCodeUnsealed = 0xFF;
static_assert(kCodeZero < kCodeUnsealed, "the dispatch numbers fit below the unsealed mark");

// Steps per CUDA launch: the steps travel as one __grid_constant__ kernel parameter, and CUDA 12.1+
// allows 32,764 bytes of parameters (448 steps x 72 bytes, the count, and the piece's two element
// counts: 32,280). Longer programs run as several launches in order, which keeps each element's order
// of steps.
inline constexpr int kStepsPerLaunch = 448;

#if !defined(__CUDACC_RTC__)
// A step's slot writes as that one number (slot_write, slot_has_buffer read it back).
inline std::uint8_t writes_of(const Step& step) {
  const unsigned how = static_cast<unsigned>(step.write[0]) | static_cast<unsigned>(step.write[1]) << 2;
  const unsigned buffers = (step.out[0] ? 1u : 0u) | (step.out[1] ? 2u : 0u);
  return static_cast<std::uint8_t>(how | buffers << 4);
}

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

// Whether `step` reads `operand`: forward: the inputs (in[1] for two); vjp: g, and the inputs where
// the op's VJP depends on them (spec/ops.def's vjp_reads: add's, sub's, neg's and scale's do not, so
// their inputs' values need never reach memory); pass: in[0]; a slot it accumulates into. Slot 1 of a
// VJP whose inputs are one node (out[1] == out[0]) accumulates onto what slot 0 has just received,
// which the interpreter has in hand: it is not read.
inline bool reads(const Step& step, int operand) {
  const bool vjp = step.kind == StepKind::vjp, pass = step.kind == StepKind::pass;
  const bool reads_inputs = step.kind == StepKind::forward || (vjp && op_info(step.op).vjp_reads == VjpReads::inputs);
  switch (operand) {
    case kIn0: return pass || reads_inputs;
    case kIn1: return reads_inputs && step.in[1];
    case kGrad: return vjp;
    case kSlot0: return (vjp || pass) && step.write[0] == SlotWrite::accumulate;
    default:
      return vjp && step.write[1] == SlotWrite::accumulate &&
             !(step.out[1] == step.out[0] && step.write[0] != SlotWrite::none);
  }
}

// `step`'s sources, given the steps before it in its piece (`before`, the nearest last; kHistory at
// most are looked at). An operand one of them writes comes from that step's register where the
// format allows (register_source), else from memory; the nearest write of a buffer counts, and of two
// writes to one buffer in a step the later (slot 1). So a chain of nodes passes its values in registers
// and a gradient reaches the steps a few after it without memory; a piece's first step reads all from
// memory, and no load reads memory before its first write (compute-sanitizer's initcheck holds the
// program to that).
inline std::uint16_t sources_of(const Step& step, std::span<const Step> before) {
  const int depth = static_cast<int>(std::min<std::size_t>(before.size(), kHistory));
  Overwritten written[kHistory];
  for (int d = 1; d <= depth; ++d) written[d - 1] = overwritten_by(before[before.size() - static_cast<std::size_t>(d)]);
  unsigned sources = 0;
  for (int operand = 0; operand < kOperandCount; ++operand) {
    if (!reads(step, operand)) continue;
    const void* p = operand_address(step, operand);
    unsigned code = kFromMemory;
    for (int d = 1; d <= depth; ++d) {
      const Overwritten& w = written[d - 1];
      const int which = w.at[1] && p == w.at[1] ? 1 : w.at[0] && p == w.at[0] ? 0 : -1;
      if (which < 0) continue;
      if (d == 1 || before[before.size() - static_cast<std::size_t>(d)].numel == step.numel) code = register_source(d, which);
      break;
    }
    sources |= source_field(operand, code);
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
  // Derives the last step's code and sources from its fields (and the steps before it in its piece:
  // piece_at's cut, followed as the steps come).
  void seal_last() {
    const std::size_t last = steps.size() - 1;
    Step& step = steps[last];
    if (last == 0 || step.dtype != steps[last - 1].dtype || last - piece_first_ == kStepsPerLaunch) piece_first_ = last;
    step.code = code_of(step.kind, step.op);
    const std::size_t before = std::min<std::size_t>(last - piece_first_, kHistory);
    step.sources = sources_of(step, std::span<const Step>(steps).subspan(last - before, before));
  }

 private:
  std::size_t piece_first_ = 0;  // the first step of the last step's piece
};
// The index of the program's first step that was appended and never sealed, or -1 when every step is.
inline std::int64_t first_unsealed_step(const Program& program) {
  for (std::size_t j = 0; j < program.steps.size(); ++j)
    if (program.steps[j].code == kCodeUnsealed) return static_cast<std::int64_t>(j);
  return -1;
}
#endif  // !defined(__CUDACC_RTC__)


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


// cuda/kernels/program.hpp — a tape program: a flat list of steps (the deferred forwards of small nodes, or
// a whole backward pass) and the per-element interpreter both runners execute (a host loop on the
// CPU backend, one kernel per piece on CUDA). Not a new formula: each step calls the
// per-node path's own functors (dispatch.hpp: ForwardFn, VjpFn) and accumulates as the tape's
// per-node accumulate does, in the same order, so a program gives the per-node path's results,
// identical up to NaN (equal bits, or both NaN: a NaN's sign and payload may differ).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "dispatch.hpp"

namespace tapewise::detail {

enum class StepKind : std::uint8_t {
  forward,  // out[0] = op(in[0], in[1])
  vjp,      // contributions of op at (in[0], in[1]) with upstream g, written to out[0], out[1]
  pass,     // in[0] as is, written to out[0] (the seed copy; max(a, a) / min(a, a) passing g on)
  zero,     // out[0] = +0 (dense backward's slots that receive nothing)
};

// How a contribution c reaches a gradient slot; the cases of Tape::run_backward's accumulate.
enum class SlotWrite : std::uint8_t {
  none,         // the parent does not require grad: the contribution is dropped
  store,        // first contribution, sparse: kept bit-exact
  store_dense,  // first contribution, dense: c + (+0), as prim add_scalar(c, 0)
  accumulate,   // later contributions: existing + c, existing on the left
};

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
TW_HD const void* operand_address(const Step& step, int operand) {
  switch (operand) {
    case kIn0: return step.in[0];
    case kIn1: return step.in[1];
    case kGrad: return step.g;
    case kSlot0: return step.out[0];
    default: return step.out[1];
  }
}

// Where a step takes each operand from at an element, a bit per Operand k in Step::sources: bit k,
// memory; bit kFromWritten0 + k or kFromWritten1 + k, the register holding what the step before
// wrote (Written::value[0] or [1]) when that step ran at the element, else memory.
inline constexpr int kFromWritten0 = kOperandCount, kFromWritten1 = 2 * kOperandCount;
inline constexpr unsigned kOperandBits = (1u << kOperandCount) - 1;

// The dense dispatch number: forwards 0..kOpCount-1, VJPs kOpCount..2 kOpCount-1, then pass, zero.
inline constexpr int kCodePass = 2 * kOpCount, kCodeZero = 2 * kOpCount + 1;
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
// accumulates onto what slot 0 has just received, which write_slot has in hand: it is not read.
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
    step.code = code_of(step.kind, step.op);
    step.sources = sources_of(step, steps.empty() ? nullptr : &steps.back());
    steps.push_back(step);
  }
};

// Steps per CUDA launch: the steps travel as one __grid_constant__ kernel parameter, and CUDA 12.1+
// allows 32,764 bytes of parameters (448 steps x 72 bytes + count and element count = 32,272).
// Longer programs run as several launches in order, which keeps each element's order of steps.
inline constexpr int kStepsPerLaunch = 448;

// A step's operands at one element, by Operand; and what it wrote, in overwritten_by's order.
template <class T>
struct Operands {
  T at[kOperandCount];
};
template <class T>
struct Written {
  T value[2];
};

// What loading a step's operands needs of it, read into registers two steps ahead (run_steps_at).
template <class Index>
struct LoadPlan {
  const void* at[kOperandCount];  // operand_address of each
  unsigned sources;
  Index numel;
};
template <class Index>
TW_HD LoadPlan<Index> load_plan(const Step& s) {
  return {{s.in[0], s.in[1], s.g, s.out[0], s.out[1]}, s.sources, static_cast<Index>(s.numel)};
}

// A step's operands at element i that come from memory; when the step before did not run at i
// (previous_ran false), also those it would have handed over in registers: memory holds them then.
template <class T, class Index>
TW_HD void load_operands(const LoadPlan<Index>& plan, Index i, bool previous_ran, Operands<T>& loaded) {
  const unsigned s = plan.sources;
  const unsigned from_memory =
      (s | (previous_ran ? 0u : (s >> kFromWritten0) | (s >> kFromWritten1))) & kOperandBits;
  for (int k = 0; k < kOperandCount; ++k)
    if (from_memory & (1u << k)) loaded.at[k] = static_cast<const T*>(plan.at[k])[i];
}

// A step's operands at one element: those loaded, with what the step before wrote in place of the
// ones it hands over (when it ran at the element). Each is merged where a node's case reads it, long
// after the loads were issued, and only the operands the node has are merged.
template <class T>
struct StepOperands {
  const Operands<T>& loaded;
  const Written<T>& written;
  unsigned sources;  // Step::sources where the step before ran at the element, else 0
  TW_HD T operator[](int k) const {
    T v = loaded.at[k];
    if (sources & (1u << (kFromWritten0 + k))) v = written.value[0];
    if (sources & (1u << (kFromWritten1 + k))) v = written.value[1];
    return v;
  }
};

// A contribution c reaching slot k of a step as the tape's per-node accumulate lands it; `existing`
// is the slot's value before the step. Selects rather than branches: the three sums are cheap, and a
// branch costs a warp that runs alone on its scheduler more than they do.
template <class T, class Index>
TW_HD void write_slot(const Step& step, int k, Index i, bool runs, T c, T existing, Written<T>& written) {
  const SlotWrite how = step.write[k];
  const T v = how == SlotWrite::accumulate ? existing + c : how == SlotWrite::store_dense ? c + T(0) : c;
  if (runs && how != SlotWrite::none) static_cast<T*>(step.out[k])[i] = v;
  written.value[k] = v;
}

// The four kinds of step at element i, each through the functors the per-node kernels run. `runs`
// false (an element past the step's numel): the math runs on what is in hand, nothing is stored, and
// what it returns is never read (the next step takes its operands from memory then).
template <Op op, class T, class Index>
TW_HD Written<T> forward_at(const Step& step, Index i, bool runs, const StepOperands<T>& o) {
  const T in[2] = {o[kIn0], kArity<op> == 2 ? o[kIn1] : T(0)};
  T y[1];
  ForwardFn<op, T>{params_of<T>(Scalars{step.s0, step.s1})}(in, y);
  if (runs) static_cast<T*>(step.out[0])[i] = y[0];
  return Written<T>{{y[0], T(0)}};
}

template <Op op, class T, class Index>
TW_HD Written<T> vjp_at(const Step& step, Index i, bool runs, const StepOperands<T>& o) {
  constexpr int arity = kArity<op>;
  T in[arity + 1];  // the inputs, then g: VjpFn's operand order
  in[0] = o[kIn0];
  if constexpr (arity == 2) in[1] = o[kIn1];
  in[arity] = o[kGrad];
  T d[arity];
  VjpFn<op, T>{params_of<T>(Scalars{step.s0, step.s1})}(in, d);
  Written<T> written{{T(0), T(0)}};
  write_slot(step, 0, i, runs, d[0], o[kSlot0], written);
  if constexpr (arity == 2) {
    // Both inputs one node: slot 1 accumulates onto what slot 0 has just received.
    const bool onto_slot0 = step.out[1] == step.out[0] && step.write[0] != SlotWrite::none;
    write_slot(step, 1, i, runs, d[1], onto_slot0 ? written.value[0] : o[kSlot1], written);
  }
  return written;
}

template <class T, class Index>
TW_HD Written<T> pass_at(const Step& step, Index i, bool runs, const StepOperands<T>& o) {
  Written<T> written{{T(0), T(0)}};
  write_slot(step, 0, i, runs, o[kIn0], o[kSlot0], written);
  return written;
}

template <class T, class Index>
TW_HD Written<T> zero_at(const Step& step, Index i, bool runs) {
  if (runs) static_cast<T*>(step.out[0])[i] = T(0);
  return Written<T>{{T(0), T(0)}};
}

// A thread's elements (its lanes): `Lanes` of them, `at[l]` each, `runs[l]` where the step covers it.
// One decode of the step serves them all, and their math interleaves: the lanes are independent.
template <class T, class Index, int Lanes>
struct LaneSet {
  Index at[Lanes];
  bool runs[Lanes];
  Operands<T> loaded[Lanes];   // the step's memory operands
  Written<T> handed[Lanes];    // what the step before wrote
  unsigned sources[Lanes];     // Step::sources where the step before ran at the lane, else 0
  TW_HD StepOperands<T> operands(int l) const { return {loaded[l], handed[l], sources[l]}; }
  // A single lane runs the step whenever it is dispatched (run_steps_at): stores need no predicate.
  TW_HD bool stores(int l) const { return Lanes == 1 || runs[l]; }
};

// One step at a thread's lanes, by its code: one dispatch for all of them.
template <class T, class Index, int Lanes>
TW_HD void run_step(const Step& step, const LaneSet<T, Index, Lanes>& lanes, Written<T> (&written)[Lanes]) {
  switch (step.code) {
#define TAPEWISE_OP(name, ...)                                                                            \
  case static_cast<int>(Op::name):                                                                        \
    for (int l = 0; l < Lanes; ++l)                                                                       \
      written[l] = forward_at<Op::name, T, Index>(step, lanes.at[l], lanes.stores(l), lanes.operands(l)); \
    return;                                                                                               \
  case kOpCount + static_cast<int>(Op::name):                                                             \
    for (int l = 0; l < Lanes; ++l)                                                                       \
      written[l] = vjp_at<Op::name, T, Index>(step, lanes.at[l], lanes.stores(l), lanes.operands(l));     \
    return;
#include <tapewise/ops.def>
#undef TAPEWISE_OP
    case kCodePass:
      for (int l = 0; l < Lanes; ++l) written[l] = pass_at<T, Index>(step, lanes.at[l], lanes.stores(l), lanes.operands(l));
      return;
    default:
      for (int l = 0; l < Lanes; ++l) written[l] = zero_at<T, Index>(step, lanes.at[l], lanes.stores(l));
      return;
  }
}

// Every step of a piece (steps of one dtype T) at a thread's lanes, the elements first + l * stride
// (l < Lanes), in order; a step shorter than an element skips it. Elements are independent (each step
// reads and writes element i only), so a runner may cover them in any order or in parallel, as long
// as each element sees the steps in order. While a step runs, the next step's memory operands are
// being loaded and the load plan of the step after that read, so neither latency waits for the step's
// math; what a step writes reaches the next in registers (Step::sources). Same values, same order:
// identical up to NaN to step by step. Index: the type of element indices, 32 bits where the piece allows
// (cheaper address arithmetic). Lanes: one for small pieces (every thread a scheduler can get), more
// for large ones (a step's decode is then shared by several elements). EveryStepRuns: the caller knows
// every step covers every lane (all lanes below Piece::covered), so no lane needs its own checks.
template <class T, class Index, int Lanes, bool EveryStepRuns = false>
TW_HD void run_steps_at(const Step* steps, int count, Index first, Index stride) {
  LaneSet<T, Index, Lanes> lanes;
  Operands<T> loaded[Lanes] = {};  // step k's memory operands, loaded while step k - 1 ran
  Written<T> written[Lanes] = {};  // what step k - 1 wrote
  bool previous_ran[Lanes] = {};
  for (int l = 0; l < Lanes; ++l) lanes.at[l] = first + static_cast<Index>(l) * stride;
  LoadPlan<Index> next = count > 1 ? load_plan<Index>(steps[1]) : LoadPlan<Index>{};
  if (count > 0) {
    const LoadPlan<Index> plan = load_plan<Index>(steps[0]);
    for (int l = 0; l < Lanes; ++l)
      if (EveryStepRuns || lanes.at[l] < plan.numel) load_operands(plan, lanes.at[l], false, loaded[l]);
  }
  for (int k = 0; k < count; ++k) {
    const Step& step = steps[k];
    bool any_runs = false;
    for (int l = 0; l < Lanes; ++l) {
      lanes.runs[l] = EveryStepRuns || lanes.at[l] < static_cast<Index>(step.numel);
      any_runs = any_runs || lanes.runs[l];
      lanes.loaded[l] = loaded[l];
      lanes.handed[l] = written[l];
      lanes.sources[l] = previous_ran[l] ? step.sources : 0u;
    }
    const LoadPlan<Index> plan = next;  // step k + 1's
    if (k + 2 < count) next = load_plan<Index>(steps[k + 2]);
    for (int l = 0; l < Lanes; ++l)
      if (k + 1 < count && (EveryStepRuns || lanes.at[l] < plan.numel))
        load_operands(plan, lanes.at[l], lanes.runs[l], loaded[l]);
    if (any_runs) run_step(step, lanes, written);
    for (int l = 0; l < Lanes; ++l) previous_ran[l] = lanes.runs[l];
  }
}

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

// Elements per thread in a CUDA launch of a piece this large: one up to kOneLanePiece (a small
// tensor's steps are latency-bound: every thread a scheduler can get), four above (enough threads to
// fill the GPU, and each step's decode shared by four elements).
inline constexpr std::int64_t kOneLanePiece = std::int64_t{1} << 16;
inline int program_lanes(std::int64_t piece_numel) { return piece_numel <= kOneLanePiece ? 1 : 4; }

#if defined(__CUDACC__)
// The CUDA runner (program_cuda.cu): queues the program on `stream`, a launch per piece (piece_at,
// at most kStepsPerLaunch steps); returns the first launch error.
cudaError_t launch_program(cudaStream_t stream, const Program& program);
#endif

}  // namespace tapewise::detail

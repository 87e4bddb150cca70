// cuda/kernels/interpreter.hpp — the per-element interpreter of a tape program (program.hpp): what
// both runners execute, a host loop on the CPU backend (cpu_backend.cpp) and one kernel per piece on
// CUDA (backends/program_launch.cu). Not a new formula: each step calls the per-node path's own functors
// (dispatch.hpp: ForwardFn, VjpFn) and lands contributions as the per-node path does
// (land_contribution), in the same order, so a program gives the per-node path's results, identical
// up to NaN (equal bits, or both NaN: a NaN's sign and payload may differ).
//
// The life of one step k at one thread's elements (run_steps_at), while step k - 1 has just run:
//
//   load_plan(steps[k + 1])    step k + 1's addresses and sources, read two steps ahead
//   load_operands(step k + 1)  its memory operands, issued now, consumed one step later (a compiled
//                              piece of one lane: step k + 3's, consumed three steps later)
//   run_step(step k)           one dispatch on step.code (forward / vjp of each op, pass, zero), then
//     StepOperands             each operand from memory (loaded a step ago, or three) or from the register
//                              one of steps k - 3 .. k - 1 wrote (History), as step.sources says
//     forward_at / vjp_at      ForwardFn / VjpFn of the op at those operands
//     write_slot               a vjp's or pass's contribution landed (land_contribution) and stored
//   History                    what step k wrote, kept in registers for steps k + 1 .. k + 3
//
// A lane past a step's numel runs the math on what is in hand but stores nothing, and the next step
// then reads its operands from memory.
#pragma once

#include <algorithm>
#include <cstdint>

#include "dispatch.hpp"
#include "program.hpp"

namespace tapewise::detail {

inline namespace TW_MATH_NS {  // the math mode's own symbols (scalar_math.cuh)

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
// `sources`: s.sources, or the same value as a constant where the caller knows it (a compiled piece).
template <class Index>
TW_HD LoadPlan<Index> load_plan(const Step& s, unsigned sources) {
  return {{s.in[0], s.in[1], s.g, s.out[0], s.out[1]}, sources, static_cast<Index>(s.numel)};
}
template <class Index>
TW_HD LoadPlan<Index> load_plan(const Step& s) {
  return load_plan<Index>(s, s.sources);
}

// A step's operands at element i that come from memory; when the step before did not run at i
// (previous_ran false), also those it would have handed over in registers: memory holds them then.
template <class T, class Index>
TW_HD void load_operands(const LoadPlan<Index>& plan, Index i, bool previous_ran, Operands<T>& loaded) {
  const unsigned sources = previous_ran ? plan.sources : without_previous_step(plan.sources);
  for (int k = 0; k < kOperandCount; ++k)
    if (source_code(sources, k) == kFromMemory) loaded.at[k] = static_cast<const T*>(plan.at[k])[i];
}

// What the last kHistory steps wrote at a thread's lanes, the step before first (back(0, l)). Few
// lanes (CUDA's): registers, shifted as each step ends, which a compiled piece's code does by naming
// (no instruction); the interpreter's shift is a few moves. Many (the CPU's wide lanes): a ring turned
// as each step ends, so that no lane's values are copied.
template <class T, int Lanes>
struct History {
  static constexpr bool kRing = Lanes > 4;
  static constexpr int kEntries = kHistory + 1;  // and the one the running step writes
  Written<T> entry[kEntries][Lanes] = {};
  int newest = 0;  // the ring's entry of the step before

  TW_HD const Written<T>& back(int d, int l) const {
    if constexpr (kRing) return entry[(newest + kEntries - d) % kEntries][l];
    else return entry[d][l];
  }
  // Where the running step writes.
  TW_HD Written<T> (&running())[Lanes] {
    if constexpr (kRing) return entry[(newest + 1) % kEntries];
    else return entry[kHistory];
  }
  // The running step has ended: its values become back(0, l).
  TW_HD void turn() {
    if constexpr (kRing) {
      newest = (newest + 1) % kEntries;
    } else {
      for (int d = kHistory - 1; d > 0; --d)
        for (int l = 0; l < Lanes; ++l) entry[d][l] = entry[d - 1][l];
      for (int l = 0; l < Lanes; ++l) entry[0][l] = entry[kHistory][l];
    }
  }
};

// A step's operands at one element: those loaded, with what the steps before wrote in place of the
// ones they hand over. Each is merged where a node's case reads it, long after the loads were issued,
// and only the operands the node has are merged.
template <class T, int Lanes>
struct StepOperands {
  const Operands<T>& loaded;
  const History<T, Lanes>& history;
  int lane;
  unsigned sources;  // Step::sources, without_previous_step where the step before did not run at the element
  TW_HD T operator[](int k) const {
    const unsigned code = source_code(sources, k);
    T v = loaded.at[k];
    for (int d = 1; d <= kHistory; ++d)
      for (int which = 0; which < 2; ++which)
        if (code == register_source(d, which)) v = history.back(d - 1, lane).value[which];
    return v;
  }
};

// The arithmetic of land_contribution at one element: c reaching a slot that held `existing` before
// the step. A dropped contribution is stored nowhere; its register keeps c, which no step reads
// (overwritten_by leaves a slot written `none` out).
template <class T>
struct ElementSums {
  T c, existing;
  TW_HD T onto_existing() const { return existing + c; }
  TW_HD T plus_zero() const { return c + T(0); }
  TW_HD T as_is() const { return c; }
  TW_HD T dropped() const { return c; }
};

// Whether out[k] of a step has a buffer to store to: from Writes where a compiled piece knows it,
// else from the step (the register pass and the tape's pending values leave it null).
template <unsigned Writes>
TW_HD bool has_buffer(const Step& step, int k) {
  return Writes == kWritesAtRunTime ? step.out[k] != nullptr : slot_has_buffer(Writes, k);
}

// Contribution c landed in slot k of a step at element i, stored where the step runs there and has
// a buffer for it (the register pass clears out[k] where no step reads the value from memory). Writes:
// the step's slot writes as a constant (a compiled piece), or kWritesAtRunTime (read from the step).
template <unsigned Writes, class T, class Index>
TW_HD void write_slot(const Step& step, int k, Index i, bool runs, T c, T existing, Written<T>& written) {
  const SlotWrite how = Writes == kWritesAtRunTime ? step.write[k] : slot_write(Writes, k);
  ElementSums<T> sums{c, existing};
  const T v = land_contribution(how, sums);
  if (runs && how != SlotWrite::none && has_buffer<Writes>(step, k)) static_cast<T*>(step.out[k])[i] = v;
  written.value[k] = v;
}

// The four kinds of step at element i, each through the functors the per-node kernels run. `runs`
// false (an element past the step's numel): the math runs on what is in hand, nothing is stored, and
// what it returns is never read (the next step takes its operands from memory then).
// A forward without a buffer (out[0] null: a value the tape leaves pending, tape.cpp) hands its value
// on in the register only.
template <Op op, unsigned Writes, class T, class Index, int Lanes>
TW_HD Written<T> forward_at(const Step& step, Index i, bool runs, const StepOperands<T, Lanes>& o) {
  const T in[2] = {o[kIn0], kArity<op> == 2 ? o[kIn1] : T(0)};
  T y[1];
  ForwardFn<op, T>{params_of<T>(Scalars{step.s0, step.s1})}(in, y);
  if (runs && has_buffer<Writes>(step, 0)) static_cast<T*>(step.out[0])[i] = y[0];
  return Written<T>{{y[0], T(0)}};
}

template <Op op, unsigned Writes, class T, class Index, int Lanes>
TW_HD Written<T> vjp_at(const Step& step, Index i, bool runs, const StepOperands<T, Lanes>& o) {
  constexpr int arity = kArity<op>;
  T in[arity + 1];  // the inputs, then g: VjpFn's operand order
  in[0] = o[kIn0];
  if constexpr (arity == 2) in[1] = o[kIn1];
  in[arity] = o[kGrad];
  T d[arity];
  VjpFn<op, T>{params_of<T>(Scalars{step.s0, step.s1})}(in, d);
  Written<T> written{{T(0), T(0)}};
  write_slot<Writes>(step, 0, i, runs, d[0], o[kSlot0], written);
  if constexpr (arity == 2) {
    // Both inputs one node: slot 1 accumulates onto what slot 0 has just received.
    const bool onto_slot0 = step.out[0] && step.out[1] == step.out[0] && step.write[0] != SlotWrite::none;
    write_slot<Writes>(step, 1, i, runs, d[1], onto_slot0 ? written.value[0] : o[kSlot1], written);
  }
  return written;
}

template <unsigned Writes, class T, class Index, int Lanes>
TW_HD Written<T> pass_at(const Step& step, Index i, bool runs, const StepOperands<T, Lanes>& o) {
  Written<T> written{{T(0), T(0)}};
  write_slot<Writes>(step, 0, i, runs, o[kIn0], o[kSlot0], written);
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
  History<T, Lanes> history;   // what the steps before wrote
  unsigned sources[Lanes];     // Step::sources, without_previous_step where the step before did not run at the lane
  TW_HD StepOperands<T, Lanes> operands(int l) const { return {loaded[l], history, l, sources[l]}; }
  // A single lane runs the step whenever it is dispatched (run_steps_at): stores need no predicate.
  TW_HD bool stores(int l) const { return Lanes == 1 || runs[l]; }
};

// One step at a thread's lanes, of dispatch number Code (Step::code) and slot writes Writes: what
// run_step's case for that code does (Writes = kWritesAtRunTime), and all a compiled piece
// (program_kernel.cuh) runs for a step it knows the code and slot writes of.
template <int Code, unsigned Writes, class T, class Index, int Lanes>
TW_HD void run_code(const Step& step, const LaneSet<T, Index, Lanes>& lanes, Written<T> (&written)[Lanes]) {
  for (int l = 0; l < Lanes; ++l) {
    if constexpr (Code < kOpCount)
      written[l] = forward_at<static_cast<Op>(Code), Writes, T, Index>(step, lanes.at[l], lanes.stores(l), lanes.operands(l));
    else if constexpr (Code < 2 * kOpCount)
      written[l] = vjp_at<static_cast<Op>(Code - kOpCount), Writes, T, Index>(step, lanes.at[l], lanes.stores(l), lanes.operands(l));
    else if constexpr (Code == kCodePass)
      written[l] = pass_at<Writes, T, Index>(step, lanes.at[l], lanes.stores(l), lanes.operands(l));
    else
      written[l] = zero_at<T, Index>(step, lanes.at[l], lanes.stores(l));
  }
}

// One step at a thread's lanes, by its code: one dispatch for all of them.
template <class T, class Index, int Lanes>
TW_HD void run_step(const Step& step, const LaneSet<T, Index, Lanes>& lanes, Written<T> (&written)[Lanes]) {
  switch (step.code) {
#define TAPEWISE_OP(name, ...)                                                    \
  case static_cast<int>(Op::name):                                                \
    return run_code<static_cast<int>(Op::name), kWritesAtRunTime, T, Index, Lanes>(step, lanes, written); \
  case kOpCount + static_cast<int>(Op::name):                                     \
    return run_code<kOpCount + static_cast<int>(Op::name), kWritesAtRunTime, T, Index, Lanes>(step, lanes, written);
#include <tapewise/ops.def>
#undef TAPEWISE_OP
    case kCodePass: return run_code<kCodePass, kWritesAtRunTime, T, Index, Lanes>(step, lanes, written);
    default: return run_code<kCodeZero, kWritesAtRunTime, T, Index, Lanes>(step, lanes, written);
  }
}

// What StepPipeline::advance runs a step with: by its code read at run time (the interpreter), or
// by a code and slot writes known at compile time (a compiled piece).
struct RunStep {
  template <class T, class Index, int Lanes>
  TW_HD void operator()(const Step& step, const LaneSet<T, Index, Lanes>& lanes, Written<T> (&written)[Lanes]) const {
    run_step(step, lanes, written);
  }
};
template <int Code, unsigned Writes>
struct RunCode {
  template <class T, class Index, int Lanes>
  TW_HD void operator()(const Step& step, const LaneSet<T, Index, Lanes>& lanes, Written<T> (&written)[Lanes]) const {
    run_code<Code, Writes>(step, lanes, written);
  }
};

// A thread's way through a piece's steps at its lanes: what passes from one step to the next, and
// the step itself (advance). The interpreter (run_steps_at) reads each step's code and sources from
// the step; a compiled piece (piece_source.hpp, program_kernel.cuh) passes the same values as constants.
// Ahead: how many steps ahead memory operands load. One, unless every step runs at every lane
// (EveryStepRuns, a compiled piece of one lane): then up to kHistory, since a step's memory operands were
// last written at least kHistory + 1 steps before it (sources_of), so before the load is issued.
template <class T, class Index, int Lanes, bool EveryStepRuns, int Ahead = 1>
struct StepPipeline {
  static_assert(Ahead >= 1 && Ahead <= kHistory && (Ahead == 1 || EveryStepRuns),
                "a load ahead of the step before it needs every step to run at every lane, and a value it reads stored");
  using IndexType = Index;
  LaneSet<T, Index, Lanes> lanes;
  Operands<T> loaded[Ahead][Lanes] = {};  // the memory operands of the next Ahead steps, loading while this one runs
  bool previous_ran[Lanes] = {};

  TW_HD StepPipeline(Index first, Index stride) {
    for (int l = 0; l < Lanes; ++l) lanes.at[l] = first + static_cast<Index>(l) * stride;
  }
  // The first step's memory operands: nothing ran before it.
  TW_HD void load_first(const LoadPlan<Index>& plan) {
    for (int l = 0; l < Lanes; ++l)
      if (EveryStepRuns || lanes.at[l] < plan.numel) load_operands(plan, lanes.at[l], false, loaded[0][l]);
  }
  // Step d's memory operands (0 < d < Ahead) before the first step runs: every step before it will run.
  TW_HD void load_ahead(int d, const LoadPlan<Index>& plan) {
    for (int l = 0; l < Lanes; ++l) load_operands(plan, lanes.at[l], true, loaded[d][l]);
  }
  // A later step's memory operands brought into the L1 cache (CUDA; elsewhere nothing): a hint, which
  // changes no value, so it may look further ahead than a load. A compiled piece of one lane and enough
  // elements issues it several steps before the load (piece_prefetches), whose latency is then the L1's.
  TW_HD void prefetch(const LoadPlan<Index>& plan) const {
#if defined(__CUDA_ARCH__)
    for (int l = 0; l < Lanes; ++l)
      for (int k = 0; k < kOperandCount; ++k)
        if (source_code(plan.sources, k) == kFromMemory)
          asm volatile("prefetch.L1 [%0];" ::"l"(static_cast<const T*>(plan.at[k]) + lanes.at[l]));
#else
    (void)plan;
#endif
  }
  // `step`, whose sources are `sources` (Step::sources), run by `run` (run_step or run_code) at the
  // lanes it covers, while the memory operands of the step Ahead after it load (`ahead`, where has_ahead).
  template <class Run>
  TW_HD void advance(const Step& step, unsigned sources, const LoadPlan<Index>& ahead, bool has_ahead, Run run) {
    bool any_runs = false;
    for (int l = 0; l < Lanes; ++l) {
      lanes.runs[l] = EveryStepRuns || lanes.at[l] < static_cast<Index>(step.numel);
      any_runs = any_runs || lanes.runs[l];
      lanes.loaded[l] = loaded[0][l];
      for (int d = 1; d < Ahead; ++d) loaded[d - 1][l] = loaded[d][l];
      lanes.sources[l] = previous_ran[l] ? sources : without_previous_step(sources);
    }
    for (int l = 0; l < Lanes; ++l)
      if (has_ahead && (EveryStepRuns || lanes.at[l] < ahead.numel))
        load_operands(ahead, lanes.at[l], lanes.runs[l], loaded[Ahead - 1][l]);
    if (any_runs) run(step, lanes, lanes.history.running());
    lanes.history.turn();
    for (int l = 0; l < Lanes; ++l) previous_ran[l] = lanes.runs[l];
  }
};

// Every step of a piece (steps of one dtype T) at a thread's lanes, the elements first + l * stride
// (l < Lanes), in order; a step shorter than an element skips it. Elements are independent (each step
// reads and writes element i only), so a runner may cover them in any order or in parallel, as long
// as each element sees the steps in order. While a step runs, the next step's memory operands are
// being loaded and the load plan of the step after that read, so neither latency waits for the step's
// math; what a step writes reaches the next few in registers (Step::sources). Same values, same order:
// identical up to NaN to step by step. Index: the type of element indices, 32 bits where the piece allows
// (cheaper address arithmetic). Lanes: one for small pieces (every thread a scheduler can get), more
// for large ones (a step's decode is then shared by several elements). EveryStepRuns: the caller knows
// every step covers every lane (all lanes below Piece::covered), so no lane needs its own checks.
template <class T, class Index, int Lanes, bool EveryStepRuns = false>
TW_HD void run_steps_at(const Step* steps, int count, Index first, Index stride) {
  StepPipeline<T, Index, Lanes, EveryStepRuns> pipeline(first, stride);
  LoadPlan<Index> next = count > 1 ? load_plan<Index>(steps[1]) : LoadPlan<Index>{};
  if (count > 0) pipeline.load_first(load_plan<Index>(steps[0]));
  for (int k = 0; k < count; ++k) {
    const LoadPlan<Index> plan = next;  // step k + 1's
    if (k + 2 < count) next = load_plan<Index>(steps[k + 2]);
    pipeline.advance(steps[k], steps[k].sources, plan, k + 1 < count, RunStep{});
  }
}

// Elements per thread in a CUDA launch of a piece this large: one up to kOneLanePiece (a small
// tensor's steps are latency-bound: every thread a scheduler can get), four above (enough threads to
// fill the GPU, and each step's decode shared by four elements).
inline constexpr std::int64_t kOneLanePiece = std::int64_t{1} << 16;
inline int program_lanes(std::int64_t piece_numel) { return piece_numel <= kOneLanePiece ? 1 : 4; }

}  // inline namespace TW_MATH_NS

}  // namespace tapewise::detail

// cuda/kernels/program.hpp — a tape program: a flat list of steps (the deferred forwards of small nodes, or
// a whole backward pass) and the per-element interpreter both runners execute (a host loop on the
// CPU backend, one kernel per launch chunk on CUDA). Not a new formula: each step calls the
// per-node path's own functors (dispatch.hpp: ForwardFn, VjpFn) and accumulates as the tape's
// per-node accumulate does, in the same order, so a program gives the per-node path's bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
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

// One step at one element. Plain data (a kernel parameter on CUDA): 72 bytes.
struct Step {
  const void* in[2];  // forward, vjp: the node's input values (a, b); pass: in[0], the source
  const void* g;      // vjp: the node's gradient slot
  void* out[2];       // forward: out[0], the node's value; vjp: the slots of parents a, b; pass, zero: out[0]
  double s0, s1;      // the node's scalars as given; rounded to the dtype as params_of does
  std::int64_t numel;  // the step applies to elements [0, numel)
  StepKind kind;
  DType dtype;
  SlotWrite write[2];  // vjp: for out[0], out[1]; pass: for out[0]
  Op op;
};
static_assert(sizeof(Step) == 72, "kStepsPerLaunch below is computed from this size");

struct Program {
  std::vector<Step> steps;
  std::int64_t max_numel = 0;  // the elements a runner covers: the largest step's numel

  void add(const Step& step) {
    steps.push_back(step);
    max_numel = std::max(max_numel, step.numel);
  }
};

// Steps per CUDA launch: the steps travel as one __grid_constant__ kernel parameter, and CUDA 12.1+
// allows 32,764 bytes of parameters (448 steps x 72 bytes + count and element count = 32,272).
// Longer programs run as several launches in order, which keeps each element's order of steps.
inline constexpr int kStepsPerLaunch = 448;

// One element of a float or double, held in a register between steps as raw bits.
using Bits = std::uint64_t;
template <class T>
TW_HD T from_bits(Bits b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}
template <class T>
TW_HD Bits to_bits(T v) {
  Bits b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}

// What a step reads at one element, loaded before the previous step runs (so the loads' latency
// overlaps that step's math): its inputs, its upstream g (vjp), and the slots it accumulates into.
struct Operands {
  Bits in[2];
  Bits g;
  Bits slot[2];
};

// What a step wrote at one element: the next step's operands at these addresses were loaded before
// the write, so it takes them from here. Buffers a program writes are the tape's own (node values,
// gradient slots): two of them are the same buffer or disjoint, so comparing pointers is enough.
struct Written {
  const void* at[2] = {nullptr, nullptr};
  Bits value[2] = {0, 0};

  TW_HD void take(const void* p, Bits& operand) const {
    for (int k = 0; k < 2; ++k)
      if (at[k] && at[k] == p) operand = value[k];
  }
};

template <class T>
TW_HD Bits load(const void* p, std::int64_t i) {
  return to_bits(static_cast<const T*>(p)[i]);
}

// The buffers a step about to run will write at this element: the next step's operands there are
// taken from what it wrote (Written), never loaded first, so no load reads memory before its first
// write (compute-sanitizer's initcheck holds the program to that).
struct Overwritten {
  const void* at[2] = {nullptr, nullptr};
  TW_HD bool covers(const void* p) const { return p && (p == at[0] || p == at[1]); }
};

// Exactly the buffers run_step_at records in Written when `step` runs (a slot written `none` is not).
TW_HD Overwritten overwritten_by(const Step& step) {
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

template <class T>
TW_HD Bits load_unless(const void* p, std::int64_t i, const Overwritten& skip) {
  return skip.covers(p) ? Bits{0} : load<T>(p, i);
}

// The operands of `step` at element i (i < step.numel): which pointers are set says what it reads
// (forward, vjp: in[0], and in[1] for two inputs; vjp: g; pass: in[0]; accumulating writes: the slot).
template <class T>
TW_HD Operands load_operands_typed(const Step& step, std::int64_t i, const Overwritten& skip) {
  Operands o{};
  if (step.kind == StepKind::zero) return o;
  o.in[0] = load_unless<T>(step.in[0], i, skip);
  if (step.kind == StepKind::pass) {
    if (step.write[0] == SlotWrite::accumulate) o.slot[0] = load_unless<T>(step.out[0], i, skip);
    return o;
  }
  if (step.in[1]) o.in[1] = load_unless<T>(step.in[1], i, skip);
  if (step.kind == StepKind::vjp) {
    o.g = load_unless<T>(step.g, i, skip);
    for (int k = 0; k < 2; ++k) {
      // Both inputs one node (out[1] == out[0]): slot 1 accumulates onto what slot 0 is about to
      // receive, which write_slot takes from Written, so it is not loaded.
      const bool written_first = k == 1 && step.out[1] == step.out[0] && step.write[0] != SlotWrite::none;
      if (step.write[k] == SlotWrite::accumulate && !written_first) o.slot[k] = load_unless<T>(step.out[k], i, skip);
    }
  }
  return o;
}

TW_HD Operands load_operands(const Step& step, std::int64_t i, const Overwritten& skip = {}) {
  return step.dtype == DType::float32 ? load_operands_typed<float>(step, i, skip)
                                      : load_operands_typed<double>(step, i, skip);
}

// The operands `written` replaced (the step before `step` wrote them after they were loaded).
TW_HD void take_written(const Step& step, const Written& written, Operands& o) {
  written.take(step.in[0], o.in[0]);
  written.take(step.in[1], o.in[1]);
  written.take(step.g, o.g);
  written.take(step.out[0], o.slot[0]);
  written.take(step.out[1], o.slot[1]);
}

// A contribution c reaching slot k of a step as the tape's per-node accumulate would land it; `existing`
// is the slot's value before the step (out[1] == out[0] when both inputs are one node: then it is
// what out[0] just received).
template <class T>
TW_HD void write_slot(const Step& step, int k, std::int64_t i, T c, Bits existing, Written& written) {
  T v = c;  // SlotWrite::store
  switch (step.write[k]) {
    case SlotWrite::none: return;
    case SlotWrite::store: break;
    case SlotWrite::store_dense: v = c + T(0); break;
    case SlotWrite::accumulate:
      if (k == 1) written.take(step.out[1], existing);
      v = from_bits<T>(existing) + c;
      break;
  }
  static_cast<T*>(step.out[k])[i] = v;
  written.at[k] = step.out[k];
  written.value[k] = to_bits(v);
}

// A forward or VJP step of one node at element i, through the functors the per-node kernels run.
template <Op op, class T>
TW_HD Written run_node_step(const Step& step, std::int64_t i, const Operands& o) {
  constexpr int arity = kArity<op>;
  const math::Params<T> p = params_of<T>(Scalars{step.s0, step.s1});
  T in[3];  // the inputs, then (vjp) g: the operand order of ForwardFn and VjpFn
  in[0] = from_bits<T>(o.in[0]);
  if constexpr (arity == 2) in[1] = from_bits<T>(o.in[1]);
  Written written;
  if (step.kind == StepKind::forward) {
    T y[1];
    ForwardFn<op, T>{p}(in, y);
    static_cast<T*>(step.out[0])[i] = y[0];
    written.at[0] = step.out[0];
    written.value[0] = to_bits(y[0]);
    return written;
  }
  in[arity] = from_bits<T>(o.g);
  T d[arity];
  VjpFn<op, T>{p}(in, d);
  for (int k = 0; k < arity; ++k) write_slot(step, k, i, d[k], o.slot[k], written);
  return written;
}

template <class T>
TW_HD Written run_step_typed(const Step& step, std::int64_t i, const Operands& o) {
  Written written;
  switch (step.kind) {
    case StepKind::pass:
      write_slot(step, 0, i, from_bits<T>(o.in[0]), o.slot[0], written);
      return written;
    case StepKind::zero:
      static_cast<T*>(step.out[0])[i] = T(0);
      written.at[0] = step.out[0];
      written.value[0] = to_bits(T(0));
      return written;
    case StepKind::forward:
    case StepKind::vjp:
      break;
  }
  switch (step.op) {
#define TAPEWISE_OP(name, ...) \
  case Op::name:               \
    return run_node_step<Op::name, T>(step, i, o);
#include <tapewise/ops.def>
#undef TAPEWISE_OP
  }
  return written;
}

// One step at element i (i < step.numel), from its operands; returns what it wrote.
TW_HD Written run_step_at(const Step& step, std::int64_t i, const Operands& o) {
  if (step.dtype == DType::float32) return run_step_typed<float>(step, i, o);
  return run_step_typed<double>(step, i, o);
}

// Every step of a program at element i, in order; a step shorter than i is skipped. Elements are
// independent (each step reads and writes element i only), so a runner may cover them in any
// order or in parallel, as long as each element sees the steps in order. The next step's operands
// are loaded before the current step runs, and whatever the current step writes replaces them: a
// chain of nodes passes its values in registers, and the loads of a backward's forward values
// overlap the previous step's math. Same values, same order, so the same bits as step by step.
// Operands the current step writes are not loaded at all (overwritten_by): loading them first and
// replacing them was 8% faster on the H200's chain (1.34 against 1.45 us/node at 2^12,
// results/2026-12-01_H200_d762d428001f/chain_interpreters.txt) but read memory before its first
// write, which compute-sanitizer's initcheck reports: a clean initcheck is worth more.
TW_HD void run_steps_at(const Step* steps, std::int64_t count, std::int64_t i) {
  Operands next{};
  if (count > 0 && i < steps[0].numel) next = load_operands(steps[0], i);
  for (std::int64_t k = 0; k < count; ++k) {
    const Operands current = next;
    const bool runs = i < steps[k].numel;
    const bool next_runs = k + 1 < count && i < steps[k + 1].numel;
    if (next_runs) next = load_operands(steps[k + 1], i, runs ? overwritten_by(steps[k]) : Overwritten{});
    if (!runs) continue;
    const Written written = run_step_at(steps[k], i, current);
    if (next_runs) take_written(steps[k + 1], written, next);
  }
}

#if defined(__CUDACC__)
// The CUDA runner (program_cuda.cu): queues the program on `stream`, kStepsPerLaunch steps per
// launch; returns the first launch error.
cudaError_t launch_program(cudaStream_t stream, const Program& program);
#endif

}  // namespace tapewise::detail

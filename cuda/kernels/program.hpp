// cuda/kernels/program.hpp — a tape program: a flat list of steps (the deferred forwards of small nodes, or
// a whole backward pass) and the per-element interpreter both runners execute (a host loop on the
// CPU backend, one kernel per launch chunk on CUDA). Not a new formula: each step calls the
// per-node path's own functors (dispatch.hpp: ForwardFn, VjpFn) and accumulates as the tape's
// per-node accumulate does, in the same order, so a program gives the per-node path's bits.
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

template <class T>
TW_HD void write_slot(SlotWrite how, void* slot, std::int64_t i, T c) {
  T* s = static_cast<T*>(slot);
  switch (how) {
    case SlotWrite::none: return;
    case SlotWrite::store: s[i] = c; return;
    case SlotWrite::store_dense: s[i] = c + T(0); return;
    case SlotWrite::accumulate: s[i] = s[i] + c; return;
  }
}

// A forward or VJP step of one node at element i, through the functors the per-node kernels run.
template <Op op, class T>
TW_HD void run_node_step(const Step& step, std::int64_t i) {
  constexpr int arity = kArity<op>;
  const math::Params<T> p = params_of<T>(Scalars{step.s0, step.s1});
  T in[3];  // the inputs, then (vjp) g: the operand order of ForwardFn and VjpFn
  in[0] = static_cast<const T*>(step.in[0])[i];
  if constexpr (arity == 2) in[1] = static_cast<const T*>(step.in[1])[i];
  if (step.kind == StepKind::forward) {
    T y[1];
    ForwardFn<op, T>{p}(in, y);
    static_cast<T*>(step.out[0])[i] = y[0];
    return;
  }
  in[arity] = static_cast<const T*>(step.g)[i];
  T d[arity];
  VjpFn<op, T>{p}(in, d);
  for (int k = 0; k < arity; ++k) write_slot(step.write[k], step.out[k], i, d[k]);
}

template <class T>
TW_HD void run_step_typed(const Step& step, std::int64_t i) {
  switch (step.kind) {
    case StepKind::pass:
      write_slot(step.write[0], step.out[0], i, static_cast<const T*>(step.in[0])[i]);
      return;
    case StepKind::zero:
      static_cast<T*>(step.out[0])[i] = T(0);
      return;
    case StepKind::forward:
    case StepKind::vjp:
      break;
  }
  switch (step.op) {
#define TAPEWISE_OP(name, ...) \
  case Op::name:               \
    return run_node_step<Op::name, T>(step, i);
#include <tapewise/ops.def>
#undef TAPEWISE_OP
  }
}

// One step at element i (i < step.numel).
TW_HD void run_step_at(const Step& step, std::int64_t i) {
  if (step.dtype == DType::float32) {
    run_step_typed<float>(step, i);
  } else {
    run_step_typed<double>(step, i);
  }
}

// Every step of a program at element i, in order; a step shorter than i is skipped. Elements are
// independent (each step reads and writes element i only), so a runner may cover them in any
// order or in parallel, as long as each element sees the steps in order.
TW_HD void run_steps_at(const Step* steps, std::int64_t count, std::int64_t i) {
  for (std::int64_t k = 0; k < count; ++k)
    if (i < steps[k].numel) run_step_at(steps[k], i);
}

#if defined(__CUDACC__)
// The CUDA runner (program_cuda.cu): queues the program on `stream`, kStepsPerLaunch steps per
// launch; returns the first launch error.
cudaError_t launch_program(cudaStream_t stream, const Program& program);
#endif

}  // namespace tapewise::detail

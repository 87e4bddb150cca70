// cuda/kernels/dispatch.hpp — turns (op, dtype) chosen at run time into a typed per-element functor and
// hands it to a backend's runner (a CUDA kernel launch or a host loop). Driven by spec/ops.def,
// so both backends dispatch every node the same way. Holds no math of its own.
#pragma once

#if !defined(__CUDACC_RTC__)
#include <iterator>
#include <span>
#include <string>

#include <tapewise/backend.hpp>
#endif

#include "op_math.cuh"

namespace tapewise::detail {

// Checks what every kernel entry point needs: matching shapes and dtypes, outputs allocated. One
// function for both math modes; everything below is the mode's own.
#if !defined(__CUDACC_RTC__)
[[nodiscard]] Result<void> check_operands(const char* what, std::span<const Buffer* const> inputs,
                            std::span<Buffer* const> outputs);
#endif

inline namespace TW_MATH_NS {  // the math mode's own symbols (scalar_math.cuh)

template <Op op>
inline constexpr int kArity = kOps[static_cast<int>(op)].arity;

template <Op op, class T>
struct ForwardFn {
  static constexpr int nin = kArity<op>;
  static constexpr int nout = 1;
  math::Params<T> p;
  TW_HD void operator()(const T* in, T* out) const {
    if constexpr (nin == 1) {
      out[0] = math::OpMath<op>::forward(p, in[0]);
    } else {
      out[0] = math::OpMath<op>::forward(p, in[0], in[1]);
    }
  }
};

template <Op op, class T>
struct VjpFn {
  static constexpr int nin = kArity<op> + 1;  // inputs, then g
  static constexpr int nout = kArity<op>;
  math::Params<T> p;
  TW_HD void operator()(const T* in, T* out) const {
    if constexpr (nout == 1) {
      out[0] = math::OpMath<op>::vjp(p, in[0], in[1]);
    } else {
      const math::Pair<T> d = math::OpMath<op>::vjp(p, in[0], in[1], in[2]);
      out[0] = d.a;
      out[1] = d.b;
    }
  }
};

// A prim reads exactly its `nin` buffer inputs: no load of memory whose value it would discard (a
// fill's output is not yet written; compute-sanitizer's initcheck would rightly flag reading it).
template <class T, int N>
struct PrimFn {
  static constexpr int nin = N;
  static constexpr int nout = 1;
  Prim prim;
  T c;
  TW_HD void operator()(const T* in, T* out) const {
    out[0] = math::prim_apply(prim, c, N > 0 ? in[0] : T(0), N > 1 ? in[1] : T(0), N > 2 ? in[2] : T(0));
  }
};

template <class T>
TW_HD math::Params<T> params_of(const Scalars& s) {
  return {static_cast<T>(s.s0), static_cast<T>(s.s1)};
}

// The runners of the backends; kernels compiled at run time (NVRTC) need only the functors above.
#if !defined(__CUDACC_RTC__)
// Runner: template <class Fn, class T> Result<void> run(const Fn&, std::int64_t n,
//                                                        const T* const* in, T* const* out, const char* what)
template <class T, class Runner>
[[nodiscard]] Result<void> dispatch_forward(Runner& runner, Op op, const Scalars& s, std::int64_t n,
                              const T* const* in, T* const* out) {
  switch (op) {
#define TAPEWISE_OP(name, ...) \
  case Op::name:               \
    return runner.run(ForwardFn<Op::name, T>{params_of<T>(s)}, n, in, out, #name " forward");
#include <tapewise/ops.def>
#undef TAPEWISE_OP
  }
  return fail(ErrorCode::InvalidArgument, "no kernel for " + op_label(op));
}

template <class T, class Runner>
[[nodiscard]] Result<void> dispatch_vjp(Runner& runner, Op op, const Scalars& s, std::int64_t n,
                          const T* const* in, T* const* out) {
  switch (op) {
#define TAPEWISE_OP(name, ...) \
  case Op::name:               \
    return runner.run(VjpFn<Op::name, T>{params_of<T>(s)}, n, in, out, #name " fused vjp");
#include <tapewise/ops.def>
#undef TAPEWISE_OP
  }
  return fail(ErrorCode::InvalidArgument, "no kernel for " + op_label(op));
}

// A prim with its kind fixed at compile time, for runners that loop over the elements on the host: the
// prim's switch folds away and the loop vectorizes (the CPU backend's copy ran at a third of memcpy's
// speed through PrimFn's switch per element). Each element's operation is PrimFn's.
template <Prim P, class T>
struct FixedPrimFn {
  static constexpr int nin = prim_arity(P);
  static constexpr int nout = 1;
  T c;
  TW_HD void operator()(const T* in, T* out) const {
    out[0] = math::prim_apply(P, c, nin > 0 ? in[0] : T(0), nin > 1 ? in[1] : T(0), nin > 2 ? in[2] : T(0));
  }
};

template <class Runner>
concept FixesPrims = Runner::kFixesPrims;

// Calls body.template operator()<P>() for the prim p (the last prim, fill, for a value out of the enum,
// as PrimFn's switch does).
template <std::size_t I = 0, class Body>
decltype(auto) with_fixed_prim(Prim p, Body&& body) {
  if constexpr (I + 1 < std::size(kPrims)) {
    if (p != kPrims[I]) return with_fixed_prim<I + 1>(p, body);
  }
  return body.template operator()<kPrims[I]>();
}

// A prim over n elements: PrimFn with the buffer inputs the prim reads and its scalar rounded once to T
// (FixedPrimFn where the runner takes it).
template <class T, class Runner>
[[nodiscard]] Result<void> dispatch_prim(Runner& runner, Prim p, double c, int nin, std::int64_t n, const T* const* in,
                                         T* const* out) {
  const T cT = static_cast<T>(c);
  if constexpr (FixesPrims<Runner>) {
    return with_fixed_prim(p, [&]<Prim P>() { return runner.run(FixedPrimFn<P, T>{cT}, n, in, out, prim_name(P)); });
  } else {
    switch (nin) {
      case 0: return runner.run(PrimFn<T, 0>{p, cT}, n, in, out, prim_name(p));
      case 1: return runner.run(PrimFn<T, 1>{p, cT}, n, in, out, prim_name(p));
      case 2: return runner.run(PrimFn<T, 2>{p, cT}, n, in, out, prim_name(p));
      default: return runner.run(PrimFn<T, 3>{p, cT}, n, in, out, prim_name(p));
    }
  }
}

// Calls fn.template operator()<T>() for the buffers' dtype.
template <class F>
[[nodiscard]] Result<void> with_dtype(DType d, F&& fn) {
  switch (d) {
    case DType::float32: return fn.template operator()<float>();
    case DType::float64: return fn.template operator()<double>();
    case DType::bfloat16: return fn.template operator()<bfloat16>();
    case DType::float16: return fn.template operator()<float16>();
  }
  return fail(ErrorCode::InvalidArgument, "unknown dtype " + std::to_string(static_cast<int>(d)));
}

// Runs forward / fused VJP / prim on any runner, from buffers.
template <class Runner>
[[nodiscard]] Result<void> run_forward(Runner& runner, Op op, const Scalars& s,
                         std::span<const Buffer* const> inputs, Buffer& out) {
  const OpInfo& info = op_info(op);
  if (static_cast<int>(inputs.size()) != info.arity)
    return fail(ErrorCode::InvalidArgument, std::string(info.name) + ": wrong number of inputs");
  Buffer* outs[1] = {&out};
  if (auto ok = check_operands(info.name, inputs, outs); !ok) return ok;
  return with_dtype(out.dtype(), [&]<class T>() -> Result<void> {
    const T* in[2] = {};
    for (std::size_t i = 0; i < inputs.size(); ++i) in[i] = static_cast<const T*>(inputs[i]->data());
    T* o[1] = {static_cast<T*>(out.data())};
    return dispatch_forward<T>(runner, op, s, out.numel(), in, o);
  });
}

template <class Runner>
[[nodiscard]] Result<void> run_vjp(Runner& runner, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                     const Buffer& g, std::span<Buffer* const> grads) {
  const OpInfo& info = op_info(op);
  if (static_cast<int>(inputs.size()) != info.arity || static_cast<int>(grads.size()) != info.arity)
    return fail(ErrorCode::InvalidArgument, std::string(info.name) + ": wrong number of operands");
  const Buffer* all_in[3] = {};
  for (std::size_t i = 0; i < inputs.size(); ++i) all_in[i] = inputs[i];
  all_in[inputs.size()] = &g;
  if (auto ok = check_operands(info.name, {all_in, inputs.size() + 1}, grads); !ok) return ok;
  return with_dtype(g.dtype(), [&]<class T>() -> Result<void> {
    const T* in[3] = {};
    for (std::size_t i = 0; i < inputs.size() + 1; ++i) in[i] = static_cast<const T*>(all_in[i]->data());
    T* o[2] = {};
    for (std::size_t i = 0; i < grads.size(); ++i) o[i] = static_cast<T*>(grads[i]->data());
    return dispatch_vjp<T>(runner, op, s, g.numel(), in, o);
  });
}

template <class Runner>
[[nodiscard]] Result<void> run_prim(Runner& runner, Prim p, double c, std::span<const Buffer* const> inputs,
                      Buffer& out) {
  if (static_cast<int>(inputs.size()) != prim_arity(p))
    return fail(ErrorCode::InvalidArgument, std::string(prim_name(p)) + ": wrong number of inputs");
  Buffer* outs[1] = {&out};
  if (auto ok = check_operands(prim_name(p), inputs, outs); !ok) return ok;
  return with_dtype(out.dtype(), [&]<class T>() -> Result<void> {
    const T* in[3] = {};
    for (std::size_t i = 0; i < inputs.size(); ++i) in[i] = static_cast<const T*>(inputs[i]->data());
    T* o[1] = {static_cast<T*>(out.data())};
    return dispatch_prim<T>(runner, p, c, static_cast<int>(inputs.size()), out.numel(), in, o);
  });
}

#endif  // !defined(__CUDACC_RTC__)

}  // inline namespace TW_MATH_NS
}  // namespace tapewise::detail

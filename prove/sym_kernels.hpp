// prove/sym_kernels.hpp — how the kernels' 16-bit dispatch (cuda/kernels/scalar_math.cuh) sees the
// prover's Sym16: as a 16-bit T. Include it after the kernel headers, before any code that runs them.
#pragma once

#include "sym.hpp"

#include "kernels/scalar_math.cuh"

namespace tapewise {

// Sym16 is a 16-bit format: every `if constexpr (kIs16Bit<T>)` in the kernels takes its 16-bit branch
// with it, as with bfloat16 and float16. Such a branch computes on the element's bits or on
// static_cast<float>(x), neither of which a symbolic value has: each one the prover runs is overloaded
// below or in Sym16 (operators, lm_*, sign_bit), and a new one fails (x.bits does not compile;
// static_cast<float> of a symbolic value is a model error) instead of being proved on the wider branch.
template <class Fmt>
inline constexpr bool kIs16Bit<prove::Sym16<Fmt>> = true;

}  // namespace tapewise

namespace tapewise::prove {

// sigmoid's 16-bit branch, `T(sigmoid(static_cast<float>(x)))` (one ATen op: float32's three
// roundings, then one to 16 bits), with the symbolic float in place of float: the float32 staging is
// the kernels' own, math::sigmoid<Sym<float>>. Found by argument-dependent lookup; more specialized
// than math::sigmoid<T>, so it is the one every kernel calls.
template <class Fmt>
Sym16<Fmt> sigmoid(Sym16<Fmt> x) {
  return Sym16<Fmt>::round(math::sigmoid(widen(x)));
}

}  // namespace tapewise::prove

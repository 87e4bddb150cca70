// cuda/kernels/prim.hpp — the primitive buffer ops the staged forms are written in (internal to the
// library and its in-tree tools): each is one ATen-equivalent op with one rounding per element.
#pragma once

#include <cstdint>

namespace tapewise {

/// The primitive buffer ops the staged forms (spec/stagings.def) are written in: each is one
/// ATen-equivalent op with one rounding per element in the dtype. `c` is the prim's scalar, rounded
/// once to the dtype. A comparison writes a mask, 1 where it holds and +0 where not (NaN compares
/// false); `where` selects on a mask that is not zero.
enum class Prim : std::uint8_t {
  // out = f(x)
  copy, neg, abs, sign, exp, log, sin, cos, tanh, sigmoid, sigmoid_split, reciprocal, sqrt,
  // out = f(x, c)
  mul_scalar, add_scalar, rsub_scalar,
  // out = f(a, b)
  add, sub, mul, div, fmax, fmin, greater, less, less_equal,
  // out = mask != 0 ? a : b
  where,
  // out = c
  fill,
};
int prim_arity(Prim p);  ///< buffer inputs: 0, 1, 2 or 3 (where)
/// The prim's name, as the staged column of spec/ops.def writes it.
const char* prim_name(Prim p);

}  // namespace tapewise

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
/// Buffer inputs: 0, 1, 2 or 3 (where).
constexpr int prim_arity(Prim p) {
  switch (p) {
    case Prim::fill: return 0;
    case Prim::add: case Prim::sub: case Prim::mul: case Prim::div: case Prim::fmax:
    case Prim::fmin: case Prim::greater: case Prim::less: case Prim::less_equal: return 2;
    case Prim::where: return 3;
    default: return 1;
  }
}
/// Every prim, in the enum's order: what a switch over a prim known only at run time walks.
constexpr Prim kPrims[] = {Prim::copy, Prim::neg, Prim::abs, Prim::sign, Prim::exp, Prim::log, Prim::sin,
                           Prim::cos, Prim::tanh, Prim::sigmoid, Prim::sigmoid_split, Prim::reciprocal,
                           Prim::sqrt, Prim::mul_scalar, Prim::add_scalar, Prim::rsub_scalar, Prim::add,
                           Prim::sub, Prim::mul, Prim::div, Prim::fmax, Prim::fmin, Prim::greater, Prim::less,
                           Prim::less_equal, Prim::where, Prim::fill};
constexpr bool prims_listed_in_order() {
  for (int i = 0; i < static_cast<int>(sizeof kPrims / sizeof kPrims[0]); ++i)
    if (static_cast<int>(kPrims[i]) != i) return false;
  return kPrims[sizeof kPrims / sizeof kPrims[0] - 1] == Prim::fill;  // the enum's last
}
static_assert(prims_listed_in_order(), "kPrims lists every prim, in the enum's order");
/// The prim's name, as the staged column of spec/ops.def writes it.
const char* prim_name(Prim p);

}  // namespace tapewise
